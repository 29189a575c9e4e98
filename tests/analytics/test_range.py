"""Hierarchical sample-and-threshold histograms: decomposition, range answers, privacy."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats

from privhist import SeededRandom
from privhist.accounting.profile import NOT_RELEASED, hockey_stick, product_distribution
from privhist.analytics.hierarchy import Hierarchy, compose, decompose, split_budget
from privhist.analytics.range_query import HierarchicalHistogram, bracketed_count_interval
from privhist.core.errors import InputDataError, ValidationError

# -- decomposition --------------------------------------------------------------------------


def _leaves(beta: int, depth: int, level: int, index: int) -> range:
    width = beta ** (depth - level)
    return range(index * width, (index + 1) * width)


def _fewest_nodes(beta: int, depth: int, i: int, j: int) -> int:
    """Brute force: shortest tiling of leaves [i, j) by aligned tree nodes (levels 1..L)."""
    best = [math.inf] * (j - i + 1)
    best[0] = 0
    for x in range(i, j):
        if best[x - i] == math.inf:
            continue
        for level in range(1, depth + 1):
            width = beta ** (depth - level)
            if x % width == 0 and x + width <= j:
                best[x + width - i] = min(best[x + width - i], best[x - i] + 1)
    return int(best[j - i])


@pytest.mark.parametrize(
    ("beta", "depth"), [(2, 1), (2, 2), (2, 4), (3, 2), (3, 3), (4, 2), (5, 2)]
)
def test_decomposition_covers_exactly_with_fewest_nodes(beta: int, depth: int) -> None:
    n = beta**depth
    worst_prefix = worst_other = 0
    for i, j in itertools.combinations_with_replacement(range(n + 1), 2):
        nodes = decompose(beta, depth, i, j)
        covered = [leaf for lv, ix in nodes for leaf in _leaves(beta, depth, lv, ix)]
        assert sorted(covered) == list(range(i, j))  # exact cover, no overlaps
        assert len(nodes) == _fewest_nodes(beta, depth, i, j)
        if i == 0 and j == n:
            assert len(nodes) == beta
        elif i == 0 or j == n:
            worst_prefix = max(worst_prefix, len(nodes))
        else:
            worst_other = max(worst_other, len(nodes))
    assert worst_prefix == depth * (beta - 1)  # the paper's L (beta - 1), attained
    if depth > 1:
        assert worst_other <= (2 * depth - 1) * (beta - 1)


def test_paper_example_beta_4() -> None:
    # Section 4.2: [0, 0.7) with beta = 4 starts with [0, 1/4), [1/4, 2/4) on level 1 and
    # [8/16, 9/16), [9/16, 10/16), [10/16, 11/16) on level 2
    h = Hierarchy(0.0, 1.0, 4, 2)
    nodes = h.decompose(0, h.snap(0.7))  # 0.7 * 16 = 11.2 -> boundary 11
    ranges = sorted(h.node_range(lv, ix) for lv, ix in nodes)
    assert ranges == [(0, 0.25), (0.25, 0.5), (0.5, 0.5625), (0.5625, 0.625), (0.625, 0.6875)]


# -- exact confidence intervals -------------------------------------------------------------


@pytest.mark.parametrize(("c", "p", "slack"), [(30, 0.3, 0), (12, 0.5, 0), (40, 0.1, 3)])
def test_count_interval_covers_with_the_stated_probability(c: int, p: float, slack: int) -> None:
    # exact coverage: sum over every outcome x of Bin(c, p); the pruned observation is the
    # worst case x - slack (the interval is computed from what was observed)
    coverage = 0.0
    for x in range(c + 1):
        obs = max(0, x - slack)
        lo, hi = bracketed_count_interval(obs, slack, p, 0.9)
        if lo <= c <= hi:
            coverage += float(stats.binom.pmf(x, c, p))
    assert coverage >= 0.9


# -- releases ---------------------------------------------------------------------------------


def test_range_answers_cover_the_truth() -> None:
    gen = np.random.default_rng(7)
    values = gen.beta(2.0, 5.0, 50_000)
    hh = HierarchicalHistogram(1.0, 1e-8, branching=4, levels=3, confidence=0.95)
    queries = [(0.0, 0.25), (0.1, 0.4), (0.3, 1.0), (0.5, 0.55)]
    misses = trials = 0
    for seed in range(40):
        rel = hh.release(values, SeededRandom(seed))
        for a, b in queries:
            ans = rel.range(a, b)
            lo_v, hi_v = ans.range
            truth = int(((values >= lo_v) & (values < hi_v)).sum())
            trials += 1
            misses += not (ans.lower <= truth <= ans.upper)
            assert ans.pruning_bound <= ans.lemma_bound
    # each interval misses with probability <= 5%; 160 trials: P[misses > 20] < 1e-4
    assert misses <= 20


def test_prefix_sums_agree_with_decomposition() -> None:
    values = np.random.default_rng(3).uniform(0, 10, 20_000)
    hh = HierarchicalHistogram(1.0, 1e-8, lo=0, hi=10, branching=3, levels=3)
    rel = hh.release(values, SeededRandom(1))
    h = rel.hierarchy
    sums = rel.prefix_sampled(np.arange(h.leaves + 1))
    for j in range(h.leaves + 1):
        direct = 0
        for lv, ix in h.decompose(0, j):
            if rel.released(lv, ix):
                direct += int(rel.level_sum(lv, ix, ix + 1))
        assert sums[j] == direct
    assert sums[-1] == rel.total_sampled


# -- privacy ----------------------------------------------------------------------------------


def _key_dist(units: int, p: Fraction, tau: int) -> dict[Any, Fraction]:
    """Thresholded Binomial(units, p), written out independently of the library."""
    out: dict[Any, Fraction] = {NOT_RELEASED: Fraction(0)}
    for k in range(units + 1):
        pr = math.comb(units, k) * p**k * (1 - p) ** (units - k)
        if k >= tau:
            out[k] = pr
        else:
            out[NOT_RELEASED] += pr
    return out


def _release_dist(positions: list[int], beta: int, depth: int, p: Fraction, tau: int) -> Any:
    """Exact joint distribution of every bucket of every level (buckets in a fixed order)."""
    parts = []
    for level in range(1, depth + 1):
        width = beta ** (depth - level)
        for bucket in range(beta**level):
            units = sum(1 for x in positions if x // width == bucket)
            parts.append(_key_dist(units, p, tau))
    return product_distribution(*parts)


def test_exact_dp_of_the_levels_both_directions() -> None:
    hh = HierarchicalHistogram(2.0, 0.1, branching=2, levels=2, sampling_rate=0.25, threshold=3)
    comp = hh.composition()
    p, tau = Fraction(1, 4), 3
    assert hh.sampling_rate == p and hh.threshold == tau
    data = [0, 0, 0, 1, 1, 2, 2, 2, 3]  # leaf positions of nine clients
    for removed in (0, 1, 3):
        smaller = list(data)
        smaller.remove(removed)
        big = _release_dist(data, 2, 2, p, tau)
        small = _release_dist(smaller, 2, 2, p, tau)
        for pa, qa in ((big, small), (small, big)):
            assert float(hockey_stick(pa, qa, comp.basic.epsilon)) <= comp.basic.delta
        # one level alone meets the per-level guarantee
        lv1_big = _release_dist([x // 2 for x in data], 2, 1, p, tau)
        lv1_small = _release_dist([x // 2 for x in smaller], 2, 1, p, tau)
        for pa, qa in ((lv1_big, lv1_small), (lv1_small, lv1_big)):
            d = hockey_stick(pa, qa, hh.level_mechanism.epsilon)
            assert float(d) <= hh.level_mechanism.delta_exact


def _kov_delta(eps: float, delta: float, k: int, eps_total: float) -> Any:
    """Kairouz-Oh-Viswanath (2015) Theorem 3.3 at any eps_total, written out with mpmath."""
    with mpmath.workdps(50):
        e = mpmath.mpf(eps)
        s = mpmath.mpf(0)
        for ell in range(k + 1):
            term = mpmath.exp((k - ell) * e) - mpmath.exp(eps_total) * mpmath.exp(ell * e)
            if term > 0:
                s += mpmath.binomial(k, ell) * term / (1 + mpmath.exp(e)) ** k
        keep = (1 - mpmath.mpf(delta)) ** k
        return 1 - keep + keep * s


@pytest.mark.parametrize("levels", [4, 20])
def test_composition_numbers(levels: int) -> None:
    hh = HierarchicalHistogram(1.0, 1e-8, levels=levels, composition="basic")
    comp = hh.composition()
    m = hh.level_mechanism
    e_l, d_l = split_budget(1.0, 1e-8, levels)
    assert m.epsilon == e_l and Fraction(e_l) * levels <= 1 and m.delta_exact <= d_l
    assert comp.basic.epsilon == pytest.approx(levels * m.epsilon, rel=1e-15)
    assert comp.basic.delta == pytest.approx(levels * m.delta_exact, rel=1e-12)
    assert comp.basic.epsilon <= 1.0 and comp.basic.delta <= 1e-8
    assert comp.tight.epsilon <= comp.basic.epsilon and comp.tight.delta == 1e-8
    # the tight point is a valid per-release guarantee and composes to what is claimed
    src = comp.tight_from
    assert float(_kov_delta(src.epsilon, src.delta, levels, comp.tight.epsilon)) <= 1e-8 * (
        1 + 1e-9
    )
    if levels == 20:
        assert comp.tight.epsilon < 0.95  # many releases: the optimal bound gains


@pytest.mark.parametrize("levels", [2, 4, 8, 20])
def test_the_pld_split_spends_the_budget_the_basic_split_leaves(levels: int) -> None:
    """By default each level takes the largest epsilon found whose certified PLD composition
    over the levels is within the budget: several times epsilon / L, and the guarantee (what
    is stated and charged) is that composition, within (1, 1e-8)."""
    hh = HierarchicalHistogram(1.0, 1e-8, levels=levels)
    m, comp = hh.level_mechanism, hh.composition()
    assert m.epsilon >= 1.8 / levels * (2 if levels >= 8 else 1)
    assert m.delta_exact <= split_budget(1.0, 1e-8, levels)[1]
    g = hh.guarantee()
    assert g == comp.pld_certified and comp.guarantee_rule == "pld_certified"
    assert 0.9 < g.epsilon <= 1.0 and g.delta <= 1e-8
    assert comp.basic.epsilon == pytest.approx(levels * m.epsilon)  # far above the budget
    # the paper's split is kept on request, and with the release's parameters fixed
    basic = HierarchicalHistogram(1.0, 1e-8, levels=levels, composition="basic")
    assert basic.level_mechanism.epsilon == split_budget(1.0, 1e-8, levels)[0]
    assert basic.level_mechanism.sampling_rate < m.sampling_rate
    bm = basic.level_mechanism
    fixed = HierarchicalHistogram(
        1.0, 1e-8, levels=levels, sampling_rate=bm.sampling_rate, threshold=bm.threshold
    )
    assert fixed.level_mechanism.epsilon == split_budget(1.0, 1e-8, levels)[0]
    assert fixed.guarantee().epsilon <= 1.0
    assert hh.metadata()["guarantee"]["epsilon"] == g.epsilon
    assert hh.metadata()["parameters"]["composition"] == "pld"
    with pytest.raises(ValidationError, match="'composition' of HierarchicalHistogram"):
        HierarchicalHistogram(1.0, 1e-8, levels=levels, composition="advanced")


@pytest.mark.parametrize("epsilon", [5.0, 10.0])
def test_the_pld_split_at_large_epsilon_stays_within_the_budget(epsilon: float) -> None:
    """Large budgets push the search to per-level epsilons whose profile arithmetic fails;
    such points are not candidates, and the split still spends more than epsilon / L."""
    hh = HierarchicalHistogram(epsilon, 1e-8, levels=8)
    g = hh.guarantee()
    assert g.epsilon <= epsilon and g.delta <= 1e-8
    assert hh.level_mechanism.epsilon > 4 * epsilon / 8 * (0.5 if epsilon > 5 else 1)


def _level_pair(counts: tuple[int, ...], p: Fraction, tau: int) -> tuple[Any, Any]:
    """The exact outputs of the one bucket per level that holds a client, with it (counts)
    and without it (counts - 1); the other buckets are the same on both sides and cancel."""
    with_it = product_distribution(*(_key_dist(c, p, tau) for c in counts))
    without = product_distribution(*(_key_dist(c - 1, p, tau) for c in counts))
    return with_it, without


@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 1e-3), (1.0, 1e-3)])
def test_exact_dp_of_the_pld_split_both_directions(epsilon: float, delta: float) -> None:
    """The composed guarantee of the default split, checked by exact hockey-stick divergence
    of two levels over every pair of counts (1..tau + 9) of the client's buckets, adding and
    removing it; half the epsilon fails (the check has power)."""
    hh = HierarchicalHistogram(epsilon, delta, branching=2, levels=2)
    m, g = hh.level_mechanism, hh.guarantee()
    p, tau = m.sampling_rate, m.threshold
    assert m.epsilon > epsilon / 2 and g.epsilon <= epsilon and g.delta <= delta
    worst = worst_half = Fraction(0)
    for counts in itertools.product(range(1, tau + 10), repeat=2):
        big, small = _level_pair(counts, p, tau)
        for pa, qa in ((big, small), (small, big)):
            worst = max(worst, hockey_stick(pa, qa, g.epsilon))
            worst_half = max(worst_half, hockey_stick(pa, qa, g.epsilon / 2))
    assert worst <= g.delta
    assert worst_half > 2 * g.delta


def test_compose_rejects_a_total_delta_below_basic() -> None:
    with pytest.raises(ValidationError, match="total_delta"):
        compose(Fraction(1, 20), 14, 0.25, 2e-9, 4, total_delta=1e-9)


# -- bad input ----------------------------------------------------------------------------------


def test_values_outside_the_range_fail_unless_clamped() -> None:
    hh = HierarchicalHistogram(1.0, 1e-8, lo=0, hi=1, levels=3)
    bad = np.array([0.2, 1.0, -3.0, 0.5])
    with pytest.raises(
        InputDataError, match=r"^2 values lie outside the public range \[0, 1\).*first is 1"
    ):
        hh.release(bad, SeededRandom(0))
    rel = hh.release(bad, SeededRandom(0), clamp=True)
    assert rel.diagnostics["clamped"] == 2 and rel.diagnostics["values"] == 4
    rel = hh.release(np.array([0.2, math.nan]), SeededRandom(0))
    assert rel.diagnostics["dropped_missing"] == 1


def test_empty_population() -> None:
    hh = HierarchicalHistogram(1.0, 1e-8, levels=3)
    for values in (np.array([]), np.array([math.nan])):
        with pytest.raises(InputDataError, match="empty population"):
            hh.release(values, SeededRandom(0))


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"delta": 0}, "delta"),
        ({"delta": 1}, "delta"),
        ({"branching": 1}, "branching"),
        ({"levels": 0}, "levels"),
        ({"levels": 23}, "levels"),
        ({"lo": 1.0, "hi": 1.0}, "hi"),
        ({"lo": math.nan}, "lo"),
        ({"threshold": 0}, "threshold"),
        ({"sampling_rate": 0.5}, "sampling_rate"),  # above 1 - e^-(1/8)
    ],
)
def test_bad_parameters(kwargs: dict[str, Any], param: str) -> None:
    args = {"epsilon": 1.0, "delta": 1e-8, **kwargs}
    with pytest.raises(ValidationError, match=rf"parameter '{param}'"):
        HierarchicalHistogram(**args)


def test_bad_queries() -> None:
    rel = HierarchicalHistogram(1.0, 1e-8, levels=3).release(np.full(100, 0.5), SeededRandom(0))
    for a, b in ((0.5, 0.2), (-0.1, 0.5), (0.0, 1.5), (math.nan, 0.5)):
        with pytest.raises(ValidationError):
            rel.range(a, b)
