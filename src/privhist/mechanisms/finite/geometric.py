"""Counting queries on finite computers: GeoSample (Theorem 4.5) and FastSample (Theorem 4.6).

Balcer & Vadhan, "Differential Privacy on Finite Computers", Section 4. A counting-query
algorithm ``M: [n] x [d]+ -> [n]`` maps a true count ``c in {0..n}`` and a uniform integer
``u in {1..d}`` to a released count (Definition 4.1); it is ``(eps, 0)``-DP for counting queries
when counts one apart give output distributions within a factor ``e^eps`` of each other.

The rounded privacy parameter (Theorems 4.5 and 4.6)
-----------------------------------------------------
For ``eps in (0, 1]`` let ``K = ceil(log2(2 / eps))`` (the smallest integer with
``2**-K <= eps / 2``) and ``eps~ = 2 ln(1 + 2**-K)``. Then ``e^(eps~/2) = 1 + 2**-K`` is
*rational*, ``eps~ <= 2 * 2**-K <= eps`` and, because ``2**-K > eps/4`` and ``ln(1 + x) / x`` is
decreasing, ``eps~ > 2 ln(1 + eps/4) >= (4/9) eps`` on ``(0, 1]`` (at ``eps -> 1`` from below,
``K = 2`` and ``2 ln(5/4) = 0.446 > 4/9``). The paper states ``eps in N^-1``; any rational
``eps`` works here because ``K`` is computed exactly (:func:`counting_k`).

Notation used throughout: ``p = 2**K``, ``q = p + 1``, ``alpha = p / q = e^(-eps~/2)``.

The bounded geometric noise (our reading of Section 4.1 with ``eps~``)
----------------------------------------------------------------------
``c + Geo(2/eps~)`` has pmf proportional to ``alpha**|z - c|``; normalised,
``Pr[G = k] = (1 - alpha) / (1 + alpha) * alpha**|k| = alpha**|k| / (2p + 1)`` (as ``q - p = 1``)
and ``Pr[G >= m] = Pr[G <= -m] = alpha**m / (1 + alpha)`` for ``m >= 1``. Let
``Z = clamp(G, -W, W)`` for a width ``W >= 1`` and::

    d_W  = q**(W - 1) (2p + 1),
    G(m) = d_W Pr[Z <= -m] = d_W alpha**m / (1 + alpha) = p**m q**(W - m)     (1 <= m <= W).

So every probability of ``Z`` is an integer over ``d_W``: the scaled CDF is
``S(k) = d_W Pr[Z <= k] = G(-k)`` for ``-W <= k < 0``, ``d_W - G(k + 1)`` for ``0 <= k < W``,
``d_W`` for ``k >= W``, and ``d_W Pr[Z = k] = p**|k| q**(W - 1 - |k|)`` for ``|k| < W``,
``p**W`` for ``|k| = W``. :class:`BoundedGeometricNoise` implements ``Z``.

Finer ratios (``step > 1``; our extension)
------------------------------------------
With ``q = p + s`` for an integer step ``s >= 1`` (``p = 2**K``), ``alpha = p / q`` and
``Pr[G = k] = (q - p) / (q + p) alpha**|k|``: ``d_W = q**(W - 1) (p + q)`` still makes every
probability an integer over it (``G(m) = p**m q**(W - m)`` as above, ``d_W Pr[Z = k] =
s p**|k| q**(W - 1 - |k|)``), the inversion and the table are unchanged (``p`` is still a power of
two), and counts one apart still differ by the factor ``q / p`` at most, so ``e^(eps~/2) = 1 + s
2**-K`` on a grid ``2**-K`` as fine as wanted; ``d`` grows by ``log2 q`` bits per unit of width.

GeoSample (Theorem 4.5)
-----------------------
``GeometricMechanism_{n, eps~}(c) = clamp(c + G, 0, n)`` (Algorithm 2). Since ``0 <= c <= n``,
clamping the noise to ``[-n, n]`` first changes nothing, so with ``W = n`` and ``d = d_n`` its CDF
is ``F_c(z) = Pr[Z <= z - c]`` for ``0 <= z < n`` and ``F_c(n) = 1``: ``d F_c(z) = S(z - c)`` is an
integer, ``log2 d = O(n log(1/eps))``, and inverse transform sampling with ``u`` uniform in
``[1, d]`` (Lemma 2.7) gives ``GeoSample_{n,eps}(c, u) = min{z : d F_c(z) >= u}``, distributed
exactly as ``GeometricMechanism_{n, eps~}(c, 1)``.

Closed-form pmf (``d``-scaled; ``0 < c < n`` shown, the ends lump the tails)::

    d Pr[Y = 0] = p**c q**(n - c),   d Pr[Y = n] = p**(n - c) q**c,
    d Pr[Y = y] = p**|y - c| q**(n - 1 - |y - c|)   for 0 < y < n.

Privacy: for counts ``c`` and ``c + 1`` each output's probabilities differ by a factor ``q / p``
at most (interior outputs by exactly ``alpha**+-1``; at ``y = 0`` the ratio is
``p**c q**(n-c) / (p**(c+1) q**(n-c-1)) = q / p``): GeoSample is ``(eps~/2, 0)``-DP for counting
queries, exactly ``ln(1 + 2**-K)``, and the bound is attained. Accuracy:
``|Y - c| <= |G|``, so ``Pr[|Y - c| > a] <= 2 alpha**(a + 1) / (1 + alpha)``.

Inversion without the table's ``n``-sized numbers. ``d F_c(z) = S(z - c)``, so
``GeoSample(c, u) = clamp(c + N, 0, n)`` with ``N = min{k : S(k) >= u}``; the noise ``N`` does not
depend on ``c`` (one table serves every count: batches are not grouped by count). With
``w = u - 1`` and ``#{m in [1, W] : x < G(m)} =: A(x)``, ``N = A(d - 1 - w) - A(w)`` (at most one of
the two is non-zero). :meth:`BoundedGeometricNoise.from_uniform` computes this exactly with a
ladder of powers ``q**(2**i - 1)`` and ``bit_length(W)`` steps of binary lifting, always all of
them: ``O(log W)`` multiplications of ``O(W K)``-bit integers (the ``Õ(n log(1/eps))`` of
Theorem 4.5).

The vectorised sampler draws the same ``u`` lazily. Let ``R = bit_length(d)``, ``s = R - 64``;
the top word ``t = w >> s`` of a uniform ``R``-bit ``w`` is one uniform 64-bit word. ``w < d`` is
decided by ``t`` unless ``t == (d - 1) >> s``. A table keeps the exact floors ``S(k) >> s`` for the
``2 m0`` central ``k`` (``m0`` about ``44 * 2**K``); ``S(k) <= w`` is decided by ``t`` unless ``t``
equals the floor, and every ``k`` outside the table is decided when ``t`` lies strictly between the
smallest and the largest stored floor. Otherwise (probability about ``(2 m0 + 4) / 2**64``) the
remaining ``s`` bits of ``w`` are drawn and the exact ladder decides. So the output equals
``GeoSample(c, u)`` for the ``u`` whose bits were drawn. The floors are exact integers, built in
``O(m0)`` steps of interval arithmetic with exact fallbacks (:func:`_table`).

FastSample (Theorem 4.6)
------------------------
Our construction (the conference version omits it). Drop the noise tails beyond a width
``t <= n``: ``M'(c) = clamp(c + Z_t, 0, n)`` with ``Z_t = clamp(G, -t, t)`` and denominator
``d_t = q**(t-1) (2p + 1)``, whose bit length is ``O(t K)`` instead of ``O(n K)``. Coupling on
``G``, ``M'(c)`` and ``GeoSample(c)`` differ only if ``|G| > t``, so
``Delta(M'(c), GeoSample(c)) <= Pr[|G| > t] = 2 alpha**(t + 1) / (1 + alpha)``. Mixing with the
uniform distribution on ``{0..n}`` with probability ``gamma`` (Algorithm 1) is
``(eps~/2, 0)``-DP by Lemma 3.1 when ``2 alpha**(t+1) / (1 + alpha) <= delta_max`` with::

    delta_max = (e^(eps~/2) - 1) / (e^(eps~/2) + 1) * gamma / (1 - gamma) / (n + 1)
              = gamma / ((1 - gamma) (n + 1) (2p + 1)).

Cancelling ``2p + 1``, the condition is ``2 p**(t+1) (1 - gamma) (n + 1) <= gamma q**t``;
:func:`fast_sample_width` returns the smallest such ``t`` (``t = n`` if none is below ``n``: then no
tail is dropped). ``t ~ (2/eps~) ln(2 (n+1) (2p+1) / gamma)``, so
``log2 d_t = Õ(1/eps) log(n/gamma)`` as in Theorem 4.6. The pmf is
``(1 - gamma) Pr[M'(c) = y] + gamma / (n + 1)``; the common denominator is ``D = b (n + 1) d_t``
for ``gamma = a / b``, and ``FastSample(c, u) = min{z : D F*_c(z) >= u}`` by binary search over
``z`` (``bit_length(n)`` steps of ``O(t K)``-bit arithmetic: Theorem 4.6's
``Õ((1/eps) log n log(n/gamma))``).
The vectorised sampler draws the mixture by composition (an exact ``gamma`` coin, a uniform
``{0..n}`` value, a lazily drawn ``Z_t``): the same distribution, proven by enumerating the three
independent digits in the tests.

Running time (strict)
---------------------
``strict=True`` draws ``u`` in full (``ceil(log2 d)`` random bits through the exact uniform
oracle) and evaluates the deterministic algorithm with every loop run to its public bound:
GeoSample two ladders of ``bit_length(n)`` steps; FastSample ``bit_length(n)`` lifting steps over
``z``. The only loop without a fixed count is the rejection inside the uniform oracle (acceptance
above 1/2 per attempt), which the paper takes as one step (Section 2.3). So the number of
iterations and the amount of randomness are fixed by ``n``, ``K`` (and ``gamma``): the running-time
bound depends on public quantities only. Python's integer arithmetic is not constant-time (smaller
operands are faster), so, as the paper notes, hiding the time itself means padding every call to
that bound; the library does not pad. The default (lazy) path costs one 64-bit word per draw
except with probability about ``2**-56``; it is fast, not time-hiding.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import exact_fraction
from privhist.mechanisms.finite._exact import (
    ceil_log2,
    floor_scaled,
    random_bits,
    uniform_array,
    uniform_int,
)
from privhist.mechanisms.finite.mixing import UniformMixture

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

__all__ = [
    "MAX_DENOMINATOR_BITS",
    "BoundedGeometricNoise",
    "CountingSampler",
    "FastSample",
    "GeoSample",
    "counting_k",
    "fast_sample_width",
]

#: largest bit length of a denominator d that GeoSample builds (a few MB; use FastSample beyond)
MAX_DENOMINATOR_BITS = 1 << 25
#: below this, uniform integers in [0, d) are drawn in one vectorised call and inverted exactly
_SMALL = 1 << 63


def counting_k(epsilon: Any, function: str = "GeoSample") -> int:
    """``K = ceil(log2(2 / epsilon))`` for ``epsilon in (0, 1]`` (Theorems 4.5 and 4.6).

    Raises a :class:`ValidationError` naming the nearest valid setting for ``epsilon > 1``.

    >>> [counting_k(e) for e in (1, 0.5, "1/3", 0.1)]
    [1, 2, 3, 5]
    """
    expected = "a rational number in (0, 1]"
    eps = exact_fraction(epsilon, function, "epsilon", expected)
    if eps <= 0:
        raise ValidationError("epsilon", function, expected, epsilon)
    if eps > 1:
        raise ValidationError(
            "epsilon",
            function,
            "in (0, 1] (Theorems 4.5 and 4.6 assume epsilon <= 1); the nearest valid setting "
            "is epsilon=1",
            epsilon,
        )
    return ceil_log2(2 * eps.denominator, eps.numerator)


def _check_int(value: Any, function: str, name: str, low: int, high: int | None = None) -> int:
    def expected() -> str:
        if high is None:
            return f"an integer >= {low}"
        top = f"2**{high.bit_length() - 1}" if high > 1 << 20 and high & (high - 1) == 0 else high
        return f"an integer in [{low}, {top}]"

    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValidationError(name, function, expected(), value)
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ValidationError(name, function, expected(), value)
    return v


def _check_n(n: Any, function: str, high: int) -> int:
    if isinstance(n, int | np.integer) and not isinstance(n, bool) and n < 1:
        raise ValidationError(
            "n", function, "an integer >= 1 (with n = 0 every count is 0: nothing to release)", n
        )
    return _check_int(n, function, "n", 1, high)


def _lift(limit: int, below: Callable[[int], bool]) -> int:
    """``#{j in [0, limit) : below(j)}`` for a predicate true on a prefix of ``[0, limit)``,
    by binary lifting with exactly ``bit_length(limit)`` evaluations (out-of-range candidates are
    evaluated at ``limit - 1`` and ignored, so the work does not depend on the answer)."""
    cur = 0
    for i in reversed(range(limit.bit_length())):
        cand = cur + (1 << i)
        ok = below(min(cand, limit) - 1)
        if cand <= limit and ok:
            cur = cand
    return cur


def _gallop(limit: int, above: Callable[[int], bool]) -> int:
    """``#{j in [0, limit) : above(j)}`` for a predicate true on a prefix of ``[0, limit)``, in
    ``O(log answer)`` evaluations (doubling, then bisection): for parameter set-up, where the
    predicate's cost grows with ``j`` (powers of ``alpha``) and the answer is small."""
    if limit <= 0 or not above(0):
        return 0
    lo, hi = 1, 2  # above(lo - 1) holds
    while hi < limit and above(hi - 1):
        lo, hi = hi, min(limit, 2 * hi)
    if hi >= limit and above(limit - 1):
        return limit
    while hi - lo > 1:  # above(lo - 1) holds, above(hi - 1) fails
        mid = (lo + hi) // 2
        if above(mid - 1):
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class _Table:
    """Exact floors ``S(k) >> shift``, ``k in [-m0, m0)`` (ascending), and ``(d - 1) >> shift``."""

    shift: int
    top: int
    floors: U64
    m0: int
    exact_floors: int  # how many floors needed the exact product (diagnostic)


class BoundedGeometricNoise:
    """``Z = clamp(G, -width, width)`` for the two-sided geometric ``G`` with
    ``Pr[G = k] = (q - p) / (q + p) alpha**|k|``, ``p = 2**K``, ``q = p + step``,
    ``alpha = p / q`` (``step = 1``: the paper's ``alpha = 2**K / (2**K + 1)``).

    All probabilities are integers over ``d = q**(width - 1) (p + q)`` (see the module notes,
    "Finer ratios" for ``step > 1``). ``K >= 0``; ``K = 0`` (ratio 2) is allowed for histogram
    budgets where the per-count epsilon exceeds 1.

    >>> z = BoundedGeometricNoise(1, 2)  # p = 2, q = 3, d = 3 * 5
    >>> z.denominator, [z.scaled_cdf(k) for k in range(-3, 3)]
    (15, [0, 4, 6, 9, 11, 15])
    >>> [z.from_uniform(w) for w in range(15)]
    [-2, -2, -2, -2, -1, -1, 0, 0, 0, 1, 1, 2, 2, 2, 2]
    """

    def __init__(self, k: int, width: int, step: int = 1) -> None:
        self.k = _check_int(k, "BoundedGeometricNoise", "k", 0, 62)
        self.width = _check_int(width, "BoundedGeometricNoise", "width", 1, 1 << 62)
        self.p = 1 << self.k
        self.step = _check_int(step, "BoundedGeometricNoise", "step", 1, self.p << 6)
        self.q = self.p + self.step

    # -- exact distribution ---------------------------------------------------------------------

    @property
    def alpha(self) -> Fraction:
        """``e^(-eps~/2) = p / q`` (``2**K / (2**K + 1)`` for ``step = 1``)."""
        return Fraction(self.p, self.q)

    @property
    def ratio(self) -> Fraction:
        """``e^(eps~/2) = 1 + step 2**-K``: the largest probability ratio for counts one apart."""
        return Fraction(self.q, self.p)

    @cached_property
    def denominator(self) -> int:
        """``d = q**(width - 1) (p + q)`` (computed on first use; ``O(width log2 q)`` bits)."""
        return _denominator(self.k, self.width, self.step)

    def log2_denominator(self) -> float:
        """``log2 d`` without forming ``d`` (float: for size checks and display)."""
        return (self.width - 1) * math.log2(self.q) + math.log2(self.p + self.q)

    def denominator_bits(self) -> int:
        """Bit length of ``d`` without forming it, to within one bit (for size checks)."""
        return math.ceil(self.log2_denominator())

    def tail(self, m: int) -> Fraction:
        """``Pr[Z >= m] = Pr[Z <= -m] = alpha**m / (1 + alpha)`` for ``1 <= m <= width``, else 0."""
        if m < 1:
            raise ValidationError("m", "BoundedGeometricNoise.tail", "an integer >= 1", m)
        if m > self.width:
            return Fraction(0)
        return Fraction(self.p**m, self.q ** (m - 1) * (self.p + self.q))

    def cdf(self, k: int) -> Fraction:
        """``Pr[Z <= k]`` exactly (small numbers: ``O(|k| K)`` bits)."""
        if k < -self.width:
            return Fraction(0)
        if k < 0:
            return self.tail(-k)
        if k >= self.width:
            return Fraction(1)
        return 1 - self.tail(k + 1)

    def pmf(self, k: int) -> Fraction:
        """``Pr[Z = k]`` exactly."""
        a = abs(k)
        if a > self.width:
            return Fraction(0)
        if a == self.width:
            return self.tail(a)
        return Fraction(self.step * self.p**a, self.q**a * (self.p + self.q))

    def lumped(self, m: int) -> int:
        """``G(m) = d Pr[Z <= -m] = p**m q**(width - m)`` for ``1 <= m <= width`` (exact, big)."""
        return int(self.q ** (self.width - m)) << (self.k * m)

    def scaled_cdf(self, k: int) -> int:
        """``S(k) = d Pr[Z <= k]``, an integer."""
        if k < -self.width:
            return 0
        if k < 0:
            return self.lumped(-k)
        if k >= self.width:
            return self.denominator
        return self.denominator - self.lumped(k + 1)

    # -- exact inversion ------------------------------------------------------------------------

    @cached_property
    def _ladder(self) -> list[int]:
        """``q**(2**i - 1)`` for ``i < bit_length(width)``."""
        out = [1]
        for _ in range(1, self.width.bit_length()):
            out.append(out[-1] * out[-1] * self.q)
        return out

    def count_above(self, x: int) -> int:
        """``A(x) = #{m in [1, width] : x < G(m)}``, exactly, in ``bit_length(width)`` steps.

        ``G(width - j) = 2**(K (width - j)) q**j`` increases with ``j``, so
        ``{j : G(width - j) <= x}`` is a prefix ``[0, J)`` and ``A(x) = width - J``. Binary lifting
        keeps ``E = q**cur`` and tests ``q**(cand - 1) = E q**(2**i - 1) <= x >> (K (width - cand +
        1))`` (exact: ``a 2**e <= x`` iff ``a <= floor(x / 2**e)`` for integers).
        """
        w, k, q = self.width, self.k, self.q
        cur, power = 0, 1
        for i in reversed(range(len(self._ladder))):
            cand = cur + (1 << i)
            prod = power * self._ladder[i]
            if cand <= w and prod <= x >> (k * (w - cand + 1)):
                cur, power = cand, prod * q
        return w - cur

    def from_uniform(self, w: int) -> int:
        """The noise ``min{k : S(k) > w}`` for ``w in [0, d)`` (``u = w + 1`` in the paper's
        ``[1, d]``): ``A(d - 1 - w) - A(w)``; both ladders always run."""
        d = self.denominator
        if not 0 <= w < d:
            raise ValidationError("w", "BoundedGeometricNoise.from_uniform", "in [0, d)", w)
        return self.count_above(d - 1 - w) - self.count_above(w)

    # -- vectorised sampling --------------------------------------------------------------------

    @cached_property
    def _exact_thresholds(self) -> I64:
        """``[S(-W), ..., S(W - 1)]`` when ``d < 2**63``."""
        return np.array(
            [self.scaled_cdf(k) for k in range(-self.width, self.width)], dtype=np.int64
        )

    @cached_property
    def _table(self) -> _Table:
        return _table(self.k, self.width, self.step)

    def sample(self, size: int, rng: RandomSource, *, strict: bool = False) -> I64:
        """``size`` independent draws of ``Z`` (see the module notes for the two paths)."""
        size = _check_int(size, "BoundedGeometricNoise.sample", "size", 0)
        if strict:
            d = self.denominator
            return np.array(
                [self.from_uniform(uniform_int(rng, d)) for _ in range(size)], dtype=np.int64
            )
        if self.denominator_bits() < 62 and self.denominator < _SMALL:
            return self._invert_small(uniform_array(rng, self.denominator, size))
        return self._sample_lazy(size, rng)

    def _invert_small(self, w: I64) -> I64:
        """Noise for ``w in [0, d)`` when ``d < 2**63``: ``#{k : S(k) <= w} - width``."""
        found = np.searchsorted(self._exact_thresholds, w, side="right")
        return found.astype(np.int64) - self.width

    def _sample_lazy(self, size: int, rng: RandomSource) -> I64:
        tab = self._table
        d, s = self.denominator, tab.shift
        top = np.uint64(tab.top)
        floors = tab.floors
        out = np.empty(size, dtype=np.int64)
        todo = np.arange(size)
        while todo.size:
            t = rng.uint64(todo.size)
            rejected = t > top
            # t == top: acceptance needs the low bits of w
            for i in np.flatnonzero(t == top).tolist():
                w = (tab.top << s) | random_bits(rng, s)
                if w < d:
                    out[todo[i]] = self.from_uniform(w)
                else:
                    rejected[i] = True
            inside = np.flatnonzero(t < top)
            ti = t[inside]
            idx = np.searchsorted(floors, ti, side="left")
            hit = floors[np.minimum(idx, floors.shape[0] - 1)] == ti
            tie = (idx < floors.shape[0]) & hit
            undecided = tie | (ti <= floors[0]) | (ti >= floors[-1])
            good = ~undecided
            out[todo[inside[good]]] = idx[good].astype(np.int64) - tab.m0
            for j in np.flatnonzero(undecided).tolist():
                w = (int(ti[j]) << s) | random_bits(rng, s)
                out[todo[inside[j]]] = self.from_uniform(w)
            todo = todo[rejected]
        return out

    def half_width_for_tail(self, beta: Fraction) -> int:
        """Smallest ``a >= 0`` with ``Pr[|Z| > a] = 2 tail(a + 1) <= beta`` (exact)."""
        beta = Fraction(beta)
        if not 0 < beta <= 1:
            raise ValidationError("beta", "half_width_for_tail", "in (0, 1]", beta)
        return _gallop(self.width, lambda a: 2 * self.tail(a + 1) > beta)

    def std(self) -> float:
        """Standard deviation of the unclamped ``G`` (an upper bound for ``Z``; for planning)."""
        a = self.p / self.q
        return math.sqrt(2 * a) / (1 - a)


@lru_cache(maxsize=8)
def _denominator(k: int, width: int, step: int = 1) -> int:
    q = (1 << k) + step
    return int(q ** (width - 1)) * ((1 << k) + q)


#: most floors kept per side of the table; beyond, draws use the exact ladder (see _table)
TABLE_MAX = 1 << 20
#: fractional bits of the interval arithmetic that builds the table
_WORK = 64


@lru_cache(maxsize=8)
def _table(k: int, width: int, step: int = 1) -> _Table:
    """Exact floors ``S(k) >> s`` of the central scaled-CDF values (``s = bit_length(d) - 64``).

    With ``D = d / 2**s`` and ``T_m = alpha**m / (1 + alpha)``, the floors are ``g_m = floor(D
    T_m)`` (``k = -m``) and ``h_m = floor(D (1 - T_m))`` (``k = m - 1``). An integer interval
    ``[lo, hi]`` containing ``D T_m 2**64`` is carried from ``m`` to ``m + 1`` by ``* p / q``,
    rounding outwards (width about ``m`` units of ``2**-64``); a floor is read off when both ends
    agree, and computed from the exact integers otherwise (probability about ``m 2**-64``). The
    table stops at the first ``g_m = 0`` (then every later ``G(m) < 2**s``), at ``width``, or after
    :data:`TABLE_MAX` entries (then draws beyond the table, probability about
    ``alpha**TABLE_MAX``, take the exact ladder). Cost ``O(m0)`` operations on ~200-bit integers.
    """
    p, q = 1 << k, (1 << k) + step
    d = _denominator(k, width, step)
    shift = max(0, d.bit_length() - 64)
    top = (d - 1) >> shift
    # D 2**_WORK lies in [dh, dh + inexact]
    if shift >= _WORK:
        dh, inexact = d >> (shift - _WORK), 1
    else:
        dh, inexact = d << (_WORK - shift), 0
    lo = dh * p // (p + q)
    hi = -(-(dh + inexact) * p // (p + q))
    lows: list[int] = []
    highs: list[int] = []
    exact = 0
    for m in range(1, min(width, TABLE_MAX) + 1):
        g_lo, g_hi = lo >> _WORK, hi >> _WORK
        if g_hi == 0 and shift > 0:
            break
        if g_lo != g_hi:
            g_lo = floor_scaled(d, p**m, q ** (m - 1) * (p + q), shift)[0]
            exact += 1
        h_lo, h_hi = (dh - hi) >> _WORK, (dh + inexact - lo) >> _WORK
        if h_lo != h_hi:
            b = q ** (m - 1) * (p + q)
            h_lo = floor_scaled(d, b - p**m, b, shift)[0]
            exact += 1
        lows.append(g_lo)
        highs.append(h_lo)
        lo, hi = lo * p // q, -(-hi * p // q)
    floors = np.array(lows[::-1] + highs, dtype=np.uint64)
    floors.setflags(write=False)
    return _Table(shift, top, floors, len(lows), exact)


# ----------------------------------------------------------------------------------------------
# counting-query samplers


class CountingSampler(ABC):
    """A deterministic counting-query algorithm ``M: [n] x [d]+ -> [n]`` (Definition 4.1) with its
    exact output distribution and a vectorised sampler over many counts."""

    n: int
    k: int
    noise: BoundedGeometricNoise

    @property
    def ratio(self) -> Fraction:
        """``e^(eps~/2) = 1 + 2**-K``: the privacy guarantee for counts one apart."""
        return Fraction(self.noise.q, self.noise.p)

    @property
    def log2_denominator(self) -> float:
        """``log2 d`` (float, for display; ``d`` itself may have millions of bits)."""
        return self.noise.log2_denominator()

    @property
    def epsilon_tilde(self) -> float:
        """``eps~ = 2 ln(1 + step 2**-K)`` (float, for display)."""
        return 2 * math.log1p(self.noise.step / self.noise.p)

    @property
    @abstractmethod
    def denominator(self) -> int:
        """The ``d`` of ``[d]+``: every CDF value is an integer over it."""

    @abstractmethod
    def cdf(self, c: int, z: int) -> Fraction:
        """``Pr[M(c, U) <= z]`` exactly."""

    @abstractmethod
    def evaluate(self, c: int, u: int) -> int:
        """The deterministic algorithm ``M(c, u)`` for ``u in [1, d]``."""

    @abstractmethod
    def sample(self, counts: Any, rng: RandomSource, *, strict: bool = False) -> I64:
        """One draw of ``M(c, U)`` per entry of ``counts`` (vectorised)."""

    @abstractmethod
    def with_k(self, k: int) -> CountingSampler:
        """The same sampler with ``e^(eps~/2) = 1 + 2**-k`` (for comparisons and tests)."""

    @abstractmethod
    def error_bound(self, a: int) -> Fraction:
        """An upper bound on ``Pr[|M(c, U) - c| > a]`` valid for every ``c``."""

    def scaled_cdf(self, c: int, z: int) -> int:
        """``d F_c(z)`` (Definition 4.3 at count ``c``), an integer."""
        value = self.cdf(c, z) * self.denominator
        assert value.denominator == 1
        return int(value)

    def inverse_cdf(self, c: int, u: int) -> int:
        """``min{z : d F_c(z) >= u}`` by binary search over ``[0, n]`` (Lemma 2.7)."""
        self._check_count(c, "inverse_cdf")
        self._check_u(u, "inverse_cdf")
        return _lift(self.n, lambda z: self.scaled_cdf(c, z) < u)

    def pmf(self, c: int) -> list[Fraction]:
        """``[Pr[M(c, U) = y] for y in 0..n]`` exactly."""
        self._check_count(c, "pmf")
        cdf = [self.cdf(c, z) for z in range(self.n + 1)]
        return [cdf[0]] + [cdf[z] - cdf[z - 1] for z in range(1, self.n + 1)]

    def pmf_window(self, c: int, radius: int) -> tuple[dict[int, Fraction], Fraction]:
        """Exact ``Pr[M(c, U) = y]`` for ``|y - c| <= radius`` and the exact remaining mass."""
        self._check_count(c, "pmf_window")
        lo, hi = max(0, c - radius), min(self.n, c + radius)
        out: dict[int, Fraction] = {}
        prev = self.cdf(c, lo - 1) if lo > 0 else Fraction(0)
        for y in range(lo, hi + 1):
            cur = self.cdf(c, y)
            out[y] = cur - prev
            prev = cur
        return out, 1 - sum(out.values(), start=Fraction(0))

    def half_width_for_tail(self, beta: Fraction) -> int:
        """Smallest ``a`` with :meth:`error_bound` ``(a) <= beta`` ((a, beta)-accuracy,
        Definition 4.2)."""
        beta = Fraction(beta)
        if not 0 < beta <= 1 or self.error_bound(self.n) > beta:
            raise ValidationError(
                "beta",
                "half_width_for_tail",
                f"in ({float(self.error_bound(self.n)):.3g}, 1]",
                beta,
            )
        return _gallop(self.n, lambda a: self.error_bound(a) > beta)

    def _check_count(self, c: Any, function: str) -> int:
        return _check_int(c, f"{type(self).__name__}.{function}", "c", 0, self.n)

    def _check_u(self, u: Any, function: str) -> int:
        if (
            isinstance(u, bool)
            or not isinstance(u, int | np.integer)
            or not 1 <= u <= self.denominator
        ):
            raise ValidationError(
                "u", f"{type(self).__name__}.{function}", "an integer in [1, d]", u
            )
        return int(u)

    def _check_counts(self, counts: Any, function: str) -> I64:
        arr = np.asarray(counts)
        name = f"{type(self).__name__}.{function}"
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValidationError("counts", name, "a one-dimensional array of integers", arr.dtype)
        arr = arr.astype(np.int64)
        bad = (arr < 0) | (arr > self.n)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValidationError(
                "counts", name, f"integers in [0, n] = [0, {self.n}]", f"{arr[i]} at index {i}"
            )
        return arr


class GeoSample(CountingSampler):
    """``GeoSample_{n, eps}`` (Theorem 4.5): the bounded geometric mechanism at ``eps~``.

    ``(eps~/2, 0)``-DP for counting queries with ``e^(eps~/2) = 1 + 2**-K`` exactly
    (:attr:`ratio`); output in ``[0, n]``; ``Pr[|Y - c| > a] <= 2 alpha**(a+1) / (1 + alpha)``.
    Setup forms ``d`` (``(n - 1) log2(2**K + 1)`` bits) and a table of about ``44 * 2**K``
    64-bit floors; a draw then costs one 64-bit word (module notes). ``strict=True`` runs the
    exact ``Õ(n log(1/eps))`` algorithm for every draw.

    >>> g = GeoSample(3, 1)  # K = 1: alpha = 2/3, d = 3**2 * 5
    >>> g.k, g.denominator, [g.scaled_cdf(1, z) for z in range(4)]
    (1, 45, [18, 27, 33, 45])
    >>> [str(x) for x in g.pmf(1)]
    ['2/5', '1/5', '2/15', '4/15']
    >>> g.evaluate(1, 18), g.evaluate(1, 19)
    (0, 1)
    """

    def __init__(self, n: int, epsilon: Any) -> None:
        self._setup(n, counting_k(epsilon, "GeoSample"))

    @classmethod
    def from_k(cls, n: int, k: int, step: int = 1) -> GeoSample:
        """The sampler with ``e^(eps~/2) = 1 + step 2**-k`` directly (``k >= 0``; ``step > 1``
        is the finer grid of the module notes)."""
        obj = cls.__new__(cls)
        obj._setup(n, _check_int(k, "GeoSample", "k", 0, 62), step)
        return obj

    def _setup(self, n: int, k: int, step: int = 1) -> None:
        self.n = _check_n(n, "GeoSample", 1 << 62)
        self.k = k
        self.noise = BoundedGeometricNoise(k, self.n, step)
        bits = self.noise.denominator_bits()
        if bits > MAX_DENOMINATOR_BITS:
            # the largest n the same bit count accepts (an estimate, then exact steps)
            def fits(m: int) -> bool:
                noise = BoundedGeometricNoise(k, m, step)
                return noise.denominator_bits() <= MAX_DENOMINATOR_BITS

            biggest = max(1, int(MAX_DENOMINATOR_BITS / math.log2(self.noise.q)))
            while biggest > 1 and not fits(biggest):
                biggest -= 1
            while fits(biggest + 1):
                biggest += 1
            raise ValidationError(
                "n",
                "GeoSample",
                f"at most {biggest} at K={k} (the largest accepted: d would have {bits} bits; "
                "FastSample's denominator grows with log(n / gamma) instead)",
                n,
            )

    @property
    def denominator(self) -> int:
        return self.noise.denominator

    def cdf(self, c: int, z: int) -> Fraction:
        if z < 0:
            return Fraction(0)
        if z >= self.n:
            return Fraction(1)
        return self.noise.cdf(z - c)

    def scaled_cdf(self, c: int, z: int) -> int:
        if z < 0:
            return 0
        if z >= self.n:
            return self.denominator
        return self.noise.scaled_cdf(z - c)

    def evaluate(self, c: int, u: int) -> int:
        """``GeoSample(c, u) = clamp(c + noise(u - 1), 0, n)``, equal to :meth:`inverse_cdf`."""
        c = self._check_count(c, "evaluate")
        u = self._check_u(u, "evaluate")
        return min(self.n, max(0, c + self.noise.from_uniform(u - 1)))

    def sample(self, counts: Any, rng: RandomSource, *, strict: bool = False) -> I64:
        c = self._check_counts(counts, "sample")
        z = self.noise.sample(c.shape[0], rng, strict=strict)
        return np.asarray(np.clip(c + z, 0, self.n), dtype=np.int64)

    def with_k(self, k: int) -> GeoSample:
        return GeoSample.from_k(self.n, k, self.noise.step)

    def error_bound(self, a: int) -> Fraction:
        return 2 * self.noise.tail(a + 1)


def fast_sample_width(n: int, k: int, gamma: Fraction) -> int:
    """Smallest ``t in [1, n]`` with ``2 p**(t+1) (1 - gamma) (n + 1) <= gamma q**t`` (so that the
    dropped tails satisfy inequality (1) of Lemma 3.1 against ``Unif{0..n}``), or ``n``.

    Exact integer search: doubling, then bisection (the condition is monotone in ``t``).

    >>> fast_sample_width(10**6, 1, Fraction(1, 10**6))  # (3/2)**t >= 4 (n+1)(1-gamma)/gamma
    72
    """
    p, q = 1 << k, (1 << k) + 1
    a, b = gamma.numerator, gamma.denominator

    def holds(t: int) -> bool:
        return bool(2 * p ** (t + 1) * (b - a) * (n + 1) <= a * q**t)

    hi = 1
    while hi < n and not holds(hi):
        hi = min(n, 2 * hi)
    if not holds(hi):
        return n
    lo = hi // 2  # holds(lo) is False (or lo == 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _gamma(value: Any, function: str, name: str = "gamma") -> Fraction:
    """``gamma`` as an exact rational in (0, 1); a denominator of 2**63 or more (e.g. from a float)
    is rounded down to ``1 / ceil(1 / gamma)``, the paper's form ``gamma in N^-1``."""
    g = exact_fraction(value, function, name, "a rational number in (0, 1)")
    if not 0 < g < 1:
        raise ValidationError(name, function, "a rational number in (0, 1)", value)
    if g.denominator >= 1 << 63:
        g = Fraction(1, -(-g.denominator // g.numerator))
        if g.denominator >= 1 << 63:
            raise ValidationError(name, function, ">= 2**-62", value)
    return g


class FastSample(CountingSampler):
    """``FastSample_{n, eps, gamma}`` (Theorem 4.6): truncated bounded geometric noise mixed with
    ``Unif{0..n}`` with probability ``gamma`` (Lemma 3.1); ``(eps~/2, 0)``-DP for counting
    queries (so also ``(eps/2, 0)``), ``Pr[|Y - c| > a] <= 2 alpha**(a+1) / (1 + alpha) + gamma``.

    The noise width :attr:`width` is :func:`fast_sample_width`; numbers have ``O(width K)`` bits.

    >>> f = FastSample(100, 1, "1/1000")
    >>> f.width, f.noise.denominator.bit_length()
    (32, 52)
    >>> f.evaluate(50, 1), f.evaluate(50, f.denominator)
    (0, 100)
    """

    def __init__(self, n: int, epsilon: Any, gamma: Any) -> None:
        self._setup(n, counting_k(epsilon, "FastSample"), _gamma(gamma, "FastSample"))

    @classmethod
    def from_k(cls, n: int, k: int, gamma: Any) -> FastSample:
        """The sampler with ``e^(eps~/2) = 1 + 2**-k`` directly (``k >= 0``)."""
        obj = cls.__new__(cls)
        obj._setup(n, _check_int(k, "FastSample", "k", 0, 62), _gamma(gamma, "FastSample"))
        return obj

    def _setup(self, n: int, k: int, gamma: Fraction) -> None:
        self.n = _check_n(n, "FastSample", 1 << 62)
        self.k = k
        self.gamma = gamma
        # guard (floats, before any big number is formed): log2 d_t ~ t log2 q with
        # t ~ ln(2 p (n + 1) / gamma) / ln(q / p), about 2**K ln(n / gamma) * (K + 1) bits
        p, q = 1 << k, (1 << k) + 1
        est = math.log(2 * p * (self.n + 1) / float(gamma)) / math.log1p(1 / p)
        bits = min(est, self.n) * math.log2(q)
        if bits > MAX_DENOMINATOR_BITS:
            raise ValidationError(
                "epsilon",
                "FastSample",
                f"large enough that the noise denominator fits in 2**25 bits (it would have "
                f"about {bits:.3g} bits at K={k}: Theorem 4.6's log d grows like "
                "(1/eps) log(n/gamma))",
                f"an epsilon giving K={k}",
            )
        self.width = fast_sample_width(self.n, k, gamma)
        self.noise = BoundedGeometricNoise(k, self.width)
        self.mixture = UniformMixture(gamma, self.n + 1)

    @property
    def truncation_distance(self) -> Fraction:
        """The bound ``Pr[|G| > width] = 2 alpha**(width + 1) / (1 + alpha)`` on
        ``Delta(M'(c), GeoSample(c))`` (0 when ``width == n``: nothing is dropped)."""
        if self.width >= self.n:
            return Fraction(0)
        a = Fraction(self.noise.p, self.noise.q)
        return 2 * a ** (self.width + 1) / (1 + a)

    @property
    def delta_max(self) -> Fraction:
        """The right-hand side of inequality (1) for this sampler."""
        return self.mixture.delta_bound(self.ratio)

    @property
    def log2_denominator(self) -> float:
        """``log2 D`` (float, for display)."""
        return (
            math.log2(self.gamma.denominator)
            + math.log2(self.n + 1)
            + self.noise.log2_denominator()
        )

    @property
    def denominator(self) -> int:
        """``D = b (n + 1) d_t`` for ``gamma = a / b``."""
        return self.gamma.denominator * (self.n + 1) * self.noise.denominator

    def truncated_cdf(self, c: int, z: int) -> Fraction:
        """CDF of ``M'(c) = clamp(c + Z_t, 0, n)`` (before mixing)."""
        if z < 0:
            return Fraction(0)
        if z >= self.n:
            return Fraction(1)
        return self.noise.cdf(z - c)

    def cdf(self, c: int, z: int) -> Fraction:
        if z < 0:
            return Fraction(0)
        if z >= self.n:
            return Fraction(1)
        g = self.gamma
        return (1 - g) * self.noise.cdf(z - c) + g * Fraction(z + 1, self.n + 1)

    def scaled_cdf(self, c: int, z: int) -> int:
        """``D F*_c(z) = (b - a)(n + 1) S_t(z - c) + a d_t (z + 1)`` in integers."""
        if z < 0:
            return 0
        if z >= self.n:
            return self.denominator
        a, b = self.gamma.numerator, self.gamma.denominator
        return (b - a) * (self.n + 1) * self.noise.scaled_cdf(
            z - c
        ) + a * self.noise.denominator * (z + 1)

    def evaluate(self, c: int, u: int) -> int:
        """``FastSample(c, u) = min{z : D F*_c(z) >= u}`` (``bit_length(n)`` lifting steps)."""
        return self.inverse_cdf(c, u)

    def sample(self, counts: Any, rng: RandomSource, *, strict: bool = False) -> I64:
        c = self._check_counts(counts, "sample")
        if strict:
            d = self.denominator
            return np.array(
                [self.evaluate(int(x), uniform_int(rng, d) + 1) for x in c.tolist()],
                dtype=np.int64,
            )
        z = self.noise.sample(c.shape[0], rng)
        return self.mixture.apply(np.clip(c + z, 0, self.n), rng)

    def with_k(self, k: int) -> FastSample:
        return FastSample.from_k(self.n, k, self.gamma)

    def error_bound(self, a: int) -> Fraction:
        return (1 - self.gamma) * 2 * self.noise.tail(a + 1) + self.gamma
