"""Statistical tests of the discrete Laplace sampler (CKS Algorithm 2)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_integer

from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import DiscreteLaplace, discrete_laplace

N = 200_000

SCALES = [
    Fraction(1),
    Fraction(10),
    Fraction(1000),
    Fraction(10, 3),
    Fraction(1, 3),
    Fraction(5000),  # beyond the two-sided table: geometric magnitude with a sign bit
    Fraction(10**6 + 1, 7),  # the split geometric
]


@pytest.mark.parametrize("scale", SCALES, ids=str)
def test_discrete_laplace_fits(scale: Fraction) -> None:
    z = discrete_laplace(scale, SeededRandom(scale.numerator % 1013), N)
    assert z.dtype == np.int64 and z.shape == (N,)
    bound = int(25 * scale) + 3
    assert_fits(chi2_integer(z, DiscreteLaplace(scale), -bound, bound))
    wrong = [DiscreteLaplace(scale * Fraction(f)) for f in ("0.7", "1.3")]
    assert_rejects([chi2_integer(z, w, -bound, bound) for w in wrong])


def test_discrete_laplace_is_symmetric_in_shape() -> None:
    z = discrete_laplace(10, SeededRandom(8), (1000, 3))
    assert z.shape == (1000, 3) and z.dtype == np.int64


def test_discrete_laplace_secure_random_fits() -> None:
    for scale in (Fraction(1), Fraction(1000)):
        z = discrete_laplace(scale, SecureRandom(), N)
        bound = int(25 * scale)
        assert_fits(chi2_integer(z, DiscreteLaplace(scale), -bound, bound))
