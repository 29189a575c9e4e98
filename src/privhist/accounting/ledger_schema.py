"""The ledger's SQLite schema (version 4), its upgrades, its hash chain, and small value types.

Version 3 added the composition regime of each dataset (``'basic'`` or ``'renyi'``,
:mod:`privhist.accounting.filters`) and, per spend, its privacy event (versioned JSON,
:mod:`privhist.accounting.events`) and the rule that admitted it; a spend recorded before has no
stored event and stands for an (epsilon, delta) guarantee admitted by basic composition.

Version 4 adds a hash chain (SHA-256) over each dataset's registration and spends, so that a
spend removed or edited outside privhist, or lost to a damaged file, is detected:

* a dataset's *genesis* hashes its registration (id, total, created, unit, regime);
* each spend stores ``chain = H(previous chain, canonical content of the spend)``, the previous
  chain being the genesis for the first spend;
* ``datasets.head`` is the chain of the dataset's last spend (its genesis before any), and the
  ``meta`` row ``ledger_head`` hashes every dataset's id and head, so that a dataset removed
  with all its spends is detected too.

Floats enter the hash by their exact hexadecimal form (:meth:`float.hex`), text as UTF-8 JSON.
The chain is a checksum against damage and careless edits, not a signature: whoever can write
the file can recompute every hash. Older versions are upgraded only on request
(:func:`privhist.accounting.ledger.upgrade_ledger`, ``privhist budget upgrade``), which checks
the file's integrity and then chains its spends as they stand.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from privhist.core.budget import Budget
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring, Relation

SCHEMA_VERSION = 4

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE datasets (id TEXT PRIMARY KEY, epsilon_total REAL NOT NULL, "
    "delta_total REAL NOT NULL, created TEXT NOT NULL, unit TEXT NOT NULL DEFAULT 'record', "
    "regime TEXT NOT NULL DEFAULT 'basic', head TEXT NOT NULL DEFAULT '')",
    "CREATE TABLE spends (id INTEGER PRIMARY KEY, dataset TEXT NOT NULL REFERENCES datasets(id), "
    "epsilon REAL NOT NULL, delta REAL NOT NULL, mechanism TEXT NOT NULL, created TEXT NOT NULL, "
    "note TEXT NOT NULL DEFAULT '', neighbouring TEXT NOT NULL DEFAULT '', "
    "event TEXT NOT NULL DEFAULT '', rule TEXT NOT NULL DEFAULT 'basic', "
    "chain TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX spends_dataset ON spends (dataset)",
)
# version 1 -> 2: the privacy unit of each dataset and the relation of each spend
MIGRATE_1_TO_2 = (
    "ALTER TABLE datasets ADD COLUMN unit TEXT NOT NULL DEFAULT 'record'",
    "ALTER TABLE spends ADD COLUMN neighbouring TEXT NOT NULL DEFAULT ''",
    "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
)
# version 2 -> 3: the composition regime of each dataset, the event and admitting rule of each
# spend (an old spend's event is its (epsilon, delta), admitted by basic composition)
MIGRATE_2_TO_3 = (
    "ALTER TABLE datasets ADD COLUMN regime TEXT NOT NULL DEFAULT 'basic'",
    "ALTER TABLE spends ADD COLUMN event TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE spends ADD COLUMN rule TEXT NOT NULL DEFAULT 'basic'",
    "UPDATE meta SET value = '3' WHERE key = 'schema_version'",
)
COLUMNS_V1 = {
    "meta": {"key", "value"},
    "datasets": {"id", "epsilon_total", "delta_total", "created"},
    "spends": {"id", "dataset", "epsilon", "delta", "mechanism", "created", "note"},
}
COLUMNS_V2 = {
    "meta": COLUMNS_V1["meta"],
    "datasets": COLUMNS_V1["datasets"] | {"unit"},
    "spends": COLUMNS_V1["spends"] | {"neighbouring"},
}
# version 3 -> 4: the hash chain (the hashes themselves are computed by the upgrade)
MIGRATE_3_TO_4 = (
    "ALTER TABLE datasets ADD COLUMN head TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE spends ADD COLUMN chain TEXT NOT NULL DEFAULT ''",
    "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
)
COLUMNS_V3 = {
    "meta": COLUMNS_V1["meta"],
    "datasets": COLUMNS_V2["datasets"] | {"regime"},
    "spends": COLUMNS_V2["spends"] | {"event", "rule"},
}
COLUMNS = {
    "meta": COLUMNS_V1["meta"],
    "datasets": COLUMNS_V3["datasets"] | {"head"},
    "spends": COLUMNS_V3["spends"] | {"chain"},
}
#: columns each older version must have, and the statements taking it one version up
UPGRADES = {
    1: (COLUMNS_V1, MIGRATE_1_TO_2),
    2: (COLUMNS_V2, MIGRATE_2_TO_3),
    3: (COLUMNS_V3, MIGRATE_3_TO_4),
}
#: the dataset columns the genesis hash covers, and the spend columns each link covers
DATASET_HASHED = "id, epsilon_total, delta_total, created, unit, regime"
SPEND_HASHED = "id, dataset, epsilon, delta, mechanism, created, note, neighbouring, event, rule"


def _canonical(kind: str, values: tuple[Any, ...]) -> bytes:
    """``values`` as UTF-8 JSON, floats by their exact hexadecimal form; fails on other types
    (a cell of the wrong type is damage)."""
    out: list[Any] = [kind]
    for v in values:
        if isinstance(v, float):
            out.append(["f", v.hex()])
        elif isinstance(v, bool) or not isinstance(v, int | str):
            raise TypeError(f"a ledger cell holds {type(v).__name__} {v!r}")
        else:
            out.append(v)
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def dataset_genesis(row: tuple[Any, ...]) -> str:
    """The hash that starts a dataset's chain, from its :data:`DATASET_HASHED` columns.

    >>> len(dataset_genesis(("d", 1.0, 1e-06, "2024-01-01", "record", "basic")))
    64
    """
    return hashlib.sha256(_canonical("privhist-ledger-dataset", row)).hexdigest()


def chain_link(previous: str, row: tuple[Any, ...]) -> str:
    """The chain after a spend: ``H(previous, canonical content)`` of its :data:`SPEND_HASHED`
    columns."""
    return hashlib.sha256(_canonical("privhist-ledger-spend", (previous, *row))).hexdigest()


def ledger_head(heads: list[tuple[Any, Any]]) -> str:
    """The hash of every dataset's ``(id, head)``, in id order."""
    flat = tuple(x for pair in sorted(heads) for x in pair)
    return hashlib.sha256(_canonical("privhist-ledger-head", flat)).hexdigest()


