"""``Counts``: aggregated, contribution-bounded counts per key — what every mechanism consumes.

An engine turns records into ``Counts``; a mechanism turns ``Counts`` into a
:class:`~privhist.io.release.Release`. Keys are unique; ``counts[i]`` is the number of records of
``keys[i]`` after contribution bounding, and ``units[i]`` (when known) the number of distinct
privacy units (users) holding ``keys[i]`` after bounding. Without a user column every record is
its own unit and ``units`` equals ``counts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.validation import check_counts


@dataclass(frozen=True)
class Counts:
    """Aggregated counts per key.

    >>> c = Counts.from_arrays(["b", "a"], [3, 5])
    >>> c.keys.tolist(), c.counts.tolist()
    (['a', 'b'], [5, 3])
    """

    keys: npt.NDArray[Any]
    counts: npt.NDArray[np.int64]
    units: npt.NDArray[np.int64] | None = None
    neighbouring: Neighbouring = field(default_factory=Neighbouring.add_remove)
    #: facts about the input for metadata (records read, null keys dropped, users, ...)
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_arrays(
        cls,
        keys: npt.ArrayLike,
        counts: npt.ArrayLike,
        units: npt.ArrayLike | None = None,
        neighbouring: Neighbouring | None = None,
        info: dict[str, Any] | None = None,
        function: str = "Counts",
    ) -> Counts:
        """Validate and sort by key. Duplicate keys are an error (aggregate first)."""
        k = np.asarray(keys)
        if k.ndim != 1:
            raise ValidationError("keys", function, "a one-dimensional array", f"shape {k.shape}")
        c = check_counts(counts, function, "counts")
        if c.shape[0] != k.shape[0]:
            raise ValidationError(
                "counts", function, f"the same length as keys ({k.shape[0]})", c.shape[0]
            )
        u = None
        if units is not None:
            u = check_counts(units, function, "units")
            if u.shape[0] != k.shape[0]:
                raise ValidationError(
                    "units", function, f"the same length as keys ({k.shape[0]})", u.shape[0]
                )
        nb = neighbouring or Neighbouring.add_remove()
        if nb.relation is Relation.USER:
            c_max = nb.max_contributions_per_partition
            if u is None:
                if c_max != 1:
                    raise ValidationError(
                        "units",
                        function,
                        "the number of distinct users per key for user-level data with "
                        "max_contributions_per_partition > 1",
                        None,
                    )
                u = c  # at most one record per user and key: records are users
            bad = (u > c) | (c > c_max * u)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValidationError(
                    "units",
                    function,
                    f"units <= counts <= {c_max} * units (the per-partition bound)",
                    f"units {u[i]} and counts {c[i]} at index {i}",
                )
        if k.dtype == object:
            if any(x is None for x in k.tolist()):
                raise ValidationError("keys", function, "no null keys", "a None key")
        order = np.argsort(k, kind="stable")
        k, c = k[order], c[order]
        if k.shape[0] > 1 and (k[1:] == k[:-1]).any():
            i = int(np.argmax(k[1:] == k[:-1]))
            raise ValidationError("keys", function, "unique keys", f"duplicate key {k[i]!r}")
        if u is not None:
            u = u[order]
        return cls(
            keys=k,
            counts=c,
            units=u,
            neighbouring=nb,
            info=dict(info or {}),
        )

    @classmethod
    def from_records(cls, keys: npt.ArrayLike) -> Counts:
        """Count one record per entry (record-level, add/remove neighbours)."""
        k = np.asarray(keys)
        if k.size == 0:
            return cls.from_arrays(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        uniq, cnt = np.unique(k, return_counts=True)
        return cls.from_arrays(uniq, cnt.astype(np.int64), info={"records": int(k.size)})

    @property
    def unit_counts(self) -> npt.NDArray[np.int64]:
        """Distinct privacy units per key (``counts`` when every record is its own unit)."""
        return self.counts if self.units is None else self.units

    def __len__(self) -> int:
        return int(self.keys.shape[0])
