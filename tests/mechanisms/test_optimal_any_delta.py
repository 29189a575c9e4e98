"""Optimal selection at any delta: the published answer, exact privacy without slack, and the
lazy comparison that decides inclusion for probabilities far below one 64-bit word.

The known answer (epsilon = 50, delta = 1e-200: keep probability 1e-200 at n = 1,
2.707178e-05 at n = 10 and 1 at n = 11) is Google's published optimal partition selection; here it
is recomputed independently with 1000-digit mpmath from the recursion of Desfontaines et al.
(2022) / Cohen et al., Algorithm 3 with q = 1, and compared with what ``plan`` prints.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist.cli.main import main
from privhist.core.data import Counts
from privhist.core.random import RandomSource, SeededRandom
from privhist.mechanisms import OptimalSelection

EPS, DELTA = 50, Fraction(1e-200)


def _mp_optimum(eps: int, delta: Fraction, n: int) -> list[Any]:
    """The real-valued optimal reporting probabilities pi_0..pi_n at 1000 digits."""
    with mpmath.workdps(1000):
        e, d = mpmath.exp(eps), mpmath.mpf(delta.numerator) / delta.denominator
        out = [mpmath.mpf(0)]
        for _ in range(n):
            p = out[-1]
            out.append(min(e * p + d, 1 - (1 - p - d) / e, mpmath.mpf(1)))
        return out


def _e_lower(eps: int) -> Fraction:
    """A rational lower bound on e^eps (3000 bits, rounded down, then lowered by 2**-2900)."""
    with mpmath.workprec(3000):
        v = mpmath.exp(eps)
        num = int(mpmath.floor(v * mpmath.mpf(2) ** 2900))
    return Fraction(num - 1, 2**2900)


def test_plan_gives_the_published_answer(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "optimal-selection", "--keys-only", "--epsilon", "50"]
    argv += ["--delta", "1e-200", "--max-count", "11", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    rp = out["reporting_probability"]
    opt = _mp_optimum(EPS, DELTA, 11)
    assert len(rp) == 12
    assert rp[1] == pytest.approx(1e-200, rel=1e-15)
    assert f"{rp[10]:.6e}" == "2.707178e-05"
    assert rp[11] == 1.0
    assert out["count_always_released"] == 11
    for n in range(12):
        # the grid loses at most a few 2**-727 units per step, times e^50 per later step
        assert rp[n] <= float(opt[n]) * (1 + 1e-15)
        assert rp[n] == pytest.approx(float(opt[n]), rel=1e-14)
    # the independent optimum itself: 1e-200 at 1, 2.707178e-05 at 10, 1 - 2e-22 at 11
    assert f"{float(opt[10]):.6e}" == "2.707178e-05"
    assert 0 < 1 - opt[11] < 1e-21


def test_exact_privacy_at_1e_200_both_directions_without_slack() -> None:
    m = OptimalSelection(float(EPS), float(DELTA), keys_only=True)
    one = 1 << m.grid_bits
    lower = _e_lower(EPS)
    pis = [Fraction(m.reporting_numerator(n), one) for n in range(len(m._nums) + 1)]
    assert pis[0] == 0 and pis[-1] == 1
    worst = Fraction(0)
    for a, b in itertools.pairwise(pis):
        p, q = (1 - a, a), (1 - b, b)  # (not released, released) at n and n + 1 units
        for x, y in ((p, q), (q, p)):
            h = sum((max(Fraction(0), xi - lower * yi) for xi, yi in zip(x, y, strict=True)))
            assert h <= DELTA, f"hockey-stick {float(h)} > delta"
            worst = max(worst, h)
    # tight (the optimum spends delta) ...
    assert worst >= DELTA * (1 - Fraction(1, 10**12))
    # ... and a one-unit raise of pi_1 (2**-727) already breaks it: the check has power
    raised = pis[1] + Fraction(1, one)
    h = max(Fraction(0), raised - lower * pis[0]) + max(Fraction(0), 1 - raised - lower)
    assert h > DELTA


class _Conditioned(RandomSource):
    """Words of U conditioned on U < 2**-660: a vector call (the first words) gives zeros; each
    key's tie then draws words 2..11 one at a time, of which 2..10 are zero and word 11 has its
    top 20 bits zero. So P[kept | U < 2**-660] = pi_1 2**660 (about 0.048) is testable."""

    def __init__(self, inner: RandomSource) -> None:
        self.inner = inner
        self.single_calls = 0

    def uint64(self, n: int) -> Any:
        if n != 1:
            return np.zeros(n, dtype=np.uint64)
        self.single_calls += 1
        if self.single_calls % 10:
            return np.zeros(1, dtype=np.uint64)
        return self.inner.uint64(1) >> np.uint64(20)

    @property
    def description(self) -> str:
        return "conditioned words (tests only)"


def _binomial_p(k: int, n: int, p: float) -> float:
    return float(stats.binomtest(k, n, p).pvalue)


def test_release_at_1e_200_follows_the_conditioned_probability() -> None:
    m = OptimalSelection(float(EPS), float(DELTA), keys_only=True)
    n = 60_000
    counts = Counts.from_arrays(np.arange(n), np.ones(n, dtype=np.int64))
    src = _Conditioned(SeededRandom(5))
    kept = m.release(counts, src).keys.shape[0]
    # every key tied through word 11 and stopped there (a tie at word 11 has probability 2**-44)
    assert src.single_calls == 10 * n
    target = float(Fraction(m.reporting_numerator(1), 1 << m.grid_bits) * 2**660)
    assert target == pytest.approx(1e-200 * 2.0**660, rel=1e-15)
    assert _binomial_p(kept, n, target) >= ALPHA
    # power: probabilities 25 % off are rejected at this sample size (about 10 sd away)
    assert _binomial_p(kept, n, target * 1.25) < ALPHA
    assert _binomial_p(kept, n, target / 1.25) < ALPHA


def test_release_at_1e_200_keeps_eleven_and_draws_one_word_per_key() -> None:
    m = OptimalSelection(float(EPS), float(DELTA), keys_only=True)
    units = np.array([1] * 500 + [10] * 500 + [11] * 500 + [30] * 500, dtype=np.int64)

    class Counting(RandomSource):
        def __init__(self) -> None:
            self.inner, self.words = SeededRandom(11), 0

        def uint64(self, n: int) -> Any:
            self.words += n
            return self.inner.uint64(n)

        @property
        def description(self) -> str:
            return "counting"

    src = Counting()
    rel = m.release(Counts.from_arrays(np.arange(units.size), units), src)
    kept = set(rel.keys.tolist())
    assert set(range(1000, 2000)) <= kept  # n >= 11: 1 - 2e-22 and 1
    assert not kept & set(range(500))  # n = 1: 1e-200
    assert len(kept & set(range(500, 1000))) <= 3  # n = 10: 2.7e-5 each
    assert src.words == units.size  # more words only on a tie (probability 2**-64 each)
