"""The durable budget ledger: how much of each dataset's privacy budget has been spent.

The ledger is a SQLite file (stdlib :mod:`sqlite3`) with three tables::

    meta(key TEXT PRIMARY KEY, value TEXT)            -- holds schema_version
    datasets(id TEXT PRIMARY KEY, epsilon_total REAL, delta_total REAL, created TEXT)
    spends(id INTEGER PRIMARY KEY, dataset TEXT REFERENCES datasets, epsilon REAL,
           delta REAL, mechanism TEXT, created TEXT, note TEXT)

Spends compose by basic composition (Dwork and Roth 2014, Theorem 3.16): a dataset's spent budget
is the sum of the epsilons and the sum of the deltas of its spends. A release is refused when
``spent + requested`` would exceed the total in either coordinate.

Atomicity. :meth:`Ledger.spend` is a context manager. Entering it starts a ``BEGIN IMMEDIATE``
transaction, which takes SQLite's write lock, so that two processes spending against one dataset
are serialised: the budget check and the recording of the spend happen under the same lock, and no
two releases can both pass a check that only one of them fits. The spend row is written at once
but only committed when the ``with`` body finishes normally; if the body raises, the transaction is
rolled back and nothing is recorded. The lock is held while the body runs, so other processes
wait (up to ``timeout`` seconds) rather than race.

Float sums. Budgets are stored as floats, and sums such as ten spends of 0.1 against a total of
1.0 land a rounding error above the total (``0.1 * 10`` sums to ``0.9999999999999999``, but
``1.0999999999999999`` for eleven). The check therefore allows ``spent + requested`` to exceed the
total by a relative :data:`RELATIVE_TOLERANCE` of ``1e-9`` of the total, far below any meaningful
difference in privacy and far above float rounding of any realistic number of spends.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import platformdirs

from privhist.core.budget import Budget
from privhist.core.errors import BudgetExceededError, LedgerError, ValidationError

__all__ = [
    "DEFAULT_TIMEOUT",
    "RELATIVE_TOLERANCE",
    "SCHEMA_VERSION",
    "BudgetAmount",
    "Ledger",
    "LedgerStatus",
    "SpendRecord",
    "SpendTransaction",
    "UnknownDatasetError",
    "default_ledger_path",
]

SCHEMA_VERSION = 1
DEFAULT_TIMEOUT = 30.0
RELATIVE_TOLERANCE = 1e-9

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE datasets (id TEXT PRIMARY KEY, epsilon_total REAL NOT NULL, "
    "delta_total REAL NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE spends (id INTEGER PRIMARY KEY, dataset TEXT NOT NULL REFERENCES datasets(id), "
    "epsilon REAL NOT NULL, delta REAL NOT NULL, mechanism TEXT NOT NULL, created TEXT NOT NULL, "
    "note TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX spends_dataset ON spends (dataset)",
)
_COLUMNS = {
    "meta": {"key", "value"},
    "datasets": {"id", "epsilon_total", "delta_total", "created"},
    "spends": {"id", "dataset", "epsilon", "delta", "mechanism", "created", "note"},
}


def default_ledger_path() -> Path:
    """``<user data dir>/privhist/ledger.sqlite`` (platformdirs), creating the directory.

    Returns:
        The path of the default ledger file.
    """
    directory = Path(platformdirs.user_data_dir("privhist"))
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "ledger.sqlite"


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


@dataclass(frozen=True)
class BudgetAmount:
    """An amount of (epsilon, delta) that may be zero: what was spent, or what remains.

    Unlike :class:`~privhist.core.budget.Budget` (which a mechanism must have with
    ``epsilon > 0``), an amount may be zero. ``budget <= amount`` compares coordinate-wise and
    exactly.

    >>> Budget(0.5, 0) <= BudgetAmount(1.0, 0.0)
    True
    >>> str(BudgetAmount(0.25, 1e-9))
    '(0.25, 1e-09)'
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        for name in ("epsilon", "delta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValidationError(name, "BudgetAmount", "a finite number >= 0", value)
            if not math.isfinite(value) or value < 0:
                raise ValidationError(name, "BudgetAmount", "a finite number >= 0", value)
            object.__setattr__(self, name, float(value))

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Budget | BudgetAmount):
            return NotImplemented
        return other.epsilon <= self.epsilon and other.delta <= self.delta

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Budget | BudgetAmount):
            return NotImplemented
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    def __str__(self) -> str:
        return f"({self.epsilon:.6g}, {self.delta:.3g})"


@dataclass(frozen=True)
class SpendRecord:
    """One recorded release."""

    id: int
    dataset: str
    epsilon: float
    delta: float
    mechanism: str
    created: str
    note: str

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)


