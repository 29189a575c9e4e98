"""The durable budget ledger: how much of each dataset's privacy budget has been spent.

The ledger is a SQLite file (stdlib :mod:`sqlite3`) with three tables (schema version 4; the
statements are in :mod:`privhist.accounting.ledger_schema`)::

    meta(key TEXT PRIMARY KEY, value TEXT)            -- schema_version, ledger_head
    datasets(id TEXT PRIMARY KEY, epsilon_total REAL, delta_total REAL, created TEXT,
             unit TEXT,                               -- 'record' or 'user'
             regime TEXT, head TEXT)                  -- 'basic' or 'renyi'; chain head
    spends(id INTEGER PRIMARY KEY, dataset TEXT REFERENCES datasets, epsilon REAL,
           delta REAL, mechanism TEXT, created TEXT, note TEXT,
           neighbouring TEXT,                         -- JSON of Neighbouring.to_dict(), or ''
           event TEXT, rule TEXT, chain TEXT)         -- privacy event; admitting rule; chain

Damage is refused, never read as fewer spends. A ledger that forgot a spend would admit an
overspend, so every operation first runs SQLite's structural check (``PRAGMA quick_check``, which
finds a page lost, cut short or overwritten) and then checks the hash chain over the spends
(:mod:`privhist.accounting.ledger_schema`): the ledger's head hash must cover the registered
datasets, and each dataset's spends must lead from its registration to its head. Any mismatch
raises :class:`~privhist.core.errors.LedgerError` with one line; nothing is repaired in place.
``tests/accounting/test_ledger_damage.py`` zeroes and truncates every page of a ledger in turn.
Files of versions 1 to 3 (without the chain) are refused with the command that upgrades them,
:meth:`Ledger.upgrade` (``privhist budget upgrade``).

Privacy unit. A dataset's total budget is meaningful for one unit of privacy, fixed when the
dataset is registered: ``'record'`` (datasets that differ in one record, added, removed or
replaced) or ``'user'`` (datasets that differ in everything one user holds). Each spend records
the neighbouring relation its guarantee is for. A ``'user'`` dataset refuses a spend whose
relation is not user-level, since a record-level guarantee does not protect a user who holds
several records; a ``'record'`` dataset accepts every relation, since a user-level guarantee
implies the record-level one (a record belongs to one user). The ledger checks the unit only; it
does not convert a guarantee between add/remove and replace.

Version 3 added ``datasets.regime`` (``'basic'`` or ``'renyi'``), ``spends.event`` (the
release's privacy event as versioned JSON, :mod:`privhist.accounting.events`; empty for older
spends) and ``spends.rule`` (the rule that admitted it); version 2 the privacy unit and relation
(a version-1 dataset has unit ``'record'``, its spends an unspecified, record-level relation).

Spends compose by a privacy filter fixed per dataset before its first release
(:mod:`privhist.accounting.filters`, where the theorems are stated). In the default ``'basic'``
regime they compose by basic composition (Dwork and Roth 2014, Theorem 3.16; valid for
adaptively chosen releases, Rogers, Roth, Ullman and Vadhan 2016): a dataset's spent budget is
the sum of the epsilons and the sum of the deltas of its spends, and a release is refused when
``spent + requested`` would exceed the total in either coordinate. In the ``'renyi'`` regime
every release must carry a Renyi curve, and the Renyi filter (Feldman and Zrnic 2021) or
basic composition of pure epsilons admits it; the rule is recorded with the spend.

Exact sums. Budgets are stored as floats, and every float is an exact rational number. The check
sums the spends as :class:`fractions.Fraction` values of the stored floats and compares exactly
with the total, with no tolerance: a ledger never records more than its total. The exact rule can
surprise: ``Fraction(0.1)`` is slightly above one tenth, so ten spends of ``0.1`` exceed a total
of ``1.0`` and the tenth is refused, while four spends of ``0.25`` (exactly representable) fit
``1.0`` exactly. Budgets that are sums of binary fractions (0.5, 0.25, 0.125, ...) divide a total
without remainder. For display, :attr:`LedgerStatus.spent` is rounded up and
:attr:`LedgerStatus.remaining` rounded down to floats, so ``budget <= status.remaining`` never
admits a spend that the exact check refuses; :meth:`LedgerStatus.allows` is the exact rule.

Atomicity. :meth:`Ledger.spend` is a context manager. Entering it starts a ``BEGIN IMMEDIATE``
transaction, which takes SQLite's write lock, so that two processes spending against one dataset
are serialised: the unit check, the budget check and the recording of the spend happen under the
same lock, and no two releases can both pass a check that only one of them fits. The spend row is
written at once but only committed when the ``with`` body finishes normally; if the body raises,
the transaction is rolled back and nothing is recorded. The lock is held while the body runs, so
other processes wait (up to ``timeout`` seconds) rather than race.

Nothing published without a recorded spend. A process killed inside the ``with`` body (SIGKILL,
power loss) never reaches COMMIT: the spend is rolled back when the file is next opened (SQLite's
rollback journal), so the body must leave nothing readable behind. The body therefore draws and
encodes the release in memory only; the release is written to a file, or returned, after the
``with`` statement, once COMMIT has returned, and with ``synchronous=FULL`` (set on every
connection) the spend is on disk by then. A kill after the COMMIT and before the file is complete
keeps the spend and loses the release, which errs on the side of privacy.
:meth:`privhist.session.Session.charged` follows this order, and ``tests/hardening/test_kill.py``
kills a release at each step (:mod:`privhist.core.faults`) and finds no readable release without
its spend. Writing a file inside the body, even a hidden temporary one, would break this.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import platformdirs

from privhist.accounting.composition import ApproxDPEvent, PrivacyEvent
from privhist.accounting.events import ZcdpEvent, event_from_json, event_to_json
from privhist.accounting.filters import Admission, RenyiView, renyi_admission, renyi_view
from privhist.accounting.ledger_schema import (
    _SCHEMA,
    COLUMNS,
    DATASET_HASHED,
    SCHEMA_VERSION,
    SPEND_HASHED,
    UPGRADES,
    BudgetAmount,
    chain_link,
    dataset_genesis,
    decode_neighbouring,
    encode_neighbouring,
    ledger_head,
)
from privhist.core.budget import Budget
from privhist.core.errors import BudgetExceededError, LedgerError, ValidationError
from privhist.core.faults import checkpoint
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.validation import float_down, float_up

__all__ = [
    "DEFAULT_TIMEOUT",
    "SCHEMA_VERSION",
    "BudgetAmount",
    "Ledger",
    "LedgerStatus",
    "PrivacyUnit",
    "PrivacyUnitMismatchError",
    "SpendRecord",
    "SpendTransaction",
    "UnknownDatasetError",
    "check_dataset_name",
    "default_ledger_path",
    "init_ledger",
]

DEFAULT_TIMEOUT = 30.0


def default_ledger_path() -> Path:
    """``<user data dir>/privhist/ledger.sqlite`` (platformdirs), creating the directory.

    Returns:
        The path of the default ledger file.
    """
    directory = Path(platformdirs.user_data_dir("privhist"))
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "ledger.sqlite"


def _init_hint(path: Path) -> str:
    return (
        f"`privhist budget init --dataset DATASET --epsilon EPSILON --delta DELTA --ledger {path}`"
    )


class PrivacyUnit(StrEnum):
    """What a dataset's total budget protects.

    ``RECORD``: one record (added, removed or replaced); ``USER``: everything one user holds.
    """

    RECORD = "record"
    USER = "user"

    def admits(self, neighbouring: Neighbouring | None) -> bool:
        """Whether a guarantee for ``neighbouring`` spends this unit's budget.

        ``None`` (relation not stated) counts as record-level.

        >>> PrivacyUnit.USER.admits(Neighbouring.add_remove())
        False
        >>> PrivacyUnit.RECORD.admits(Neighbouring.user(3))
        True
        """
        if self is PrivacyUnit.RECORD:
            return True
        return neighbouring is not None and neighbouring.relation is Relation.USER


class UnknownDatasetError(LedgerError):
    """The dataset has no entry in the ledger."""

    def __init__(self, dataset: str, path: Path) -> None:
        self.dataset = dataset
        self.path = path
        super().__init__(
            f"dataset '{dataset}' is not in the ledger {path}; register it first with "
            f"`privhist budget init --dataset {dataset} --epsilon EPSILON --delta DELTA "
            f"--ledger {path}`"
        )


class PrivacyUnitMismatchError(LedgerError):
    """A release's neighbouring relation does not protect the dataset's privacy unit.

    Attributes:
        dataset: The dataset id.
        unit: The dataset's privacy unit.
        neighbouring: The relation of the refused spend (``None``: not stated, record-level).
    """

    def __init__(self, dataset: str, unit: PrivacyUnit, neighbouring: Neighbouring | None) -> None:
        self.dataset = dataset
        self.unit = unit
        self.neighbouring = neighbouring
        if neighbouring is None:
            relation = "unspecified (taken as record-level)"
        else:
            relation = f"'{neighbouring.relation.value}' ({neighbouring.describe()})"
        super().__init__(
            f"release refused for dataset '{dataset}': its budget is for privacy unit "
            f"'{unit.value}', but the release's guarantee is for relation {relation}; a "
            f"record-level guarantee does not protect a user who holds several records, so use a "
            f"user-level release (bounded contributions per user)"
        )


@dataclass(frozen=True)
class SpendRecord:
    """One recorded release.

    ``neighbouring`` is the relation the release's guarantee is for; ``None`` when the spend did
    not state one (recorded against a record-level dataset, or before schema version 2).
    """

    id: int
    dataset: str
    epsilon: float
    delta: float
    mechanism: str
    created: str
    note: str
    neighbouring: Neighbouring | None = None
    event: str = ""
    rule: str = "basic"

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def privacy_event(self) -> PrivacyEvent:
        """The stored event; a spend without one (recorded before schema version 3) stands for
        its (epsilon, delta) guarantee."""
        if self.event:
            return event_from_json(self.event)
        return ApproxDPEvent(self.epsilon, self.delta) if self.epsilon > 0 else ZcdpEvent(0.0)


@dataclass(frozen=True)
class LedgerStatus:
    """A dataset's total, spent and remaining budget, its privacy unit and its spends.

    ``spent`` is the exact sum of the spends rounded up to a float, ``remaining`` the exact
    ``total - spent`` (at least 0) rounded down; :attr:`spent_exact` holds the exact sums.
    Spends are listed oldest first.
    """

    dataset: str
    total: Budget
    spent: BudgetAmount
    remaining: BudgetAmount
    spends: tuple[SpendRecord, ...]
    created: str
    unit: PrivacyUnit = PrivacyUnit.RECORD
    regime: str = "basic"

    @property
    def spent_exact(self) -> tuple[Fraction, Fraction]:
        """The exact sums (epsilon, delta) of the spends' stored floats."""
        return _exact_sums(self.spends)

    def admission(self, budget: Budget, event: PrivacyEvent | None = None) -> Admission:
        """The dataset's filter on a spend of ``budget`` with ``event`` (by default its
        (epsilon, delta)): basic composition in the ``'basic'`` regime, the Renyi regime's rules
        otherwise (:mod:`privhist.accounting.filters`)."""
        if self.regime == "renyi":
            spent = [s.privacy_event for s in self.spends]
            chosen = ApproxDPEvent.from_budget(budget) if event is None else event
            return renyi_admission(spent, chosen, self.total)
        ok = _fits(self.total, self.spent_exact, budget)
        return Admission(ok, "basic" if ok else None, "epsilons and deltas add")

    def renyi_view(self) -> RenyiView | None:
        """In the ``'renyi'`` regime, what remains as the Renyi filter sees it
        (:func:`~privhist.accounting.filters.renyi_view`); None in the ``'basic'`` regime, where
        :attr:`remaining` says it."""
        if self.regime != "renyi":
            return None
        return renyi_view([s.privacy_event for s in self.spends], self.total)

    def allows(self, budget: Budget, event: PrivacyEvent | None = None) -> bool:
        """Whether a spend of ``budget`` (and ``event``) passes the ledger's exact check.

        The same rule as :meth:`Ledger.spend`; in the basic regime ``sum of spends + budget <=
        total`` in both coordinates, computed exactly on the floats' rational values.
        """
        return self.admission(budget, event).admitted

    def admits(self, neighbouring: Neighbouring | None) -> bool:
        """Whether a spend for ``neighbouring`` passes the ledger's privacy-unit check."""
        return self.unit.admits(neighbouring)

    def check(
        self,
        budget: Budget,
        neighbouring: Neighbouring | None = None,
        event: PrivacyEvent | None = None,
    ) -> Admission:
        """Raise unless a spend of ``budget`` for ``neighbouring`` would be recorded; return
        the admission (with the rule that admits it).

        Raises:
            PrivacyUnitMismatchError: The relation does not protect the dataset's unit.
            BudgetExceededError: The budget does not fit what remains.
        """
        if not self.admits(neighbouring):
            raise PrivacyUnitMismatchError(self.dataset, self.unit, neighbouring)
        admission = self.admission(budget, event)
        if not admission.admitted:
            reason = admission.detail if self.regime == "renyi" else None
            note = None
            if reason is None and budget <= self.remaining.shown():
                rem = self.remaining
                note = (
                    f"exactly epsilon {rem.epsilon!r} and delta {rem.delta!r} remain; the ledger "
                    "adds the stored floats exactly"
                )
            raise BudgetExceededError(self.dataset, budget, self.remaining, reason, note)
        return admission


