"""Composition: closed forms, the optimal theorem, PLD/RDP through dp_accounting, calibration."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction as F

import mpmath
import pytest

from privhist.accounting.composition import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    advanced_composition,
    basic_composition,
    calibrate,
    composed,
    optimal_composition,
    optimal_composition_delta,
    pld_compose,
    rdp_epsilon,
)
from privhist.accounting.profile import delta_for_epsilon
from privhist.core.budget import Budget
from privhist.core.errors import UnsupportedError, ValidationError

# -- basic and advanced -----------------------------------------------------------------------


def test_basic_composition_adds_and_rounds_up() -> None:
    b = basic_composition([Budget(0.1, 1e-9), Budget(0.2, 2e-9), Budget(0.5)])
    assert F(b.epsilon) >= F(0.1) + F(0.2) + F(0.5)
    assert b.epsilon == pytest.approx(0.8, rel=1e-15)
    assert F(b.delta) >= F(1e-9) + F(2e-9)
    assert basic_composition([Budget(1.0, 1e-6)]) == Budget(1.0, 1e-6)
    with pytest.raises(ValidationError, match="parameter 'budgets' of basic_composition"):
        basic_composition([])
    with pytest.raises(ValidationError, match="Budgets only"):
        basic_composition([Budget(1.0), (1.0, 0)])  # type: ignore[list-item]


def test_advanced_composition_hand_calculation() -> None:
    # eps = 0.1, delta = 1e-8, k = 10, delta' = 1e-6:
    #   sqrt(2 * 10 * ln(1e6)) * 0.1 = sqrt(276.3102...) * 0.1 = 1.662258...
    #   10 * 0.1 * (e^0.1 - 1)       = 0.105170918...
    #   eps' = 1.767429..., delta = 10 * 1e-8 + 1e-6 = 1.1e-6
    b = advanced_composition(Budget(0.1, 1e-8), 10, 1e-6)
    by_hand = math.sqrt(2 * 10 * math.log(1e6)) * 0.1 + 10 * 0.1 * (math.exp(0.1) - 1)
    assert b.epsilon == pytest.approx(1.7674291, abs=1e-6)
    assert b.epsilon == pytest.approx(by_hand, rel=1e-14)
    with mpmath.workprec(300):
        x = mpmath.mpf(0.1)
        exact = mpmath.sqrt(20 * mpmath.log(mpmath.mpf(10) ** 6)) * x + 10 * x * mpmath.expm1(x)
        assert b.epsilon >= exact  # rounded upwards
    assert b.delta == pytest.approx(1.1e-6, rel=1e-15)
    assert F(b.delta) >= 10 * F(1e-8) + F(1e-6)


def test_advanced_composition_validation() -> None:
    with pytest.raises(ValidationError, match="parameter 'k' of advanced_composition"):
        advanced_composition(Budget(0.1), 0, 1e-6)
    with pytest.raises(ValidationError, match="parameter 'delta_prime' of advanced_composition"):
        advanced_composition(Budget(0.1), 10, 0)
    with pytest.raises(ValidationError, match="k \\* delta \\+ delta_prime < 1"):
        advanced_composition(Budget(0.1, 0.2), 5, 0.01)
    with pytest.raises(ValidationError, match="parameter 'budget'"):
        advanced_composition(0.1, 5, 0.01)  # type: ignore[arg-type]


# -- optimal composition (Kairouz-Oh-Viswanath) -----------------------------------------------


def kov_delta_i(eps: float, delta: float, k: int, i: int) -> float:
    """KOV 2015 Theorem 3.3: delta_i at eps' = (k - 2i) eps, written out with math.comb."""
    s = (
        sum(
            math.comb(k, ell) * (math.exp((k - ell) * eps) - math.exp((k - 2 * i + ell) * eps))
            for ell in range(i)
        )
        / (1 + math.exp(eps)) ** k
    )
    return 1 - (1 - delta) ** k * (1 - s)


