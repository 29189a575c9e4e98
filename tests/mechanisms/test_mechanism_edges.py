"""Central mechanisms at their edges: the exact draws on the reporting grid when the first word
ties, the largest noise scale, thresholds at a large delta, the interval each released count
carries, and the calibration refusals.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from tests.scripted_random import ScriptedRandom

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.mechanisms._grid import LazyBernoulliTable, LazyInversion
from privhist.mechanisms._noise import LaplaceCountNoise

TWO64 = 1 << 64


def _count(cums: list[int], bits: int, words: list[int]) -> tuple[int, int]:
    rng = ScriptedRandom(words)
    (k,) = LazyInversion(cums, bits).draw(1, rng).tolist()
    return int(k), rng.used


def test_lazy_inversion_decides_ties_with_the_following_words() -> None:
    """Thresholds ``t = (1/2 + 5 2**-200, 1/2 + 2**-100, 1)`` share their first word ``2**63``;
    ``K = #{k : t_k <= U}`` for the uniform whose words are scripted, decided exactly."""
    bits = 200
    cums = [(1 << 199) + 5, (1 << 199) + (1 << 100), 1 << 200]
    half = 1 << 63
    assert _count(cums, bits, [half - 1]) == (0, 1)  # U < 1/2
    assert _count(cums, bits, [half + 1]) == (2, 1)  # 1/2 + 2**-64 > t_1, < 1
    # U in [1/2 + 2**-192, 1/2 + 2**-191): above t_0, below t_1
    assert _count(cums, bits, [half, 0, 1]) == (1, 3)
    # U in [1/2, 1/2 + 2**-192): below t_0
    assert _count(cums, bits, [half, 0, 0, 0]) == (0, 4)
    # U about 1/2 + 2**-92: above both ties
    assert _count(cums, bits, [half, 1 << 36, 0])[0] == 2


def test_lazy_bernoulli_table_at_its_floors_and_ties() -> None:
    den = 1 << 200
    nums = [(1 << 199) + 3, den - 1, 0, den]
    t = LazyBernoulliTable(nums, den)
    half = 1 << 63
    draws = [
        ([half - 1], 0, True),
        ([half + 1], 0, False),
        ([half, 0, 0, 0], 0, True),  # U < 1/2 + 3 2**-200
        ([half, 0, 1 << 10], 0, False),  # U > 1/2 + 3 2**-200
        ([TWO64 - 2], 1, True),
        ([0], 2, False),
        ([TWO64 - 1, TWO64 - 1], 3, True),  # probability 1: even the top word
    ]
    for words, j, want in draws:
        rng = ScriptedRandom(words)
        assert t.draw(np.array([j]), rng).tolist() == [want], (words, j)


def test_the_largest_laplace_scale_is_accepted_and_no_larger() -> None:
    noise = LaplaceCountNoise(1, Fraction(1, 2**40))
    assert noise.scale == 2**40
    assert noise.sample(3, SeededRandom(1)).shape == (3,)
    with pytest.raises(ValidationError):
        LaplaceCountNoise(2, Fraction(1, 2**40))


def test_optimal_numerators_refuse_a_delta_below_the_coarse_grid() -> None:
    from privhist.mechanisms.optimal_selection import optimal_reporting_numerators

    nums = optimal_reporting_numerators(Fraction(1), Fraction(1, 2**62))
    assert nums[1] == 1
    with pytest.raises(ValidationError, match="2\\*\\*-62"):
        optimal_reporting_numerators(Fraction(1), Fraction(1, 2**63))


@pytest.mark.parametrize("delta", [Fraction(1, 2), Fraction(99, 100)])
def test_stability_threshold_stays_above_the_largest_count_change(delta: Fraction) -> None:
    """Whatever delta allows, a key one neighbour holds with ``c`` records is released only
    above ``c``: the threshold is at least ``c + 1``."""
    from privhist.mechanisms.stability import stability_threshold

    for c in (1, 4):
        assert stability_threshold(Fraction(1), c, delta) == c + 1


