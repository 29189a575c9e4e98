"""Composed sample-and-threshold releases: the guarantee stated, the tight bound's points, and
the per-release search of the "pld" split (privhist.analytics.hierarchy)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from privhist.analytics import hierarchy
from privhist.analytics.hierarchy import (
    ReleasesComposition,
    compose,
    compose_releases,
    split_budget,
    split_sample_and_threshold,
)
from privhist.core.budget import Budget
from privhist.mechanisms.sampling import SampleAndThreshold
from privhist.mechanisms.sampling.profile import certified_delta, exp_lower, rate_bound

# -- the guarantee ------------------------------------------------------------------------------


def test_the_guarantee_is_the_smaller_bound() -> None:
    """What a release states and a ledger is charged is the smaller of basic and certified PLD
    composition: never the larger one, and basic composition when there is no PLD bound."""
    m = SampleAndThreshold(0.25, 1e-8)
    # one release: the certified PLD composition of its pair rounds outwards a little above
    # the release's own point, which is then the guarantee
    one = compose_releases(m, 1, m.delta_exact)
    assert one.pld_certified is not None and one.pld_certified.epsilon > one.basic.epsilon
    assert one.guarantee == one.basic == Budget(0.25, m.delta_exact)
    assert one.guarantee_rule == "basic"
    # no certified epsilon reaches the release's delta: basic composition
    big = SampleAndThreshold(3.0, 1e-6)
    alone = compose_releases(big, 1, big.delta_exact)
    assert alone.pld_certified is None
    assert alone.guarantee == alone.basic and alone.guarantee_rule == "basic"
    # the same epsilon: basic composition's delta is at most the total delta, so it is smaller
    per = Budget(0.25, 2.5e-9)
    tie = ReleasesComposition(4, per, Budget(1.0, 5e-9), Budget(1.0, 1e-8), per, Budget(1.0, 1e-8))
    assert tie.guarantee == Budget(1.0, 5e-9) and tie.guarantee_rule == "basic"
    # two releases: the certified PLD composition, far below basic
    two = compose_releases(m, 2, 2e-8)
    assert two.pld_certified is not None and two.guarantee == two.pld_certified
    assert two.guarantee.epsilon < two.basic.epsilon
    assert two.guarantee_rule == "pld_certified"


# -- the tight bound's points -------------------------------------------------------------------


def _from_an_admitted_point(c: ReleasesComposition, p: Fraction) -> bool:
    """``c.tight`` is basic composition (the fallback) or comes from a point the grid admits:
    above the float ``ln(1/(1-p))`` and proven above it by the rational ``L <= e^eps``."""
    if c.tight.epsilon == c.basic.epsilon:
        return True
    e = c.tight_from.epsilon
    return e > -math.log1p(-float(p)) and exp_lower(Fraction(e)) * (1 - p) > 1


def test_the_tight_bound_uses_no_point_on_the_edge_of_the_removal_line() -> None:
    """compose's tight bound takes a profile point only above ln(1/(1-p)), where removing a
    client is pure and the certificate applies. Both of its cuts are strict, so a point exactly
    on either is left out: the float cut (the grid keeps ``epsilon * f > -log1p(-p)``) and the
    rational one (``L (1 - p) > 1`` with ``L <= e^eps``)."""
    # at the largest rate Lemma A allows, p = 1 - 1/L: the release's own point has
    # L (1 - p) = 1 exactly, and is left out
    eps, tau = 0.5, 5
    top = rate_bound(Fraction(eps))
    assert exp_lower(Fraction(eps)) * (1 - top) == 1
    below = top * (1 - Fraction(1, 10**6))
    at_top, at_below = (
        compose(p, tau, eps, float(certified_delta(p, tau, Fraction(eps)).upper), 4)
        for p in (top, below)
    )
    assert _from_an_admitted_point(at_top, top) and _from_an_admitted_point(at_below, below)
    # a millionth below that rate the point is admitted, and beats basic composition: the check
    # has power
    assert at_below.tight.epsilon < at_below.basic.epsilon and at_below.tight_from.epsilon == eps
    # the float logarithm of 1/(1 - 0.783) lies above the real one (the rational bound proves
    # it), and epsilon / 2 lands on it exactly: the grid leaves that point out
    p = Fraction(783, 1000)
    low = -math.log1p(-float(p))
    assert exp_lower(Fraction(low)) * (1 - p) > 1
    eps = 2 * low
    assert eps * 0.5 == low
    d = float(certified_delta(p, 10, Fraction(eps)).upper)
    c = compose(p, 10, eps, d, 4)
    assert c.tight.epsilon < c.basic.epsilon and _from_an_admitted_point(c, p)


# -- the per-release search ---------------------------------------------------------------------


def test_one_release_takes_the_whole_budget_without_a_search(monkeypatch: Any) -> None:
    """One release composes with nothing: its epsilon is the budget's and no per-release search
    (a PLD composition per candidate) runs."""

    def no_search(*args: Any) -> float:
        raise AssertionError("searched")

    monkeypatch.setattr(hierarchy, "pld_epsilon", no_search)
    m = split_sample_and_threshold(1.0, 1e-8, 1, confidence=0.95)
    assert m.epsilon == 1.0 and m.delta_exact <= 1e-8
    with pytest.raises(AssertionError, match="searched"):  # two releases are searched
        split_sample_and_threshold(1.0, 1e-8, 2, confidence=0.95)


def _search(
    monkeypatch: Any, epsilon: float, delta: float, releases: int
) -> tuple[float, list[tuple[float, float]], list[tuple[float, float]]]:
    """Run the per-release search of the "pld" split (uncached), recording each estimate
    ``(candidate, composed epsilon of the float profile's pair)`` and each certified check
    ``(candidate, certified composed epsilon, inf for none)``."""
    estimates: list[tuple[float, float]] = []
    checks: list[tuple[float, float]] = []
    account, certified = hierarchy.account, hierarchy.certified_composition

    def spy_account(event: Any, total: float, **kwargs: Any) -> Any:
        got = account(event, total, **kwargs)
        if kwargs.get("step") == hierarchy.SEARCH_STEP:
            estimates.append((event.epsilon, got.budget.epsilon))
        return got

    def spy_certified(*args: Any) -> Any:
        got = certified(*args)
        checks.append((args[2], math.inf if got is None else got.epsilon))
        return got

    monkeypatch.setattr(hierarchy, "account", spy_account)
    monkeypatch.setattr(hierarchy, "certified_composition", spy_certified)
    # the options split_sample_and_threshold passes on, at their defaults
    options = {
        "sampling_rate": None,
        "threshold": None,
        "alpha": None,
        "calibration": None,
        "confidence": 0.95,
    }
    result = hierarchy.pld_epsilon.__wrapped__(
        epsilon, delta, releases, tuple(sorted(options.items()))
    )
    return result, estimates, checks


@pytest.mark.parametrize(
    ("epsilon", "delta", "releases", "bisects"),
    [
        (1.0, 1e-8, 2, False),
        # a large budget: the certified figure is 5% above the estimate, so the 1% steps fail
        (40.0, 0.01, 8, True),
    ],
)
def test_the_pld_search_takes_its_documented_steps(
    monkeypatch: Any, epsilon: float, delta: float, releases: int, bisects: bool
) -> None:
    """pld_epsilon's steps (its docstring): estimates (at most 8) until one is within 0.5%
    below epsilon; then the certified check of the best estimate, 1% and 2% below it; failing
    those, 6 geometric bisection steps in the tightest bracket known (epsilon / releases or
    the largest candidate passed, and the smallest rejected). The answer is the largest
    candidate the certified check passed."""
    result, estimates, checks = _search(monkeypatch, epsilon, delta, releases)
    floor = split_budget(epsilon, delta, releases)[0]
    assert 1 <= len(estimates) <= 8
    within = [i for i, (_, got) in enumerate(estimates) if 0.995 * epsilon <= got <= epsilon]
    assert within in ([], [len(estimates) - 1])  # the first estimate within 0.5% stops it
    best = max(e for e, got in estimates if got <= epsilon)
    steps = [best, best * 0.99, best * 0.98]
    assert [e for e, _ in checks[:3]] == steps[: len(checks[:3])]
    passed = [i for i, (_, got) in enumerate(checks[:3]) if got <= epsilon]
    if passed:  # the first step passed is the answer
        assert not bisects and len(checks) == passed[0] + 1 and result == checks[passed[0]][0]
        return
    assert bisects and len(checks) == 3 + 6
    for i, (e, _) in enumerate(checks[3:], 3):
        lo = max([floor] + [x for x, got in checks[:i] if got <= epsilon])
        hi = min(x for x, got in checks[:i] if got > epsilon)
        assert e == math.sqrt(lo * hi)
    assert result == max([floor] + [x for x, got in checks if got <= epsilon])


@pytest.mark.parametrize("releases", [1, 2])
def test_an_option_of_the_wrong_type_is_named_whatever_the_releases(releases: int) -> None:
    """A list where a number belongs is refused by name at one release and at several (the
    search keeps its public inputs, and a list cannot be kept: it was a TypeError there)."""
    from privhist.core.errors import ValidationError

    with pytest.raises(ValidationError, match="'alpha' of SampleAndThreshold"):
        split_sample_and_threshold(1.0, 1e-8, releases, confidence=0.95, alpha=[0.5])
