"""cPBM device sampler (exactness, GoF with a power check), exact DP of the secure sum, decoding."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA, chi2_cells

from privhist.accounting.profile import check_dp
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource, SeededRandom
from privhist.federated import cpbm
from privhist.federated.cpbm import (
    Cpbm,
    DyadicBinomialTables,
    binomial_dyadic,
    binomial_dyadic_digits,
    binomial_dyadic_tables,
    cpbm_decode,
    cpbm_encode,
    probability_numerators,
    quantised_theta,
    secure_sum_modulus,
)
from privhist.federated.cpbm_accounting import cpbm_rdp


def _gof(samples: np.ndarray, m: int, p: float) -> float:
    observed = np.bincount(samples, minlength=m + 1).astype(np.float64)
    return chi2_cells(observed, stats.binom.pmf(np.arange(m + 1), m, p))


@pytest.mark.parametrize(
    ("m", "num"),
    [(30, int(0.3 * 2**32)), (1, 2**31 + 12345), (64, 3 * 2**30 - 1), (200, 2**30 + 7)],
)
def test_binomial_dyadic_goodness_of_fit(m: int, num: int) -> None:
    rng = SeededRandom(11)
    z = binomial_dyadic(m, np.full(100_000, num), rng)
    assert _gof(z, m, num / 2**32) > ALPHA
    # power: the same samples against a probability off by 0.02 are rejected
    assert _gof(z, m, num / 2**32 + 0.02) < ALPHA


def test_binomial_dyadic_mixed_probabilities_per_entry() -> None:
    """Entries with different probabilities in one call are each Binomial(m, a_i / 2**32)."""
    rng = SeededRandom(5)
    nums = np.array([2**30, 2**31, 3 * 2**30 + 1])
    z = binomial_dyadic(20, np.tile(nums, 60_000), rng).reshape(-1, 3)
    for j, a in enumerate(nums):
        assert _gof(z[:, j], 20, a / 2**32) > ALPHA


def test_binomial_dyadic_exact_small_case() -> None:
    """p = 1/2 + 1/4 = 3/4 (two binary digits); m = 1 is Bernoulli(3/4) exactly in law: the
    frequency over many draws is checked, and p = 0 / p = 1 are deterministic."""
    z = binomial_dyadic(1, np.full(200_000, 3 * 2**30), SeededRandom(2))
    assert stats.binomtest(int(z.sum()), z.size, 0.75).pvalue > ALPHA
    assert binomial_dyadic(7, [0, 2**32], SeededRandom(0)).tolist() == [0, 7]


def test_probabilities_are_clipped_and_in_range() -> None:
    y = np.array([[3.0, 4.0], [0.3, -0.4], [100.0, 0.0]])
    a = probability_numerators(y, 0.2, 1.0)
    tq = quantised_theta(0.2)
    p = a / 2**32
    assert (np.abs(p - 0.5) <= float(tq) + 1e-15).all()
    expected = 0.5 + float(tq) * np.array([[0.6, 0.8], [0.3, -0.4], [1.0, 0.0]])
    assert np.abs(p - expected).max() <= 2**-32


def _secure_sum_pmf(probs: list[Fraction], m: int) -> dict[int, Fraction]:
    dist = {0: Fraction(1)}
    for p in probs:
        new: dict[int, Fraction] = {}
        for s, w in dist.items():
            for k in range(m + 1):
                new[s + k] = new.get(s + k, 0) + w * math.comb(m, k) * p**k * (1 - p) ** (m - k)
        dist = new
    return dist


@pytest.mark.parametrize("n", [2, 3])
def test_secure_sum_is_dp_at_the_accounted_epsilon(n: int) -> None:
    """Exact hockey-stick check of the implemented mechanism (quantised probabilities) at the
    epsilon the accounting gives, for the extreme neighbouring users, both directions."""
    theta, m, delta = 0.25, 2, 1e-3
    tq = quantised_theta(theta)
    eps = cpbm_rdp(n, theta, m, 1).epsilon(delta)
    half = Fraction(1, 2)
    for others in ([half + tq] * (n - 1), [half - tq] * (n - 1), [half] * (n - 1)):
        p = _secure_sum_pmf([half - tq, *others], m)
        q = _secure_sum_pmf([half + tq, *others], m)
        assert check_dp(p, q, eps, delta).holds
    # and a smaller epsilon is refused for the worst pair (the check has teeth)
    p = _secure_sum_pmf([half - tq, *[half + tq] * (n - 1)], m)
    q = _secure_sum_pmf([half + tq, *[half + tq] * (n - 1)], m)
    assert not check_dp(p, q, eps / 4, delta).holds


def test_decode_is_unbiased_with_the_stated_variance() -> None:
    rng = SeededRandom(9)
    n, m, theta, clip = 2000, 10, 0.2, 2.0
    y = np.zeros((n, 4))
    y[:, 0] = 1.0
    y[:, 1] = -0.5
    y[: n // 2, 2] = 3.0  # clipped to norm 2 together with the other coordinates
    mech = Cpbm(theta=theta, m=m, clip=clip, dimension=4, n_users=n)
    norms = np.linalg.norm(y, axis=1, keepdims=True)
    clipped = y * np.minimum(1, clip / norms)
    target = clipped.mean(axis=0)
    draws = np.array([mech.decode(mech.encode(y, rng).sum(axis=0)) for _ in range(200)])
    sd = math.sqrt(mech.variance_bound())
    z = (draws.mean(axis=0) - target) / (sd / math.sqrt(200))
    assert np.abs(z).max() < 5.5  # |z| > 5.5 has probability < 1e-7 per coordinate
    assert draws.var(axis=0).max() <= mech.variance_bound() * 1.5


def test_modulus_and_bad_input() -> None:
    assert secure_sum_modulus(10, 3) == 31
    with pytest.raises(ValidationError) as info:
        secure_sum_modulus(2**31, 2)
    assert info.value.parameter == "m"
    with pytest.raises(ValidationError):
        Cpbm(theta=0.3, m=3, clip=1.0, dimension=2, n_users=5)
    with pytest.raises(ValidationError):
        Cpbm(theta=0.2, m=0, clip=1.0, dimension=2, n_users=5)
    with pytest.raises(ValidationError):
        Cpbm(theta=0.2, m=3, clip=0.0, dimension=2, n_users=5)
    with pytest.raises(ValidationError):
        Cpbm(theta=0.2, m=3, clip=1.0, dimension=2, n_users=2**31, bits=32)
    with pytest.raises(ValidationError):
        cpbm_encode([[np.nan, 0.0]], 0.2, 1.0, 3, SeededRandom(0))
    with pytest.raises(ValidationError):
        cpbm_decode([100], n=3, m=3, theta=0.2, clip=1.0)  # above n * m: not a valid sum


# -- the alias-table sampler --------------------------------------------------------------------


class _Scripted(RandomSource):
    """Returns the given words in order (to steer a sampler's decisions)."""

    def __init__(self, words: list[int]) -> None:
        self.words = list(words)

    def uint64(self, n: int) -> np.ndarray:
        out, self.words = self.words[:n], self.words[n:]
        assert len(out) == n, "script exhausted"
        return np.array(out, dtype=np.uint64)

    @property
    def description(self) -> str:
        return "scripted"


def _table_law(tab: DyadicBinomialTables, j: int) -> list[Fraction]:
    """P(outcome) of cell j from its alias columns, in exact rationals."""
    whole = 1 << (tab.c * tab.m)
    law = [Fraction(0)] * tab.k
    for col in range(tab.k):
        keep = Fraction(tab.thresholds(j)[col], whole)
        alias = int(tab.packed[j, col]) & 0xFFFF
        law[col] += keep / tab.k
        law[alias] += (1 - keep) / tab.k
    return law


@pytest.mark.parametrize(("m", "c"), [(1, 1), (2, 2), (3, 3), (5, 2), (6, 4), (30, 10)])
def test_alias_tables_give_the_exact_binomial(m: int, c: int) -> None:
    """For cells and fine parts q, the law of S + Binomial(A, q) read off the alias tables
    (thresholds in exact integers) equals Binomial(m, (j + q) / 2**c) exactly, computed
    independently with Fractions; the packed thresholds are the leading bits of the exact ones."""
    tab = DyadicBinomialTables(m, c)
    cells = [0, 1, (1 << c) - 1, 1 << c] if m < 30 else [307, 600]
    tab.ensure(cells)
    for j in cells:
        law = _table_law(tab, j)
        assert sum(law) == 1
        tops = tab.packed[j] >> np.uint64(16)
        for col in range(tab.k):
            p = tab.thresholds(j)[col]
            top = p >> tab.shift if tab.shift >= 0 else p << -tab.shift
            assert int(tops[col]) == top
        qs = [Fraction(0), Fraction(1, 3), Fraction(5, 8)] if j < 1 << c else [Fraction(0)]
        for q in qs:
            pz = [Fraction(0)] * (m + 1)
            for o, w in enumerate(law):
                if w == 0:
                    continue
                s, a = int(tab.s_of[o]), int(tab.a_of[o])
                for k in range(a + 1):
                    pz[s + k] += w * math.comb(a, k) * q**k * (1 - q) ** (a - k)
            p = (j + q) / (1 << c)
            assert pz == [math.comb(m, z) * p**z * (1 - p) ** (m - z) for z in range(m + 1)]


def test_alias_ties_continue_exactly() -> None:
    """A 32-bit draw equal to the threshold's leading bits is decided by the next bits of the
    uniform against the threshold's remaining bits: below keeps the column, at or above takes
    the alias; draws just below / above the leading bits decide at once."""
    m, bits = 5, 32
    tab = cpbm.dyadic_binomial_tables(m)
    fine = bits - tab.c
    j = 700
    tab.ensure([j])
    assert tab.shift > 0
    col = next(
        k
        for k in range(tab.k)
        if tab.thresholds(j)[k] & ((1 << tab.shift) - 1) > 1
        and 0 < int(tab.packed[j, k]) >> 16 < (1 << tab.tbits) - 1
        and tab.s_of[k] != tab.s_of[int(tab.packed[j, k]) & 0xFFFF]
    )
    top = int(tab.packed[j, col]) >> 16
    own, other = int(tab.s_of[col]), int(tab.s_of[int(tab.packed[j, col]) & 0xFFFF])
    rem = tab.thresholds(j)[col] & ((1 << tab.shift) - 1)
    nwords = -(-tab.shift // 64)
    pad = 64 * nwords - tab.shift

    def draw(v: int, u: int | None) -> int:
        words = [(col << tab.tbits) | v]
        if u is not None:  # the continuation: randbelow(2**shift) reads nwords words
            big = u << pad
            words += [(big >> (64 * (nwords - 1 - i))) & ((1 << 64) - 1) for i in range(nwords)]
        # fine part 0: any ambiguous trial reads a word and fails
        z = binomial_dyadic_tables(m, [j << fine], _Scripted(words + [0] * m), bits)
        return int(z[0])

    assert draw(top - 1, None) == own
    assert draw(top + 1, None) == other
    assert draw(top, 0) == own
    assert draw(top, rem - 1) == own
    assert draw(top, rem) == other
    assert draw(top, (1 << tab.shift) - 1) == other


@pytest.mark.parametrize(
    ("m", "num", "coarse"),
    [(30, int(0.3 * 2**32), 10), (15, 2**31 + 98765, 10), (4, 2**30 + 2**29 + 12345, 2)],
)
def test_table_sampler_goodness_of_fit(
    m: int, num: int, coarse: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Binomial(m, a / 2**32) at alpha 1e-6 with a power check; coarse cells of 1/4 make the
    ambiguous trials (the second stage) frequent."""
    monkeypatch.setattr(cpbm, "COARSE_BITS", coarse)
    z = binomial_dyadic_tables(m, np.full(100_000, num), SeededRandom(21))
    assert _gof(z, m, num / 2**32) > ALPHA
    assert _gof(z, m, num / 2**32 + 0.015) < ALPHA


@pytest.mark.parametrize(("m", "num", "bits"), [(7, 5, 3), (1, 3, 2), (64, 2**40 + 12345, 42)])
def test_table_sampler_other_widths(m: int, num: int, bits: int) -> None:
    """Grids coarser than the cells (no fine part) and finer than 32 bits, m = 1 and 64."""
    z = binomial_dyadic(m, np.full(60_000, num), SeededRandom(8), bits=bits)
    assert _gof(z, m, num / 2**bits) > ALPHA
    assert _gof(z, m, num / 2**bits + 0.02) < ALPHA


def test_table_and_digit_samplers_agree_in_law() -> None:
    """Both exact samplers against each other (two-sample chi-square) on mixed numerators."""
    nums = np.tile(np.array([2**30 + 3, 2**31, 3 * 2**30 - 5]), 40_000)
    a = binomial_dyadic_tables(20, nums, SeededRandom(1)).reshape(-1, 3)
    b = binomial_dyadic_digits(20, nums, SeededRandom(2)).reshape(-1, 3)
    for col in range(3):
        table = np.array([np.bincount(x[:, col], minlength=21) for x in (a, b)])
        table = table[:, table.sum(axis=0) >= 10]
        assert stats.chi2_contingency(table).pvalue > ALPHA


def test_fused_encoding_equals_numerators_then_sampler() -> None:
    """cpbm_encode computes numerators and draws block by block; with the same seed it equals
    probability_numerators followed by the table sampler (several batches, clipped rows)."""
    y = np.sin(np.arange(300 * 1024, dtype=np.float64)).reshape(300, 1024)
    y[7] *= 100.0  # clipped to norm C
    a = cpbm_encode(y, 0.2, 3.0, 30, SeededRandom(5))
    b = binomial_dyadic_tables(30, probability_numerators(y, 0.2, 3.0), SeededRandom(5))
    assert a.shape == y.shape and np.array_equal(a, b)
    # and the digit path for m above the table limit agrees in shape and range
    z = cpbm_encode(y[:3], 0.2, 3.0, cpbm.TABLE_MAX_M + 1, SeededRandom(1))
    assert z.shape == (3, 1024) and 0 <= z.min() and z.max() <= cpbm.TABLE_MAX_M + 1


@pytest.mark.parametrize("theta", [0.2, 0.1, 0.25 / 3, 0.25, 3 * 2.0**-33])
def test_quantised_theta_rounds_down_and_bounds_every_device_probability(theta: float) -> None:
    """The accounting uses theta; the devices run with theta_q, which must not exceed it (a
    theta rounded up would put probabilities outside the range Lemma 2 covers). Extreme and
    clipped rows (several thresholds, float rounding in y * C / ||y||) never leave
    [1/2 - theta_q, 1/2 + theta_q], and +-C reach its ends exactly."""
    tq = quantised_theta(theta)
    assert tq <= Fraction(theta) < tq + Fraction(1, 2**32)
    hw = int(tq * 2**32)
    rng = np.random.default_rng(3)
    for clip in [1.0, 0.3, 7.123456789, 1e-3, 12345.678]:
        ends = probability_numerators([[clip, 0.0], [-clip, 0.0]], theta, clip)[:, 0]
        assert ends.tolist() == [2**31 + hw, 2**31 - hw]
        rows = rng.normal(size=(2000, 5)) * clip * rng.uniform(0.5, 3.0, size=(2000, 1))
        rows[:, 0] = np.where(rng.uniform(size=2000) < 0.5, 1, -1) * clip * (1 + 1e-16)
        a = probability_numerators(rows, theta, clip)
        assert int(np.abs(a - 2**31).max()) <= hw


def test_secure_sum_is_dp_at_a_non_dyadic_theta() -> None:
    """theta = 0.2 is not a multiple of 2**-32: the implemented mechanism (numerators from
    probability_numerators at +-C and 0) is DP at the epsilon accounted with theta itself, both
    directions, n = 2, m = 2."""
    theta, clip, m, delta = 0.2, 1.5, 2, 1e-3
    eps = cpbm_rdp(2, theta, m, 1).epsilon(delta)
    nums = probability_numerators([[clip], [-clip], [0.0], [0.4]], theta, clip)[:, 0]
    probs = [Fraction(int(a), 2**32) for a in nums]
    teeth = False
    for i in range(4):
        for j in range(4):
            if i == j:
                continue
            for other in probs:
                p = _secure_sum_pmf([probs[i], other], m)
                q = _secure_sum_pmf([probs[j], other], m)
                assert check_dp(p, q, eps, delta).holds
                teeth |= not check_dp(p, q, eps / 4, delta).holds
    assert teeth
