"""The ledger's SQLite schema (version 3), its migrations, and small value types it stores.

Version 3 adds the composition regime of each dataset (``'basic'`` or ``'renyi'``,
:mod:`privhist.accounting.filters`) and, per spend, its privacy event (versioned JSON,
:mod:`privhist.accounting.events`) and the rule that admitted it. Versions 1 and 2 are migrated
in place (:class:`privhist.accounting.ledger.Ledger`); a migrated spend has no stored event and
stands for an (epsilon, delta) guarantee admitted by basic composition.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from privhist.core.budget import Budget
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring, Relation

SCHEMA_VERSION = 3

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE datasets (id TEXT PRIMARY KEY, epsilon_total REAL NOT NULL, "
    "delta_total REAL NOT NULL, created TEXT NOT NULL, unit TEXT NOT NULL DEFAULT 'record', "
    "regime TEXT NOT NULL DEFAULT 'basic')",
    "CREATE TABLE spends (id INTEGER PRIMARY KEY, dataset TEXT NOT NULL REFERENCES datasets(id), "
    "epsilon REAL NOT NULL, delta REAL NOT NULL, mechanism TEXT NOT NULL, created TEXT NOT NULL, "
    "note TEXT NOT NULL DEFAULT '', neighbouring TEXT NOT NULL DEFAULT '', "
    "event TEXT NOT NULL DEFAULT '', rule TEXT NOT NULL DEFAULT 'basic')",
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
COLUMNS = {
    "meta": COLUMNS_V1["meta"],
    "datasets": COLUMNS_V2["datasets"] | {"regime"},
    "spends": COLUMNS_V2["spends"] | {"event", "rule"},
}
#: columns each older version must have, and the statements taking it one version up
UPGRADES = {1: (COLUMNS_V1, MIGRATE_1_TO_2), 2: (COLUMNS_V2, MIGRATE_2_TO_3)}


def _show_float(value: float, spec: str) -> str:
    """``value`` formatted with ``spec`` if that reads back exactly, else its shortest repr."""
    text = format(value, spec)
    return text if float(text) == value else repr(value)


@dataclass(frozen=True)
class BudgetAmount:
    """An amount of (epsilon, delta) that may be zero: what was spent, or what remains.

    Unlike :class:`~privhist.core.budget.Budget` (which a mechanism must have with
    ``epsilon > 0``), an amount may be zero. ``budget <= amount`` compares coordinate-wise and
    exactly. The text form is short when that is exact and shows every digit otherwise, so it
    never suggests more (or less) than the amount.

    >>> Budget(0.5, 0) <= BudgetAmount(1.0, 0.0)
    True
    >>> str(BudgetAmount(0.25, 1e-9))
    '(0.25, 1e-09)'
    >>> str(BudgetAmount(0.09999999999999995, 0))
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
        return f"({_show_float(self.epsilon, '.6g')}, {_show_float(self.delta, '.3g')})"


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
