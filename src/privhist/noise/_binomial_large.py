"""Exact Binomial(``m``, 1/2) for large ``m`` in O(1) expected random words per sample.

Rejection sampling from a *geometric-block* envelope, in the spirit of Bringmann, Kuhn,
Panagiotou, Peters & Thiel (2014), "Internal DLA: Efficient Simulation of a Physical Growth
Model" (ICALP 2014, Section 3: Binomial(``m``, 1/2) in O(1) expected time on a word RAM) and
Farach-Colton & Tsai (2015), "Exact Sublinear Binomial Sampling" (Algorithmica 73), whose
acceptance test compares a lazily refined uniform with a ratio of binomial coefficients. The
envelope, its constants and the acceptance evaluation below are this module's own, with the
proofs next to them.

**Reduction.** ``Bin(2n + 1, 1/2) = Bin(2n, 1/2) + Bernoulli(1/2)``, so only ``m = 2n`` is
sampled by rejection; we draw the offset ``X = K - n`` with target
``g(x) = C(2n, n + x) / 4**n`` on ``|x| <= n`` (symmetric, decreasing in ``|x|``).

**Envelope (proposal).** With the block width ``w = w(n)`` of :func:`block_width` and
``rho = 1/4``, draw independently ``J`` with ``P[J = j] = (3/4) (1/4)**j``, ``V`` uniform on
``{0, ..., w - 1}`` and a fair sign bit ``S``; let ``Y = J w + V >= 0`` and ``X = Y`` if
``S = 0``, ``X = -(Y + 1)`` if ``S = 1``. Every integer ``x`` arises from exactly one
``(s, j, v)``, with probability ``q(x) = (3/8) 4**-j / w``.

**Acceptance.** Accept ``X = x`` with probability ``a(x) = 4**j g(x) / g(0)``, i.e.
``a = 4**j R(n, d)`` with the offset ``d = |x|`` (``d = y`` or ``y + 1``) and

    ``R(n, d) = C(2n, n + d) / C(2n, n) = prod_{i=1..d} (n + 1 - i) / (n + i)``.

*Domination* (``a <= 1``): ``ln((n + 1 - i) / (n + i)) <= -(2i - 1) / (n + i)
<= -(2i - 1) / (n + d)``, so ``R(n, d) <= exp(-d**2 / (n + d))`` for ``d <= n``, which
decreases in ``d``. A proposal in block ``j >= 1`` has ``d >= y >= j w``, so
``a <= 4**j exp(-(j w)**2 / (n + j w))``, and ``(j w)**2 / (n + j w) >= j ln 4`` because
``j (w**2 - w ln 4) >= w**2 - w ln 4 >= n ln 4`` (the defining property of ``w``). Block 0 has
``a = R <= 1``; and ``a = 0`` when ``d > n``.

*Exactness*: ``P[propose x and accept] = q(x) a(x) = (3/8) g(x) / (w g(0))``, proportional to
``g(x)``; rounds are independent, so the accepted ``X`` has law exactly ``g``. A round
succeeds with probability ``3 / (8 w g(0)) -> (3/8) sqrt(pi / ln 4) ~ 0.565`` (``g(0) ~
1 / sqrt(pi n)``, ``w ~ sqrt(n ln 4)``), so a sample costs about 1.8 proposals of about 3
random words each, whatever ``n`` is (about 6.2 words in all as vectorised below, which draws
some proposals that are never looked at; ``benchmarks/bench_binomial.py``). It is at least
``0.53`` for every ``n >= 512`` (smallest, 0.532, at ``n = 538``), so the number of rounds of
an entry is dominated by a geometric law: it ends with probability 1, though it has no fixed
bound.

**Deciding ``U < a`` exactly.** ``U`` is uniform in ``[0, 1)`` with first word ``W``; its first
53 bits are ``V53 = W >> 11``. :func:`threshold_bounds` returns floats ``T_lo <= a <= T_hi``
(rigorously, see its docstring); ``V53 + 1 <= T_lo 2**53`` proves ``U < a`` (accept) and
``V53 >= T_hi 2**53`` proves ``U >= a`` (reject). Otherwise (probability below ``2**-36`` per
round for ``n >= 1024``, i.e. every call from :func:`~privhist.noise.binomial.binomial_half`;
for ``512 <= n < 1024`` offsets beyond ``n / 2``, probability below ``2**-17``, are decided here
too) :func:`accept_exact` continues the *same* ``U`` word by word: against the exact digits of
the rational ``a = 4**j perm(n, d) / perm(n + d, d)`` for ``d <= EXACT_OFFSET``, and beyond
against integer bounds ``lo <= a 2**p <= hi`` from mpmath interval arithmetic on ``ln a`` (log
factorials by Stirling's series with its remainder bound), with ``p`` growing with the number of
words drawn (:func:`less_by_bounds`). The latter never needs the binary digits of ``a``, so it
decides even a threshold that is a dyadic rational or agrees with one to many bits; it goes on
only while the drawn prefix of ``U`` and the interval of ``a`` overlap, probability about
``2**-63`` per word, and stops with probability 1 (``P[U = a] = 0``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext

from privhist.core.random import RandomSource
from privhist.noise._exact import WORD_BITS, Bounds, LazyUniform, Oracle, rational_oracle

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]

#: smallest half-size ``n = m // 2`` handled here (the float bounds assume ``n >= 512``)
MIN_HALF = 512
#: largest half-size (``m <= 2**62``)
MAX_HALF = 1 << 61
#: offsets ``d`` up to this get exact rational thresholds on a tie; larger ones use intervals
EXACT_OFFSET = 1 << 14
#: number of terms of the series for ``-ln R`` evaluated in float64
SERIES_TERMS = 8
#: proposals per unfinished entry and round: between these, about _ROUND_SIZE in all
_MIN_PROPOSALS = 1
_MAX_PROPOSALS = 32
_ROUND_SIZE = 1 << 10  # 2**12 wasted proposals at a few thousand entries

_LN4 = 1.3862943611198906  # float64 nearest to ln 4
_LN2 = 0.6931471805599453  # float64 nearest to ln 2
_INV_LN2 = 1.4426950408889634
_WIDEN = 2.0**-40  # relative widening of every float bound (the proven errors are < 2**-45)
_ABS = 2.0**-48  # absolute margin for the Stirling corrections and the series' far tail
_TWO53 = 2.0**53
_EXP_FLOOR = -44.0  # exp(-44) < 2**-63
_TINY = 2.0**-63
_EXP_CEIL = 43.0  # bounds for ln a up to 43 (a <= 1 for real proposals; tests use more)
_EXP_COEFFS = [1.0 / math.factorial(i) for i in range(14)]  # Taylor coefficients of exp


def block_width(n: I64) -> I64:
    """Block width ``w(n) = floor(z) + 1`` with ``z >= r = (ln 4 + sqrt(ln4**2 + 4 n ln 4)) / 2``.

    ``r`` is the positive root of ``w**2 - w ln 4 = n ln 4`` and ``w > r`` gives
    ``w**2 - w ln 4 > n ln 4``, the condition of the domination proof. ``z`` is ``r`` in float64
    times ``1 + 2**-40``: the chain (conversion of ``n``, rounded ``ln 4``, three products, two
    sums, a square root, a halving) has relative error below ``6 * 2**-53``, far below the
    widening, and the last product rounds by another ``2**-53``. A public, deterministic
    function of ``n``, about ``sqrt(1.386 n)``.

    >>> block_width(np.array([512, 10**6], dtype=np.int64)).tolist()
    [28, 1179]
    """
    root = np.sqrt(n.astype(np.float64) * (4.0 * _LN4) + _LN4 * _LN4)
    z = ((root + _LN4) * 0.5) * (1.0 + _WIDEN)
    return np.floor(z).astype(np.int64) + 1


def geometric_quarter(rng: RandomSource, count: int) -> I64:
    """``count`` draws of ``J`` with ``P[J = j] = (3/4) (1/4)**j``.

    ``J`` is the number of all-zero bit pairs at the low end of a uniform word before the first
    pair that is not ``00`` (each pair is ``00`` with probability 1/4, independently), i.e.
    ``ctz(W) // 2 = popcount((W & -W) - 1) // 2``; a zero word (probability ``2**-64``) gives
    32 and continues with a new word.
    """
    one = np.uint64(1)
    w = rng.uint64(count)
    out = np.bitwise_count((w & (~w + one)) - one).astype(np.int64) >> 1
    zero = np.flatnonzero(w == 0)
    if zero.size:
        out[zero] += geometric_quarter(rng, zero.size)
    return out


def _exp_reduced(y: F64) -> F64:
    """``exp(y)`` for ``y`` in ``[-44, 44]`` with basic float64 operations only.

    ``k = rint(y / ln 2)`` (``|k| <= 64``), ``r = y - k * LN2`` with ``LN2 = fl(ln 2)``,
    ``exp(y) = 2**k exp(y - k ln 2)``. Error: ``|r - (y - k ln 2)| <= |k| |LN2 - ln 2| +
    2**-53 (|k LN2| + |r|) < 1.1e-14``; ``|r| <= 0.35``; the degree-13 Taylor polynomial has
    truncation error below ``7e-18`` and its Horner evaluation an error below
    ``gamma_27 e**0.35 < 4.3e-15`` (Higham, *Accuracy and Stability of Numerical Algorithms*,
    eq. 5.3; coefficients rounded once), i.e. relative ``< 6.2e-15`` since
    ``exp(r) >= e**-0.35``; scaling by ``2**k`` is exact. In all, relative error below
    ``1.8e-14 < 2**-45``.
    """
    k = np.rint(y * _INV_LN2)
    r = y - k * _LN2
    p = np.full_like(r, _EXP_COEFFS[-1])
    for c in reversed(_EXP_COEFFS[:-1]):
        p = p * r + c
    return np.ldexp(p, k.astype(np.int32))


def threshold_bounds(n: I64, d: I64, j: I64) -> tuple[F64, F64, Bools]:
    """Floats ``T_lo <= a <= T_hi`` for ``a = 4**j R(n, d)`` and where they are valid.

    Valid (third array) where ``n >= 512``, ``d <= n / 2``, ``Y <= 43`` and the error bound
    ``E`` below is at most 1 or ``a`` is proven below ``2**-63``; elsewhere the caller decides
    exactly. Float64 with IEEE round-to-nearest basic operations only (no library ``log``,
    ``exp`` or ``lgamma``), so every error below is proven.

    *The formula.* Stirling's formula ``ln k! = (k + 1/2) ln k - k + ln(2 pi) / 2 + s(k)``
    turns ``ln R(n, d) = 2 ln n! - ln(n + d)! - ln(n - d)!`` into, with ``t = d / n``,

        ``ln R = -sum_{k >= 1} c_k t**(2k) + C``,
        ``c_k = (2n - 2k + 1) / (2k (2k - 1))``, ``C = 2 s(n) - s(n + d) - s(n - d)``,

    from ``-n ((1 + t) ln(1 + t) + (1 - t) ln(1 - t)) - ln(1 - t**2) / 2`` and the power
    series ``(1 + t) ln(1 + t) + (1 - t) ln(1 - t) = sum t**(2k) / (k (2k - 1))``,
    ``-ln(1 - t**2) = sum t**(2k) / k``.

    *Series.* The first ``K = 8`` terms ``S`` are positive (``k <= n``) and summed by Horner
    in ``t**2``; each term has at most ``(12 + 9k) * 2**-53`` relative error (conversions of
    ``n``, ``d``; the quotient ``t``; the square; ``c_k``; two roundings per Horner step), so
    ``|S_float - S| <= 84 * 2**-53 S < 2**-46 S``. The ``c_k`` decrease, so the rest of the
    series is at most ``c_9 t**18 / (1 - t**2) <= (4/3) c_9 t**18`` (``t <= 1/2``; bounded
    by ``3 c_9 t**18`` in float); terms with ``k > n`` are negative and above ``-4**-n``.

    *Stirling corrections.* By DLMF 5.11(ii) (for real positive argument the remainder of
    Stirling's series is bounded by the first omitted term and has its sign),
    ``1/(12k) - 1/(360 k**3) <= s(k) <= 1/(12k) - 1/(360 k**3) + 1/(1260 k**5)``. With
    ``n - d >= 256`` the two omitted terms sum to below ``1.4e-15`` and the float evaluation of
    ``C`` errs by below ``1e-18``: together within ``2**-48``.

    *Total.* ``ln a = j ln 4 + C - S`` lies within ``E = 2**-40 (S + j + 1) + 3 c_9 t**18 +
    2**-48`` of its float value ``Y`` (the float errors of ``j ln 4`` and of the two additions
    are below ``2**-50 j + 2**-52 (1.4 j + 1 + S)``; the rest of the ``2**-40`` covers the
    rounding of ``E`` itself). With ``M = exp(Y)`` from :func:`_exp_reduced` (relative error
    below ``2**-45``; ``Y`` clipped below at ``-44``, ``Y <= 43`` required),
    ``e**-E >= 1 - E`` and ``e**E <= 1 + 2E`` (``0 <= E <= 1``):
    ``T_lo = M (1 - 2**-40)(1 - E)`` (``0`` if ``Y < -44``) and
    ``T_hi = M (1 + 2**-40)(1 + 2E)``; the ``2**-40`` widenings absorb the ``2**-45`` and the
    roundings of these two products. Where ``Y + 2E < -44`` (the float sum errs by less than
    ``E``), ``ln a < -44`` and ``T_hi = 2**-63`` whatever ``E`` is.
    """
    nf = n.astype(np.float64)
    valid = (n >= MIN_HALF) & (2 * d <= n)
    t = d.astype(np.float64) / nf
    t2 = t * t
    two_n = 2.0 * nf
    kk = SERIES_TERMS
    p = (two_n - (2 * kk - 1)) * (1.0 / (2 * kk * (2 * kk - 1)))
    for k in range(kk - 1, 0, -1):
        p = (two_n - (2 * k - 1)) * (1.0 / (2 * k * (2 * k - 1))) + t2 * p
    s = t2 * p
    t4 = t2 * t2
    t8 = t4 * t4
    tail = (two_n - (2 * kk + 1)) * (3.0 / ((2 * kk + 2) * (2 * kk + 1))) * (t8 * t8 * t2)
    a = (n + d).astype(np.float64)
    b = np.maximum(n - d, 1).astype(np.float64)  # n - d >= 256 where valid
    corr = 2.0 * _sigma(nf) - _sigma(a) - _sigma(b)
    jf = j.astype(np.float64)
    y = jf * _LN4 + corr - s
    err = _WIDEN * (s + jf + 1.0) + tail + _ABS
    negligible = y + 2.0 * err < _EXP_FLOOR  # the true ln a is below -44: a < 2**-63
    valid &= ((err <= 1.0) | negligible) & (y <= _EXP_CEIL)
    mid = _exp_reduced(np.clip(y, _EXP_FLOOR, _EXP_CEIL))
    t_lo = np.where(y >= _EXP_FLOOR, mid * ((1.0 - _WIDEN) * (1.0 - err)), 0.0)
    t_hi = np.where(negligible, _TINY, mid * ((1.0 + _WIDEN) * (1.0 + 2.0 * err)))
    return t_lo, t_hi, valid


def _sigma(k: F64) -> F64:
    """``1/(12k) - 1/(360 k**3)``, the two-term Stirling correction (``k >= 256``)."""
    return 1.0 / (12.0 * k) - 1.0 / (360.0 * k * k * k)


# -- exact decisions on ties ---------------------------------------------------------------


def threshold_oracle(n: int, d: int, j: int) -> Oracle:
    """Exact digits of ``a = 4**j R(n, d)`` for ``0 <= d <= EXACT_OFFSET``, ``d <= n``.

    The rational ``4**j perm(n, d) / perm(n + d, d)`` by integer division. Larger offsets are
    compared through :func:`threshold_interval` and :func:`less_by_bounds` instead.
    """
    return rational_oracle(math.perm(n, d) << (2 * j), math.perm(n + d, d))


def threshold_interval(n: int, d: int, j: int, prec: int) -> tuple[int, int]:
    """Integers ``lo <= a 2**prec <= hi`` for ``a = 4**j R(n, d)`` (mpmath interval arithmetic).

    ``ln a = j ln 4 + 2 ln n! - ln(n + d)! - ln(n - d)!`` is evaluated in outward-rounded
    interval arithmetic at ``prec + bitlength(n) + 64`` bits (the log factorials are below
    ``2**68``), each log factorial enclosed by :func:`log_factorial_interval`; then ``exp``. The
    ends are moved out by one more unit: mpmath rounds ``exp`` and ``log`` in the requested
    direction from a few guard bits, without a proof for every argument, and the unit covers any
    such slip (it is ``2**58`` times larger than the last place of the working precision).
    """
    ctx = MPIntervalContext()
    ctx.prec = prec + n.bit_length() + 64
    k0 = max(4096, prec)
    log_a = (
        j * ctx.log(ctx.mpf(4))
        + 2 * log_factorial_interval(ctx, n, k0)
        - log_factorial_interval(ctx, n + d, k0)
        - log_factorial_interval(ctx, n - d, k0)
    )
    lo_mpf, hi_mpf = ctx.exp(log_a)._mpi_
    lo = libmp.to_int(libmp.mpf_shift(lo_mpf, prec), libmp.round_floor)
    hi = libmp.to_int(libmp.mpf_shift(hi_mpf, prec), libmp.round_ceiling)
    return max(lo - 1, 0), hi + 1


def log_factorial_interval(ctx: Any, k: int, k0: int) -> Any:
    """An interval containing ``ln k!`` in the interval context ``ctx``.

    ``k <= k0``: ``log`` of the exact integer ``k!``. Otherwise Stirling's series (DLMF 5.11.1
    at ``z = k``, plus ``ln k``): ``ln k! = (k + 1/2) ln k - k + ln(2 pi) / 2 +
    sum_{i < I} B_2i / (2i (2i - 1) k**(2i - 1)) + R_I`` with ``|R_I|`` at most the first
    omitted term (DLMF 5.11(ii)); terms are added until that bound is below
    ``2**-(ctx.prec)``, which happens long before the terms stop decreasing (``i < pi k``)
    because ``k > k0 >= prec``.
    """
    if k <= k0:
        return ctx.log(ctx.mpf(math.factorial(k)))
    kk = ctx.mpf(k)
    total = (kk + ctx.mpf(1) / 2) * ctx.log(kk) - kk + ctx.log(2 * ctx.pi) / 2
    limit = ctx.prec
    i = 1
    while i <= 4 * k:
        num, den = _bernoulli(2 * i)
        den_term = den * 2 * i * (2 * i - 1) * k ** (2 * i - 1)
        if abs(num) << limit < den_term:  # |term i| < 2**-limit: it bounds the remainder
            bound = ctx.mpf(abs(num)) / den_term
            return total + ctx.mpf([-bound.b, bound.b])
        total += ctx.mpf(num) / den_term
        i += 1
    raise ArithmeticError(f"Stirling's series for ln({k}!) cannot reach 2**-{limit}")


@lru_cache(maxsize=4096)
def _bernoulli(k: int) -> tuple[int, int]:
    num, den = mpmath.bernfrac(k)
    return int(num), int(den)


def accept_exact(n: int, d: int, j: int, first_word: int, rng: RandomSource) -> bool:
    """Whether ``U < a(n, d, j)`` for the uniform ``U`` whose first word is ``first_word``.

    Offsets beyond ``n`` are outside the support (``a = 0``): rejected without a further word.
    """
    if d > n:
        return False
    if d <= EXACT_OFFSET:
        return LazyUniform(rng, first_word).less(threshold_oracle(n, d, j))
    return less_by_bounds(first_word, rng, lambda prec: threshold_interval(n, d, j, prec))


#: bits of the threshold's interval beyond those of the drawn prefix of ``U``
_GUARD_BITS = 32


def less_by_bounds(first_word: int, rng: RandomSource, bounds: Bounds) -> bool:
    """Whether ``U < T`` for ``U = 0.w1 w2 ...`` (``w1 = first_word``), from bounds on ``T``.

    With ``b`` bits of ``U`` drawn (the integer ``u``) and integers ``lo <= T 2**p <= hi`` at
    ``p = b + 32``: ``(u + 1) 2**(p - b) <= lo`` proves ``U < (u + 1) / 2**b <= T`` and
    ``u 2**(p - b) >= hi`` proves ``U >= u / 2**b >= T``. Otherwise ``U``'s interval
    ``[u, u + 1) / 2**b`` meets ``[lo, hi] / 2**p``, and the next word ``w`` of ``U`` is drawn
    (``u -> u 2**64 + w``, ``p -> p + 64``). The loop goes on only if the new prefix again meets
    the new interval: at most ``2 + (hi - lo) 2**-32`` of the ``2**64`` values of ``w`` do, so
    the probability of each further word is about ``2**-63`` while ``hi - lo`` stays a few
    units. No digit of ``T`` is ever needed, so a ``T`` that is (or is close to) a dyadic
    rational is decided like any other: the answer is ``1[U < T]`` whenever the loop stops, and
    it stops with probability 1.
    """
    u, b = first_word, WORD_BITS
    while True:
        lo, hi = bounds(b + _GUARD_BITS)
        if (u + 1) << _GUARD_BITS <= lo:
            return True
        if u << _GUARD_BITS >= hi:
            return False
        u = (u << WORD_BITS) | int(rng.uint64(1)[0])
        b += WORD_BITS


# -- the sampler ---------------------------------------------------------------------------


def binomial_half_large(m: I64, rng: RandomSource) -> I64:
    """Binomial(``m_i``, 1/2) for every entry, ``2 * MIN_HALF <= m_i <= 2**62``, by rejection.

    Every round gives each unfinished entry ``c`` independent proposals (``c`` grows as fewer
    entries remain, which keeps the number of NumPy rounds small) and keeps the *first*
    accepted one: exactly the sequential rejection sampler, whose later proposals are simply
    not looked at.
    """
    n = m // 2
    w = block_width(n)
    offset = np.zeros(m.shape[0], dtype=np.int64)
    todo = np.arange(m.shape[0])
    while todo.size:
        per = max(_MIN_PROPOSALS, min(_MAX_PROPOSALS, _ROUND_SIZE // todo.size))
        rep = np.repeat(todo, per)
        accepted, x = _propose(n[rep], w[rep], rng)
        accepted = accepted.reshape(todo.size, per)
        first = np.argmax(accepted, axis=1)
        done = accepted.any(axis=1)
        offset[todo[done]] = x.reshape(todo.size, per)[done, first[done]]
        todo = todo[~done]
    odd = (m & 1).astype(np.bool_)
    extra = np.zeros(m.shape[0], dtype=np.int64)
    if odd.any():
        extra[odd] = rng.bits(int(odd.sum()))
    return n + offset + extra


def _propose(n: I64, w: I64, rng: RandomSource) -> tuple[Bools, I64]:
    """One proposal per entry; returns (accepted, offset ``x``)."""
    count = n.shape[0]
    j = geometric_quarter(rng, count)
    v = rng.uniform_below(w)
    neg = rng.bits(count)
    in_range = j <= n // w  # then j w <= n and nothing below overflows
    j = np.where(in_range, j, 0)
    y = j * w + v
    d = y + neg
    in_range &= d <= n
    x = np.where(neg, -d, y)
    words = rng.uint64(count)
    t_lo, t_hi, valid = threshold_bounds(n, np.where(in_range, d, 0), j)
    v53 = (words >> np.uint64(11)).astype(np.float64)
    accept = valid & (v53 + 1.0 <= t_lo * _TWO53)
    reject = valid & (v53 >= t_hi * _TWO53)
    accept &= in_range
    tie = in_range & ~accept & ~reject
    for i in np.flatnonzero(tie).tolist():  # rare: decided exactly with further words
        accept[i] = accept_exact(int(n[i]), int(d[i]), int(j[i]), int(words[i]), rng)
    return accept, x
