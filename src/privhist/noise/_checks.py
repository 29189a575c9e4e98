"""Parameter checks shared by the samplers (one message template: :mod:`privhist.core.errors`)."""

from __future__ import annotations

import numbers
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError

Shape = int | tuple[int, ...]

_RATIONAL = "an int or fractions.Fraction (round floats with rational_at_least/rational_at_most)"


def rational(value: Any, function: str, name: str) -> Fraction:
    """``value`` as an exact Fraction; floats are refused so that rounding is always explicit."""
    if isinstance(value, bool) or not isinstance(value, numbers.Rational):
        raise ValidationError(name, function, _RATIONAL, value)
    return Fraction(int(value.numerator), int(value.denominator))


def positive_rational(value: Any, function: str, name: str) -> Fraction:
    f = rational(value, function, name)
    if f <= 0:
        raise ValidationError(name, function, "> 0", value)
    return f


def non_negative_rational(value: Any, function: str, name: str) -> Fraction:
    f = rational(value, function, name)
    if f < 0:
        raise ValidationError(name, function, ">= 0", value)
    return f


def probability(value: Any, function: str, name: str) -> Fraction:
    f = rational(value, function, name)
    if f < 0 or f > 1:
        raise ValidationError(name, function, "a rational in [0, 1]", value)
    return f


def shape(size: Any, function: str) -> tuple[int, ...]:
    """``size`` (an int >= 0 or a tuple of them) as a shape tuple."""
    dims = size if isinstance(size, tuple) else (size,)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or int(d) < 0:
            raise ValidationError("size", function, "an int >= 0 or a tuple of them", size)
    return tuple(int(d) for d in dims)


def count(dims: tuple[int, ...]) -> int:
    return int(np.prod(dims, dtype=np.int64)) if dims else 1


def int_array(
    value: Any, function: str, name: str, *, minimum: int, maximum: int
) -> npt.NDArray[np.int64]:
    """``value`` (an int or an integer array) as an int64 array within ``[minimum, maximum]``."""
    if isinstance(value, bool):
        raise ValidationError(name, function, "an integer or an array of integers", value)
    if isinstance(value, numbers.Integral):
        v = int(value)
        if v < minimum or v > maximum:
            raise ValidationError(name, function, f"an integer in [{minimum}, {maximum}]", v)
        return np.asarray(v, dtype=np.int64)
    arr = np.asarray(value)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ValidationError(name, function, "integers", f"an array of dtype {arr.dtype}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < minimum or hi > maximum:
            raise ValidationError(
                name, function, f"integers in [{minimum}, {maximum}]", f"range {lo}..{hi}"
            )
    return arr.astype(np.int64)
