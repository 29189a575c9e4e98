"""FastSample (Balcer & Vadhan, Theorem 4.6) and Lemma 3.1's mixing: exactness proofs.

* inequality (1) of Lemma 3.1 is checked exactly for the chosen truncation width, which is the
  smallest width that satisfies it; the exact total-variation distance of the truncated sampler
  from GeoSample is within the bound;
* the truncated sampler alone is not pure DP, the mixture is, at exactly ``1 + 2**-K``;
* Lemma 3.1 is tight: at a delta just above (1) a mixture violates the ratio;
* every ``u in [1, D]`` is enumerated (and, separately, every digit triple of the vectorised
  composition) and the tallies equal the closed-form pmf exactly;
* the vectorised and strict samplers fit the exact pmf (chi-square, alpha = 1e-6, power checks).
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_exact

from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import LogRational, check_dp
from privhist.mechanisms.finite import (
    BoundedGeometricNoise,
    FastSample,
    GeoSample,
    UniformMixture,
    fast_sample_width,
    mixing_delta_bound,
    mixture_pmf,
    satisfies_inequality_1,
    total_variation,
)
from privhist.mechanisms.finite._exact import uniform_int


def closed_form_pmf(n: int, k: int, t: int, gamma: Fraction, c: int) -> list[Fraction]:
    """``(1 - gamma) Pr[clamp(c + Z_t, 0, n) = y] + gamma / (n + 1)`` from the geometric weights
    (independent of the code): ``Pr[Z_t = j] = alpha**|j| / (2p + 1)`` for ``|j| < t`` and the
    tails ``alpha**t / (1 + alpha)`` lumped at ``+-t``."""
    p = 2**k
    alpha = Fraction(p, p + 1)
    noise = {j: alpha ** abs(j) / (2 * p + 1) for j in range(-t + 1, t)}
    noise[t] = noise[-t] = alpha**t / (1 + alpha)
    assert sum(noise.values()) == 1
    out = [Fraction(0)] * (n + 1)
    for j, w in noise.items():
        out[min(n, max(0, c + j))] += w
    return [(1 - gamma) * x + gamma / (n + 1) for x in out]


ENUMERABLE = [(20, 0, Fraction(1, 2)), (12, 0, Fraction(1, 3)), (9, 0, Fraction(1, 2))]


@pytest.mark.parametrize(("n", "k", "gamma"), ENUMERABLE)
def test_enumerating_every_u_gives_the_closed_form_pmf_exactly(
    n: int, k: int, gamma: Fraction
) -> None:
    f = FastSample.from_k(n, k, gamma)
    d = f.denominator
    assert d == gamma.denominator * (n + 1) * f.noise.denominator
    for c in range(n + 1):
        expected = closed_form_pmf(n, k, f.width, gamma, c)
        assert f.pmf(c) == expected
        tally = Counter(f.evaluate(c, u) for u in range(1, d + 1))
        assert [Fraction(tally[y], d) for y in range(n + 1)] == expected
        # every CDF value is an integer over D (Definition 4.3)
        assert all(f.scaled_cdf(c, z) == f.cdf(c, z) * d for z in range(n + 1))


@pytest.mark.parametrize(("n", "k", "gamma"), ENUMERABLE)
def test_the_vectorised_composition_has_the_same_distribution(
    n: int, k: int, gamma: Fraction
) -> None:
    """The sampler draws an exact gamma coin j in [0, b), a uniform x in [0, n] and the noise from
    a uniform y in [0, d_t); enumerating all digit triples gives the pmf exactly."""
    f = FastSample.from_k(n, k, gamma)
    a, b = gamma.numerator, gamma.denominator
    d_t = f.noise.denominator
    noise = Counter(f.noise.from_uniform(y) for y in range(d_t))
    for c in (0, 1, n // 2, n):
        tally: Counter[int] = Counter()
        for j in range(b):
            if j < a:
                for x in range(n + 1):
                    tally[x] += d_t
            else:
                for z, m in noise.items():
                    tally[min(n, max(0, c + z))] += (n + 1) * m
        total = b * (n + 1) * d_t
        assert [Fraction(tally[y], total) for y in range(n + 1)] == f.pmf(c)


@pytest.mark.parametrize(
    ("n", "k", "gamma"),
    [
        (20, 0, Fraction(1, 2)),
        (1000, 1, Fraction(1, 10**6)),
        (10**6, 5, Fraction(1, 2**40)),
        (10**9, 3, Fraction(3, 7)),
        (5, 4, Fraction(1, 100)),  # nothing to drop: width n
    ],
)
def test_width_is_the_smallest_satisfying_inequality_1(n: int, k: int, gamma: Fraction) -> None:
    f = FastSample.from_k(n, k, gamma)
    p, q = 2**k, 2**k + 1
    t = f.width
    assert t == fast_sample_width(n, k, gamma)
    bound = mixing_delta_bound(f.ratio, gamma, Fraction(1, n + 1))
    assert bound == gamma / ((1 - gamma) * (n + 1) * (2 * p + 1)) == f.delta_max
    if t < n:
        alpha = Fraction(p, q)
        assert f.truncation_distance == 2 * alpha ** (t + 1) / (1 + alpha)
        assert satisfies_inequality_1(f.truncation_distance, f.ratio, gamma, Fraction(1, n + 1))
        if t > 1:  # one less would violate (1)
            smaller = 2 * alpha**t / (1 + alpha)
            assert not satisfies_inequality_1(smaller, f.ratio, gamma, Fraction(1, n + 1))
    else:
        assert f.truncation_distance == 0
    # Theorem 4.6: log d = O~(1/eps) log(n / gamma): the noise needs far fewer bits than GeoSample
    if n >= 10**6:
        geo_bits = BoundedGeometricNoise(k, n).denominator_bits()  # GeoSample's d (not formed)
        assert f.noise.denominator_bits() < geo_bits / 100


@pytest.mark.parametrize(("n", "k", "gamma"), [(40, 1, Fraction(1, 4)), (60, 0, Fraction(1, 9))])
def test_exact_tv_distance_to_geosample_is_within_the_bound(
    n: int, k: int, gamma: Fraction
) -> None:
    f = FastSample.from_k(n, k, gamma)
    g = GeoSample.from_k(n, k)
    assert f.width < n
    worst = Fraction(0)
    for c in range(n + 1):
        truncated = {z: f.truncated_cdf(c, z) - f.truncated_cdf(c, z - 1) for z in range(n + 1)}
        worst = max(worst, total_variation(truncated, dict(enumerate(g.pmf(c)))))
    assert 0 < worst <= f.truncation_distance <= f.delta_max


@pytest.mark.parametrize(("n", "k", "gamma"), [(40, 1, Fraction(1, 4)), (120, 2, Fraction(1, 64))])
def test_mixture_is_pure_dp_while_the_truncated_sampler_is_not(
    n: int, k: int, gamma: Fraction
) -> None:
    f = FastSample.from_k(n, k, gamma)
    assert f.width < n
    ratio = f.ratio
    not_pure = 0
    for c in range(n):
        a, b = dict(enumerate(f.pmf(c))), dict(enumerate(f.pmf(c + 1)))
        assert check_dp(a, b, LogRational(ratio), 0).holds
        ta = {z: f.truncated_cdf(c, z) - f.truncated_cdf(c, z - 1) for z in range(n + 1)}
        tb = {z: f.truncated_cdf(c + 1, z) - f.truncated_cdf(c + 1, z - 1) for z in range(n + 1)}
        if f.width < c < n - f.width - 1:  # c - t is reachable from c but not from c + 1
            assert not check_dp(ta, tb, LogRational(ratio), 0).holds
            not_pure += 1
    assert not_pure > 0
    # Theorem 4.6 claims (eps/2, 0); ours is at the sharper eps~/2 = ln(1 + 2**-K) <= eps/2
    assert ratio == Fraction(2**k + 1, 2**k)


def test_lemma_3_1_is_tight() -> None:
    """M: Pr[0 | x] = e^eps Pr[0 | x'] exactly. M' moves delta of mass towards the worst case.
    At delta on the bound of (1) the mixture's ratio is exactly e^eps; just above, it exceeds."""
    ratio, gamma = Fraction(3, 2), Fraction(1, 5)
    p = {0: Fraction(3, 10), 1: Fraction(7, 10) - Fraction(1, 5), 2: Fraction(1, 5)}
    q = {0: Fraction(1, 5), 1: Fraction(3, 5), 2: Fraction(1, 5)}
    assert check_dp(p, q, LogRational(ratio), 0).holds
    uniform = {r: Fraction(1, 3) for r in range(3)}
    bound = mixing_delta_bound(ratio, gamma, Fraction(1, 3))
    for delta, holds in ((bound, True), (bound * (1 + Fraction(1, 10**6)), False)):
        p2 = {0: p[0] + delta, 1: p[1] - delta, 2: p[2]}
        q2 = {0: q[0] - delta, 1: q[1] + delta, 2: q[2]}
        assert total_variation(p, p2) == delta == total_variation(q, q2)
        mp, mq = mixture_pmf(p2, uniform, gamma), mixture_pmf(q2, uniform, gamma)
        assert (mp[0] <= ratio * mq[0]) is holds
        assert check_dp(mp, mq, LogRational(ratio), 0).holds is holds
    assert satisfies_inequality_1(bound, ratio, gamma, Fraction(1, 3))
    assert not satisfies_inequality_1(bound + Fraction(1, 10**30), ratio, gamma, Fraction(1, 3))


def test_uniform_mixture_pieces() -> None:
    m = UniformMixture(Fraction(1, 4), 5)
    assert m.pmf([Fraction(1), 0, 0, 0, 0]) == [Fraction(4, 5)] + [Fraction(1, 20)] * 4
    assert m.delta_bound(Fraction(2)) == Fraction(1, 3) * Fraction(1, 3) * Fraction(1, 5)
    values = np.zeros(100_000, dtype=np.int64)
    out = m.apply(values, SeededRandom(1))
    strict = m.apply(values, SeededRandom(1), strict=True)
    for sample in (out, strict):
        model = dict(enumerate(m.pmf([Fraction(1), 0, 0, 0, 0])))
        assert_fits(chi2_exact(sample, model))
    for bad_gamma in (0, 1, Fraction(3, 2), Fraction(1, 2**64)):
        with pytest.raises(ValidationError, match="parameter 'gamma'"):
            UniformMixture(bad_gamma, 3)
    with pytest.raises(ValidationError, match="parameter 'size'"):
        UniformMixture(Fraction(1, 2), 0)
    with pytest.raises(ValidationError, match="parameter 'ratio'"):
        mixing_delta_bound(Fraction(1, 2), Fraction(1, 2), Fraction(1, 2))


# -- goodness of fit ---------------------------------------------------------------------------

N_GOF = 200_000


def _model(f: FastSample, c: int) -> dict[int, Fraction]:
    return f.pmf_window(c, 150)[0]


@pytest.mark.parametrize(
    ("n", "epsilon", "gamma", "c"),
    [
        (10**6, 1, "1/4", 2),  # the uniform quarter shows up in the "elsewhere" cell
        (10**6, 0.1, "1/1000000", 500_000),
        (1000, 0.5, "1/1024", 1000),
        (25, 1, "1/3", 12),
    ],
)
def test_vectorised_fastsample_fits_the_exact_pmf(
    n: int, epsilon: float, gamma: str, c: int
) -> None:
    f = FastSample(n, epsilon, gamma)
    samples = f.sample(np.full(N_GOF, c), SeededRandom(21 + c))
    assert samples.min() >= 0 and samples.max() <= n
    assert_fits(chi2_exact(samples, _model(f, c)))


def test_gof_power_check() -> None:
    f = FastSample(10**6, 1, "1/4")
    other = FastSample(10**6, 1, "1/5")  # a fifth instead of a quarter mixed in
    assert_rejects(chi2_exact(other.sample(np.full(N_GOF, 2), SeededRandom(3)), _model(f, 2)))
    less = f.with_k(f.k + 1)
    assert_rejects(chi2_exact(less.sample(np.full(N_GOF, 400), SeededRandom(4)), _model(f, 400)))


def test_strict_sampler_is_the_inverse_transform_of_a_full_uniform_u() -> None:
    f = FastSample(500, 0.5, "1/128")
    a = f.sample(np.full(300, 250), SeededRandom(8), strict=True)
    twin = SeededRandom(8)
    b = [f.evaluate(250, uniform_int(twin, f.denominator) + 1) for _ in range(300)]
    assert a.tolist() == b
    assert_fits(
        chi2_exact(f.sample(np.full(20_000, 3), SeededRandom(9), strict=True), _model(f, 3))
    )


# -- parameters, accuracy, validation ----------------------------------------------------------


def test_gamma_parsing_and_validation() -> None:
    assert FastSample(10, 1, "1/8").gamma == Fraction(1, 8)
    assert FastSample(10, 1, 0.125).gamma == Fraction(1, 8)
    # a float with a huge binary denominator is rounded down to 1 / ceil(1 / gamma)
    assert FastSample(10, 1, 1e-12).gamma == Fraction(1, math.ceil(1 / Fraction(1e-12)))
    for bad in (0, 1, -0.5, 2, math.nan, "x", True):
        with pytest.raises(ValidationError, match="parameter 'gamma' of FastSample"):
            FastSample(10, 1, bad)
    with pytest.raises(ValidationError, match="nearest valid setting is epsilon=1"):
        FastSample(10, 3, "1/8")
    with pytest.raises(ValidationError, match="parameter 'n'"):
        FastSample(0, 1, "1/8")
    f = FastSample(10, 1, "1/8")
    with pytest.raises(ValidationError, match="parameter 'counts'"):
        f.sample([11], SeededRandom(1))
    with pytest.raises(ValidationError, match="parameter 'u'"):
        f.evaluate(2, f.denominator + 1)


def test_accuracy_adds_gamma() -> None:
    f = FastSample(10**6, 0.1, "1/1000000")
    g = GeoSample(10**6, 0.1)
    beta = Fraction(1, 20)
    a = f.half_width_for_tail(beta)
    assert f.error_bound(a) <= beta < f.error_bound(a - 1)
    assert a >= g.half_width_for_tail(beta)
    # Theorem 4.6: (a, beta)-accuracy for a = ceil((2 / eps~) ln(1 / (beta - gamma)))
    paper = math.ceil(2 / f.epsilon_tilde * math.log(1 / float(beta - f.gamma)))
    assert a <= paper
    with pytest.raises(ValidationError, match="parameter 'beta'"):
        f.half_width_for_tail(Fraction(1, 10**7))  # below gamma: no width reaches it
