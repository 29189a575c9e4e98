"""``benchmarks/bench_user_level.py``: the count-error floor it prints beside the goals (the
smallest expected MAE of a bounded, noised count release with the whole budget) is computed
right: the analytic Gaussian sigma against a numerical hockey-stick divergence, the closed forms
of ``E|b + Z|`` against simulation, and the floor on data whose bounding loss is known."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath
import numpy as np
import polars as pl
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_user_level as bul  # noqa: E402


def _gaussian_divergence(sigma: float, eps: float) -> float:
    """``H_{e^eps}(N(0, s^2) || N(1, s^2))`` by quadrature of ``max(0, p - e^eps q)``."""
    mpmath.mp.dps = 40
    s = mpmath.mpf(sigma)
    p = lambda x: mpmath.npdf(x, 0, s)  # noqa: E731
    q = lambda x: mpmath.npdf(x, 1, s)  # noqa: E731
    # p > e^eps q exactly left of x0 = 1/2 - eps s^2
    x0 = mpmath.mpf(0.5) - eps * s**2
    return float(mpmath.quad(lambda x: p(x) - mpmath.e**eps * q(x), [-mpmath.inf, x0]))


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-8), (1.0, 1e-5), (3.0, math.exp(-10))])
def test_gaussian_sigma_is_the_smallest_private_one(eps: float, delta: float) -> None:
    sigma = bul.gaussian_sigma(eps, delta)
    assert _gaussian_divergence(sigma, eps) <= delta * (1 + 1e-6)
    # power: a slightly smaller sigma is not (eps, delta)-DP
    assert _gaussian_divergence(0.995 * sigma, eps) > delta
    # and it is below the classical sqrt(2 ln(1.25 / delta)) / eps where that applies
    if eps <= 1:
        assert sigma < math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_expected_absolute_errors_match_simulation() -> None:
    rng = np.random.default_rng(5)
    n = 400_000
    for b in (0.0, -1.5, -7.0, 20.0):
        z = rng.laplace(0.0, 3.0, n)
        got = float(bul.expected_abs_laplace(np.array([b]), 3.0)[0])
        sim = np.abs(b + z)
        assert abs(got - sim.mean()) < 6 * sim.std() / math.sqrt(n)
        g = rng.normal(0.0, 4.0, n)
        got = float(bul.expected_abs_gaussian(np.array([b]), 4.0)[0])
        sim = np.abs(b + g)
        assert abs(got - sim.mean()) < 6 * sim.std() / math.sqrt(n)
    # power: the Laplace form is not the Gaussian one at the same spread
    lap = bul.expected_abs_laplace(np.array([0.0]), 3.0)[0]
    gau = bul.expected_abs_gaussian(np.array([0.0]), 3.0)[0]
    assert lap == pytest.approx(3.0) and gau == pytest.approx(3.0 * math.sqrt(2 / math.pi))


def _truth(rows: list[tuple[int, str]]) -> bul.Truth:
    users, keys = zip(*rows, strict=True)
    return bul.Truth.of(pl.DataFrame({"user": list(users), "key": list(keys)}))


def test_floor_with_nothing_to_bound_is_the_noise_at_one_key() -> None:
    # every user holds one key: no cap loses anything, so the best cap is 1
    rows = [(u, "abc"[u % 3]) for u in range(300)]
    f = bul.count_floor(_truth(rows), 1.0, 1e-8, 3)
    assert (f.laplace_cap, f.gaussian_cap) == (1, 1)
    assert f.laplace == pytest.approx(1.0)
    assert f.gaussian == pytest.approx(bul.gaussian_sigma(1.0, 1e-8) * math.sqrt(2 / math.pi))


def test_floor_pays_the_cap_that_keeps_every_holder() -> None:
    # 2,000 users each hold the same three keys: a cap below 3 drops a third or more of each
    # key's 2,000 holders, far more than the noise of cap 3
    rows = [(u, k) for u in range(2000) for k in "abc"]
    f = bul.count_floor(_truth(rows), 1.0, 1e-8, 3)
    assert (f.laplace_cap, f.gaussian_cap) == (3, 3)
    assert f.laplace == pytest.approx(3.0)
    sigma = bul.gaussian_sigma(1.0, 1e-8) * math.sqrt(3)
    assert f.gaussian == pytest.approx(sigma * math.sqrt(2 / math.pi))


def test_floor_spreads_the_fewest_dropped_pairs_over_the_most_held_keys() -> None:
    # 40 users hold a and b, 10 more hold a alone, c is held by one user. Only a and b are
    # counted; a cap of 1 drops one pair of each of the 40: 40 pairs over 2 keys, 20 per key
    rows = [(u, k) for u in range(40) for k in "ab"] + [(40 + u, "a") for u in range(10)]
    rows.append((99, "c"))
    truth = _truth(rows)
    f = bul.count_floor(truth, 50.0, 1e-8, 2, caps=range(1, 2))
    assert f.keys == 2 and f.laplace_cap == 1
    # E|20 + Z| for Laplace(1/50): 20 + exp(-1000) / 50
    assert f.laplace == pytest.approx(20.0, rel=1e-12)
    # power: a cap of 2 loses nothing, and c (held by one user) is not counted
    g = bul.count_floor(truth, 50.0, 1e-8, 2, caps=range(2, 3))
    assert g.laplace == pytest.approx(2 / 50)


def test_floor_is_below_every_bounding_rule_it_covers() -> None:
    """Users keep a uniformly random subset of k keys (the libraries' rule), simulated: in each
    of 300 draws the mean over keys of ``E|b_j + Z|`` (closed form) is at least the floor at
    that k, and above it on average where the losses, a few pairs per key, fall unevenly
    (power)."""
    rng = np.random.default_rng(11)
    rows = [(u, k) for u in range(300) for k in rng.choice(8, rng.integers(1, 7), replace=False)]
    truth = _truth(rows)
    held = truth.pairs.group_by("user").agg(pl.col("key"))["key"].to_list()
    ranked = sorted(truth.users, key=lambda key: (-truth.users[key], str(key)))
    where = {key: i for i, key in enumerate(ranked)}
    for k in (1, 3, 5, 6):
        floor = bul.count_floor(truth, 1.0, 1e-8, 8, caps=range(k, k + 1)).laplace
        maes = []
        for _ in range(300):
            short = np.zeros(8)
            for keys in held:
                np.add.at(short, [where[x] for x in rng.permutation(keys)[k:]], 1.0)
            maes.append(float(bul.expected_abs_laplace(short, float(k)).mean()))
        assert min(maes) >= floor * (1 - 1e-12)
        if k == 5:  # 8 pairs lost per key on average, comparable to the noise (scale 5)
            assert np.mean(maes) > floor * 1.001