def _half_width(tail: object, confidence: float) -> int:
    """Smallest ``w`` with ``P[|Z| > w] <= 1 - confidence`` for a symmetric law with
    ``tail(w) = P[Z > w]``."""
    w = 0
    while 2 * tail(w) > 1 - confidence:  # type: ignore[operator]
        w += 1
    return w


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.999])
def test_released_counts_carry_their_symmetric_interval(confidence: float) -> None:
    """Dense and stability counts with discrete Laplace noise of scale ``b``: ``P[|Z| > w] =
    2 a**(w + 1) / (1 + a)``, ``a = e**(-1/b)``; gaussian thresholding and the dense Gaussian
    with the exact discrete Gaussian tails. Each released value has ``[value - w, value + w]``."""
    from tests.contracts import formulas as F

    from privhist.mechanisms import registry

    dom = [f"k{i}" for i in range(5)]
    data = Counts.from_arrays(dom, [500] * 5)
    cases = [
        registry.get("dense")(1.0, domain=dom, confidence=confidence),
        registry.get("stability")(1.0, 1e-6, confidence=confidence),
        registry.get("dense")(1.0, 1e-6, domain=dom, noise="gaussian", confidence=confidence),
        registry.get("gaussian-threshold")(1.0, 1e-6, confidence=confidence),
    ]
    for m in cases:
        rel = m.release(data, SeededRandom(3))
        assert rel.values is not None and len(rel.values) == 5
        sigma2 = getattr(m, "sigma2", None)
        if sigma2 is not None:
            w = _half_width(lambda x, s=sigma2: F.dg_sf(s, x + 1), confidence)
        else:
            scale = m.noise.scale if hasattr(m, "noise") else m.laplace.scale  # type: ignore[attr-defined]
            w = _half_width(lambda x, b=scale: F.dlap_sf(b, x + 1), confidence)
        assert (rel.values - rel.lower == w).all() and (rel.upper - rel.values == w).all(), m.name


def test_dense_gaussian_needs_delta() -> None:
    from privhist.mechanisms import registry

    for delta in (0.0,):
        with pytest.raises(ValidationError) as err:
            registry.get("dense")(1.0, delta, domain=["a"], noise="gaussian")
        assert err.value.parameter == "delta"


def test_dense_gaussian_sigma_is_the_smallest_on_its_grid() -> None:
    """``calibrate_discrete_gaussian_sigma`` returns the smallest multiple of ``2**-8`` whose
    PLD delta meets the target, also where the classical starting bracket is too small."""
    from privhist.accounting.composition import DiscreteGaussianEvent, pld_compose
    from privhist.mechanisms.dense import GAUSSIAN_MARGIN, calibrate_discrete_gaussian_sigma

    for eps, delta, k, c in ((1.0, 1e-6, 1, 1), (10.0, 1e-6, 4, 2)):
        s = calibrate_discrete_gaussian_sigma(eps, delta, k, c)
        assert s.denominator <= 256

        def at(sig: Fraction, c: int = c, k: int = k, eps: float = eps) -> float:
            return pld_compose(DiscreteGaussianEvent(float(sig), c, k)).delta_for_epsilon(eps)

        assert at(s) <= delta - GAUSSIAN_MARGIN < at(s - Fraction(1, 256))


def test_gaussian_threshold_accepts_a_variance_of_exactly_2_to_the_40(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The largest variance the mechanism takes is ``2**40`` (then the sampler's integer
    arithmetic is exact); the calibration is replaced to reach it exactly."""
    from privhist.mechanisms.user_level import gaussian_threshold as gt

    for rho, ok in (
        (Fraction(1, 2**41), True),
        (Fraction(1, 2**41) * (1 - Fraction(1, 2**30)), False),
    ):
        monkeypatch.setattr(
            gt, "calibrate", lambda eps, delta, share, rho=rho: (rho, delta * share)
        )
        if ok:
            m = gt.GaussianThresholdHistogram(1.0, 1e-6)
            assert m.sigma2 == 2**40
        else:
            with pytest.raises(ValidationError):
                gt.GaussianThresholdHistogram(1.0, 1e-6)
