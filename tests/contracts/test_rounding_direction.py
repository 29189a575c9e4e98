"""Every certified bound is rounded the safe way, checked against a high-precision value.

A bound that must stay above a true delta (or below ``e**epsilon``) and is rounded the wrong way
by one unit in the last place is wrong, and a doctest that checks it loosely cannot tell. Each
test here computes the true value in mpmath, at several hundred bits, from the formula the bound
stands for (the paper and equation named in each docstring), and checks both the direction
(upper bounds at or above it, lower bounds at or below) and that the bound is tight (within the
documented resolution), so rounding the other way, or dropping a margin, fails.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from tests.contracts import formulas as F

MP = mpmath.MPContext()
MP.prec = 512


def q(x: Fraction | float | int) -> object:
    f = Fraction(x)
    return MP.mpf(f.numerator) / f.denominator


EPSILONS = [1e-6, 0.01, 0.1, 0.5, 1.0, math.log(2), 2.0, 4.0, 10.0, 50.0]


# -- exact rationals and floats --------------------------------------------------------------


@pytest.mark.parametrize("x", [1 / 3, 0.1, math.pi, 1e-9, 123456.789, Fraction(22, 7 * 3**20)])
@pytest.mark.parametrize("den", [1, 10, 2**20])
def test_rational_rounding_brackets_and_is_the_best(x: float | Fraction, den: int) -> None:
    from privhist.noise import rational_at_least, rational_at_most

    v = Fraction(x)
    up, down = rational_at_least(x, den), rational_at_most(x, den)
    assert down <= v <= up and up.denominator <= den and down.denominator <= den
    # nothing with a denominator <= den lies strictly between (Farey neighbours), so the bounds
    # are the best ones: checked on every denominator for the small cases
    if den <= 10:
        for d in range(1, den + 1):
            n_up = -((-v.numerator * d) // v.denominator)  # ceil(v d)
            n_down = (v.numerator * d) // v.denominator
            assert Fraction(n_up, d) >= up and Fraction(n_down, d) <= down
    else:
        assert up - v <= Fraction(1, den) and v - down <= Fraction(1, den)


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(10**20 + 1, 10**21), Fraction(2, 3) ** 50])
def test_float_up_and_down(x: Fraction) -> None:
    from privhist.core.validation import float_down, float_up

    up, down = float_up(x), float_down(x)
    assert Fraction(down) <= x <= Fraction(up)
    assert Fraction(math.nextafter(up, -math.inf)) < x < Fraction(math.nextafter(down, math.inf))


# -- exponentials ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [
        Fraction(0),
        Fraction(1),
        Fraction(-1),
        Fraction(1, 10**9),
        Fraction(-50),
        Fraction(7, 3),
        Fraction(-1, 3),
    ],
)
@pytest.mark.parametrize("prec", [64, 128, 300])
def test_exp_bounds_enclose_and_are_tight(x: Fraction, prec: int) -> None:
    from privhist.noise import exp_rational_bounds
    from privhist.noise._exact import exp_bounds

    true = MP.exp(q(x))
    lo, hi = exp_rational_bounds(x, prec)
    assert q(lo) <= true <= q(hi)
    assert q(hi - lo) <= MP.mpf(2) ** (4 - prec) * max(1, true)
    ilo, ihi = exp_bounds(x, prec)
    scaled = true * MP.mpf(2) ** prec
    assert ilo <= scaled <= ihi and ihi - ilo <= 16 + int(scaled) // 2**60


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("bits", [62, 129, 400])
def test_pws_ratio_bound_stays_below_e_to_the_epsilon(epsilon: float, bits: int) -> None:
    """``ratio_bound`` is the rational ``r <= e**eps`` the private-weighted-sampling rows are
    certified with (Algorithm 4 of the weighted sampling paper, ``pi_i <= r pi_(i-1) + delta``):
    rounded up, the certificate would accept rows that are not DP."""
    from privhist.mechanisms.sampling.pws.fine_rows import ratio_bound

    r = ratio_bound(epsilon, bits)
    true = MP.exp(q(epsilon))
    assert q(r) <= true
    assert true - q(r) <= MP.mpf(2) ** -(bits + 64) * true * 4


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.3, 0.45, 0.5, 0.9, 1.0])
@pytest.mark.parametrize(("k", "c"), [(1, 1), (2, 2), (5, 1)])
def test_finite_ratios_spend_at_most_epsilon(epsilon: float, k: int, c: int) -> None:
    """Balcer & Vadhan's per-record ratio ``1 + s 2**-K`` spends ``l1 ln(ratio)`` (Theorem 5.1):
    at most epsilon, and the next grid step would exceed it (the finest ratio)."""
    from privhist.core.neighbouring import Neighbouring
    from privhist.mechanisms.finite.histograms import finest_ratio, histogram_k, largest_ratio_k

    nb = Neighbouring.user(k, c) if (k, c) != (1, 1) else Neighbouring.add_remove()
    l1 = nb.l1_sensitivity
    e = q(epsilon)
    k_max = histogram_k(epsilon, nb)
    kk = largest_ratio_k(epsilon, nb, k_max)
    assert l1 * MP.log(1 + MP.mpf(2) ** -kk) <= e
    if kk > 0:
        assert l1 * MP.log(1 + MP.mpf(2) ** -(kk - 1)) > e
    fine, step = finest_ratio(epsilon, nb, kk)
    ratio = 1 + step * MP.mpf(2) ** -fine
    assert l1 * MP.log(ratio) <= e
    # one more step on the grid 2**-(K + 4) would spend more than epsilon
    grid = kk + 4
    s_grid = step << (grid - fine)
    assert l1 * MP.log(1 + (s_grid + 1) * MP.mpf(2) ** -grid) > e


@pytest.mark.parametrize("epsilon", [Fraction(1, 100), Fraction(1), Fraction(3), Fraction(1, 3)])
def test_sampling_rate_bounds(epsilon: Fraction) -> None:
    """Lemma A of the sample-and-threshold profile: removing a unit costs ``ln(1/(1-p))``, so
    the rate must stay at most ``1 - e**-eps``; the paper's ``alpha (1 - e**-eps)`` rounded
    down."""
    from privhist.mechanisms.sampling.profile import alpha_rate, exp_lower, rate_bound

    e = MP.exp(q(epsilon))
    assert q(exp_lower(epsilon)) <= e and e - q(exp_lower(epsilon)) < MP.mpf(2) ** -180
    r = rate_bound(epsilon)
    assert q(r) <= 1 - 1 / e and (1 - 1 / e) - q(r) < MP.mpf(2) ** -180
    a = alpha_rate(Fraction(1, 6), epsilon)
    assert q(a) <= (1 - 1 / e) / 6 and (1 - 1 / e) / 6 - q(a) <= MP.mpf(2) ** -39


def test_cpbm_theta_is_rounded_down() -> None:
    from privhist.federated.cpbm import quantised_theta

    for theta in (0.2, 0.25, 1 / 3 / 2, 2.0**-32 * 1.5, 0.1234567891234):
        tq = quantised_theta(theta)
        assert tq <= Fraction(theta) < tq + Fraction(1, 2**32)


# -- zCDP, the Gaussian profile and the tails -------------------------------------------------


@pytest.mark.parametrize(
    "rho", [Fraction(1, 10**6), Fraction(1, 1000), Fraction(1, 10), Fraction(2)]
)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_zcdp_delta_is_an_upper_bound_at_the_optimum(rho: Fraction, epsilon: float) -> None:
    """CKS 2020 Corollary 13, minimised over alpha: the accountant's value is never below the
    infimum (it evaluates one alpha and rounds up) and within 1e-6 of it."""
    from privhist.accounting.zcdp import zcdp_delta

    got = zcdp_delta(rho, epsilon)
    best = F.zcdp_delta(rho, epsilon)
    assert got >= best
    assert got <= best * (1 + 1e-6) + 1e-300


@pytest.mark.parametrize("rho", [Fraction(1, 1000), Fraction(1, 10)])
@pytest.mark.parametrize("p_f", [1e-12, 1e-8, 1e-3])
def test_certified_and_threshold_epsilon_round_up(rho: Fraction, p_f: float) -> None:
    from privhist.accounting.zcdp import certified_delta, threshold_epsilon

    eps = 1.0
    got = certified_delta(rho, eps, p_f)
    true = F.with_failure(lambda e: F.zcdp_delta(rho, e), eps, mpmath.mpf(p_f))
    assert got >= true and got <= true * (1 + 1e-6)
    delta = float(true) * 10
    e_min = threshold_epsilon(rho, p_f, delta)
    assert F.with_failure(lambda e: F.zcdp_delta(rho, e), e_min, mpmath.mpf(p_f)) <= delta
    # and not much more than needed: 1e-6 less epsilon breaks delta
    assert F.with_failure(
        lambda e: F.zcdp_delta(rho, e), e_min * (1 - 1e-6), mpmath.mpf(p_f)
    ) > delta * (1 - 1e-4)


@pytest.mark.parametrize("mu2", [Fraction(1, 100), Fraction(1), Fraction(9)])
@pytest.mark.parametrize("eta", [Fraction(0), Fraction(1, 1000)])
def test_gaussian_profile_upper(mu2: Fraction, eta: Fraction) -> None:
    """``delta_G(eps - eta; mu)`` (Balle & Wang 2018, Theorem 8), rounded up."""
    from privhist.mechanisms.user_level.cumulative import gaussian_profile_upper

    for eps in (0.1, 1.0, 3.0):
        got = gaussian_profile_upper(eps, mu2, eta)
        true = F.gaussian_profile(mpmath.mpf(eps) - F.mp(eta), mu2)
        assert got >= true and got <= true * (1 + 1e-9) + 1e-300


@pytest.mark.parametrize("variance", [Fraction(1), Fraction(10**6, 7), Fraction(5 * 10**9)])
def test_sum_tail_upper(variance: Fraction) -> None:
    """``Phi_bar((x - shift) / sqrt(V))`` of cumulative-sips' tail lemma, rounded up."""
    from privhist.mechanisms.user_level.cumulative import sum_tail_upper

    sd = math.sqrt(float(variance))
    for z in (-1.0, 0.0, 2.0, 6.0, 20.0):
        x = int(z * sd) + 17
        got = sum_tail_upper(x, 17, variance)
        with mpmath.workdps(60):
            true = mpmath.ncdf(-(x - 17) / mpmath.sqrt(F.mp(variance)))
        assert got >= true and got <= true * (1 + 1e-9) + 1e-300


