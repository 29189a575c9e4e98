"""Renyi-DP curves at fixed orders: sequential and parallel composition and the conversion to
``(epsilon, delta)``.

Mironov 2017 ("Renyi differential privacy"): Renyi guarantees add under sequential composition
(Proposition 1); over disjoint sets of users the pointwise maximum holds (parallel composition,
as used in Appendix D of "Bounding Contribution Optimally for Federated Frequency Estimation under
User-level Distributed Differential Privacy"). The conversion to ``(epsilon, delta)`` is that
paper's Lemma 3 / equation (8) (Canonne, Kamath and Steinke 2020; Balle et al. 2020):

    eps = min_lambda eps(lambda) + (log(1/delta) - log(lambda)) / (lambda - 1) + log(1 - 1/lambda)

in float64 (:func:`rdp_to_dp`) and in interval arithmetic (:func:`certified_rdp_to_dp`).
:func:`privhist.accounting.accountant.guarantee_of` applies it to Renyi events.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from privhist.accounting._interval import IV as _IVC
from privhist.accounting._interval import exact as _iv_exact
from privhist.accounting._interval import upper as _iv_upper
from privhist.core.errors import ValidationError
from privhist.core.validation import check_delta, check_positive_int

__all__ = [
    "DEFAULT_ORDERS",
    "RdpCurve",
    "certified_epsilon",
    "certified_rdp_to_dp",
    "check_orders",
    "compose",
    "parallel_compose",
    "rdp_to_dp",
    "sequential_exact",
]

#: Renyi orders used unless the caller gives others
DEFAULT_ORDERS: tuple[float, ...] = (
    1.125,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    5.0,
    6.0,
    7.0,
    8.0,
    10.0,
    12.0,
    14.0,
    16.0,
    20.0,
    24.0,
    28.0,
    32.0,
    40.0,
    48.0,
    64.0,
    80.0,
    96.0,
    128.0,
    192.0,
    256.0,
    384.0,
    512.0,
    1024.0,
)


def check_orders(orders: Iterable[float] | None, function: str) -> tuple[float, ...]:
    """``orders`` as floats > 1 (:data:`DEFAULT_ORDERS` when None)."""
    if orders is None:
        return DEFAULT_ORDERS
    out = tuple(float(o) for o in orders)
    if not out or any(not math.isfinite(o) or o <= 1 for o in out):
        raise ValidationError("orders", function, "a non-empty list of numbers > 1", orders)
    return out


# interval arithmetic of the certified conversion, in a private context


@dataclass(frozen=True)
class RdpCurve:
    """Renyi-DP guarantees ``(lambda, eps(lambda))`` at a fixed list of orders.

    Sequential composition adds curves (:meth:`compose`, :func:`compose`; Mironov 2017,
    Proposition 1), parallel composition over disjoint sets of users takes the pointwise maximum
    (:func:`parallel_compose`; Appendix D), and :meth:`epsilon` converts to (epsilon, delta) by
    equation (8).
    """

    orders: tuple[float, ...]
    rdp: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.orders) != len(self.rdp) or not self.orders:
            raise ValidationError(
                "rdp", "RdpCurve", "one value per order", f"{len(self.rdp)} values"
            )
        if any(not (v >= 0) for v in self.rdp):
            raise ValidationError("rdp", "RdpCurve", "values >= 0", self.rdp)

    def compose(self, other: RdpCurve) -> RdpCurve:
        """Both mechanisms run on the same users (e.g. the two phases of TFFE)."""
        return compose([self, other])

    def scaled(self, times: int) -> RdpCurve:
        """``times``-fold sequential composition with itself."""
        k = check_positive_int(times, "RdpCurve.scaled", "times")
        return RdpCurve(self.orders, tuple(k * v for v in self.rdp))

    def epsilon(self, delta: float) -> float:
        """Epsilon at ``delta``: equation (8) (:func:`rdp_to_dp`) at the curve's finite orders, the
        conversion the accountant's ``renyi`` rule applies; ``math.inf`` when every value is.

        >>> RdpCurve((2.0,), (0.5,)).epsilon(0.01) == rdp_to_dp(RdpCurve((2.0,), (0.5,)), 0.01)[0]
        True
        """
        check_delta(delta, "RdpCurve.epsilon", positive=True)
        kept = sorted(
            (o, v) for o, v in zip(self.orders, self.rdp, strict=True) if math.isfinite(v)
        )
        if not kept:
            return math.inf
        eps = rdp_to_dp(RdpCurve(tuple(o for o, _ in kept), tuple(v for _, v in kept)), delta)[0]
        # equation (8) may reach 0 (the accountant states at least the smallest positive float)
        return max(eps, 0.0) if math.isfinite(eps) else math.inf

    def best_order(self, delta: float) -> float:
        """The order at which equation (8) is smallest."""
        return rdp_to_dp(self, delta)[1]

    def to_dict(self) -> dict[str, list[float]]:
        return {"orders": list(self.orders), "rdp": list(self.rdp)}

    def to_event(self) -> Any:
        """The curve as a :class:`~privhist.accounting.events.RdpCurveEvent` (orders with an
        infinite value left out: the event uses the next larger order's value, an upper bound
        since Renyi divergence grows with the order)."""
        from privhist.accounting.events import RdpCurveEvent

        kept = [(o, v) for o, v in zip(self.orders, self.rdp, strict=True) if math.isfinite(v)]
        if not kept:
            raise ValidationError("rdp", "RdpCurve.to_event", "a finite value", self.rdp)
        return RdpCurveEvent(tuple(o for o, _ in kept), tuple(v for _, v in kept))


def _same_orders(curves: Sequence[RdpCurve], function: str) -> tuple[float, ...]:
    if not curves:
        raise ValidationError("curves", function, "at least one RdpCurve", "none")
    orders = curves[0].orders
    for c in curves[1:]:
        if c.orders != orders:
            raise ValidationError("curves", function, "curves at the same orders", c.orders)
    return orders


def compose(curves: Iterable[RdpCurve]) -> RdpCurve:
    """Sequential composition: RDP adds at every order (Section 2, Definition 2 remark).

    Used across the phases of TFFE (Proposition 4: quantile phase + frequency phase).

    >>> a = RdpCurve((2.0, 4.0), (0.1, 0.3))
    >>> compose([a, a]).rdp
    (0.2, 0.6)
    """
    cs = list(curves)
    orders = _same_orders(cs, "compose")
    return RdpCurve(orders, tuple(float(sum(v)) for v in zip(*(c.rdp for c in cs), strict=True)))


def parallel_compose(curves: Iterable[RdpCurve]) -> RdpCurve:
    """Parallel composition over disjoint sets of users: the pointwise maximum (Appendix D).

    Each user reports in exactly one round of MFFE, so the whole protocol has the RDP of its
    worst round.

    >>> parallel_compose([RdpCurve((2.0,), (0.1,)), RdpCurve((2.0,), (0.3,))]).rdp
    (0.3,)
    """
    cs = list(curves)
    orders = _same_orders(cs, "parallel_compose")
    return RdpCurve(orders, tuple(max(v) for v in zip(*(c.rdp for c in cs), strict=True)))


def rdp_to_dp(curve: RdpCurve, delta: float) -> tuple[float, float]:
    """Equation (8) (Lemma 3; Canonne, Kamath and Steinke 2020; Balle et al. 2020).

    ``eps = min_lambda eps(lambda) + (log(1 / delta) - log(lambda)) / (lambda - 1)
    + log(1 - 1 / lambda)``, for ``delta`` in (0, 1).

    Returns:
        ``(epsilon, order)``: the smallest value (at least 0) and the order attaining it.

    >>> rdp_to_dp(RdpCurve((2.0,), (0.5,)), 0.01)[0] == 0.5 + math.log(1 / 0.02) + math.log(0.5)
    True
    """
    d = check_delta(delta, "rdp_to_dp", positive=True)
    best = (math.inf, curve.orders[0])
    for lam, e in zip(curve.orders, curve.rdp, strict=True):
        eps = e + (math.log(1 / d) - math.log(lam)) / (lam - 1) + math.log1p(-1 / lam)
        if eps < best[0]:
            best = (eps, lam)
    return max(best[0], 0.0), best[1]


def sequential_exact(parts: Iterable[tuple[int, Fraction]]) -> Fraction:
    """Sequential composition of exact Renyi values at one order: ``sum n_i rho_i`` for
    ``n_i`` runs of a mechanism with value ``rho_i`` (Mironov 2017, Proposition 1).

    >>> sequential_exact([(2, Fraction(1, 4)), (1, Fraction(1, 2))])
    Fraction(1, 1)
    """
    return sum((n * Fraction(v) for n, v in parts), Fraction(0))


def certified_epsilon(
    rdp_at: Callable[[float], Fraction], orders: Sequence[float], delta: float
) -> tuple[float, float]:
    """The smallest :func:`certified_rdp_to_dp` (rounded up to a float) over ``orders`` of the
    exact Renyi values ``rdp_at(order)``, and the order attaining it (the first on a tie).

    >>> certified_epsilon(lambda o: Fraction(1, 2), [2.0], 0.01)[1]
    2.0
    """
    from privhist.core.validation import float_up

    best = (math.inf, orders[0])
    for lam in orders:
        eps = float_up(certified_rdp_to_dp(rdp_at(lam), lam, delta))
        if eps < best[0]:
            best = (eps, lam)
    return best


def certified_rdp_to_dp(rdp: Fraction, order: float, delta: float) -> Fraction:
    """Equation (8) at one order, in interval arithmetic: an upper bound on
    ``rdp + (log(1/delta) - log(order)) / (order - 1) + log(1 - 1/order)``.

    >>> bound = certified_rdp_to_dp(Fraction(1, 2), 2.0, 0.01)
    >>> abs(float(bound) - (0.5 + math.log(1 / 0.02) + math.log(0.5))) < 1e-14
    True
    """
    fn = "certified_rdp_to_dp"
    d = check_delta(delta, fn, positive=True)
    lam = _iv_exact(Fraction(check_orders([order], fn)[0]))
    value = (
        _iv_exact(Fraction(rdp))
        + (_IVC.log(1 / _iv_exact(Fraction(d))) - _IVC.log(lam)) / (lam - 1)
        + _IVC.log(1 - 1 / lam)
    )
    return max(_iv_upper(value), Fraction(0))
