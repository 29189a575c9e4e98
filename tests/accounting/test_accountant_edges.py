"""Edges of the accountant's numeric searches: the zCDP threshold conversion at and below
epsilon 0, the bisection's stopping rule, and the PLD inversion's recovery when dp_accounting's
inverse disagrees with its own forward direction."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import pytest

from privhist.accounting import zcdp
from privhist.accounting.composition import LaplaceEvent, PLDAccount, composed


def test_certified_delta_at_and_below_zero() -> None:
    """At ``epsilon = 0`` (no threshold failure) the bound is CKS Corollary 13's, which holds
    there (it is below 1); below 0 it is the trivial 1."""
    rho = Fraction(1, 100)
    at_zero = zcdp.certified_delta(rho, 0.0, 0.0)
    assert at_zero == zcdp.zcdp_delta(rho, 0.0) < 1
    # a direct check of the bound at 0: exp((a-1)(a rho)) / (a-1) (1 - 1/a)**a at some a > 1
    with mpmath.workdps(30):
        a = mpmath.mpf(40)
        direct = mpmath.exp((a - 1) * (a * mpmath.mpf(rho.numerator) / rho.denominator))
        direct *= (1 - 1 / a) ** a / (a - 1)
    assert at_zero <= float(direct) * (1 + 1e-12)
    assert zcdp.certified_delta(rho, -1e-9, 0.0) == 1.0


def test_threshold_epsilon_stops_at_the_stated_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bisection stops at the first bracket whose width is at most ``2**-40`` of its upper
    end, and answers that end: with a delta curve reached at ``x = 2 - 1.5 * 2**-40`` every
    midpoint below 2 falls short until the bracket ``[2 - 2**-39, 2]`` has exactly that width,
    so the answer is 2 (one more step would answer ``2 - 2**-40``). The answer is stored in
    guarantees and ledgers, so the rule is part of the function's contract."""
    x = 2 - 1.5 * 2.0**-40

    def curve(rho: Any, e: float, failure: float) -> float:
        return 0.5 if e < x else 0.25  # decreasing; the target delta is reached at x

    monkeypatch.setattr(zcdp, "certified_delta", curve)
    assert zcdp.threshold_epsilon(Fraction(1, 100), 1e-9, 0.25) == 2.0
    x = 2 - 0.5 * 2.0**-40  # within the last bracket's upper half: the same answer either way
    assert zcdp.threshold_epsilon(Fraction(1, 100), 1e-9, 0.25) == 2.0


class _DriftingPLD:
    """A loss distribution whose delta curve is ``exp(-eps)``, and whose inverse answers 0.01 too
    small the first time (the float disagreement the inversion must recover from)."""

    def __init__(self) -> None:
        self.calls = 0

    def get_delta_for_epsilon(self, eps: float) -> float:
        return math.exp(-eps)

    def get_epsilon_for_delta(self, d: float) -> float:
        self.calls += 1
        return -math.log(d) - (0.01 if self.calls == 1 else 0.0)


def test_pld_inversion_recovers_the_tight_epsilon() -> None:
    """After a first inverse that is too small, the inversion asks again for the delta left once
    the truncation margin is paid and answers the smallest verified epsilon, to 1e-9: the root
    of ``exp(-eps) + m (1 + e**eps) = delta`` (computed here by bisection in 40 digits), not an
    epsilon reached by stepping up from the wrong first answer."""
    mass = 1e-9
    account = PLDAccount(composed([LaplaceEvent(1.0)]), _DriftingPLD(), mass)
    delta = 1e-3
    eps = account.epsilon_for_delta(delta)
    assert account.delta_for_epsilon(eps) <= delta
    with mpmath.workdps(40):
        f = lambda e: mpmath.exp(-e) + mass * (1 + mpmath.exp(e)) - delta  # noqa: E731
        lo, hi = mpmath.mpf(0), mpmath.mpf(20)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        root = float(hi)
    assert root <= eps <= root * (1 + 1e-9), (eps, root)


def test_a_threshold_that_always_fails_gives_delta_one() -> None:
    """A threshold failure probability of 1 (or more) certifies nothing: delta 1, without
    evaluating the noise's profile at ``epsilon + ln(0)``."""

    def profile(e: float) -> float:
        raise AssertionError("not needed")

    for p_f in (1.0, 1.5):
        assert zcdp.with_threshold_failure(profile, 1.0, p_f) == 1.0
    assert zcdp.with_threshold_failure(lambda e: 0.0, 1.0, 0.25) == 0.25 * (1 + 1e-12)
