"""The noise of the selectors' count release (:mod:`privhist.mechanisms.user_level._count_noise`):
the discrete Laplace counts' guarantee by exact hockey-stick divergence on neighbouring count
vectors in both directions (with its power), the automatic choice against expected absolute
errors recomputed from the two laws' definitions in mpmath, the law of released counts against
the discrete Laplace by a goodness-of-fit test (with its power), and vote selection's split of
the budget when its counts are Laplace."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_integer

from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import check_dp
from privhist.mechanisms.user_level._count_noise import CountNoise
from privhist.mechanisms.user_level.votes import PairsVoteSource, VoteSelection
from privhist.noise import DiscreteGaussian, DiscreteLaplace


def _laplace_law(
    scale: Fraction, shift: tuple[int, ...], window: int
) -> dict[tuple[int, ...], float]:
    """Law of ``shift + Z`` on ``[-window, window]^k``, ``Z`` i.i.d. discrete Laplace, written
    from the definition ``P[z] = (1 - a) / (1 + a) a**|z|``."""
    a = mpmath.exp(-1 / mpmath.mpf(scale.numerator) * scale.denominator)
    c = (1 - a) / (1 + a)
    one = {z: float(c * a ** abs(z)) for z in range(-window - 2, window + 3)}
    out: dict[tuple[int, ...], float] = {}
    for zs in itertools.product(range(-window, window + 1), repeat=len(shift)):
        p = 1.0
        for z, s in zip(zs, shift, strict=True):
            p *= one[z - s]
        out[zs] = p
    return out


@pytest.mark.parametrize("k,eps", [(1, 0.25), (1, 1.0), (2, 0.5), (2, 2.0)])
def test_laplace_counts_are_pure_dp_on_neighbouring_counts_both_ways(k: int, eps: float) -> None:
    noise = CountNoise.of(eps, 0.0, k, "laplace")
    assert noise.kind == "discrete_laplace" and noise.delta == 0.0
    assert noise.scale is not None and noise.scale >= Fraction(k) / Fraction(eps)
    window = int(40 * noise.scale)
    # mass outside the window, per law: at most k tails of 2 a**(window - 1) / (1 + a)
    tail = k * 2 * math.exp(-(window - 1) / float(noise.scale))
    without = _laplace_law(noise.scale, (0,) * k, window)
    # one user counted on k released keys adds one to each of their counts
    with_user = _laplace_law(noise.scale, (1,) * k, window)
    check = check_dp(with_user, without, eps, 0.0, slack=1e-12, tail_p=tail, tail_q=tail)
    assert check.holds, float(check.worst)
    # power: the loss reaches k / scale, so 5 % less epsilon fails even with some delta
    assert not check_dp(with_user, without, 0.95 * eps, 1e-4, tail_p=tail, tail_q=tail).holds


def _expected_abs(law: str, parameter: Fraction) -> float:
    """``E|Z|`` from the law's definition (mpmath sums; independent of ``expected_abs``)."""
    if law == "laplace":
        a = mpmath.exp(-mpmath.mpf(parameter.denominator) / parameter.numerator)
        return float(2 * a / (1 - a**2))  # 2 (1 - a) / (1 + a) * sum_z z a**z
    s2 = mpmath.mpf(parameter.numerator) / parameter.denominator
    width = int(40 * mpmath.sqrt(s2)) + 5
    norm = mpmath.fsum(mpmath.exp(-(z**2) / (2 * s2)) for z in range(-width, width + 1))
    first = mpmath.fsum(z * mpmath.exp(-(z**2) / (2 * s2)) for z in range(1, width + 1))
    return float(2 * first / norm)


@pytest.mark.parametrize(
    "eps,delta,k",
    [
        (0.25, 5e-9, 1),
        (0.25, 5e-9, 6),
        (0.25, 5e-9, 20),
        (0.25, 5e-9, 40),
        (0.75, 2e-5, 5),
        (0.75, 2e-5, 20),
        (2.0, 1e-3, 3),
        (2.0, 1e-3, 30),
    ],
)
def test_auto_takes_the_noise_of_smaller_expected_absolute_error(
    eps: float, delta: float, k: int
) -> None:
    lap = CountNoise.of(eps, delta, k, "laplace")
    gau = CountNoise.of(eps, delta, k, "gaussian")
    assert lap.scale is not None and gau.sigma2 is not None
    e_lap = _expected_abs("laplace", lap.scale)
    e_gau = _expected_abs("gaussian", gau.sigma2)
    assert lap.expected_abs() == pytest.approx(e_lap, rel=1e-9)
    assert gau.expected_abs() == pytest.approx(e_gau, rel=1e-9)
    assert CountNoise.of(eps, delta, k).kind == (
        "discrete_laplace" if e_lap <= e_gau else "discrete_gaussian"
    )
    # the Laplace scale is k / epsilon rounded up on the 2**-20 grid
    assert 0 <= lap.scale - Fraction(k) / Fraction(eps) < Fraction(1, 2**20)
    assert gau.delta <= delta