@dataclass(frozen=True)
class LedgerStatus:
    """A dataset's total, spent and remaining budget, and its spends (oldest first)."""

    dataset: str
    total: Budget
    spent: BudgetAmount
    remaining: BudgetAmount
    spends: tuple[SpendRecord, ...]
    created: str

    def allows(self, budget: Budget) -> bool:
        """Whether a spend of ``budget`` passes the ledger's check (same rule as :meth:`spend`)."""
        return _fits(self.total, self.spent, budget)


def _fits(total: Budget, spent: BudgetAmount, requested: Budget) -> bool:
    eps_ok = spent.epsilon + requested.epsilon <= total.epsilon * (1 + RELATIVE_TOLERANCE)
    delta_ok = spent.delta + requested.delta <= total.delta * (1 + RELATIVE_TOLERANCE)
    return eps_ok and delta_ok


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _check_name(value: Any, function: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(name, function, "a non-empty string", value)
    return value


class Ledger:
    """A durable record of the privacy budget spent per dataset, in a SQLite file.

    Args:
        path: The ledger file; created (with its parent directories) if missing. Defaults to
            :func:`default_ledger_path`.
        timeout: Seconds to wait for another process's write lock before giving up with a
            :class:`~privhist.core.errors.LedgerError`.

    Raises:
        LedgerError: The file is not a SQLite database, has another schema, cannot be created, or
            is locked beyond ``timeout`` while its schema is being created.

    Example::

        ledger = Ledger("ledger.sqlite")
        ledger.init_dataset("survey", Budget(2.0, 1e-6))
        with ledger.spend("survey", Budget(1.0, 1e-8), mechanism="stability"):
            release = mechanism.release(counts, rng)  # runs only if the budget allows it
            write(release)                           # if anything raises, nothing is recorded
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ):
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ValidationError("timeout", "Ledger", "a finite number >= 0", timeout)
        if not math.isfinite(timeout) or timeout < 0:
            raise ValidationError("timeout", "Ledger", "a finite number >= 0", timeout)
        self.timeout = float(timeout)
        self.path = Path(path) if path is not None else default_ledger_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LedgerError(f"cannot create the directory of ledger {self.path}: {e}") from e
        if self.path.is_dir():
            raise LedgerError(f"ledger {self.path} is a directory, not a file")
        self._ensure_schema()

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # -- connections and error translation ------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        with self._errors("open"):
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            with self._errors("open"):
                conn.execute("PRAGMA foreign_keys = ON")
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

    def _ensure_schema(self) -> None:
        conn = self._connect()
        try:
            with self._errors("read the schema"):
                if self._tables(conn):
                    self._verify_schema(conn)
                    return
            with self._errors("create the schema"):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    if self._tables(conn):  # another process created it meanwhile
                        conn.execute("ROLLBACK")
                        self._verify_schema(conn)
                        return
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        finally:
            conn.close()

    @staticmethod
    def _tables(conn: sqlite3.Connection) -> set[str]:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {str(r[0]) for r in rows}

    def _verify_schema(self, conn: sqlite3.Connection) -> None:
        tables = self._tables(conn)
        missing = sorted(set(_COLUMNS) - tables)
        if missing:
            raise LedgerError(
                f"ledger {self.path} is not a privhist ledger: missing table(s) "
                f"{', '.join(missing)}"
            )
        for table, expected in _COLUMNS.items():
            columns = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}
            if not expected <= columns:
                raise LedgerError(
                    f"ledger {self.path} has a wrong schema: table {table} lacks column(s) "
                    f"{', '.join(sorted(expected - columns))}"
                )
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None or str(row[0]) != str(SCHEMA_VERSION):
            found = "none" if row is None else row[0]
            raise LedgerError(
                f"ledger {self.path} has schema version {found}; this privhist reads version "
                f"{SCHEMA_VERSION}"
            )

    # -- public API -------------------------------------------------------------------------------

    def init_dataset(self, dataset: str, total: Budget, *, exist_ok: bool = False) -> None:
        """Register ``dataset`` with its total budget.

        Args:
            dataset: The dataset id.
            total: Its total budget.
            exist_ok: Do not fail if the dataset is already registered *with the same total*.

        Raises:
            LedgerError: The dataset exists (unless ``exist_ok``) or exists with another total.
            ValidationError: ``dataset`` is empty or ``total`` is not a Budget.
        """
        function = "Ledger.init_dataset"
        _check_name(dataset, function, "dataset")
        if not isinstance(total, Budget):
            raise ValidationError("total", function, "a Budget", total)
        conn = self._connect()
        try:
            with self._errors("register a dataset"):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute(
                        "SELECT epsilon_total, delta_total FROM datasets WHERE id = ?", (dataset,)
                    ).fetchone()
                    if row is not None:
                        conn.execute("ROLLBACK")
                        existing = Budget(float(row[0]), float(row[1]))
                        if existing != total:
                            raise LedgerError(
                                f"dataset '{dataset}' is already in the ledger {self.path} with "
                                f"total {existing}; a total, once set, is not changed"
                            )
                        if not exist_ok:
                            raise LedgerError(
                                f"dataset '{dataset}' is already in the ledger {self.path} "
                                f"(total {existing})"
                            )
                        return
                    conn.execute(
                        "INSERT INTO datasets (id, epsilon_total, delta_total, created) "
                        "VALUES (?, ?, ?, ?)",
                        (dataset, total.epsilon, total.delta, _now()),
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        finally:
            conn.close()

    def datasets(self) -> list[str]:
        """The registered dataset ids, sorted."""
        conn = self._connect()
        try:
            with self._errors("list datasets"):
                rows = conn.execute("SELECT id FROM datasets ORDER BY id").fetchall()
        finally:
            conn.close()
        return [str(r[0]) for r in rows]

    def show(self, dataset: str) -> LedgerStatus:
        """The total, spent and remaining budget of ``dataset`` and its spends.

        Raises:
            UnknownDatasetError: The dataset is not registered (a :class:`LedgerError`).
        """
        _check_name(dataset, "Ledger.show", "dataset")
        conn = self._connect()
        try:
            with self._errors("read a dataset"):
                return self._status(conn, dataset)
        finally:
            conn.close()

    def spend(
        self, dataset: str, budget: Budget, mechanism: str, note: str = ""
    ) -> SpendTransaction:
        """A context manager that spends ``budget`` on ``dataset`` if, and only if, it fits.

        On entering, the write lock is taken and the budget checked; a release that does not fit
        raises :class:`~privhist.core.errors.BudgetExceededError` before the ``with`` body runs.
        On normal exit the spend is committed; if the body raises, nothing is recorded and the
        exception propagates.

        Args:
            dataset: The dataset id.
            budget: The budget the release spends.
            mechanism: Name of the mechanism (recorded).
            note: Free text (recorded).

        Returns:
            The transaction; use it in a ``with`` statement.
        """
        function = "Ledger.spend"
        _check_name(dataset, function, "dataset")
        _check_name(mechanism, function, "mechanism")
        if not isinstance(budget, Budget):
            raise ValidationError("budget", function, "a Budget", budget)
        if not isinstance(note, str):
            raise ValidationError("note", function, "a string", note)
        return SpendTransaction(self, dataset, budget, mechanism, note)

    def _status(self, conn: sqlite3.Connection, dataset: str) -> LedgerStatus:
        row = conn.execute(
            "SELECT epsilon_total, delta_total, created FROM datasets WHERE id = ?", (dataset,)
        ).fetchone()
        if row is None:
            raise UnknownDatasetError(dataset, self.path)
        rows = conn.execute(
            "SELECT id, epsilon, delta, mechanism, created, note FROM spends "
            "WHERE dataset = ? ORDER BY id",
            (dataset,),
        ).fetchall()
        try:
            total = Budget(float(row[0]), float(row[1]))
            spends = tuple(
                SpendRecord(
                    int(r[0]), dataset, *_amount(r[1], r[2]), str(r[3]), str(r[4]), str(r[5])
                )
                for r in rows
            )
        except (ValidationError, TypeError, ValueError) as e:
            raise LedgerError(
                f"ledger {self.path} is corrupted: dataset '{dataset}' has an invalid total or "
                f"spend ({e})"
            ) from e
        spent = BudgetAmount(
            math.fsum(s.epsilon for s in spends), math.fsum(s.delta for s in spends)
        )
        remaining = BudgetAmount(
            max(0.0, total.epsilon - spent.epsilon), max(0.0, total.delta - spent.delta)
        )
        return LedgerStatus(dataset, total, spent, remaining, spends, str(row[2]))


def _amount(epsilon: Any, delta: Any) -> tuple[float, float]:
    a = BudgetAmount(float(epsilon), float(delta))
    return a.epsilon, a.delta


class SpendTransaction:
    """The context manager returned by :meth:`Ledger.spend`.

    Attributes:
        dataset: The dataset id.
        budget: The budget being spent.
        before: The dataset's status when the check passed (set on entering).
        spend_id: The id of the recorded spend (set once committed).
    """

    def __init__(
        self, ledger: Ledger, dataset: str, budget: Budget, mechanism: str, note: str
    ) -> None:
        self.ledger = ledger
        self.dataset = dataset
        self.budget = budget
        self.mechanism = mechanism
        self.note = note
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
                status = ledger._status(conn, self.dataset)
                if not _fits(status.total, status.spent, self.budget):
                    raise BudgetExceededError(self.dataset, self.budget, status.remaining)
                cursor = conn.execute(
                    "INSERT INTO spends (dataset, epsilon, delta, mechanism, created, note) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        self.dataset,
                        self.budget.epsilon,
                        self.budget.delta,
                        self.mechanism,
                        _now(),
                        self.note,
                    ),
                )
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
