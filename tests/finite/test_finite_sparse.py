"""KH'' and SparseHistogram (Algorithm 7, Theorems 6.4 and 6.5): exact joint distribution on a tiny
universe, privacy, accuracy against Theorem 6.4's bounds, bad input.

The truth for Proposition 6.2 is KeepHeavy (Algorithm 4) enumerated over every vector of noisy
counts of the whole universe; the sparse samplers never draw those vectors.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter, defaultdict
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import Neighbouring, SeededRandom, ValidationError
from privhist.accounting.profile import LogRational, check_dp
from privhist.core.data import Counts
from privhist.core.errors import InputDataError
from privhist.mechanisms.finite.sparse import KHPrime, SparseHistogram, one_over_k

Output = tuple[tuple[int, int], ...]


def keep_heavy_truth(pmfs: list[list[Fraction]], n: int) -> dict[Output, Fraction]:
    """Algorithm 4 over the universe 0..len(pmfs)-1, every noisy vector enumerated."""
    out: dict[Output, Fraction] = defaultdict(Fraction)
    for values in itertools.product(*[range(len(p)) for p in pmfs]):
        prob = Fraction(1)
        for pmf, v in zip(pmfs, values, strict=True):
            prob *= pmf[v]
        if not prob:
            continue
        cut = sorted(values, reverse=True)[n]
        out[tuple((x, v) for x, v in enumerate(values) if v > cut)] += prob
    return dict(out)


def truth_for(m: SparseHistogram, data: dict[int, int]) -> dict[Output, Fraction]:
    size = m.universe.size
    pmfs = [m.sampler.pmf(min(data.get(x, 0), m.n)) for x in range(size)]
    return keep_heavy_truth(pmfs, m.n)


def sample_outputs(
    m: SparseHistogram, data: dict[int, int], draws: int, seed: int
) -> Counter[Output]:
    rng = SeededRandom(seed)
    counts = Counts.from_arrays(list(data), list(data.values()))
    seen: Counter[Output] = Counter()
    for _ in range(draws):
        r = m.release(counts, rng)
        assert r.values is not None
        keys = r.keys.tolist()
        assert keys == sorted(keys) and len(keys) <= m.n
        seen[tuple(zip(keys, r.values.tolist(), strict=True))] += 1
    return seen


def chi2_pvalue(seen: Counter[Output], model: dict[Output, Fraction]) -> float:
    total = sum(seen.values())
    assert set(seen) <= set(model), "an output outside the analysed support"
    support = sorted(model, key=lambda k: -model[k])
    obs = np.array([seen.get(k, 0) for k in support], dtype=float)
    exp = np.array([float(model[k]) for k in support]) * total
    keep = exp >= 5
    o, e = obs[keep], exp[keep]
    if exp[~keep].sum() > 0:
        o, e = np.append(o, obs[~keep].sum()), np.append(e, exp[~keep].sum())
    return float(stats.chisquare(o, e * (o.sum() / e.sum())).pvalue)


TINY = {"universe_bits": 3, "count_bound": 2}  # |X| = 8 = 4n
DATA = {1: 2, 5: 1}


@pytest.mark.parametrize("tv_delta", [None, "1/1000"])
def test_kh_double_prime_is_keep_heavy_on_a_tiny_universe(tv_delta: str | None) -> None:
    """Proposition 6.2 (KH' = KeepHeavy) for our KH'' and its Theorem 6.5 approximation: releases
    against the enumerated KeepHeavy distribution (Q fails with probability < 2**-900 here), and
    the samples reject KeepHeavy at a different noise level (power)."""
    m = SparseHistogram(0.6, **TINY, tv_delta=tv_delta)
    assert m.precision is None if tv_delta is None else m.precision >= 15
    truth = truth_for(m, DATA)
    assert sum(truth.values()) == 1
    seen = sample_outputs(m, DATA, 3000, seed=17)
    assert chi2_pvalue(seen, truth) > ALPHA
    other = SparseHistogram(0.15, **TINY)
    assert chi2_pvalue(seen, truth_for(other, DATA)) < ALPHA


def test_kh_double_prime_is_exactly_private_on_a_tiny_universe() -> None:
    """(eps, 0)-DP of the released distribution (KeepHeavy; Q's failure has a data-independent
    probability and adds the same mass to the empty output on both sides), both directions, with
    the ratio 1 + 2**-K the mechanism claims; a mechanism two K-steps weaker fails the same
    check."""
    m = SparseHistogram(0.3, **TINY)
    assert m.k == 2
    ratio = LogRational(m.ratio)
    base = {1: 2, 5: 1}
    neighbours = [{1: 2}, {1: 2, 5: 1, 6: 1}, {1: 1, 5: 1}, {1: 2, 5: 2}]
    p = truth_for(m, base)
    weak = SparseHistogram(0.3, **TINY)
    weak.sampler = weak.sampler.with_k(m.k - 2)
    caught = False
    for other in neighbours:
        assert check_dp(p, truth_for(m, other), ratio, 0).holds
        caught |= not check_dp(truth_for(weak, base), truth_for(weak, other), ratio, 0).holds
    assert caught


def test_more_keys_than_n_are_released_as_keep_heavy() -> None:
    """Regression: data with more than n keys of positive count used to be refused with an
    InputDataError. One added record can cross that line, and "refused" against "released" is a
    distinguishing event of probability 1: no (eps, 0) guarantee under add/remove neighbours.
    KeepHeavy (Algorithm 4) is defined for every dataset, so the release now follows its law for
    n + 1 keys (empty bins completed beyond Q when needed) and for |X \\ A| < n + 1 (KeepHeavy
    over the whole universe); the samples reject KeepHeavy at a quarter of eps (power), and the
    exact law of the larger dataset is (eps, 0)-close to its neighbour's in both directions."""
    m = SparseHistogram(0.6, **TINY)
    other = SparseHistogram(0.15, **TINY)
    many = {0: 2, 1: 1, 2: 2, 3: 1, 4: 1, 5: 2, 6: 1}  # 7 keys: 1 empty bin < n + 1
    for data, seed in (({1: 2, 5: 1, 6: 1}, 23), (many, 29)):
        truth = truth_for(m, data)
        seen = sample_outputs(m, data, 1500, seed)
        assert chi2_pvalue(seen, truth) > ALPHA
        assert chi2_pvalue(seen, truth_for(other, data)) < ALPHA
    fewer = {k: v for k, v in many.items() if k != 6}
    ratio = LogRational(m.ratio)
    assert check_dp(truth_for(m, many), truth_for(m, fewer), ratio, 0).holds


def _sequence_law(m: SparseHistogram, elems: list[int], draws: int, seed: int) -> Counter[Any]:
    rng = SeededRandom(seed)
    a = np.array(elems, dtype=np.uint64)
    no_fresh = np.array(elems[:3], dtype=np.uint64)  # Q held no empty element at all
    return Counter(tuple(m._empty_bins(no_fresh, a, rng).tolist()) for _ in range(draws))


@pytest.mark.parametrize(("n", "present"), [(2, 12), (1, 6)])
def test_empty_bins_completed_beyond_q_are_uniform(n: int, present: int) -> None:
    """(q_0, ..., q_n) must be a uniform sequence of distinct elements of X \\ A (Algorithm 5,
    step 3). With more than n keys Q may hold fewer than n + 1 empty elements; the rest are drawn
    uniformly from the remaining ones: by enumeration of a pool (12 keys of 16, n = 2) or by
    rejection from X (6 keys of 16, n = 1). Chi-square against the uniform law on every
    sequence, and a power check against a law favouring increasing sequences."""
    m = SparseHistogram(0.5, universe_bits=4, count_bound=n)
    elems = list(range(present))
    cells = list(itertools.permutations(range(present, 16), n + 1))
    draws = 60 * len(cells)
    seen = _sequence_law(m, elems, draws, seed=40 + n)
    assert set(seen) <= set(cells)
    uniform = {c: Fraction(1, len(cells)) for c in cells}
    assert chi2_pvalue(seen, uniform) > ALPHA
    tilted = {c: Fraction(4 if list(c) == sorted(c) else 1) for c in cells}
    total = sum(tilted.values())
    assert chi2_pvalue(seen, {c: w / total for c, w in tilted.items()}) < ALPHA


def _accuracy_widths(m: SparseHistogram, beta3: Fraction) -> tuple[int, int]:
    """a1, a2: smallest a with 2 alpha**(a+1)/(1+alpha) <= beta3 (per query) and
    <= beta3/|X| (simultaneous): the bounded geometric tail (Theorem 4.5), by direct search."""
    alpha = Fraction(2**m.k, 2**m.k + 1)

    def smallest(beta: Fraction) -> int:
        a = 0
        while 2 * alpha ** (a + 1) / (1 + alpha) > beta:
            a += 1
        return a

    return smallest(beta3), smallest(beta3 / m.universe.size)


def test_accuracy_against_theorem_6_4_by_simulation() -> None:
    """|X| = 2**64, n = 200, eps = 1: per-query (a1, beta1 + 2 beta3 + delta) on a count above
    2 a2, and simultaneous (2 a2, beta1 + beta3 + delta) over every key of X (absent keys count
    0), with beta3 = 1/20; the observed failure rates must not be significantly above."""
    m = SparseHistogram(1.0, universe_bits=64, count_bound=200, tv_delta="1/1000000")
    beta3 = Fraction(1, 20)
    a1, a2 = _accuracy_widths(m, beta3)
    assert 2 * a2 < 180 <= m.n
    data = {7: 180, 2**40: 190, 12345: 3}
    counts = Counts.from_arrays(list(data), list(data.values()))
    rng = SeededRandom(8)
    runs, per_query_fail, simultaneous_fail = 60, 0, 0
    for _ in range(runs):
        r = m.release(counts, rng)
        assert r.values is not None
        got = dict(zip(r.keys.tolist(), r.values.tolist(), strict=True))
        per_query_fail += abs(got.get(7, 0) - 180) > a1
        errors = [abs(got.get(k, 0) - c) for k, c in data.items()]
        errors += [v for k, v in got.items() if k not in data]
        simultaneous_fail += max(errors) > 2 * a2
    tv = m.tv_delta or 0
    p_query = float(m.beta1 + 2 * beta3 + tv)
    p_simul = float(m.beta1 + beta3 + tv)
    alt = "greater"
    assert stats.binomtest(per_query_fail, runs, p_query, alternative=alt).pvalue > ALPHA
    assert stats.binomtest(simultaneous_fail, runs, p_simul, alternative=alt).pvalue > ALPHA


def test_heavy_keys_are_released_and_order_is_canonical() -> None:
    m = SparseHistogram(1.0, universe_bits=64, count_bound=200, tv_delta="1/1000000")
    keys64 = np.array([2**63 + 5, 9], dtype=np.uint64)  # a list would become float64
    r = m.release(Counts.from_arrays(keys64, [200, 190]), SeededRandom(1))
    keys = r.keys.tolist()
    assert {2**63 + 5, 9} <= set(keys) and keys == sorted(keys) and len(keys) <= 200
    assert r.keys.dtype == np.uint64 and r.values is not None and (r.values >= 1).all()
    assert r.metadata["mechanism"] == "sparse"
    assert r.metadata["guarantee"]["delta"] > 0  # (eps, (e**eps + 1) delta)


@pytest.mark.parametrize("eps", [1.0, 0.5, 0.3])
def test_stated_delta_is_not_rounded_below_theorem_6_5(eps: float) -> None:
    """Regression: the stated delta, (e**eps + 1) tv_delta bounded by (2 + eps + eps**2)
    tv_delta, was converted to the nearest float, up to half an ulp below the bound. It must be
    at least (e**eps + 1) tv_delta, with e**eps from its series in exact rationals."""
    for k in (5 if eps == 1.0 else 3, 7, 999, 10**6):
        m = SparseHistogram(eps, universe_bits=64, count_bound=10, tv_delta=f"1/{k}")
        assert m.tv_delta == Fraction(1, k)
        e = Fraction(eps)
        exp_eps = sum((e**i / math.factorial(i) for i in range(30)), start=Fraction(0))
        assert Fraction(m.guarantee().delta) >= (exp_eps + 1) * m.tv_delta
        assert Fraction(m.guarantee().delta) >= (2 + e + e * e) * m.tv_delta
    if eps == 1.0:  # (e + 1) / 3 > 1: no valid guarantee, refused when built
        with pytest.raises(ValidationError, match="parameter 'tv_delta'"):
            SparseHistogram(eps, universe_bits=64, count_bound=10, tv_delta="1/3")


def test_strict_time_gives_the_same_release() -> None:
    """strict_time runs every loop to its bound; the randomness it consumes for the release is
    the same words in the same order up to OrdSample's padding, so the outputs agree."""
    kwargs: dict[str, Any] = {"universe_bits": 64, "count_bound": 40, "tv_delta": "1/1000"}
    lazy, strict = SparseHistogram(1.0, **kwargs), SparseHistogram(1.0, **kwargs, strict_time=True)
    data = Counts.from_arrays([3, 4], [40, 35])
    for seed in range(3):
        a, b = lazy.release(data, SeededRandom(seed)), strict.release(data, SeededRandom(seed))
        assert a.keys.tolist() == b.keys.tolist()


def test_domain_universe() -> None:
    dom = [f"k{i:02d}" for i in range(40)]
    m = SparseHistogram(1.0, domain=dom, count_bound=10)
    r = m.release(Counts.from_arrays(["k03", "k17"], [10, 9]), SeededRandom(2))
    assert r.keys.tolist() == sorted(r.keys.tolist()) and set(r.keys.tolist()) <= set(dom)
    with pytest.raises(InputDataError, match="outside the universe"):
        m.release(Counts.from_arrays(["zz"], [3]), SeededRandom(2))


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="nearest valid setting is epsilon=1"):
        SparseHistogram(1.5, universe_bits=64)
    with pytest.raises(ValidationError, match="nearest valid setting is 1/34"):
        SparseHistogram(1.0, universe_bits=64, beta1=0.03)
    with pytest.raises(ValidationError, match="parameter 'tv_delta'"):
        SparseHistogram(1.0, universe_bits=64, tv_delta="2/7")
    with pytest.raises(ValidationError, match="n = 0"):
        SparseHistogram(1.0, universe_bits=64, count_bound=0)
    for bits in (0, 65, True, None):
        with pytest.raises(ValidationError, match="parameter 'universe_bits'"):
            SparseHistogram(1.0, universe_bits=bits)
    m = SparseHistogram(1.0, universe_bits=16, count_bound=3)
    with pytest.raises(InputDataError, match="outside the universe"):
        m.release(Counts.from_arrays([70000], [2]), SeededRandom(1))
    with pytest.raises(InputDataError, match="outside the universe"):
        m.release(Counts.from_arrays([2.5], [2]), SeededRandom(1))
    with pytest.raises(InputDataError, match="outside the universe"):
        m.release(Counts.from_arrays(["a"], [2]), SeededRandom(1))
    r = m.release(Counts.from_arrays([1, 2, 3, 4], [1, 1, 1, 1]), SeededRandom(1))
    assert len(r) <= 3  # more than n keys: released (KeepHeavy), never refused
    assert one_over_k("1/8", "f", "beta1") == Fraction(1, 8)
    assert one_over_k(0.01, "f", "beta1") == Fraction(1, 100)


