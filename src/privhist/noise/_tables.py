"""Threshold tables and exact inversion with one 64-bit word per sample.

A non-negative integer random variable ``M`` with tail ``P[M >= k] = T_k`` (decreasing in ``k``)
is ``M = #{k >= 1 : U < T_k}`` for one uniform ``U`` (inversion). With ``F_k = floor(T_k 2**64)``
and ``W`` the first word of ``U``, ``U < T_k`` is decided by ``W < F_k`` / ``W > F_k`` unless
``W == F_k`` (see :mod:`privhist.noise._exact`). A :class:`ThresholdTable` keeps ``F_1 .. F_K``
where ``T_k < 2**-64`` for every ``k > K`` (so ``F_k = 0``); then for a word ``W`` that equals no
stored ``F_k`` and is not 0, ``M`` is exactly the number of stored ``F_k > W``. A guide indexed
by the top 16 bits of ``W`` gives that number directly whenever no stored floor falls in the
word's bucket of ``2**48`` values (most words); the others use ``searchsorted``. Words that
tie (probability ``<= (K + 1) / 2**64``) are finished by :func:`count_exact`, a galloping
search over ``k`` with exact lazy comparisons of the same ``U``.

A byte first. Most tables put their floors in a few of the 256 intervals
``[b 2**56, (b + 1) 2**56)`` (the discrete Laplace magnitude at scale 1 in 6 of them, the
interval of 0 included): for a first byte ``b`` of ``U`` whose interval holds no stored floor,
every word that starts with ``b`` gives the same ``M`` and none ties, so ``M`` is decided by the
byte alone. :func:`invert` then draws one byte per sample and completes the word (56 more bits
of a fresh word) only for the bytes that do not decide, about ``1 + 8 d`` bytes a sample
instead of 8 for a share ``d`` of undecided intervals; tables with ``d > 1/2`` draw whole words.
The bits of ``U`` are i.i.d. fair bits whichever order they are drawn in, so the law of ``M`` is
unchanged; drawing randomness is the main cost of a sample (the operating system's generator
yields a few hundred MB/s).

Tables are built with integer interval arithmetic: the bounds of ``alpha**k`` are carried from
one ``k`` to the next, rounding outwards, at a working precision with ``40 + log2(K)`` spare bits;
an entry whose floor the bounds do not decide (probability about ``2**-32``) is computed
directly from its oracle. Tables are cached per parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from privhist.core.random import RandomSource
from privhist.noise._exact import (
    WORD_BITS,
    LazyUniform,
    Oracle,
    bounds_oracle,
    capped,
    ceil_div,
    exp_bounds,
    exp_neg_oracle,
)

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

#: largest table built for one inversion (entries of 8 bytes)
TABLE_MAX = 1 << 16


@dataclass(frozen=True, eq=False)
class ThresholdTable:
    """Floors ``F_k = floor(T_k 2**64)``, ``k = 1..K``, of decreasing tail probabilities ``T_k``.

    Attributes:
        ascending: ``[0, F_K, ..., F_1]`` as uint64 (the leading 0 stands for every ``k > K``).
        threshold: ``k -> oracle`` of ``T_k`` for every ``k >= 1`` (also beyond ``K``).
        guide: for each bucket ``j`` of words ``[j 2**48, (j + 1) 2**48)``, the number of
            entries of ``ascending`` above every word of the bucket if none lies inside it,
            else -1.
        byte_guide: the same for the 256 buckets of a first byte, ``[b 2**56, (b + 1) 2**56)``
            (int64); None when more than half of them hold an entry (words are drawn whole).
    """

    ascending: U64
    threshold: Callable[[int], Oracle]
    guide: npt.NDArray[np.int32]
    byte_guide: I64 | None = None

    @property
    def size(self) -> int:
        """``K``, the number of stored floors."""
        return int(self.ascending.shape[0]) - 1

    @property
    def floors(self) -> list[int]:
        """``[F_1, ..., F_K]`` as Python ints."""
        return [int(f) for f in self.ascending[:0:-1]]


def invert(table: ThresholdTable, rng: RandomSource, n: int) -> I64:
    """``n`` independent draws of ``M = #{k >= 1 : U < T_k}`` (so ``P[M >= k] = T_k``).

    With a byte guide, each draw reads the first byte of ``U`` and, when that byte does not
    decide ``M``, 56 more bits (the top of a fresh word) to finish its first word."""
    if table.byte_guide is None:
        return invert_words(table, rng.uint64(n), rng)
    first = rng.uint64((n + 7) // 8).view(np.uint8)[:n]
    out: I64 = table.byte_guide[first]
    dirty = np.flatnonzero(out < 0)
    if dirty.size:
        top = first[dirty].astype(np.uint64) << np.uint64(_BYTE_SHIFT)
        words = top | (rng.uint64(int(dirty.size)) >> np.uint64(64 - _BYTE_SHIFT))
        out[dirty] = invert_words(table, words, rng)
    return out


def invert_words(table: ThresholdTable, words: U64, rng: RandomSource) -> I64:
    """``M = #{k >= 1 : U < T_k}`` for uniforms ``U`` whose first 64-bit words are ``words``
    (``rng`` draws the further words of the rare ties)."""
    asc = table.ascending
    out: I64 = table.guide[words >> np.uint64(_GUIDE_SHIFT)].astype(np.int64)
    dirty = np.flatnonzero(out < 0)
    w = words[dirty]
    idx = np.searchsorted(asc, w, side="right")
    out[dirty] = asc.shape[0] - idx
    ties = dirty[asc[idx - 1] == w]
    for i in ties.tolist():  # rare: probability <= (K + 1) / 2**64 per draw
        out[i] = count_exact(table, int(words[i]), rng)
    return out


def count_exact(table: ThresholdTable, first_word: int, rng: RandomSource) -> int:
    """``#{k >= 1 : U < T_k}`` for ``U`` with the given first word, decided exactly.

    Every ``k`` with ``F_k > first_word`` certainly counts. Beyond those, the set of ``k`` with
    ``U < T_k`` is an initial segment (``T_k`` decreases), found by galloping then bisection,
    each step an exact lazy comparison against the same ``U``.
    """
    u = LazyUniform(rng, first_word)
    asc = table.ascending
    sure = int(asc.shape[0] - np.searchsorted(asc, np.uint64(first_word), side="right"))
    lo = sure  # U < T_k for every k <= lo (vacuous for lo == 0)
    step = 1
    while True:
        k = lo + step
        if not u.less(table.threshold(k)):
            hi = k
            break
        lo = k
        step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if u.less(table.threshold(mid)):
            lo = mid
        else:
            hi = mid
    if lo >= 1 << 63:
        raise OverflowError("a sample exceeds the int64 range")
    return lo


_GUIDE_BITS = 16
_GUIDE_SHIFT = 64 - _GUIDE_BITS
_BYTE_SHIFT = 56


def _guide(asc: U64, shift: int) -> I64:
    """For each bucket ``[j 2**shift, (j + 1) 2**shift)`` of words, the number of entries of
    ``asc`` above it when none lies inside it, else -1."""
    starts = np.arange(1 << (64 - shift), dtype=np.uint64) << np.uint64(shift)
    ends = starts + np.uint64((1 << shift) - 1)
    first_inside = np.searchsorted(asc, starts, side="left")
    after = np.searchsorted(asc, ends, side="right")
    # no entry inside the bucket: every word in it has the same count, and none ties
    return np.where(first_inside == after, asc.shape[0] - after, -1).astype(np.int64)


def _finish(floors: list[int], threshold: Callable[[int], Oracle]) -> ThresholdTable:
    asc = np.array([0, *reversed(floors)], dtype=np.uint64)
    guide = _guide(asc, _GUIDE_SHIFT).astype(np.int32)
    byte_guide: I64 | None = _guide(asc, _BYTE_SHIFT)
    assert byte_guide is not None
    if 2 * int((byte_guide < 0).sum()) > byte_guide.shape[0]:
        byte_guide = None  # a first byte would rarely decide: draw whole words
    else:
        byte_guide.flags.writeable = False
    asc.flags.writeable = False
    guide.flags.writeable = False
    return ThresholdTable(asc, threshold, guide, byte_guide)


def _count_bound(x: Fraction) -> int:
    """An integer ``>= 45 / x``, above the number of ``k`` with ``exp(-x k) >= 2**-64``."""
    return ceil_div(45 * x.denominator, x.numerator)


def _powers(
    x: Fraction, w: int, transform: Callable[[int, int], tuple[int, int]], count: int | None
) -> list[tuple[int, int]]:
    """Bounds of ``transform(alpha**k)`` at scale ``2**w``, ``alpha = exp(-x)``, ``k = 1, 2, ...``.

    Stops after ``count`` entries, or (``count is None``) once the upper bound drops below
    ``2**(w - 64)`` — then ``floor(T_k 2**64) = 0`` for this and, by monotonicity, all later ``k``.
    """
    a_lo, a_hi = exp_bounds(-x, w)
    unit = 1 << w
    p_lo, p_hi = a_lo, a_hi
    out: list[tuple[int, int]] = []
    floor_shift = w - WORD_BITS
    while count is None or len(out) < count:
        t_lo, t_hi = transform(p_lo, p_hi)
        if count is None and t_hi >> floor_shift == 0:
            break
        out.append((t_lo, t_hi))
        p_lo = (p_lo * a_lo) >> w
        p_hi = ceil_div(p_hi * a_hi, unit)
    return out


def _floors(bounds: list[tuple[int, int]], w: int, threshold: Callable[[int], Oracle]) -> list[int]:
    """``floor(T_k 2**64)`` from bounds at scale ``2**w``; undecided entries computed exactly."""
    shift = w - WORD_BITS
    floors = []
    for k, (t_lo, t_hi) in enumerate(bounds, start=1):
        f = t_lo >> shift
        if f != t_hi >> shift:
            f = threshold(k)(WORD_BITS)[0]
        floors.append(f)
    while floors and floors[-1] == 0:
        floors.pop()
    return floors


def _work_bits(count: int) -> int:
    return WORD_BITS + 40 + count.bit_length()


@lru_cache(maxsize=32)
def geometric_table(x: Fraction) -> ThresholdTable:
    """Table for the geometric tail ``P[G >= k] = exp(-x k)``."""

    def threshold(k: int) -> Oracle:
        return exp_neg_oracle(x * k)

    w = _work_bits(_count_bound(x))
    bounds = _powers(x, w, lambda lo, hi: (lo, hi), None)
    return _finish(_floors(bounds, w, threshold), threshold)


@lru_cache(maxsize=32)
def laplace_table(x: Fraction) -> ThresholdTable:
    """Table for ``P[|Z| >= k] = 2 alpha**k / (1 + alpha)``, ``alpha = exp(-x)``, ``k >= 1``.

    This is the tail of the magnitude of the discrete Laplace variable with pmf proportional to
    ``alpha**|z|``: ``P[Z = z] = (1 - alpha) / (1 + alpha) * alpha**|z|``, summed over ``|z| >= k``.
    """

    def bounds_k(k: int) -> Callable[[int], tuple[int, int]]:
        def bounds(prec: int) -> tuple[int, int]:
            big = prec + 8
            p_lo, p_hi = exp_bounds(-x * k, big)
            a_lo, a_hi = exp_bounds(-x, big)
            one = 1 << big
            return (2 * p_lo << prec) // (one + a_hi), ceil_div(2 * p_hi << prec, one + a_lo)

        return bounds

    def threshold(k: int) -> Oracle:
        return bounds_oracle(bounds_k(k))

    w = _work_bits(_count_bound(x))
    a_lo, a_hi = exp_bounds(-x, w)
    unit = 1 << w
    # c = 2 / (1 + alpha) at scale 2**w, rounded outwards
    c_lo = (2 * unit * unit) // (unit + a_hi)
    c_hi = ceil_div(2 * unit * unit, unit + a_lo)

    def transform(lo: int, hi: int) -> tuple[int, int]:
        return (lo * c_lo) >> w, ceil_div(hi * c_hi, unit)

    bounds = _powers(x, w, transform, None)
    return _finish(_floors(bounds, w, threshold), threshold)


@lru_cache(maxsize=32)
def truncated_table(x: Fraction, m: int) -> ThresholdTable:
    """Table for ``L = G mod m`` with ``G`` geometric: ``P[L >= k] = (a**k - a**m) / (1 - a**m)``.

    Here ``a = exp(-x)`` and ``0 <= k < m``; ``P[L >= k] = 0`` for ``k >= m``. ``L`` is
    independent of ``G // m``, which is geometric with parameter ``x m``: the pmf
    ``(1 - a) a**(q m + l)`` factorises into a function of ``q`` times a function of ``l``.
    """

    def bounds_k(k: int) -> Callable[[int], tuple[int, int]]:
        def bounds(prec: int) -> tuple[int, int]:
            big = prec + 8
            p_lo, p_hi = exp_bounds(-x * k, big)
            b_lo, b_hi = exp_bounds(-x * m, big)
            one = 1 << big
            n_lo, n_hi = p_lo - b_hi, p_hi - b_lo
            d_lo, d_hi = one - b_hi, one - b_lo
            if n_lo < 0 or d_lo <= 0:
                return 0, 1 << prec  # not yet informative: the caller raises the precision
            return (n_lo << prec) // d_hi, ceil_div(n_hi << prec, d_lo)

        return bounds

    def threshold(k: int) -> Oracle:
        if k >= m:
            return lambda bits: (0, True)
        return bounds_oracle(bounds_k(k))

    w = _work_bits(m) + (ceil_div(x.denominator, x.numerator * m)).bit_length()
    powers = _powers(x, w, lambda lo, hi: (lo, hi), m)
    b_lo, b_hi = powers[m - 1]
    unit = 1 << w
    bounds: list[tuple[int, int]] = []
    for p_lo, p_hi in powers[: m - 1]:
        n_lo, n_hi = p_lo - b_hi, p_hi - b_lo
        d_lo, d_hi = unit - b_hi, unit - b_lo
        if n_lo < 0 or d_lo <= 0:
            bounds.append((0, unit))  # undecided: computed exactly by _floors
        else:
            bounds.append(((n_lo << w) // d_hi, ceil_div(n_hi << w, d_lo)))
    return _finish(_floors(bounds, w, threshold), threshold)


@lru_cache(maxsize=256)
def exp_power_floors(x: Fraction, count: int) -> U64:
    """``[floor(exp(-x j) 2**64) for j in range(count)]`` as uint64 (``j = 0`` capped).

    Used for tables of Bernoulli(``exp(-x j)``) probabilities; see :func:`_exact.capped`.
    """
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)

    def threshold(k: int) -> Oracle:
        return exp_neg_oracle(x * k)

    w = _work_bits(count)
    bounds = _powers(x, w, lambda lo, hi: (lo, hi), count - 1)
    floors = _floors(bounds, w, threshold)
    floors += [0] * (count - 1 - len(floors))
    table = np.array([capped(1 << WORD_BITS), *floors], dtype=np.uint64)
    table.flags.writeable = False
    return table
