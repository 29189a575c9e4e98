"""PureSparseHistogram (Algorithm 8, Theorem 6.6): Lemma 3.1's premise and conclusion checked
exactly on a tiny universe with the precision the mechanism actually uses, the random histogram
``D``, accuracy and output length on ``|X| = 2**64``, bad input.

The exact law of the ``P``-bit order-statistic sampler is obtained from its deterministic steps:
each step's outcome is monotone in ``u`` (inverse transform), so bisection over ``u in [0, 2**P)``
finds every outcome's exact share of the ``2**P`` words.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from test_finite_sparse import chi2_pvalue, keep_heavy_truth
from tests.stats import ALPHA

from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import check_dp
from privhist.core.data import Counts
from privhist.mechanisms.finite.ordsample import OrdSample
from privhist.mechanisms.finite.sparse import PureSparseHistogram, mixing_delta

Output = tuple[tuple[int, int], ...]
TINY = {"universe_bits": 3, "count_bound": 2, "beta2": "1/10"}  # |X| = 8 = 4n


def test_mixing_delta_by_hand() -> None:
    # (eps/3) * beta2/(1 - beta2) * n!/(|X|(n+1))**n = (1/6)(1/9)(2/576)
    assert mixing_delta(Fraction(1, 2), Fraction(1, 10), 2, 8) == Fraction(1, 15552)
    m = PureSparseHistogram(0.5, **TINY)
    assert m.tv_delta == Fraction(1, 15552)


def random_histogram_pmf(size: int, n: int) -> dict[Output, Fraction]:
    """Algorithm 8 step 2 enumerated: n uniform draws, each distinct one a uniform count."""
    out: dict[Output, Fraction] = defaultdict(Fraction)
    for seq in itertools.product(range(size), repeat=n):
        qs = sorted(set(seq))
        for vals in itertools.product(range(n + 1), repeat=len(qs)):
            prob = Fraction(1, size**n * (n + 1) ** len(qs))
            out[tuple((q, v) for q, v in zip(qs, vals, strict=True) if v > 0)] += prob
    return dict(out)


def test_random_histogram_covers_the_range_with_the_stated_minimum() -> None:
    """min_h Pr[D = h] >= n!/(|X|(n+1))**n over every histogram with <= n bins, counts in
    [1, n] (the module notes' bound; also above the paper's (1/(6|X|))**n)."""
    size, n = 8, 2
    d = random_histogram_pmf(size, n)
    assert sum(d.values()) == 1
    expected = 1 + size * n + math.comb(size, 2) * n * n
    assert len(d) == expected  # full support on the range
    low = min(d.values())
    assert low >= Fraction(math.factorial(n), (size * (n + 1)) ** n) >= Fraction(1, (6 * size) ** n)


def ordsample_law(o: OrdSample) -> dict[tuple[int, ...], Fraction]:
    """Exact law of the P-bit sampler by bisection over u in each step."""
    assert o.precision is not None
    size = 1 << o.precision
    out: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)

    def rec(t: int, mm: int, r: int, prefix: tuple[int, ...], prob: Fraction) -> None:
        if r <= 0:
            out[prefix] += prob
            return
        u = 0
        while u < size:
            outcome = o.decide_truncated(t, mm, r, u, False)
            lo, hi = u, size - 1  # last u with the same outcome
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if o.decide_truncated(t, mm, r, mid, False) == outcome:
                    lo = mid
                else:
                    hi = mid - 1
            v, k = outcome
            share = Fraction(lo - u + 1, size)
            rec(v - 1, mm - k, r - k, prefix + (v,) * min(k, r), prob * share)
            u = lo + 1

    rec(o.n, o.m, o.n + 1, (), Fraction(1))
    return dict(out)


def q_failure(size: int, draws: int, need: int) -> Fraction:
    """Pr[fewer than ``need`` distinct among ``draws`` uniform draws from ``size``] (exact)."""
    total = Fraction(0)
    for j in range(1, need):
        surj = sum((-1) ** i * math.comb(j, i) * (j - i) ** draws for i in range(j + 1))
        total += Fraction(math.comb(size, j) * surj, size**draws)
    return total


def kh_law(m: PureSparseHistogram, data: dict[int, int]) -> dict[Output, Fraction]:
    """The exact release law of SparseHistogram at the mechanism's precision (Algorithm 7)."""
    n, size = m.n, m.universe.size
    a = sorted(data)
    pmfs = [m.sampler.pmf(min(data[x], n)) for x in a]
    rest = [x for x in range(size) if x not in data]
    tops = ordsample_law(OrdSample(m._cdf0, len(rest), n, precision=m.precision))
    injections = list(itertools.permutations(rest, n + 1))
    out: dict[Output, Fraction] = defaultdict(Fraction)
    for noisy in itertools.product(range(n + 1), repeat=len(a)):
        p_a = Fraction(1)
        for pmf, v in zip(pmfs, noisy, strict=True):
            p_a *= pmf[v]
        for top, p_top in tops.items():
            values = list(noisy) + list(top)
            cut = sorted(values, reverse=True)[n]
            share = p_a * p_top / len(injections)
            for qs in injections:
                items = a + list(qs)
                rel = tuple(sorted((x, v) for x, v in zip(items, values, strict=True) if v > cut))
                out[rel] += share
    fail = q_failure(size, m.draws, 2 * n + 1)
    law = {k: (1 - fail) * p for k, p in out.items()}
    law[()] = law.get((), Fraction(0)) + fail
    return law


