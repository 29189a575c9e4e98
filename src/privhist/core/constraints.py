"""What a parameter accepts, declared once: :class:`Constraint` and its one validator.

A :class:`Constraint` states what one public parameter accepts (an interval with open or closed
ends over the reals, the integers or the rationals; a choice; a flag; a fraction ``1/k``). Its
:meth:`Constraint.check` converts an accepted value and raises
:class:`~privhist.core.errors.ValidationError` (``parameter 'x' of Class must be ...; got ...``,
the one message template) otherwise. Mechanisms declare one per
:class:`~privhist.mechanisms.base.Option` and per privacy parameter, the command line's option
catalogue repeats them for ``--help``, and the contract tests generate invalid values from them.
``privhist --help`` loads this module, so it imports nothing beyond the standard library's
lightest modules until a value needs checking (NumPy, mpmath and ``fractions`` on first use).
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

from privhist.core.errors import ValidationError

if TYPE_CHECKING:
    from fractions import Fraction

Kind = Literal["real", "integer", "rational", "reciprocal", "choice", "flag"]


class Constraint(NamedTuple):
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
        return cls("reciprocal", 0, 1, True, True, optional=optional)

    @classmethod
    def one_of(cls, *choices: str, optional: bool = False) -> Constraint:
        """One of the given strings."""
        return cls("choice", choices=tuple(choices), optional=optional)

    @classmethod
    def flag(cls) -> Constraint:
        """True or False (NumPy booleans too)."""
        return cls("flag")

    # -- checking -----------------------------------------------------------------------------

    def expected(self, *, note: bool = True) -> str:
        """The expectation the message states (``must be <expected>``); ``--help`` shows it
        without the note."""
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
        return text + self.note if note else text

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
            if not (isinstance(value, bool) or _numpy_bool(value)):
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


def naming_the_class(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` whose :class:`ValidationError` names the class being constructed (the one the
    user called), also when an internal helper raised it under its own name."""

    @functools.wraps(init)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except ValidationError as err:
            fn = type(self).__name__
            if err.function == fn:
                raise
            raise ValidationError(err.parameter, fn, err.expected, err.got) from err

    return wrapped


class Declared:
    """Base of a public class (not a mechanism) that declares what each public scalar
    parameter of its constructor accepts, in ``declared``: :meth:`check_parameter` checks a
    value against its declaration with the one validator, errors raised while constructing it
    name the class (internal helpers' too), and the tests generate invalid values from
    :meth:`constraints` as for the mechanisms' options. Relational checks (``hi > lo``) stay in
    the constructor, with the same message template.

    >>> class Window(Declared):
    ...     declared = {"width": Constraint.integer(1)}
    ...     def __init__(self, width: int) -> None:
    ...         self.width = self.check_parameter("width", width)
    >>> try:
    ...     Window(0)
    ... except ValidationError as err:
    ...     print(err)
    parameter 'width' of Window must be an integer >= 1; got 0
    """

    declared: ClassVar[dict[str, Constraint]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("__init__", "__post_init__"):  # __post_init__: a dataclass's checks
            if name in cls.__dict__:
                setattr(cls, name, naming_the_class(cls.__dict__[name]))

    @classmethod
    def constraints(cls) -> dict[str, Constraint]:
        """Every declared parameter constraint, by parameter name."""
        return dict(cls.declared)

    @classmethod
    def check_parameter(cls, name: str, value: Any) -> Any:
        """``value`` checked against (and converted by) the declaration of ``name``; a
        :class:`ValidationError` names the parameter and this class."""
        return cls.declared[name].check(value, name, cls.__name__)

    @classmethod
    def check_parameters(cls, **values: Any) -> dict[str, Any]:
        """Each ``name=value`` checked as :meth:`check_parameter` does; the converted values."""
        return {name: cls.check_parameter(name, value) for name, value in values.items()}


def _number(x: Any) -> str:
    """A bound as written in messages: powers of two above 2**20 as ``2**k``."""
    if isinstance(x, int) and x > 1 << 20 and x & (x - 1) == 0:
        return f"2**{x.bit_length() - 1}"
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def _numpy_bool(value: Any) -> bool:
    np = sys.modules.get("numpy")  # a NumPy boolean exists only once NumPy is loaded
    return np is not None and isinstance(value, np.bool_)


def _integer(value: Any) -> int | None:
    import numbers

    if isinstance(value, bool) or _numpy_bool(value):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _one_over_k(value: Any, parameter: str, function: str, expected: str) -> Fraction:
    """``value`` as ``1/k`` for an integer ``k >= 2``; otherwise the message names
    ``1/ceil(1/x)``, the nearest smaller valid setting."""
    from fractions import Fraction

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


def exact_fraction(
    value: Any, function: str, name: str, expected: str, *, allow_str: bool = True
) -> Fraction:
    """``value`` as its exact rational value: ints, Fractions, other rationals, finite floats
    (their exact binary value), mpmath ``mpf`` numbers and, when ``allow_str``, strings such as
    ``"1/10"``. Bools, NaN, infinities and anything else raise :class:`ValidationError`."""
    import numbers
    from fractions import Fraction

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


def _real(value: Any, function: str, name: str, expected: str) -> float:
    import numbers

    # a number given as a string is refused, not converted (it is a caller's error)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(name, function, expected, value)
    try:
        return float(value)
    except OverflowError:  # an int beyond the largest float
        raise ValidationError(name, function, expected, value) from None
