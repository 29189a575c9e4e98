"""Lemma 2 (cPBM RDP) checked against exact Renyi divergences computed by enumeration."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from privhist.core.errors import ValidationError
from privhist.federated.cpbm_accounting import (
    RdpCurve,
    calibrate_m,
    calibrate_theta,
    compose,
    cpbm_epsilon,
    cpbm_rdp,
    log_pi,
    parallel_compose,
    printed_rdp_bound,
    rdp_to_dp,
)


def _sum_distribution(ps: list[Fraction], m: int) -> list[Fraction]:
    """Exact pmf of sum_i Binomial(m, p_i), by convolution in rationals."""
    dist = [Fraction(1)]
    for p in ps:
        one = [math.comb(m, k) * p**k * (1 - p) ** (m - k) for k in range(m + 1)]
        new = [Fraction(0)] * (len(dist) + m)
        for i, a in enumerate(dist):
            for j, b in enumerate(one):
                new[i + j] += a * b
        dist = new
    return dist


def _renyi(p: list[Fraction], q: list[Fraction], order: int) -> float:
    """Exact D_order(P || Q) for an integer order (a rational moment, one log at the end)."""
    s = sum((a**order / b ** (order - 1) for a, b in zip(p, q, strict=True) if a), Fraction(0))
    return math.log(s) / (order - 1)


THETAS = [Fraction(1, 20), Fraction(1, 8), Fraction(1, 5), Fraction(1, 4)]


@pytest.mark.parametrize("theta", THETAS)
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_lemma2_bounds_every_neighbouring_pair(theta: Fraction, n: int) -> None:
    """Enumerate the other users' probabilities on a grid containing the extremes and both
    neighbours' probabilities on the same grid; the exact Renyi divergence of the secure sum
    never exceeds the bound, for m = 1, 2."""
    half = Fraction(1, 2)
    grid = [half - theta, half - theta / 2, half, half + theta]
    for m in (1, 2):
        for order in (2, 3, 6):
            bound = cpbm_rdp(n, float(theta), m, 1, orders=[order]).rdp[0]
            worst = 0.0
            for others in itertools.combinations_with_replacement(grid, n - 1):
                for a, b in itertools.permutations(grid, 2):
                    p = _sum_distribution([a, *others], m)
                    q = _sum_distribution([b, *others], m)
                    worst = max(worst, _renyi(p, q, order))
            assert worst <= bound * (1 + 1e-9) + 1e-12, (n, m, order, worst, bound)
            if n <= 2 and m == 1:  # n' = n - 1: the bound is the exact worst case
                assert worst == pytest.approx(bound, rel=1e-9)


def test_log_pi_against_mpmath() -> None:
    """Pi_1, Pi_2 from the two worst-case distributions in 60-digit arithmetic."""
    mpmath.mp.dps = 60
    for n, theta, lam in [(7, 0.2, 2.5), (101, 0.25, 16.0), (2000, 0.1, 64.0), (1, 0.05, 1.5)]:
        npr = n // 2
        t = mpmath.mpf(theta)
        q = mpmath.mpf(1) / 2 + t

        def binom(k: int, nn: int, pp: mpmath.mpf) -> mpmath.mpf:
            if k < 0 or k > nn:
                return mpmath.mpf(0)
            return mpmath.binomial(nn, k) * pp**k * (1 - pp) ** (nn - k)

        pi1 = pi2 = mpmath.mpf(0)
        for k in range(npr + 2):
            a = (1 - q) * binom(k - 1, npr, q) + q * binom(k, npr, q)
            b = binom(k, npr + 1, q)
            pi1 += a**lam / b ** (lam - 1)
            pi2 += b**lam / a ** (lam - 1)
        l1, l2 = log_pi(n, theta, lam)
        assert l1 == pytest.approx(float(mpmath.log(pi1)), rel=1e-9, abs=1e-15)
        assert l2 == pytest.approx(float(mpmath.log(pi2)), rel=1e-9, abs=1e-15)


def test_printed_pi2_misses_the_last_term() -> None:
    """The appendix's Pi_2 drops the k = n' + 1 term; for small n the printed bound is below the
    exact worst-case divergence (n = 2, lambda = 2: 1.4475 vs 1.4860); for large n the
    difference vanishes."""
    exact = math.exp(max(log_pi(2, 0.2, 2.0)))
    printed = printed_rdp_bound(2, 0.2, 2.0)
    assert exact == pytest.approx(1.486042692939, rel=1e-10)
    assert printed == pytest.approx(1.447471264368, rel=1e-10)
    assert printed < exact
    big = math.exp(max(log_pi(100, 0.2, 5.0)))
    assert printed_rdp_bound(100, 0.2, 5.0) == pytest.approx(big, rel=1e-10)
    # the main-text variant disagrees in both directions
    assert printed_rdp_bound(2, 0.2, 2.0, version="main") < exact
    assert printed_rdp_bound(100, 0.2, 20.0, version="main") > 10 * math.exp(
        max(log_pi(100, 0.2, 20.0))
    )


def test_paper_budgets_are_reproduced_with_factor_D_equal_2d() -> None:
    """Table 2's totals (eps = 2.8 for d = 50, 4 for d = 100, delta = 1e-4; m = 30, m' = 3,
    b = 6) come out when the factor of Lemma 2 is D = 2 d coordinates plus 63 Haar
    coefficients; with the factor d they would be 1.9 and 2.8."""
    for d, paper in [(50, 2.8), (100, 4.0)]:
        total = compose([cpbm_rdp(10_000, 0.2, 30, 2 * d), cpbm_rdp(10_000, 0.2, 3, 63)])
        assert abs(total.epsilon(1e-4) - paper) < 0.05
    only_d = compose([cpbm_rdp(10_000, 0.2, 30, 50), cpbm_rdp(10_000, 0.2, 3, 63)])
    assert only_d.epsilon(1e-4) < 2.0


def test_rdp_to_dp_is_equation_8() -> None:
    curve = RdpCurve((1.5, 2.0, 10.0), (0.01, 0.05, 0.9))
    delta = 1e-5
    by_hand = [
        e + (math.log(1 / delta) - math.log(lam)) / (lam - 1) + math.log(1 - 1 / lam)
        for lam, e in zip(curve.orders, curve.rdp, strict=True)
    ]
    eps, order = rdp_to_dp(curve, delta)
    assert eps == pytest.approx(min(by_hand), rel=1e-12)
    assert order == curve.orders[int(np.argmin(by_hand))]


def test_composition_rules() -> None:
    a = cpbm_rdp(1000, 0.2, 15, 100)
    b = cpbm_rdp(1000, 0.2, 15, 1)
    both = compose([a, b])
    assert both.rdp == pytest.approx([x + y for x, y in zip(a.rdp, b.rdp, strict=True)])
    # linear in m * dimension (composition over trials and coordinates)
    assert cpbm_rdp(1000, 0.2, 1, 1).scaled(1500).rdp == pytest.approx(a.rdp, rel=1e-12)
    par = parallel_compose([both, cpbm_rdp(5000, 0.2, 15, 101)])
    assert par.rdp == pytest.approx(both.rdp)  # the 1000-user round is the worst
    with pytest.raises(ValidationError):
        compose([a, RdpCurve((2.0,), (0.1,))])


def test_monotone_in_n_and_theta() -> None:
    eps = [cpbm_epsilon(n, 0.2, 10, 10, 1e-5) for n in (100, 1000, 10_000)]
    assert eps[0] > eps[1] > eps[2]
    eps_t = [cpbm_epsilon(1000, t, 10, 10, 1e-5) for t in (0.05, 0.1, 0.25)]
    assert eps_t[0] < eps_t[1] < eps_t[2]


def test_calibration() -> None:
    m = calibrate_m(1.0, 1e-6, 100_000, 0.2, 128)
    assert cpbm_epsilon(100_000, 0.2, m, 128, 1e-6) <= 1.0
    assert cpbm_epsilon(100_000, 0.2, m + 1, 128, 1e-6) > 1.0
    t = calibrate_theta(1.0, 1e-6, 10_000, 100, 128)
    assert 0 < t < Fraction(1, 4)
    assert cpbm_epsilon(10_000, float(t), 100, 128, 1e-6) <= 1.0
    assert cpbm_epsilon(10_000, float(t) + 2**-20, 100, 128, 1e-6) > 1.0
    with pytest.raises(ValidationError, match="epsilon of m = 1"):
        calibrate_m(0.01, 1e-6, 10, 0.25, 100)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"theta": 0.3}, "theta"),
        ({"theta": 0.0}, "theta"),
        ({"m": 0}, "m"),
        ({"n": 0}, "n"),
        ({"dimension": 0}, "dimension"),
    ],
)
def test_bad_parameters(kwargs: dict[str, float], parameter: str) -> None:
    args = {"n": 10, "theta": 0.2, "m": 3, "dimension": 4} | kwargs
    with pytest.raises(ValidationError) as info:
        cpbm_rdp(**args)  # type: ignore[arg-type]
    assert info.value.parameter == parameter
    with pytest.raises(ValidationError):
        cpbm_rdp(10, 0.2, 3, 4, orders=[1.0])
    with pytest.raises(ValidationError):
        rdp_to_dp(RdpCurve((2.0,), (0.1,)), 0.0)


# -- certified versions ------------------------------------------------------------------------


def _exact_pair(n: int, theta: Fraction) -> tuple[dict[int, Fraction], dict[int, Fraction]]:
    """``A = Bernoulli(1/2 - theta) + Binomial(n', q)``, ``B = Binomial(n' + 1, q)`` exactly."""
    from math import comb

    npr, q = n // 2, Fraction(1, 2) + theta
    binom = {j: comb(npr, j) * q**j * (1 - q) ** (npr - j) for j in range(npr + 1)}
    a: dict[int, Fraction] = {}
    for j, w in binom.items():
        a[j] = a.get(j, Fraction(0)) + w * q  # the changed user's Bernoulli(1 - q) gives 0
        a[j + 1] = a.get(j + 1, Fraction(0)) + w * (1 - q)
    b = {j: comb(npr + 1, j) * q**j * (1 - q) ** (npr + 1 - j) for j in range(npr + 2)}
    return a, b


@pytest.mark.parametrize("n", [1, 5, 20])
def test_certified_log_pi_bounds_the_exact_renyi_moment(n: int) -> None:
    from privhist.federated.cpbm_accounting import certified_log_pi

    theta = Fraction(0.2)  # the float 0.2 exactly, as the module reads it
    a, b = _exact_pair(n, theta)

    def mp(x: Fraction) -> mpmath.mpf:
        return mpmath.mpf(x.numerator) / x.denominator

    with mpmath.workdps(60):
        for lam in (1.5, 2.0, 8.0):
            pi1 = mpmath.fsum(mp(b[k]) * (mp(a[k]) / mp(b[k])) ** lam for k in b)
            pi2 = mpmath.fsum(mp(b[k]) * (mp(b[k]) / mp(a[k])) ** (lam - 1) for k in b)
            exact = mpmath.log(max(pi1, pi2)) / (lam - 1)
            bound = certified_log_pi(n, 0.2, lam)
            assert mp(bound) >= exact
            assert mp(bound) <= exact + mpmath.mpf(10) ** -30


def test_worst_case_account_upper_bounds_the_exact_composition() -> None:
    from itertools import product

    from privhist.federated.cpbm_accounting import worst_case_account

    theta, k = Fraction(0.2), 3
    a, b = _exact_pair(5, theta)
    acc = worst_case_account(5, 0.2).self_compose(k)
    pa = {o: math.prod(a[x] for x in o) for o in product(a, repeat=k)}
    pb = {o: math.prod(b[x] for x in o) for o in product(b, repeat=k)}
    for eps in (0.0, 0.5, 1.0, 2.0):
        with mpmath.workdps(60):
            x = mpmath.iv.exp(mpmath.iv.mpf(Fraction(eps).numerator) / Fraction(eps).denominator)
            r = Fraction(*mpmath.libmp.to_rational(x._mpi_[1]))  # r >= e^eps
        exact = max(
            sum((max(Fraction(0), pa[o] - r * pb[o]) for o in pa), Fraction(0)),
            sum((max(Fraction(0), pb[o] - r * pa[o]) for o in pa), Fraction(0)),
        )
        cert = acc.delta_fraction(eps)
        assert cert >= exact
        assert cert <= exact + Fraction(1, 50)  # and not vacuous


def test_certified_guarantee_of_ffe_runs() -> None:
    from privhist.federated.ffe import certified_guarantee

    g = certified_guarantee([30, 31], 0.25, 2, 4, 1, 1, 1e-4)
    assert g.rdp_epsilon >= g.float_epsilon * (1 - 1e-9)
    assert g.rdp_epsilon <= g.float_epsilon * (1 + 1e-9)
    assert g.pld_epsilon is not None and g.pld_epsilon < g.rdp_epsilon  # PLD is tighter here
    assert g.epsilon == g.pld_epsilon
    skipped = certified_guarantee([30], 0.25, 200, 4, 1, 1, 1e-4, pld_max_compositions=100)
    assert skipped.pld_epsilon is None and "801 compositions" in skipped.pld_note
    assert skipped.epsilon == skipped.rdp_epsilon