def pure_law(m: PureSparseHistogram, data: dict[int, int]) -> dict[Output, Fraction]:
    kh = kh_law(m, data)
    d = random_histogram_pmf(m.universe.size, m.n)
    b = m.beta2
    return {k: (1 - b) * kh.get(k, 0) + b * d.get(k, 0) for k in set(kh) | set(d)}


@pytest.fixture(scope="module")
def tiny() -> tuple[PureSparseHistogram, dict[str, dict[Output, Fraction]]]:
    m = PureSparseHistogram(0.5, **TINY)
    datasets = {
        "base": {1: 2, 5: 1},
        "minus": {1: 2},
        "plus": {1: 2, 5: 1, 6: 1},
        "up": {1: 2, 5: 2},
    }
    return m, {name: pure_law(m, data) for name, data in datasets.items()}


def test_lemma_3_1_premise_at_the_mechanisms_precision(
    tiny: tuple[PureSparseHistogram, dict[str, dict[Output, Fraction]]],
) -> None:
    """Delta(SparseHistogram, KH'') <= delta of Algorithm 8, with the P the mechanism uses."""
    m, _ = tiny
    assert m.tv_delta is not None and m.precision is not None
    data = {1: 2, 5: 1}
    approx = kh_law(m, data)
    pmfs = [m.sampler.pmf(min(data.get(x, 0), m.n)) for x in range(m.universe.size)]
    fail = q_failure(m.universe.size, m.draws, 2 * m.n + 1)
    exact = {k: (1 - fail) * p for k, p in keep_heavy_truth(pmfs, m.n).items()}
    exact[()] = exact.get((), Fraction(0)) + fail
    tv = sum(abs(approx.get(k, 0) - exact.get(k, 0)) for k in set(approx) | set(exact)) / 2
    assert sum(approx.values()) == 1
    assert tv <= m.tv_delta


def test_pure_dp_exactly_on_a_tiny_universe(
    tiny: tuple[PureSparseHistogram, dict[str, dict[Output, Fraction]]],
) -> None:
    """(eps, 0)-DP of the exact release law, both directions, for neighbours that add, remove or
    increase one record; the check fails at a quarter of eps (it is not vacuous)."""
    m, laws = tiny
    base = laws["base"]
    for name in ("minus", "plus", "up"):
        assert check_dp(base, laws[name], m.epsilon, 0).holds, name
    assert not all(
        check_dp(base, laws[name], m.epsilon / 4, 0).holds for name in ("minus", "plus", "up")
    )


def test_releases_follow_the_exact_law(
    tiny: tuple[PureSparseHistogram, dict[str, dict[Output, Fraction]]],
) -> None:
    m, laws = tiny
    rng = SeededRandom(31)
    data = Counts.from_arrays([1, 5], [2, 1])
    seen: Counter[Output] = Counter()
    mixed = 0
    for _ in range(2500):
        r = m.release(data, rng)
        assert r.values is not None
        seen[tuple(zip(r.keys.tolist(), r.values.tolist(), strict=True))] += 1
        mixed += r.diagnostics["mixed"]
    assert chi2_pvalue(seen, laws["base"]) > ALPHA
    # power: the law of data with other keys (two records apart per key) is rejected
    assert chi2_pvalue(seen, pure_law(m, {3: 2, 5: 1})) < ALPHA
    assert stats.binomtest(mixed, 2500, 0.1).pvalue > ALPHA