def _exact_sums(spends: tuple[SpendRecord, ...]) -> tuple[Fraction, Fraction]:
    epsilon = sum((Fraction(s.epsilon) for s in spends), Fraction(0))
    delta = sum((Fraction(s.delta) for s in spends), Fraction(0))
    return epsilon, delta


def _fits(total: Budget, spent: tuple[Fraction, Fraction], requested: Budget) -> bool:
    eps_ok = spent[0] + Fraction(requested.epsilon) <= Fraction(total.epsilon)
    delta_ok = spent[1] + Fraction(requested.delta) <= Fraction(total.delta)
    return eps_ok and delta_ok


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _check_name(value: Any, function: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(name, function, "a non-empty string", value)
    return value


#: the longest dataset id accepted, in characters
MAX_DATASET_NAME = 200


def check_dataset_name(value: Any, function: str) -> str:
    """A dataset id: non-empty text of at most :data:`MAX_DATASET_NAME` characters, none of them a
    control, format or line-separator character (Unicode categories Cc, Cf, Cs, Zl, Zp), so
    that it prints on one line as it is.

    >>> check_dataset_name("survey 2024", "budget init")
    'survey 2024'
    >>> check_dataset_name("a\\nb", "budget init")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privhist.core.errors.ValidationError: parameter 'dataset' of budget init must be a name ...

    Raises:
        ValidationError: It is not such a name.
    """
    name = _check_name(value, function, "dataset")
    if len(name) > MAX_DATASET_NAME:
        raise ValidationError(
            "dataset", function, f"at most {MAX_DATASET_NAME} characters long", value
        )
    if any(unicodedata.category(ch) in _UNPRINTABLE for ch in name):
        raise ValidationError(
            "dataset", function, "a name without control characters or line breaks", name
        )
    return name


_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _check_unit(value: Any, function: str) -> PrivacyUnit:
    if isinstance(value, str):
        try:
            return PrivacyUnit(value)
        except ValueError:
            pass
    raise ValidationError("unit", function, "'record' or 'user'", value)


class Ledger:
    """A durable record of the privacy budget spent per dataset, in a SQLite file.

    Args:
        path: The ledger file. Defaults to :func:`default_ledger_path`.
        timeout: Seconds to wait for another process's write lock before giving up with a
            :class:`~privhist.core.errors.LedgerError`.
        create: Create the file (with its parent directories) if it is missing. With ``False``
            a missing file, or one that holds no tables, is an error: commands that only read
            or spend against an existing ledger must not silently start an empty one.

    Raises:
        LedgerError: The file is missing (with ``create=False``), is damaged, is not a SQLite
            database, has another schema (an older version: see :meth:`upgrade`), cannot be
            created, or is locked beyond ``timeout`` while its schema is being created.

    Example::

        ledger = Ledger("ledger.sqlite")
        ledger.init_dataset("survey", Budget(2.0, 1e-6), unit="user")
        with ledger.spend("survey", Budget(1.0, 1e-8), mechanism="stability",
                          neighbouring=Neighbouring.user(3)):
            release = mechanism.release(counts, rng)  # runs only if the budget allows it
            data = encode_release(release, "csv")     # in memory; if anything raises, nothing
                                                      # is recorded
        write_bytes_atomic("release.csv", data)       # only once the spend is committed
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        create: bool = True,
    ):
        if not isinstance(create, bool):
            raise ValidationError("create", "Ledger", "True or False", create)
        self._locate(path, timeout)
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise LedgerError(f"cannot create the directory of ledger {self.path}: {e}") from e
        elif not self.path.exists():
            raise LedgerError(f"no ledger at {self.path}; create one with {_init_hint(self.path)}")
        self._ensure_schema(create)

    def _locate(self, path: str | os.PathLike[str] | None, timeout: float) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ValidationError("timeout", "Ledger", "a finite number >= 0", timeout)
        if not math.isfinite(timeout) or timeout < 0:
            raise ValidationError("timeout", "Ledger", "a finite number >= 0", timeout)
        self.timeout = float(timeout)
        self.path = Path(path) if path is not None else default_ledger_path()
        # after the file exists, connections never create it (a deleted ledger is an error)
        self._uri = f"{self.path.resolve().as_uri()}?mode=rw"
        if self.path.is_dir():
            raise LedgerError(f"ledger {self.path} is a directory, not a file")

    @classmethod
    def upgrade(
        cls, path: str | os.PathLike[str] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> tuple[Ledger, int]:
        """Upgrade an existing ledger file written by an older privhist to the current schema;
        ``privhist budget upgrade`` runs this.

        Opening an older file is refused (:class:`Ledger` names this command) rather than
        upgraded silently, because the upgrade chains the spends *as they stand*: it first runs
        SQLite's integrity check and refuses a damaged file, but it cannot know of a spend that
        was removed before it ran. The upgrade is one transaction (all or nothing); older
        privhist releases do not read an upgraded file.

        Returns:
            The ledger, and the schema version it had (the current one if there was nothing to
            do).

        Raises:
            LedgerError: The file is missing, damaged, not a ledger, of an unknown version, or
                locked beyond ``timeout``.
        """
        ledger = cls.__new__(cls)
        ledger._locate(path, timeout)
        if not ledger.path.exists():
            raise LedgerError(f"no ledger at {ledger.path} to upgrade")
        conn = ledger._connect()
        try:
            with ledger._errors("read the schema"):
                ledger._check_integrity(conn)
                found = ledger._verify_schema(conn)
            if found != SCHEMA_VERSION:
                ledger._migrate(conn)
        finally:
            conn.close()
        return cls(ledger.path, timeout=timeout, create=False), found

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # -- connections and error translation ------------------------------------------------------

    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        """Open the file; only with ``create`` may SQLite create it (``mode=rw`` otherwise)."""
        with self._errors("open"):
            if create:
                conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            else:
                conn = sqlite3.connect(
                    self._uri, timeout=self.timeout, isolation_level=None, uri=True
                )
        try:
            with self._errors("open"):
                conn.execute("PRAGMA foreign_keys = ON")
                # a committed spend is on disk when COMMIT returns (SQLite's default, stated
                # here because "nothing published without a recorded spend" relies on it)
                conn.execute("PRAGMA synchronous = FULL")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Translate every sqlite3 exception into a LedgerError naming the file."""
        try:
            yield
        except sqlite3.OperationalError as e:
            text = str(e)
            if "locked" in text or "busy" in text:
                raise LedgerError(
                    f"ledger {self.path} is locked by another process (waited "
                    f"{self.timeout:g} s to {action}); retry later or raise the timeout"
                ) from e
            if "unable to open" in text:
                raise LedgerError(f"cannot open ledger {self.path}: {text}") from e
            raise LedgerError(f"ledger {self.path} is unusable ({action}): {text}") from e
        except sqlite3.DatabaseError as e:
            raise LedgerError(
                f"ledger {self.path} is corrupted or not a privhist ledger ({action}): {e}"
            ) from e
        except sqlite3.Error as e:
            raise LedgerError(f"ledger {self.path}: {action} failed: {e}") from e
        except UnicodeDecodeError as e:  # flipped bytes in a text cell or in the schema
            raise LedgerError(
                f"ledger {self.path} is corrupted ({action}): text that is not UTF-8 "
                f"(byte {e.start}: {e.reason})"
            ) from e

    @staticmethod
    @contextlib.contextmanager
    def _write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` (the write lock), COMMIT on normal exit unless the body already
        ended the transaction, ROLLBACK on any exception."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if conn.in_transaction:
            conn.execute("COMMIT")

    def _ensure_schema(self, create: bool) -> None:
        conn = self._connect(create=create)
        try:
            with self._errors("read the schema"):
                if self._tables(conn):
                    self._check_current(conn)
                    return
            if not create:
                raise LedgerError(
                    f"no ledger at {self.path} (the file holds no tables); create one with "
                    f"{_init_hint(self.path)}, or, if the file held a ledger, restore it from a "
                    "backup rather than registering its datasets again"
                )
            with self._errors("create the schema"), self._write_transaction(conn):
                if self._tables(conn):  # another process created it meanwhile
                    conn.execute("ROLLBACK")
                    self._check_current(conn)
                    return
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('ledger_head', ?)", (ledger_head([]),)
                )
        finally:
            conn.close()

    def _check_current(self, conn: sqlite3.Connection) -> None:
        """The file is sound and of the current version; an older version is refused with the
        command that upgrades it."""
        self._check_integrity(conn)
        version = self._verify_schema(conn)
        if version != SCHEMA_VERSION:
            raise LedgerError(
                f"ledger {self.path} has schema version {version}, from before spends were "
                f"hash-chained; upgrade it explicitly with `privhist budget upgrade --ledger "
                f"{self.path}` (older privhist releases do not read an upgraded file)"
            )

    def _check_integrity(self, conn: sqlite3.Connection) -> None:
        """SQLite's structural check of every table and index (``PRAGMA integrity_check``): a page
        lost, cut short or overwritten, or an index that disagrees with its table, is refused here,
        before any spend is read from it."""
        rows = conn.execute("PRAGMA integrity_check").fetchall()
        if [tuple(r) for r in rows] != [("ok",)]:
            first = " ".join(str(rows[0][0]).split()) if rows else "no answer"
            more = f" (and {len(rows) - 1} more)" if len(rows) > 1 else ""
            raise LedgerError(
                f"ledger {self.path} is damaged and refused, so that no recorded spend is lost: "
                f"SQLite's integrity check reports {first!r}{more}; restore it from a backup"
            )

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Take an older file to the current version in one transaction (or not at all): the
        schema statements of each step, then the hash chain over the spends as they stand."""
        found = self._verify_schema(conn)
        action = f"upgrade the schema from version {found} to {SCHEMA_VERSION}"
        with self._errors(action), self._write_transaction(conn):
            # re-read under the write lock: another process may have upgraded meanwhile
            self._check_integrity(conn)
            version = self._verify_schema(conn)
            if version == SCHEMA_VERSION:
                return
            while version in UPGRADES:
                for statement in UPGRADES[version][1]:
                    conn.execute(statement)
                version = self._verify_schema(conn)
            if version != SCHEMA_VERSION:  # pragma: no cover
                raise LedgerError(f"ledger {self.path}: the upgrade to version 4 failed")
            datasets = conn.execute(f"SELECT {DATASET_HASHED} FROM datasets").fetchall()
            for row in datasets:
                head = dataset_genesis(tuple(row))
                spends = conn.execute(
                    f"SELECT {SPEND_HASHED} FROM spends WHERE dataset = ? ORDER BY id", (row[0],)
                ).fetchall()
                for spend in spends:
                    head = chain_link(head, tuple(spend))
                    conn.execute("UPDATE spends SET chain = ? WHERE id = ?", (head, spend[0]))
                conn.execute("UPDATE datasets SET head = ? WHERE id = ?", (head, row[0]))
            orphans = conn.execute(
                "SELECT COUNT(*) FROM spends WHERE dataset NOT IN (SELECT id FROM datasets)"
            ).fetchone()[0]
            if orphans:
                raise LedgerError(
                    f"ledger {self.path} is damaged and was not upgraded: {orphans} spend(s) "
                    "belong to no registered dataset"
                )
            self._write_ledger_head(conn)

    def _write_ledger_head(self, conn: sqlite3.Connection) -> None:
        heads = [(r[0], r[1]) for r in conn.execute("SELECT id, head FROM datasets").fetchall()]
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('ledger_head', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (ledger_head(heads),),
        )

    def _verify_ledger_head(self, conn: sqlite3.Connection) -> None:
        """The registered datasets and their heads are those the ledger's head hash covers."""
        heads = [(r[0], r[1]) for r in conn.execute("SELECT id, head FROM datasets").fetchall()]
        row = conn.execute("SELECT value FROM meta WHERE key = 'ledger_head'").fetchone()
        try:
            ok = row is not None and row[0] == ledger_head(heads)
        except TypeError:
            ok = False
        if not ok:
            raise LedgerError(
                f"ledger {self.path} is damaged and refused, so that no recorded spend is lost: "
                "its datasets do not match the ledger's head hash (a dataset or its last spend "
                "was removed, added or edited outside privhist); restore it from a backup"
            )

    @staticmethod
    def _tables(conn: sqlite3.Connection) -> set[str]:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {str(r[0]) for r in rows}

    def _verify_schema(self, conn: sqlite3.Connection) -> int:
        """Check the tables and columns of a version this privhist reads; return the version."""
        tables = self._tables(conn)
        missing = sorted(set(COLUMNS) - tables)
        if missing:
            raise LedgerError(
                f"ledger {self.path} is not a privhist ledger: missing table(s) "
                f"{', '.join(missing)}"
            )
        self._verify_columns(conn, {"meta": COLUMNS["meta"]})
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        found = None if row is None else str(row[0])
        for version, (columns, _) in UPGRADES.items():
            if found == str(version):
                self._verify_columns(conn, columns)
                return version
        if found != str(SCHEMA_VERSION):
            raise LedgerError(
                f"ledger {self.path} has schema version {found or 'none'}; this privhist reads "
                f"version {SCHEMA_VERSION} (and upgrades versions 1 to 3 on request)"
            )
        self._verify_columns(conn, COLUMNS)
        return SCHEMA_VERSION

    def _verify_columns(self, conn: sqlite3.Connection, expected: dict[str, set[str]]) -> None:
        for table, names in expected.items():
            columns = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}
            if not names <= columns:
                raise LedgerError(
                    f"ledger {self.path} has a wrong schema: table {table} lacks column(s) "
                    f"{', '.join(sorted(names - columns))}"
                )

    # -- public API -------------------------------------------------------------------------------

    def init_dataset(
        self,
        dataset: str,
        total: Budget,
        *,
        unit: PrivacyUnit | str = PrivacyUnit.RECORD,
        exist_ok: bool = False,
        regime: str = "basic",
    ) -> None:
        """Register ``dataset`` with its total budget and the privacy unit the total is for.

        Args:
            dataset: The dataset id.
            total: Its total budget.
            unit: ``"record"`` (one record added, removed or replaced) or ``"user"`` (everything
                one user holds). A ``"user"`` dataset accepts only user-level releases.
            exist_ok: Do not fail if the dataset is already registered *with the same total and
                unit*.
            regime: How spends compose (:mod:`privhist.accounting.filters`): ``"basic"``
                (epsilons and deltas add; any release) or ``"renyi"`` (releases with Renyi
                curves only, composed by a Renyi filter). Fixed before the first release.

        Raises:
            LedgerError: The dataset exists (unless ``exist_ok``) or exists with another total or
                unit.
            ValidationError: ``dataset`` is empty, ``total`` is not a Budget or ``unit`` is not
                ``"record"`` or ``"user"``.
        """
        function = "Ledger.init_dataset"
        check_dataset_name(dataset, function)
        if not isinstance(total, Budget):
            raise ValidationError("total", function, "a Budget", total)
        unit = _check_unit(unit, function)
        if regime not in ("basic", "renyi"):
            raise ValidationError("regime", function, "'basic' or 'renyi'", regime)
        conn = self._connect()
        try:
            with self._errors("register a dataset"), self._write_transaction(conn):
                row = conn.execute(
                    "SELECT epsilon_total, delta_total, unit FROM datasets WHERE id = ?",
                    (dataset,),
                ).fetchone()
                if row is not None:
                    conn.execute("ROLLBACK")
                    existing = Budget(float(row[0]), float(row[1]))
                    if existing != total:
                        raise LedgerError(
                            f"dataset '{dataset}' is already in the ledger {self.path} with "
                            f"total {existing}; a total, once set, is not changed"
                        )
                    if str(row[2]) != unit.value:
                        raise LedgerError(
                            f"dataset '{dataset}' is already in the ledger {self.path} with "
                            f"privacy unit '{row[2]}'; a unit, once set, is not changed"
                        )
                    if not exist_ok:
                        raise LedgerError(
                            f"dataset '{dataset}' is already in the ledger {self.path} "
                            f"(total {existing}, unit '{unit.value}')"
                        )
                    return
                self._check_integrity(conn)
                self._verify_ledger_head(conn)
                row = (dataset, total.epsilon, total.delta, _now(), unit.value, regime)
                conn.execute(
                    f"INSERT INTO datasets ({DATASET_HASHED}, head) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*row, dataset_genesis(row)),
                )
                self._write_ledger_head(conn)
        finally:
            conn.close()

    def datasets(self) -> list[str]:
        """The registered dataset ids, sorted."""
        conn = self._connect()
        try:
            with self._errors("list datasets"):
                self._check_integrity(conn)
                self._verify_ledger_head(conn)
                rows = conn.execute("SELECT id FROM datasets ORDER BY id").fetchall()
        finally:
            conn.close()
        return [str(r[0]) for r in rows]

    def show(self, dataset: str) -> LedgerStatus:
        """The total, spent and remaining budget of ``dataset``, its unit and its spends.

        Raises:
            UnknownDatasetError: The dataset is not registered (a :class:`LedgerError`).
        """
        check_dataset_name(dataset, "Ledger.show")
        conn = self._connect()
        try:
            with self._errors("read a dataset"):
                self._check_integrity(conn)
                return self._status(conn, dataset)
        finally:
            conn.close()

    def spend(
        self,
        dataset: str,
        budget: Budget,
        mechanism: str,
        note: str = "",
        *,
        neighbouring: Neighbouring | None = None,
        event: PrivacyEvent | None = None,
    ) -> SpendTransaction:
        """A context manager that spends ``budget`` on ``dataset`` if, and only if, it may.

        On entering, the write lock is taken and the spend checked: a release whose relation does
        not protect the dataset's privacy unit raises :class:`PrivacyUnitMismatchError`, and one
        that does not fit the remaining budget (exactly, see the module notes) raises
        :class:`~privhist.core.errors.BudgetExceededError`, both before the ``with`` body runs.
        On normal exit the spend is committed; if the body raises, nothing is recorded and the
        exception propagates.

        Args:
            dataset: The dataset id.
            budget: The budget the release spends.
            mechanism: Name of the mechanism (recorded).
            note: Free text (recorded).
            neighbouring: The relation the release's guarantee is for (recorded). ``None`` is
                taken as record-level, and so is accepted only by a ``"record"`` dataset.
            event: What the release does (recorded as versioned JSON; the Renyi regime composes
                it). ``None`` stands for the (epsilon, delta) guarantee ``budget``.

        Returns:
            The transaction; use it in a ``with`` statement.
        """
        function = "Ledger.spend"
        check_dataset_name(dataset, function)
        _check_name(mechanism, function, "mechanism")
        if not isinstance(budget, Budget):
            raise ValidationError("budget", function, "a Budget", budget)
        if not isinstance(note, str):
            raise ValidationError("note", function, "a string", note)
        if neighbouring is not None and not isinstance(neighbouring, Neighbouring):
            raise ValidationError("neighbouring", function, "a Neighbouring or None", neighbouring)
        if event is not None and not isinstance(event, PrivacyEvent):
            raise ValidationError("event", function, "a PrivacyEvent or None", event)
        return SpendTransaction(self, dataset, budget, mechanism, note, neighbouring, event)

    def _status(self, conn: sqlite3.Connection, dataset: str) -> LedgerStatus:
        """The dataset's status, read after checking the ledger's head hash and the dataset's
        chain (module notes of :mod:`privhist.accounting.ledger_schema`)."""
        self._verify_ledger_head(conn)
        row = conn.execute(
            f"SELECT {DATASET_HASHED}, head FROM datasets WHERE id = ?", (dataset,)
        ).fetchone()
        if row is None:
            raise UnknownDatasetError(dataset, self.path)
        rows = conn.execute(
            f"SELECT {SPEND_HASHED}, chain FROM spends WHERE dataset = ? ORDER BY id", (dataset,)
        ).fetchall()
        self._verify_chain(dataset, row, rows)
        try:
            total = Budget(float(row[1]), float(row[2]))
            unit = PrivacyUnit(row[4])
            spends = tuple(
                SpendRecord(
                    int(r[0]),
                    dataset,
                    *_amount(r[2], r[3]),
                    str(r[4]),
                    str(r[5]),
                    str(r[6]),
                    decode_neighbouring(r[7]),
                    str(r[8]),
                    str(r[9]),
                )
                for r in rows
            )
        except (ValidationError, TypeError, ValueError) as e:
            raise LedgerError(
                f"ledger {self.path} is corrupted: dataset '{dataset}' has an invalid total, "
                f"unit or spend ({_one_line(e)})"
            ) from e
        spent_eps, spent_delta = _exact_sums(spends)
        spent = BudgetAmount(float_up(spent_eps), float_up(spent_delta))
        remaining = BudgetAmount(
            float_down(max(Fraction(0), Fraction(total.epsilon) - spent_eps)),
            float_down(max(Fraction(0), Fraction(total.delta) - spent_delta)),
        )
        return LedgerStatus(
            dataset, total, spent, remaining, spends, str(row[3]), unit, str(row[5])
        )

    def _verify_chain(self, dataset: str, row: Any, spends: list[Any]) -> None:
        """Recompute the dataset's chain: each spend's stored link, and the head after the last
        one, must match; otherwise a spend was removed, edited or lost."""
        problem = None
        try:
            head = dataset_genesis(tuple(row[:6]))
            for spend in spends:
                head = chain_link(head, tuple(spend[:10]))
                if spend[10] != head:
                    problem = (
                        f"spend {spend[0]} does not match its hash chain (it, or a spend "
                        "before it, was edited or removed)"
                    )
                    break
            if problem is None and row[6] != head:
                problem = (
                    f"its {len(spends)} spend(s) read do not reach its head hash (a spend was "
                    "removed or lost, or its registration edited)"
                )
        except TypeError as e:
            problem = f"a cell has the wrong type ({e})"
        if problem is not None:
            raise LedgerError(
                f"ledger {self.path} is damaged and refused, so that no recorded spend is lost: "
                f"dataset '{dataset}': {problem}; restore it from a backup"
            )


