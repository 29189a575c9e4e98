"""Samplers (goodness of fit at alpha = 1e-6 with power checks) and sanitisers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import InputDataError, SeededRandom, ValidationError
from privhist.mechanisms.sampling.pws import schemes as S
from privhist.mechanisms.sampling.pws.keys import reporting_probabilities
from privhist.mechanisms.sampling.pws.sanitize import (
    frequency_sanitizer,
    sanitize_frequencies,
    sanitize_keys,
)


def _binom_p(k: int, n: int, p: float) -> float:
    return float(stats.binomtest(k, n, p).pvalue)


@pytest.mark.parametrize("scheme", ["ppswor", "priority"])
@pytest.mark.parametrize("power", [0.0, 0.5, 2.0])
def test_threshold_sampling_inclusion_matches_equation_1(scheme: str, power: float) -> None:
    n, freq, tau = 20000, 3, 0.1
    s = S.threshold_sample(
        np.arange(n), np.full(n, freq), scheme, tau, SeededRandom(5), power=power
    )
    q = float(S.inclusion_probability([freq], scheme, tau, power)[0])
    # independent closed forms of equation (1)
    want = 1 - np.exp(-tau * freq**power) if scheme == "ppswor" else min(1, tau * freq**power)
    assert q == pytest.approx(want)
    assert _binom_p(len(s), n, q) > ALPHA
    assert _binom_p(len(s), n, min(1.0, q * 1.25)) < ALPHA  # power: a wrong rate is rejected


def test_ppswor_seeds_are_exponential_and_priority_uniform() -> None:
    e = S.seeds(50000, "ppswor", SeededRandom(1))
    assert stats.kstest(e, "expon").pvalue > ALPHA
    assert stats.kstest(e, "expon", args=(0, 1.1)).pvalue < ALPHA
    u = S.seeds(50000, "priority", SeededRandom(2))
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert (u > 0).all() and (u < 1).all()


def test_bottom_k_is_the_k_smallest_ranks_and_streaming_agrees() -> None:
    keys = np.array([f"k{i:04d}" for i in range(3000)])
    f = (np.arange(3000) % 50) + 1
    s = S.bottom_k_sample(keys, f, 100, "ppswor", SeededRandom(9))
    assert len(s) == 100
    ranks = -np.log(S.uniform_seeds(3000, SeededRandom(9))) / f  # same words, brute force
    order = np.argsort(ranks)
    assert set(s.keys.tolist()) == set(keys[order[:100]].tolist())
    assert s.tau == pytest.approx(ranks[order[100]])
    st = S.StreamingSampler("ppswor", SeededRandom(9), k=100)
    for lo in range(0, 3000, 700):
        st.add(keys[lo : lo + 700], f[lo : lo + 700])
    r = st.result()
    assert r.keys.tolist() == s.keys.tolist() and r.tau == pytest.approx(s.tau)


def test_bottom_k_conditional_inclusion_is_a_threshold_sample() -> None:
    # frequency-weighted: keys of weight 10 enter about 10x more often than keys of weight 1
    hits = np.zeros(2)
    rng = SeededRandom(4)
    f = np.array([10] * 50 + [1] * 500)
    for _ in range(200):
        s = S.bottom_k_sample(np.arange(550), f, 20, "priority", rng)
        hits += [(s.frequencies == 10).sum(), (s.frequencies == 1).sum()]
    assert 5 < (hits[0] / 50) / (hits[1] / 500) < 12


def test_bad_inputs() -> None:
    rng = SeededRandom(1)
    with pytest.raises(ValidationError, match="positive integer frequencies"):
        S.threshold_sample(["a"], [1.5], "ppswor", 1.0, rng)
    with pytest.raises(ValidationError, match="positive integer frequencies"):
        S.threshold_sample(["a"], [0], "ppswor", 1.0, rng)
    with pytest.raises(ValidationError, match="'tau'"):
        S.threshold_sample(["a"], [1], "ppswor", 0.0, rng)
    with pytest.raises(ValidationError, match="'scheme'"):
        S.threshold_sample(["a"], [1], "bernoulli", 1.0, rng)  # type: ignore[arg-type]
    with pytest.raises(InputDataError, match="more than once"):
        S.threshold_sample(["a", "a"], [1, 2], "ppswor", 1.0, rng)
    s = S.threshold_sample(["a", "a"], [1, 2], "priority", 1.0, rng, aggregate=True)
    assert s.frequencies.tolist() == [3]
    with pytest.raises(InputDataError, match="twice"):
        st = S.StreamingSampler("ppswor", rng, tau=1.0)
        st.add(["a"], [1])
        st.add(["a"], [1])


def test_key_sanitiser_end_to_end_reporting_rate() -> None:
    eps, delta, tau, n = 0.5, 0.02, 0.05, 40000
    rng = SeededRandom(11)
    for freq in (3, 8):
        s = S.threshold_sample(np.arange(n), np.full(n, freq), "ppswor", tau, rng)
        out = sanitize_keys(s, eps, delta, rng)
        q = S.inclusion_probabilities(freq, "ppswor", tau)
        pi = float(reporting_probabilities(q, eps, delta)[freq])
        assert _binom_p(len(out), n, pi) > ALPHA
        assert _binom_p(len(out), n, min(1.0, pi * 1.25)) < ALPHA


@pytest.mark.parametrize("no_sampling", [True, False])
def test_frequency_sanitiser_tokens_follow_the_rows(no_sampling: bool) -> None:
    eps, delta, n, freq, m = 0.5, 0.02, 30000, 9, 30
    rng = SeededRandom(21)
    if no_sampling:
        s = S.threshold_sample(np.arange(n), np.full(n, freq), "priority", 1.0, rng)
        q = np.ones(m + 1)
        q[0] = 0
    else:
        s = S.threshold_sample(np.arange(n), np.full(n, freq), "ppswor", 0.2, rng)
        q = S.inclusion_probabilities(m, "ppswor", 0.2)
    out = sanitize_frequencies(s, eps, delta, rng, max_frequency=m, no_sampling=no_sampling)
    san = frequency_sanitizer(q, eps, delta, no_sampling=no_sampling)
    row = san.rows[freq].astype(float) / float(san.rows[freq].sum())
    obs = np.bincount(out.tokens, minlength=m + 1).astype(float)
    obs[0] = len(s) - len(out)
    exp = row * len(s)
    keep = exp > 5
    assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > ALPHA
    shifted = np.roll(row, 1)  # power: the neighbouring row's shape is rejected
    exp2 = shifted * len(s)
    k2 = exp2 > 5
    assert stats.chisquare(obs[k2], exp2[k2] * obs[k2].sum() / exp2[k2].sum()).pvalue < ALPHA
    # each released row carries the MLE estimate and its exact bias / variance
    assert np.isfinite(out.estimates).all() and (out.variance >= 0).all()
    with pytest.raises(InputDataError, match="max_frequency"):
        sanitize_frequencies(s, eps, delta, rng, max_frequency=5)
