"""Parameters of the central mechanisms against closed forms computed independently here."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from privhist import Neighbouring, SeededRandom, ValidationError
from privhist.core.data import Counts
from privhist.mechanisms import DenseHistogram, OptimalSelection, StabilityHistogram
from privhist.mechanisms._noise import LaplaceCountNoise
from privhist.mechanisms.optimal_selection import ONE, optimal_reporting_numerators
from privhist.planning.plan import choose_default, rank_candidates


@pytest.mark.parametrize("eps", [1.0, 0.1, 0.3, 2.5])
@pytest.mark.parametrize("l1", [1, 2, 6])
def test_laplace_scale_is_rounded_conservatively(eps: float, l1: int) -> None:
    noise = LaplaceCountNoise(l1, eps)
    assert Fraction(l1) / noise.scale <= Fraction(eps)  # effective epsilon never above
    assert noise.effective_epsilon == pytest.approx(eps, rel=1e-5)


@pytest.mark.parametrize("scale_eps", [1.0, 0.2])
@pytest.mark.parametrize("conf", [0.5, 0.9, 0.95, 0.999])
def test_interval_half_width_is_the_smallest_covering(scale_eps: float, conf: float) -> None:
    noise = LaplaceCountNoise(1, scale_eps)
    a = math.exp(-1 / float(noise.scale))

    def coverage(w: int) -> float:  # P[|Z| <= w], summed from the pmf
        c = (1 - a) / (1 + a)
        return sum(c * a ** abs(k) for k in range(-w, w + 1))

    w = noise.half_width_for_confidence(conf)
    assert coverage(w) >= conf
    if w > 0:
        assert coverage(w - 1) < conf


def test_interval_covers_empirically() -> None:
    m = StabilityHistogram(0.5, 1e-6)
    n = 20000
    rel = m.release(Counts.from_arrays(np.arange(n), np.full(n, 500)), SeededRandom(3))
    assert rel.lower is not None and rel.upper is not None
    cover = ((rel.lower <= 500) & (500 <= rel.upper)).mean()
    assert cover >= 0.95 - 4 * math.sqrt(0.95 * 0.05 / n)


def test_optimal_probabilities_make_a_constraint_tight() -> None:
    eps, delta = Fraction(1, 2), Fraction(1, 1000)
    nums = optimal_reporting_numerators(eps, delta)
    e = math.exp(0.5)
    pis = [x / ONE for x in nums]
    assert pis[0] == 0 and pis[-1] == 1 and pis[-2] < 1
    for prev, cur in itertools.pairwise(pis):
        # both DP constraints hold ...
        assert cur <= e * prev + float(delta) + 1e-15
        assert 1 - prev <= e * (1 - cur) + float(delta) + 1e-15
        # ... and one is tight (up to the 2**-62 rounding), except at the final step to 1
        if cur < 1:
            tight = min(e * prev + float(delta) - cur, 1 - (1 - prev - float(delta)) / e - cur)
            assert abs(tight) < 1e-12


def test_optimal_selection_requires_delta_and_budget_split() -> None:
    with pytest.raises(ValidationError, match="selection_fraction"):
        OptimalSelection(1.0, 1e-6, selection_fraction=1.5)
    m = OptimalSelection(1.0, 1e-6, selection_fraction=0.25)
    assert m.parameters()["selection_epsilon"] == pytest.approx(0.25)
    assert m.noise is not None and m.noise.effective_epsilon == pytest.approx(0.75, rel=1e-5)


def test_user_level_threshold_accounts_for_bounds() -> None:
    # k keys and c records: noise scale k c / eps, T the smallest with k Pr[c + Z >= T] <= delta
    k, c, eps, delta = 3, 2, 1.0, 1e-6
    m = StabilityHistogram(eps, delta, Neighbouring.user(k, c))
    b = k * c / eps
    a = math.exp(-1 / b)
    t = m.threshold

    def tail(m_: int) -> float:
        return a**m_ / (1 + a)

    assert k * tail(t - c) <= delta < k * tail(t - c - 1)


def test_dense_gaussian_sigma_meets_delta_and_is_tight() -> None:
    m = DenseHistogram(1.0, 1e-5, domain=[1, 2], noise="gaussian")
    assert m.sigma2 is not None
    sigma = math.sqrt(float(m.sigma2))
    # continuous-Gaussian rule of thumb is a loose upper bound; the calibrated sigma is below it
    assert sigma < math.sqrt(2 * math.log(1.25 / 1e-5))
    with pytest.raises(ValidationError, match="parameter 'delta'"):
        DenseHistogram(1.0, 0.0, domain=[1], noise="gaussian")


def test_default_choice() -> None:
    nb = Neighbouring.add_remove()
    assert choose_default(1.0, 1e-8, nb) == "stability"
    assert choose_default(1.0, 1e-8, nb, keys_only=True) == "optimal-selection"
    assert choose_default(1.0, 0.0, nb, domain=np.arange(5)) == "dense"
    with pytest.raises(ValidationError, match="parameter 'delta'"):
        choose_default(1.0, 0.0, nb)
    ranked = rank_candidates(1.0, 1e-8, nb)
    # the ranking is by the count at which keys are kept half of the time
    assert [c.count_at_half for c in ranked] == sorted(c.count_at_half for c in ranked)


def test_release_rejects_data_bounded_looser_than_the_mechanism() -> None:
    data = Counts.from_arrays(["a"], [4], [2], neighbouring=Neighbouring.user(4, 2))
    with pytest.raises(ValidationError, match="parameter 'neighbouring'"):
        StabilityHistogram(1.0, 1e-6, Neighbouring.user(2, 2)).release(data, SeededRandom(1))


def test_user_level_counts_need_units_and_respect_bounds() -> None:
    nb = Neighbouring.user(2, 3)
    with pytest.raises(ValidationError, match="parameter 'units'"):
        Counts.from_arrays(["a"], [5], neighbouring=nb)  # records are not users when c > 1
    with pytest.raises(ValidationError, match="parameter 'units'"):
        Counts.from_arrays(["a"], [7], [2], neighbouring=nb)  # 2 users cannot hold 7 records
    ok = Counts.from_arrays(["a"], [6], [2], neighbouring=nb)
    assert ok.unit_counts.tolist() == [2]
    # with c = 1 every record is a distinct user
    assert Counts.from_arrays(
        ["a"], [4], neighbouring=Neighbouring.user(3)
    ).unit_counts.tolist() == [4]


def test_optimal_selection_takes_delta_below_the_int64_grid() -> None:
    # once refused (one 62-bit word decided inclusion); now a finer grid and lazy words
    m = OptimalSelection(1.0, 1e-20, keys_only=True)
    assert m.grid_bits > 62
    assert m.reporting_probability(1)[1] == pytest.approx(1e-20, rel=1e-15)
    assert m.reporting_probability(1)[1] <= 1e-20
    u = OptimalSelection(1.0, 3e-19, Neighbouring.user(4), keys_only=True)  # delta / k = 7.5e-20
    assert u.reporting_probability(1)[1] == pytest.approx(7.5e-20, rel=1e-15)
    assert OptimalSelection(1.0, 1e-18, keys_only=True).reporting_probability(1)[1] <= 1e-18


def test_tiny_epsilon_is_a_parameter_error() -> None:
    with pytest.raises(ValidationError, match="parameter 'epsilon' of StabilityHistogram must be"):
        StabilityHistogram(1e-13, 1e-6)


def test_dense_laplace_spends_no_delta() -> None:
    assert DenseHistogram(1.0, 1e-6, domain=[1]).guarantee().delta == 0


def test_count_share_of_the_budget_is_exact() -> None:
    for eps in (0.1, 0.3, 0.7, 1.1, 2.9):
        for f in (0.1, 0.25, 0.3, 0.5, 0.9):
            m = OptimalSelection(eps, 1e-6, selection_fraction=f)
            assert m.noise is not None
            share = Fraction(eps) - m.epsilon_selection
            assert Fraction(1) / m.noise.scale <= share


def test_release_metadata_does_not_depend_on_the_input() -> None:
    m = StabilityHistogram(1.0, 1e-6)
    a = m.release(Counts.from_arrays(["x", "y"], [100, 3], info={"records": 103}), SeededRandom(1))
    b = m.release(Counts.from_arrays(["x"], [100], info={"records": 100}), SeededRandom(1))
    assert a.metadata == b.metadata  # same released rows, same metadata
    assert a.diagnostics["records"] == 103  # exact facts stay with the data holder
