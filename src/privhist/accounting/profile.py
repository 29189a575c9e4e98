"""Exact privacy profiles: the hockey-stick divergence of two output distributions.

A mechanism ``M`` is (epsilon, delta)-differentially private for a neighbouring relation exactly
when, for every neighbouring pair ``x ~ x'`` with output distributions ``P = M(x)`` and
``Q = M(x')``, both hockey-stick divergences are at most ``delta`` (Balle, Barthe and Gaboardi
2018, "Privacy amplification by subsampling: tight analyses via couplings and divergences",
Section 2; Balle and Wang 2018, "Improving the Gaussian mechanism", Section 2)::

    H_{e^eps}(P || Q) = sum_o max(0, P(o) - e^eps Q(o)).

The function ``eps -> max(H_{e^eps}(P || Q), H_{e^eps}(Q || P))`` is the *privacy profile* of the
pair (Balle, Barthe, Gaboardi and Geumlek 2020, "Privacy profiles and amplification by
subsampling"). It is non-increasing in ``eps``.

This module computes it for distributions written out as mappings ``output -> probability``, for
the exact DP checks every mechanism carries in its tests (``DESIGN.md``, convention 5).

Arithmetic. Probabilities may be :class:`fractions.Fraction`, ints, floats or mpmath ``mpf``
values. Every one of them is a rational number, and all sums and differences are carried out
exactly in rational arithmetic. Only ``e^eps`` is irrational; it is replaced by a rational *lower*
bound ``L <= e^eps`` accurate to about 2**-280 relative. Since ``max(0, P(o) - L Q(o))`` is at least
``max(0, P(o) - e^eps Q(o))`` for every output, the computed divergence is never below the true one.
The final rational is rounded *upwards* to an ``mpf`` with :data:`PRECISION` bits. When ``e^eps``
is itself rational, pass ``epsilon=LogRational(e^eps)`` and no rounding of ``e^eps`` happens at all,
so that, for example, randomized response with ``P(o)/Q(o) <= 3`` is checked at exactly
``eps = ln 3``.

Tails. If the supports are truncated (noise with infinite support), pass the probability mass
that was not enumerated as ``tail_p`` / ``tail_q``. Outputs in the tail can contribute at most
their mass under the *first* distribution to the divergence, so::

    H(P || Q) <= sum over enumerated o of max(0, P(o) - e^eps Q(o)) + tail_p,

where a ``Q(o)`` missing from ``q`` counts as 0 (which can only increase the bound). Because ``P``
is a probability distribution, the unenumerated mass is ``1 - sum(P)``; the tail actually used is
``max(tail_p, 1 - sum(P))``, so a forgotten tail never makes the bound unsound.

Product mechanisms. Many mechanisms act on each key independently: the output is a tuple
``(o_1, ..., o_m)`` with ``o_j`` drawn from a distribution ``P_j`` depending only on key ``j``'s
count. If neighbouring inputs differ only in key ``i``, then ``P = P_i x R`` and
``Q = Q_i x R`` with the same product ``R`` of the other keys' distributions, and

    H_a(P || Q) = sum_{o_i, r} max(0, P_i(o_i) R(r) - a Q_i(o_i) R(r))
                = sum_r R(r) sum_{o_i} max(0, P_i(o_i) - a Q_i(o_i))
                = H_a(P_i || Q_i),

using ``R(r) >= 0`` and ``sum_r R(r) = 1``. So the privacy profile of such a neighbouring pair is
the profile of the one differing key's marginal distributions, and it suffices to check that
marginal. :func:`product_distribution` builds the full product so that tests can confirm this on
small examples.
"""

from __future__ import annotations

import enum
import functools
import math
import numbers
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias

import mpmath
from mpmath import libmp

from privhist.core.errors import ValidationError
from privhist.core.validation import check_delta, exact_fraction

__all__ = [
    "NOT_RELEASED",
    "PRECISION",
    "LogRational",
    "ProfileCheck",
    "check_dp",
    "delta_for_epsilon",
    "epsilon_for_delta",
    "hockey_stick",
    "privacy_profile",
    "product_distribution",
]