def _documented_tail(sigma2: Fraction, m: int) -> mpmath.mpf:
    """The user-level module's tail bound as its notes state it (item 4): ``sum_(m <= j < M)
    f(j) + f(M) + int_M^inf f`` over the normaliser's lower bound ``sqrt(2 pi sigma2)``, with
    ``f(j) = exp(-j**2 / (2 sigma2))``, summed term by term up to ``M = m + ceil(4 sigma) + 2``
    when ``sigma <= 256`` (else ``M = m``)."""
    with mpmath.workdps(60):
        s2 = F.mp(sigma2)
        sigma = math.sqrt(float(sigma2))
        big_m = m + math.ceil(4 * sigma) + 2 if sigma <= 256 else m

        def f(j: int) -> mpmath.mpf:
            return mpmath.exp(-(mpmath.mpf(j) ** 2) / (2 * s2))

        total = mpmath.fsum(f(j) for j in range(m, big_m)) + f(big_m)
        total += mpmath.sqrt(s2 * mpmath.pi / 2) * mpmath.erfc(big_m / mpmath.sqrt(2 * s2))
        return total / mpmath.sqrt(2 * mpmath.pi * s2)


@pytest.mark.parametrize(
    "sigma2", [Fraction(1), Fraction(9, 4), Fraction(400), Fraction(10**6 + 7)]
)
def test_discrete_gaussian_tail_upper(sigma2: Fraction) -> None:
    """The rigorous tail of the user-level module (its notes, item 4) is at or above the exact
    discrete Gaussian tail, and equals its documented formula (rounded up by at most 1e-9)."""
    from privhist.mechanisms.user_level._gauss import release_bound, tail_upper

    sigma = math.sqrt(float(sigma2))
    for m in (1, 2, int(sigma) + 1, int(3 * sigma) + 1, int(6 * sigma) + 1):
        got = tail_upper(sigma2, m)
        true = F.dg_sf(sigma2, m)
        assert got >= true, (m, got, true)
        documented = min(mpmath.mpf(1), _documented_tail(sigma2, m))
        assert documented >= true and got >= documented
        assert got <= documented * (1 + 1e-9) + 1e-300
    weights = [int(3 * sigma) + 5, int(2 * sigma) + 3]
    t = int(6 * sigma) + 4
    got = release_bound(sigma2, t, weights)
    true = max(1 - (1 - F.dg_sf(sigma2, t - w)) ** i for i, w in enumerate(weights, 1))
    assert got >= true


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5])
def test_calibrated_rho_meets_its_delta_share(epsilon: float, delta: float) -> None:
    """``calibrate`` takes ``rho`` with ``delta_z(rho) <= (1 - share) delta`` at the epsilon
    that leaves room for the threshold (``eps + ln(1 - share delta)``), rounded down."""
    from privhist.mechanisms.user_level._gauss import calibrate, sigma2_for

    share = 0.5
    rho, p_f = calibrate(epsilon, delta, share)
    assert p_f <= share * delta
    e_z = mpmath.mpf(epsilon) + mpmath.log(1 - mpmath.mpf(share * delta))
    assert F.zcdp_delta(rho, e_z) <= (1 - share) * delta
    assert F.zcdp_delta(rho * Fraction(1001, 1000), e_z) > (1 - share) * delta * (1 - 1e-3)
    s2 = sigma2_for(rho, 5)
    assert Fraction(5) / (2 * s2) <= rho and s2 - Fraction(5) / (2 * rho) <= Fraction(1, 2**19)