def _amount(epsilon: Any, delta: Any) -> tuple[float, float]:
    a = BudgetAmount(float(epsilon), float(delta))
    return a.epsilon, a.delta


def init_ledger(
    path: str | os.PathLike[str],
    dataset: str,
    total: Budget,
    *,
    unit: PrivacyUnit | str = PrivacyUnit.RECORD,
    regime: str = "basic",
) -> Ledger:
    """Register ``dataset`` with budget ``total`` in the ledger file ``path``, creating the file
    (but never its directory) if it is missing; ``privhist budget init`` runs this.

    A refusal has no side effect: every argument is checked before the file is touched, and a
    file this call created is removed again if the registration fails.

    Raises:
        ValidationError: an empty dataset id, a total that is not a Budget, an unknown unit, or a
            path whose directory does not exist or that is a directory.
        LedgerError: as :meth:`Ledger.init_dataset`.
    """
    function = "budget init"
    check_dataset_name(dataset, function)
    if not isinstance(total, Budget):
        raise ValidationError("total", function, "a Budget", total)
    unit = _check_unit(unit, function)
    if regime not in ("basic", "renyi"):
        raise ValidationError("regime", function, "'basic' or 'renyi'", regime)
    dest = Path(path)
    if not dest.parent.is_dir():
        raise ValidationError("ledger", function, "a file in an existing directory", str(dest))
    if dest.is_dir():
        raise ValidationError("ledger", function, "a file, not a directory", str(dest))
    existed = dest.exists()
    try:
        ledger = Ledger(dest)
        ledger.init_dataset(dataset, total, unit=unit, regime=regime)
    except BaseException:
        if not existed:
            for leftover in (dest, Path(f"{dest}-journal")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        raise
    return ledger


class SpendTransaction:
    """The context manager returned by :meth:`Ledger.spend`.

    Attributes:
        dataset: The dataset id.
        budget: The budget being spent.
        neighbouring: The relation the release's guarantee is for (``None``: record-level).
        before: The dataset's status when the check passed (set on entering).
        spend_id: The id of the recorded spend (set once committed).
    """

    def __init__(
        self,
        ledger: Ledger,
        dataset: str,
        budget: Budget,
        mechanism: str,
        note: str,
        neighbouring: Neighbouring | None = None,
        event: PrivacyEvent | None = None,
    ) -> None:
        self.ledger = ledger
        self.event = event
        self.rule: str | None = None
        self.dataset = dataset
        self.budget = budget
        self.mechanism = mechanism
        self.note = note
        self.neighbouring = neighbouring
        self.before: LedgerStatus | None = None
        self.spend_id: int | None = None
        self._conn: sqlite3.Connection | None = None
        self._pending_id: int | None = None
        self._used = False

    def __enter__(self) -> SpendTransaction:
        if self._used:
            raise LedgerError("a ledger spend can be entered only once; call Ledger.spend again")
        self._used = True
        ledger = self.ledger
        conn = ledger._connect()
        try:
            with ledger._errors("take the write lock"):
                conn.execute("BEGIN IMMEDIATE")
            with ledger._errors("check the budget"):
                ledger._check_integrity(conn)
                status = ledger._status(conn, self.dataset)
                admission = status.check(self.budget, self.neighbouring, self.event)
                self.rule = admission.rule
                spend_id = 1 + conn.execute("SELECT COALESCE(MAX(id), 0) FROM spends").fetchone()[0]
                content = (
                    spend_id,
                    self.dataset,
                    self.budget.epsilon,
                    self.budget.delta,
                    self.mechanism,
                    _now(),
                    self.note,
                    encode_neighbouring(self.neighbouring),
                    "" if self.event is None else event_to_json(self.event),
                    admission.rule or "basic",
                )
                head = conn.execute(
                    "SELECT head FROM datasets WHERE id = ?", (self.dataset,)
                ).fetchone()[0]
                link = chain_link(head, content)
                cursor = conn.execute(
                    f"INSERT INTO spends ({SPEND_HASHED}, chain) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*content, link),
                )
                conn.execute("UPDATE datasets SET head = ? WHERE id = ?", (link, self.dataset))
                ledger._write_ledger_head(conn)
        except BaseException:
            _rollback_quietly(conn)
            conn.close()
            raise
        self.before = status
        self._pending_id = cursor.lastrowid
        self._conn = conn
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        conn = self._conn
        self._conn = None
        if conn is None:  # pragma: no cover - __enter__ failed, so __exit__ is not called
            return False
        try:
            if exc_type is not None:
                _rollback_quietly(conn)
                return False
            try:
                checkpoint("before-commit")
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                _rollback_quietly(conn)
                raise LedgerError(
                    f"ledger {self.ledger.path}: the release of dataset '{self.dataset}' ran but "
                    f"its spend of {self.budget} could not be recorded ({e}); record it by hand"
                ) from e
            self.spend_id = self._pending_id
            return False
        finally:
            conn.close()


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass
