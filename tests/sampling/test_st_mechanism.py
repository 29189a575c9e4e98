"""The sample-and-threshold mechanism: validation, sampling, reporting, intervals, planning."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import Neighbouring, SeededRandom, ValidationError
from privhist.accounting.profile import NOT_RELEASED
from privhist.cli.main import main
from privhist.core.data import Counts
from privhist.mechanisms import registry
from privhist.mechanisms.sampling import SampleAndThreshold, accuracy
from privhist.mechanisms.sampling import profile as prof

F = Fraction


def test_registered_and_not_a_default_candidate() -> None:
    assert registry.get("sample-and-threshold") is SampleAndThreshold
    assert SampleAndThreshold.default_candidate is False
    assert {o.name for o in SampleAndThreshold.options} >= {"sampling_rate", "threshold"}


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [0.0, -0.2, 0.7, 1.0, 2.0])
def test_sampling_rate_out_of_range_names_the_reason(rate: float) -> None:
    with pytest.raises(ValidationError, match=r"parameter 'sampling_rate'.*e\^epsilon") as err:
        SampleAndThreshold(1.0, 1e-8, sampling_rate=rate)
    assert "0.632121" in str(err.value)


def test_sampling_rate_bound_uses_the_per_key_epsilon() -> None:
    # replace neighbours: two keys, eps/2 each; 0.5 < 1 - e^-1 but > 1 - e^-0.5
    SampleAndThreshold(1.0, 1e-8, sampling_rate=0.5)
    with pytest.raises(ValidationError, match=r"0\.393469"):
        SampleAndThreshold(1.0, 1e-8, Neighbouring.replace(), sampling_rate=0.5)


@pytest.mark.parametrize("tau", [0, -3, 2.5, "x", True])
def test_threshold_below_one_or_not_integer(tau: Any) -> None:
    with pytest.raises(ValidationError, match=r"parameter 'threshold'.*integer >= 1"):
        SampleAndThreshold(1.0, 1e-8, threshold=tau)


@pytest.mark.parametrize(("eps", "delta"), [(0, 1e-8), (-1, 1e-8), (math.inf, 1e-8), (1, 0)])
def test_epsilon_and_delta(eps: float, delta: float) -> None:
    with pytest.raises(ValidationError, match=r"parameter '(epsilon|delta)'"):
        SampleAndThreshold(eps, delta)


def test_fixed_pair_must_meet_delta_and_the_error_gives_its_delta() -> None:
    cert = prof.certified_delta(F(1, 10), 5, F(1))
    with pytest.raises(ValidationError, match="parameter 'threshold'") as err:
        SampleAndThreshold(1.0, 1e-8, sampling_rate="1/10", threshold=5)
    assert f"gives delta {cert.upper:.3g}" in str(err.value)
    assert "exact calibration needs 10" in str(err.value)
    ok = SampleAndThreshold(1.0, 1e-8, sampling_rate="1/10", threshold=10)
    assert ok.sampling_rate == F(1, 10) and ok.threshold == 10
    assert ok.delta_exact <= 1e-8


def test_other_option_errors() -> None:
    with pytest.raises(ValidationError, match="calibration"):
        SampleAndThreshold(1.0, 1e-8, calibration="magic")
    with pytest.raises(ValidationError, match="population"):
        SampleAndThreshold(1.0, 1e-8, calibration="optimised")
    with pytest.raises(ValidationError, match=r"alpha.*C_alpha"):
        SampleAndThreshold(1.0, 1e-8, calibration="c_alpha", alpha=0.7)
    with pytest.raises(ValidationError, match="alpha"):
        SampleAndThreshold(1.0, 1e-8, alpha=1.5)
    with pytest.raises(ValidationError, match=r"threshold.*calibration chernoff"):
        SampleAndThreshold(1.0, 1e-8, calibration="chernoff", threshold=30)
    with pytest.raises(ValidationError, match=r"sampling_rate.*c_alpha"):
        SampleAndThreshold(1.0, 1e-8, calibration="c_alpha", sampling_rate=0.1)


def test_calibrations_agree_with_the_profile_functions() -> None:
    e, d = F(1), F(1e-8)
    p = prof.alpha_rate(F(1, 6), e)
    exact = SampleAndThreshold(1.0, 1e-8)
    one = SampleAndThreshold(1.0, 1e-8, calibration="theorem1")
    rule = SampleAndThreshold(1.0, 1e-8, calibration="c_alpha")
    assert exact.sampling_rate == one.sampling_rate == rule.sampling_rate == p
    assert exact.threshold == prof.exact_threshold(p, e, d)[0] == 11
    assert one.threshold == prof.chernoff_threshold(float(p), 1.0, 1e-8) == 14
    assert rule.threshold == 20
    for m in (exact, one, rule):
        assert m.delta_exact <= 1e-8
    # only a threshold: the largest rate for it
    fixed = SampleAndThreshold(1.0, 1e-8, threshold=20)
    assert fixed.sampling_rate > p and fixed.parameters()["sampling_rate_rule"] == (
        "largest for the threshold"
    )


# -- releases -----------------------------------------------------------------------------------


def _trunc_binomial_gof(values: np.ndarray, n: int, p: float, tau: int) -> float:
    """Chi-square p-value of ``values`` against Binomial(n, p) conditioned on >= tau."""
    k = np.arange(tau, n + 1)
    probs = stats.binom.pmf(k, n, p)
    probs = probs / probs.sum()
    obs = np.array([(values == x).sum() for x in k], dtype=float)
    exp = probs * values.size
    bins_o, bins_e, ao, ae = [], [], 0.0, 0.0
    for o, e in zip(obs, exp, strict=True):
        ao, ae = ao + o, ae + e
        if ae >= 5:
            bins_o.append(ao)
            bins_e.append(ae)
            ao = ae = 0.0
    bins_o[-1] += ao
    bins_e[-1] += ae
    assert sum(bins_o) == values.size
    return float(stats.chisquare(bins_o, np.array(bins_e) * values.size / sum(bins_e)).pvalue)


def test_sampled_counts_goodness_of_fit_with_power_check() -> None:
    m = SampleAndThreshold(1.0, 1e-6, sampling_rate=0.2, threshold=12)
    units, n_keys = 80, 20000
    rel = m.release(Counts.from_arrays(np.arange(n_keys), np.full(n_keys, units)), SeededRandom(5))
    assert rel.values is not None and rel.values.size > 10000
    assert _trunc_binomial_gof(rel.values, units, 0.2, 12) > ALPHA
    # power: the same test rejects a 5% wrong rate
    assert _trunc_binomial_gof(rel.values, units, 0.21, 12) < ALPHA
    # estimates are count / p
    assert rel.estimates is not None
    np.testing.assert_allclose(rel.estimates, rel.values / 0.2)


@pytest.mark.parametrize("count", [20, 40, 55, 70, 120])
def test_reporting_probability_matches_simulation(count: int) -> None:
    m = SampleAndThreshold(1.0, 1e-8, sampling_rate=0.25)
    n_keys = 20000
    rel = m.release(Counts.from_arrays(np.arange(n_keys), np.full(n_keys, count)), SeededRandom(9))
    rp = float(m.reporting_probability(count)[count])
    assert stats.binomtest(len(rel), n_keys, rp).pvalue > ALPHA
    dist = m.key_distribution(count, count)
    assert 1 - float(dist.probabilities[NOT_RELEASED]) == pytest.approx(rp, rel=1e-9, abs=1e-300)


def test_reporting_probability_power_check() -> None:
    m = SampleAndThreshold(1.0, 1e-8, sampling_rate=0.25)
    n_keys, count = 20000, 50
    rel = m.release(Counts.from_arrays(np.arange(n_keys), np.full(n_keys, count)), SeededRandom(9))
    wrong = float(accuracy.reporting_probability(0.25, m.threshold + 1, count)[count])
    assert stats.binomtest(len(rel), n_keys, wrong).pvalue < ALPHA


def test_no_foreign_keys_zero_data_and_sorted_output() -> None:
    m = SampleAndThreshold(0.5, 1e-8, sampling_rate=0.3)
    gen = np.random.default_rng(3)
    keys = np.array([f"k{i:05d}" for i in gen.permutation(5000)])
    counts = gen.integers(0, 3000, size=5000)
    counts[:100] = 0
    rel = m.release(Counts.from_arrays(keys, counts), SeededRandom(1))
    present = {k for k, c in zip(keys.tolist(), counts.tolist(), strict=True) if c > 0}
    out = rel.keys.tolist()
    assert set(out) <= present and out == sorted(out) and len(out) > 100
    assert rel.values is not None and (rel.values >= m.threshold).all()
    empty = m.release(Counts.from_arrays([], []), SeededRandom(1))
    assert len(empty) == 0
    zeros = m.release(Counts.from_arrays(["a", "b"], [0, 0]), SeededRandom(1))
    assert len(zeros) == 0


def test_user_level_counts_users_not_records() -> None:
    nb = Neighbouring.user(1, 5)
    m = SampleAndThreshold(1.0, 1e-8, nb, sampling_rate=0.5)
    n_keys = 2000
    units = np.full(n_keys, 200)
    data = Counts.from_arrays(np.arange(n_keys), 5 * units, units, neighbouring=nb)
    rel = m.release(data, SeededRandom(2))
    assert rel.values is not None
    assert rel.values.max() <= 200  # sampled users, never records
    assert abs(rel.values.mean() - 100) < 1.0


def test_intervals_cover_conditionally_on_release() -> None:
    p, tau, conf = 0.1, 10, 0.9
    gen = np.random.default_rng(11)  # simulation of the analysis only (not a release)
    for c in (60, 100, 200, 1000):
        y = gen.binomial(c, p, size=40000)
        y = y[y >= tau]
        lo, hi = accuracy.selection_adjusted_interval(y, p, tau, conf)
        covered = float(((lo <= c) & (c <= hi)).mean())
        assert covered >= conf - 4 * math.sqrt(conf * (1 - conf) / y.size)
        assert (lo >= y).all() and (lo <= hi).all()
    # a naive interval that ignores the threshold undercovers near tau / p (the power check)
    y = gen.binomial(60, p, size=40000)
    y = y[y >= tau]
    lo_adj, _ = accuracy.selection_adjusted_interval(y, p, tau, conf)
    lo_unadj, _ = accuracy.selection_adjusted_interval(y, p, 0, conf)
    assert float((lo_unadj <= 60).mean()) < float((lo_adj <= 60).mean())


def test_interval_bounds_are_the_extreme_counts_by_definition() -> None:
    p, tau, half = 0.2, 8, 0.025
    lo, hi = accuracy.selection_adjusted_interval([8, 15, 40], p, tau, 0.95)

    def g(n: int, y: int) -> float:
        return float(stats.binom.sf(y - 1, n, p) / stats.binom.sf(tau - 1, n, p))

    def h(n: int, y: int) -> float:
        return float(1 - stats.binom.sf(y, n, p) / stats.binom.sf(tau - 1, n, p))

    for y, a, b in zip([8, 15, 40], lo.tolist(), hi.tolist(), strict=True):
        assert g(a, y) > half and (a == y or g(a - 1, y) <= half)
        assert h(b, y) > half >= h(b + 1, y)


# -- planning -----------------------------------------------------------------------------------


def test_mse_closed_form_against_simulation() -> None:
    p, tau = 0.1, 10
    gen = np.random.default_rng(4)
    for c in (0, 5, 80, 150, 400):
        y = gen.binomial(c, p, size=200000)
        est = np.where(y >= tau, y / p, 0.0)
        sim = float(((est - c) ** 2).mean())
        ref = float(accuracy.mse(p, tau, [c])[0])
        assert sim == pytest.approx(ref, rel=0.03, abs=1e-9)


def test_optimised_beats_the_fixed_rules_and_depends_on_population() -> None:
    small = SampleAndThreshold(1.0, 1e-8, calibration="optimised", population=1000)
    large = SampleAndThreshold(1.0, 1e-8, calibration="optimised", population=10**6)
    assert small.delta_exact <= 1e-8 and large.delta_exact <= 1e-8
    assert small.sampling_rate < large.sampling_rate  # interior optimum for a small population
    for n, m in ((1000, small), (10**6, large)):
        best = accuracy.expected_error(float(m.sampling_rate), m.threshold, n).rmse
        for alpha in (F(1, 6), F(1, 2), F(1)):
            other = SampleAndThreshold(1.0, 1e-8, alpha=alpha)
            rmse = accuracy.expected_error(float(other.sampling_rate), other.threshold, n).rmse
            assert best <= rmse * (1 + 1e-12)


def test_plan_json_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "sample-and-threshold", "--epsilon", "1", "--delta", "1e-8", "--json"]
    assert main([*args, "--population", "5000", "--max-count", "300"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parameters"]["threshold"] == 11
    assert out["parameters"]["sampling_rate"] == pytest.approx(0.105353, rel=1e-5)
    assert out["delta_exact"] <= 1e-8
    assert out["thresholds"]["chernoff"] == 14 and out["thresholds"]["exact"] == 11
    assert out["thresholds"]["c_alpha"] == 20 and out["thresholds"]["optimised"] >= 11
    assert len(out["reporting_probability"]) == 301
    assert out["expected_error"]["population"] == 5000
    assert out["calibrations"]["optimised"]["delta_exact"] <= 1e-8
    # fixing both parameters reports their delta; an insufficient pair is a one-line error
    assert main([*args, "--sampling-rate", "0.1", "--threshold", "12"]) == 0
    fixed = json.loads(capsys.readouterr().out)
    assert fixed["delta_exact"] == pytest.approx(
        prof.certified_delta(F(0.1), 12, F(1)).upper, rel=1e-12
    )
    assert main([*args, "--sampling-rate", "0.1", "--threshold", "4"]) == 2
    assert "parameter 'threshold'" in capsys.readouterr().err


def test_histogram_through_the_cli(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.csv"
    keys = ["a"] * 3000 + ["b"] * 2 + ["c"] * 400
    path.write_text("key\n" + "\n".join(keys) + "\n")
    code = main(
        [
            "histogram",
            str(path),
            "--key",
            "key",
            "--mechanism",
            "sample-and-threshold",
            "--epsilon",
            "1",
            "--delta",
            "1e-8",
            "--seed",
            "3",
            "--no-progress",
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "key,count,estimate,lower,upper"
    assert [ln.split(",")[0] for ln in lines[1:]] == ["a", "c"]


def test_former_calibration_spelling_is_the_chernoff_rule() -> None:
    # "theorem1" (the paper's numbering) is still accepted and builds the same mechanism
    old = SampleAndThreshold(1.0, 1e-8, calibration="theorem1")
    new = SampleAndThreshold(1.0, 1e-8, calibration="chernoff")
    assert old.calibration == new.calibration == "chernoff"
    assert (old.sampling_rate, old.threshold) == (new.sampling_rate, new.threshold)
    with pytest.raises(ValidationError, match="calibration"):
        SampleAndThreshold(1.0, 1e-8, calibration="theorem2")
