"""Exact Binomial(``n``, ``p``) for rational ``p`` and large ``n p q``, in one rejection loop.

:func:`~privhist.noise.binomial.binomial` splits ``p`` into binary digits and draws one
Binomial(``m``, 1/2) per digit, so an entry with ``n`` trials needs about ``log2 n`` dependent
rounds. Here the whole Binomial(``n``, ``p``) is drawn by rejection from the geometric-block
envelope of :mod:`privhist.noise._binomial_large` (which covers ``p = 1/2``), centred at the
mode; the acceptance test again compares a lazily refined uniform with a ratio of
probabilities: floats with proven error bounds first, exact rationals or interval arithmetic on
the rare ties. The method is that of Farach-Colton & Tsai (2015), "Exact Sublinear Binomial
Sampling" (Algorithmica 73): rejection around the mode with a lazily evaluated acceptance
ratio; the envelope, its constants and the bounds below are this module's own, with proofs.

**Setting.** ``p = a / D`` in lowest terms, ``q = 1 - p``, ``f(k) = C(n, k) p**k q**(n - k)``,
mode ``M = floor((n + 1) p)``, ``N = n - M``, ``A = (n + 1) q``, ``B = (n + 1) p``. The direct
path is used when ``M >= MIN_MODE`` and ``N >= MIN_MODE``.

**Envelope.** As in :mod:`~privhist.noise._binomial_large`: ``J`` with
``P[J = j] = (3/4) 4**-j``, ``V`` uniform on ``{0, ..., w - 1}``, a fair sign ``S``;
``Y = J w + V``, offset ``X = Y`` (``S = 0``) or ``-(Y + 1)`` (``S = 1``), so every integer
``x`` has probability ``q(x) = (3/8) 4**-j / w``. Accept ``k = M + x`` with probability
``a(x) = 4**j R(x)``, ``R(x) = f(M + x) / f(M)`` (0 outside ``0..n``).

*Domination* (``a <= 1``). For ``x = d > 0``: ``R = prod_{i=1..d} rho_i`` with
``rho_i = (N - i + 1) p / ((M + i) q)``. From ``M > (n + 1) p - 1`` (so ``M + i > B + i - 1``
and ``N - i + 1 < A - (i - 1)``), ``rho_i < (1 - (i - 1)/A) / (1 + (i - 1)/B)`` and, with
``ln(1 - u) <= -u`` and ``ln(1 + v) >= v / (1 + v)``,
``ln rho_i <= -(i - 1) (1/A + 1/(B + d))``. Summing, ``ln R(d) <= -d (d - 1)/2 (1/A + 1/(B + d))``.
For ``x = -d < 0``: ``R = prod (M - i + 1) q / ((N + i) p)`` and ``M <= B``, ``N + i >= A + i - 1``
give the same with ``A`` and ``B`` exchanged. Both are at most ``-h(d)``,

    ``h(d) = d (d - 1) / 2 * (1 / (A + d) + 1 / (B + d))``,

and ``h(d) / d`` increases in ``d`` (each ``(d - 1) / (A + d)`` does), so ``h(d) >= j h(w)`` for
``d >= j w``. :func:`block_width` picks ``w`` with ``h(w) >= ln 4`` (checked with a rigorous
lower bound of ``h``), so in block ``j >= 1`` (where ``d >= j w``) ``a <= 4**j e**(-j ln 4) = 1``;
in block 0, ``R <= 1`` because ``M`` is the mode (the products above have every factor below 1).

*Exactness.* ``q(x) a(x) = (3/8) f(M + x) / (w f(M))`` is proportional to ``f``; rounds are
independent, so the accepted ``k`` has law exactly Binomial(``n``, ``p``). A round succeeds
with probability ``3 / (8 w f(M))``, about 0.56 for large ``n p q`` (``w ~ sqrt(2 ln 4 n p q)``,
``f(M) ~ 1 / sqrt(2 pi n p q)``) and measured above 0.45 for every ``M, N >= MIN_MODE`` tried in
the tests; the number of rounds is geometric.

**Float bounds** (:func:`ratio_bounds`). With signed ``x``, ``t1 = x / M``, ``t2 = x / N``, the
function ``phi(t) = (1 + t) ln(1 + t) - t = sum_{k >= 2} (-t)**k / (k (k - 1))`` and Stirling's
``ln k! = (k + 1/2) ln k - k + ln(2 pi) / 2 + s(k)``,

    ``ln R = ln M! - ln (M + x)! + ln N! - ln (N - x)! + x ln(p / q)
           = -M phi(t1) - N phi(-t2) - (ln(1 + t1) + ln(1 - t2)) / 2 + x L + C``,

``L = ln(N p / (M q)) = ln(1 + c)``, ``c = (r - a) / (M (D - a))`` with
``r = (n + 1) a mod D`` (exact integers: ``N p - M q = (r - a) / D``), and
``C = s(M) - s(M + x) + s(N) - s(N - x)`` (the ``x ln(N / M)`` terms cancel into ``L``).
Evaluated where ``|t1|, |t2| <= 1/4``: ``phi`` by Horner over ``SERIES_TERMS`` terms, its tail
at most ``(4/3) |t|**(K + 2) / ((K + 1)(K + 2))`` (``K = SERIES_TERMS``; bounded by
``3 |t|**(K + 1) (|x| + 1) / ((K + 1)(K + 2))`` after the factor ``M`` or ``N`` and the log
terms' share); ``ln(1 + t) = (phi(t) + t) / (1 + t)``; ``L`` by eight terms of its series
(``|c| < 1 / (M q) < 1/127``: ``M q > 127`` because one of ``p, q`` is at least 1/2 and
``M, N >= MIN_MODE``), tail at most ``|x| |c|**9 / (9 (1 - |c|))``; ``s`` by its two-term
bounds (DLMF 5.11(ii); arguments at least ``3 MIN_MODE / 4 = 192``, so the four omitted terms
add up to below ``1.3e-14 < 2**-45``). Every float step (IEEE round-to-nearest basic operations;
no library ``log`` or ``exp``) errs by a few units of ``2**-53`` relative to the magnitude it
touches: the Horner sums by at most ``gamma_(2K)`` times the sum of the terms' absolute values,
which is at most ``1.2 |phi(t)|`` for ``|t| <= 1/4`` (``phi(-s) / phi(s)`` grows from 1 to
1.18 on ``0 < s <= 1/4``); ``phi(t) + t`` cancels by at most a factor 1.3. So ``ln a = j ln 4 +
ln R`` lies within

    ``E = 2**-40 (M |phi(t1)| + N |phi(-t2)| + (|ln(1+t1)| + |ln(1-t2)|) / 2 + |x L| + j + 1)
          + tails + 2**-45``

of its float value ``Y``; ``E`` is then turned into ``T_lo <= a <= T_hi`` exactly as in
:func:`privhist.noise._binomial_large.threshold_bounds` (with its :func:`_exp_reduced`).
Outside ``|t| <= 1/4`` only ``T_hi`` is used, from ``a <= 4**j e**(-h(d))`` with the rigorous
lower bound of ``h``; such proposals are rejected unless ``U`` falls below it.

**Ties** (:func:`accept_exact`): the same ``U`` is continued word by word against the exact
rational ``a`` (``|x| <= EXACT_OFFSET``) or integer bounds from mpmath interval arithmetic on
``ln a`` (:func:`privhist.noise._binomial_large.less_by_bounds`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext

from privhist.core.random import RandomSource
from privhist.noise._binomial_large import (
    _exp_reduced,
    geometric_quarter,
    less_by_bounds,
    log_factorial_interval,
)
from privhist.noise._exact import LazyUniform, rational_oracle

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

#: the direct path needs the mode ``M`` and ``N = n - M`` at least this large
MIN_MODE = 256
#: terms ``k = 2 .. K + 1`` of the series of ``phi``
SERIES_TERMS = 20
#: offsets up to this get exact rational thresholds on a tie; larger ones use intervals
EXACT_OFFSET = 1 << 12
_MIN_PROPOSALS = 1
_MAX_PROPOSALS = 32
_ROUND_SIZE = 1 << 10

_LN4 = 1.3862943611198906  # below ln 4
_LN4_UP = math.nextafter(_LN4, math.inf)  # above ln 4
_WIDEN = 2.0**-40
_ABS = 2.0**-45
_TWO53 = 2.0**53
_EXP_FLOOR = -44.0
_EXP_CEIL = 43.0
_TINY = 2.0**-63
_PHI_COEFFS = [(-1.0) ** k / (k * (k - 1)) for k in range(2, SERIES_TERMS + 2)]
_L_TERMS = 8


class Setup:
    """Per-entry constants of the direct path for one ``p = a / D``: mode, ``N``, ``c``,
    rigorous upper bounds of ``A`` and ``B`` and the block width."""

    def __init__(self, n: I64, p: Fraction) -> None:
        a, den = p.numerator, p.denominator
        self.a, self.den = a, den
        self.n = n
        m, r = _mode_and_rest(n, a, den)
        self.mode = m
        self.rest = n - m
        mf = m.astype(np.float64)
        self.c = (r - a).astype(np.float64) / (mf * float(den - a))
        # A = (n + 1) q and B = (n + 1) p, rounded up (three roundings < 2**-50 relative)
        n1 = (n + 1).astype(np.float64)
        self.a_up = n1 * (float(den - a) / den) * (1.0 + 2.0**-50)
        self.b_up = n1 * (a / den) * (1.0 + 2.0**-50)
        self.width = block_width(self.a_up, self.b_up)


def _mode_and_rest(n: I64, a: int, den: int) -> tuple[I64, I64]:
    """``M = floor((n + 1) a / D)`` and ``r = (n + 1) a mod D`` exactly: int64 where the
    product fits, Python integers elsewhere."""
    m = np.zeros(n.shape[0], dtype=np.int64)
    r = np.zeros(n.shape[0], dtype=np.int64)
    limit = ((1 << 63) - 1) // a - 1
    fast = (n <= limit) if den < (1 << 63) else np.zeros(n.shape[0], dtype=np.bool_)
    if fast.any():
        prod = (n[fast] + 1) * np.int64(a)
        m[fast] = prod // np.int64(den)
        r[fast] = prod % np.int64(den)
    for i in np.flatnonzero(~fast).tolist():
        q, rem = divmod((int(n[i]) + 1) * a, den)
        m[i] = q
        r[i] = rem  # below D < 2**62 (see eligible)
    return m, r


def eligible(n: I64, p: Fraction) -> Bools:
    """Entries for the direct path: ``M >= MIN_MODE`` and ``n - M >= MIN_MODE``, with ``D``
    and ``a`` below ``2**62`` (so that ``c`` is computed from exact int64 values).

    The test is a function of the public ``n`` and ``p`` only.
    """
    a, den = p.numerator, p.denominator
    if not 0 < a < den or den >= 1 << 62:
        return np.zeros(n.shape[0], dtype=np.bool_)
    big = n >= 2 * MIN_MODE
    out = np.zeros(n.shape[0], dtype=np.bool_)
    idx = np.flatnonzero(big)
    if idx.size:
        m, _ = _mode_and_rest(n[idx], a, den)
        out[idx] = (m >= MIN_MODE) & (n[idx] - m >= MIN_MODE)
    return out


def h_lower(d: I64, a_up: F64, b_up: F64) -> F64:
    """A rigorous lower bound of ``h(d) = d (d - 1)/2 (1/(A + d) + 1/(B + d))`` from upper bounds
    of ``A`` and ``B`` (``h`` decreases in both): ``d (d - 1)`` is exact below ``2**53``, the
    seven further roundings stay below ``2**-50`` relative, and the result is lowered by
    ``2**-49``."""
    df = d.astype(np.float64)
    s = 1.0 / (a_up + df) + 1.0 / (b_up + df)
    return (df * (df - 1.0)) * 0.5 * s * (1.0 - 2.0**-49)


def block_width(a_up: F64, b_up: F64) -> I64:
    """A width ``w`` with ``h(w) >= ln 4`` (checked by :func:`h_lower` against a float above
    ``ln 4``), starting near ``sqrt(2 ln 4 A B / (A + B))`` and raised until the check holds."""
    harmonic = a_up * b_up / (a_up + b_up)
    w = np.floor(np.sqrt(2.0 * _LN4 * harmonic) * 1.02).astype(np.int64) + 2
    while True:
        bad = np.flatnonzero(h_lower(w, a_up, b_up) < _LN4_UP)
        if bad.size == 0:
            return w
        w[bad] += np.maximum(w[bad] // 64, 1)


def _phi(t: F64) -> tuple[F64, F64]:
    """``phi(t)`` by Horner (``t**2`` times a polynomial in ``t``) and the bound
    ``3 |t|**(K + 1) / ((K + 1)(K + 2))`` on its tail divided by ``|t|``."""
    poly = np.full_like(t, _PHI_COEFFS[-1])
    for coef in reversed(_PHI_COEFFS[:-1]):
        poly = poly * t + coef
    at = np.abs(t)
    k = SERIES_TERMS
    t2 = at * at
    t4 = t2 * t2
    t8 = t4 * t4
    t16 = t8 * t8
    power = t16 * t4 * at  # |t|**21 = |t|**(K + 1)
    return t * t * poly, power * (3.0 / ((k + 1) * (k + 2)))


def _log1p_small(c: F64) -> F64:
    """``ln(1 + c)`` for ``|c| < 1/127`` by eight terms of its series (Horner)."""
    poly = np.full_like(c, (-1.0) ** (_L_TERMS + 1) / _L_TERMS)
    for k in range(_L_TERMS - 1, 0, -1):
        poly = poly * c + (-1.0) ** (k + 1) / k
    return c * poly


def _sigma(k: F64) -> F64:
    return 1.0 / (12.0 * k) - 1.0 / (360.0 * k * k * k)


def ratio_bounds(
    mode: I64, rest: I64, c: F64, x: I64, j: I64, a_up: F64, b_up: F64
) -> tuple[F64, F64, Bools]:
    """Floats ``T_lo <= a <= T_hi`` for ``a = 4**j f(M + x) / f(M)`` (``M + x`` in ``0..n``),
    and where they are valid (else the caller decides exactly); see the module notes."""
    d = np.abs(x)
    series = (4 * d <= mode) & (4 * d <= rest)
    mf, nf, jf = (v.astype(np.float64) for v in (mode, rest, j))
    xf = np.where(series, x, 0).astype(np.float64)  # the far offsets are bounded below
    t1 = xf / mf
    t2 = xf / nf
    phi, tails = _phi(np.concatenate([t1, -t2]))
    size = x.shape[0]
    phi1, phi2 = phi[:size], phi[size:]
    log1 = (phi1 + t1) / (1.0 + t1)
    log2 = (phi2 - t2) / (1.0 - t2)
    big_l = _log1p_small(c)
    xl = xf * big_l
    corr = _sigma(mf) - _sigma(mf + xf) + _sigma(nf) - _sigma(nf - xf)
    t_m, t_n = mf * phi1, nf * phi2
    half_logs = 0.5 * (log1 + log2)
    y = jf * _LN4 + ((xl + corr) - half_logs - t_m - t_n)
    abs_c = np.abs(c)
    c9 = abs_c**9
    err = (
        _WIDEN * (np.abs(t_m) + np.abs(t_n) + 0.5 * (np.abs(log1) + np.abs(log2)))
        + _WIDEN * (np.abs(xl) + jf + 1.0)
        + (np.abs(xf) + 1.0) * (tails[:size] + tails[size:])
        + np.abs(xf) * c9 * (1.0 / 8.0)
        + _ABS
    )
    negligible = y + 2.0 * err < _EXP_FLOOR
    valid = series & ((err <= 1.0) | negligible) & (y <= _EXP_CEIL)
    mid = _exp_reduced(np.clip(y, _EXP_FLOOR, _EXP_CEIL))
    t_lo = np.where(valid & (y >= _EXP_FLOOR), mid * ((1.0 - _WIDEN) * (1.0 - err)), 0.0)
    t_hi = np.where(negligible, _TINY, mid * ((1.0 + _WIDEN) * (1.0 + 2.0 * err)))
    # outside the series' range: a <= 4**j exp(-h(d)) only (j ln 4 in float errs < 2**-50 j)
    far = ~valid
    if far.any():
        hb = h_lower(d[far], a_up[far], b_up[far])
        jb = jf[far] * _LN4_UP
        yb = (jb - hb) + _WIDEN * (jb + hb + 1.0)  # the subtraction's rounding, with room
        small = yb < _EXP_FLOOR
        hi = _exp_reduced(np.clip(yb, _EXP_FLOOR, _EXP_CEIL)) * (1.0 + _WIDEN)
        hi = np.where(yb > _EXP_CEIL, np.inf, hi)
        t_hi[far] = np.where(small, _TINY, hi)
        t_lo[far] = 0.0
    return t_lo, t_hi, valid


def accept_exact(
    mode: int, rest: int, x: int, j: int, a: int, den: int, first_word: int, rng: RandomSource
) -> bool:
    """Whether ``U < a(x) = 4**j f(M + x) / f(M)`` for the uniform ``U`` whose first word is
    ``first_word``; offsets outside ``-M..N`` are rejected (``a = 0``)."""
    if x > rest or -x > mode:
        return False
    d = abs(x)
    if d <= EXACT_OFFSET:
        if x >= 0:  # perm(N, d) a**d / (perm(M + d, d) (D - a)**d)
            num = math.perm(rest, d) * a**d
            div = math.perm(mode + d, d) * (den - a) ** d
        else:  # perm(M, d) (D - a)**d / (perm(N + d, d) a**d)
            num = math.perm(mode, d) * (den - a) ** d
            div = math.perm(rest + d, d) * a**d
        return LazyUniform(rng, first_word).less(rational_oracle(num << (2 * j), div))
    return less_by_bounds(
        first_word, rng, lambda prec: ratio_interval(mode, rest, x, j, a, den, prec)
    )


def ratio_interval(
    mode: int, rest: int, x: int, j: int, a: int, den: int, prec: int
) -> tuple[int, int]:
    """Integers ``lo <= a(x) 2**prec <= hi`` by mpmath interval arithmetic on
    ``ln a = j ln 4 + ln M! + ln N! - ln (M + x)! - ln (N - x)! + x (ln a - ln (D - a))``,
    ends moved out by one unit (as :func:`privhist.noise._binomial_large.threshold_interval`)."""
    ctx = MPIntervalContext()
    n = mode + rest
    ctx.prec = prec + n.bit_length() + den.bit_length() + 64
    k0 = max(4096, prec)
    log_a = (
        j * ctx.log(ctx.mpf(4))
        + log_factorial_interval(ctx, mode, k0)
        + log_factorial_interval(ctx, rest, k0)
        - log_factorial_interval(ctx, mode + x, k0)
        - log_factorial_interval(ctx, rest - x, k0)
        + x * (ctx.log(ctx.mpf(a)) - ctx.log(ctx.mpf(den - a)))
    )
    lo_mpf, hi_mpf = ctx.exp(log_a)._mpi_
    lo = libmp.to_int(libmp.mpf_shift(lo_mpf, prec), libmp.round_floor)
    hi = libmp.to_int(libmp.mpf_shift(hi_mpf, prec), libmp.round_ceiling)
    return max(lo - 1, 0), hi + 1


def binomial_direct(n: I64, p: Fraction, rng: RandomSource) -> I64:
    """Binomial(``n_i``, ``p``) for entries where :func:`eligible` holds, by rejection.

    As in :func:`privhist.noise._binomial_large.binomial_half_large`, every round gives each
    unfinished entry ``c`` independent proposals and keeps the first accepted one.
    """
    s = Setup(n, p)
    offset = np.zeros(n.shape[0], dtype=np.int64)
    todo = np.arange(n.shape[0])
    while todo.size:
        per = max(_MIN_PROPOSALS, min(_MAX_PROPOSALS, _ROUND_SIZE // todo.size))
        rep = np.repeat(todo, per)
        accepted, x = _propose(s, rep, rng)
        accepted = accepted.reshape(todo.size, per)
        first = np.argmax(accepted, axis=1)
        done = accepted.any(axis=1)
        offset[todo[done]] = x.reshape(todo.size, per)[done, first[done]]
        todo = todo[~done]
    return s.mode + offset


def _propose(s: Setup, idx: I64, rng: RandomSource) -> tuple[Bools, I64]:
    """One proposal for each entry ``idx`` of ``s``; returns (accepted, offset ``x``)."""
    count = idx.shape[0]
    n, w, mode, rest = s.n[idx], s.width[idx], s.mode[idx], s.rest[idx]
    j = geometric_quarter(rng, count)
    v = rng.uniform_below(w)
    neg = rng.bits(count)
    in_range = j <= n // w  # then j w + v < n + w: no overflow
    j = np.where(in_range, j, 0)
    y = j * w + v
    x = np.where(neg, -(y + 1), y)
    in_range &= np.where(neg, y + 1 <= mode, y <= rest)
    x = np.where(in_range, x, 0)
    words = rng.uint64(count)
    t_lo, t_hi, valid = ratio_bounds(mode, rest, s.c[idx], x, j, s.a_up[idx], s.b_up[idx])
    v53 = (words >> np.uint64(11)).astype(np.float64)
    accept = valid & (v53 + 1.0 <= t_lo * _TWO53) & in_range
    reject = (v53 >= t_hi * _TWO53) | ~in_range
    for i in np.flatnonzero(~accept & ~reject).tolist():  # rare: decided exactly
        accept[i] = accept_exact(
            int(mode[i]), int(rest[i]), int(x[i]), int(j[i]), s.a, s.den, int(words[i]), rng
        )
    return accept, x
