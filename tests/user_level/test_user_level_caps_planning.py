"""DP caps (degree quantile) and the reporting curves of the user-level mechanisms."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import SeededRandom, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.engines.local.weighting import LocalWeightedSource
from privhist.mechanisms.user_level import (
    DPSIPS,
    GaussianThresholdHistogram,
    WeightedGaussianSelection,
)
from privhist.mechanisms.user_level._gauss import calibrate
from privhist.mechanisms.user_level.caps import (
    CAP_CANDIDATES,
    auto_count_cap,
    auto_selector,
    cap_from_histogram,
    dp_degree_cap,
)
from privhist.planning.user_level import gaussian_threshold_curve, selector_curve


def _source(degrees: list[int]) -> LocalWeightedSource:
    users, keys = [], []
    for u, d in enumerate(degrees):
        users.extend([u] * d)
        keys.extend(range(d))
    return LocalWeightedSource(pl.DataFrame({"user": users, "key": keys}), SeededRandom(1))


def test_cap_is_the_smallest_candidate_reaching_the_quantile() -> None:
    h = np.zeros(len(CAP_CANDIDATES) + 1, dtype=np.int64)
    h[CAP_CANDIDATES.index(5)] = 900  # users holding 4 or 5 keys
    h[CAP_CANDIDATES.index(50)] = 100
    assert cap_from_histogram(h, 0.9) == 5
    assert cap_from_histogram(h, 0.95) == 50
    h2 = h.copy()
    h2[-1] = 10_000  # most users above every candidate
    assert cap_from_histogram(h2, 0.5) == CAP_CANDIDATES[-1]


def test_dp_cap_noise_follows_its_distribution_and_budget_composes() -> None:
    src = _source([4] * 900 + [40] * 100)
    h = src.degree_histogram(CAP_CANDIDATES)
    rho_q = Fraction(1, 50)  # sigma = 5
    draws = np.concatenate(
        [dp_degree_cap(h, rho=rho_q, rng=SeededRandom(i)).noisy_histogram - h for i in range(300)]
    )
    from privhist.noise import DiscreteGaussian

    dist = DiscreteGaussian(Fraction(25))
    # Kolmogorov-style check on a discrete law: chi-square over pooled bins
    edges = list(range(-12, 13))
    obs = np.array(
        [(draws < -12).sum()] + [(draws == z).sum() for z in edges] + [(draws > 12).sum()]
    )
    p = np.array([float(dist.cdf(-13))] + [dist.pmf(z) for z in edges] + [float(dist.sf(13))])
    assert stats.chisquare(obs, p / p.sum() * obs.sum()).pvalue > ALPHA
    # power: the same test rejects noise of variance 36 instead of 25
    wide = DiscreteGaussian(Fraction(36))
    p_w = np.array([float(wide.cdf(-13))] + [wide.pmf(z) for z in edges] + [float(wide.sf(13))])
    assert stats.chisquare(obs, p_w / p_w.sum() * obs.sum()).pvalue < ALPHA
    choice = dp_degree_cap(h, quantile=0.8, rho=rho_q, rng=SeededRandom(5))
    assert choice.cap == 5  # 900 of 1000 users hold at most 5 keys, noise sigma 5
    sel, ch = auto_selector(DPSIPS, 1.0, 1e-6, src, rng=SeededRandom(2))
    assert sel.max_keys == ch.cap and ch.rho is not None and sel.spent_rho == ch.rho
    total, _ = calibrate(1.0, 1e-6, sel.threshold_share)
    assert sel.zcdp_rho() <= total  # the quantile and the release share one zCDP budget
    assert sel.certified_delta() <= 1e-6
    choice_l, left = auto_count_cap(src, 1.0, rng=SeededRandom(3))
    assert choice_l.epsilon is not None and math.isclose(choice_l.epsilon + left, 1.0)


def test_dp_cap_validation() -> None:
    h = np.zeros(len(CAP_CANDIDATES) + 1, dtype=np.int64)
    with pytest.raises(ValidationError, match="parameter 'rho'"):
        dp_degree_cap(h, rho=0.1, epsilon=0.1)
    with pytest.raises(ValidationError, match="parameter 'histogram'"):
        dp_degree_cap([1, 2], rho=0.1)
    with pytest.raises(ValidationError, match="parameter 'spent_rho'"):
        WeightedGaussianSelection(1.0, 1e-6, spent_rho=10.0)


def test_selector_curves_rise_to_one_and_match_the_release_probability() -> None:
    m = DPSIPS(1.0, 1e-8)
    c = selector_curve(m, 200, degree=1)
    p = c["probability"]
    assert p[0] < 1e-8 and p[-1] > 0.999 and np.all(np.diff(p) >= -1e-12)
    n = c["users_at_half"]
    expect = 1 - math.prod(1 - m.release_probability(r, n * m.scale) for r in range(m.rounds))
    assert p[n] == pytest.approx(expect, rel=1e-6)
    # holders spreading their weight over 10 keys need more of them
    assert selector_curve(m, 400, degree=10)["users_at_half"] > n
    w = selector_curve(WeightedGaussianSelection(1.0, 1e-8), 200)
    assert w["users_at_half"] is not None


def test_gaussian_threshold_curve_is_its_reporting_probability() -> None:
    m = GaussianThresholdHistogram(1.0, 1e-8, Neighbouring.user(10, 1))
    c = gaussian_threshold_curve(m, 300)
    assert c["probability"][m.threshold] == pytest.approx(float(m._dist.sf_mp(0)))
    with pytest.raises(ValidationError, match="parameter 'mechanism'"):
        gaussian_threshold_curve(DPSIPS(1.0, 1e-8), 10)  # type: ignore[arg-type]
