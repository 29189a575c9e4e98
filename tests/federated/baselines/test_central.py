"""CentralGeometric: exact DP checks (both directions), the noise law, unbiasedness, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist.accounting.profile import check_dp, product_distribution
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import SeededRandom
from privhist.federated.baselines import CentralGeometric

PREC = 200


def laplace_pmf(scale: Fraction, centre: int, radius: int) -> tuple[dict[int, object], object]:
    """Discrete Laplace pmf (closed form) around ``centre``, and the mass beyond ``radius``."""
    with mpmath.workprec(PREC):
        a = mpmath.exp(-mpmath.mpf(scale.denominator) / scale.numerator)
        c = (1 - a) / (1 + a)
        pmf = {centre + k: c * a ** abs(k) for k in range(-radius, radius + 1)}
        tail = 2 * a ** (radius + 1) / (1 + a)
    return pmf, tail


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0])
def test_add_remove_exact_profile(epsilon: float) -> None:
    m = CentralGeometric(epsilon, 1e-8, 8)
    s = m.noise_scale
    assert Fraction(1) / s <= Fraction(epsilon)  # rounded towards more noise
    radius = math.ceil(float(s) * 100)  # tail about e**-100
    p, tp = laplace_pmf(s, 5, radius)
    q, tq = laplace_pmf(s, 6, radius)
    eps = Fraction(1) / s
    ok = check_dp(p, q, eps, 0, slack=1e-40, tail_p=tp, tail_q=tq)
    assert ok.holds, str(ok)
    # power: the same pair is not DP at a slightly smaller epsilon, even with some delta
    assert not check_dp(p, q, eps * Fraction(95, 100), 1e-3, tail_p=tp, tail_q=tq).holds


def test_replace_exact_profile_two_buckets() -> None:
    m = CentralGeometric(4.0, 0.0, 2, neighbouring=Neighbouring.replace())
    s = m.noise_scale
    assert s == Fraction(1, 2)
    radius = 30
    a0, ta = laplace_pmf(s, 3, radius)
    a1, _ = laplace_pmf(s, 2, radius)  # the client moved out of bucket 0 ...
    b0, tb = laplace_pmf(s, 7, radius)
    b1, _ = laplace_pmf(s, 8, radius)  # ... into bucket 1
    p = product_distribution(a0, b0)
    q = product_distribution(a1, b1)
    tail = float(ta + tb)
    assert tail < 1e-24
    ok = check_dp(p, q, Fraction(4), 0, slack=1e-20, tail_p=tail, tail_q=tail)
    assert ok.holds, str(ok)
    assert not check_dp(p, q, Fraction(39, 10), 1e-4, tail_p=tail, tail_q=tail).holds


def test_amplified_guarantee_exact() -> None:
    """Poisson sampling at rate q, then noise calibrated with amplification: the differing
    client is sampled with probability q, so its presence mixes the two noisy outputs."""
    q_rate, eps = 0.1, 0.5
    m = CentralGeometric(eps, 1e-8, 4, sampling_rate=q_rate, amplify=True)
    target = math.log1p(math.expm1(eps) / q_rate)
    assert m.noise_epsilon <= target and m.noise_epsilon == pytest.approx(target, rel=1e-5)
    assert m.guarantee().epsilon <= eps and m.guarantee().epsilon == pytest.approx(eps, rel=1e-5)
    s = m.noise_scale
    radius = math.ceil(float(s) * 100)
    absent, tail = laplace_pmf(s, 10, radius)
    present, _ = laplace_pmf(s, 11, radius)
    with mpmath.workprec(PREC):
        qf = mpmath.mpf(q_rate)
        zero = mpmath.mpf(0)
        mixed = {
            o: (1 - qf) * absent.get(o, zero) + qf * present.get(o, zero)
            for o in set(absent) | set(present)
        }
    ok = check_dp(mixed, absent, eps, 0, slack=1e-40, tail_p=tail, tail_q=tail)
    assert ok.holds, str(ok)
    # without amplification credit the sample-level epsilon is much larger
    assert CentralGeometric(eps, 1e-8, 4, sampling_rate=q_rate).population_guarantee().epsilon < eps


def test_noise_law_fits_discrete_laplace() -> None:
    m = CentralGeometric(0.5, 1e-8, 60_000)
    z = m.noisy_counts(np.zeros(60_000, dtype=np.int64), SeededRandom(3))
    s = float(m.noise_scale)
    ks = np.arange(-60, 61)

    def cells(scale: float) -> np.ndarray:
        a = math.exp(-1 / scale)
        pmf = (1 - a) / (1 + a) * a ** np.abs(ks)
        pmf[0] += a**61 / (1 + a)
        pmf[-1] += a**61 / (1 + a)
        return pmf

    observed = np.bincount(np.clip(z, -60, 60) + 60, minlength=ks.size)
    assert_fits(chi2_cells(observed, cells(s), max_cells=None))
    assert_rejects(chi2_cells(observed, cells(s * 0.9), max_cells=None))
    assert_rejects(chi2_cells(observed, cells(s * 1.1), max_cells=None))


def test_estimate_unbiased_and_counts_right() -> None:
    m = CentralGeometric(1.0, 1e-8, 5)
    items = np.array([0, 0, 1, 4, 4, 4, 4], dtype=np.int64)
    true = np.array([2, 1, 0, 0, 4])
    reps = 4000
    rng = SeededRandom(11)
    est = np.array([m.estimate(items, rng) for _ in range(reps)])
    assert est.dtype == np.float64 and est.shape == (reps, 5)
    # the per-bucket mean error over reps is a mean of independent noise with known variance
    z = (est.mean(axis=0) - true) / (m.noise_std() / math.sqrt(reps))
    pvalue = 2 * stats.norm.sf(np.abs(z).max())
    assert pvalue * 5 >= 1e-6  # Bonferroni over 5 buckets
    # power: a biased estimator (off by one client in bucket 0) would be rejected
    z_wrong = (est.mean(axis=0)[0] - (true[0] + 1)) / (m.noise_std() / math.sqrt(reps))
    assert 2 * stats.norm.sf(abs(z_wrong)) < 1e-6


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="parameter 'epsilon' of CentralGeometric"):
        CentralGeometric(0, 1e-8, 4)
    with pytest.raises(ValidationError, match="'delta'"):
        CentralGeometric(1.0, 1.0, 4)
    with pytest.raises(ValidationError, match="'domain_size'"):
        CentralGeometric(1.0, 1e-8, 0)
    with pytest.raises(ValidationError, match="'sampling_rate'"):
        CentralGeometric(1.0, 1e-8, 4, sampling_rate=0)
    with pytest.raises(ValidationError, match="'amplify'"):
        CentralGeometric(1.0, 1e-8, 4, neighbouring=Neighbouring.replace(), amplify=True)
    m = CentralGeometric(1.0, 1e-8, 4)
    with pytest.raises(InputDataError, match=r"got 4 at index 1"):
        m.estimate(np.array([0, 4]), SeededRandom(0))
    with pytest.raises(InputDataError, match="dtype float64"):
        m.estimate(np.array([0.5]), SeededRandom(0))
    with pytest.raises(InputDataError, match="one-dimensional"):
        m.estimate(np.zeros((2, 2), dtype=np.int64), SeededRandom(0))
    with pytest.raises(ValidationError, match="'counts'"):
        m.noisy_counts(np.array([1, 2, 3]), SeededRandom(0))
