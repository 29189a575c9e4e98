"""The robust DHT quantile (monotone projection) and the squared-bound threshold of OcPBM."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.dht import (
    FederatedQuantile,
    bin_index,
    cdf_from_prefix,
    monotone_fit,
    quantile_from_prefix,
    settle_tail,
    true_quantile,
)
from privhist.federated.kashin import OrthogonalFrame, kashin_representation
from privhist.federated.ocpbm import (
    error_bound,
    expected_squared_error,
    histogram_clip,
    level_at,
    noise_slope,
    squared_bound,
    squared_bound_clip,
)


def test_monotone_fit_is_scipys_isotonic_regression() -> None:
    gen = np.random.default_rng(4)
    for size in (1, 2, 7, 64, 300):
        for _ in range(20):
            v = np.cumsum(gen.normal(0.01, 0.05, size)) + gen.normal(0, 0.1, size)
            fit = monotone_fit(v)
            assert (np.diff(fit) >= -1e-12).all()
            assert np.allclose(fit, isotonic_regression(v).x, atol=1e-12)


def _tail_heavy_norms(n: int) -> np.ndarray:
    """Norms filling the first ~10 of 64 bins over [0, 64): a long flat tail of empty bins."""
    gen = np.random.default_rng(9)  # data generation only
    return np.clip(gen.normal(6.0, 1.5, n), 0.0, 10.5)


def test_dht_quantile_stays_by_the_true_one_where_the_raw_argmin_jumps_to_the_tail() -> None:
    n, gamma, upper, bits = 10_000, 0.954, 64.0, 6
    norms = _tail_heavy_norms(n)
    truth = true_quantile(norms, gamma, upper, bits)
    q = FederatedQuantile(upper=upper, bits=bits, theta=0.2, m=3, n_users=n)
    raw_far = 0
    for r in range(60):
        rel = q.run(norms, gamma, SeededRandom(300 + r))
        assert abs(rel.estimate - truth) <= 2.0  # at most two bins off, every run
        raw = (int(np.argmin(np.abs(rel.prefix / n - gamma))) + 1) * upper / (1 << bits)
        raw_far += raw > truth + 8.0
    # power check: on the same releases, Algorithm 5's raw argmin lands far in the tail
    assert raw_far >= 3


def test_quantile_on_an_exact_histogram_is_unchanged() -> None:
    norms = _tail_heavy_norms(1000)
    leaves = bin_index(norms, 64.0, 6)
    prefix = np.cumsum(np.bincount(leaves, minlength=64)).astype(float)
    assert np.array_equal(cdf_from_prefix(prefix, 1000), prefix / 1000)
    for g in (0.1, 0.5, 0.9, 0.99):
        want = (int(np.argmin(np.abs(prefix / 1000 - g))) + 1) * 1.0
        assert quantile_from_prefix(prefix, 1000, g, 64.0, 6) == want


def _setup(n: int = 300, d: int = 4, big: int = 8, seed: int = 3):  # type: ignore[no-untyped-def]
    gen = np.random.default_rng(seed)
    x = gen.poisson(gen.uniform(0.2, 3.0, size=(n, d))).astype(float)
    x[x.sum(axis=1) == 0, 0] = 1.0
    frame = OrthogonalFrame(d, big, SeededRandom(seed))
    y = kashin_representation(frame, x).coefficients
    return x, frame, y


def test_squared_bound_lies_between_the_exact_rmse_and_theorem1() -> None:
    x, frame, y = _setup()
    m, theta = 4, 0.2
    norms = np.linalg.norm(y, axis=1)
    clips = np.quantile(norms, [0.05, 0.3, 0.6, 0.9, 1.0])
    exact = np.sqrt(expected_squared_error(y, x.mean(axis=0), frame, clips, m, theta))
    for c, e in zip(clips.tolist(), exact.tolist(), strict=True):
        e2 = squared_bound(norms, c, frame.D, m, theta)
        assert e <= e2 * (1 + 1e-9)
        assert e2 <= error_bound(norms, c, frame.D, m, theta) * (1 + 1e-12)
        b = float(np.maximum(norms - c, 0).mean())
        s = math.sqrt(frame.D / (4 * m * norms.size * theta**2))
        assert e2 == pytest.approx(math.sqrt(b * b + (s * c) ** 2), rel=1e-12)


def test_squared_bound_clip_minimises_over_the_grid_by_brute_force() -> None:
    gen = np.random.default_rng(2)
    for _ in range(10):
        counts = gen.integers(0, 50, 16).astype(float)
        cdf = np.cumsum(counts) / counts.sum()
        upper, slope, points = 16.0, float(gen.uniform(0.01, 0.5)), 64
        mids = np.repeat(np.arange(16) + 0.5, counts.astype(int))
        best, arg = math.inf, 0.0
        for k in range(1, points + 1):
            c = upper * k / points
            v = float(np.maximum(mids - c, 0).mean()) ** 2 + (slope * c) ** 2
            if v < best - 1e-12:
                best, arg = v, c
        assert squared_bound_clip(cdf, upper, slope, points) == pytest.approx(arg)


def test_squared_bound_clip_is_nearer_the_oracle_than_the_quantile_on_skewed_norms() -> None:
    """Where noise and bias are of the same size the squared form's minimiser lies below the
    gamma* quantile (module notes of ocpbm): check it on exact norms."""
    x, frame, y = _setup(n=2000, d=6, big=12, seed=5)
    m, theta = 2, 0.2
    norms = np.linalg.norm(y, axis=1)
    s = noise_slope(frame.D, m, norms.size, theta)
    upper = float(norms.max()) * 1.01
    leaves = bin_index(norms, upper, 10)
    cdf = np.cumsum(np.bincount(leaves, minlength=1 << 10)) / norms.size
    c2 = squared_bound_clip(cdf, upper, s)
    gamma_clip = float(np.quantile(norms, 1 - s))
    grid = np.linspace(upper / 200, upper, 200)
    err = expected_squared_error(y, x.mean(axis=0), frame, [c2, gamma_clip, *grid], m, theta)
    assert err[0] <= err[1]
    assert math.sqrt(err[0]) <= 1.05 * math.sqrt(err[2:].min())


def test_squared_bound_clip_rejects_bad_input() -> None:
    with pytest.raises(InputDataError):
        squared_bound_clip([], 1.0, 0.1)
    with pytest.raises(ValidationError, match="upper"):
        squared_bound_clip([1.0], 0.0, 0.1)
    with pytest.raises(ValidationError, match="slope"):
        squared_bound_clip([1.0], 1.0, -1.0)


def test_tffe_default_threshold_is_the_capped_squared_bound_minimiser() -> None:
    from privhist.federated.ffe import range_upper, tffe
    from privhist.federated.user_data import generate_iid

    rng = SeededRandom(8)
    users = generate_iid(3000, 10, rng, items_per_user=30)
    frame = OrthogonalFrame(10, 20, rng)
    quantile = tffe(
        users, frame, SeededRandom(1), m=30, m_quantile=3, max_items=30, clip_rule="quantile"
    )
    squared = tffe(users, frame, SeededRandom(1), m=30, m_quantile=3, max_items=30)
    assert squared.extra["clip_rule"] == "squared"
    assert quantile.extra["clip_rule"] == "quantile"
    # same DHT draws (same seed, DHT first): the squared rule is at most the quantile
    assert squared.clips[0] <= quantile.clips[0]
    upper = range_upper(30)
    assert squared.clips[0] / (upper / 4096) == pytest.approx(
        round(squared.clips[0] / (upper / 4096))
    )
    with pytest.raises(ValidationError, match="clip_rule"):
        tffe(users, frame, rng, m=30, m_quantile=3, max_items=30, clip_rule="median")


def test_range_with_a_count_bound_is_k_sqrt_items_times_count() -> None:
    from privhist.federated.ffe import range_upper
    from privhist.federated.kashin import DEFAULT_ETA, DEFAULT_NU, kashin_level

    k = kashin_level(DEFAULT_ETA, DEFAULT_NU)
    assert range_upper(100) == pytest.approx(100 * k)
    assert range_upper(100, max_count=1) == pytest.approx(10 * k)
    assert range_upper(100, max_count=4) == pytest.approx(20 * k)
    assert range_upper(100, max_count=10**6) == pytest.approx(range_upper(100))
    with pytest.raises(ValidationError, match="max_count"):
        range_upper(100, max_count=0)


def test_settle_tail_sets_the_levels_from_the_first_near_one_on() -> None:
    f = np.array([0.1, 0.6, 0.95, 0.99, 0.97, 0.985, 1.0])
    assert settle_tail(f, 0.02).tolist() == [0.1, 0.6, 0.95, 1.0, 1.0, 1.0, 1.0]
    assert settle_tail(f, 0.06).tolist() == [0.1, 0.6, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert settle_tail(f, 0.0).tolist() == f.tolist()  # only the last level is 1
    # an exact distribution function is unchanged at tolerance 0
    leaves = bin_index(_tail_heavy_norms(1000), 64.0, 6)
    exact = np.cumsum(np.bincount(leaves, minlength=64)) / 1000
    assert np.array_equal(settle_tail(exact, 0.0), exact)
    with pytest.raises(ValidationError, match="tolerance"):
        settle_tail(f, -0.1)


def test_histogram_clip_is_nearer_the_exact_minimiser_when_the_norms_end_sharply() -> None:
    """Norms filling 11 of 64 bins: without settling, the one-sided deficit of the clipped
    projection in the 53 empty bins inflates the bias term and pushes the threshold up (power
    check); settled, the releases' thresholds are nearer the minimiser on the exact histogram."""
    n, upper, bits, gamma, slope = 10_000, 64.0, 6, 0.95, 0.03
    norms = _tail_heavy_norms(n)
    exact = np.cumsum(np.bincount(bin_index(norms, upper, bits), minlength=1 << bits)) / n
    target = squared_bound_clip(exact, upper, slope)
    q = FederatedQuantile(upper=upper, bits=bits, theta=0.2, m=3, n_users=n)
    settled, raw = [], []
    for r in range(30):
        rel = q.run(norms, gamma, SeededRandom(700 + r))
        c = histogram_clip(rel.prefix, q, slope, gamma)
        assert c <= rel.estimate  # capped at the gamma quantile
        settled.append(c)
        raw.append(
            min(squared_bound_clip(cdf_from_prefix(rel.prefix, n), upper, slope), rel.estimate)
        )
    err_settled = float(np.mean(np.abs(np.subtract(settled, target))))
    err_raw = float(np.mean(np.abs(np.subtract(raw, target))))
    assert err_settled < err_raw
    assert np.mean(raw) > target  # the deficit pushes up


def test_level_at_reads_the_settled_distribution_function() -> None:
    n, upper, bits = 2000, 64.0, 6
    norms = _tail_heavy_norms(n)
    q = FederatedQuantile(upper=upper, bits=bits, theta=0.2, m=30, n_users=n)
    rel = q.run(norms, 0.5, SeededRandom(3))
    sd = q.level_sd()
    for c in (3.0, 5.0, 6.0, 8.0, 40.0):  # bin edges (width 1): no interpolation error
        level = level_at(rel.prefix, q, c)
        assert abs(level - float(np.mean(norms < c))) < 6 * sd + 2 * sd  # noise + settling
    # within a bin, linear between its edges
    lo, hi = level_at(rel.prefix, q, 5.0), level_at(rel.prefix, q, 6.0)
    assert level_at(rel.prefix, q, 5.25) == pytest.approx(lo + 0.25 * (hi - lo))
    assert level_at(rel.prefix, q, upper) == 1.0
    assert level_at(rel.prefix, q, 0.0) == 0.0
