"""Private quantiles from sample-and-threshold histograms (Bharadwaj & Cormode 2022, Section 4.2).

Two methods, both releasing nothing but sample-and-threshold histograms of public buckets:

* ``"hierarchical"`` ("Quantiles and range queries via hierarchical histograms"): one
  :class:`~privhist.analytics.range_query.HierarchicalHistogram` release answers any number of
  quantiles. For a level ``q`` the answer is the first leaf boundary ``t_j`` whose prefix
  ``[lo, t_j)``, answered from the fewest tree nodes (at most ``L (beta - 1)``), holds at least
  ``q`` times the released total of level 1 (all in sampled units, so ``p`` cancels). If every
  prefix estimate is within ``e`` (as a fraction) of the truth, the true fraction of values
  below ``t_j`` is at least ``q - e`` and below ``t_j - w`` (``w`` the leaf width) less than
  ``q + e``: ``t_j +- w`` is a ``q +- e`` quantile, with ``e = O((L tau)^2 / (eps n))`` by the
  paper's Lemma 1 (pruning ``L (beta - 1) tau / m`` plus sampling ``O(1/sqrt(m))``,
  ``m = p n``).
* ``"binary-search"`` ("Single quantiles via interactive search", the Lemma before Lemma 1):
  ``h`` rounds per quantile; round ``r`` releases a two-bucket histogram ``{x < t_r, x >= t_r}``
  with a fresh sample and moves ``t`` towards the side holding the ``q`` fraction of the
  *released* sampled counts (a withheld bucket counts 0). After ``h`` rounds the answer lies in
  an interval of width ``(hi - lo) 2^-h``; ``k`` quantiles cost ``k h`` releases. With
  ``cohort_size=m`` and ``clients=n`` every round instead contacts exactly ``m`` of the ``n``
  clients, without replacement (Section 3.2's fixed-size sampling), with an exact per-round
  profile under substitution neighbours: :mod:`privhist.analytics.quantiles_cohort`.

**Privacy.** Each client holds one value and adds one to exactly one bucket of every release,
so ``k`` releases, each ``(eps_k, delta_k)``-DP (``delta_k <= delta / k`` certified), compose
(:func:`.hierarchy.compose`; adaptively: binary-search split points depend only on earlier
releases). With ``composition="basic"``, ``eps_k = epsilon / k`` and the run is
``(epsilon, k delta_k)``-DP by basic composition (the paper's Lemma 4.1); by default (``"pld"``)
``eps_k`` is the largest per-release epsilon found whose certified PLD composition is within
``(epsilon, delta)`` (:func:`.hierarchy.split_sample_and_threshold`), and the guarantee is the
smaller of the two bounds.

The rank errors reported with the answers are plug-in values (they use the released total in
place of the unknown ``n``): ``pruning`` is the Lemma's worst case ``(L (beta - 1) + beta)(tau -
1)`` over the released total (numerator and denominator pruning), ``sampling`` a normal
approximation at the confidence level. The tests check the rigorous version with the true
counts.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.composition import PrivacyEvent
from privhist.analytics.hierarchy import (
    BUDGET_CONSTRAINTS,
    COMPOSITION,
    STEPS,
    Hierarchy,
    ReleasesComposition,
    compose_releases,
    composed_metadata,
    split_sample_and_threshold,
    step_constraints,
)
from privhist.analytics.quantile_answers import (
    QuantileAnswer,
    QuantileResult,
    check_levels,
    run_inputs,
    sampling_error,
)
from privhist.analytics.quantiles_cohort import FixedCohortQuantiles
from privhist.analytics.range_query import HierarchicalHistogram, HierarchicalRelease
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource

__all__ = [
    "METHODS",
    "BinarySearchQuantiles",
    "QuantileAnswer",
    "QuantileResult",
    "answer_quantiles",
    "check_levels",
    "hierarchical_quantiles",
    "private_quantiles",
    "quantile_method",
]

METHODS = ("hierarchical", "binary-search")


def hierarchical_quantiles(release: HierarchicalRelease, qs: Any) -> list[QuantileAnswer]:
    """Quantiles from a hierarchical release (first leaf boundary whose prefix reaches ``q``).

    >>> from privhist import SeededRandom
    >>> hh = HierarchicalHistogram(1.0, 1e-8, branching=4, levels=4)
    >>> r = hh.release(np.linspace(0, 0.999, 200_000), SeededRandom(5))
    >>> answers = hierarchical_quantiles(r, [0.25, 0.5])  # uniform data: true quantiles
    >>> [abs(a.value - q) < 0.02 for a, q in zip(answers, [0.25, 0.5])]
    [True, True]
    """
    levels = check_levels(qs, "hierarchical_quantiles")
    h = release.hierarchy
    prefix = release.prefix_sampled(np.arange(h.leaves + 1, dtype=np.int64))
    total = release.total_sampled
    tau = release.threshold
    pruning = (h.levels * (h.branching - 1) + h.branching) * (tau - 1) / total if total > 0 else 1.0
    sampling = sampling_error(release.confidence, total)
    out = []
    for q in levels:
        target = q * total
        j = int(np.argmax(prefix >= target))
        out.append(
            QuantileAnswer(
                q=q,
                value=float(h.boundary(j)),
                lower=float(h.boundary(max(j - 1, 0))),
                upper=float(h.boundary(j)),
                pruning_rank_error=min(1.0, pruning),
                sampling_rank_error=sampling,
            )
        )
    return out


class BinarySearchQuantiles(Declared):
    """Interactive binary search with two-bucket sample-and-threshold histograms.

    Args:
        epsilon, delta: the total budget, split evenly over ``quantiles * steps`` releases.
        lo, hi: the public range ``[lo, hi)``.
        steps: rounds ``h`` per quantile (resolution ``(hi - lo) 2^-h``).
        quantiles: how many quantiles one run answers (fixed in advance: it sets the split).
        confidence: for the plug-in sampling error.
        sampling_rate, threshold, alpha, calibration: passed to each round's
            :class:`~privhist.mechanisms.sampling.SampleAndThreshold`.
        composition: ``"pld"`` (default) or ``"basic"``: how each round's epsilon is chosen
            (:func:`.hierarchy.split_sample_and_threshold`).

    >>> from privhist import SeededRandom
    >>> bs = BinarySearchQuantiles(1.0, 1e-8, steps=6)
    >>> a = bs.run(np.linspace(0, 0.999, 100_000), [0.5], SeededRandom(2)).answers[0]
    >>> a.lower <= 0.5 <= a.upper + 1 / 64, a.upper - a.lower
    (True, 0.015625)
    """

    declared: ClassVar[dict[str, Constraint]] = {
        **BUDGET_CONSTRAINTS,
        "lo": Hierarchy.declared["lo"],
        "hi": Hierarchy.declared["hi"],
        "steps": STEPS,
        "quantiles": Constraint.integer(1),
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
        steps: int = 8,
        quantiles: int = 1,
        confidence: float = 0.95,
        sampling_rate: float | Fraction | None = None,
        threshold: int | None = None,
        alpha: float | Fraction | None = None,
        calibration: str | None = None,
        composition: str | None = None,
    ) -> None:
        self.epsilon: float = self.check_parameter("epsilon", epsilon)
        self.delta: float = self.check_parameter("delta", delta)
        self.range = Hierarchy(lo, hi, 2, 1)
        self.steps: int = self.check_parameter("steps", steps)
        self.quantiles: int = self.check_parameter("quantiles", quantiles)
        self.confidence: float = self.check_parameter("confidence", confidence)
        # the sample-and-threshold options: also checked (and converted) by each round
        self.check_parameters(
            sampling_rate=sampling_rate, threshold=threshold, alpha=alpha, calibration=calibration
        )
        self.releases = self.steps * self.quantiles
        self.composition_rule: str = self.check_parameter("composition", composition) or "pld"
        self.step_mechanism = split_sample_and_threshold(
            self.epsilon,
            self.delta,
            self.releases,
            confidence=self.confidence,
            sampling_rate=sampling_rate,
            threshold=threshold,
            alpha=alpha,
            calibration=calibration,
            composition=self.composition_rule,
        )
        self._composition: ReleasesComposition | None = None

    def composition(self) -> ReleasesComposition:
        if self._composition is None:
            self._composition = compose_releases(self.step_mechanism, self.releases, self.delta)
        return self._composition

    def event(self) -> PrivacyEvent:
        """The search's releases as a privacy event
        (:meth:`.hierarchy.ReleasesComposition.event`)."""
        return self.composition().event()

    def guarantee(self) -> Budget:
        """The smaller of the basic and certified PLD compositions of the releases
        (:attr:`.hierarchy.ReleasesComposition.guarantee`)."""
        return self.composition().guarantee

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        m = self.step_mechanism
        parameters = {
            "range": [self.range.lo, self.range.hi],
            "steps": self.steps,
            "quantiles": self.quantiles,
            "resolution": (self.range.hi - self.range.lo) / 2**self.steps,
            "sampling_rate": float(m.sampling_rate),
            "threshold": m.threshold,
            "epsilon_per_release": m.epsilon,
            "delta_per_release": m.delta_exact,
            "composition": self.composition_rule,
        }
        return composed_metadata("binary-search", parameters, self.composition(), rng)

    def run(
        self,
        values: npt.ArrayLike,
        qs: Any,
        rng: RandomSource | None = None,
        *,
        clamp: bool = False,
    ) -> QuantileResult:
        """Answer the quantile levels ``qs`` (exactly ``quantiles`` of them)."""
        fn = "BinarySearchQuantiles.run"
        levels, rng, x, facts = run_inputs(self.quantiles, self.range, values, qs, rng, clamp, fn)
        x.sort()
        n = x.shape[0]
        keys = np.array([0, 1], dtype=np.int64)
        m = self.step_mechanism
        answers = []
        for q in levels:
            a, b = self.range.lo, self.range.hi
            withheld = 0
            smallest = math.inf
            for _ in range(self.steps):
                t = (a + b) / 2
                below = int(np.searchsorted(x, t, side="left"))
                rel = m.release(
                    Counts.from_arrays(keys, np.array([below, n - below], dtype=np.int64)), rng
                )
                got = dict(
                    zip(np.asarray(rel.keys).tolist(), np.asarray(rel.values).tolist(), strict=True)
                )
                y_below, y_above = int(got.get(0, 0)), int(got.get(1, 0))
                withheld += (0 not in got) + (1 not in got)
                smallest = min(smallest, y_below + y_above)
                if y_below >= q * (y_below + y_above):
                    b = t
                else:
                    a = t
            tau = m.threshold
            total = 0 if not math.isfinite(smallest) else smallest
            answers.append(
                QuantileAnswer(
                    q=q,
                    value=b,
                    lower=a,
                    upper=b,
                    pruning_rank_error=min(1.0, 2 * (tau - 1) / total) if total else 1.0,
                    sampling_rank_error=sampling_error(self.confidence, total),
                    withheld=withheld,
                )
            )
        return QuantileResult(answers, self.metadata(rng), facts)


def private_quantiles(
    values: npt.ArrayLike,
    qs: Any,
    epsilon: float,
    delta: float,
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    method: str = "hierarchical",
    levels: int = 8,
    branching: int = 2,
    rng: RandomSource | None = None,
    clamp: bool = False,
    confidence: float = 0.95,
    **options: Any,
) -> QuantileResult:
    """Private quantiles of ``values`` (one per client) under ``(epsilon, delta)`` in total.

    ``method`` is ``"hierarchical"`` (``levels`` levels of ``branching``-ary buckets) or
    ``"binary-search"`` (``levels`` rounds per quantile; ``branching`` must be 2). ``options``
    go to every :class:`~privhist.mechanisms.sampling.SampleAndThreshold` (``sampling_rate``,
    ``threshold``, ``alpha``, ``calibration``), or, for binary search, ``cohort_size`` and
    ``clients`` select fixed-size cohorts
    (:class:`~privhist.analytics.quantiles_cohort.FixedCohortQuantiles`).

    Raises:
        ValidationError: a parameter or quantile level out of range.
        InputDataError: no values, or values outside ``[lo, hi)`` without ``clamp``.

    >>> from privhist import SeededRandom
    >>> res = private_quantiles(np.linspace(0, 0.999, 50_000), [0.5], 1.0, 1e-8, levels=5,
    ...                         rng=SeededRandom(1))
    >>> abs(res.answers[0].value - 0.5) <= 2 / 32, res.metadata["guarantee"]["epsilon"] <= 1.0
    (True, True)
    """
    fn = "private_quantiles"
    qlist = check_levels(qs, fn)
    estimator = quantile_method(
        len(qlist),
        epsilon,
        delta,
        lo=lo,
        hi=hi,
        method=method,
        levels=levels,
        branching=branching,
        confidence=confidence,
        function=fn,
        **options,
    )
    return answer_quantiles(estimator, values, qlist, rng, clamp=clamp)


def quantile_method(
    quantiles: int,
    epsilon: float,
    delta: float,
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    method: str = "hierarchical",
    levels: int = 8,
    branching: int = 2,
    confidence: float = 0.95,
    function: str = "quantile_method",
    **options: Any,
) -> BinarySearchQuantiles | FixedCohortQuantiles | HierarchicalHistogram:
    """The estimator :func:`private_quantiles` runs for ``quantiles`` levels, built (and every
    parameter checked) before any data is seen; answer with :func:`answer_quantiles`.

    >>> type(quantile_method(2, 1.0, 1e-8, method="binary-search")).__name__
    'BinarySearchQuantiles'
    """
    fn = function
    if method not in METHODS:
        raise ValidationError("method", fn, f"one of {', '.join(METHODS)}", method)
    cohort = options.pop("cohort_size", None)
    clients = options.pop("clients", None)
    if (cohort is None) != (clients is None):
        missing = "clients" if clients is None else "cohort_size"
        raise ValidationError(missing, fn, "given with cohort_size/clients (fixed cohorts)", None)
    if cohort is not None:
        if method != "binary-search":
            raise ValidationError("method", fn, "binary-search with cohort_size", method)
        if options:
            first = sorted(options)[0]
            raise ValidationError(
                first,
                fn,
                "absent with cohort_size (the threshold follows from m and n)",
                options[first],
            )
        if branching != 2:
            raise ValidationError("branching", fn, "2 with method binary-search", branching)
        return FixedCohortQuantiles(
            epsilon,
            delta,
            clients=clients,
            cohort_size=cohort,
            lo=lo,
            hi=hi,
            steps=levels,
            quantiles=quantiles,
            confidence=confidence,
        )
    if method == "binary-search":
        if branching != 2:
            raise ValidationError("branching", fn, "2 with method binary-search", branching)
        return BinarySearchQuantiles(
            epsilon,
            delta,
            lo=lo,
            hi=hi,
            steps=levels,
            quantiles=quantiles,
            confidence=confidence,
            **options,
        )
    return HierarchicalHistogram(
        epsilon,
        delta,
        lo=lo,
        hi=hi,
        branching=branching,
        levels=levels,
        confidence=confidence,
        **options,
    )


def answer_quantiles(
    estimator: BinarySearchQuantiles | FixedCohortQuantiles | HierarchicalHistogram,
    values: npt.ArrayLike,
    qs: Any,
    rng: RandomSource | None = None,
    *,
    clamp: bool = False,
) -> QuantileResult:
    """Run ``estimator`` (from :func:`quantile_method`) on ``values`` for the levels ``qs``."""
    if isinstance(estimator, BinarySearchQuantiles | FixedCohortQuantiles):
        result: QuantileResult = estimator.run(values, qs, rng, clamp=clamp)
        return result
    release = estimator.release(values, rng, clamp=clamp)
    return QuantileResult(
        hierarchical_quantiles(release, qs), release.metadata, release.diagnostics
    )