def test_more_keys_than_n_are_released_with_the_exact_law(
    tiny: tuple[PureSparseHistogram, dict[str, dict[Output, Fraction]]],
) -> None:
    """Regression: the "plus" neighbour above (3 keys, n = 2) used to be refused with an
    InputDataError, so the exact check was about a law the mechanism never released and the
    refusal itself separated the neighbours. Its releases now follow that law; the samples
    reject the law of the same counts on other keys (power)."""
    m, laws = tiny
    rng = SeededRandom(37)
    data = Counts.from_arrays([1, 5, 6], [2, 1, 1])
    seen: Counter[Output] = Counter()
    for _ in range(1500):
        r = m.release(data, rng)
        assert r.values is not None
        seen[tuple(zip(r.keys.tolist(), r.values.tolist(), strict=True))] += 1
    assert chi2_pvalue(seen, laws["plus"]) > ALPHA
    assert chi2_pvalue(seen, pure_law(m, {3: 2, 5: 1, 6: 1})) < ALPHA


def test_large_universe_output_and_accuracy() -> None:
    """|X| = 2**64, n = 150: at most n bins, counts in [1, n], sorted 64-bit keys; the heavy keys
    are released within the per-query width a1 for beta3 = 1/20 in most runs (Theorem 6.6:
    failure <= beta1 + 2 beta2 + 2 beta3)."""
    m = PureSparseHistogram(1.0, universe_bits=64, count_bound=150)
    assert m.precision is not None and m.precision > 150 * 64
    alpha = Fraction(2**m.k, 2**m.k + 1)
    a1 = next(a for a in range(200) if 2 * alpha ** (a + 1) / (1 + alpha) <= Fraction(1, 20))
    keys = np.array([2**64 - 1, 2**32, 77], dtype=np.uint64)
    data = Counts.from_arrays(keys, [150, 140, 130])
    rng = SeededRandom(5)
    fails, runs = 0, 30
    for _ in range(runs):
        r = m.release(data, rng)
        assert r.values is not None and len(r) <= 150
        assert r.keys.dtype == np.uint64 and r.keys.tolist() == sorted(r.keys.tolist())
        assert ((r.values >= 1) & (r.values <= 150)).all()
        got = dict(zip(r.keys.tolist(), r.values.tolist(), strict=True))
        fails += abs(got.get(2**32, 0) - 140) > a1
    bound = float(m.beta1 + 2 * m.beta2 + Fraction(2, 20))
    assert stats.binomtest(fails, runs, bound, alternative="greater").pvalue > ALPHA


def test_strict_time_computes_both_branches() -> None:
    m = PureSparseHistogram(1.0, universe_bits=64, count_bound=30, strict_time=True, beta2="1/2")
    data = Counts.from_arrays([3], [30])
    outs = [m.release(data, SeededRandom(s)) for s in range(6)]
    assert {bool(r.diagnostics["mixed"]) for r in outs} == {True, False}
    for r in outs:
        assert "q_failed" in r.diagnostics  # KH'' ran in both branches
        assert len(r) <= 30


def test_metadata_and_parameters() -> None:
    m = PureSparseHistogram(0.5, universe_bits=64, count_bound=100)
    p = m.parameters()
    assert p["beta1"] == "1/100" and p["beta2"] == "1/1000" and p["universe_size"] == 2**64
    assert p["log2_tv_delta"] > 100 * 64
    assert m.guarantee().delta == 0
    r = m.release(Counts.from_arrays(np.array([1], dtype=np.uint64), [100]), SeededRandom(1))
    assert r.metadata["mechanism"] == "pure-sparse" and "fallback" not in r.metadata


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="nearest valid setting is 1/4"):
        PureSparseHistogram(1.0, beta2=0.3)
    with pytest.raises(ValidationError, match="nearest valid setting is epsilon=1"):
        PureSparseHistogram(2.0)
    with pytest.raises(ValidationError, match="parameter 'delta'"):
        PureSparseHistogram(1.0, -0.5)
    with pytest.raises(ValidationError, match="n = 0"):
        PureSparseHistogram(1.0, count_bound=0)
    with pytest.warns(UserWarning, match="4n"):
        small = PureSparseHistogram(1.0, universe_bits=4, count_bound=5)
    assert small.precision is None and len(small.release(Counts.from_arrays([1], [2]))) == 16
