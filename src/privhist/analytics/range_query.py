"""Range queries on hierarchical sample-and-threshold histograms (Bharadwaj & Cormode 2022,
Section 4.2, "Quantiles and range queries via hierarchical histograms").

:class:`HierarchicalHistogram` is built from ``(epsilon, delta)`` and the public geometry only
(range ``[lo, hi)``, branching ``beta``, ``L`` levels; see :mod:`.hierarchy`). Its
:meth:`~HierarchicalHistogram.release` maps every client's value to its bucket on each level and
releases, per level, a :class:`~privhist.mechanisms.sampling.SampleAndThreshold` histogram of the
bucket ids with a fresh Poisson sample, each at ``(eps_L, delta / L)``.

**Privacy.** One client added or removed moves one bucket count by one on every level, so each
level is ``(eps_L, delta_L)``-DP for it (``delta_L <= delta / L`` its certified value) and the
``L`` levels compose (:func:`.hierarchy.compose`). With ``composition="basic"``,
``eps_L = epsilon / L`` and the levels are ``(epsilon, L delta_L)``-DP by basic composition (the
paper's Lemma 4.1). By default (``"pld"``) ``eps_L`` is the largest per-level epsilon found whose
certified PLD composition over the ``L`` levels is within ``(epsilon, delta)``
(:func:`.hierarchy.split_sample_and_threshold`): several times ``epsilon / L``, so a larger
sampling rate and a smaller pruning error. The guarantee stated and charged is the smaller of
the two bounds. Which buckets were withheld is part of the release (post-processing may use it).

**Range answers** (:meth:`HierarchicalRelease.range`). A range is snapped to the nearest leaf
boundaries, split into the fewest nodes (:func:`.hierarchy.decompose`) and answered with
``X / p``, where ``X`` is the sum of the released sampled counts of those nodes. Every client in
the range lies in exactly one node and is sampled on that node's level independently with
probability ``p``, so the sum of the *unthresholded* sampled counts is exactly
``Binomial(C, p)`` for the true count ``C``; a withheld node hides fewer than ``tau`` of them.
Hence:

* the pruning error is at most ``w (tau - 1) / p`` for ``w`` withheld nodes, and at most the
  paper's worst case ``L (beta - 1)(tau - 1) / p`` for a prefix (``(2L - 1)(beta - 1)`` nodes for
  another range) -- the bound of the Lemma in Section 4.2 (``L (beta - 1) tau / m`` as a fraction
  of ``m = p n``);
* an exact confidence interval for ``C`` follows from the binomial (Clopper-Pearson construction
  with known ``p`` and unknown ``C``): the lower end uses ``X`` and the upper end
  ``X + w (tau - 1)``, which bracket the unthresholded sum, so the interval covers ``C`` with at
  least the stated confidence whatever was withheld.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.composition import PrivacyEvent
from privhist.analytics.hierarchy import (
    BUDGET_CONSTRAINTS,
    COMPOSITION,
    Hierarchy,
    ReleasesComposition,
    compose_releases,
    composed_metadata,
    split_sample_and_threshold,
    step_constraints,
)
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import check_probability

__all__ = [
    "HierarchicalHistogram",
    "HierarchicalRelease",
    "RangeAnswer",
    "bracketed_count_interval",
]

I64 = npt.NDArray[np.int64]


def bracketed_count_interval(
    observed: int, slack: int, p: float, confidence: float
) -> tuple[int, int]:
    """Exact confidence interval for ``C`` from ``X ~ Binomial(C, p)`` known to lie in
    ``[observed, observed + slack]``.

    Lower end: the smallest ``C`` with ``Pr[Bin(C, p) >= observed] >= a/2``; upper end: the
    largest ``C`` with ``Pr[Bin(C, p) <= observed + slack] >= a/2`` (``a = 1 - confidence``).
    Both tail probabilities are monotone in ``C``, so bisection finds them.

    >>> bracketed_count_interval(0, 0, 0.5, 0.95)
    (0, 5)
    >>> lo, hi = bracketed_count_interval(500, 0, 0.1, 0.95)
    >>> lo < 5000 < hi
    True
    """
    fn = "bracketed_count_interval"
    a = 1 - check_probability(confidence, fn, "confidence", open_low=True, open_high=True)
    x, u = int(observed), int(observed) + int(slack)
    if x < 0 or u < x:
        raise ValidationError("observed", fn, "counts >= 0", (observed, slack))

    from scipy import stats  # here: scipy is slow to import

    def sf(c: int) -> float:  # Pr[Bin(c, p) >= x]
        return float(stats.binom.sf(x - 1, c, p))

    def cdf(c: int) -> float:  # Pr[Bin(c, p) <= u]
        return float(stats.binom.cdf(u, c, p))

    lower = 0
    if x > 0:
        lo, hi = x - 1, max(x, 2 * math.ceil(x / p))  # sf(lo) = 0 < a/2
        while sf(hi) < a / 2:
            lo, hi = hi, 2 * hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if sf(mid) >= a / 2:
                hi = mid
            else:
                lo = mid
        lower = hi
    lo, hi = u, max(u + 1, 2 * math.ceil((u + 1) / p))  # cdf(u) = 1 >= a/2
    while cdf(hi) >= a / 2:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cdf(mid) >= a / 2:
            lo = mid
        else:
            hi = mid
    return lower, lo


@dataclass(frozen=True)
class RangeAnswer:
    """The answer to one range query (see the module notes for the bounds).

    Attributes:
        requested: the range asked for.
        range: the range answered, ``requested`` snapped to leaf boundaries.
        estimate: ``X / p``, the estimated number of values in ``range``.
        fraction: ``estimate`` over the estimated total (level 1), 0 when that is 0.
        nodes: how many tree nodes the range took.
        withheld_nodes: how many of them were below the threshold.
        pruning_bound: ``withheld_nodes (tau - 1) / p``, the largest count they can hide.
        lemma_bound: the worst case over all releases, ``max_nodes (tau - 1) / p``.
        lower, upper: exact confidence interval for the true count.
        confidence: its level.
    """

    requested: tuple[float, float]
    range: tuple[float, float]
    estimate: float
    fraction: float
    nodes: int
    withheld_nodes: int
    pruning_bound: float
    lemma_bound: float
    lower: int
    upper: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested": list(self.requested),
            "range": list(self.range),
            "estimate": self.estimate,
            "fraction": self.fraction,
            "nodes": self.nodes,
            "withheld_nodes": self.withheld_nodes,
            "pruning_bound": self.pruning_bound,
            "lemma_bound": self.lemma_bound,
            "lower": self.lower,
            "upper": self.upper,
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class HierarchicalRelease:
    """What a :class:`HierarchicalHistogram` released: per level, the released bucket ids
    (sorted) and their sampled counts, plus public metadata. ``diagnostics`` holds exact facts
    about the input (values, clamped, dropped) that are NOT private and not part of the
    release."""

    hierarchy: Hierarchy
    sampling_rate: float
    threshold: int
    level_keys: tuple[I64, ...]
    level_values: tuple[I64, ...]
    metadata: dict[str, Any]
    confidence: float = 0.95
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def _cumulative(self) -> tuple[I64, ...]:
        """Per level, the running sums of the released counts (a leading 0), computed once."""
        out = []
        for v in self.level_values:
            cs = np.zeros(v.shape[0] + 1, dtype=np.int64)
            np.cumsum(v, out=cs[1:])
            out.append(cs)
        return tuple(out)

    def level_sum(self, level: int, start: Any, stop: Any) -> Any:
        """Sum of released sampled counts of buckets ``start .. stop - 1`` of ``level``
        (vectorised over ``start``/``stop``)."""
        keys = self.level_keys[level - 1]
        cs = self._cumulative[level - 1]
        return cs[np.searchsorted(keys, stop)] - cs[np.searchsorted(keys, start)]

    def _node_value(self, level: int, index: int) -> int | None:
        """The released sampled count of one node, None when it was withheld."""
        keys = self.level_keys[level - 1]
        i = int(np.searchsorted(keys, index))
        if i < keys.shape[0] and int(keys[i]) == index:
            return int(self.level_values[level - 1][i])
        return None

    def released(self, level: int, index: int) -> bool:
        return self._node_value(level, index) is not None

    @property
    def total_sampled(self) -> int:
        """Released sampled count of the whole range (the level-1 buckets)."""
        return int(self.level_values[0].sum())

    @property
    def total_estimate(self) -> float:
        return self.total_sampled / self.sampling_rate

    def prefix_sampled(self, boundaries: npt.ArrayLike) -> I64:
        """For each leaf boundary ``j``, the released sampled count of ``[lo, t_j)`` summed over
        the greedy decomposition of the prefix (vectorised; :func:`.hierarchy.decompose`)."""
        h = self.hierarchy
        j = np.asarray(boundaries, dtype=np.int64)
        total = np.zeros(j.shape, dtype=np.int64)
        for level in range(h.levels, 1, -1):
            start = (j // h.branching) * h.branching
            total += self.level_sum(level, start, j)
            j = j // h.branching
        total += self.level_sum(1, np.zeros_like(j), j)
        return total

    def range(self, a: float, b: float) -> RangeAnswer:
        """Answer ``[a, b)`` (snapped to the nearest leaf boundaries; ``lo <= a <= b <= hi``)."""
        fn = "HierarchicalRelease.range"
        h = self.hierarchy
        i, j = h.snap(a, fn), h.snap(b, fn)
        if float(a) > float(b):
            raise ValidationError("a", fn, f"<= b = {b:g}", a)
        nodes = h.decompose(i, j)
        sampled = 0
        withheld = 0
        for level, index in nodes:
            value = self._node_value(level, index)
            if value is None:
                withheld += 1
            else:
                sampled += value
        p, tau = self.sampling_rate, self.threshold
        lower, upper = bracketed_count_interval(sampled, withheld * (tau - 1), p, self.confidence)
        beta, depth = h.branching, h.levels
        full = i == 0 and j == h.leaves
        prefix = (i == 0 or j == h.leaves) and not full
        worst = beta if full else (depth * (beta - 1) if prefix else (2 * depth - 1) * (beta - 1))
        if i == j:
            worst = 0
        est = sampled / p
        total = self.total_estimate
        return RangeAnswer(
            requested=(float(a), float(b)),
            range=(float(h.boundary(i)), float(h.boundary(j))),
            estimate=est,
            fraction=est / total if total > 0 else 0.0,
            nodes=len(nodes),
            withheld_nodes=withheld,
            pruning_bound=withheld * (tau - 1) / p,
            lemma_bound=worst * (tau - 1) / p,
            lower=lower,
            upper=upper,
            confidence=self.confidence,
        )


class HierarchicalHistogram(Declared):
    """``L`` sample-and-threshold histograms of bucket ids, one per level (Section 4.2).

    Args:
        epsilon: total epsilon (split over the levels by ``composition``).
        delta: total delta (each level gets ``delta / levels``).
        lo, hi: the public range ``[lo, hi)``.
        branching: beta >= 2.
        levels: L >= 1 (``branching^levels <= 2^22``).
        confidence: level of the range answers' intervals.
        sampling_rate, threshold, alpha, calibration: passed to every level's
            :class:`~privhist.mechanisms.sampling.SampleAndThreshold` (rate bound and
            calibration apply to the per-level epsilon).
        composition: ``"pld"`` (default) or ``"basic"``: how the per-level epsilon is chosen
            (:func:`.hierarchy.split_sample_and_threshold`).

    >>> from privhist import SeededRandom
    >>> hh = HierarchicalHistogram(1.0, 1e-8, branching=4, levels=3)
    >>> hh.guarantee().epsilon <= 1.0, hh.level_mechanism.epsilon > 1 / 3
    (True, True)
    >>> r = hh.release(np.linspace(0, 0.999, 100_000), SeededRandom(3))
    >>> ans = r.range(0.0, 0.5)
    >>> ans.lower <= 50_050 <= ans.upper, ans.nodes
    (True, 2)
    """

    declared: ClassVar[dict[str, Constraint]] = {
        **BUDGET_CONSTRAINTS,
        **Hierarchy.declared,
        **step_constraints(),
        "composition": COMPOSITION,
    }

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        lo: float = 0.0,
        hi: float = 1.0,
        branching: int = 2,
        levels: int = 8,
        confidence: float = 0.95,
        sampling_rate: float | Fraction | None = None,
        threshold: int | None = None,
        alpha: float | Fraction | None = None,
        calibration: str | None = None,
        composition: str | None = None,
    ) -> None:
        self.hierarchy = Hierarchy(lo, hi, branching, levels)
        self.epsilon: float = self.check_parameter("epsilon", epsilon)
        self.delta: float = self.check_parameter("delta", delta)
        self.confidence: float = self.check_parameter("confidence", confidence)
        # the sample-and-threshold options: also checked (and converted) by each level
        self.check_parameters(
            sampling_rate=sampling_rate, threshold=threshold, alpha=alpha, calibration=calibration
        )
        self.composition_rule: str = self.check_parameter("composition", composition) or "pld"
        self.level_mechanism = split_sample_and_threshold(
            self.epsilon,
            self.delta,
            self.hierarchy.levels,
            confidence=self.confidence,
            sampling_rate=sampling_rate,
            threshold=threshold,
            alpha=alpha,
            calibration=calibration,
            composition=self.composition_rule,
        )
        self._composition: ReleasesComposition | None = None

    @property
    def sampling_rate(self) -> Fraction:
        return self.level_mechanism.sampling_rate

    @property
    def threshold(self) -> int:
        return self.level_mechanism.threshold

    def composition(self) -> ReleasesComposition:
        """The composition of the levels (:func:`.hierarchy.compose`)."""
        if self._composition is None:
            self._composition = compose_releases(
                self.level_mechanism, self.hierarchy.levels, self.delta
            )
        return self._composition

    def event(self) -> PrivacyEvent:
        """The levels as a privacy event (:meth:`.hierarchy.ReleasesComposition.event`)."""
        return self.composition().event()

    def guarantee(self) -> Budget:
        """The guarantee of the levels: the smaller of their basic and certified PLD
        compositions (:attr:`.hierarchy.ReleasesComposition.guarantee`)."""
        return self.composition().guarantee

    def parameters(self) -> dict[str, Any]:
        h = self.hierarchy
        m = self.level_mechanism
        return {
            "range": [h.lo, h.hi],
            "branching": h.branching,
            "levels": h.levels,
            "leaf_width": h.leaf_width,
            "sampling_rate": float(m.sampling_rate),
            "threshold": m.threshold,
            "epsilon_per_level": m.epsilon,
            "delta_per_level": m.delta_exact,
            "composition": self.composition_rule,
        }

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        return composed_metadata("hierarchical", self.parameters(), self.composition(), rng)

    def release(
        self, values: npt.ArrayLike, rng: RandomSource | None = None, *, clamp: bool = False
    ) -> HierarchicalRelease:
        """Release the ``L`` level histograms of ``values`` (one value per client).

        Raises:
            InputDataError: no values, or values outside ``[lo, hi)`` without ``clamp``.
        """
        fn = "HierarchicalHistogram.release"
        if rng is None:
            rng = SecureRandom()
        if not isinstance(rng, RandomSource):
            raise ValidationError("rng", fn, "a RandomSource", type(rng).__name__)
        h = self.hierarchy
        mapped = h.map_values(values, clamp=clamp, function=fn)
        if mapped.positions.shape[0] == 0:
            raise InputDataError(f"{fn} needs at least one value; got an empty population")
        keys_out: list[I64] = []
        values_out: list[I64] = []
        for level in range(1, h.levels + 1):
            ids = mapped.positions // h.branching ** (h.levels - level)
            uniq, cnt = np.unique(ids, return_counts=True)
            rel = self.level_mechanism.release(
                Counts.from_arrays(uniq.astype(np.int64), cnt.astype(np.int64), function=fn), rng
            )
            keys_out.append(np.asarray(rel.keys, dtype=np.int64))
            values_out.append(np.asarray(rel.values, dtype=np.int64))
        return HierarchicalRelease(
            hierarchy=h,
            sampling_rate=float(self.sampling_rate),
            threshold=self.threshold,
            level_keys=tuple(keys_out),
            level_values=tuple(values_out),
            metadata=self.metadata(rng),
            confidence=self.confidence,
            diagnostics={
                "values": int(mapped.positions.shape[0]),
                "clamped": mapped.clamped,
                "dropped_missing": mapped.dropped,
            },
        )
