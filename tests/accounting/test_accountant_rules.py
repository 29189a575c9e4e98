"""The accountant's rules at their boundaries, each against its formula: basic composition's
exact sums rounded up, advanced composition (Dwork, Rothblum & Vadhan 2010, Theorem III.3) only
where its delta fits, the threshold rule's zCDP conversion (Canonne, Kamath & Steinke 2020,
Corollary 13) with the failure probability of every run, and every refusal of an invalid input.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from tests.contracts import formulas as F

from privhist.accounting.accountant import account, guarantee_of, threshold_delta, threshold_parts
from privhist.accounting.composition import (
    ApproxDPEvent,
    GaussianEvent,
    advanced_composition,
    basic_composition,
    composed,
    optimal_composition_delta,
    pld_compose,
)
from privhist.accounting.events import ZcdpThresholdEvent
from privhist.core.budget import Budget
from privhist.core.errors import UnsupportedError, ValidationError


def test_basic_composition_sums_exactly_and_rounds_up() -> None:
    parts = [Budget(0.1, 1e-9)] * 3 + [Budget(0.2, 3e-10)]
    got = basic_composition(parts)
    eps = sum((Fraction(b.epsilon) for b in parts), Fraction(0))
    dlt = sum((Fraction(b.delta) for b in parts), Fraction(0))
    for value, exact in ((got.epsilon, eps), (got.delta, dlt)):
        assert Fraction(value) >= exact > Fraction(math.nextafter(value, -math.inf))
    assert basic_composition([Budget(0.1, 0.5), Budget(0.1, 0.25)]).delta == 0.75
    with pytest.raises(ValidationError) as err:
        basic_composition([Budget(0.1, 0.5), Budget(0.1, 0.5)])  # deltas adding up to 1
    assert err.value.parameter == "budgets"
    with pytest.raises(ValidationError):
        basic_composition([])


def test_advanced_composition_refusals() -> None:
    with pytest.raises(ValidationError) as err:
        advanced_composition(Budget(0.1, 0.25), 3, 0.25)  # 3 * 0.25 + 0.25 = 1, exactly
    assert err.value.parameter == "delta_prime"
    assert advanced_composition(Budget(0.1, 0.25), 3, 0.125).delta == 0.875


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf, True, "1"])
def test_optimal_composition_refuses_bad_epsilons(bad: object) -> None:
    with pytest.raises(ValidationError):
        optimal_composition_delta(Budget(1.0, 0.0), 3, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-0.1, math.nan, True, "0"])
def test_pld_refuses_bad_epsilons(bad: object) -> None:
    acc = pld_compose(GaussianEvent(3.0))
    with pytest.raises(ValidationError):
        acc.delta_for_epsilon(bad)  # type: ignore[arg-type]
    assert acc.delta_for_epsilon(0.0) > 0


def test_the_accountant_uses_advanced_composition_only_where_its_delta_fits() -> None:
    """Advanced composition of ``k`` runs needs ``k delta + delta' <= delta``; the accountant
    uses it only then, with ``delta' = delta - k delta_0``, and never for one run."""
    run = ApproxDPEvent(0.05, 1e-9)
    many = composed([run] * 200)
    acc = account(many, 1e-6, rules=("advanced",))
    b = acc.bounds["advanced"]
    assert b is not None and b.delta <= 1e-6
    e = mpmath.mpf(0.05)
    dp = mpmath.mpf(Fraction(1e-6) - 200 * Fraction(1e-9))
    want = mpmath.sqrt(2 * 200 * mpmath.log(1 / dp)) * e + 200 * e * (mpmath.exp(e) - 1)
    assert b.epsilon >= want and b.epsilon <= want * (1 + 1e-12)
    with pytest.raises(UnsupportedError):  # 1000 runs of 1e-9 already exceed 1e-6
        account(composed([run] * 1000), 1e-6, rules=("advanced",))
    with pytest.raises(UnsupportedError):  # one run: advanced composition does not apply
        account(run, 1e-6, rules=("advanced",))
    # the default rules pick the smaller epsilon of basic and advanced
    assert guarantee_of(many, 1e-6).epsilon == min(b.epsilon, 200 * 0.05)


