"""``WeightedCounts`` and the ``WeightedSource`` protocol: the aggregate of weighted selectors.

Weighted user-level key selectors (WGM, DP-SIPS; :mod:`privhist.mechanisms.user_level`) do not
consume record counts. Each user keeps at most ``max_keys`` (``Delta0``) of its distinct keys and
spreads one unit of L2 weight over them: every kept key receives the integer weight
``floor(scale / sqrt(|S|))``, in units of ``1 / scale`` (so the user's weight vector has L2 norm at
most ``scale`` units). The aggregate is the per-key sum of these integer weights.

* :class:`WeightedCounts` holds that aggregate: ``keys`` (sorted, unique), ``weights`` (int64,
  units of ``1 / scale``), the public ``scale`` and ``max_keys``, optionally ``units`` (distinct
  users per key after bounding; non-private, for diagnostics) and ``info`` (facts about the
  input, non-private).
* :class:`WeightedSource` is what an engine offers a selector: ``weighted_sums(max_keys, scale,
  exclude)`` recomputes the aggregate with the keys in ``exclude`` removed from every user
  *before* each user chooses its kept keys (multi-round selectors ask again after every round);
  ``held_sums`` does the same over a subset each user draws once and keeps (removed keys are not
  replaced),
  and ``unit_counts(keys, max_keys)`` gives, for public ``keys`` (already released), the number of
  distinct users holding each of them after every user keeps at most ``max_keys`` of its keys
  among ``keys`` (the input of a second, count-releasing step), and
  ``degree_histogram(bounds)`` the number of users whose number of distinct keys falls in each
  bucket ``(bounds[i-1], bounds[i]]`` (the input of a DP cap, :mod:`privhist.mechanisms.user_level
  .caps`; each user is in exactly one bucket), and ``records_histogram(bounds)`` the same for
  the most records a user holds on one key. Every engine's answer to
  :class:`~privhist.core.requests.UserKeys` implements them (local:
  :class:`privhist.engines.local.weighting.LocalWeightedSource`, Spark:
  :class:`privhist.engines.spark.weighting.SparkWeightedSource`).
* :class:`VoteCounts` is the answer of :class:`~privhist.core.requests.UserVotes`: the keys that
  received a vote under vote selection's rule, their vote counts and the number of users who
  cast no vote below the cap (:mod:`privhist.mechanisms.user_level.votes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.validation import check_positive_int


@dataclass(frozen=True)
class WeightedCounts:
    """Per-key sums of integer user weights.

    >>> w = WeightedCounts.from_arrays(["b", "a"], [3, 5], scale=4, max_keys=2)
    >>> w.keys.tolist(), w.weights.tolist()
    (['a', 'b'], [5, 3])
    """

    keys: npt.NDArray[Any]
    weights: npt.NDArray[np.int64]
    scale: int
    max_keys: int
    units: npt.NDArray[np.int64] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_arrays(
        cls,
        keys: npt.ArrayLike,
        weights: npt.ArrayLike,
        *,
        scale: int,
        max_keys: int,
        units: npt.ArrayLike | None = None,
        info: dict[str, Any] | None = None,
    ) -> WeightedCounts:
        """Validate and sort by key (duplicates and negative weights are errors)."""
        fn = "WeightedCounts"
        k = np.asarray(keys)
        if k.ndim != 1:
            raise ValidationError("keys", fn, "a one-dimensional array", f"shape {k.shape}")
        w = np.asarray(weights)
        if w.shape != k.shape or (w.size and w.dtype.kind not in "iu"):
            raise ValidationError("weights", fn, f"{k.shape[0]} integers", f"{w.dtype} {w.shape}")
        w = w.astype(np.int64)
        if w.size and int(w.min()) < 0:
            raise ValidationError("weights", fn, "non-negative integers", int(w.min()))
        u = None if units is None else np.asarray(units, dtype=np.int64)
        if u is not None and u.shape != k.shape:
            raise ValidationError("units", fn, f"{k.shape[0]} integers", u.shape)
        order = np.argsort(k, kind="stable")
        k, w = k[order], w[order]
        if k.shape[0] > 1 and (k[1:] == k[:-1]).any():
            raise ValidationError("keys", fn, "unique keys", "a duplicate key")
        return cls(
            keys=k,
            weights=w,
            scale=check_positive_int(scale, fn, "scale"),
            max_keys=check_positive_int(max_keys, fn, "max_keys"),
            units=None if u is None else u[order],
            info=dict(info or {}),
        )

    def __len__(self) -> int:
        return int(self.keys.shape[0])


@runtime_checkable
class WeightedSource(Protocol):
    """What a weighted selector asks an engine for (see the module docstring)."""

    def weighted_sums(
        self, max_keys: int, scale: int, exclude: npt.ArrayLike | None = None
    ) -> WeightedCounts:
        """Each user keeps a uniformly random subset of at most ``max_keys`` of its keys not in
        ``exclude`` (fresh randomness on every call) and gives each kept key
        ``floor(scale / sqrt(kept))``; returns the per-key sums."""
        ...

    def held_sums(
        self, max_keys: int, scale: int, exclude: npt.ArrayLike | None = None
    ) -> WeightedCounts:
        """Each user *holds* a uniformly random subset of at most ``max_keys`` of its keys,
        drawn once per source and ``max_keys`` (the same subset on every call); the keys in
        ``exclude`` are removed from it (never replaced by other keys of the user), and each
        remaining held key gets ``floor(scale / sqrt(remaining))``; returns the per-key sums.
        What :class:`~privhist.mechanisms.user_level.selectors.CumulativeSIPS` needs: a key
        only the added user holds stays among at most ``max_keys`` such keys in every round."""
        ...

    def unit_counts(self, keys: npt.ArrayLike, max_keys: int) -> Counts:
        """Distinct users per key of ``keys`` after each user keeps a uniformly random subset of
        at most ``max_keys`` of its keys among ``keys``, as user-level ``Counts``
        (``Neighbouring.user(max_keys, 1)``); keys nobody holds have count 0."""
        ...

    def degree_histogram(self, bounds: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Users per bucket of distinct-key counts: entry ``i`` counts the users holding more
        than ``bounds[i - 1]`` (0 for ``i = 0``) and at most ``bounds[i]`` keys; the last entry
        (index ``len(bounds)``) those holding more than ``bounds[-1]``."""
        ...

    def records_histogram(self, bounds: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Users per bucket of the most records a user holds on one key: entry ``i`` counts the
        users whose most records on one key ``m`` satisfy ``bounds[i - 1] < m <= bounds[i]``;
        the last entry those above every bound (the input of a DP records-per-key cap)."""
        ...


@dataclass(frozen=True)
class VoteCounts:
    """The keys that received a vote (sorted) and their vote counts, with facts about the input
    (``info``: non-private, for diagnostics).

    >>> VoteCounts(np.array(["a"]), np.array([3]), 1).votes.tolist()
    [3]
    """

    keys: npt.NDArray[Any]
    votes: npt.NDArray[np.int64]
    #: users who cast no vote below ``Gamma`` (every key they hold had ``Gamma`` votes at their
    #: turn); adding or removing a user changes it by at most one
    #: (:mod:`privhist.mechanisms.user_level.votes`, item 2)
    non_voters: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.keys.shape[0])
