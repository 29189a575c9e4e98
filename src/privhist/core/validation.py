"""Declarative parameter checks with one message template (see :mod:`privhist.core.errors`)."""

from __future__ import annotations

import math
import numbers
import sys
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError

#: the largest epsilon a mechanism accepts: beyond it a guarantee means nothing in practice
#: (e^100 > 10^43), and exact samplers and profile computations would overflow
MAX_EPSILON = 100.0


def check_epsilon(
    value: Any, function: str, name: str = "epsilon", *, maximum: float | None = None
) -> float:
    """Return ``value`` as a float if it is a finite number > 0 (and <= ``maximum``)."""
    x = _real(value, function, name, "a finite number > 0")
    if not math.isfinite(x) or x <= 0:
        raise ValidationError(name, function, "a finite number > 0", value)
    if maximum is not None and x > maximum:
        raise ValidationError(name, function, f"<= {maximum:g} (the largest accepted)", value)
    return x


def check_delta(value: Any, function: str, name: str = "delta", *, positive: bool = False) -> float:
    """Return ``value`` as a float in [0, 1) (or (0, 1) when ``positive``)."""
    expected = "in (0, 1)" if positive else "in [0, 1)"
    x = _real(value, function, name, expected)
    if not math.isfinite(x) or x < 0 or x >= 1 or (positive and x == 0):
        raise ValidationError(name, function, expected, value)
    if 0 < x < sys.float_info.min:
        # a subnormal float: too small to compute with (its reciprocal overflows)
        raise ValidationError(
            name, function, f"0 or >= {sys.float_info.min!r} (the smallest accepted)", value
        )
    return x


def check_probability(
    value: Any, function: str, name: str, *, open_low: bool = False, open_high: bool = False
) -> float:
    """Return ``value`` as a float in [0, 1] with optionally open ends."""
    lo, hi = ("(" if open_low else "["), (")" if open_high else "]")
    expected = f"in {lo}0, 1{hi}"
    x = _real(value, function, name, expected)
    bad = not math.isfinite(x) or x < 0 or x > 1 or (open_low and x == 0) or (open_high and x == 1)
    if bad:
        raise ValidationError(name, function, expected, value)
    return x


def check_positive_int(value: Any, function: str, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum`` (bools rejected)."""
    expected = f"an integer >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValidationError(name, function, expected, value)
    v = int(value)
    if v < minimum:
        raise ValidationError(name, function, expected, value)
    return v


def float_up(x: Fraction) -> float:
    """The smallest float ``>= x``: a stated delta or epsilon is never rounded down.

    >>> float_up(Fraction(1, 3)) >= Fraction(1, 3), float_up(Fraction(1, 2))
    (True, 0.5)
    """
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def float_down(x: Fraction) -> float:
    """The largest float ``<= x`` (a remaining budget is never rounded up).

    >>> float_down(Fraction(1, 3)) <= Fraction(1, 3), float_down(Fraction(-1, 2))
    (True, -0.5)
    """
    f = float(x)
    return f if Fraction(f) <= x else math.nextafter(f, -math.inf)


def exact_fraction(
    value: Any, function: str, name: str, expected: str, *, allow_str: bool = True
) -> Fraction:
    """``value`` as its exact rational value: ints, Fractions, other rationals, finite floats
    (their exact binary value), mpmath ``mpf`` numbers and, when ``allow_str``, strings such as
    ``"1/10"``. Bools, NaN, infinities and anything else raise :class:`ValidationError`."""
    if isinstance(value, bool):
        raise ValidationError(name, function, expected, value)
    if isinstance(value, Fraction | int):
        return Fraction(value)
    raw = getattr(value, "_mpf_", None)  # an mpmath number: exact binary value
    if raw is not None:
        import mpmath
        from mpmath import libmp

        if not mpmath.isfinite(value):
            raise ValidationError(name, function, expected, value)
        p, q = libmp.to_rational(raw)
        return Fraction(int(p), int(q))
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    if isinstance(value, numbers.Real):
        x = float(value)
        if not math.isfinite(x):
            raise ValidationError(name, function, expected, value)
        return Fraction(x)
    if allow_str and isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ValidationError(name, function, expected, value) from None
    raise ValidationError(name, function, expected, value)


def check_positive_fraction(value: Any, function: str, name: str) -> Fraction:
    """Return ``value`` as an exact Fraction > 0 (ints, Fractions, finite floats, 'a/b' strings)."""
    expected = "a finite rational number > 0"
    f = exact_fraction(value, function, name, expected)
    if f <= 0:
        raise ValidationError(name, function, expected, value)
    return f


def check_counts(counts: Any, function: str, name: str = "counts") -> npt.NDArray[np.int64]:
    """Return ``counts`` as a 1-d int64 array of non-negative integers.

    Floats are accepted only when every value is integral; NaN, infinities, negative values and
    values above 2**62 are rejected with the index of the first offender.
    """
    arr = np.asarray(counts)
    if arr.ndim != 1:
        raise ValidationError(name, function, "a one-dimensional array", f"shape {arr.shape}")
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        raise ValidationError(name, function, "an array of integers", f"dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValidationError(name, function, "non-negative integers", f"{arr[i]} at index {i}")
    if arr.size and (arr < 0).any():
        i = int(np.argmax(arr < 0))
        raise ValidationError(name, function, "non-negative integers", f"{arr[i]} at index {i}")
    if arr.size and (arr > 2**62).any():
        i = int(np.argmax(arr > 2**62))
        raise ValidationError(name, function, "integers <= 2**62", f"{arr[i]} at index {i}")
    return arr.astype(np.int64, copy=False)


def _real(value: Any, function: str, name: str, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ValidationError(name, function, expected, value)
    return float(value)