def show_amount(epsilon: float, delta: float) -> str:
    """An (epsilon, delta) amount as every ledger message and ``privhist budget show`` print it:
    epsilon to 6 significant digits, delta to 3 (as :class:`~privhist.core.budget.Budget` does).

    >>> show_amount(0.9, 9.899999999999998e-07)
    '(0.9, 9.9e-07)'
    """
    return f"({epsilon:.6g}, {delta:.3g})"


def _exact(value: float) -> str:
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class BudgetAmount:
    """An amount of (epsilon, delta) that may be zero: what was spent, or what remains.

    Unlike :class:`~privhist.core.budget.Budget` (which a mechanism must have with
    ``epsilon > 0``), an amount may be zero. ``budget <= amount`` compares coordinate-wise and
    exactly. The text form is rounded for reading (:func:`show_amount`, as ``privhist budget
    show`` prints it); :meth:`exact_text` shows every digit. A refusal whose request would seem
    to fit the rounded amount adds the exact one.

    >>> Budget(0.5, 0) <= BudgetAmount(1.0, 0.0)
    True
    >>> str(BudgetAmount(0.25, 1e-9))
    '(0.25, 1e-09)'
    >>> str(BudgetAmount(0.09999999999999995, 9.899999999999998e-07))
    '(0.1, 9.9e-07)'
    >>> BudgetAmount(0.09999999999999995, 0).exact_text()
    '(0.09999999999999995, 0)'
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
        return show_amount(self.epsilon, self.delta)

    def exact_text(self) -> str:
        """Both coordinates with every digit (the shortest text that reads back exactly)."""
        return f"({_exact(self.epsilon)}, {_exact(self.delta)})"

    def shown(self) -> BudgetAmount:
        """The amount as its text form reads (rounded to the digits shown)."""
        return BudgetAmount(float(f"{self.epsilon:.6g}"), float(f"{self.delta:.3g}"))


def encode_neighbouring(neighbouring: Neighbouring | None) -> str:
    if neighbouring is None:
        return ""
    return json.dumps(neighbouring.to_dict(), sort_keys=True)


def decode_neighbouring(text: Any) -> Neighbouring | None:
    if text == "":
        return None
    if not isinstance(text, str):
        raise TypeError(f"neighbouring must be text; got {text!r}")
    data = json.loads(text)
    if not isinstance(data, dict) or set(data) != {
        "relation",
        "max_partitions_contributed",
        "max_contributions_per_partition",
    }:
        raise ValueError(f"neighbouring {text!r} is not a recorded relation")
    return Neighbouring(
        Relation(data["relation"]),
        data["max_partitions_contributed"],
        data["max_contributions_per_partition"],
    )
