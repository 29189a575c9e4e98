"""Binary-search quantiles with fixed-size cohorts (Bharadwaj & Cormode 2022, Sections 3.2 and
4.2): every round contacts exactly ``m`` of the ``n`` clients, drawn uniformly without
replacement, instead of a Poisson sample.

**Why the release changes.** Section 3.2 of the paper explains why a fixed-size sample cannot
simply be thresholded: with ``m`` public, the withheld mass is ``m`` minus the released counts,
and one unique item forces ``delta >= m / n``. In a two-bucket round (``x < t`` and ``x >= t``)
the count of one bucket is ``m`` minus the other's, so withholding a small bucket alone hides
nothing. Here a round therefore releases *both* counts ``(C, m - C)`` when both reach the
threshold ``tau`` and nothing (``withheld``) otherwise: the output is ``T(C) = C`` for
``tau <= C <= m - tau`` and ``⊥`` else, a function of ``C`` alone.

**Neighbouring relation.** Fixed-size sampling without replacement goes with the *substitution*
relation (one client's value replaced, ``n`` unchanged), as in Balle, Barthe & Gaboardi,
"Privacy amplification by subsampling: tight analyses via couplings and divergences" (NeurIPS
2018), whose sampling-without-replacement results are stated for that relation; ``n`` is then
the same for all neighbours, and is taken as a public parameter (``clients``) that the data must
match. Their amplification theorem bounds ``M o S_wor`` by ``(log(1 + (m/n)(e^eps - 1)),
(m/n) delta)`` for an ``(eps, delta)``-DP ``M`` on the sample; it does not apply here, since
thresholding without noise is not DP on the sample (``eps = inf``): the privacy comes from the
sampling alone, as in the paper's Theorem 1 for Poisson sampling. So the round's profile is
computed exactly instead.

**Exact per-round profile.** Replacing one client's value moves it across ``t`` or not; if
not, the outputs are identical. If it does, the number ``N`` of clients below ``t`` changes by
one, and ``C ~ Hypergeometric(n, N, m)`` (population ``n``, ``N`` successes, ``m`` draws). So
the round is ``(eps, delta)``-DP for substitution iff for every ``N`` in ``[0, n - 1]`` both
``H_(e^eps)(P_(N+1) || P_N)`` and ``H_(e^eps)(P_N || P_(N+1))`` are at most ``delta``, where
``P_N`` is the law of ``T(C)``. The likelihood ratio
``r_N(c) = Pr_(N+1)[C = c] / Pr_N[C = c] = (N + 1)(n - N - m + c) / ((N + 1 - c)(n - N))``
increases in ``c``, so ``[P_(N+1)(c) - e^eps P_N(c)]_+`` is positive on a suffix ``c > c*`` of the
released range and ``[P_N(c) - e^eps P_(N+1)(c)]_+`` on a prefix: each divergence is one
difference of hypergeometric tail sums plus the ``⊥`` term. The code sums the positive parts
themselves (prefix sums give every ``tau`` at once), so no cut has to be located. The pmfs come
from log-factorial tables (``gammaln``) and the tails from running sums, in double precision
with a relative and an absolute margin (not interval arithmetic:
``tests/analytics/test_quantiles_cohort.py`` checks the profile against exact rational
enumeration of both laws on small populations, both directions). All ``N`` are
evaluated (vectorised), so the profile is a maximum over every neighbouring pair.

The threshold is the smallest ``tau`` whose profile at the round's ``eps`` is at most the round's
``delta`` (a larger ``tau`` is post-processing — it merges outputs into ``⊥`` — so the profile is
non-increasing in ``tau`` and bisection applies). The ``k h`` rounds (``k`` quantiles, ``h``
rounds each) each get ``(eps / (k h), delta / (k h))`` and draw fresh cohorts; adaptive basic
composition (Dwork & Roth 2014, Theorem 3.16) gives ``(eps, delta)`` for substitution neighbours.
The cohort is a uniformly random ``m``-subset drawn exactly
(:func:`privhist.noise.subset.uniform_subset`).

**The search.** Round ``r`` splits at ``t_r``; a released round moves ``t`` towards the side
holding the ``q`` fraction of the cohort, as the Poisson version does. A withheld round means
that one side holds fewer than ``tau`` of the ``m`` sampled clients; which side is not revealed,
so the search stops there and answers the current interval (``withheld`` counts it; the
remaining rounds are not run, and their budget is spent all the same).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent
from privhist.analytics.hierarchy import (
    BUDGET_CONSTRAINTS,
    STEPS,
    Hierarchy,
    ReleasesComposition,
    split_budget,
)
from privhist.analytics.quantile_answers import (
    QuantileAnswer,
    QuantileResult,
    run_inputs,
    sampling_error,
)
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource
from privhist.noise.subset import uniform_subset

__all__ = [
    "FixedCohortQuantiles",
    "cohort_profile",
    "cohort_round_delta",
    "cohort_threshold",
]

#: the largest ``n (m + 1)`` whose profile is computed (one pass over every N, vectorised)
MAX_WORK = 120_000_000
#: relative margin added to the double-precision profile before it is compared or stated
#: (log-factorials of size up to n log n carry absolute errors near n log n 2**-52, about
#: 3e-9 relative at n = 10**6 on the pmfs; the tests compare with exact rational values)
NUMERIC_MARGIN = 1e-6
#: absolute margin per cohort draw added as well: the tails are differences of running sums of
#: up to ``m + 1`` terms near 1, whose rounding is absolute (about ``(m + 1) 2**-53``), which a
#: relative margin does not cover once the round's delta is tiny
ABSOLUTE_MARGIN_PER_DRAW = 2.0**-48
#: elements per block of the (N, c) table
_BLOCK = 1 << 18


def _log_binom(table: npt.NDArray[np.float64], a: Any, b: Any) -> Any:
    """``ln C(a, b)`` for integer arrays (``-inf`` outside ``0 <= b <= a``), from
    ``table[k] = ln k!``."""
    ok = (b >= 0) & (b <= a)
    bb = np.where(ok, b, 0)
    out = table[a] - table[bb] - table[np.where(ok, a - bb, 0)]
    return np.where(ok, out, -np.inf)


def cohort_profile(n: int, m: int, epsilon: float) -> npt.NDArray[np.float64]:
    """``delta[tau - 1]`` for ``tau = 1..floor(m / 2)``: the round's delta at ``epsilon`` with
    threshold ``tau``, the maximum over every ``N`` in ``[0, n - 1]`` and both directions of
    ``H_(e^eps)`` between the laws of ``T(C)`` for ``N`` and ``N + 1`` (module notes).

    One pass: for each ``N`` the two pmfs (log-binomials), the positive parts
    ``[a_c - e^eps b_c]_+`` and their prefix sums give the released part for every ``tau`` at
    once, and prefix sums of the pmfs give the ``⊥`` masses. The map ``N -> n - 1 - N``,
    ``c -> m - c`` swaps the two directions of a pair, so ``N <= (n - 1) / 2`` suffices.

    >>> d = cohort_profile(1000, 100, 1.0)
    >>> bool(d[0] > 0.09), bool(d[11] < 1e-6), bool((np.diff(d) <= 1e-15).all())
    (True, True, True)
    """
    top = m // 2
    worst = np.zeros(top)
    if top == 0:
        return worst
    e = math.exp(epsilon)
    from scipy.special import gammaln  # here: scipy is slow to import

    table = gammaln(np.arange(n + 2, dtype=np.float64) + 1)  # ln k!, k = 0..n+1
    off = m + 2  # ext[k + off] = ln k!, and +inf for k < 0 (a zero binomial)
    ext = np.concatenate((np.full(off, np.inf), table))
    c = np.arange(m + 1, dtype=np.int64)
    col = -table[c] - table[m - c]
    taus = np.arange(1, top + 1)
    hi_edge = m - taus + 1
    log_total = float(_log_binom(table, np.int64(n), np.int64(m)))
    last = (n - 1) // 2
    rows = max(1, _BLOCK // (m + 1))
    for start in range(0, last + 1, rows):
        big_n = np.arange(start, min(last, start + rows - 1) + 1, dtype=np.int64)[:, None]
        # ln Pr_N[C = c] = ln N! + ln (n-N)! - ln C(n, m) - ln c! - ln (m-c)! - ln (N-c)!
        #                  - ln (n-N-m+c)!
        row0 = table[big_n] + table[n - big_n] - log_total
        row1 = table[big_n + 1] + table[n - big_n - 1] - log_total
        p0 = np.exp(row0 + col - ext[big_n - c + off] - ext[n - big_n - m + c + off])
        p1 = np.exp(row1 + col - ext[big_n + 1 - c + off] - ext[n - big_n - 1 - m + c + off])
        zero = np.zeros((p0.shape[0], 1))
        cum0 = np.hstack((zero, np.cumsum(p0, axis=1)))  # cum[:, k] = sum_(c < k) p_c
        cum1 = np.hstack((zero, np.cumsum(p1, axis=1)))
        bot0 = cum0[:, taus] + (cum0[:, m + 1 : m + 2] - cum0[:, hi_edge])
        bot1 = cum1[:, taus] + (cum1[:, m + 1 : m + 2] - cum1[:, hi_edge])
        for a, b, bot_a, bot_b in ((p1, p0, bot1, bot0), (p0, p1, bot0, bot1)):
            F = np.hstack((zero, np.cumsum(np.maximum(a - e * b, 0.0), axis=1)))
            released = F[:, hi_edge] - F[:, taus]  # c in [tau, m - tau]
            d = released + np.maximum(bot_a - e * bot_b, 0.0)
            worst = np.maximum(worst, d.max(axis=0))
    return worst


def check_work(n: int, m: int, function: str) -> None:
    if n * (m + 1) > MAX_WORK:
        raise ValidationError(
            "cohort_size",
            function,
            f"such that clients x (cohort_size + 1) <= {MAX_WORK:.0e} (the exact profile "
            f"visits every client count; here {n} x {m + 1})",
            m,
        )


def cohort_round_delta(n: int, m: int, tau: int, epsilon: float) -> float:
    """The round's delta at ``epsilon`` with threshold ``tau`` (:func:`cohort_profile`);
    ``tau > m / 2`` withholds everything (delta 0).

    >>> cohort_round_delta(1000, 100, 1, 1.0) > 0.09  # tau = 1: about the paper's m / n
    True
    """
    if 2 * tau > m:
        return 0.0
    return float(cohort_profile(n, m, epsilon)[tau - 1])


def cohort_threshold(
    n: int, m: int, epsilon: float, delta: float, function: str
) -> tuple[int, float]:
    """``(tau, delta_tau)``: the smallest ``tau`` whose round delta (and every larger ``tau``'s),
    raised by the relative margin :data:`NUMERIC_MARGIN` and the absolute margin
    ``(m + 2)`` :data:`ABSOLUTE_MARGIN_PER_DRAW`, is at most ``delta``, and that raised delta
    (module notes)."""
    check_work(n, m, function)
    prof = cohort_profile(n, m, epsilon) * (1 + NUMERIC_MARGIN) + (m + 2) * ABSOLUTE_MARGIN_PER_DRAW
    bad = np.nonzero(prof > delta)[0]
    tau = int(bad[-1]) + 2 if bad.size else 1
    if 2 * tau > m:
        raise ValidationError(
            "cohort_size",
            function,
            f"a size for which some threshold tau <= m/2 meets ({epsilon:.4g}, {delta:.3g}) "
            f"per round with {n} clients; none does at m/n = {m / n:.3g} (a smaller "
            "fraction of the clients, or a larger cohort at the same fraction, helps)",
            m,
        )
    return tau, float(prof[tau - 1])


class FixedCohortQuantiles(Declared):
    """Binary-search quantiles, each round on a fixed-size cohort of ``cohort_size`` of the
    ``clients`` clients (module notes). Substitution neighbours; ``clients`` is public and
    the data must hold exactly that many values.

    >>> from privhist import SeededRandom
    >>> fc = FixedCohortQuantiles(1.0, 1e-6, clients=5_000, cohort_size=500, steps=5)
    >>> fc.threshold, fc.composition().basic.epsilon, fc.composition().basic.delta <= 1e-6
    (22, 1.0, True)
    >>> a = fc.run(np.linspace(0, 0.999, 5_000), [0.5], SeededRandom(1)).answers[0]
    >>> a.lower <= 0.5 <= a.upper + 1 / 32, a.withheld
    (True, 0)
    """

    declared: ClassVar[dict[str, Constraint]] = {
        **BUDGET_CONSTRAINTS,
        "clients": Constraint.integer(1),
        "cohort_size": Constraint.integer(2, note=" and <= clients"),
        "lo": Hierarchy.declared["lo"],
        "hi": Hierarchy.declared["hi"],
        "steps": STEPS,
        "quantiles": Constraint.integer(1),
    }

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        clients: int,
        cohort_size: int,
        lo: float = 0.0,
        hi: float = 1.0,
        steps: int = 8,
        quantiles: int = 1,
        confidence: float = 0.95,
    ) -> None:
        fn = "FixedCohortQuantiles"
        self.epsilon: float = self.check_parameter("epsilon", epsilon)
        self.delta: float = self.check_parameter("delta", delta)
        self.clients: int = self.check_parameter("clients", clients)
        self.cohort_size: int = self.check_parameter("cohort_size", cohort_size)
        if self.cohort_size > self.clients:  # relational
            raise ValidationError(
                "cohort_size", fn, f"in [2, clients = {self.clients}]", cohort_size
            )
        self.range = Hierarchy(lo, hi, 2, 1)
        self.steps: int = self.check_parameter("steps", steps)
        self.quantiles: int = self.check_parameter("quantiles", quantiles)
        self.confidence: float = self.check_parameter("confidence", confidence)
        self.releases = self.steps * self.quantiles
        # rounded down, so that the rounds never add up to more than (epsilon, delta)
        self.round_epsilon, round_delta = split_budget(self.epsilon, self.delta, self.releases)
        self.threshold, self.round_delta = cohort_threshold(
            self.clients, self.cohort_size, self.round_epsilon, round_delta, fn
        )

    def event(self) -> ApproxDPEvent:
        """The rounds as a privacy event: ``releases`` rounds, each ``(eps_r, delta_r)``-DP for
        substitution neighbours (its exact hypergeometric profile at ``eps_r``)."""
        return ApproxDPEvent(self.round_epsilon, self.round_delta, self.releases)

    def guarantee(self) -> Budget:
        """The accountant's guarantee of :meth:`event` (basic composition of the rounds)."""
        return guarantee_of(self.event())

    def composition(self) -> ReleasesComposition:
        """Basic composition of the rounds (substitution neighbours), by the accountant."""
        per = Budget(self.round_epsilon, self.round_delta)
        total = self.guarantee()
        return ReleasesComposition(self.releases, per, total, total, per, run_event=self.event())

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        comp = self.composition()
        statement = (
            f"{self.releases} fixed-cohort rounds ({self.cohort_size} of {self.clients} "
            f"clients, without replacement), each {comp.per_release} for one client's value "
            f"replaced (exact hypergeometric profile): {comp.basic} by basic composition"
        )
        meta: dict[str, Any] = {
            "method": "binary-search (fixed cohort)",
            "parameters": {
                "range": [self.range.lo, self.range.hi],
                "steps": self.steps,
                "quantiles": self.quantiles,
                "resolution": (self.range.hi - self.range.lo) / 2**self.steps,
                "clients": self.clients,
                "cohort_size": self.cohort_size,
                "threshold": self.threshold,
                "epsilon_per_release": self.round_epsilon,
                "delta_per_release": self.round_delta,
                "release_rule": "both bucket counts if both reach the threshold, else withheld",
            },
            "guarantee": {
                "epsilon": comp.basic.epsilon,
                "delta": comp.basic.delta,
                "neighbouring": "replace one client's value (n public)",
                "statement": statement,
            },
        }
        if rng is not None:
            meta["randomness"] = rng.to_dict()
            if not rng.private:
                meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
        return meta

    def run(
        self,
        values: npt.ArrayLike,
        qs: Any,
        rng: RandomSource | None = None,
        *,
        clamp: bool = False,
    ) -> Any:
        """Answer the quantile levels ``qs`` (exactly ``quantiles`` of them)."""
        fn = "FixedCohortQuantiles.run"
        levels, rng, x, facts = run_inputs(self.quantiles, self.range, values, qs, rng, clamp, fn)
        if x.shape[0] != self.clients:
            # n is the same for all substitution neighbours, so refusing reveals nothing
            raise InputDataError(
                f"{fn}: the data hold {x.shape[0]} values but clients={self.clients} was "
                "declared (fixed cohorts need the exact public number of clients)"
            )
        m, tau = self.cohort_size, self.threshold
        answers = []
        for q in levels:
            a, b = self.range.lo, self.range.hi
            withheld = 0
            for _ in range(self.steps):
                t = (a + b) / 2
                cohort = uniform_subset(self.clients, m, rng)
                below = int((x[cohort] < t).sum())
                if not tau <= below <= m - tau:
                    withheld = 1
                    break
                if below >= q * m:
                    b = t
                else:
                    a = t
            answers.append(
                QuantileAnswer(
                    q=q,
                    value=b,
                    lower=a,
                    upper=b,
                    pruning_rank_error=0.0 if not withheld else min(1.0, tau / m),
                    sampling_rank_error=sampling_error(self.confidence, m),
                    withheld=withheld,
                )
            )
        return QuantileResult(answers, self.metadata(rng), facts)
