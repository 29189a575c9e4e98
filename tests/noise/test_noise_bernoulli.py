"""Statistical tests of the Bernoulli samplers (chi-square at alpha = 1e-6, with power checks)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_bernoulli

from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import bernoulli_exp, bernoulli_exp_array, bernoulli_rational

N = 200_000


def shifted(p: float) -> tuple[float, float]:
    """Two wrong models: 30% of the way towards 0 and towards 1."""
    return 0.7 * p, 1 - 0.7 * (1 - p)


RATIONALS = [(1, 3), (1, 10), (1, 2), (7, 8), (2**100 + 1, 3 * 2**100), (3, 10**15 + 37)]


@pytest.mark.parametrize(("num", "den"), RATIONALS[:-1], ids=str)
def test_bernoulli_rational_scalar_fits(num: int, den: int) -> None:
    x = bernoulli_rational(num, den, SeededRandom(11 + num % 97), size=N)
    assert x.dtype == np.bool_ and x.shape == (N,)
    p = num / den
    assert_fits(chi2_bernoulli(x, p))
    assert_rejects([chi2_bernoulli(x, q) for q in shifted(p)])


def test_bernoulli_rational_tiny_probability_fits() -> None:
    # p = 3e-15: no success expected in any feasible sample; the tie path is what matters
    x = bernoulli_rational(3, 10**15 + 37, SeededRandom(5), size=N)
    assert not x.any()


def test_bernoulli_rational_array_fits_elementwise() -> None:
    num = np.array([1, 1, 2, 999_999_999], dtype=np.int64)
    den = np.array([3, 10, 3, 1_000_000_000], dtype=np.int64)
    x = bernoulli_rational(num, den, SeededRandom(3), size=(N, 4))
    assert x.shape == (N, 4)
    for j in range(4):
        p = float(num[j]) / float(den[j])
        if p < 0.999:
            assert_fits(chi2_bernoulli(x[:, j], p))
            assert_rejects([chi2_bernoulli(x[:, j], q) for q in shifted(p)])
        else:
            assert (~x[:, j]).sum() < 50  # 0.2 failures expected


EXPS = [Fraction(1, 2), Fraction(1), Fraction(10, 3), Fraction(5), Fraction(1, 1000)]


@pytest.mark.parametrize("x", EXPS, ids=str)
def test_bernoulli_exp_fits(x: Fraction) -> None:
    s = bernoulli_exp(x, SeededRandom(int(x * 1000) % 1000), N)
    p = math.exp(-float(x))
    assert_fits(chi2_bernoulli(s, p))
    # wrong models: x scaled by 0.7 and 1.3 (x = 1/1000 needs a relative shift of p instead)
    wrong = shifted(p) if x < Fraction(1, 10) else (math.exp(-0.7 * x), math.exp(-1.3 * x))
    assert_rejects([chi2_bernoulli(s, q) for q in wrong])


def test_bernoulli_exp_array_fits_small_and_large_denominators() -> None:
    rng = SeededRandom(17)
    for den in (7, 10**12 + 39):
        nums = np.array([0, 1, 3 * den // 7, den, 5 * den + 1, 2 * den + den // 3], dtype=np.int64)
        x = bernoulli_exp_array(np.tile(nums, (N, 1)), den, rng)
        assert x.shape == (N, nums.size)
        assert x[:, 0].all()
        for j in range(1, nums.size):
            p = math.exp(-int(nums[j]) / den)
            if p > 0.999:
                assert (~x[:, j]).sum() < 100
                continue
            assert_fits(chi2_bernoulli(x[:, j], p))
            assert_rejects([chi2_bernoulli(x[:, j], q) for q in shifted(p)])


def test_secure_random_fits() -> None:
    rng = SecureRandom()
    assert_fits(chi2_bernoulli(bernoulli_rational(1, 3, rng, size=N), 1 / 3))
    assert_fits(chi2_bernoulli(bernoulli_exp(Fraction(1, 3), rng, N), math.exp(-1 / 3)))
    x = bernoulli_exp_array(np.full(N, 4), 3, rng)
    assert_fits(chi2_bernoulli(x, math.exp(-4 / 3)))
