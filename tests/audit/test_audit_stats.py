"""Clopper-Pearson bounds and the event-based lower bounds on (epsilon, delta)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privhist import ValidationError
from privhist.audit.stats import audit_samples, clopper_pearson_lower, clopper_pearson_upper


@pytest.mark.parametrize("n", [7, 40])
@pytest.mark.parametrize("p", [0.02, 0.3, 0.9])
def test_clopper_pearson_coverage_is_exact_by_enumeration(n: int, p: float) -> None:
    """Pr[lower > p] <= a and Pr[upper < p] <= a, summed over every outcome k of Bin(n, p)."""
    a = 0.05
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, p)
    lo, hi = clopper_pearson_lower(k, n, a), clopper_pearson_upper(k, n, a)
    assert pmf[lo > p].sum() <= a + 1e-12
    assert pmf[hi < p].sum() <= a + 1e-12
    # and they are not trivially loose: the interval excludes p for some outcome
    assert (lo > p).any() or (hi < p).any()


def test_clopper_pearson_closed_forms() -> None:
    n, a = 50, 0.01
    assert float(clopper_pearson_upper(0, n, a)) == pytest.approx(1 - a ** (1 / n), rel=1e-9)
    assert float(clopper_pearson_lower(n, n, a)) == pytest.approx(a ** (1 / n), rel=1e-9)


def _rr(eps: float, bit: int, n: int, gen: np.random.Generator) -> np.ndarray:
    """Randomised response: report ``bit`` with probability e^eps / (1 + e^eps)."""
    keep = gen.random(n) < math.exp(eps) / (1 + math.exp(eps))
    out = np.where(keep, bit, 1 - bit)
    return np.stack([out, np.zeros(n, dtype=np.int64)], axis=1).astype(np.int64)


def test_randomised_response_is_bounded_on_both_sides_of_its_epsilon() -> None:
    gen = np.random.default_rng(11)
    eps = math.log(3)
    a, b = _rr(eps, 0, 200_000, gen), _rr(eps, 1, 200_000, gen)
    over = audit_samples(a, b, eps * 0.8, 0.0)
    assert over.violation and over.epsilon_lower > eps * 0.8
    ok = audit_samples(a, b, eps * 1.1, 0.0)
    assert not ok.violation
    assert eps * 0.9 < ok.epsilon_lower <= eps  # tight and below the truth


def test_the_lower_bound_exceeds_the_truth_rarely() -> None:
    """Soundness: over 300 independent audits at 90% confidence, eps_lower > true eps happens in
    at most ~10% of them (binomial test at alpha = 1e-6)."""
    gen = np.random.default_rng(5)
    eps = math.log(3)
    bad = 0
    trials = 300
    for _ in range(trials):
        r = audit_samples(_rr(eps, 0, 3000, gen), _rr(eps, 1, 3000, gen), eps, 0.0, confidence=0.9)
        bad += r.epsilon_lower > eps
    assert stats.binomtest(bad, trials, 0.1, alternative="greater").pvalue > 1e-6


def test_an_event_impossible_on_one_side_bounds_delta() -> None:
    gen = np.random.default_rng(3)
    n = 100_000
    first = np.zeros((n, 2), dtype=np.int64)
    first[:, 0] = gen.random(n) < 0.01  # output 1 with probability 0.01 ...
    second = np.zeros((n, 2), dtype=np.int64)  # ... and never on the other side
    r = audit_samples(first, second, 1.0, 1e-3)
    assert r.violation
    assert 1e-3 < r.delta_lower < 0.01
    assert not audit_samples(first, second, 1.0, 0.02).violation


def test_validation() -> None:
    a = np.zeros((10, 2), dtype=np.int64)
    with pytest.raises(ValidationError, match="parameter 'second'"):
        audit_samples(a, np.zeros((9, 2), dtype=np.int64), 1.0, 0.0)
    with pytest.raises(ValidationError, match="parameter 'confidence'"):
        audit_samples(a, a, 1.0, 0.0, confidence=1.5)