@pytest.mark.parametrize(("rho", "failure", "count"), [(0.01, 1e-9, 1), (0.003, 3e-10, 3)])
def test_threshold_rule_counts_every_run(rho: float, failure: float, count: int) -> None:
    """``count`` runs of a zCDP-with-threshold release: zCDP ``count rho`` and failure
    ``count p_F``; the delta at epsilon is ``delta_z(eps + ln(1 - n p_F)) + n p_F``."""
    ev = ZcdpThresholdEvent(rho, failure, count=count)
    parts = threshold_parts(ev)
    assert parts == (count * Fraction(rho), count * Fraction(failure))
    for eps in (0.5, 1.0):
        got = threshold_delta(ev, eps)
        pf = mpmath.mpf(count * Fraction(failure))
        exact = F.with_failure(lambda e: F.zcdp_delta(count * Fraction(rho), e), eps, pf)
        assert got >= exact and got <= exact * (1 + 1e-6)
    g = guarantee_of(ev, 1e-5, rules=("zcdp_threshold",))
    pf = mpmath.mpf(count * Fraction(failure))
    assert F.with_failure(lambda e: F.zcdp_delta(count * Fraction(rho), e), g.epsilon, pf) <= 1e-5


def test_basic_rule_reads_the_stated_point_of_threshold_events() -> None:
    ev = ZcdpThresholdEvent(0.01, 1e-9, epsilon=0.8, delta=1e-7)
    b = account(composed([ev, ev]), 1e-6, rules=("basic",)).bounds["basic"]
    assert b is not None and b.epsilon == 1.6
    with pytest.raises(UnsupportedError):
        account(ZcdpThresholdEvent(0.01, 1e-9), 1e-6, rules=("basic",))
    with pytest.raises(UnsupportedError):  # a Gaussian states no (epsilon, delta)
        account(GaussianEvent(1.0), 1e-6, rules=("basic",))


# -- each rule at the edge of its target delta ------------------------------------------------


def test_basic_rule_admits_deltas_summing_exactly_to_the_target_and_not_one_ulp_more() -> None:
    """Four runs of delta ``2**-21`` add up to exactly ``2**-19``: the basic rule gives the
    target itself; at the float just below the target, or with one part one ulp larger, it
    gives nothing."""
    part = 2.0**-21
    runs = composed([ApproxDPEvent(0.25, part)] * 4)
    b = account(runs, 2.0**-19, rules=("basic",)).bounds["basic"]
    assert b == Budget(1.0, 2.0**-19)
    with pytest.raises(UnsupportedError):
        account(runs, math.nextafter(2.0**-19, 0.0), rules=("basic",))
    bigger = composed(
        [ApproxDPEvent(0.25, part)] * 3 + [ApproxDPEvent(0.25, math.nextafter(part, 1))]
    )
    with pytest.raises(UnsupportedError):
        account(bigger, 2.0**-19, rules=("basic",))


def test_basic_rule_without_a_target_refuses_deltas_reaching_one() -> None:
    """Without a target the event's own delta is the exact sum rounded up, which must stay below
    1: ``0.5 + (0.5 - 2**-53)`` is the largest float below 1 and is admitted; ``0.5 + (0.5 -
    2**-54)`` lies between it and 1, rounds up to 1 and is refused, as is a sum of exactly 1."""
    below = composed([ApproxDPEvent(0.1, 0.5), ApproxDPEvent(0.1, 0.5 - 2.0**-53)])
    g = guarantee_of(below)
    assert g.delta == math.nextafter(1.0, 0.0) and Fraction(g.epsilon) >= Fraction(0.1) * 2
    for last in (0.5 - 2.0**-54, 0.5):
        with pytest.raises(UnsupportedError):
            guarantee_of(composed([ApproxDPEvent(0.1, 0.5), ApproxDPEvent(0.1, last)]))


