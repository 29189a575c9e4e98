"""Optimal key (partition) selection, with optional noisy counts.

Reporting probabilities. For a key held by ``n`` privacy units the key is released with probability
``pi_n``, where ``pi_0 = 0`` and

    pi_n = min( e^eps * pi_(n-1) + delta,  1 + e^-eps * (pi_(n-1) + delta - 1),  1 )

— Algorithm 3 of Cohen, Geri, Sarlos & Stemmer, "Differentially Private Weighted Sampling"
(``private-weighted-sampling.txt``, section 4) with inclusion probabilities ``q_i = 1``, which is
the optimal partition selection of Desfontaines, Voss, Gipson & Mandayam (2022). Each step takes
the largest value that both DP constraints between neighbouring counts ``n-1`` and ``n`` allow
(so one of them is tight), and by induction no (eps, delta)-DP rule releases any key with higher
probability.

Exactness. ``e^eps`` is irrational, so the recursion is run with a rational ``r <= e^eps`` (and
``1/r >= e^-eps``) from rigorous interval bounds, and every ``pi_n`` is rounded *down* to a multiple
of ``2**-B``. Lowering ``pi_n`` keeps both constraints (the first bounds ``pi_n`` above; the second
is ``1 - pi_(n-1) <= e^eps (1 - pi_n) + delta``, which a smaller ``pi_n`` only loosens), and the
next step is computed from the rounded value, so the rounded sequence satisfies the DP constraints
exactly. The grid follows delta: ``B = 62`` while ``delta >= 2**-62`` (the grid of
:mod:`privhist.mechanisms._grid`, shared with private weighted sampling), otherwise
``B = 62 + ceil(log2(1 / delta))``, so ``pi_1 = delta`` keeps 62 significant bits at any delta
(``delta = 1e-200`` is released with probability ``1e-200`` to 18 digits). Each rounding loses less
than ``2**-B``, and a loss carried into later steps grows by at most a factor ``e^eps`` per step,
so the shortfall against the real-valued optimum stays far below any probability that matters.

Sampling. A key is kept when a uniform real ``U = 0.w1 w2 ...`` (independent 64-bit words) is
below ``N / 2**B``: one word is compared with ``floor(N 2**64 / 2**B)`` and only a tie draws
further words, compared with the next exact binary digits of ``N / 2**B``
(:func:`privhist.noise.bernoulli.compare_table`, :class:`privhist.noise._exact.LazyUniform`), so
``P[kept] = N / 2**B`` exactly for any ``B``, at an expected cost of ``1 + 2**-64 + ...`` words.

User-level data: selection runs on the number of distinct units holding a key, which one unit
changes by at most one on each of at most ``k = max_partitions_contributed`` keys; each key gets
``(eps_s / k, delta / k)`` and basic composition gives ``(eps_s, delta)``.

Counts. Unless ``keys_only``, the budget is split: ``eps_s = selection_fraction * eps`` for
selection and ``eps_c = eps - eps_s`` for discrete Laplace noise on the counts of the selected keys
(scale ``k c / eps_c``); by adaptive basic composition the release is ``(eps, delta)``-DP.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, ClassVar

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.accounting.profile import NOT_RELEASED
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.validation import Constraint

# ONE, ONE_BITS and grid_bits live in _grid (shared with pws) and are re-exported from here
from privhist.mechanisms._grid import ONE as ONE
from privhist.mechanisms._grid import ONE_BITS as ONE_BITS
from privhist.mechanisms._grid import LazyBernoulliTable
from privhist.mechanisms._grid import grid_bits as grid_bits
from privhist.mechanisms._noise import PREC, LaplaceCountNoise
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.registry import register
from privhist.noise._exact import ceil_div, exp_bounds

#: refuse parameters whose recursion would need more steps than this to reach 1 (about
#: ``2 ln(1 / delta) / eps``; a step is a few big-integer operations, so this answers in seconds)
MAX_STEPS = 200_000
#: bits of the rational ``r <= e^eps`` used by the recursion
_R_BITS = 128


def _log(x: Fraction) -> float:
    return math.log(x.numerator) - math.log(x.denominator)


def predicted_steps(epsilon: Fraction, delta: Fraction) -> float:
    """About how many steps the recursion takes to reach 1: ``2 L + 3`` with
    ``L = ln((e^eps - 1 + 2 delta) / (delta (e^eps + 1))) / eps`` (Cohen et al., equation 3).

    The first phase (``pi_n`` growing by ``e^eps`` per step) lasts ``L + 1`` steps (Lemma 4.2);
    then ``1 - pi_n`` shrinks by ``e^-eps`` per step towards ``-delta / (e^eps - 1) < 0``, which
    takes at most another ``L + 1`` steps to reach 0.

    >>> round(predicted_steps(Fraction(1, 100), Fraction(1, 10**6)))  # the recursion takes 1706
    1706
    """
    e = float(epsilon)
    L = (math.log(math.expm1(e) + 2 * float(delta)) - _log(delta) - math.log1p(math.exp(e))) / e
    return 2 * max(L, 0.0) + 3


def smallest_epsilon(delta: Fraction, max_steps: int = MAX_STEPS) -> float:
    """The smallest epsilon (per key) whose recursion takes at most ``max_steps`` steps at
    ``delta`` (bisection on :func:`predicted_steps`, which decreases in epsilon), rounded up to
    three significant digits.

    >>> smallest_epsilon(Fraction(1, 10**10))
    0.000135
    """
    lo, hi = 1e-12, 100.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if predicted_steps(Fraction(mid), delta) > max_steps:
            lo = mid
        else:
            hi = mid
    digits = 2 - math.floor(math.log10(hi))
    return float(math.ceil(hi * 10.0**digits) / 10.0**digits)


def optimal_reporting_numerators(epsilon: Fraction, delta: Fraction) -> tuple[int, ...]:
    """Numerators ``N_n`` (over 2**62) of the rounded-down optimal reporting probabilities,
    ``n = 0, 1, ...`` up to and including the first ``n`` with ``pi_n = 1``.

    The ``2**-62`` grid needs ``delta >= 2**-62``; :func:`optimal_reporting_grid` takes any delta.

    >>> nums = optimal_reporting_numerators(Fraction(1, 2), Fraction(1, 10))
    >>> nums[0], nums[1] / 2**62, nums[-1] == 2**62
    (0, 0.1, True)
    """
    if delta < Fraction(1, ONE):
        # pi_1 = floor(delta * 2**62) / 2**62 would be 0 and the recursion could not start on the
        # 2**-62 grid; optimal_reporting_grid uses a finer grid for such deltas.
        raise ValidationError(
            "delta",
            "optimal_reporting_numerators",
            f">= 2**-{ONE_BITS} per key on the 2**-62 grid (optimal_reporting_grid takes any)",
            float(delta),
        )
    return optimal_reporting_grid(epsilon, delta)[1]


@functools.lru_cache(maxsize=64)
def optimal_reporting_grid(epsilon: Fraction, delta: Fraction) -> tuple[int, tuple[int, ...]]:
    """``(B, (N_0, N_1, ...))``: the rounded-down optimal reporting probabilities ``N_n / 2**B``
    (``B = grid_bits(delta)``), up to and including the first ``n`` with ``pi_n = 1``.

    Integer arithmetic throughout: with ``r = a / 2**128 <= e^eps``, ``delta = p / q`` and
    ``D = 2**B``, ``floor(r N + delta D) = floor((a N q + p D 2**128) / (2**128 q))`` and
    ``floor(D - (D - N - delta D) / r) = D - ceil(2**128 ((D - N) q - p D) / (a q))``, which are
    the floors of the two bounds of the recursion, exactly.

    >>> B, nums = optimal_reporting_grid(Fraction(50), Fraction(10) ** -200)
    >>> B, float(Fraction(nums[1], 2**B)), f"{float(Fraction(nums[10], 2**B)):.9e}"
    (727, 1e-200, '2.707178277e-05')
    """
    fn = "optimal_selection"
    if not (0 < delta < 1):
        raise ValidationError("delta", fn, "in (0, 1) per key", float(delta))
    if epsilon <= 0:
        raise ValidationError("epsilon", fn, "> 0", float(epsilon))
    if predicted_steps(epsilon, delta) > MAX_STEPS:
        raise ValidationError(
            "epsilon",
            fn,
            f">= {smallest_epsilon(delta)} per key at delta {float(delta):.3g} per key (the "
            f"largest accepted: the optimal probabilities take about 2 ln(1/delta)/epsilon steps, "
            f"at most {MAX_STEPS})",
            float(epsilon),
        )
    bits = grid_bits(delta)
    one = 1 << bits
    a = exp_bounds(epsilon, _R_BITS)[0]  # r = a / 2**128 <= e^eps
    if a < 1 << _R_BITS:  # impossible for eps > 0; kept so the recursion always progresses
        a = 1 << _R_BITS
    p, q = delta.numerator, delta.denominator
    first_den = q << _R_BITS
    first_add = (p * one) << _R_BITS
    second_den = a * q
    nums = [0]
    n_prev = 0
    while n_prev < one:
        if len(nums) > MAX_STEPS:
            raise ValidationError(
                "epsilon", fn, "large enough for the recursion to reach 1", float(epsilon)
            )
        first = (a * n_prev * q + first_add) // first_den
        x = (one - n_prev) * q - p * one
        second = one - ceil_div(x << _R_BITS, second_den) if x > 0 else one
        n_next = min(first, second, one)
        if n_next <= n_prev:
            # impossible: with r >= 1 and delta * 2**B >= 1 both terms are >= n_prev + 1
            raise AssertionError("optimal reporting recursion made no progress")
        nums.append(n_next)
        n_prev = n_next
    return bits, tuple(nums)


@register
class OptimalSelection(Mechanism):
    """Optimal key selection (keys only, or with noisy counts from a stated budget split).

    >>> m = OptimalSelection(0.6931471805599453, 0.1, keys_only=True)
    >>> [round(float(p), 12) for p in m.reporting_probability(6)]
    [0.0, 0.1, 0.3, 0.7, 0.9, 1.0, 1.0]
    """

    name = "optimal-selection"
    #: reporting probabilities are ``_nums[n] / 2**grid_bits`` (finer than 2**-62 for tiny delta)
    grid_bits: int = ONE_BITS
    summary = "keys released with the optimal probabilities for (epsilon, delta)"
    requires_delta = True
    options: ClassVar[tuple[Option, ...]] = (
        Option("keys_only", bool, False, "release keys only; all of epsilon goes to selection"),
        Option(
            "selection_fraction",
            float,
            0.5,
            "share of epsilon spent on selection when counts are released (rest: count noise)",
            constraint=Constraint.real(0, 1, open_low=True, open_high=True),
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float,
        neighbouring: Neighbouring | None = None,
        *,
        keys_only: bool = False,
        selection_fraction: float = 0.5,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        self.keys_only: bool = self.check_option("keys_only", keys_only)
        f = self.check_option("selection_fraction", selection_fraction)
        self.selection_fraction = 1.0 if self.keys_only else f
        nb = self.neighbouring
        eps = Fraction(self.epsilon)
        self.epsilon_selection = eps if self.keys_only else eps * Fraction(self.selection_fraction)
        self.noise: LaplaceCountNoise | None = None
        if not self.keys_only:
            # the exact remainder of the budget, so the two shares never add up to more than eps
            self.noise = LaplaceCountNoise(
                nb.l1_sensitivity, eps - self.epsilon_selection, self.function_name()
            )
        l0 = nb.l0_sensitivity
        self.grid_bits, nums = optimal_reporting_grid(
            self.epsilon_selection / l0, Fraction(self.delta) / l0
        )
        # int64 on the 2**-62 grid, Python ints (object array) on finer grids
        self._nums = np.array(nums, dtype=np.int64 if self.grid_bits == ONE_BITS else object)
        # Bernoulli(N_n / 2**B) decided lazily against the exact binary digits (module notes)
        self._keep_table = LazyBernoulliTable(nums, 1 << self.grid_bits)

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "keys_only": self.keys_only,
            "selection_epsilon": float(self.epsilon_selection),
            "selection_fraction": self.selection_fraction,
            "units_always_released": len(self._nums) - 1,
            "reporting_denominator": f"2**{self.grid_bits}",
        }
        if self.noise is not None:
            out.update(self.noise.to_dict())
        return out

    def noise_std(self) -> float:
        return float("nan") if self.noise is None else self.noise.std()

    def _index(self, units: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = np.minimum(units, len(self._nums) - 1)
        return out

    def _pi(self, units: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        out: npt.NDArray[Any] = self._nums[self._index(units)]
        return out

    def reporting_numerator(self, units: int) -> int:
        """``N`` with ``P[released] = N / 2**grid_bits`` for a key held by ``units`` units."""
        return int(self._nums[min(int(units), len(self._nums) - 1)])

    def keep(self, units: npt.ArrayLike, rng: RandomSource) -> npt.NDArray[np.bool_]:
        """One exact Bernoulli(``pi_n``) draw per entry ``n`` of ``units`` (whether each key is
        released; ``pi_0 = 0``), as a release draws them.

        >>> from privhist.core.random import SeededRandom
        >>> OptimalSelection(1.0, 1e-3, keys_only=True).keep([0, 40], SeededRandom(0)).tolist()
        [False, True]
        """
        u = np.asarray(units, dtype=np.int64)
        if u.ndim != 1 or (u.size and int(u.min()) < 0):
            raise ValidationError("units", "keep", "non-negative integers", units)
        out: npt.NDArray[np.bool_] = self._keep_table.draw(self._index(u), rng)
        return out

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        idx = self._index(np.arange(max_count + 1, dtype=np.int64))
        probs = [float(Fraction(int(n), 1 << self.grid_bits)) for n in self._nums]
        out: npt.NDArray[np.float64] = np.array(probs, dtype=np.float64)[idx]
        return out

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        n, bits = self.reporting_numerator(units), self.grid_bits
        # enough bits that pi and 1 - pi are exact (a tight constraint at delta = 1e-200 compares
        # 1 - pi_n near e^-eps with delta, so 1 - pi must not be rounded at 160 bits)
        with mpmath.workprec(max(PREC, bits + 64)):
            pi = mpmath.ldexp(mpmath.mpf(n), -bits)
            miss = mpmath.ldexp(mpmath.mpf((1 << bits) - n), -bits)
            if self.noise is None:
                return KeyDistribution({NOT_RELEASED: miss, "released": pi})
            radius = self.noise.radius_for_tail()
            table, tail = self.noise.mp_pmf_table(radius)
            probs: dict[Any, Any] = {NOT_RELEASED: miss}
            for z, p in table.items():
                probs[count + z] = pi * p
            return KeyDistribution(probs, pi * tail)

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        units = counts.unit_counts
        present = units > 0
        keys, u, c = counts.keys[present], units[present], counts.counts[present]
        keep = self._keep_table.draw(self._index(u.astype(np.int64)), rng)
        keys = keys[keep]
        if self.noise is None:
            return keys, {}
        values = c[keep] + self.noise.sample(int(keep.sum()), rng)
        return keys, self.noise.columns(values, self.confidence)

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        return [
            cls(1.0, 1e-3, keys_only=True),
            cls(0.6931471805599453, 0.1, keys_only=True),
            cls(1.0, 1e-3),
            cls(0.8, 1e-2, Neighbouring.user(2, 2), selection_fraction=0.25),
            # delta per key below 2**-62 (a finer grid; 1e-200 is checked without slack in
            # tests/mechanisms/test_optimal_any_delta.py)
            cls(3.0, 5e-20, keys_only=True),
            cls(2.0, 1e-19, Neighbouring.user(2, 1)),
        ]
