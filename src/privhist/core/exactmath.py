"""Rigorous bounds on transcendental constants, as exact rationals.

Privacy parameters such as ``e**epsilon`` are irrational; mechanisms that must satisfy an
inequality exactly use a rational lower or upper bound instead, so rounding always goes the
conservative way. Bounds come from mpmath's interval arithmetic (``mpmath.iv``), which encloses
the true value.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath


def _iv(x: Fraction) -> Any:
    return mpmath.iv.mpf(x.numerator) / mpmath.iv.mpf(x.denominator)


def _raw_to_fraction(raw: tuple[int, int, int, int]) -> Fraction:
    sign, man, exp, _ = raw  # mpmath's exact binary representation
    value = Fraction(int(man)) * (Fraction(2) ** int(exp))
    return -value if sign else value


def exp_bounds(x: Fraction | int | float, prec: int = 128) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= exp(x) <= hi`` with ``hi - lo`` about ``2**-prec`` relative.

    >>> lo, hi = exp_bounds(1)
    >>> float(lo) == float(hi) == 2.718281828459045, hi - lo < Fraction(1, 2**120)
    (True, True)
    """
    return _bounds(mpmath.iv.exp, Fraction(x), prec)


def log_bounds(x: Fraction | int | float, prec: int = 128) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= ln(x) <= hi`` for ``x > 0``."""
    return _bounds(mpmath.iv.log, Fraction(x), prec)


def _bounds(fn: Callable[[Any], Any], x: Fraction, prec: int) -> tuple[Fraction, Fraction]:
    ctx = mpmath.iv
    saved = ctx.prec
    ctx.prec = prec
    try:
        y = fn(_iv(x))
        lo_raw, hi_raw = y._mpi_
        return _raw_to_fraction(lo_raw), _raw_to_fraction(hi_raw)
    finally:
        ctx.prec = saved
