"""Distributed noise of the two-aggregator deployment: exact DP checks and the sampler's law.

The worst view is that of a curious aggregator (or a collector it colludes with): it knows its
own noise, so it sees ``counts + N_honest``. Neighbouring batches replace one client's report:
one unit moves from bucket 0 to bucket 1. The checks enumerate both buckets' noise exactly (high
precision pmfs, truncated with the tails' mass added) and compute the hockey-stick divergence in
both directions with :func:`privhist.accounting.profile.check_dp`.
"""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest
from tests.stats import ALPHA, chi2_integer

from privhist.accounting.profile import check_dp, product_distribution
from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.vdaf.dp import AggregatorNoise, false_positive_threshold


def _shifted(dist: Any, shift: int, k: int) -> dict[int, Any]:
    """``shift + noise`` on the outputs ``[-k - 4, k + 4]``, the same window for every shift in
    ``[-4, 4]`` (so no output of one member of a pair is missing from the other); the mass left
    out is at most that of ``|noise| > k``."""
    return {o: dist.pmf_mp(o - shift) for o in range(-k - 4, k + 5)}


def _tail(dist: Any, k: int) -> Any:
    """Mass of the noise outside ``[-k, k]`` (the windows above hold ``shift + [-k, k]``)."""
    return 2 * dist.sf_mp(k + 1)


def _pair(noise: AggregatorNoise, counts: tuple[int, int], k: int) -> tuple[Any, Any, Any]:
    """Output distributions of (bucket 0, bucket 1) = counts + noise, before and after one client
    moves from bucket 0 to bucket 1."""
    d = noise.distribution()
    c0, c1 = counts
    p = product_distribution(_shifted(d, c0, k), _shifted(d, c1, k))
    q = product_distribution(_shifted(d, c0 - 1, k), _shifted(d, c1 + 1, k))
    tail = 2 * _tail(d, k)  # either coordinate outside the window
    return p, q, tail


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_laplace_view_with_one_aggregators_noise_known(epsilon: float) -> None:
    noise = AggregatorNoise(epsilon)
    k = int(float(noise.scale) * 40) + 5
    p, q, tail = _pair(noise, (3, 1), k)
    check = check_dp(p, q, epsilon, 0.0, tail_p=tail, tail_q=tail, slack=float(tail))
    assert check.holds, str(check)
    # power: the same noise is not (0.8 epsilon, 0)-DP
    bad = check_dp(p, q, 0.8 * epsilon, 1e-6, tail_p=tail, tail_q=tail)
    assert not bad.holds


def test_gaussian_view_with_one_aggregators_noise_known() -> None:
    epsilon, delta = 1.0, 1e-5
    noise = AggregatorNoise(epsilon, delta, "gaussian")
    k = int(float(noise.sigma2) ** 0.5 * 12) + 5
    p, q, tail = _pair(noise, (2, 0), k)
    tail_f = float(tail)
    assert tail_f < 1e-25
    check = check_dp(p, q, epsilon, delta, tail_p=tail, tail_q=tail, slack=tail_f)
    assert check.holds, str(check)
    assert not check_dp(p, q, epsilon, delta / 10, tail_p=tail, tail_q=tail).holds


def test_collector_view_with_both_noises_is_no_worse() -> None:
    """Without collusion the collector sees counts + N_leader + N_helper; its exact pmf (the
    convolution of the two noises) passes the same check."""
    epsilon = 1.0
    noise = AggregatorNoise(epsilon)
    d = noise.distribution()
    k = int(float(noise.scale) * 25) + 5
    one = {z: d.pmf_mp(z) for z in range(-k, k + 1)}
    conv: dict[int, Any] = {}
    for a, pa in one.items():
        for b, pb in one.items():
            conv[a + b] = conv.get(a + b, mpmath.mpf(0)) + pa * pb
    tail1 = _tail(d, k)
    tail_sum = 2 * tail1  # mass dropped by truncating either noise

    def marginal(c: int) -> dict[int, Any]:
        return {o: conv.get(o - c, mpmath.mpf(0)) for o in range(-2 * k, 2 * k + 1)}

    def view(c0: int, c1: int) -> dict[tuple[int, int], Any]:
        return product_distribution(marginal(c0), marginal(c1))

    tail = 2 * tail_sum
    # the truncated convolution undercounts each probability by at most the dropped mass, so
    # H_trunc(P || Q) <= H(P || Q) + e^eps * (Q's dropped mass), on top of P's dropped mass
    slack = float(tail) * (1 + float(mpmath.e) ** epsilon)
    check = check_dp(view(1, 0), view(0, 1), epsilon, 0.0, tail_p=tail, tail_q=tail, slack=slack)
    assert check.holds, str(check)


def test_sampler_follows_the_distribution_it_claims() -> None:
    noise = AggregatorNoise(1.0)
    x = noise.sample(200_000, SeededRandom(11))
    d = noise.distribution()
    assert chi2_integer(x, d, -12, 12) > ALPHA
    # power: a slightly smaller scale is rejected on the same samples
    wrong = AggregatorNoise(1.1).distribution()
    assert chi2_integer(x, wrong, -12, 12) < ALPHA


def test_gaussian_sampler_law() -> None:
    noise = AggregatorNoise(1.0, 1e-6, "gaussian")
    x = noise.sample(100_000, SeededRandom(12))
    lim = int(4 * float(noise.sigma2) ** 0.5)
    assert chi2_integer(x, noise.distribution(), -lim, lim) > ALPHA
    wrong = AggregatorNoise(1.0, 1e-4, "gaussian").distribution()
    assert chi2_integer(x, wrong, -lim, lim) < ALPHA


def test_parameters_are_checked_and_threshold_is_conservative() -> None:
    with pytest.raises(ValidationError):
        AggregatorNoise(0.0)
    with pytest.raises(ValidationError):
        AggregatorNoise(1.0, 0.0, "gaussian")
    with pytest.raises(ValidationError):
        AggregatorNoise(1.0, 0.0, "uniform")
    noise = AggregatorNoise(1.0)
    tau = false_positive_threshold(noise, 1000, 0.05)
    # simulate empty buckets: the observed false-positive rate is at most the bound
    rng = SeededRandom(3)
    s = noise.sample(200_000, rng) + noise.sample(200_000, rng)
    rate = float(np.mean(s >= tau)) * 1000
    assert rate <= 0.05
    # tau is the smallest with the union bound 2 P[N >= ceil(tau / 2)] <= 0.05 / 1000, where
    # P[N >= k] = a**k / (1 + a), a = exp(-1 / scale) (closed form of the discrete Laplace)
    a = float(np.exp(-1 / float(noise.scale)))

    def bound(t: int) -> float:
        return 1000 * 2 * a ** (-(-t // 2)) / (1 + a)

    assert bound(tau) <= 0.05 < bound(tau - 1)
