"""Independent high-precision evaluations of the privacy formulas the releases are calibrated by.

Nothing here calls privhist: each function is the paper's formula evaluated with mpmath, so a
test can compare what a release draws and what its guarantee states with a value computed apart
from the code under test.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import lru_cache

import mpmath

DPS = 50


def mp(x: Fraction | float | int) -> mpmath.mpf:
    """``x`` as an mpmath number at :data:`DPS` digits (comparisons between such numbers are
    exact, whatever the working precision at the comparison)."""
    f = Fraction(x)
    with mpmath.workdps(DPS):
        return mpmath.mpf(f.numerator) / f.denominator


# -- discrete Laplace ------------------------------------------------------------------------


def dlap_sf(scale: Fraction, m: int) -> mpmath.mpf:
    """``Pr[Z >= m]`` for the discrete Laplace ``Pr[Z = z] = (1 - a)/(1 + a) a**|z|``,
    ``a = exp(-1/scale)`` (Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke
    2020, Definition 28): ``a**m / (1 + a)`` for ``m >= 1``, ``1 - a**(1 - m) / (1 + a)`` below."""
    with mpmath.workdps(DPS):
        a = mpmath.exp(-1 / mp(scale))
        if m >= 1:
            return a**m / (1 + a)
        return 1 - a ** (1 - m) / (1 + a)


# -- discrete Gaussian -----------------------------------------------------------------------


def _dg_normaliser(s2: mpmath.mpf) -> mpmath.mpf:
    """``sum_z exp(-z**2 / (2 s2))`` by Poisson summation: ``sqrt(2 pi s2) (1 + 2 sum_k
    exp(-2 pi**2 s2 k**2))`` (CKS 2020, proof of Fact 18)."""
    corr = mpmath.nsum(lambda k: mpmath.exp(-2 * mpmath.pi**2 * s2 * k**2), [1, mpmath.inf])
    return mpmath.sqrt(2 * mpmath.pi * s2) * (1 + 2 * corr)


def _gauss_sum_from(m: int, s2: mpmath.mpf, sigma: float) -> mpmath.mpf:
    """``sum_{z >= m} exp(-z**2 / (2 s2))``: summed directly for small sigma, else by the
    Euler-Maclaurin formula (the odd derivatives of the Gaussian are Hermite polynomials times
    it; six correction terms leave an error of order ``sigma**-13``)."""

    def f(z: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp(-(z * z) / (2 * s2))

    if sigma < 60 or (m > 0 and m > 40 * sigma):
        stop = m + int(40 * sigma) + 60
        return mpmath.fsum(f(mpmath.mpf(z)) for z in range(m, stop))
    x = mpmath.mpf(m)
    c = 1 / mpmath.sqrt(2 * s2)
    integral = mpmath.sqrt(mpmath.pi * s2 / 2) * mpmath.erfc(x * c)
    total = integral + f(x) / 2
    for k in range(1, 7):
        n = 2 * k - 1
        deriv = (-c) ** n * mpmath.hermite(n, x * c) * f(x)
        total -= mpmath.bernoulli(2 * k) / mpmath.factorial(2 * k) * deriv
    return total


@lru_cache(maxsize=100_000)
def dg_sf(sigma2: Fraction, m: int) -> mpmath.mpf:
    """``Pr[Z >= m]`` for the discrete Gaussian ``N_Z(0, sigma2)`` (CKS 2020, Definition 1)."""
    with mpmath.workdps(DPS):
        s2 = mp(sigma2)
        sigma = math.sqrt(float(sigma2))
        norm = _dg_normaliser(s2)
        if m <= 0:
            # Pr[Z >= m] = 1 - Pr[Z <= m - 1] = 1 - Pr[Z >= 1 - m]
            return 1 - _gauss_sum_from(1 - m, s2, sigma) / norm
        return _gauss_sum_from(m, s2, sigma) / norm


# -- zCDP and the Gaussian profile -----------------------------------------------------------


def zcdp_delta(rho: Fraction, epsilon: float | mpmath.mpf) -> mpmath.mpf:
    """``inf_{alpha > 1} exp((alpha - 1)(alpha rho - epsilon)) (1 - 1/alpha)**(alpha - 1) /
    alpha``: the (epsilon, delta) of a rho-zCDP mechanism (Canonne, Kamath & Steinke 2020,
    Corollary 13), minimised over alpha by golden-section search on the convex log."""
    with mpmath.workdps(DPS):
        r = mp(rho)
        e = mpmath.mpf(epsilon)

        def log_delta(a: mpmath.mpf) -> mpmath.mpf:
            return (a - 1) * (a * r - e) + (a - 1) * mpmath.log(1 - 1 / a) - mpmath.log(a)

        lo, hi = mpmath.mpf(1) + mpmath.mpf(10) ** -12, max(mpmath.mpf(2), 4 * (e / r + 1))
        g = (mpmath.sqrt(5) - 1) / 2
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        fa, fb = log_delta(a), log_delta(b)
        for _ in range(400):
            if fa < fb:
                hi, b, fb = b, a, fa
                a = hi - g * (hi - lo)
                fa = log_delta(a)
            else:
                lo, a, fa = a, b, fb
                b = lo + g * (hi - lo)
                fb = log_delta(b)
        return min(mpmath.mpf(1), mpmath.exp(min(fa, fb)))


def with_failure(delta_at: object, epsilon: float, p_f: mpmath.mpf) -> mpmath.mpf:
    """``delta_at(epsilon + ln(1 - p_F)) + p_F`` (the coupling bound for keys only the added
    user holds; ``privhist.mechanisms.user_level._gauss``, item 3, and Gopi et al. 2020,
    Theorem 5.1)."""
    with mpmath.workdps(DPS):
        e = mpmath.mpf(epsilon) + mpmath.log(1 - p_f)
        return delta_at(e) + p_f  # type: ignore[operator]


def gaussian_profile(epsilon: mpmath.mpf, mu2: Fraction) -> mpmath.mpf:
    """``Phi(-e/mu + mu/2) - e**e Phi(-e/mu - mu/2)``: the privacy profile of the Gaussian
    mechanism with sensitivity / sigma = mu (Balle & Wang 2018, Theorem 8; Dong, Roth & Su
    2022, Corollary 2.13)."""
    with mpmath.workdps(DPS):
        mu = mpmath.sqrt(mp(mu2))
        e = mpmath.mpf(epsilon)
        return mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2)


# -- optimal partition selection -------------------------------------------------------------


def optimal_pi(epsilon: Fraction | float, delta: Fraction | float, upto: int) -> list[mpmath.mpf]:
    """``pi_0 = 0``, ``pi_n = min(e**eps pi_(n-1) + delta, 1 + e**-eps (pi_(n-1) + delta - 1),
    1)`` for ``n <= upto`` (Desfontaines, Voss, Gipson & Mandayam 2022, Theorem 1; Cohen, Geri,
    Sarlos & Stemmer, Algorithm 3 with q = 1), in 60-digit arithmetic."""
    with mpmath.workdps(60):
        ee = mpmath.exp(mp(epsilon))
        d = mp(delta)
        out = [mpmath.mpf(0)]
        for _ in range(upto):
            p = out[-1]
            out.append(min(ee * p + d, 1 + (p + d - 1) / ee, mpmath.mpf(1)))
        return out


def dp_constraints_hold(
    pis: list[Fraction], epsilon: Fraction | float, delta: Fraction | float
) -> bool:
    """Whether reporting probabilities ``pis`` (by unit count, ``pis[0] = 0``) meet both
    (epsilon, delta) constraints between every neighbouring pair of counts."""
    with mpmath.workdps(60):
        ee = mpmath.exp(mp(epsilon))
        d = mp(delta)
        for a, b in itertools.pairwise(pis):
            pa, pb = mp(a), mp(b)
            if pb > ee * pa + d or (1 - pa) > ee * (1 - pb) + d:
                return False
        return True


# -- sample and threshold --------------------------------------------------------------------


def binomial_pmf(n: int, p: Fraction) -> list[Fraction]:
    a, d = p.numerator, p.denominator
    den = d**n
    return [Fraction(math.comb(n, k) * a**k * (d - a) ** (n - k), den) for k in range(n + 1)]


def sample_threshold_delta(p: Fraction, tau: int, epsilon: Fraction, max_units: int) -> mpmath.mpf:
    """The exact per-key delta of sampling units at rate ``p`` and releasing the sampled count
    when it is at least ``tau`` (Bharadwaj & Cormode 2022, Section 3): the largest hockey-stick
    divergence, both directions, between ``u`` and ``u + 1`` units, ``u < max_units``, with
    "not released" an output (binomial laws by the recurrence ``b_(u+1)(k) = (1 - p) b_u(k) +
    p b_u(k - 1)`` in 40-digit arithmetic)."""
    with mpmath.workdps(40):
        ee = mpmath.exp(mp(epsilon))
        pm = mp(p)
        worst = mpmath.mpf(0)
        prev = [mpmath.mpf(1)]
        for _ in range(max_units):
            nxt = [mpmath.mpf(0)] * (len(prev) + 1)
            for k, v in enumerate(prev):
                nxt[k] += v * (1 - pm)
                nxt[k + 1] += v * pm
            for a, b in ((prev, nxt), (nxt, prev)):
                na = mpmath.fsum(a[:tau])
                nb = mpmath.fsum(b[:tau])
                div = max(mpmath.mpf(0), na - ee * nb)
                for k in range(tau, max(len(a), len(b))):
                    pa = a[k] if k < len(a) else mpmath.mpf(0)
                    pb = b[k] if k < len(b) else mpmath.mpf(0)
                    div += max(mpmath.mpf(0), pa - ee * pb)
                worst = max(worst, div)
            prev = nxt
        return worst