def test_threshold_rule_needs_the_failure_below_the_target() -> None:
    """The threshold rule's delta is at least its failure probability: a failure equal to the
    target gives no epsilon; just below it, a finite one, the smallest (to 2**-40) whose
    certified delta meets the target."""
    rho = Fraction(0.01)
    with pytest.raises(UnsupportedError):
        account(ZcdpThresholdEvent(0.01, 1e-6), 1e-6, rules=("zcdp_threshold",))
    ev = ZcdpThresholdEvent(0.01, 0.5e-6)
    g = account(ev, 1e-6, rules=("zcdp_threshold",)).budget
    assert math.isfinite(g.epsilon) and g.delta == 1e-6
    pf = mpmath.mpf(Fraction(0.5e-6))
    exact = F.with_failure(lambda e: F.zcdp_delta(rho, e), g.epsilon, pf)
    assert exact <= 1e-6
    smaller = g.epsilon * (1 - 2.0**-30)
    assert F.with_failure(lambda e: F.zcdp_delta(rho, e), smaller, pf) > 1e-6


def test_threshold_parts_need_every_other_part_to_be_zcdp() -> None:
    """Gaussian parts count as ``s**2 / (2 sigma**2)`` exactly; an (epsilon, delta) part, or no
    threshold part at all, leaves the threshold rule out (and threshold_delta refuses)."""
    ev = composed([ZcdpThresholdEvent(0.5, 1e-9), GaussianEvent(3.0, sensitivity=2.0)])
    assert threshold_parts(ev) == (Fraction(1, 2) + Fraction(4, 18), Fraction(1e-9))
    for other in (ApproxDPEvent(0.1, 0.0), None):
        parts = [ZcdpThresholdEvent(0.5, 1e-9)] if other is not None else [GaussianEvent(3.0)]
        mixed = composed([*parts, other if other is not None else GaussianEvent(2.0)])
        assert threshold_parts(mixed) is None
        with pytest.raises(UnsupportedError):
            threshold_delta(mixed, 1.0)


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-6, math.nan, math.inf, True, "1e-6"])
def test_account_refuses_targets_outside_the_open_unit_interval(bad: object) -> None:
    with pytest.raises(ValidationError) as err:
        account(ApproxDPEvent(0.1, 0.0), bad)  # type: ignore[arg-type]
    assert err.value.parameter == "delta"


def test_account_refuses_unknown_rules_and_non_events() -> None:
    with pytest.raises(ValidationError) as err:
        account(ApproxDPEvent(0.1, 0.0), 1e-6, rules=("basic", "magic"))
    assert err.value.parameter == "rules"
    with pytest.raises(ValidationError) as err:
        account(ApproxDPEvent(0.1, 0.0), 1e-6, report=("magic",))
    assert err.value.parameter == "rules"
    with pytest.raises(ValidationError) as err:
        account(Budget(0.1, 0.0), 1e-6)  # type: ignore[arg-type]
    assert err.value.parameter == "event"


def test_reported_rules_are_computed_but_never_chosen() -> None:
    """A rule asked for in ``report`` only is shown even when it is smaller; the guarantee comes
    from the chosen rules (advanced composition is far smaller here, basic is chosen)."""
    many = composed([ApproxDPEvent(0.05, 1e-9)] * 200)
    acc = account(many, 1e-6, rules=("basic",), report=("advanced",))
    adv = acc.bounds["advanced"]
    assert adv is not None and acc.bounds["basic"] is not None
    assert adv.epsilon < acc.bounds["basic"].epsilon
    assert acc.rule == "basic" and acc.budget == acc.bounds["basic"]
