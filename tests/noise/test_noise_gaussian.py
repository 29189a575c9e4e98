"""Statistical tests of the discrete Gaussian sampler (CKS Algorithm 3)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_integer

from privhist.core.errors import ValidationError
from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import DiscreteGaussian, discrete_gaussian
from privhist.noise.gaussian import _plan

N = 200_000

SIGMA2 = [
    Fraction(1),
    Fraction(10),
    Fraction(1000),
    Fraction(10, 3),
    Fraction(1, 4),
    Fraction(10**6),  # table path, proposal beyond the two-sided Laplace table
    Fraction(10**8),  # int64 acceptance arithmetic
    Fraction(25 * 10**6 * 2**36 + 1, 2**36),  # Python-int acceptance arithmetic
]


@pytest.mark.parametrize("sigma2", SIGMA2, ids=str)
def test_discrete_gaussian_fits(sigma2: Fraction) -> None:
    z = discrete_gaussian(sigma2, SeededRandom(sigma2.numerator % 1019), N)
    assert z.dtype == np.int64 and z.shape == (N,)
    bound = math.ceil(8 * math.sqrt(sigma2)) + 2
    assert_fits(chi2_integer(z, DiscreteGaussian(sigma2), -bound, bound))
    wrong = [DiscreteGaussian(sigma2 * Fraction(f)) for f in ("0.7", "1.3")]
    assert_rejects([chi2_integer(z, w, -bound, bound) for w in wrong])


def test_paths_are_the_intended_ones() -> None:
    assert _plan(Fraction(10**6)).table is not None
    assert _plan(Fraction(10**8)).table is None


def test_tiny_variance_is_almost_always_zero() -> None:
    z = discrete_gaussian(Fraction(1, 100), SeededRandom(4), N)  # P[Z != 0] ~ 2 e**-50
    assert not z.any()


def test_large_numerator_is_refused_with_advice() -> None:
    with pytest.raises(ValidationError) as err:
        discrete_gaussian(Fraction(10**8 * 2**40 + 1, 2**40), SeededRandom(0), 3)
    assert err.value.parameter == "sigma2" and "rational_at_least" in str(err.value)


def test_discrete_gaussian_secure_random_fits() -> None:
    for sigma2 in (Fraction(1), Fraction(10**8)):
        z = discrete_gaussian(sigma2, SecureRandom(), N)
        bound = math.ceil(8 * math.sqrt(sigma2))
        assert_fits(chi2_integer(z, DiscreteGaussian(sigma2), -bound, bound))
