"""The exact exponential-mechanism sampler (:mod:`privhist.noise.exponential`).

Its law is checked by goodness of fit (alpha 1e-6) against probabilities computed here in 40
digits from the definition ``Pr[t] = n_t exp(-gamma s_t) / W``, with a power check (the same
samples reject the law of a gamma 10% larger); the bounds its comparisons rest on are checked
to contain the true cumulative law at every level and precision, including levels so far out that
their cumulative law is within ``2**-200`` of 1.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.noise.exponential import ExponentialLevels, exponential_mechanism


def _law(scores: list[int], counts: list[int], gamma: Fraction, dps: int = 40) -> list[mpmath.mpf]:
    with mpmath.workdps(dps):
        g = mpmath.mpf(gamma.numerator) / gamma.denominator
        w = [n * mpmath.exp(-g * (s - scores[0])) for s, n in zip(scores, counts, strict=True)]
        total = mpmath.fsum(w)
        return [x / total for x in w]


CASES = [
    # a few levels of different sizes
    ([0, 1, 3, 7], [1, 2, 5, 100], Fraction(1, 2)),
    # a quantile-like V: two candidates per score (one each side), a long flat tail
    (list(range(0, 400)), [1] + [2] * 398 + [5000], Fraction(1, 20)),
    # a large gamma: nearly all the mass on the first level, the rest far below 2**-64
    ([5, 6, 200], [3, 1, 10**6], Fraction(7, 3)),
]


@pytest.mark.parametrize(("scores", "counts", "gamma"), CASES)
def test_levels_follow_the_exponential_law(
    scores: list[int], counts: list[int], gamma: Fraction
) -> None:
    law = ExponentialLevels(scores, counts, gamma)
    rng = SeededRandom(17)
    n = 60_000
    seen = np.bincount([law.sample_level(rng) for _ in range(n)], minlength=len(scores))
    probs = [float(p) for p in _law(scores, counts, gamma)]
    assert_fits(chi2_cells(seen, probs))
    # power: the law of a 10% larger gamma is rejected by the same samples (the third case has
    # almost all its mass on one level at either gamma: its power is the first two cases')
    if gamma < 2:
        wrong = [float(p) for p in _law(scores, counts, gamma * Fraction(11, 10))]
        assert_rejects(chi2_cells(seen, wrong))


def test_bounds_contain_the_law_everywhere() -> None:
    """``lo <= F_t 2**prec <= hi`` at every level and several precisions, with a tail beyond the
    levels computed (``F_t`` within ``2**-200`` of 1 there)."""
    scores = list(range(0, 3000, 3))
    counts = [1 + (i % 7) for i in range(len(scores))]
    gamma = Fraction(1, 4)
    law = ExponentialLevels(scores, counts, gamma)
    with mpmath.workdps(120):
        probs = _law(scores, counts, gamma, dps=120)
        for prec in (96, 160, 300):
            for t in [0, 1, 2, 50, 200, 400, 999]:
                lo, hi = law.cdf_bounds(t, prec)
                exact = (1 - mpmath.fsum(probs[t + 1 :])) * mpmath.mpf(2) ** prec
                assert lo <= exact <= hi, (prec, t)
                assert hi - lo <= 2, (prec, t, hi - lo)  # tight to a unit or two


def test_exponential_mechanism_draws_a_candidate_uniformly_within_its_level() -> None:
    """Candidates sharing a score are equally likely, and each has its level's share."""
    scores = np.array([2, 0, 2, 1, 0, 2, 2])
    gamma = Fraction(1, 1)
    rng = SeededRandom(3)
    n = 40_000
    seen = np.bincount([exponential_mechanism(scores, gamma, rng) for _ in range(n)], minlength=7)
    w = np.exp(-float(gamma) * scores)
    assert_fits(chi2_cells(seen, w / w.sum(), max_cells=None))
    # power: treating the score-2 candidates as score 1 is rejected
    wrong = np.exp(-float(gamma) * np.minimum(scores, 1))
    assert_rejects(chi2_cells(seen, wrong / wrong.sum(), max_cells=None))


def test_bad_laws_are_refused() -> None:
    for scores, counts, gamma in (
        ([], [], Fraction(1)),
        ([1, 1], [1, 1], Fraction(1)),
        ([0, 1], [0, 1], Fraction(1)),
        ([0, 1], [1, 1], Fraction(0)),
    ):
        with pytest.raises(ValidationError):
            ExponentialLevels(scores, counts, gamma)


def test_weight_bounds_contain_every_cumulative_weight() -> None:
    """The cumulative weights' integer bounds at ``prec + GUARD`` bits contain the 300-digit
    values, level by level, over 60 random laws: the products of ``exp`` bounds are rounded
    outwards at every step (a product rounded down instead breaks this on most laws)."""
    from privhist.noise.exponential import GUARD, _Weights

    g = np.random.default_rng(1)
    for _ in range(60):
        gamma = Fraction(int(g.integers(1, 50)), int(g.integers(1, 50)))
        levels = int(g.integers(2, 30))
        scores = np.cumsum(g.integers(1, 4, levels)).tolist()
        counts = g.integers(1, 5, levels).tolist()
        prec = 64
        w = _Weights(scores, counts, gamma, prec)
        with mpmath.workdps(300):
            rate = mpmath.mpf(gamma.numerator) / gamma.denominator
            acc = mpmath.mpf(0)
            for t in range(w.cut):
                acc += counts[t] * mpmath.exp(-rate * (scores[t] - scores[0]))
                exact = acc * mpmath.mpf(2) ** (prec + GUARD)
                assert w.lo_cum[t] <= exact <= w.hi_cum[t], (gamma, t)


def test_a_tail_cut_at_the_last_level_still_bounds_the_law() -> None:
    """A last level far below the others (weight ``e**-200``) is left out of the computed
    weights at 96 bits and bounded instead: the cumulative law's bounds still contain the exact
    values (``F_1 = 1 - 2**-288``, just below 1), which needs the left-out level in the total."""
    scores, counts, gamma = [0, 1, 200], [1, 1, 1], Fraction(1)
    law = ExponentialLevels(scores, counts, gamma)
    with mpmath.workdps(200):
        probs = _law(scores, counts, gamma, dps=200)
        for prec in (96, 160):
            for t in (0, 1):
                lo, hi = law.cdf_bounds(t, prec)
                exact = (1 - mpmath.fsum(probs[t + 1 :])) * mpmath.mpf(2) ** prec
                assert lo <= exact <= hi, (prec, t)


def test_blocks_are_refused_when_malformed() -> None:
    from privhist.noise.exponential import exponential_blocks

    rng = SeededRandom(0)
    for scores, sizes in (([0, 1], [1, 0]), ([0, 1], [1]), ([], [])):
        with pytest.raises(ValidationError):
            exponential_blocks(scores, sizes, Fraction(1), rng)
