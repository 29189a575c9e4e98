"""The lazy comparison of :func:`privhist.noise.bernoulli.compare_table` at a probability far
below one 64-bit word (3 * 2**-70): exact enumeration over scripted words, and a goodness-of-fit
test conditioned on the first word being 0 (alpha = 1e-6, with power checks)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from scipy import stats
from tests.scripted_random import ScriptedRandom
from tests.stats import ALPHA

from privhist.core.random import RandomSource, SeededRandom
from privhist.noise._exact import rational_oracle
from privhist.noise.bernoulli import compare_table


def _binomial_p(k: int, n: int, p: float) -> float:
    return float(stats.binomtest(k, n, p).pvalue)


P_TINY = Fraction(3, 2**70)


def _tiny_sampler(rng: RandomSource, n: int) -> Any:
    """Bernoulli(3 * 2**-70) through the table comparison: first-word floor 0, ties lazy."""
    table = np.array([0], dtype=np.uint64)  # floor(3 * 2**-70 * 2**64) = 0
    return compare_table(
        table,
        np.zeros(n, dtype=np.int64),
        lambda i: rational_oracle(P_TINY.numerator, P_TINY.denominator),
        rng,
    )


def test_lazy_bernoulli_tiny_probability_enumerated() -> None:
    # the answer is True exactly when (W1, W2) < (0, 3 * 2**58) lexicographically, so
    # P[True] = 2**-64 * 3 * 2**58 / 2**64 = 3 * 2**-70
    edge = 3 << 58
    cases = [
        ([1], False),  # W1 > 0: no second word drawn
        ([2**64 - 1], False),
        ([0, 0], True),
        ([0, edge - 1], True),
        ([0, edge], False),  # equal and the digits of p end: U >= p
        ([0, edge + 1], False),
        ([0, 2**64 - 1], False),
    ]
    for words, expected in cases:
        src = ScriptedRandom(words)
        assert bool(_tiny_sampler(src, 1)[0]) is expected, words
        assert src.used == len(words)  # no word beyond the ones the decision needs


def test_lazy_bernoulli_tiny_probability_conditioned_fit() -> None:
    class FirstZero(RandomSource):
        """U conditioned on its first word being 0: P[U < 3 * 2**-70 | W1 = 0] = 3 / 64."""

        def __init__(self) -> None:
            self.inner = SeededRandom(2)

        def uint64(self, n: int) -> Any:
            return np.zeros(n, dtype=np.uint64) if n > 1 else self.inner.uint64(1)

        @property
        def description(self) -> str:
            return "first word zero (tests only)"

    n = 40_000
    k = int(_tiny_sampler(FirstZero(), n).sum())
    assert _binomial_p(k, n, 3 / 64) >= ALPHA
    assert _binomial_p(k, n, 2 / 64) < ALPHA  # power: the neighbouring dyadic values
    assert _binomial_p(k, n, 4 / 64) < ALPHA
    # unconditioned, the event is never seen
    assert not _tiny_sampler(SeededRandom(3), 10_000).any()
