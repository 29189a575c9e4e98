"""Confidence intervals on TrieHH++ nodes: exact endpoints on small cases, coverage given
release by simulation (one-sided binomial test at alpha = 1e-6) with power checks."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import SeededRandom
from privhist.core.errors import ValidationError
from privhist.federated.population import Population
from privhist.federated.triehh import TrieHH
from privhist.federated.triehh_intervals import node_interval, selective_tails
from privhist.noise import binomial


def _exact_tails(n: int, x: int, p: Fraction, tau: int) -> tuple[Fraction, Fraction]:
    pmf = [comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    sel = sum(pmf[tau:], Fraction(0))
    return sum(pmf[x:], Fraction(0)) / sel, sum(pmf[tau : x + 1], Fraction(0)) / sel


def _exact_interval(x: int, p: Fraction, tau: int, conf: Fraction) -> tuple[int, int]:
    a = (1 - conf) / 2
    n = x
    while _exact_tails(n, x, p, tau)[0] <= a:
        n += 1
    lower = n
    n = x
    while _exact_tails(n + 1, x, p, tau)[1] > a:
        n += 1
    return lower, n


@pytest.mark.parametrize(
    ("p", "tau"), [(Fraction(1, 2), 2), (Fraction(1, 5), 4), (Fraction(1, 3), 6)]
)
def test_endpoints_match_exact_rational_inversion(p: Fraction, tau: int) -> None:
    for x in range(tau, tau + 9):
        lo, hi = node_interval(x, float(p), tau, 0.95)
        elo, ehi = _exact_interval(x, p, tau, Fraction(95, 100))
        # never narrower than the exact interval, and at most one step wider (the float margin)
        assert elo - 1 <= lo <= elo and ehi <= hi <= ehi + 1, (x, (lo, hi), (elo, ehi))


def test_float_tails_agree_with_exact_sums() -> None:
    p = Fraction(3, 10)
    for n, x, tau in [(20, 7, 5), (40, 12, 9), (60, 9, 9), (35, 20, 3)]:
        up, down = selective_tails(n, x, float(p), tau)
        eup, edown = _exact_tails(n, x, p, tau)
        assert up == pytest.approx(float(eup), rel=1e-11)
        assert down == pytest.approx(float(edown), rel=1e-11)


def _coverage(
    n_true: int, p: float, tau: int, draws: int, seed: int, interval: object
) -> tuple[int, int]:
    x = binomial(np.full(draws, n_true, dtype=np.int64), Fraction(p), SeededRandom(seed))
    released = x[x >= tau]
    hits = 0
    for value, times in zip(*np.unique(released, return_counts=True), strict=True):
        lo, hi = interval(int(value))  # type: ignore[operator]
        hits += int(times) if lo <= n_true <= hi else 0
    return hits, int(released.shape[0])


def _covers_at_least(hits: int, total: int, level: float) -> bool:
    """Not rejected: H0 coverage >= level against coverage < level, one-sided, at ALPHA."""
    return bool(stats.binomtest(hits, total, level, alternative="less").pvalue > ALPHA)


# near the threshold (release rare: selection matters most), at it, and well above
CASES = [(50, 0.125, 10, 200_000), (100, 0.125, 10, 20_000), (600, 0.125, 10, 10_000)]


@pytest.mark.parametrize(("n_true", "p", "tau", "draws"), CASES)
def test_coverage_given_release_is_at_least_nominal(
    n_true: int, p: float, tau: int, draws: int
) -> None:
    hits, total = _coverage(n_true, p, tau, draws, 11, lambda x: node_interval(x, p, tau, 0.95))
    assert total > 5000
    assert _covers_at_least(hits, total, 0.95), hits / total


def test_power_a_90_percent_interval_fails_the_95_percent_check() -> None:
    n_true, p, tau = 100, 0.125, 10
    hits, total = _coverage(n_true, p, tau, 60_000, 12, lambda x: node_interval(x, p, tau, 0.80))
    assert not _covers_at_least(hits, total, 0.95), hits / total


def test_power_ignoring_selection_undercovers_near_the_threshold() -> None:
    """The unconditional Clopper-Pearson interval (tau = 1: no selection) is valid before
    release but not given it: near the threshold released counts are the upper tail."""
    n_true, p, tau = 50, 0.125, 10
    hits, total = _coverage(n_true, p, tau, 200_000, 13, lambda x: node_interval(x, p, 1, 0.95))
    assert not _covers_at_least(hits, total, 0.95), hits / total


def _true_clients(pop: Population, prefix: str, terminator: str) -> int:
    return sum(
        int(c)
        for item, c in zip(pop.items.tolist(), pop.counts.tolist(), strict=True)
        if (item + terminator).startswith(prefix)
    )


def test_trie_node_intervals_cover_the_clients_over_seeded_runs() -> None:
    hh = TrieHH(epsilon=4.0, delta=1e-6, levels=3, level_epsilon=1.0, alphabet="abc")
    pop = Population.from_counts(["ab", "ba", "abc", "c", "cc"], [400, 120, 60, 30, 200])
    hits = total = 0
    for seed in range(250):
        res = hh.run(pop, SeededRandom(seed))
        assert set(res.intervals) == set(res.nodes)
        for node, (lo, hi) in res.intervals.items():
            count = res.nodes[node][1]
            assert count <= lo <= hi  # at least the sampled clients
            hits += lo <= _true_clients(pop, node, hh.terminator) <= hi
            total += 1
        rel = res.release()
        assert rel.lower is not None and rel.upper is not None
        assert rel.lower.tolist() == [res.intervals[k + "$"][0] for k in res.items.tolist()]
    assert total > 1500
    assert _covers_at_least(hits, total, 0.95), hits / total
    assert res.metadata["parameters"]["confidence"] == 0.95


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValidationError, match="parameter 'count'"):
        node_interval(3, 0.5, 5, 0.95)
    with pytest.raises(ValidationError, match="parameter 'confidence'"):
        node_interval(6, 0.5, 5, 1.0)
    with pytest.raises(ValidationError, match="parameter 'confidence'"):
        TrieHH(epsilon=4.0, delta=1e-6, levels=3, level_epsilon=1.0, confidence=0)