def test_expected_abs_with_a_shift_matches_the_definition() -> None:
    lap = CountNoise.of(0.5, 0.0, 3)
    assert lap.scale is not None
    d = DiscreteLaplace(lap.scale)
    zs = np.arange(-400, 401)
    direct = float((np.abs(7 + zs) * d.pmf(zs)).sum())
    assert lap.expected_abs(7.0) == pytest.approx(direct, rel=1e-9)


def test_the_choice_crosses_over_where_the_two_errors_do() -> None:
    # at (0.25, 5e-9) Laplace wins for few keys per user and the Gaussian for many
    kinds = [CountNoise.of(0.25, 5e-9, k).kind for k in (1, 5, 10, 60)]
    assert kinds[:3] == ["discrete_laplace"] * 3 and kinds[3] == "discrete_gaussian"
    with pytest.raises(ValidationError):
        CountNoise.of(1.0, 0.0, 3, "gaussian")
    with pytest.raises(ValidationError):
        CountNoise.of(1.0, 1e-6, 3, "uniform")


def test_vote_selection_with_laplace_counts_gives_the_selection_all_of_delta() -> None:
    lap = VoteSelection(1.0, 1e-8, counts=True, count_max_keys=5)
    assert lap.count_noise is not None and lap.count_noise.kind == "discrete_laplace"
    assert lap.delta_selection == 1e-8 and lap.count_delta() == 0.0
    assert lap.certified_delta() <= 1e-8 and lap.count_sigma2 is None
    gau = VoteSelection(1.0, 1e-8, counts=True, count_max_keys=5, count_noise="gaussian")
    assert gau.delta_selection == pytest.approx(5e-9) and gau.count_sigma2 is not None
    assert gau.certified_delta() <= 1e-8
    # a stated delta share is kept whatever the noise
    shared = VoteSelection(1.0, 1e-8, counts=True, count_max_keys=5, count_delta_share=0.5)
    assert shared.delta_selection == pytest.approx(5e-9)
    assert shared.count_noise is not None and shared.count_noise.kind == "discrete_laplace"
    with pytest.raises(ValidationError):
        VoteSelection(1.0, 1e-8, counts=True, count_noise="poisson")


def test_released_laplace_counts_follow_the_discrete_laplace_law() -> None:
    # 3 keys held by 400 users each, every user holding all three: the keys are released
    # for sure and counted whole (k_c = 3), so the count minus 400 is the noise
    users = [u for u in range(400) for _ in range(3)]
    keys = [k for _ in range(400) for k in ("a", "b", "c")]
    m = VoteSelection(4.0, 1e-3, counts=True, count_max_keys=3, count_noise="laplace")
    assert m.count_noise is not None and m.count_noise.scale is not None
    noise: list[int] = []
    for i in range(1500):
        rel = m.release(PairsVoteSource(users, keys, SeededRandom(i)), SeededRandom(10**6 + i))
        assert rel.keys.tolist() == ["a", "b", "c"] and rel.values is not None
        noise.extend((rel.values - 400).tolist())
    law = DiscreteLaplace(m.count_noise.scale)
    assert_fits(chi2_integer(noise, law, -12, 12))
    # power: a scale 1.3 times larger, and a discrete Gaussian of the same variance, are rejected
    assert_rejects(
        chi2_integer(noise, DiscreteLaplace(m.count_noise.scale * Fraction(13, 10)), -12, 12)
    )
    s2 = Fraction(law.var()).limit_denominator(2**20)
    assert_rejects(chi2_integer(noise, DiscreteGaussian(s2), -12, 12))
    # the interval is the exact discrete Laplace quantile, and the metadata says so
    w = law.interval(0.95)[1]
    assert (rel.upper - rel.values).tolist() == [w] * 3
    assert "discrete Laplace" in rel.metadata["counts"]["interval"]
    assert rel.metadata["parameters"]["count_noise"] == "discrete_laplace"
