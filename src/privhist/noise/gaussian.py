"""Exact discrete Gaussian sampler: ``P[Z = z]`` proportional to ``exp(-z**2 / (2 sigma2))``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise import _checks
from privhist.noise._exact import (
    WORD_BITS,
    LazyUniform,
    Oracle,
    capped,
    ceil_div,
    exp_bounds,
    exp_neg_oracle,
)
from privhist.noise.bernoulli import compare_table, exp_fraction_parts
from privhist.noise.laplace import sample_laplace

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]

#: up to this ``floor(sigma)`` the acceptance probabilities are tabulated (one word per test)
TABLE_SIGMA = 4096
#: the table covers ``|y| < TABLE_SPAN * t``; larger proposals (probability about
#: ``exp(-TABLE_SPAN)``) are tested one at a time, exactly
TABLE_SPAN = 40
#: above ``TABLE_SIGMA``, ``sigma2 = a / b`` needs ``a < 2**61`` (acceptance denominators fit int64)
MAX_NUMERATOR = 1 << 61
_INT64_SAFE = (1 << 63) - 1


@dataclass(frozen=True, eq=False)
class _Plan:
    """How to sample: proposal ``DLap(t)`` with ``t = sigma2 / centre``, and the acceptance."""

    sigma2: Fraction
    centre: Fraction
    table: U64 | None  # acceptance floors for |y| < len(table), or None (arithmetic path)

    @property
    def rate(self) -> Fraction:
        return self.centre / self.sigma2  # 1 / t

    def exponent(self, y: int) -> Fraction:
        """The acceptance exponent ``(|y| - centre)**2 / (2 sigma2)``."""
        d = abs(y) - self.centre
        return d * d / (2 * self.sigma2)


def discrete_gaussian(
    sigma2: Fraction | int, rng: RandomSource, size: _checks.Shape
) -> npt.NDArray[np.int64]:
    """Exact discrete Gaussian samples, ``P[Z = z] = exp(-z**2 / (2 sigma2)) / N``.

    Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy" (CKS),
    Algorithm 3: propose ``Y`` from a discrete Laplace, accept with a Bernoulli(exp(...)).

    Args:
        sigma2: The variance parameter ``sigma**2``, an int or Fraction ``> 0`` (round a float
            up with :func:`~privhist.noise.rational_at_least`). For ``floor(sigma) > 4096`` its
            numerator must be below ``2**61`` (for example ``sigma <= 1.5e6`` with
            denominators up to ``2**20``), otherwise a ValidationError suggests rounding.
        rng: Source of randomness.
        size: Output shape.

    Returns:
        int64 array.

    Exactness: for any centre ``c > 0`` and ``t = sigma2 / c``, draw ``Y`` with
    ``P[Y = y]`` proportional to ``exp(-|y| / t)`` (exact, :func:`discrete_laplace`) and
    accept with probability ``exp(-(|y| - c)**2 / (2 sigma2))``. The accepted ``y`` has weight
    ``exp(-|y| c / sigma2 - (|y| - c)**2 / (2 sigma2)) = exp(-(y**2 + c**2) / (2 sigma2))``,
    proportional to the target; rejected proposals are redrawn independently. CKS take
    ``t = floor(sigma) + 1``; we take ``c = floor(256 sigma) / 256`` (``c = sigma2``, i.e.
    ``t = 1``, when ``sigma < 1``), or ``c = floor(sigma)`` above 4096, which keeps the
    acceptance rate near its optimum ``sqrt(pi / 2) e**-1/2 ~ 0.76`` and the arithmetic small.
    The acceptance Bernoulli is one word against an exact table of
    ``floor(exp(-(y - c)**2 / (2 sigma2)) 2**64)`` (ties and ``|y| >= 40 t`` finished exactly),
    or, for large ``sigma``, the factorised exact test of
    :func:`~privhist.noise.bernoulli_exp_array` on the exponent ``b (|y| - c)**2 / (2 a)``
    (``sigma2 = a / b``), computed exactly in int64 or, when that could overflow, Python ints.

    >>> from privhist.core.random import SeededRandom
    >>> discrete_gaussian(Fraction(9, 4), SeededRandom(0), 4).dtype
    dtype('int64')
    """
    fn = "discrete_gaussian"
    s2 = _checks.positive_rational(sigma2, fn, "sigma2")
    sigma_floor = math.isqrt(s2.numerator // s2.denominator)
    if sigma_floor > TABLE_SIGMA and s2.numerator >= MAX_NUMERATOR:
        raise ValidationError(
            "sigma2",
            fn,
            "a rational with numerator < 2**61 when sigma > 4096 "
            "(round it up with rational_at_least(sigma2, max_denominator=...))",
            sigma2,
        )
    dims = _checks.shape(size, fn)
    n = _checks.count(dims)
    if n == 0:
        return np.zeros(dims, dtype=np.int64)
    plan = _plan(s2)
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:  # each round accepts a constant fraction (about 0.6 to 0.76)
        y = sample_laplace(plan.rate, rng, todo.size)
        ok = _accept(plan, np.abs(y), rng)
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    return out.reshape(dims)


@lru_cache(maxsize=16)
def _plan(s2: Fraction) -> _Plan:
    sigma_floor = math.isqrt(s2.numerator // s2.denominator)
    if sigma_floor > TABLE_SIGMA:
        return _Plan(s2, Fraction(sigma_floor), None)
    if sigma_floor == 0:
        centre = s2
    else:
        # floor(256 sigma) / 256 = isqrt(floor(65536 sigma2)) / 256 >= 1
        centre = Fraction(math.isqrt(s2.numerator * 65536 // s2.denominator), 256)
    t = s2 / centre
    span = TABLE_SPAN * ceil_div(t.numerator, t.denominator) + 1
    return _Plan(s2, centre, _acceptance_table(s2, centre, span))


def _acceptance_table(s2: Fraction, c: Fraction, span: int) -> U64:
    """``floor(f(y) 2**64)`` (capped) for ``y < span``, ``f(y) = exp(-(y - c)**2 / (2 s2))``.

    Computed by the recurrence ``f(y + 1) = f(y) g(y)``, ``g(y + 1) = g(y) h`` with
    ``g(y) = exp(-(2 (y - c) + 1) / (2 s2))`` and ``h = exp(-1 / s2)``, in integer interval
    arithmetic rounded outwards; the relative width grows like ``y**2 2**-w``, so ``w`` has
    ``2 log2(span) + 40`` spare bits, and an undecided entry is computed directly.
    """
    w = WORD_BITS + 2 * span.bit_length() + 40
    unit = 1 << w
    f_lo, f_hi = exp_bounds(-(c * c) / (2 * s2), w)
    g_lo, g_hi = exp_bounds((2 * c - 1) / (2 * s2), w)
    h_lo, h_hi = exp_bounds(-1 / s2, w)
    shift = w - WORD_BITS
    floors = []
    for y in range(span):
        f = f_lo >> shift
        if f != f_hi >> shift:
            d = y - c
            f = exp_neg_oracle(d * d / (2 * s2))(WORD_BITS)[0]
        floors.append(capped(f))
        f_lo = (f_lo * g_lo) >> w
        f_hi = ceil_div(f_hi * g_hi, unit)
        g_lo = (g_lo * h_lo) >> w
        g_hi = ceil_div(g_hi * h_hi, unit)
    table = np.array(floors, dtype=np.uint64)
    table.flags.writeable = False
    return table


def _accept(plan: _Plan, y: I64, rng: RandomSource) -> Bools:
    """Independent Bernoulli(``exp(-plan.exponent(y_i))``) for ``y_i >= 0``."""
    if plan.table is not None:
        table = plan.table
        inside = y < table.shape[0]
        out = np.zeros(y.shape[0], dtype=np.bool_)
        idx = np.flatnonzero(inside)

        def oracle(v: int) -> Oracle:
            return exp_neg_oracle(plan.exponent(v))

        out[idx] = compare_table(table, y[idx], oracle, rng)
        for i in np.flatnonzero(~inside).tolist():  # probability about e**-40 per proposal
            out[i] = LazyUniform(rng).less(exp_neg_oracle(plan.exponent(int(y[i]))))
        return out
    return _accept_arithmetic(plan, y, rng)


def _accept_arithmetic(plan: _Plan, y: I64, rng: RandomSource) -> Bools:
    """Acceptance for integer centre ``k``: exponent ``b (y - k)**2 / (2 a)`` for ``s2 = a/b``."""
    a, b = plan.sigma2.numerator, plan.sigma2.denominator
    k = int(plan.centre)
    den = 2 * a
    d = y - np.int64(k)
    limit = math.isqrt(_INT64_SAFE // b)
    if int(np.abs(d).max(initial=0)) <= limit:
        num = d * d * np.int64(b)
        q, r = np.divmod(num, np.int64(den))
        return exp_fraction_parts(q, r, den, rng)
    # exact Python-int arithmetic where int64 could overflow
    num_obj = d.astype(object) ** 2 * b
    q_obj = num_obj // den
    r_obj = num_obj - q_obj * den
    cap = 1 << 62
    huge = q_obj > cap
    q = np.minimum(q_obj, cap).astype(np.int64)
    out = exp_fraction_parts(q, r_obj.astype(np.int64), den, rng)
    # a capped q would only matter if the geometric draw reached 2**62 (probability e**-2**62);
    # stay exact regardless: such samples are redrawn below with the exact oracle.
    for i in np.flatnonzero(huge).tolist():
        x = Fraction(int(num_obj[i]), den)
        out[i] = LazyUniform(rng).less(exp_neg_oracle(x))
    return out
