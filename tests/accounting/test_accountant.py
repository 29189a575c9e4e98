"""The accountant (privhist.accounting.accountant) and the events of the releasable objects.

Expected values come from closed forms computed here (basic and advanced composition, the
Renyi conversion of equation (8), exact k-fold randomized response), not from the code tested.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest

from privhist.accounting.accountant import account, guarantee_of
from privhist.accounting.composition import ApproxDPEvent, GaussianEvent, composed
from privhist.accounting.events import (
    DominatingPairEvent,
    RdpCurveEvent,
    event_from_json,
    event_to_json,
)
from privhist.analytics.hierarchy import CERTIFIED_STEP
from privhist.core.errors import UnsupportedError, ValidationError


def _roundtrip(event: object) -> None:
    assert event_from_json(event_to_json(event)) == event  # type: ignore[arg-type]


def test_dominating_pair_with_a_point_round_trips_and_old_records_still_read() -> None:
    e = DominatingPairEvent((0.75, 0.25), (0.25, 0.75), 3, 0.5, 1e-9)
    _roundtrip(e)
    plain = DominatingPairEvent((0.75, 0.25), (0.25, 0.75), 3)
    assert "epsilon" not in event_to_json(plain)  # version-1 records keep their form
    assert event_from_json(event_to_json(plain)) == plain
    with pytest.raises(ValidationError):
        DominatingPairEvent((0.75, 0.25), (0.25, 0.75), 1, 0.5, 1.5)


def test_basic_composition_is_the_exact_sum() -> None:
    g = guarantee_of(ApproxDPEvent(0.125, 5e-8, count=8))
    assert Fraction(g.epsilon) == 8 * Fraction(0.125)
    assert Fraction(g.delta) >= 8 * Fraction(5e-8) and g.delta == pytest.approx(4e-7, rel=1e-15)
    mixed = composed([ApproxDPEvent(0.25, 0.0), ApproxDPEvent(0.5, 1e-9)])
    assert guarantee_of(mixed).epsilon == 0.75 and guarantee_of(mixed).delta == 1e-9
    with pytest.raises(UnsupportedError):
        guarantee_of(GaussianEvent(1.0))  # no stated delta: needs a target


def test_advanced_composition_matches_its_closed_form() -> None:
    eps, k, d = 0.1, 100, 1e-6
    a = account(ApproxDPEvent(eps, 0.0, count=k), d)
    closed = math.sqrt(2 * k * math.log(1 / d)) * eps + k * eps * math.expm1(eps)
    adv = a.bounds["advanced"]
    assert adv is not None and adv.epsilon == pytest.approx(closed, rel=1e-12)
    assert adv.epsilon >= closed * (1 - 1e-15)
    assert a.rule == "advanced" and a.budget.epsilon < k * eps


def _eq8(orders: tuple[float, ...], values: tuple[float, ...], delta: float) -> float:
    with mpmath.workdps(40):
        best = min(
            mpmath.mpf(v)
            + (mpmath.log(1 / mpmath.mpf(delta)) - mpmath.log(o)) / (o - 1)
            + mpmath.log(1 - 1 / mpmath.mpf(o))
            for o, v in zip(orders, values, strict=True)
        )
        return float(max(best, 0))


def test_renyi_curve_converts_by_equation_8() -> None:
    orders, values = (1.5, 2.0, 4.0, 8.0, 16.0), (0.01, 0.02, 0.05, 0.1, 0.3)
    e = RdpCurveEvent(orders, values)
    _roundtrip(e)
    assert guarantee_of(e, 1e-6).epsilon == pytest.approx(_eq8(orders, values, 1e-6), rel=1e-12)
    # two runs: the curve doubles
    two = guarantee_of(RdpCurveEvent(orders, values, count=2), 1e-6).epsilon
    assert two == pytest.approx(_eq8(orders, tuple(2 * v for v in values), 1e-6), rel=1e-12)


def test_renyi_curves_at_different_orders_use_the_orders_both_cover() -> None:
    a = RdpCurveEvent((2.0, 4.0), (0.1, 0.2))
    b = RdpCurveEvent((2.0, 4.0, 64.0), (0.05, 0.1, 2.0))
    both = composed([a, b])
    # order 64 lies beyond a's curve, so only 2 and 4 count: curves add there
    expected = _eq8((2.0, 4.0), (0.15, 0.3), 1e-6)
    assert guarantee_of(both, 1e-6).epsilon == pytest.approx(expected, rel=1e-12)
    with pytest.raises(UnsupportedError):  # no Renyi curve, no stated budget: nothing applies
        guarantee_of(composed([a, ApproxDPEvent(1.0, 1e-7)]), 1e-6, rules=("renyi",))


def _rr_exact_delta(eps0: float, k: int, eps: float) -> float:
    """Exact delta(eps) of k-fold randomized response with parameter eps0 (closed form)."""
    with mpmath.workdps(50):
        p = mpmath.e**eps0 / (1 + mpmath.e**eps0)
        total = mpmath.mpf(0)
        for i in range(k + 1):  # i "truthful" outputs: loss (2i - k) eps0
            loss = (2 * i - k) * eps0
            if loss > eps:
                pi = mpmath.binomial(k, i) * p**i * (1 - p) ** (k - i)
                total += pi * (1 - mpmath.e ** (eps - loss))
        return float(total)


def test_certified_pld_of_a_pair_bounds_exact_randomized_response() -> None:
    eps0, k, target = 0.5, 6, 1e-4
    p = math.exp(eps0) / (1 + math.exp(eps0))
    e = DominatingPairEvent((p, 1 - p), (1 - p, p), k)
    eps = account(e, target, rules=("pld_certified",)).budget.epsilon
    lo, hi = 0.0, k * eps0  # exact epsilon at the target, by bisection on the closed form
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _rr_exact_delta(eps0, k, mid) <= target else (mid, hi)
    assert hi <= eps <= hi + 0.02  # proven upper bound, and close


def test_optimal_over_profile_is_exact_for_pure_dp() -> None:
    from privhist.accounting.accountant import optimal_over_profile
    from privhist.core.budget import Budget

    tight, point = optimal_over_profile([(0.1, 0.0)], 100, 1e-6, (10.0, Budget(0.1, 0.0)))
    lo, hi = 0.0, 10.0  # pure DP composes exactly like randomized response (KOV 2015)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _rr_exact_delta(0.1, 100, mid) <= 1e-6 else (mid, hi)
    assert hi * (1 - 1e-9) <= tight.epsilon <= hi * (1 + 1e-9) + 1e-12
    assert point == Budget(0.1, 0.0)
    # a point whose delta alone exceeds the target is skipped: the fallback stays
    same, _ = optimal_over_profile([(0.05, 1e-7)], 100, 1e-6, (10.0, Budget(0.1, 0.0)))
    assert same.epsilon == 10.0


def test_triehh_guarantee_is_unchanged_and_near_an_independent_pld() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld

    from privhist.federated.triehh import compose_levels
    from privhist.mechanisms.sampling import SampleAndThreshold

    comp = compose_levels(SampleAndThreshold(0.2, 1e-9), 5, 1e-8)
    assert comp.method == "pld_certified"
    assert round(comp.guarantee.epsilon, 5) == 0.23471  # the value stated before the accountant
    e = comp.event()
    _roundtrip(e)
    one = pld.from_two_probability_mass_functions(
        {i: math.log(x) for i, x in enumerate(e.q) if x > 0},
        {i: math.log(x) for i, x in enumerate(e.p) if x > 0},
        value_discretization_interval=1e-5,
    )
    independent = float(one.self_compose(5).get_epsilon_for_delta(1e-8))
    assert abs(comp.guarantee.epsilon - independent) < 2e-3


def test_hierarchy_and_quantile_events_state_their_composition() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld

    from privhist.analytics.quantiles import BinarySearchQuantiles
    from privhist.analytics.range_query import HierarchicalHistogram

    # the paper's even split: basic composition spends the budget, and the certified PLD
    # composition (the guarantee, the smaller) much less
    hh = HierarchicalHistogram(1.0, 1e-6, levels=4, composition="basic")
    m = hh.level_mechanism
    comp = hh.composition()
    b = comp.basic
    assert Fraction(b.epsilon) == 4 * Fraction(m.epsilon)
    assert b.delta == pytest.approx(4 * m.delta_exact, rel=1e-15) and b.delta <= 1e-6
    ev = hh.event()
    _roundtrip(ev)
    assert comp.pld_certified is not None and comp.pld_certified.epsilon < b.epsilon / 2
    assert hh.guarantee() == comp.pld_certified
    # the default split: the certified PLD composition is the guarantee, close to an
    # independent float composition of the same pair and within the budget
    hh = HierarchicalHistogram(1.0, 1e-6, levels=4)
    g, e = hh.guarantee(), hh.event()
    assert g == hh.composition().pld_certified and g.epsilon <= 1.0 and g.delta == 1e-6
    assert isinstance(e, DominatingPairEvent) and e.count == 4
    one = pld.from_two_probability_mass_functions(
        {i: math.log(x) for i, x in enumerate(e.q) if x > 0},
        {i: math.log(x) for i, x in enumerate(e.p) if x > 0},
        value_discretization_interval=1e-5,
    )
    independent = float(one.self_compose(4).get_epsilon_for_delta(1e-6))
    assert abs(g.epsilon - independent) < 2e-3
    assert hh.level_mechanism.epsilon > 2 * m.epsilon
    bs = BinarySearchQuantiles(1.0, 1e-6, steps=4)
    assert bs.guarantee() == bs.composition().pld_certified
    bs = BinarySearchQuantiles(1.0, 1e-6, steps=4, composition="basic")
    assert bs.composition().basic.epsilon == 1.0 and bs.guarantee().epsilon < 0.5
    _roundtrip(bs.event())


def test_fixed_cohort_rounds_never_exceed_the_request() -> None:
    from privhist.analytics.quantiles_cohort import FixedCohortQuantiles

    fc = FixedCohortQuantiles(1.0, 1e-6, clients=5_000, cohort_size=500, steps=5)
    g = fc.guarantee()
    e = fc.event()
    _roundtrip(e)
    assert Fraction(g.epsilon) >= 5 * Fraction(fc.round_epsilon) and g.epsilon <= 1.0
    assert Fraction(g.delta) >= 5 * Fraction(fc.round_delta) and g.delta <= 1e-6


def test_cpbm_and_ffe_epsilon_is_equation_8_of_their_curve() -> None:
    from privhist.federated.cpbm import Cpbm

    c = Cpbm(theta=0.2, m=8, clip=1.0, dimension=4, n_users=2_000)
    e = c.event()
    _roundtrip(e)
    curve = c.rdp()
    assert c.epsilon(1e-6) == pytest.approx(_eq8(curve.orders, curve.rdp, 1e-6), rel=1e-12)


def test_sample_and_threshold_event_dominates_at_its_point() -> None:
    from privhist.mechanisms.sampling import SampleAndThreshold

    m = SampleAndThreshold(1.0, 1e-6)
    e = m.event()
    _roundtrip(e)
    assert isinstance(e, DominatingPairEvent) and e.epsilon is not None and e.delta is not None
    assert e.epsilon >= float(m.epsilon_key) and e.delta <= 1e-6
    a = math.exp(e.epsilon)
    for p, q in ((e.p, e.q), (e.q, e.p)):  # hockey-stick divergence of the pair, both ways
        hs = sum(max(0.0, x - a * y) for x, y in zip(p, q, strict=True))
        assert hs <= e.delta * (1 + 1e-6) + 1e-15
    g = guarantee_of(e)  # the certified delta: at most the stated one
    assert g.epsilon == m.guarantee().epsilon and g.delta <= m.guarantee().delta


def test_pws_sample_event_composes_the_private_total() -> None:
    from privhist.session.releases import pws_sample_event

    e = pws_sample_event(0.75, 1e-6, 0.25)
    _roundtrip(e)
    g = guarantee_of(e)
    assert (g.epsilon, g.delta) == (1.0, 1e-6)
    assert guarantee_of(pws_sample_event(0.5, 1e-6)) == guarantee_of(ApproxDPEvent(0.5, 1e-6))


def test_every_registered_mechanism_event_agrees_with_its_guarantee() -> None:
    from privhist.mechanisms.registry import registry

    checked = 0
    for name, cls in registry().items():
        for m in cls.test_instances():
            e = m.event()
            _roundtrip(e)
            g = m.guarantee()
            try:
                stated = guarantee_of(e)
            except UnsupportedError:  # noise without a stated delta (discrete Gaussian)
                stated = guarantee_of(e, g.delta)  # its Renyi bound: valid, may be looser
                assert stated.delta == g.delta, name
                continue
            assert stated.epsilon <= g.epsilon * (1 + 1e-12), name
            assert stated.delta <= g.delta * (1 + 1e-12), name
            checked += 1
    assert checked >= 15  # the power of the check: most mechanisms state a budget


def test_pure_mechanisms_keep_the_requested_delta_and_spend_none() -> None:
    from privhist.mechanisms.dense import DenseHistogram
    from privhist.mechanisms.finite.histograms import BasicHistogram

    for m in (
        DenseHistogram(1.0, 1e-6, domain=[1, 2]),
        BasicHistogram(1.0, 1e-6, domain=[1, 2], count_bound=10),
    ):
        assert m.delta == 1e-6  # what was asked for stays readable
        assert m.guarantee().delta == 0.0 and m.key_budget().delta == 0.0
    gauss = DenseHistogram(1.0, 1e-6, domain=[1, 2], noise="gaussian")
    assert gauss.delta == 1e-6 and gauss.guarantee().delta == 1e-6


def test_the_ledger_stores_the_events_of_quantiles_and_samples() -> None:
    import numpy as np
    import polars as pl

    from privhist.core.budget import Budget
    from privhist.session import Session

    df = pl.DataFrame({"x": np.linspace(0.0, 0.999, 5_000)})
    with Session.in_memory(Budget(10.0, 1e-5)) as s:
        s.quantiles(
            df, column="x", q=[0.5], lower=0.0, upper=1.0, epsilon=1.0, delta=1e-6, levels=4
        )
        status = s.status()
        assert status is not None
        (spend,) = status.spends
        event = spend.privacy_event
        assert isinstance(event, DominatingPairEvent) and event.count == 4
        # the charge is the event's guarantee at the release's delta (certified PLD)
        charged = guarantee_of(event, 1e-6, rules=("basic", "pld_certified"), step=CERTIFIED_STEP)
        assert charged == spend.budget and charged.epsilon <= 1.0
