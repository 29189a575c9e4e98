"""One 128-bit interval-arithmetic context for the certified conversions of the accountant.

``exact(x)`` encloses a rational exactly representable or not; ``upper(x)`` is an interval's
upper end as an exact ``Fraction`` (a proven upper bound of the value it encloses).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext

#: the shared context; its precision is fixed here and never changed by a caller
IV = MPIntervalContext()
IV.prec = 128


def exact(x: Fraction) -> Any:
    """An interval enclosing the rational ``x``."""
    return IV.mpf(x.numerator) / x.denominator


def upper(x: Any) -> Fraction:
    """The upper end of the interval ``x``, exactly."""
    p, q = libmp.to_rational(x._mpi_[1])
    return Fraction(p, q)
