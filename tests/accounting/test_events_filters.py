"""Serialisable events, their Renyi curves, and the ledger's privacy filters."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from scipy import stats

from privhist.accounting.composition import (
    ApproxDPEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    composed,
)
from privhist.accounting.events import (
    RdpCurveEvent,
    ZcdpEvent,
    event_from_json,
    event_rdp,
    event_to_json,
    pure_epsilon,
)
from privhist.accounting.filters import basic_admits, renyi_admission, renyi_budget
from privhist.core.budget import Budget
from privhist.core.errors import ValidationError


def test_every_kind_round_trips_through_json() -> None:
    events = [
        LaplaceEvent(2.0, 1.0, 3),
        DiscreteLaplaceEvent(1.5, 2),
        GaussianEvent(3.0, 1.5),
        DiscreteGaussianEvent(4.0, 1, 2),
        ApproxDPEvent(0.5, 1e-8),
        RdpCurveEvent((2.0, 4.0), (0.1, 0.3), 2),
        ZcdpEvent(0.125),
        composed([GaussianEvent(1.0), composed([LaplaceEvent(1.0)])]),
    ]
    for e in events:
        text = event_to_json(e)
        assert '"version":1' in text
        assert event_from_json(text) == e
    with pytest.raises(ValidationError, match="'text'"):
        event_from_json("{not json")
    with pytest.raises(ValidationError, match="version 1"):
        event_from_json('{"version": 2, "kind": "zcdp", "rho": 1}')
    with pytest.raises(ValidationError, match="'data'"):
        event_from_json('{"version": 1, "kind": "teleport"}')


def _laplace_renyi(eps: float, alpha: float) -> mpmath.mpf:
    """D_alpha(Lap(0, 1) || Lap(eps, 1)) by numerical integration (independent of the code)."""
    with mpmath.workdps(40):
        p = lambda x: mpmath.exp(-abs(x)) / 2  # noqa: E731
        q = lambda x: mpmath.exp(-abs(x - eps)) / 2  # noqa: E731
        f = lambda x: p(x) ** alpha * q(x) ** (1 - alpha)  # noqa: E731
        integral = mpmath.quad(f, [-mpmath.inf, 0, eps, mpmath.inf])
        return mpmath.log(integral) / (alpha - 1)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 8.0, 32.0])
def test_laplace_curve_is_the_renyi_divergence(alpha: float) -> None:
    bound = event_rdp(LaplaceEvent(2.0), alpha)  # eps = 0.5
    assert bound is not None
    with mpmath.workdps(40):
        exact = _laplace_renyi(0.5, alpha)
        value = mpmath.mpf(bound.numerator) / bound.denominator
        assert value >= exact * (1 - mpmath.mpf(10) ** -30)  # quadrature's own accuracy
        assert value <= exact + mpmath.mpf(10) ** -20


def test_gaussian_pure_and_curve_values() -> None:
    assert event_rdp(GaussianEvent(2.0, 1.0, count=3), 4.0) == Fraction(3 * 4, 8)
    assert event_rdp(DiscreteGaussianEvent(2.0), 4.0) == Fraction(4, 8)
    # pure: min(eps, alpha eps^2 / 2)
    assert event_rdp(ApproxDPEvent(0.5), 2.0) == Fraction(1, 4)
    assert event_rdp(ApproxDPEvent(0.5), 64.0) == Fraction(1, 2)
    assert event_rdp(ApproxDPEvent(0.5, 1e-9), 2.0) is None
    curve = RdpCurveEvent((2.0, 4.0), (0.1, 0.3))
    assert event_rdp(curve, 3.0) == Fraction(0.3)  # the next listed order up bounds it
    assert event_rdp(curve, 5.0) is None
    assert pure_epsilon(composed([LaplaceEvent(2.0), DiscreteLaplaceEvent(4.0)])) == Fraction(3, 4)
    assert pure_epsilon(GaussianEvent(1.0)) is None
    with pytest.raises(ValidationError, match="'order'"):
        event_rdp(GaussianEvent(1.0), 1.0)


def _gaussian_delta(sigma: float, eps: float) -> float:
    a, b = 1 / (2 * sigma), eps * sigma
    return float(stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b))


def test_renyi_regime_admits_more_gaussians_and_the_total_holds() -> None:
    total = Budget(2.0, 1e-6)
    sigma = 9.86353  # analytic-Gaussian sigma of (0.5, 1e-8) at sensitivity 1
    assert _gaussian_delta(sigma, 0.5) <= 1.0001e-8
    spent: list[GaussianEvent] = []
    while renyi_admission(spent, GaussianEvent(sigma), total).admitted:
        spent.append(GaussianEvent(sigma))
    k = len(spent)
    budgets = [Budget(0.5, 1e-8)] * 4
    assert not basic_admits(budgets, Budget(0.5, 1e-8), total)  # basic stops at 4
    assert k == 10
    # k Gaussians of sigma compose exactly to one of sigma / sqrt(k) (non-adaptive check)
    assert _gaussian_delta(sigma / math.sqrt(k), 2.0) <= 1e-6
    # and the rule is not loose by much: the exact composition would not allow twice as many
    assert _gaussian_delta(sigma / math.sqrt(2 * k), 2.0) > 1e-6


def test_renyi_regime_refuses_approximate_events_and_records_the_rule() -> None:
    total = Budget(2.0, 1e-6)
    refused = renyi_admission([], ApproxDPEvent(0.5, 1e-8), total)
    assert not refused.admitted and "no Renyi guarantee" in refused.detail
    pure = renyi_admission([LaplaceEvent(2.0)] * 3, LaplaceEvent(2.0), total)
    assert pure.admitted and pure.rule == "basic-pure"
    over = renyi_admission([LaplaceEvent(2.0)] * 4, LaplaceEvent(2.0), total)
    assert not over.admitted and "every order" in over.detail


def test_renyi_budget_rounds_down() -> None:
    b = renyi_budget(Budget(2.0, 1e-6), 16.0, 16)
    exact = 2 - math.log(16 / 1e-6) / 15
    assert float(b) <= exact and exact - float(b) < 1e-12
    with pytest.raises(ValidationError, match="'total'"):
        renyi_budget(Budget(2.0, 0.0), 2.0)


def test_dense_histogram_events_carry_their_noise() -> None:
    from privhist.core.neighbouring import Neighbouring
    from privhist.mechanisms.dense import DenseHistogram

    lap = DenseHistogram(0.5, domain=[1, 2, 3]).event()
    # the calibrated pure point, exact (a float scale in a noise event could state 0.5 + 1 ulp)
    assert isinstance(lap, ApproxDPEvent) and lap.delta == 0
    assert pure_epsilon(lap) == Fraction(0.5)
    m = DenseHistogram(1.0, 1e-6, Neighbouring.user(4, 2), domain=[1, 2], noise="gaussian")
    gauss = m.event()
    assert isinstance(gauss, DiscreteGaussianEvent)
    assert gauss.count == 4 and gauss.sensitivity == 2
    assert Fraction(gauss.sigma) ** 2 == m.sigma2  # the calibrated sigma is a float: exact
    rho = event_rdp(gauss, 2.0)
    assert rho is not None and float(rho) == pytest.approx(2 * 4 * 4 / (2 * gauss.sigma**2))