# -- thresholds and certificates of the mechanisms --------------------------------------------


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(10, 3), Fraction(2000), Fraction(7, 3)])
@pytest.mark.parametrize("delta", [Fraction(1, 10**6), Fraction(1, 10**30)])
def test_stability_threshold_meets_delta_and_is_the_smallest(
    scale: Fraction, delta: Fraction
) -> None:
    from privhist.mechanisms.stability import stability_threshold

    for c in (1, 3):
        t = stability_threshold(scale, c, delta)
        assert F.dlap_sf(scale, t - c) <= F.mp(delta)
        if t - 1 > c:
            assert F.dlap_sf(scale, t - 1 - c) > F.mp(delta)


@pytest.mark.parametrize(
    ("p", "tau", "epsilon"),
    [
        (Fraction(1, 10), 10, Fraction(1)),
        (Fraction(1, 10), 9, Fraction(1)),
        (Fraction(1, 4), 6, Fraction(2)),
    ],
)
def test_sample_threshold_certificate_is_an_upper_bound(
    p: Fraction, tau: int, epsilon: Fraction
) -> None:
    """The certified per-key delta of sample-and-threshold (Bharadwaj & Cormode 2022,
    Section 3, the add direction) is at or above the exact hockey-stick divergence over unit
    counts, both directions, and close to it."""
    from privhist.mechanisms.sampling.profile import certified_delta

    cert = certified_delta(p, tau, epsilon)
    exact = F.sample_threshold_delta(p, tau, epsilon, cert.limit + 40)
    assert F.mp(cert.value) >= exact
    assert F.mp(cert.value) <= exact * (1 + 1e-6) + F.mp(cert.tail)
    assert cert.upper >= cert.value


