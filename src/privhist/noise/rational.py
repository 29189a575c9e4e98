"""Conservative rational rounding of real parameters (bounded denominators)."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

from privhist.core.errors import ValidationError

DEFAULT_MAX_DENOMINATOR = 1 << 20


def rational_at_most(x: Any, max_denominator: int = DEFAULT_MAX_DENOMINATOR) -> Fraction:
    """The largest fraction ``p / q <= x`` with ``1 <= q <= max_denominator``.

    Use it to round a parameter *down* when smaller is safer, e.g. ``epsilon``:
    ``Fraction(1) / rational_at_most(epsilon)`` is a Laplace scale at least ``1 / epsilon``.

    Args:
        x: A finite real: int, float (its exact binary value is used), Fraction, Decimal, or
            a string such as ``'0.1'`` or ``'1/3'`` (read exactly).
        max_denominator: Largest allowed denominator, an integer ``>= 1``.

    Returns:
        The best lower approximation (``x`` itself when its denominator is small enough).

    >>> rational_at_most(0.1, 100)
    Fraction(1, 10)
    >>> rational_at_most(Fraction(1, 3), 10), rational_at_most(0.3333, 10)
    (Fraction(1, 3), Fraction(3, 10))
    """
    return _best(x, max_denominator, "rational_at_most")[0]


def rational_at_least(x: Any, max_denominator: int = DEFAULT_MAX_DENOMINATOR) -> Fraction:
    """The smallest fraction ``p / q >= x`` with ``1 <= q <= max_denominator``.

    Use it to round a parameter *up* when larger is safer, e.g. a noise scale
    ``rational_at_least(Fraction(sensitivity) / Fraction(epsilon))`` or ``sigma2``.

    >>> rational_at_least(0.1, 100)
    Fraction(10, 99)
    >>> rational_at_least(2.5), rational_at_least(-0.3333, 10)
    (Fraction(5, 2), Fraction(-3, 10))
    """
    return _best(x, max_denominator, "rational_at_least")[1]


def _best(x: Any, max_denominator: Any, fn: str) -> tuple[Fraction, Fraction]:
    if isinstance(max_denominator, bool) or not isinstance(max_denominator, numbers.Integral):
        raise ValidationError("max_denominator", fn, "an integer >= 1", max_denominator)
    big_n = int(max_denominator)
    if big_n < 1:
        raise ValidationError("max_denominator", fn, "an integer >= 1", max_denominator)
    if isinstance(x, bool):
        raise ValidationError("x", fn, "a finite real number", x)
    if isinstance(x, float) and not math.isfinite(x):
        raise ValidationError("x", fn, "a finite real number", x)
    try:
        v = Fraction(x)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        raise ValidationError("x", fn, "a finite real number", x) from None
    if v.denominator <= big_n:
        return v, v
    # Stern-Brocot search: a/b < v < c/d, b c - a d = 1, both denominators <= N. When the
    # mediant's denominator b + d exceeds N they are neighbours in the Farey sequence of order
    # N, so no fraction with denominator <= N lies strictly between them (any such one has
    # denominator >= b + d); v itself is excluded because its denominator exceeds N.
    # in integers, v = p / q (q > 0): x / y < v exactly when x q < p y
    p, q = v.numerator, v.denominator
    a, b = p // q, 1
    c, d = a + 1, 1
    while b + d <= big_n:
        if (a + c) * q < p * (b + d):
            # largest j with (a + j c)/(b + j d) < v: j (c q - p d) < p b - a q
            j = -((a * q - p * b) // (c * q - p * d)) - 1
            j = max(1, min(j, (big_n - b) // d))
            a, b = a + j * c, b + j * d
        else:
            # largest j with (c + j a)/(d + j b) > v: j (p b - a q) < c q - p d
            j = -((p * d - c * q) // (p * b - a * q)) - 1
            j = max(1, min(j, (big_n - d) // b))
            c, d = c + j * a, d + j * b
    return Fraction(a, b), Fraction(c, d)
