"""Exact real arithmetic for the samplers: rigorous bounds, exact binary digits, lazy comparison.

Every sampler in :mod:`privhist.noise` reduces to one primitive: *is a uniform real
``U in [0, 1)`` below a threshold ``T``?* ``U = 0.w1 w2 w3 ...`` is the concatenation of
independent uniform 64-bit words, drawn only as far as needed, and ``T`` is represented by an
*oracle* returning ``floor(T * 2**bits)`` exactly, for any ``bits``. With ``U_j`` the integer
formed by the first ``j`` words and ``F_j = floor(T * 2**(64 j))``:

* ``U_j < F_j`` implies ``U < (U_j + 1) / 2**(64 j) <= F_j / 2**(64 j) <= T``: answer *yes*;
* ``U_j > F_j`` implies ``U >= U_j / 2**(64 j) >= (F_j + 1) / 2**(64 j) > T``: answer *no*;
* ``U_j == F_j`` (probability at most ``2**-64`` per word): look at the next word. If the
  oracle says ``T * 2**(64 j)`` is an integer, the remaining digits of ``T`` are all zero and
  ``U >= T``: answer *no*.

So ``P[yes] = P[U < T] = T`` exactly, and the expected number of words is ``1 + 2**-64 + ...``.
The vectorised samplers do the first word with NumPy and send the rare ties here.

Oracles for transcendental thresholds such as ``exp(-x)`` come from integer interval
arithmetic: :func:`exp_bounds` returns integers ``lo <= exp(x) * 2**prec <= hi`` (Taylor series
with a bounded tail, argument halving and squaring, every rounding directed outwards), and
:func:`floor_from_bounds` raises the precision until ``floor`` of both ends agree. For irrational
thresholds (all of ours: ``exp(-x)`` is irrational for rational ``x != 0``, by Lindemann's
theorem) the loop terminates. Were a threshold exactly dyadic, the worst case is an
``ArithmeticError`` (failing closed), never a wrong sample.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from privhist.core.random import RandomSource

#: ``bits -> (floor(T * 2**bits), whether T * 2**bits is an integer)``
Oracle = Callable[[int], tuple[int, bool]]
#: ``prec -> (lo, hi)`` with ``lo <= T * 2**prec <= hi``
Bounds = Callable[[int], tuple[int, int]]

WORD_BITS = 64
TWO64 = 1 << 64
MAX_WORD = TWO64 - 1

_MAX_GUARD = 1 << 16


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, ``b > 0``."""
    return -((-a) // b)


def _exp_pos_fixed(y: Fraction, w: int) -> tuple[int, int]:
    """Integers ``lo <= exp(y) * 2**w <= hi`` for rational ``y > 0``.

    Halve the argument ``r`` times so that ``z = y / 2**r <= 1/2``; sum the Taylor series of
    ``exp(z)`` in fixed point with ``ww`` fractional bits, rounding each term down for ``lo`` and
    up for ``hi``; bound the tail after the first term ``t_K <= 2**-ww`` (upper) by ``2 t_K``,
    because the ratio of consecutive terms is ``z / (k + 1) <= 1/2``; then square ``r`` times,
    rounding outwards. The relative width is about ``2**(r - ww) * (number of terms)``, so the
    ``r + 8`` extra bits keep the result within a few units of ``2**w``.
    """
    p, q = y.numerator, y.denominator
    r = (ceil_div(2 * p, q) - 1).bit_length() if 2 * p > q else 0
    ww = w + r + 8
    den = q << r
    unit = 1 << ww
    lo_sum = hi_sum = 0
    t_lo = t_hi = unit
    k = 0
    while True:
        lo_sum += t_lo
        hi_sum += t_hi
        k += 1
        t_lo = t_lo * p // (den * k)
        t_hi = ceil_div(t_hi * p, den * k)
        if t_hi <= 1:
            hi_sum += 2 * t_hi
            break
    lo, hi = lo_sum, hi_sum
    for _ in range(r):
        lo = (lo * lo) >> ww
        hi = ceil_div(hi * hi, unit)
    shift = ww - w
    return lo >> shift, ceil_div(hi, 1 << shift)


def exp_bounds(x: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= exp(x) * 2**prec <= hi`` for any rational ``x``.

    The width ``hi - lo`` is a few units for moderate ``|x|``; callers that need the floor use
    :func:`floor_from_bounds`, which raises ``prec`` until the floor is determined.

    >>> exp_bounds(Fraction(0), 10)
    (1024, 1024)
    >>> lo, hi = exp_bounds(Fraction(-1), 64)
    >>> lo <= 6786177901268885274 <= hi  # floor(exp(-1) * 2**64)
    True
    """
    if x == 0:
        v = 1 << prec
        return v, v
    if x > 0:
        # e**x < 2**(3x/2 + 1): carry enough bits that the absolute width stays small
        extra = 3 * x.numerator // (2 * x.denominator) + 2
        lo, hi = _exp_pos_fixed(x, prec + extra)
        return lo >> extra, ceil_div(hi, 1 << extra)
    y = -x
    if y > prec + 1:
        # e**-y < 2**-y, so exp(x) * 2**prec < 1/2
        return 0, 1
    w = prec + 8
    lo, hi = _exp_pos_fixed(y, w)
    top = 1 << (prec + w)
    return top // hi, ceil_div(top, lo)


def exp_rational_bounds(x: Fraction | int, prec: int = 128) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= exp(x) <= hi`` (``hi - lo`` about ``2**-prec``), for privacy
    parameters that must be rounded conservatively (e.g. a rational ``r <= e**epsilon``).

    >>> lo, hi = exp_rational_bounds(Fraction(1))
    >>> float(lo) == float(hi) == 2.718281828459045, hi - lo <= Fraction(2, 2**128)
    (True, True)
    """
    lo, hi = exp_bounds(Fraction(x), prec)
    return Fraction(lo, 1 << prec), Fraction(hi, 1 << prec)


def floor_from_bounds(bounds: Bounds, bits: int) -> int:
    """``floor(T * 2**bits)`` from an interval oracle, raising precision until it is decided.

    Since ``lo <= T * 2**(bits + g) <= hi``, ``floor(T * 2**bits)`` lies between
    ``lo >> g`` and ``hi >> g``; equality decides it.
    """
    guard = 32
    while guard <= _MAX_GUARD:
        lo, hi = bounds(bits + guard)
        if lo >> guard == hi >> guard:
            return lo >> guard
        guard *= 2
    raise ArithmeticError(
        "could not determine a binary digit of a sampling threshold; "
        "the threshold is (numerically indistinguishable from) a dyadic rational"
    )


def rational_oracle(num: int, den: int) -> Oracle:
    """Oracle for the rational ``num / den`` (exact integer division)."""

    def oracle(bits: int) -> tuple[int, bool]:
        q, rem = divmod(num << bits, den)
        return q, rem == 0

    return oracle


def exp_neg_oracle(x: Fraction) -> Oracle:
    """Oracle for ``exp(-x)``, ``x >= 0`` rational (irrational unless ``x == 0``)."""

    def oracle(bits: int) -> tuple[int, bool]:
        if x == 0:
            return 1 << bits, True
        return floor_from_bounds(lambda prec: exp_bounds(-x, prec), bits), False

    return oracle


def bounds_oracle(bounds: Bounds) -> Oracle:
    """Oracle for an irrational threshold given by an interval oracle."""

    def oracle(bits: int) -> tuple[int, bool]:
        return floor_from_bounds(bounds, bits), False

    return oracle


def exp_neg_floor(x: Fraction, bits: int = WORD_BITS) -> int:
    """``floor(exp(-x) * 2**bits)`` exactly, for rational ``x >= 0``.

    >>> exp_neg_floor(Fraction(1))
    6786177901268885274
    >>> exp_neg_floor(Fraction(0), 8)
    256
    """
    return exp_neg_oracle(x)(bits)[0]


def capped(first_word_floor: int) -> int:
    """Store ``floor(T * 2**64)`` in a uint64: ``T = 1`` gives ``2**64``, stored as ``2**64 - 1``.

    Comparing a word ``W < 2**64 - 1`` answers *yes* correctly; ``W == 2**64 - 1`` is then
    treated as a tie and resolved exactly by :meth:`LazyUniform.less`.
    """
    return min(first_word_floor, MAX_WORD)


class LazyUniform:
    """A uniform real ``U = 0.w1 w2 ...`` whose 64-bit words are drawn only when needed.

    Successive comparisons with different thresholds refer to the same ``U`` (drawn words are
    kept), which is what inversion sampling needs.
    """

    def __init__(self, rng: RandomSource, first_word: int | None = None) -> None:
        self._rng = rng
        self._prefixes: list[int] = [] if first_word is None else [first_word]

    def prefix(self, j: int) -> int:
        """The integer formed by the first ``j`` words, ``floor(U * 2**(64 j))``."""
        while len(self._prefixes) < j:
            word = int(self._rng.uint64(1)[0])
            last = self._prefixes[-1] if self._prefixes else 0
            self._prefixes.append((last << WORD_BITS) | word)
        return self._prefixes[j - 1]

    def less(self, oracle: Oracle) -> bool:
        """Whether ``U < T`` for the threshold ``T`` described by ``oracle`` (exactly)."""
        j = 1
        while True:
            u = self.prefix(j)
            f, exact = oracle(WORD_BITS * j)
            if u < f:
                return True
            if u > f or exact:
                return False
            j += 1