PRECISION = 256
"""Bits of mantissa of the ``mpf`` values returned (each rounded upwards)."""

_EXP_PREC = PRECISION + 64
# Relative safety margin subtracted from the floor-rounded exponential.
_EXP_MARGIN = Fraction(1, 2 ** (PRECISION + 24))

Distribution: TypeAlias = Mapping[Hashable, Any]
"""A mapping ``output -> probability``; probabilities are Fractions, ints, floats or mpf."""


class _NotReleased(enum.Enum):
    NOT_RELEASED = "NOT_RELEASED"

    def __repr__(self) -> str:
        return "NOT_RELEASED"

    def __str__(self) -> str:
        return "NOT_RELEASED"


NOT_RELEASED = _NotReleased.NOT_RELEASED
"""The output "this key was not released"; a singleton, hashable, picklable.

>>> NOT_RELEASED
NOT_RELEASED
"""


@dataclass(frozen=True)
class LogRational:
    """The privacy parameter ``epsilon = ln(base)`` for a rational ``base >= 1``.

    Use it when ``e^epsilon`` is rational, so that the hockey-stick divergence is computed without
    any rounding at all.

    >>> LogRational(3)
    LogRational(3)
    >>> round(float(LogRational(3)), 6)
    1.098612
    """

    base: Fraction

    def __post_init__(self) -> None:
        try:
            b = Fraction(self.base)
        except (TypeError, ValueError, OverflowError, ZeroDivisionError):
            raise ValidationError(
                "base", "LogRational", "a rational number >= 1", self.base
            ) from None
        if b < 1:
            raise ValidationError("base", "LogRational", "a rational number >= 1", self.base)
        object.__setattr__(self, "base", b)

    def __float__(self) -> float:
        return float(mpmath.log(mpmath.mpf(self.base.numerator) / self.base.denominator))

    def __repr__(self) -> str:
        return f"LogRational({self.base})"


Epsilon: TypeAlias = Any
"""An epsilon >= 0: a float, int, Fraction or mpf, or a :class:`LogRational`."""


# --------------------------------------------------------------------------------------------
# exact conversions and rounding


#: exact rational value of a finite real (probabilities, epsilons); strings are not numbers here
_to_fraction = functools.partial(exact_fraction, allow_str=False)


def _round_up(x: Fraction) -> Any:
    """Smallest ``mpf`` with :data:`PRECISION` bits that is >= ``x``."""
    raw = libmp.from_rational(x.numerator, x.denominator, PRECISION, libmp.round_ceiling)
    return mpmath.mp.make_mpf(raw)


def _epsilon_fraction_and_exp_lower(
    epsilon: Any, function: str
) -> tuple[Fraction | LogRational, Fraction]:
    """Validate ``epsilon`` and return it together with a rational lower bound on ``e^epsilon``."""
    if isinstance(epsilon, LogRational):
        return epsilon, epsilon.base
    eps = _to_fraction(epsilon, function, "epsilon", "a finite number >= 0")
    if eps < 0:
        raise ValidationError("epsilon", function, "a finite number >= 0", epsilon)
    if eps == 0:
        return eps, Fraction(1)
    lo = libmp.from_rational(eps.numerator, eps.denominator, _EXP_PREC, libmp.round_floor)
    e = libmp.mpf_exp(lo, _EXP_PREC, libmp.round_floor)
    p, q = libmp.to_rational(e)
    bound = Fraction(p, q) * (1 - _EXP_MARGIN)
    return eps, max(bound, Fraction(1))


# --------------------------------------------------------------------------------------------
# the prepared pair of distributions


