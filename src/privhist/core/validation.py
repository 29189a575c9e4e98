"""Parameter checks with one message template (see :mod:`privhist.core.errors`).

The ``check_*`` helpers are shorthands for common :class:`~privhist.core.constraints.Constraint`
declarations (re-exported here), checked by its one validator.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.constraints import Constraint as Constraint
from privhist.core.constraints import exact_fraction as exact_fraction
from privhist.core.errors import ValidationError

#: the largest epsilon a mechanism accepts: beyond it a guarantee means nothing in practice
#: (e^100 > 10^43), and exact samplers and profile computations would overflow
MAX_EPSILON = 100.0


def check_epsilon(
    value: Any, function: str, name: str = "epsilon", *, maximum: float | None = None
) -> float:
    """Return ``value`` as a float if it is a finite number > 0 (and <= ``maximum``)."""
    note = "the largest accepted" if maximum is not None else ""
    x: float = Constraint.real(0, maximum, open_low=True, limit_note=note).check(
        value, name, function
    )
    return x


def delta_constraint(*, positive: bool = False, normal: bool = False) -> Constraint:
    """delta in [0, 1) (or (0, 1) when ``positive``); with ``normal``, subnormal floats (too
    small to compute with: their reciprocal overflows) are refused too."""
    return Constraint.real(
        0,
        1,
        open_low=positive,
        open_high=True,
        smallest_positive=sys.float_info.min if normal else None,
    )


def check_delta(
    value: Any, function: str, name: str = "delta", *, positive: bool = False, normal: bool = False
) -> float:
    """Return ``value`` as a float in [0, 1) (or (0, 1) when ``positive``); with ``normal``, a
    subnormal float (too small to compute with: its reciprocal overflows) is refused too."""
    x: float = delta_constraint(positive=positive, normal=normal).check(value, name, function)
    return x


def check_probability(
    value: Any, function: str, name: str, *, open_low: bool = False, open_high: bool = False
) -> float:
    """Return ``value`` as a float in [0, 1] with optionally open ends."""
    c = Constraint.real(0, 1, open_low=open_low, open_high=open_high)
    x: float = c.check(value, name, function)
    return x


def check_positive_int(value: Any, function: str, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum`` (bools rejected; integral
    floats accepted)."""
    x: int = Constraint.integer(minimum).check(value, name, function)
    return x


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
