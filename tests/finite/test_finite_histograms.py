"""basic-geometric (Algorithm 3, Theorem 5.1) and stability-geometric (Theorem 1.3).

* exact per-key privacy with no rounding at all: ``e^(eps_key)`` is replaced by the rational
  ``(1 + 2**-K)**c`` the mechanism actually achieves, checked with ``LogRational`` on every
  neighbouring pair of counts (both directions, "not released" as an output), with the threshold
  of stability-geometric at exactly ``delta / l0``; both are tight (a hair less fails);
* the rational ``(1 + 2**-K)**c`` is within the requested ``e^(eps / l0)``;
* releases (default and strict running time) follow the analysed distribution, the stated
  intervals cover, counts above the public bound are clamped and reported;
* validation (epsilon outside (0, 1] with the nearest valid setting, bounds, options) and the
  registry / planning path the command line uses.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.stats import assert_fits, chi2_exact

from privhist import Neighbouring, SeededRandom, ValidationError
from privhist.accounting.profile import NOT_RELEASED, LogRational, check_dp
from privhist.core.data import Counts
from privhist.mechanisms import registry
from privhist.mechanisms.finite.histograms import (
    BasicHistogram,
    StabilityGeometricHistogram,
    histogram_k,
)
from privhist.planning.plan import build, plan

RELATIONS = [
    Neighbouring.add_remove(),
    Neighbouring.replace(),
    Neighbouring.user(2, 2),
    Neighbouring.user(1, 3),
]


def _dist(mech: Any, count: int) -> dict[Any, Fraction]:
    kd = mech.key_distribution(count, count)
    assert kd.tail == 0 or kd.tail < Fraction(1, 2**150)
    return dict(kd.probabilities)


@pytest.mark.parametrize("nb", RELATIONS, ids=lambda nb: nb.describe())
@pytest.mark.parametrize("counting", ["geosample", "fastsample"])
def test_basic_geometric_is_exactly_pure_dp_per_key(nb: Neighbouring, counting: str) -> None:
    eps = 0.7
    m = BasicHistogram(
        eps, 0.0, nb, domain=["a"], count_bound=25, counting=counting, fast_gamma="1/32"
    )
    c, l0 = nb.linf_sensitivity, nb.l0_sensitivity
    achieved = m.ratio**c  # the per-key ratio for counts c apart
    with mpmath.workdps(50):  # (1 + 2**-K)**c <= e^(eps / l0)
        assert c * mpmath.log(mpmath.mpf(m.ratio.numerator) / m.ratio.denominator) <= eps / l0
    tight = False
    for u in range(0, 26):
        for j in range(1, c + 1):
            if u + j > 25:
                continue
            p, q = _dist(m, u), _dist(m, u + j)
            assert sum(p.values()) == 1
            assert check_dp(p, q, LogRational(m.ratio**j), 0).holds
            if not check_dp(p, q, LogRational(achieved - Fraction(1, 10**12)), 0).holds:
                tight = True
    assert tight or counting == "fastsample"  # GeoSample attains the ratio (Theorem 4.5)


@pytest.mark.parametrize("nb", RELATIONS, ids=lambda nb: nb.describe())
def test_stability_geometric_is_exactly_eps_delta_per_key(nb: Neighbouring) -> None:
    m = StabilityGeometricHistogram(0.6, 1e-3, nb, count_bound=80)
    c = nb.linf_sensitivity
    delta_key = Fraction(1e-3) / nb.l0_sensitivity
    assert m.delta_key == delta_key
    worst = Fraction(0)
    for u in range(0, 60):
        for j in range(1, c + 1):
            p, q = _dist(m, u), _dist(m, u + j)
            assert sum(p.values()) == 1 and sum(q.values()) == 1
            res = check_dp(p, q, LogRational(m.ratio**c), delta_key)
            assert res.holds, (u, j, res)
            if u == 0:  # the key exists on one side only: delta is its release probability
                worst = max(worst, 1 - q[NOT_RELEASED])
    assert delta_key / 2 < worst <= delta_key
    # the threshold is the smallest that works: one lower, a key with count c leaks > delta_key
    weak = StabilityGeometricHistogram(0.6, 1e-3, nb, count_bound=80)
    weak.threshold -= 1
    p, q = _dist(weak, 0), _dist(weak, c)
    assert not check_dp(p, q, LogRational(m.ratio**c), delta_key).holds


def test_histogram_k_follows_theorem_4_5_with_the_counting_parameter_2_eps_over_l1() -> None:
    assert histogram_k(1.0, Neighbouring.replace()) == 1  # the paper's GeoSample_{n, eps}
    assert histogram_k(1.0, Neighbouring.add_remove()) == 0  # ratio 2: ln 2 <= 1
    assert histogram_k(0.5, Neighbouring.user(2, 2)) == 3  # 2**-3 <= 0.5 / 4
    for eps in (0.05, 0.3, 0.77, 1.0):
        for nb in RELATIONS:
            k = histogram_k(eps, nb)
            assert Fraction(1, 2**k) <= Fraction(eps) / nb.l1_sensitivity
            assert k == 0 or Fraction(1, 2 ** (k - 1)) > Fraction(eps) / nb.l1_sensitivity


def test_release_clamps_counts_above_the_bound_and_reports_them() -> None:
    m = BasicHistogram(0.5, domain=np.arange(50_000), count_bound=40)
    counts = np.full(50_000, 40)
    counts[::2] = 10**6  # half the keys above the bound
    rel = m.release(Counts.from_arrays(m.domain, counts), SeededRandom(99))
    assert rel.diagnostics["counts_above_bound"] == 25_000
    assert "counts_above_bound" not in rel.metadata  # a non-private fact stays out of metadata
    assert rel.values is not None and rel.values.max() <= 40 and rel.values.min() >= 0
    # clamped keys are released exactly like keys with count n
    model = m.sampler.pmf_window(40, 40)[0]
    assert_fits(chi2_exact(rel.values[::2], model))
    assert_fits(chi2_exact(rel.values[1::2], model))


@pytest.mark.parametrize(
    "mech",
    [
        BasicHistogram(0.5, domain=np.arange(20_000), count_bound=60, strict_time=True),
        BasicHistogram(
            0.5,
            domain=np.arange(20_000),
            count_bound=60,
            counting="fastsample",
            fast_gamma="1/32",
            strict_time=True,
        ),
        BasicHistogram(0.9, 0.0, Neighbouring.replace(), domain=np.arange(200_000)),
    ],
    ids=["geosample-strict", "fastsample-strict", "geosample"],
)
def test_releases_follow_the_key_distribution(mech: BasicHistogram) -> None:
    count = 3
    keys = mech.domain
    data = Counts.from_arrays(keys, np.full(keys.shape[0], count))
    rel = mech.release(data, SeededRandom(5))
    assert rel.values is not None
    assert_fits(chi2_exact(rel.values, mech.key_distribution(count, count).probabilities))
    # interval coverage: Pr[|Y - c| <= half_width] >= confidence
    covered = int(((rel.lower <= count) & (count <= rel.upper)).sum())
    assert stats.binomtest(covered, keys.shape[0], 0.95, alternative="less").pvalue > 1e-6


def test_stability_geometric_releases_and_reporting_probability() -> None:
    m = StabilityGeometricHistogram(0.5, 1e-6, count_bound=500, strict_time=True)
    rp = m.reporting_probability(200)
    assert rp[0] == 0
    for count in (1, m.threshold - 3, m.threshold, m.threshold + 10):
        kd = m.key_distribution(count, count).probabilities
        assert rp[count] == pytest.approx(1 - float(kd[NOT_RELEASED]), abs=1e-12)
    count = m.threshold
    n = 20_000
    data = Counts.from_arrays(np.arange(n), np.full(n, count))
    rel = m.release(data, SeededRandom(2))
    p_rel = 1 - float(m.key_distribution(count, count).probabilities[NOT_RELEASED])
    assert stats.binomtest(len(rel), n, p_rel).pvalue > 1e-6
    assert rel.values is not None and rel.values.min() >= m.threshold
    # keys with count 0 and absent keys are never released
    zeros = m.release(Counts.from_arrays(["x", "y"], [0, 0]), SeededRandom(1))
    assert len(zeros) == 0


@pytest.mark.parametrize("cls", [BasicHistogram, StabilityGeometricHistogram])
def test_epsilon_above_one_names_the_nearest_valid_setting(cls: Any) -> None:
    kwargs: dict[str, Any] = {"domain": ["a"]} if cls is BasicHistogram else {}
    with pytest.raises(ValidationError, match="nearest valid setting is epsilon=1"):
        cls(1.5, 1e-6, **kwargs)
    assert cls(1.0, 1e-6, **kwargs).guarantee().epsilon == 1.0


def test_validation_of_bounds_and_options() -> None:
    dom = ["a"]
    for bad in (0, -5, 2.5, True, None):
        with pytest.raises(ValidationError, match="parameter 'count_bound' of BasicHistogram"):
            BasicHistogram(0.5, domain=dom, count_bound=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'counting'"):
        BasicHistogram(0.5, domain=dom, counting="laplace")
    with pytest.raises(ValidationError, match="parameter 'fast_gamma' of BasicHistogram"):
        BasicHistogram(0.5, domain=dom, counting="fastsample", fast_gamma=2.0)
    with pytest.raises(ValidationError, match=r"parameter 'fast_gamma' .* below 1 - confidence"):
        BasicHistogram(0.5, domain=dom, counting="fastsample", fast_gamma=0.1)
    with pytest.raises(ValidationError, match="parameter 'strict_time'"):
        BasicHistogram(0.5, domain=dom, strict_time="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'domain'"):
        BasicHistogram(0.5)
    with pytest.raises(ValidationError, match=r"parameter 'count_bound' .* must be >= \d+"):
        StabilityGeometricHistogram(0.5, 1e-9, count_bound=20)  # below the threshold
    # d = (2**K + 1)**(n - 1) (2**(K + 1) + 1) would have 2**40 * 21 bits: use FastSample
    with pytest.raises(ValidationError, match=r"parameter 'count_bound' .* FastSample"):
        BasicHistogram(1e-3, domain=dom, count_bound=2**40)
    assert BasicHistogram(1e-3, domain=dom, count_bound=2**40, counting="fastsample").k == 10
    # FastSample's own denominator grows like (1/eps) log(n/gamma): refused when far too large
    with pytest.raises(ValidationError, match=r"parameter 'epsilon' of BasicHistogram .* 2\*\*25"):
        BasicHistogram(1e-7, domain=dom, count_bound=2**40, counting="fastsample")
    # pure: a requested delta is not spent
    assert BasicHistogram(0.5, 1e-5, domain=dom).guarantee().delta == 0


def test_registered_and_buildable_with_options_as_the_command_line_does() -> None:
    assert {"basic-geometric", "stability-geometric"} <= set(registry.names())
    m = build(
        "basic-geometric",
        0.5,
        0.0,
        domain=np.arange(5),
        count_bound=100,
        counting="fastsample",
        fast_gamma=1e-9,
        strict_time=True,
    )
    assert isinstance(m, BasicHistogram) and m.noise_kind == "fastsample" and m.strict_time
    report = plan(m, 50)
    assert report["parameters"]["count_bound"] == 100
    assert report["parameters"]["gamma"] == "1/1000000000"
    s = build("stability-geometric", 1.0, 1e-8, count_bound=1000)
    report = plan(s, 100)
    assert report["count_at_half"] == s.threshold
    # the finer grid at epsilon 1 (add/remove): 43/16, ln(43/16) = 0.989 (the coarse K = 0: 2/1)
    assert report["parameters"]["ratio"] == "43/16"
    assert report["parameters"]["epsilon_effective"] == pytest.approx(math.log(43 / 16))


def test_parameters_are_exact_and_consistent() -> None:
    m = BasicHistogram(0.3, domain=["a", "b"], count_bound=1000)
    p = m.parameters()
    assert p["K"] == 2 and p["ratio"] == "5/4"
    assert p["epsilon_effective"] == pytest.approx(math.log(1.25)) and p["epsilon_effective"] < 0.3
    assert p["half_width"] == m.sampler.half_width_for_tail(Fraction(1 - 0.95))
    assert m.noise_std() > 0