@pytest.mark.parametrize("rdp", [Fraction(1, 100), Fraction(1, 2), Fraction(3)])
@pytest.mark.parametrize("order", [1.5, 2.0, 8.0, 64.0])
def test_certified_rdp_conversion_rounds_up(rdp: Fraction, order: float) -> None:
    """Equation (8) of the federated-frequency paper (CKS 2020 Proposition 12) at one order."""
    from privhist.accounting.renyi import certified_rdp_to_dp

    delta = 1e-6
    got = certified_rdp_to_dp(rdp, order, delta)
    lam = q(Fraction(order))
    true = q(rdp) + (MP.log(1 / q(delta)) - MP.log(lam)) / (lam - 1) + MP.log(1 - 1 / lam)
    true = max(true, MP.mpf(0))
    assert q(got) >= true and q(got) - true <= MP.mpf(2) ** -40


@pytest.mark.parametrize(("eps", "k"), [(0.1, 100), (0.5, 10), (1.0, 3)])
def test_advanced_and_optimal_composition_round_up(eps: float, k: int) -> None:
    """Dwork, Rothblum & Vadhan's advanced composition and Kairouz, Oh & Viswanath's optimal
    composition (Theorem 3.3), each evaluated here in 512-bit arithmetic."""
    from privhist.accounting.composition import advanced_composition, optimal_composition_delta
    from privhist.core.budget import Budget

    dp = 1e-6
    got = advanced_composition(Budget(eps, 1e-9), k, dp)
    e = q(eps)
    true = MP.sqrt(2 * k * MP.log(1 / q(dp))) * e + k * e * (MP.exp(e) - 1)
    assert q(got.epsilon) >= true and q(got.epsilon) - true <= true * MP.mpf(2) ** -50
    assert Fraction(got.delta) >= Fraction(k) * Fraction(1e-9) + Fraction(dp)
    for total in (0.0, eps * k / 3, eps * k * 0.9):
        got_d = optimal_composition_delta(Budget(eps, 0.0), k, total)
        a = MP.exp(e)
        s = MP.mpf(0)
        for ell in range(k + 1):
            term = MP.exp((k - ell) * e) - MP.exp(q(total)) * MP.exp(ell * e)
            if term > 0:
                s += MP.binomial(k, ell) * term
        true_d = s / (1 + a) ** k
        assert (
            q(got_d) >= true_d
            and q(got_d) - true_d <= max(true_d, MP.mpf(1e-300)) * MP.mpf(2) ** -45
        )


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(1.0, 1e-6), (0.1, 1e-9), (5.0, 1e-3), (3.0, 5e-20)]
)
def test_optimal_selection_grid_is_dp_and_below_the_optimum(epsilon: float, delta: float) -> None:
    """Every rounded-down reporting probability meets both DP constraints with the true
    ``e**eps`` (not the rational below it the recursion runs with) and stays below the real
    optimum (Desfontaines et al. 2022, Theorem 1)."""
    from privhist.mechanisms.optimal_selection import optimal_reporting_grid

    bits, nums = optimal_reporting_grid(Fraction(epsilon), Fraction(delta))
    pis = [Fraction(n, 1 << bits) for n in nums]
    assert F.dp_constraints_hold(pis, Fraction(epsilon), Fraction(delta))
    exact = F.optimal_pi(Fraction(epsilon), Fraction(delta), len(pis) - 1)
    for p, e in zip(pis, exact, strict=True):
        assert F.mp(p) <= e


