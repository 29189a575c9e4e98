"""Invalid values generated from declared constraints, and the check that a class refuses them.

Shared by the mechanism contract (``tests/mechanisms/test_contract.py``), the weighted
selectors' tests and those of the analytics and federated classes that declare their parameters
(:class:`~privhist.core.constraints.Declared`): for every declared
:class:`~privhist.core.validation.Constraint` of a class, each generated value must be refused
with a ValidationError naming the parameter and the class. The generator reads only the declared
fields, never :meth:`Constraint.check`.
"""

from __future__ import annotations

import inspect
import math
from fractions import Fraction
from typing import Any

from privhist import ValidationError
from privhist.core.validation import Constraint

#: constructor parameters that are not scalars with a declared constraint, and what checks them
UNDECLARED = {
    "self": "the instance",
    "neighbouring": "a Neighbouring object (checked by type in Mechanism.__init__)",
    "domain": "an array of keys (check_domain)",
    "kwargs": "keep-heavy passes them on to basic-geometric, whose declarations check them",
    "noise": "basic-geometric: an alias of counting, checked by counting's declaration",
}
#: invalid values of the structured parameters (not a Neighbouring; an empty or 2-d domain)
STRUCTURED: dict[str, list[Any]] = {
    "neighbouring": ["not-a-neighbouring", 3],
    "domain": [[], [["a", "b"]]],
}


def _outside(x: Any, kind: str, direction: int) -> Any:
    """The nearest value beyond the bound ``x`` in ``direction`` (-1 below, +1 above)."""
    if kind == "integer":
        return int(x) + direction
    if kind == "real":
        return math.nextafter(float(x), direction * math.inf)
    return Fraction(x) + Fraction(direction, 1 << 80)


def invalid_values(c: Constraint) -> list[Any]:
    """Values ``c`` refuses, generated from its declared fields only: the wrong type, None when
    not optional, NaN and infinities, a value outside the choices, a non-integer, and the nearest
    values beyond each end of the interval (the end itself when open)."""
    out: list[Any] = [object(), [0.5]]
    if not c.optional:
        out.append(None)
    if c.kind == "flag":
        return [*out, "yes", 1, 0.0]
    if c.kind == "choice":
        return [*out, 1, "no-such-choice", c.choices[0].upper() + "!"]
    out += [True, math.nan, math.inf, -math.inf, "not-a-number"]
    if c.kind == "reciprocal":
        return [*out, 0, 1, -0.5, Fraction(2, 3), "3/7", 1.5]
    if c.low is not None:
        out.append(c.low if c.open_low else _outside(c.low, c.kind, -1))
    if c.high is not None:
        out.append(c.high if c.open_high else _outside(c.high, c.kind, +1))
        out.append(10**400)  # far above, and beyond the largest float
    if c.kind == "integer":
        out.append((c.low if c.low is not None else 0) + 0.5)  # inside the interval, not integral
    if c.smallest_positive is not None:
        out.append(c.smallest_positive / 2)
    return out


def constraint_failures(
    cls: Any, baseline: dict[str, Any], undeclared: dict[str, str] | None = None
) -> list[str]:
    """What is wrong with ``cls``'s declared constraints: a public parameter without one, or a
    generated invalid value (also of the structured parameters, :data:`STRUCTURED`) that is
    accepted or refused without a ValidationError naming the parameter and the class.
    ``undeclared`` adds the class's own non-scalar parameters (name: what checks them)."""
    failures = []
    skipped = {**UNDECLARED, **(undeclared or {})}
    try:
        constraints = cls.constraints()
    except TypeError as err:  # an option declares no constraint
        return [str(err)]
    signature = inspect.signature(cls.__init__).parameters
    for name in signature:
        if name not in constraints and name not in skipped:
            failures.append(f"{cls.__name__}: parameter {name!r} declares no constraint")
    cls(**baseline)  # the baseline itself is valid
    cases = [(name, bad) for name, c in constraints.items() for bad in invalid_values(c)]
    cases += [(n, bad) for n, values in STRUCTURED.items() if n in signature for bad in values]
    for name, bad in cases:
        try:
            cls(**{**baseline, name: bad})
        except ValidationError as err:
            if (err.parameter, err.function) != (name, cls.__name__):
                failures.append(
                    f"{name}={bad!r}: the error names {err.parameter!r} of {err.function}: {err}"
                )
        except Exception as err:  # any other error is a failure to report
            failures.append(f"{name}={bad!r}: {type(err).__name__}: {err}")
        else:
            failures.append(f"{name}={bad!r} accepted by {cls.__name__}")
    return failures
