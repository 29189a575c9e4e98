"""Planning sample-and-threshold: the calibration table and the population plan."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from privhist.accounting.profile import NOT_RELEASED
from privhist.mechanisms.sampling import SampleAndThreshold
from privhist.planning.sample_threshold import calibration_table, plan_sample_and_threshold


def test_calibration_table_values() -> None:
    rows = calibration_table([0.1, 0.5, 1.0], 1e-8)
    assert [(r["exact"], r["chernoff"], r["c_alpha"]) for r in rows] == [
        (11, 17, 20),
        (11, 15, 20),
        (11, 14, 20),
    ]
    for r in rows:
        assert r["delta_exact"] <= 1e-8
        # each rule's threshold is certified too, and looser rules give smaller deltas
        assert r["delta_exact_c_alpha"] <= r["delta_exact_chernoff"] <= r["delta_exact"]


def test_population_plan() -> None:
    n = 3000
    plan = plan_sample_and_threshold(0.5, 1e-8, n)
    best = plan.best
    assert plan.reporting_curve.shape == (n + 1,)
    assert plan.reporting_curve[0] == 0.0 and plan.reporting_curve[-1] > 0.99
    assert np.all(np.diff(plan.reporting_curve) >= -1e-15)
    ref = stats.binom.sf(best.threshold - 1, np.arange(n + 1), float(best.sampling_rate))
    np.testing.assert_allclose(plan.reporting_curve, ref, rtol=1e-10, atol=1e-300)
    errors = {k: e.rmse for k, e in plan.errors.items()}
    assert errors["optimised"] <= min(errors.values()) * (1 + 1e-12)
    d = plan.to_dict()
    assert set(d["calibrations"]) == {"exact", "chernoff", "c_alpha", "optimised"}
    for entry in d["calibrations"].values():
        assert entry["delta_exact"] <= 1e-8


def test_key_distribution_high_precision_path() -> None:
    m = SampleAndThreshold(1.0, 1e-8, sampling_rate=Fraction(1, 100))
    dist = m.key_distribution(5000, 5000).probabilities
    assert float(dist[NOT_RELEASED]) == pytest.approx(
        float(stats.binom.cdf(m.threshold - 1, 5000, 0.01)), rel=1e-9, abs=1e-300
    )
    assert float(dist[50]) == pytest.approx(float(stats.binom.pmf(50, 5000, 0.01)), rel=1e-9)
    with mpmath.workprec(160):
        assert abs(mpmath.fsum(dist.values()) - 1) < mpmath.mpf(2) ** -140
