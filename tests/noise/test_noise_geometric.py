"""Statistical tests of the geometric sampler."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_integer

from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import Geometric, geometric

N = 200_000


@pytest.mark.parametrize(
    "x",
    [Fraction(1), Fraction(1, 3), Fraction(10, 7), Fraction(1, 1000), Fraction(1, 10**6)],
    ids=str,
)
def test_geometric_fits(x: Fraction) -> None:
    g = geometric(x, SeededRandom(int(1 / x) % 1009), N)
    assert g.dtype == np.int64 and g.shape == (N,) and g.min() >= 0
    hi = int(30 / x)
    assert_fits(chi2_integer(g, Geometric(x), 0, hi))
    # wrong models: scale 1/x multiplied by 0.7 and by 1.3
    assert_rejects([chi2_integer(g, Geometric(x / f), 0, hi) for f in (0.7, 1.3)])


def test_geometric_large_rate_is_mostly_zero() -> None:
    g = geometric(Fraction(50), SeededRandom(2), N)  # P[G >= 1] = e**-50
    assert not g.any()


def test_geometric_secure_random_fits() -> None:
    g = geometric(Fraction(1, 5), SecureRandom(), N)
    assert_fits(chi2_integer(g, Geometric(Fraction(1, 5)), 0, 150))
