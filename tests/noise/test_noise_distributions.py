"""The frozen distribution objects used for analysis and by the sampler tests."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from privhist.core.errors import ValidationError
from privhist.noise import Binomial, DiscreteGaussian, DiscreteLaplace, Geometric


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(10, 3), Fraction(1000)], ids=str)
def test_discrete_laplace_closed_forms(scale: Fraction) -> None:
    d = DiscreteLaplace(scale)
    a = math.exp(-1 / float(scale))
    ks = np.arange(-int(60 * scale), int(60 * scale) + 1)
    pmf = d.pmf(ks)
    assert pmf.sum() == pytest.approx(1, abs=1e-12)
    assert d.pmf(3) == pytest.approx((1 - a) / (1 + a) * a**3, rel=1e-12)
    assert d.sf(4) == pytest.approx(a**4 / (1 + a), rel=1e-12)
    for k in (-7, -1, 0, 2, 9):
        assert d.cdf(k) == pytest.approx(pmf[ks <= k].sum(), abs=1e-12)
        assert d.sf(k) == pytest.approx(pmf[ks >= k].sum(), abs=1e-12)
    assert d.var() == pytest.approx(float((pmf * ks.astype(float) ** 2).sum()), rel=1e-9)


@pytest.mark.parametrize("dist", [DiscreteLaplace(10), DiscreteGaussian(30), DiscreteGaussian(1)])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.99, 0.999999])
def test_interval_is_the_smallest_with_coverage(dist: object, confidence: float) -> None:
    lo, hi = dist.interval(confidence)  # type: ignore[attr-defined]
    assert lo == -hi and hi >= 0
    cover = 1 - 2 * dist.sf(hi + 1)  # type: ignore[attr-defined]
    assert cover >= confidence
    if hi > 0:
        assert 1 - 2 * dist.sf(hi) < confidence  # type: ignore[attr-defined]


@pytest.mark.parametrize("dist", [DiscreteLaplace(Fraction(7, 2)), DiscreteGaussian(20)])
def test_ppf_inverts_cdf(dist: object) -> None:
    for q in (1e-6, 0.1, 0.5, 0.75, 0.999):
        k = dist.ppf(q)  # type: ignore[attr-defined]
        assert dist.cdf(k) >= q > dist.cdf(k - 1)  # type: ignore[attr-defined]


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(1), Fraction(10, 3), Fraction(2000)])
def test_gaussian_normaliser_two_ways(sigma2: Fraction) -> None:
    d = DiscreteGaussian(sigma2)
    direct, dual = d.normaliser_direct(), d.normaliser_dual()
    assert abs(direct - dual) < mpmath.mpf(2) ** -120 * direct


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(10), Fraction(10**8)])
def test_gaussian_pmf_cdf_var(sigma2: Fraction) -> None:
    d = DiscreteGaussian(sigma2)
    bound = int(12 * math.sqrt(sigma2)) + 3
    ks = np.arange(-bound, bound + 1)
    pmf = d.pmf(ks)
    assert pmf.sum() == pytest.approx(1, abs=1e-11)
    assert d.pmf(1) == pytest.approx(float(pmf[ks == 1][0]), rel=1e-12)
    for k in (-2, 0, 1, 5):
        assert d.cdf(k) == pytest.approx(pmf[ks <= k].sum(), abs=1e-11)
    assert d.var() == pytest.approx(float((pmf * ks.astype(float) ** 2).sum()), rel=1e-9)
    assert d.var() <= float(sigma2)  # CKS: the discrete Gaussian's variance is below sigma2


@pytest.mark.parametrize(
    ("n", "p"), [(10, Fraction(1, 3)), (1000, Fraction(3, 8)), (10**6, Fraction(1, 10))]
)
def test_binomial_matches_scipy(n: int, p: Fraction) -> None:
    d = Binomial(n, p)
    ref = stats.binom(n, float(p))
    mean = n * float(p)
    for k in {0, int(mean) - 1, int(mean), int(mean) + 3, n}:
        assert d.pmf(k) == pytest.approx(ref.pmf(k), rel=1e-9, abs=1e-300)
        assert d.cdf(k) == pytest.approx(ref.cdf(k), rel=1e-9, abs=1e-300)
        assert d.sf(k) == pytest.approx(ref.sf(k - 1), rel=1e-9, abs=1e-300)


def test_geometric_closed_forms() -> None:
    g = Geometric(Fraction(1, 3))
    a = math.exp(-1 / 3)
    assert g.pmf(0) == pytest.approx(1 - a)
    assert g.sf(5) == pytest.approx(a**5)
    assert g.cdf(4) == pytest.approx(1 - a**5)
    assert g.pmf(np.array([-1, 2]))[0] == 0
    assert g.pmf(np.array([-1, 2]))[1] == pytest.approx((1 - a) * a**2)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DiscreteLaplace(0),
        lambda: DiscreteGaussian(-1),
        lambda: Geometric(math.nan),
        lambda: Binomial(-1, Fraction(1, 2)),
        lambda: Binomial(3, Fraction(3, 2)),
    ],
)
def test_invalid_parameters_raise(make: object) -> None:
    with pytest.raises(ValidationError):
        make()  # type: ignore[operator]


def test_invalid_levels_raise() -> None:
    with pytest.raises(ValidationError) as err:
        DiscreteLaplace(1).interval(1.0)
    assert err.value.parameter == "confidence"
    with pytest.raises(ValidationError):
        DiscreteGaussian(1).ppf(0)
