"""Declarative parameter checks with one message template (see :mod:`privhist.core.errors`).

A :class:`Constraint` states what one public parameter accepts (an interval with open or closed
ends over the reals, the integers or the rationals; a choice; a flag; a fraction ``1/k``). Its
:meth:`Constraint.check` is the one validator: it converts an accepted value and raises
:class:`~privhist.core.errors.ValidationError` (``parameter 'x' of Class must be ...; got ...``)
otherwise. Mechanisms declare one per :class:`~privhist.mechanisms.base.Option` and per privacy
parameter, and the contract tests generate invalid values from the declarations. The
``check_*`` helpers below are shorthands for common constraints.
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError

#: the largest epsilon a mechanism accepts: beyond it a guarantee means nothing in practice
#: (e^100 > 10^43), and exact samplers and profile computations would overflow
MAX_EPSILON = 100.0

Kind = Literal["real", "integer", "rational", "reciprocal", "choice", "flag"]


@dataclass(frozen=True)
class Constraint:
    """What one parameter accepts, declared once; :meth:`check` validates against it.

    Kinds: ``real`` (a finite int, float or numeric string; returns a float), ``integer`` (an
    int, NumPy integer or integral float, never a bool; returns an int), ``rational`` (ints,
    Fractions, finite floats by their exact binary value, ``"a/b"`` strings; returns a
    Fraction), ``reciprocal`` (``1/k`` for an integer ``k >= 2``; floats read by their decimal
    form; returns a Fraction), ``choice`` (one of the strings ``choices``) and ``flag`` (True or
    False). ``low``/``high`` bound numeric kinds (``None``: unbounded), with open or closed ends.
    ``optional``: None is accepted (and returned). ``note`` is appended to the expectation; with
    ``limit_note`` the upper end is reported on its own (``<= 100 (the largest accepted)``);
    ``smallest_positive`` refuses positive values below it (subnormal floats).

    >>> Constraint.real(0, 1, open_low=True).check(0.5, "p", "f")
    0.5
    >>> Constraint.integer(1, 2**62, open_high=True).expected()
    'an integer in [1, 2**62)'
    >>> try:
    ...     Constraint.real(0, 1, open_low=True).check(0, "p", "Mechanism")
    ... except ValidationError as err:
    ...     print(err)
    parameter 'p' of Mechanism must be a finite number in (0, 1]; got 0
    """

    kind: Kind
    low: Any = None
    high: Any = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    optional: bool = False
    note: str = ""
    limit_note: str = ""
    smallest_positive: float | None = None

    # -- declaring ----------------------------------------------------------------------------

    @classmethod
    def real(
        cls,
        low: Any = None,
        high: Any = None,
        *,
        open_low: bool = False,
        open_high: bool = False,
        **more: Any,
    ) -> Constraint:
        """A finite real number in the interval (``None``: that end unbounded)."""
        return cls("real", low, high, open_low, open_high, **more)

    @classmethod
    def integer(
        cls,
        low: Any = None,
        high: Any = None,
        *,
        open_low: bool = False,
        open_high: bool = False,
        **more: Any,
    ) -> Constraint:
        """An integer in the interval."""
        return cls("integer", low, high, open_low, open_high, **more)

    @classmethod
    def rational(
        cls,
        low: Any = None,
        high: Any = None,
        *,
        open_low: bool = False,
        open_high: bool = False,
        **more: Any,
    ) -> Constraint:
        """An exact rational number in the interval."""
        return cls("rational", low, high, open_low, open_high, **more)

    @classmethod
    def reciprocal(cls, *, optional: bool = False) -> Constraint:
        """A fraction ``1/k`` with an integer ``k >= 2`` (the papers' ``N^-1``)."""
        return cls("reciprocal", Fraction(0), Fraction(1), True, True, optional=optional)

    @classmethod
    def one_of(cls, *choices: str, optional: bool = False) -> Constraint:
        """One of the given strings."""
        return cls("choice", choices=tuple(choices), optional=optional)

    @classmethod
    def flag(cls) -> Constraint:
        """True or False (NumPy booleans too)."""
        return cls("flag")

    # -- checking -----------------------------------------------------------------------------

    def expected(self) -> str:
        """The expectation the message states (``must be <expected>``)."""
        if self.kind == "flag":
            text = "True or False"
        elif self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.kind == "reciprocal":
            text = "a fraction 1/k with an integer k >= 2"
        else:
            noun = {"real": "a finite number", "integer": "an integer"}.get(
                self.kind, "a rational number"
            )
            text = noun + self._range(None if self.limit_note else self.high)
        return text + self.note

    def _range(self, high: Any) -> str:
        lo, hi = self.low, high
        if lo is not None and hi is not None:
            left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
            return f" in {left}{_number(lo)}, {_number(hi)}{right}"
        if lo is not None:
            return f" {'>' if self.open_low else '>='} {_number(lo)}"
        if hi is not None:
            return f" {'<' if self.open_high else '<='} {_number(hi)}"
        return ""

    def check(self, value: Any, parameter: str, function: str) -> Any:
        """``value`` converted (float, int, Fraction, str or bool; None when optional and
        None) if it satisfies the constraint; otherwise :class:`ValidationError` naming
        ``parameter`` of ``function`` (the class or command the user called)."""
        if value is None and self.optional:
            return None

        def fail(expected: str | None = None) -> ValidationError:
            return ValidationError(parameter, function, expected or self.expected(), value)

        if self.kind == "flag":
            if not isinstance(value, bool | np.bool_):
                raise fail()
            return bool(value)
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise fail()
            return value
        x: Any
        if self.kind == "real":
            x = _real(value, function, parameter, self.expected())
            if not math.isfinite(x):
                raise fail()
        elif self.kind == "integer":
            x = _integer(value)
            if x is None:
                raise fail()
        elif self.kind == "rational":
            x = exact_fraction(value, function, parameter, self.expected())
        else:
            return _one_over_k(value, parameter, function, self.expected())
        if (self.low is not None and (x < self.low or (self.open_low and x == self.low))) or (
            not self.limit_note
            and self.high is not None
            and (x > self.high or (self.open_high and x == self.high))
        ):
            raise fail()
        if self.limit_note and (x > self.high or (self.open_high and x == self.high)):
            op = "<" if self.open_high else "<="
            raise fail(f"{op} {_number(self.high)} ({self.limit_note})")
        if self.smallest_positive is not None and 0 < x < self.smallest_positive:
            raise fail(f"0 or >= {self.smallest_positive!r} (the smallest accepted)")
        return x


def _number(x: Any) -> str:
    """A bound as written in messages: powers of two above 2**20 as ``2**k``."""
    if isinstance(x, int) and x > 1 << 20 and x & (x - 1) == 0:
        return f"2**{x.bit_length() - 1}"
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _one_over_k(value: Any, parameter: str, function: str, expected: str) -> Fraction:
    """``value`` as ``1/k`` for an integer ``k >= 2``; otherwise the message names
    ``1/ceil(1/x)``, the nearest smaller valid setting."""
    if isinstance(value, float) and math.isfinite(value):
        value = Fraction(repr(value))  # 0.01 is 1/100
    x = exact_fraction(value, function, parameter, expected)
    if not 0 < x < 1:
        raise ValidationError(parameter, function, expected, value)
    if x.numerator != 1:
        k = -(-x.denominator // x.numerator)
        raise ValidationError(
            parameter, function, f"{expected}; the nearest valid setting is 1/{k}", value
        )
    return x


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