class _Pair:
    """Two validated distributions over the union of their outputs, in exact rationals.

    All probabilities are stored as integer numerators over one common denominator, so the
    divergence is a sum of integers (much faster than summing Fractions with unrelated
    denominators) and still exact.
    """

    __slots__ = ("a", "b", "denominator", "tail_a", "tail_b")

    def __init__(
        self,
        p: Distribution,
        q: Distribution,
        tail_p: Any,
        tail_q: Any,
        mass_tolerance: float,
        function: str,
    ) -> None:
        tol = _to_fraction(mass_tolerance, function, "mass_tolerance", "a finite number >= 0")
        if tol < 0:
            raise ValidationError("mass_tolerance", function, "a finite number >= 0", tol)
        pv = _probabilities(p, "p", function)
        qv = _probabilities(q, "q", function)
        tp = _tail(tail_p, "tail_p", function)
        tq = _tail(tail_q, "tail_q", function)
        den = math.lcm(
            tp.denominator,
            tq.denominator,
            *(x.denominator for x in pv.values()),
            *(x.denominator for x in qv.values()),
        )
        keys = list(pv) + [k for k in qv if k not in pv]
        zero = Fraction(0)
        self.a = [(x := pv.get(k, zero)).numerator * (den // x.denominator) for k in keys]
        self.b = [(x := qv.get(k, zero)).numerator * (den // x.denominator) for k in keys]
        self.denominator = den
        for name, values in (("p", self.a), ("q", self.b)):
            total = Fraction(sum(values), den)
            if total > 1 + tol:
                raise ValidationError(
                    name,
                    function,
                    "a distribution with total mass <= 1",
                    f"total mass {float(total)!r}",
                )
        # the unenumerated mass is at most the tail given, and at least 1 - sum(P)
        self.tail_a = max(tp.numerator * (den // tp.denominator), den - sum(self.a))
        self.tail_b = max(tq.numerator * (den // tq.denominator), den - sum(self.b))

    def divergence(self, exp_lower: Fraction, reverse: bool = False) -> Fraction:
        """Upper bound on ``H(P || Q)`` (``H(Q || P)`` when ``reverse``) given ``L <= e^eps``."""
        first, second, tail = (
            (self.b, self.a, self.tail_b) if reverse else (self.a, self.b, self.tail_a)
        )
        m, n = exp_lower.numerator, exp_lower.denominator
        # sum_o max(0, x_o/D - (m/n) y_o/D) = sum_o max(0, n x_o - m y_o) / (n D)
        total = tail * n
        for x, y in zip(first, second, strict=True):
            if x:
                d = n * x - m * y
                if d > 0:
                    total += d
        return Fraction(total, n * self.denominator)

    def both(self, exp_lower: Fraction) -> tuple[Fraction, Fraction]:
        return self.divergence(exp_lower), self.divergence(exp_lower, reverse=True)

    def max_finite_ratio(self) -> Fraction:
        """Largest ``P(o)/Q(o)`` or ``Q(o)/P(o)`` over outputs where both are positive (>= 1)."""
        best = Fraction(1)
        for x, y in zip(self.a, self.b, strict=True):
            if x > 0 and y > 0:
                best = max(best, Fraction(x, y), Fraction(y, x))
        return best


def _probabilities(dist: Any, name: str, function: str) -> dict[Hashable, Fraction]:
    if not isinstance(dist, Mapping):
        raise ValidationError(
            name, function, "a mapping output -> probability", type(dist).__name__
        )
    out: dict[Hashable, Fraction] = {}
    for key, value in dist.items():
        x = _to_fraction(value, function, f"{name}[{key!r}]", "a probability in [0, 1]")
        if x < 0 or x > 1:
            raise ValidationError(f"{name}[{key!r}]", function, "a probability in [0, 1]", value)
        out[key] = x
    return out


def _tail(value: Any, name: str, function: str) -> Fraction:
    x = _to_fraction(value, function, name, "a probability mass in [0, 1]")
    if x < 0 or x > 1:
        raise ValidationError(name, function, "a probability mass in [0, 1]", value)
    return x


# --------------------------------------------------------------------------------------------
# public API


def hockey_stick(
    p: Distribution,
    q: Distribution,
    epsilon: Epsilon,
    *,
    tail_p: Any = 0,
    tail_q: Any = 0,
    mass_tolerance: float = 1e-9,
) -> Any:
    """Upper bound on the hockey-stick divergence ``H_{e^epsilon}(P || Q)`` (one direction).

    ``H_{e^eps}(P || Q) = sum_o max(0, P(o) - e^eps Q(o))`` (Balle, Barthe and Gaboardi 2018,
    Section 2). Computed exactly in rationals with a rational lower bound on ``e^eps`` and
    rounded upwards, so the result is never below the true divergence (see the module notes).

    Args:
        p: Output distribution ``P``, a mapping ``output -> probability``. Outputs are any hashable
            values, :data:`NOT_RELEASED` included; outputs missing from a mapping have probability
            0 there.
        q: Output distribution ``Q``.
        epsilon: ``eps >= 0`` as a real number, or :class:`LogRational` when ``e^eps`` is rational.
        tail_p: Upper bound on the mass of ``P`` that is not enumerated in ``p``. It is added to the
            result (at least ``1 - sum(p)`` is always added).
        tail_q: Upper bound on the mass of ``Q`` not enumerated in ``q``. Validated, but it cannot
            increase this direction of the divergence.
        mass_tolerance: How far above 1 the enumerated masses may sum (float rounding).

    Returns:
        An ``mpmath.mpf`` with :data:`PRECISION` bits, an upper bound on the divergence.

    Raises:
        ValidationError: Negative or non-finite probabilities, masses above ``1 + mass_tolerance``,
            ``epsilon < 0``.

    >>> from fractions import Fraction as F
    >>> float(hockey_stick({"a": F(3, 4), "b": F(1, 4)}, {"a": F(1, 4), "b": F(3, 4)}, 0))
    0.5
    """
    _, exp_lower = _epsilon_fraction_and_exp_lower(epsilon, "hockey_stick")
    pair = _Pair(p, q, tail_p, tail_q, mass_tolerance, "hockey_stick")
    return _round_up(pair.divergence(exp_lower))


def privacy_profile(
    p: Distribution,
    q: Distribution,
    epsilons: Iterable[Epsilon],
    *,
    tail_p: Any = 0,
    tail_q: Any = 0,
    mass_tolerance: float = 1e-9,
) -> list[Any]:
    """The privacy profile ``delta(eps) = max(H(P || Q), H(Q || P))`` at each of ``epsilons``.

    Balle, Barthe, Gaboardi and Geumlek 2020. Each value is an upper bound rounded
    upwards (see :func:`hockey_stick`).

    Args:
        p: Output distribution on one dataset of the neighbouring pair.
        q: Output distribution on the other dataset.
        epsilons: The values of epsilon (reals >= 0 or :class:`LogRational`).
        tail_p: Upper bound on the unenumerated mass of ``P``.
        tail_q: Upper bound on the unenumerated mass of ``Q``.
        mass_tolerance: How far above 1 the enumerated masses may sum.

    Returns:
        A list of ``mpmath.mpf`` deltas, one per epsilon.

    >>> from fractions import Fraction as F
    >>> [float(d) for d in privacy_profile({"a": F(1, 2), "b": F(1, 2)}, {"a": F(1)}, [0, 5])]
    [0.5, 0.5]
    """
    pair = _Pair(p, q, tail_p, tail_q, mass_tolerance, "privacy_profile")
    out = []
    for eps in epsilons:
        _, lower = _epsilon_fraction_and_exp_lower(eps, "privacy_profile")
        out.append(_round_up(max(pair.both(lower))))
    return out


def delta_for_epsilon(
    p: Distribution,
    q: Distribution,
    epsilon: Epsilon,
    *,
    tail_p: Any = 0,
    tail_q: Any = 0,
    mass_tolerance: float = 1e-9,
) -> Any:
    """The smallest ``delta`` for which the pair satisfies (epsilon, delta)-DP (upper bound).

    Equal to ``max(H_{e^eps}(P || Q), H_{e^eps}(Q || P))``; see :func:`privacy_profile`.

    Args:
        p: Output distribution on one dataset of the neighbouring pair.
        q: Output distribution on the other dataset.
        epsilon: ``eps >= 0`` or :class:`LogRational`.
        tail_p: Upper bound on the unenumerated mass of ``P``.
        tail_q: Upper bound on the unenumerated mass of ``Q``.
        mass_tolerance: How far above 1 the enumerated masses may sum.

    Returns:
        An ``mpmath.mpf``, rounded upwards.
    """
    _, lower = _epsilon_fraction_and_exp_lower(epsilon, "delta_for_epsilon")
    pair = _Pair(p, q, tail_p, tail_q, mass_tolerance, "delta_for_epsilon")
    return _round_up(max(pair.both(lower)))


def epsilon_for_delta(
    p: Distribution,
    q: Distribution,
    delta: float,
    *,
    tail_p: Any = 0,
    tail_q: Any = 0,
    tolerance: float = 1e-9,
    mass_tolerance: float = 1e-9,
) -> float:
    """The smallest ``eps`` with ``delta(eps) <= delta``, by bisection, rounded upwards.

    The profile is non-increasing, so bisection applies. Every candidate is checked with the
    rigorous upper bound of :func:`delta_for_epsilon`; the returned value is the upper end of the
    final bracket, hence a float ``eps`` for which the pair is verified (eps, delta)-DP and which
    exceeds the true smallest epsilon by at most ``tolerance``.

    Args:
        p: Output distribution on one dataset of the neighbouring pair.
        q: Output distribution on the other dataset.
        delta: Target delta in [0, 1).
        tail_p: Upper bound on the unenumerated mass of ``P``.
        tail_q: Upper bound on the unenumerated mass of ``Q``.
        tolerance: Absolute accuracy of the returned epsilon, > 0.
        mass_tolerance: How far above 1 the enumerated masses may sum.

    Returns:
        A float epsilon, ``0.0`` when ``delta(0) <= delta``, or ``math.inf`` when no finite epsilon
        reaches ``delta`` (outputs possible under one distribution only carry more than ``delta``).

    >>> from fractions import Fraction as F
    >>> rr_p, rr_q = {"a": F(3, 4), "b": F(1, 4)}, {"a": F(1, 4), "b": F(3, 4)}
    >>> round(epsilon_for_delta(rr_p, rr_q, 0), 6)  # ln 3
    1.098612
    """
    function = "epsilon_for_delta"
    target = Fraction(check_delta(delta, function))
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, numbers.Real)
        or not (math.isfinite(tolerance) and tolerance > 0)
    ):
        raise ValidationError("tolerance", function, "a finite number > 0", tolerance)
    pair = _Pair(p, q, tail_p, tail_q, mass_tolerance, function)

    def ok(eps: float) -> bool:
        _, lower = _epsilon_fraction_and_exp_lower(eps, function)
        return max(pair.both(lower)) <= target

    if ok(0.0):
        return 0.0
    ratio = pair.max_finite_ratio()
    log_ratio = mpmath.log(mpmath.mpf(ratio.numerator) / ratio.denominator)
    hi = float(log_ratio) * (1 + 1e-9) + 1e-12
    if not ok(hi):
        # beyond the largest finite privacy loss the profile is constant: nothing reaches delta
        return math.inf
    lo = 0.0
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class ProfileCheck:
    """Outcome of :func:`check_dp`.

    Attributes:
        epsilon: The epsilon checked.
        delta: The delta claimed.
        slack: Extra delta allowed (for floating-point inputs).
        delta_pq: Upper bound on ``H_{e^eps}(P || Q)`` (``mpf``).
        delta_qp: Upper bound on ``H_{e^eps}(Q || P)`` (``mpf``).
        holds: Whether ``max(delta_pq, delta_qp) <= delta + slack``, decided in exact arithmetic.
    """

    epsilon: Any
    delta: float
    slack: float
    delta_pq: Any
    delta_qp: Any
    holds: bool

    @property
    def worst(self) -> Any:
        """``max(delta_pq, delta_qp)``, the delta the pair actually needs (upper bound)."""
        return max(self.delta_pq, self.delta_qp)

    def __bool__(self) -> bool:
        return self.holds

    def __str__(self) -> str:
        verdict = "holds" if self.holds else "FAILS"
        return (
            f"({float(self.epsilon):.6g}, {self.delta:.3g})-DP {verdict}: "
            f"H(P||Q) <= {mpmath.nstr(self.delta_pq, 6)}, "
            f"H(Q||P) <= {mpmath.nstr(self.delta_qp, 6)}"
        )


def check_dp(
    p: Distribution,
    q: Distribution,
    epsilon: Epsilon,
    delta: float,
    *,
    slack: float = 0.0,
    tail_p: Any = 0,
    tail_q: Any = 0,
    mass_tolerance: float = 1e-9,
) -> ProfileCheck:
    """Check (epsilon, delta)-DP on one neighbouring pair, in both directions.

    Args:
        p: Output distribution on one dataset of the neighbouring pair.
        q: Output distribution on the other dataset.
        epsilon: ``eps >= 0`` or :class:`LogRational`.
        delta: The claimed delta, in [0, 1].
        slack: Extra delta tolerated, >= 0 (e.g. ``1e-12`` for float probabilities); 0 by default.
        tail_p: Upper bound on the unenumerated mass of ``P``.
        tail_q: Upper bound on the unenumerated mass of ``Q``.
        mass_tolerance: How far above 1 the enumerated masses may sum.

    Returns:
        A :class:`ProfileCheck`; it is truthy exactly when the guarantee holds.

    >>> from fractions import Fraction as F
    >>> rr_p, rr_q = {"a": F(3, 4), "b": F(1, 4)}, {"a": F(1, 4), "b": F(3, 4)}
    >>> check_dp(rr_p, rr_q, LogRational(3), 0).holds
    True
    >>> check_dp(rr_p, rr_q, 1.0, 0).holds
    False
    """
    function = "check_dp"
    eps, lower = _epsilon_fraction_and_exp_lower(epsilon, function)
    d = _to_fraction(delta, function, "delta", "a number in [0, 1]")
    if not 0 <= d <= 1:
        raise ValidationError("delta", function, "a number in [0, 1]", delta)
    s = _to_fraction(slack, function, "slack", "a finite number >= 0")
    if s < 0:
        raise ValidationError("slack", function, "a finite number >= 0", slack)
    pair = _Pair(p, q, tail_p, tail_q, mass_tolerance, function)
    dpq, dqp = pair.both(lower)
    return ProfileCheck(
        epsilon=eps,
        delta=float(delta),
        slack=float(slack),
        delta_pq=_round_up(dpq),
        delta_qp=_round_up(dqp),
        holds=max(dpq, dqp) <= d + s,
    )


def product_distribution(*distributions: Distribution) -> dict[tuple[Hashable, ...], Any]:
    """The distribution of independent outputs ``(o_1, ..., o_m)``, ``o_j ~ distributions[j]``.

    Probabilities are multiplied exactly (as Fractions; floats and mpf values are converted to
    their exact rational values). Used to confirm, on small examples, that a mechanism acting
    independently per key has the privacy profile of the one key that differs (proof in the
    module notes).

    Args:
        *distributions: The marginal distributions, at least one.

    Returns:
        A dict from output tuples to Fractions.

    >>> from fractions import Fraction as F
    >>> product_distribution({"x": F(1, 2), "y": F(1, 2)}, {0: F(1)})
    {('x', 0): Fraction(1, 2), ('y', 0): Fraction(1, 2)}
    """
    function = "product_distribution"
    if not distributions:
        raise ValidationError("distributions", function, "at least one distribution", 0)
    out: dict[tuple[Hashable, ...], Fraction] = {(): Fraction(1)}
    for j, dist in enumerate(distributions):
        values = _probabilities(dist, f"distributions[{j}]", function)
        out = {(*o, k): pr * v for o, pr in out.items() for k, v in values.items()}
    return dict(out)