@pytest.mark.parametrize(("eps", "delta", "k"), [(0.5, 0.0, 5), (0.1, 1e-6, 20), (1.0, 1e-3, 4)])
def test_optimal_delta_matches_theorem_grid(eps: float, delta: float, k: int) -> None:
    for i in range(0, k // 2 + 1):
        want = kov_delta_i(eps, delta, k, i)
        got = optimal_composition_delta(Budget(eps, delta), k, (k - 2 * i) * eps)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_optimal_composition_single_mechanism() -> None:
    # one (eps, delta) mechanism is (eps, delta)-DP and nothing better at that delta
    b = optimal_composition(Budget(0.7, 1e-5), 1, 1e-5)
    assert b.epsilon == pytest.approx(0.7, rel=1e-12) and b.epsilon >= 0.7
    assert optimal_composition(Budget(0.7), 3, 0).epsilon == pytest.approx(2.1, rel=1e-15)
    # (eps, 0)-DP with delta' = (e^eps - 1)/(e^eps + 1) is (0, delta')-DP (randomized response)
    tv = (math.exp(0.7) - 1) / (math.exp(0.7) + 1)
    assert optimal_composition(Budget(0.7), 1, tv * (1 + 1e-12)).epsilon <= 1e-9


@pytest.mark.parametrize(("eps", "delta", "k"), [(0.1, 0.0, 50), (0.25, 1e-8, 30), (1.0, 0, 7)])
def test_optimal_composition_is_the_smallest_epsilon(eps: float, delta: float, k: int) -> None:
    target = 1e-5 + (1 - (1 - delta) ** k)
    b = optimal_composition(Budget(eps, delta), k, target)
    assert optimal_composition_delta(Budget(eps, delta), k, b.epsilon) <= target
    assert optimal_composition_delta(Budget(eps, delta), k, b.epsilon * (1 - 1e-6)) > target
    # never worse than basic or advanced composition
    assert b.epsilon <= k * eps * (1 + 1e-15)
    if target > k * delta:
        adv = advanced_composition(Budget(eps, delta), k, target - k * delta)
        assert b.epsilon <= adv.epsilon


def test_optimal_composition_infeasible_target() -> None:
    # k mechanisms with delta = 1e-3 need delta_total >= 1 - (1 - 1e-3)^k
    with pytest.raises(ValidationError, match="parameter 'delta_total' of optimal_composition"):
        optimal_composition(Budget(1.0, 1e-3), 10, 1e-3)


def test_pld_of_approx_dp_agrees_with_optimal_composition() -> None:
    # dp_accounting's from_privacy_parameters is the KOV dominating pair, so the two must agree
    # (PLD is pessimistically discretised: never below the exact optimum)
    budget, k = Budget(0.1, 1e-7), 100
    target = 1e-5 + 1 - (1 - 1e-7) ** k
    exact = optimal_composition(budget, k, target).epsilon
    pld = pld_compose(ApproxDPEvent.from_budget(budget, count=k)).epsilon_for_delta(target)
    assert exact - 1e-9 <= pld <= exact + 1e-2


# -- PLD ----------------------------------------------------------------------------------------


def test_pld_single_laplace_matches_closed_form() -> None:
    # Laplace with scale 1/eps, sensitivity 1: delta(eps') = 1 - exp((eps' - eps)/2), eps' <= eps
    eps = 0.8
    account = pld_compose(LaplaceEvent(1 / eps))
    for e in [0.0, 0.2, 0.5, 0.79]:
        exact = 1 - math.exp((e - eps) / 2)
        got = account.delta_for_epsilon(e)
        assert exact - 1e-12 <= got <= exact + 1e-4


@pytest.mark.parametrize("k", [1, 2, 3])
def test_pld_few_laplace_consistent_with_basic(k: int) -> None:
    # basic composition is tight at delta = 0 (k eps-DP Laplace releases are not (k eps - x, 0)-DP
    # for any x > 0): the PLD may not claim pure DP below k eps, and may not be worse than basic
    # at small delta beyond its discretisation
    eps = 0.5
    account = pld_compose(LaplaceEvent(1 / eps, count=k))
    assert account.delta_for_epsilon(k * eps * (1 - 1e-2)) > 0
    assert account.delta_for_epsilon(k * eps + 1e-3) <= 1e-12
    assert account.epsilon_for_delta(1e-9) <= k * eps + 1e-3
    if k == 1:
        # one release: delta(eps') = 1 - exp((eps' - eps)/2), so eps'(delta) = eps + 2 ln(1 - delta)
        for delta in [1e-9, 1e-4, 0.1]:
            assert account.epsilon_for_delta(delta) >= eps + 2 * math.log1p(-delta) - 1e-12


def test_pld_many_laplace_is_tighter_than_basic_and_advanced() -> None:
    eps, k, delta = 0.1, 200, 1e-6
    account = pld_compose(LaplaceEvent(1 / eps, count=k))
    got = account.epsilon_for_delta(delta)
    assert got < advanced_composition(Budget(eps), k, delta).epsilon < k * eps
    assert got < optimal_composition(Budget(eps), k, delta).epsilon  # Laplace beats worst case
    assert account.delta_for_epsilon(got) <= delta


def discrete_gaussian_pmf(sigma: float, centre: int, radius: int) -> dict[int, mpmath.mpf]:
    with mpmath.workprec(200):
        weights = {
            k: mpmath.exp(-(mpmath.mpf(k - centre) ** 2) / (2 * mpmath.mpf(sigma) ** 2))
            for k in range(centre - radius, centre + radius + 1)
        }
        norm = mpmath.fsum(
            mpmath.exp(-(mpmath.mpf(k) ** 2) / (2 * mpmath.mpf(sigma) ** 2))
            for k in range(-radius - 200, radius + 201)
        )
        return {k: w / norm for k, w in weights.items()}


def cks_delta(sigma: float, sensitivity: int, eps: float) -> mpmath.mpf:
    """Canonne-Kamath-Steinke 2020, Theorem 7, by direct summation:

    delta = P[Z > eps sigma^2/D - D/2] - e^eps P[Z > eps sigma^2/D + D/2], Z ~ N_Z(0, sigma^2).
    """
    with mpmath.workprec(200):
        pmf = discrete_gaussian_pmf(sigma, 0, int(40 * sigma) + 50)
        a = mpmath.mpf(eps) * sigma**2 / sensitivity
        first = mpmath.fsum(p for z, p in pmf.items() if z > a - mpmath.mpf(sensitivity) / 2)
        second = mpmath.fsum(p for z, p in pmf.items() if z > a + mpmath.mpf(sensitivity) / 2)
        return first - mpmath.exp(eps) * second


@pytest.mark.parametrize(("sigma", "eps"), [(2.0, 0.5), (2.0, 1.0), (5.0, 0.3), (1.0, 2.0)])
def test_pld_discrete_gaussian_against_exact_formula(sigma: float, eps: float) -> None:
    exact = cks_delta(sigma, 1, eps)
    # the exact profile module agrees with the closed form
    radius = int(40 * sigma)
    p = discrete_gaussian_pmf(sigma, 0, radius)
    q = discrete_gaussian_pmf(sigma, 1, radius)
    keys = set(p) & set(q)
    pp = {k: p[k] for k in keys}
    qq = {k: q[k] for k in keys}
    profile = delta_for_epsilon(pp, qq, eps)
    with mpmath.workprec(300):  # both sides were computed with 200-bit roundings
        assert profile >= exact * (1 - mpmath.mpf(2) ** -150)
    assert float(profile) == pytest.approx(float(exact), rel=1e-9)
    # dp_accounting's pessimistic PLD is an upper bound, and close
    got = pld_compose(DiscreteGaussianEvent(sigma)).delta_for_epsilon(eps)
    assert got >= float(exact)
    assert got <= float(exact) * 1.01 + 1e-12


def test_pld_discrete_laplace_against_exact_profile() -> None:
    # DLap with scale t: P(k) ~ exp(-|k|/t); shift by 2 (sensitivity 2)
    t, sens = 1.5, 2
    base = mpmath.exp(-1 / mpmath.mpf(t))
    norm = (1 - base) / (1 + base)
    radius = 120
    p = {k: norm * base ** abs(k) for k in range(-radius, radius + 1)}
    q = {k: norm * base ** abs(k - sens) for k in range(-radius, radius + 1)}
    account = pld_compose(DiscreteLaplaceEvent(t, sensitivity=sens))
    for eps in [0.2, 0.6, 1.0, 1.3]:
        exact = delta_for_epsilon(p, q, eps)
        got = account.delta_for_epsilon(eps)
        assert got >= float(exact) * (1 - 1e-12)
        assert got <= float(exact) + 1e-3
    # beyond the largest privacy loss sens/t (rounded up to dp_accounting's 1e-4 grid): zero
    assert account.delta_for_epsilon(sens / t + 2e-4) == 0


def test_pld_matches_dp_accounting_accountant_on_converted_events() -> None:
    from dp_accounting.pld import pld_privacy_accountant

    events = [LaplaceEvent(2.0, count=3), GaussianEvent(4.0, 2.0, count=2)]
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(composed(events).to_dp_accounting())
    ours = pld_compose(events)
    for eps in [0.5, 1.0, 2.0]:
        assert ours.delta_for_epsilon(eps) == pytest.approx(accountant.get_delta(eps), rel=1e-3)


def test_pld_account_budget_and_infinite_epsilon() -> None:
    account = pld_compose([GaussianEvent(3.0), DiscreteLaplaceEvent(2.0)])
    b = account.budget(1e-6)
    assert b.delta == 1e-6 and account.delta_for_epsilon(b.epsilon) <= 1e-6
    # an (eps, 1e-3) mechanism can never reach delta 1e-6
    loose = pld_compose(ApproxDPEvent(1.0, 1e-3))
    assert loose.epsilon_for_delta(1e-6) == math.inf
    with pytest.raises(UnsupportedError, match="no finite epsilon"):
        loose.budget(1e-6)


def test_pld_discrete_gaussian_truncation_margin() -> None:
    account = pld_compose(DiscreteGaussianEvent(3.0, count=4))
    assert account.truncated_mass == pytest.approx(4e-30)
    eps = account.epsilon_for_delta(1e-8)
    assert account.delta_for_epsilon(eps) <= 1e-8


# -- RDP ----------------------------------------------------------------------------------------


def test_rdp_is_valid_but_looser_than_pld() -> None:
    for events in (
        [GaussianEvent(2.0, count=10)],
        [LaplaceEvent(5.0, count=20)],
        [DiscreteGaussianEvent(2.0, count=10)],
        [DiscreteLaplaceEvent(5.0, count=20), ApproxDPEvent(0.1)],
    ):
        rdp = rdp_epsilon(events, 1e-6)
        pld = pld_compose(events).epsilon_for_delta(1e-6)
        assert rdp >= pld * (1 - 1e-3)


def test_rdp_discrete_gaussian_uses_the_gaussian_curve() -> None:
    # Canonne-Kamath-Steinke 2020, Theorem 4: same zCDP bound as the continuous Gaussian
    assert rdp_epsilon(DiscreteGaussianEvent(3.0, 2, count=5), 1e-6) == pytest.approx(
        rdp_epsilon(GaussianEvent(3.0, 2.0, count=5), 1e-6), rel=1e-9
    )


def test_rdp_refuses_approximate_dp_and_names_it() -> None:
    bad = ApproxDPEvent(1.0, 1e-6)
    with pytest.raises(UnsupportedError, match=r"ApproxDPEvent\(epsilon=1.0, delta=1e-06"):
        rdp_epsilon([GaussianEvent(1.0), bad], 1e-5)
    with pytest.raises(ValidationError, match="parameter 'delta' of rdp_epsilon"):
        rdp_epsilon(GaussianEvent(1.0), 0)


# -- events -------------------------------------------------------------------------------------


def test_events_convert_to_dp_accounting() -> None:
    from dp_accounting import dp_event

    assert LaplaceEvent(4.0, 2.0).to_dp_accounting() == dp_event.LaplaceDpEvent(2.0)
    assert GaussianEvent(3.0, count=5).to_dp_accounting() == dp_event.SelfComposedDpEvent(
        dp_event.GaussianDpEvent(3.0), 5
    )
    dl = DiscreteLaplaceEvent(4.0, sensitivity=3).to_dp_accounting()
    assert dl == dp_event.DiscreteLaplaceDpEvent(0.25, 3)
    nested = composed([LaplaceEvent(1.0), composed([GaussianEvent(1.0)])])
    assert isinstance(nested.to_dp_accounting(), dp_event.ComposedDpEvent)


def test_unsupported_conversion_names_the_sub_event() -> None:
    inner = DiscreteGaussianEvent(2.0, count=3)
    with pytest.raises(UnsupportedError, match=r"DiscreteGaussianEvent\(sigma=2.0, sensitivity=1"):
        composed([LaplaceEvent(1.0), inner]).to_dp_accounting()
    with pytest.raises(UnsupportedError, match="ApproxDPEvent"):
        ApproxDPEvent(1.0, 1e-6).to_dp_accounting()


def test_events_are_immutable_and_validated() -> None:
    e = LaplaceEvent(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.scale = 2.0  # type: ignore[misc]
    with pytest.raises(ValidationError, match="parameter 'scale' of LaplaceEvent must be"):
        LaplaceEvent(0.0)
    with pytest.raises(ValidationError, match="parameter 'count' of GaussianEvent"):
        GaussianEvent(1.0, count=0)
    with pytest.raises(ValidationError, match="parameter 'sensitivity' of DiscreteGaussianEvent"):
        DiscreteGaussianEvent(1.0, sensitivity=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'delta' of ApproxDPEvent"):
        ApproxDPEvent(1.0, 1.0)
    with pytest.raises(ValidationError, match="parameter 'events' of ComposedEvent"):
        ComposedEvent((LaplaceEvent(1.0), "gauss"))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'events' of pld_compose"):
        pld_compose([])
    assert DiscreteLaplaceEvent.from_parameter(0.5).scale == 2.0
    assert DiscreteLaplaceEvent(3.0).parameter >= 1 / 3


def test_composed_counts_multiply() -> None:
    once = pld_compose([LaplaceEvent(2.0, count=6)]).epsilon_for_delta(1e-6)
    nested = pld_compose(ComposedEvent((LaplaceEvent(2.0, count=2),), count=3))
    assert nested.epsilon_for_delta(1e-6) == pytest.approx(once, rel=1e-9)


# -- calibration --------------------------------------------------------------------------------


def test_calibrate_continuous_and_integer() -> None:
    x = calibrate(lambda s: 1 / s, 0.25, 1.0, 2.0)  # needs bracket expansion
    assert 4.0 <= x <= 4.0 * (1 + 1e-8)
    assert 0.5 <= calibrate(lambda s: 1 / s, 2.0, 0.25, 1.0) <= 0.5 * (1 + 1e-8)
    assert calibrate(lambda n: n * n >= 50, None, 0, 1, integer=True) == 8
    assert calibrate(lambda n: 1.0, 5.0, 3, 4, integer=True) == 3  # lo already meets
    # NaN never meets the target
    assert calibrate(lambda s: math.nan if s < 3 else 0.0, 0.0, 0.0, 10.0, atol=1e-6) >= 3


def test_calibrate_gaussian_noise() -> None:
    def delta_at(sigma: float) -> float:
        return pld_compose(GaussianEvent(sigma)).delta_for_epsilon(1.0)

    sigma = calibrate(delta_at, 1e-6, 1.0, 2.0, rtol=1e-4)
    assert delta_at(sigma) <= 1e-6 < delta_at(sigma * (1 - 1e-3))


def test_calibrate_validation() -> None:
    with pytest.raises(ValidationError, match="parameter 'hi' of calibrate"):
        calibrate(lambda s: s, 0.0, 1.0, 1.0)
    with pytest.raises(ValidationError, match="nothing up to"):
        calibrate(lambda s: 1.0, 0.0, 0.0, 1.0, max_expansions=3)
    with pytest.raises(ValidationError, match="parameter 'lo' of calibrate"):
        calibrate(lambda s: s, 0.0, math.inf, 1.0)
