"""Statistical and exact tests of the binomial sampler (binary-digit splitting)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from noise_gof import ScriptedRandom, assert_fits, assert_rejects, chi2_integer

from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import Binomial, binomial


def _window(n: int, *ps: Fraction) -> tuple[int, int]:
    """Integers within 8 sd of the mean under every model in ``ps``."""
    lo, hi = n, 0
    for p in ps:
        mean, sd = n * float(p), math.sqrt(n * float(p) * (1 - float(p)))
        lo = min(lo, max(0, math.floor(mean - 8 * sd) - 1))
        hi = max(hi, min(n, math.ceil(mean + 8 * sd) + 1))
    return lo, hi


CASES = [
    (1, Fraction(1, 3)),
    (10, Fraction(1, 3)),
    (10, Fraction(1, 10)),
    (100, Fraction(1, 2)),
    (1000, Fraction(3, 8)),
    (1000, Fraction(1, 3)),
    (37, Fraction(2**70 + 1, 3 * 2**70)),
]


@pytest.mark.parametrize(("n", "p"), CASES, ids=str)
def test_binomial_fits(n: int, p: Fraction) -> None:
    size = 200_000
    x = binomial(n, p, SeededRandom(n * 7 + p.denominator % 101), size=size)
    assert x.dtype == np.int64 and x.shape == (size,)
    wrong = [p * Fraction(7, 10), 1 - (1 - p) * Fraction(7, 10)]
    lo, hi = _window(n, p, *wrong)
    assert_fits(chi2_integer(x, Binomial(n, p), lo, hi))
    assert_rejects([chi2_integer(x, Binomial(n, q), lo, hi) for q in wrong])


@pytest.mark.parametrize("p", [Fraction(1, 10), Fraction(1, 3)], ids=str)
def test_binomial_million_trials_fits(p: Fraction) -> None:
    n, size = 10**6, 2000
    x = binomial(np.full(size, n), p, SeededRandom(p.denominator))
    wrong = [p * Fraction(99, 100), p * Fraction(101, 100)]
    lo, hi = _window(n, p, *wrong)
    assert_fits(chi2_integer(x, Binomial(n, p), lo, hi, max_cells=40))
    assert_rejects([chi2_integer(x, Binomial(n, q), lo, hi, max_cells=40) for q in wrong])


def test_binomial_mixed_trial_counts_in_one_call() -> None:
    n = np.tile(np.array([0, 1, 5, 1000], dtype=np.int64), 100_000)
    p = Fraction(1, 3)
    x = binomial(n, p, SeededRandom(21))
    assert x.shape == n.shape
    assert (x[n == 0] == 0).all()
    for k in (1, 5, 1000):
        lo, hi = _window(k, p)
        assert_fits(chi2_integer(x[n == k], Binomial(k, p), lo, hi))


def test_binomial_billion_trials_mean() -> None:
    # three draws of Binomial(1e9, 1/10): their sum is within 5 sd of its mean (alpha ~ 6e-7)
    n, p = 10**9, Fraction(1, 10)
    x = binomial(np.full(3, n), p, SeededRandom(9))
    mean = 3 * n * float(p)
    sd = math.sqrt(3 * n * float(p) * (1 - float(p)))
    assert abs(int(x.sum()) - mean) < 5 * sd
    assert len(set(x.tolist())) == 3  # not one draw repeated


def test_popcount_masks_the_last_word() -> None:
    ones = (1 << 64) - 1
    # p = 1/2: one digit, successes = number of 1 bits among the first n bits
    assert binomial(70, Fraction(1, 2), ScriptedRandom([ones, ones])).item() == 70
    assert binomial(70, Fraction(1, 2), ScriptedRandom([0, (ones << 6) & ones])).item() == 0
    assert binomial(70, Fraction(1, 2), ScriptedRandom([ones, 0b101])).item() == 66
    assert binomial(3, Fraction(1, 2), ScriptedRandom([0b1011])).item() == 2


def test_digit_splitting_by_hand() -> None:
    # p = 3/4 = 0.11: digit 1 -> ones succeed (popcount); digit 2 -> again among the rest
    rng = ScriptedRandom([0b0011, 0b01])  # 4 trials: 2 succeed, 2 undecided; then 1 of those
    assert binomial(4, Fraction(3, 4), rng).item() == 3
    assert rng.used == 2


def test_binomial_edge_probabilities_and_shapes() -> None:
    rng = SeededRandom(0)
    n = np.array([[3, 0], [7, 10**12]], dtype=np.int64)
    assert binomial(n, 0, rng).tolist() == [[0, 0], [0, 0]]
    assert binomial(n, 1, rng).tolist() == n.tolist()
    assert binomial(5, Fraction(1, 3), rng, size=(2, 3)).shape == (2, 3)
    assert binomial(np.zeros(0, dtype=np.int64), Fraction(1, 3), rng).shape == (0,)


def test_binomial_secure_random_fits() -> None:
    x = binomial(np.full(100_000, 50), Fraction(1, 10), SecureRandom())
    assert_fits(chi2_integer(x, Binomial(50, Fraction(1, 10)), 0, 50))