def test_selector_events_round_rho_and_the_failure_up() -> None:
    """The weighted selectors' events carry their zCDP and threshold failure rounded up."""
    from privhist.mechanisms import registry

    for name, cls in registry.weighted_registry().items():
        sel = cls(1.0, 1e-6, max_keys=3, scale=64)
        ev = sel.event()
        assert Fraction(ev.rho) >= sel.zcdp_rho(), name
        assert Fraction(ev.failure) >= Fraction(sel.private_key_bound()), name
        assert Fraction(ev.rho) - sel.zcdp_rho() <= sel.zcdp_rho() * Fraction(1, 2**50)


def test_square_roots_of_aggregation_sensitivities_round_up() -> None:
    """``_sqrt_up(n)`` (a tree's L2 sensitivity over its levels, the stated L2 over ``k``
    groups) is never below ``sqrt(n)``, checked exactly (``r**2 >= n``) for every ``n`` below
    ``40,000``; the float ``sqrt`` rounded to the nearest rational of denominator at most
    ``2**20`` falls below the root for 14,282 and 17,778, among others."""
    from privhist.analytics.aggregate import _sqrt_up

    for n in range(1, 40_000):
        r = _sqrt_up(n)
        assert r * r >= n, n
        if math.isqrt(n) ** 2 == n:
            assert r == math.isqrt(n)  # exact for squares
        else:
            assert r * r - n <= n * Fraction(1, 2**30)  # and tight otherwise
