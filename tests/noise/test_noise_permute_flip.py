"""The exact permute-and-flip sampler (:mod:`privhist.noise.permute_flip`).

* Its heads counts, Binomial(n, exp(-gamma g)), against the exact pmf (probabilities in 40
  digits), for a single trial, few trials, and enough trials that the fair splits are drawn by
  rejection instead of popcounts; power: the law of the next gap is rejected.
* The digits it compares with: every word of ``exp(-x)`` against 200-digit values, including
  exponents past the shortcut that returns a zero first word; and a scripted uniform that agrees
  with ``p`` for 80 digits and then falls below or above it is decided as such (the second word
  of digits, reached with probability ``2**-64`` in real draws).
* The output law of many groups drawn at once against the law from the definition
  (:func:`tests.selection_laws.pf_level_law`, checked there against enumeration of every heads
  set); power: permute-and-flip's law at a gamma 10% larger is rejected by the same samples
  (and, where they differ enough, the exponential mechanism's at the same gamma). A position is
  uniform within its block.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from tests.selection_laws import pf_level_law
from tests.stats import assert_fits, assert_rejects, chi2_cells, chi2_exact

from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.noise import permute_flip
from privhist.noise.binomial import HALF_CUTOFF
from privhist.noise.permute_flip import _word, binomial_exp, permute_and_flip_blocks


def _binomial_pmf(n: int, x: Fraction) -> dict[int, Fraction]:
    with mpmath.workdps(40):
        p = mpmath.exp(-mpmath.mpf(x.numerator) / x.denominator)
        return {
            k: Fraction(str(mpmath.binomial(n, k) * p**k * (1 - p) ** (n - k)))
            for k in range(n + 1)
        }


@pytest.mark.parametrize(
    ("n", "gap", "gamma"),
    [(1, 1, Fraction(1, 2)), (12, 3, Fraction(1, 3)), (HALF_CUTOFF + 500, 2, Fraction(3, 2))],
    ids=["one-trial", "few-trials", "rejection-splits"],
)
def test_heads_follow_the_binomial_law(n: int, gap: int, gamma: Fraction) -> None:
    draws = 40_000
    x = binomial_exp(np.full(draws, n), np.full(draws, gap), gamma, SeededRandom(11))
    assert_fits(chi2_exact(x, _binomial_pmf(n, gamma * gap)))
    # power: the law one gap further (or nearer, for the single trial) is rejected
    wrong = gamma * (gap + 1) if n > 1 else gamma * Fraction(gap, 2)
    assert_rejects(chi2_exact(x, _binomial_pmf(n, wrong)))


def test_certain_and_empty_entries() -> None:
    rng = SeededRandom(2)
    out = binomial_exp([7, 0, 3, 0], [0, 0, 10**9, 5], Fraction(1, 7), rng)
    assert out.tolist() == [7, 0, 0, 0]


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(45), Fraction(46), Fraction(93, 2), 60])
def test_words_are_the_digits_of_exp(x: Any) -> None:
    x = Fraction(x)
    with mpmath.workdps(200):
        v = mpmath.exp(-mpmath.mpf(x.numerator) / x.denominator)
        for w in range(3):
            expected = int(mpmath.floor(v * mpmath.mpf(2) ** (64 * (w + 1)))) % (1 << 64)
            assert _word(x, w) == expected, (x, w)


def _scripted_half(bits: list[int]) -> Any:
    """Bin(m, 1/2) for one trial whose uniform has the given binary digits: the count of trials
    whose next digit is 0."""
    it = iter(bits)

    def half(m: Any, rng: Any) -> Any:
        assert m.tolist() == [1]
        return np.array([1 - next(it)], dtype=np.int64)

    return half


@pytest.mark.parametrize("below", [True, False])
def test_a_uniform_agreeing_past_the_first_word_is_decided_by_the_next(
    monkeypatch: pytest.MonkeyPatch, below: bool
) -> None:
    """``p = exp(-50) < 2**-64``: its first word is 0 (the shortcut) and its digits from 65 on
    decide. A uniform equal to ``p`` on 80 digits (the first 1 is the 73rd) and then below
    (above) it succeeds (fails)."""
    x = Fraction(50)
    digits = format(_word(x, 0), "064b") + format(_word(x, 1), "064b")
    assert set(digits[:64]) == {"0"} and "1" in digits[64:80]
    # the first digit after the 80th where p has a 1 (below) or a 0 (above)
    j = next(i for i in range(80, 128) if digits[i] == ("1" if below else "0"))
    u = [int(d) for d in digits[:j]] + [0 if below else 1]
    monkeypatch.setattr(permute_flip, "binomial_half", _scripted_half(u))
    out = binomial_exp([1], [1], x, SeededRandom(0))
    assert out.tolist() == ([1] if below else [0])


def _em_level_law(scores: list[int], counts: list[int], gamma: Fraction) -> list[float]:
    w = [n * np.exp(-float(gamma) * (s - min(scores))) for s, n in zip(scores, counts, strict=True)]
    return [v / sum(w) for v in w]


LAWS = [
    # a few levels of different sizes, the best a single candidate (far from the exponential
    # mechanism's law: its power check includes that law)
    ([3, 0, 1, 2, 5], [2, 1, 5, 1, 40], Fraction(1, 2), True),
    # a quantile-like V: two candidates per gap, then a long flat run
    (list(range(0, 30)), [1] + [2] * 28 + [3000], Fraction(1, 4), False),
    # the best level shared by many candidates, a far level with most candidates
    ([0, 1, 40], [20, 3, 10**5], Fraction(1, 3), False),
]


@pytest.mark.parametrize(("scores", "counts", "gamma", "unlike_em"), LAWS)
def test_draws_follow_the_permute_and_flip_law(
    scores: list[int], counts: list[int], gamma: Fraction, unlike_em: bool
) -> None:
    """Many groups drawn in one call, each the same law (its blocks split into two blocks per
    level, so that a level is drawn from several blocks as the release does). Power: the law
    at a gamma 10% larger is rejected, and in the first case the exponential mechanism's (the
    others are within a few percent of it: 30,000 draws cannot tell)."""
    groups = 30_000
    s_blocks, n_blocks, level_of = [], [], []
    for t, (s, n) in enumerate(zip(scores, counts, strict=True)):
        parts = [n] if n == 1 else [n // 2, n - n // 2]
        for part in parts:
            s_blocks.append(s)
            n_blocks.append(part)
            level_of.append(t)
    per = len(s_blocks)
    owner = np.repeat(np.arange(groups), per)
    block, pos = permute_and_flip_blocks(
        owner, np.tile(s_blocks, groups), np.tile(n_blocks, groups), gamma, SeededRandom(5)
    )
    local = block - np.arange(groups) * per
    assert (local >= 0).all() and (local < per).all()
    assert (pos >= 0).all() and (pos < np.asarray(n_blocks)[local]).all()
    seen = np.bincount(np.asarray(level_of)[local], minlength=len(scores))
    with mpmath.workdps(40):
        law = [float(p) for p in pf_level_law(scores, counts, gamma)]
        faster = [float(p) for p in pf_level_law(scores, counts, gamma * Fraction(11, 10))]
    assert_fits(chi2_cells(seen, law, max_cells=None))
    assert_rejects(chi2_cells(seen, faster, max_cells=None))
    if unlike_em:
        assert_rejects(chi2_cells(seen, _em_level_law(scores, counts, gamma), max_cells=None))


def test_positions_are_uniform_within_a_block() -> None:
    groups = 40_000
    owner = np.arange(groups)
    block, pos = permute_and_flip_blocks(
        owner, np.zeros(groups, dtype=np.int64), np.full(groups, 7), Fraction(1), SeededRandom(9)
    )
    assert (block == owner).all()
    seen = np.bincount(pos, minlength=7)
    assert_fits(chi2_cells(seen, [1 / 7] * 7, max_cells=None))
    assert_rejects(chi2_cells(seen, [0.2] + [0.8 / 6] * 6, max_cells=None))


def test_bad_inputs_are_refused() -> None:
    rng = SeededRandom(0)
    for owner, scores, sizes, gamma in (
        ([0], [0], [1], Fraction(0)),
        ([0, 0], [0], [1], Fraction(1)),
        ([0], [0], [0], Fraction(1)),
        ([1], [0], [1], Fraction(1)),
        ([0, 2], [0, 0], [1, 1], Fraction(1)),
        ([], [], [], Fraction(1)),
    ):
        with pytest.raises(ValidationError):
            permute_and_flip_blocks(owner, scores, sizes, gamma, rng)
    with pytest.raises(ValidationError):
        binomial_exp([1, 2], [0], Fraction(1), rng)
    with pytest.raises(ValidationError):
        binomial_exp([-1], [0], Fraction(1), rng)


def _first_word_mp(x: Fraction) -> int:
    """``floor(exp(-x) 2**64)`` from mpmath at 400 bits (0 beyond the first word's range)."""
    if x > 46:
        return 0
    with mpmath.workprec(400):
        v = mpmath.exp(-mpmath.mpf(x.numerator) / x.denominator) * mpmath.mpf(2) ** 64
        return int(mpmath.floor(v))


@pytest.mark.parametrize(
    "gamma", [Fraction(1, 3), Fraction(1, 40), Fraction(1, 120), Fraction(7, 1000), Fraction(5, 2)]
)
@pytest.mark.parametrize("bits", [192, 72])
def test_first_words_from_running_products_are_the_exact_words(
    gamma: Fraction, bits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first words of ``exp(-gamma d)`` from running products equal the exact ones (mpmath
    at 400 bits) for every gap up to past the zero-word limit, dense and with holes. At 72 bits
    the products' error interval often straddles a word boundary, so the exact fallback is
    taken (and counted); at 192 bits it is not needed for these gaps."""
    fallbacks: list[Fraction] = []
    real = permute_flip._word

    def counted(x: Fraction, w: int) -> int:
        fallbacks.append(x)
        return real(x, w)

    monkeypatch.setattr(permute_flip, "_word", counted)
    top = int(46 / gamma) + 30
    rng = np.random.default_rng(int(gamma * 1000) + bits)
    for gaps in (
        list(range(1, top)),
        sorted({int(v) for v in rng.integers(1, top, 300)}),
    ):
        got = permute_flip._first_words(gamma, gaps, bits)
        want = [_first_word_mp(gamma * d) for d in gaps]
        assert got == want
    if bits == 72:
        assert fallbacks  # the fallback path ran, and gave the exact words
    else:
        assert fallbacks == []


def test_first_words_of_sparse_gaps_are_evaluated_one_by_one() -> None:
    gamma = Fraction(1, 10**5)
    gaps = [3, 10**6, 4 * 10**6]  # far more product steps than gaps
    assert permute_flip._first_words(gamma, gaps) == [_first_word_mp(gamma * d) for d in gaps]
