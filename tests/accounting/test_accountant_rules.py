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
