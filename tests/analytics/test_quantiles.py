"""Private quantiles: accuracy within rigorous bounds, exact DP of a search step, bad input.

Accuracy bounds are computed here from the true data with the binomial quantile function
(scipy) and a union bound: with probability at least 1 - 1e-6 over the sampling, every prefix
estimate lies in the computed box, and then the answer must satisfy the stated rank guarantee.
The randomness is seeded, so each test is deterministic; the 1e-6 is the chance that a seed
falls outside the box (which would make the test fail for a correct implementation).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from privhist import SeededRandom
from privhist.accounting.profile import NOT_RELEASED, hockey_stick, product_distribution
from privhist.analytics.quantiles import (
    BinarySearchQuantiles,
    hierarchical_quantiles,
    private_quantiles,
)
from privhist.analytics.range_query import HierarchicalHistogram
from privhist.core.errors import InputDataError, ValidationError

FAILURE = 1e-6


def _box(count: Any, p: float, beta: float) -> tuple[Any, Any]:
    """[lower, upper] holding Binomial(count, p) except with probability 2 beta."""
    lo = stats.binom.ppf(beta, count, p)
    hi = stats.binom.isf(beta, count, p)
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


@pytest.mark.parametrize(("branching", "levels", "seed"), [(4, 4, 1), (2, 7, 2)])
def test_hierarchical_quantiles_within_the_bound(branching: int, levels: int, seed: int) -> None:
    values = np.random.default_rng(seed).beta(2.0, 5.0, 1_000_000)
    n = values.shape[0]
    hh = HierarchicalHistogram(1.0, 1e-8, branching=branching, levels=levels)
    rel = hh.release(values, SeededRandom(seed))
    qs = [0.1, 0.25, 0.5, 0.75, 0.9]
    answers = hierarchical_quantiles(rel, qs)
    h = rel.hierarchy
    p, tau = float(hh.sampling_rate), hh.threshold
    positions = np.floor(values * h.leaves).astype(np.int64)
    truth = np.searchsorted(np.sort(positions), np.arange(h.leaves + 1))  # values below t_j
    beta = FAILURE / (2 * (h.leaves + 2))
    x_lo, x_hi = _box(truth, p, beta)
    n_lo, n_hi = _box(n, p, beta)
    prune_num = levels * (branching - 1) * (tau - 1)  # at most L (beta - 1) withheld nodes
    prune_den = branching * (tau - 1)
    ratio_lo = np.maximum(x_lo - prune_num, 0) / n_hi
    ratio_hi = x_hi / max(n_lo - prune_den, 1)
    frac = truth / n
    e = float(max((frac - ratio_lo).max(), (ratio_hi - frac).max()))
    assert e < 0.15  # the bound is informative at this size
    for a in answers:
        j = h.snap(a.value)
        assert frac[j] >= a.q - e
        if j > 0:
            assert frac[j - 1] < a.q + e
        assert a.upper - a.lower == pytest.approx(h.leaf_width) or j == 0
    true_median = float(np.quantile(values, 0.5))
    assert abs(answers[2].value - true_median) < 0.1


@pytest.mark.parametrize(("steps", "seed"), [(8, 3), (10, 4)])
def test_binary_search_within_the_bound(steps: int, seed: int) -> None:
    values = np.random.default_rng(seed).beta(5.0, 2.0, 200_000)
    n = values.shape[0]
    qs = [0.3, 0.8]
    bs = BinarySearchQuantiles(1.0, 1e-8, steps=steps, quantiles=len(qs))
    res = bs.run(values, qs, SeededRandom(seed))
    m = bs.step_mechanism
    p, tau = float(m.sampling_rate), m.threshold
    grid = np.arange(1, 2**steps) / 2**steps  # every split point the search can visit
    below = np.searchsorted(np.sort(values), grid, side="left")
    beta = FAILURE / (4 * grid.shape[0] * len(qs))
    b_lo, b_hi = _box(below, p, beta)
    a_lo, a_hi = _box(n - below, p, beta)
    b_lo_p = np.where(b_lo >= tau, b_lo, 0.0)
    a_lo_p = np.where(a_lo >= tau, a_lo, 0.0)
    s_lo = b_lo_p / np.maximum(b_lo_p + a_hi, 1)
    s_hi = b_hi / np.maximum(b_hi + a_lo_p, 1)
    frac = below / n
    e = float(max((frac - s_lo).max(), (s_hi - frac).max()))
    assert e < 0.15  # informative at this size
    sorted_values = np.sort(values)

    def f(t: float) -> float:
        return float(np.searchsorted(sorted_values, t, side="left")) / n

    for a in res.answers:
        assert a.upper - a.lower == pytest.approx(2.0**-steps)
        assert f(a.upper) >= a.q - e
        assert f(a.lower) <= a.q + e
    g = res.metadata["guarantee"]
    assert g["composition"]["releases"] == steps * len(qs)
    assert g["epsilon"] <= 1.0 and g["delta"] <= 1e-8


def _key_dist(units: int, p: Fraction, tau: int) -> dict[Any, Fraction]:
    out: dict[Any, Fraction] = {NOT_RELEASED: Fraction(0)}
    for k in range(units + 1):
        pr = math.comb(units, k) * p**k * (1 - p) ** (units - k)
        if k >= tau:
            out[k] = pr
        else:
            out[NOT_RELEASED] += pr
    return out


def test_exact_dp_of_a_search_step_both_directions() -> None:
    bs = BinarySearchQuantiles(2.0, 0.1, steps=2, sampling_rate=0.25, threshold=3)
    m = bs.step_mechanism
    p, tau = Fraction(1, 4), 3
    assert m.sampling_rate == p and m.threshold == tau
    for below, above in ((4, 2), (3, 3), (6, 0)):
        big = product_distribution(_key_dist(below, p, tau), _key_dist(above, p, tau))
        for smaller in ((below - 1, above), (below, above - 1)):
            if min(smaller) < 0:
                continue
            small = product_distribution(
                _key_dist(smaller[0], p, tau), _key_dist(smaller[1], p, tau)
            )
            for pa, qa in ((big, small), (small, big)):
                assert float(hockey_stick(pa, qa, m.epsilon)) <= m.delta_exact


def test_private_quantiles_dispatch_and_metadata() -> None:
    values = np.random.default_rng(0).uniform(0, 100, 20_000)
    for method in ("hierarchical", "binary-search"):
        res = private_quantiles(
            values, [0.5], 1.0, 1e-8, lo=0, hi=100, method=method, levels=5, rng=SeededRandom(0)
        )
        assert res.metadata["method"] == method
        assert res.metadata["guarantee"]["epsilon"] <= 1.0
        assert "NOT private" in res.metadata["warning"]
        assert res.diagnostics["values"] == 20_000


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("q", [-0.1, 1.5, math.nan, "x", [], [0.5, 2.0], True])
def test_quantile_levels_must_be_in_0_1(q: Any) -> None:
    with pytest.raises(ValidationError, match=r"parameter 'q'"):
        private_quantiles(np.array([0.5]), q, 1.0, 1e-8)


def test_bad_method_and_shapes() -> None:
    with pytest.raises(ValidationError, match=r"parameter 'method'"):
        private_quantiles(np.array([0.5]), [0.5], 1.0, 1e-8, method="bisect")
    with pytest.raises(ValidationError, match=r"parameter 'branching'"):
        private_quantiles(np.array([0.5]), [0.5], 1.0, 1e-8, method="binary-search", branching=4)
    bs = BinarySearchQuantiles(1.0, 1e-8, steps=4, quantiles=2)
    with pytest.raises(ValidationError, match=r"2 quantile level\(s\), as budgeted"):
        bs.run(np.array([0.5]), [0.5], SeededRandom(0))
    with pytest.raises(ValidationError, match=r"parameter 'steps'"):
        BinarySearchQuantiles(1.0, 1e-8, steps=0)


@pytest.mark.parametrize("method", ["hierarchical", "binary-search"])
def test_out_of_range_values_clamp_and_empty(method: str) -> None:
    values = np.array([0.1, 0.2, 7.0, -1.0, 0.4])
    with pytest.raises(InputDataError, match=r"^2 values lie outside"):
        private_quantiles(values, [0.5], 1.0, 1e-8, method=method, levels=3, rng=SeededRandom(0))
    res = private_quantiles(
        values, [0.5], 1.0, 1e-8, method=method, levels=3, rng=SeededRandom(0), clamp=True
    )
    assert res.diagnostics["clamped"] == 2
    with pytest.raises(InputDataError, match="empty population"):
        private_quantiles(np.array([]), [0.5], 1.0, 1e-8, method=method, levels=3)