def test_small_universe_falls_back_to_basic_histogram() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = SparseHistogram(1.0, universe_bits=3, count_bound=5)  # 8 < 4n = 20
    assert any("BasicHistogram" in str(w.message) for w in caught)
    r = m.release(Counts.from_arrays([2], [5]), SeededRandom(4))
    assert r.keys.tolist() == list(range(8))  # every bin of X, as Algorithm 3
    assert "BasicHistogram" in r.metadata["fallback"]
    assert m.parameters()["fallback"] == "basic-geometric"


def test_user_level_relation_uses_the_histogram_k() -> None:
    m = SparseHistogram(
        0.8, 0.0, Neighbouring.user(2, 2), universe_bits=64, count_bound=50, tv_delta="1/1000000000"
    )
    assert m.k == 3  # ceil(log2(l1 / eps)) with l1 = 4


@pytest.mark.parametrize(("tv_delta", "data"), [(None, DATA), ("1/1000", {1: 2, 5: 1, 6: 1})])
def test_kh_prime_is_keep_heavy_on_a_tiny_universe(
    tv_delta: str | None, data: dict[int, int]
) -> None:
    """Proposition 6.2 for KH' (Algorithm 5): releases against the enumerated KeepHeavy law
    (Algorithm 4) at alpha 1e-6, and the same samples reject KeepHeavy at a quarter of eps
    (power). KH' has no sequence Q, so no failure mass."""
    m = KHPrime(0.6, **TINY, tv_delta=tv_delta)
    assert "beta1" not in m.parameters()
    truth = truth_for(m, data)
    assert sum(truth.values()) == 1
    seen = sample_outputs(m, data, 3000, seed=31)
    assert chi2_pvalue(seen, truth) > ALPHA
    assert chi2_pvalue(seen, truth_for(KHPrime(0.15, **TINY), data)) < ALPHA


def test_kh_prime_is_exactly_private_on_a_tiny_universe() -> None:
    """(eps, 0)-DP of KH''s law (KeepHeavy's, enumerated) in both directions for add, remove
    and change neighbours, with the ratio the mechanism claims; two K-steps weaker fails."""
    m = KHPrime(0.3, **TINY)
    ratio = LogRational(m.ratio)
    base = {1: 2, 5: 1}
    weak = KHPrime(0.3, **TINY)
    weak.sampler = weak.sampler.with_k(m.k - 2)
    caught = False
    for other in ({1: 2}, {1: 2, 5: 1, 6: 1}, {1: 1, 5: 1}, {1: 2, 5: 2}):
        p, q = truth_for(m, base), truth_for(m, other)
        assert check_dp(p, q, ratio, 0).holds and check_dp(q, p, ratio, 0).holds
        wp, wq = truth_for(weak, base), truth_for(weak, other)
        caught |= not (check_dp(wp, wq, ratio, 0).holds and check_dp(wq, wp, ratio, 0).holds)
    assert caught


@pytest.mark.parametrize("present", [[], [0, 3, 4], [1, 2, 5, 6, 7]])
def test_kh_prime_empty_elements_are_a_uniform_distinct_sequence(present: list[int]) -> None:
    """Step 3 of Algorithm 5: every ordered sequence of n + 1 = 3 distinct elements outside A
    (|X| = 8) is equally likely (chi-square at alpha 1e-6 over all of them, counted by
    brute force), no element of A appears; a sequence sorted by rank is rejected (power)."""
    m = KHPrime(0.5, **TINY)
    elems = np.array(present, dtype=np.uint64)
    free = [x for x in range(8) if x not in present]
    support = list(itertools.permutations(free, 3))
    rng = SeededRandom(5)
    seen: Counter[tuple[int, ...]] = Counter()
    for _ in range(30 * len(support)):
        seq = tuple(m.distinct_empty_elements(elems, rng).tolist())
        assert len(set(seq)) == 3 and not set(seq) & set(present)
        seen[seq] += 1
    obs = np.array([seen.get(s, 0) for s in support], dtype=float)
    assert stats.chisquare(obs).pvalue > ALPHA
    ordered = Counter(tuple(sorted(s)) for s in seen.elements())
    obs2 = np.array([ordered.get(s, 0) for s in support], dtype=float)
    assert stats.chisquare(obs2).pvalue < ALPHA
