"""Statistical and exact tests of the binomial sampler (binary-digit splitting; rejection for
Binomial(m, 1/2) above the cut-off: envelope domination, rigorous acceptance bounds, ties)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from mpmath.ctx_iv import MPIntervalContext
from scipy import stats
from tests.scripted_random import ScriptedRandom
from tests.stats import assert_fits, assert_rejects, chi2_cells, chi2_integer

from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import Binomial, Geometric, binomial
from privhist.noise import _binomial_large as large
from privhist.noise.binomial import HALF_CUTOFF, binomial_half, binomial_popcount


def _window(n: int, *ps: Fraction) -> tuple[int, int]:
    """Integers within 8 sd of the mean under every model in ``ps``."""
    lo, hi = n, 0
    for p in ps:
        mean, sd = n * float(p), math.sqrt(n * float(p) * (1 - float(p)))
        lo = min(lo, max(0, math.floor(mean - 8 * sd) - 1))
        hi = max(hi, min(n, math.ceil(mean + 8 * sd) + 1))
    return lo, hi


CASES = [
    (1, Fraction(1, 3)),
    (10, Fraction(1, 3)),
    (10, Fraction(1, 10)),
    (100, Fraction(1, 2)),
    (1000, Fraction(3, 8)),
    (1000, Fraction(1, 3)),
    (37, Fraction(2**70 + 1, 3 * 2**70)),
]


@pytest.mark.parametrize(("n", "p"), CASES, ids=str)
def test_binomial_fits(n: int, p: Fraction) -> None:
    size = 200_000
    x = binomial(n, p, SeededRandom(n * 7 + p.denominator % 101), size=size)
    assert x.dtype == np.int64 and x.shape == (size,)
    wrong = [p * Fraction(7, 10), 1 - (1 - p) * Fraction(7, 10)]
    lo, hi = _window(n, p, *wrong)
    assert_fits(chi2_integer(x, Binomial(n, p), lo, hi))
    assert_rejects([chi2_integer(x, Binomial(n, q), lo, hi) for q in wrong])


@pytest.mark.parametrize("p", [Fraction(1, 10), Fraction(1, 3)], ids=str)
def test_binomial_million_trials_fits(p: Fraction) -> None:
    n, size = 10**6, 2000
    x = binomial(np.full(size, n), p, SeededRandom(p.denominator))
    wrong = [p * Fraction(99, 100), p * Fraction(101, 100)]
    lo, hi = _window(n, p, *wrong)
    # scipy's float64 law as the reference (mpmath per cell is slow over ~7000 cells)
    assert_fits(chi2_integer(x, _ScipyBinomial(n, float(p)), lo, hi, max_cells=40))
    pvalues = [chi2_integer(x, _ScipyBinomial(n, float(q)), lo, hi, max_cells=40) for q in wrong]
    assert_rejects(pvalues)


def test_binomial_mixed_trial_counts_in_one_call() -> None:
    n = np.tile(np.array([0, 1, 5, 1000], dtype=np.int64), 100_000)
    p = Fraction(1, 3)
    x = binomial(n, p, SeededRandom(21))
    assert x.shape == n.shape
    assert (x[n == 0] == 0).all()
    for k in (1, 5, 1000):
        lo, hi = _window(k, p)
        assert_fits(chi2_integer(x[n == k], Binomial(k, p), lo, hi))


def test_binomial_billion_trials_mean() -> None:
    # three draws of Binomial(1e9, 1/10): their sum is within 5 sd of its mean (alpha ~ 6e-7)
    n, p = 10**9, Fraction(1, 10)
    x = binomial(np.full(3, n), p, SeededRandom(9))
    mean = 3 * n * float(p)
    sd = math.sqrt(3 * n * float(p) * (1 - float(p)))
    assert abs(int(x.sum()) - mean) < 5 * sd
    assert len(set(x.tolist())) == 3  # not one draw repeated


def test_popcount_masks_the_last_word() -> None:
    # the digit loop with popcounts only (binomial itself finishes <= 32 trials one uniform each)
    ones = (1 << 64) - 1
    pop = binomial_popcount
    # p = 1/2: one digit, successes = number of 1 bits among the first n bits
    assert pop(70, Fraction(1, 2), ScriptedRandom([ones, ones])).item() == 70
    assert pop(70, Fraction(1, 2), ScriptedRandom([0, (ones << 6) & ones])).item() == 0
    assert pop(70, Fraction(1, 2), ScriptedRandom([ones, 0b101])).item() == 66
    assert pop(3, Fraction(1, 2), ScriptedRandom([0b1011])).item() == 2


def test_digit_splitting_by_hand() -> None:
    # p = 3/4 = 0.11: digit 1 -> ones succeed (popcount); digit 2 -> again among the rest
    rng = ScriptedRandom([0b0011, 0b01])  # 4 trials: 2 succeed, 2 undecided; then 1 of those
    assert binomial_popcount(4, Fraction(3, 4), rng).item() == 3
    assert rng.used == 2


def test_binomial_edge_probabilities_and_shapes() -> None:
    rng = SeededRandom(0)
    n = np.array([[3, 0], [7, 10**12]], dtype=np.int64)
    assert binomial(n, 0, rng).tolist() == [[0, 0], [0, 0]]
    assert binomial(n, 1, rng).tolist() == n.tolist()
    assert binomial(5, Fraction(1, 3), rng, size=(2, 3)).shape == (2, 3)
    assert binomial(np.zeros(0, dtype=np.int64), Fraction(1, 3), rng).shape == (0,)


def test_binomial_secure_random_fits() -> None:
    x = binomial(np.full(100_000, 50), Fraction(1, 10), SecureRandom())
    assert_fits(chi2_integer(x, Binomial(50, Fraction(1, 10)), 0, 50))


# -- Binomial(m, 1/2) above the cut-off: rejection from the geometric-block envelope ---------


class _ScipyBinomial:
    """Reference law from scipy (incomplete beta): float64 cdf accurate far below alpha."""

    def __init__(self, n: int, p: float = 0.5) -> None:
        self.law = stats.binom(n, p)

    def pmf(self, k: Any) -> Any:
        return self.law.pmf(k)

    def cdf(self, k: int) -> float:
        return float(self.law.cdf(k))

    def sf(self, k: int) -> float:  # P[X >= k], as chi2_integer expects
        return float(self.law.sf(k - 1))


def _exact_threshold(n: int, d: int, j: int) -> Fraction:
    """``4**j C(2n, n + d) / C(2n, n)`` by exact integer arithmetic (products for large n)."""
    if n <= 50_000:
        return Fraction(math.comb(2 * n, n + d) * 4**j, math.comb(2 * n, n))
    return Fraction(math.prod(range(n - d + 1, n + 1)) * 4**j, math.prod(range(n + 1, n + d + 1)))


def _ratios(rows: list[tuple[int, int, int]]) -> dict[tuple[int, int], Fraction]:
    """``C(2n, n + d) / C(2n, n)`` for every ``(n, d)`` in rows, by running exact products."""
    out = {}
    for n in {r[0] for r in rows}:
        wanted = sorted({r[1] for r in rows if r[0] == n})
        num = den = 1
        for d in range(wanted[-1] + 1):
            if d:
                num *= n + 1 - d
                den *= n + d
            if d in wanted:
                out[n, d] = Fraction(num, den)
    return out


def _mp_threshold(n: int, d: int, j: int) -> Any:
    """The same ratio from mpmath's log-gamma at 320 bits (independent of the module)."""
    ctx = mpmath.MPContext()
    ctx.prec = 320
    log_a = (
        j * ctx.log(4) + 2 * ctx.loggamma(n + 1) - ctx.loggamma(n + d + 1) - ctx.loggamma(n - d + 1)
    )
    return ctx.exp(log_a)


@pytest.mark.parametrize("m", [1024, 1025, 2047, 2048, 2049, 4097])
def test_half_fits_around_the_cutoff(m: int) -> None:
    # 2047 is a popcount; 2048 and up are rejection samples (1024 = 2 MIN_HALF, called directly)
    assert HALF_CUTOFF == 2048 and large.MIN_HALF == 512
    if m < 2 * large.MIN_HALF + 2:
        half = large.binomial_half_large
    else:
        half = binomial_half
    size = 200_000
    x = half(np.full(size, m, dtype=np.int64), SeededRandom(m))
    assert x.dtype == np.int64 and x.shape == (size,)
    lo, hi = _window(m + 4, Fraction(1, 2))
    assert_fits(chi2_integer(x, Binomial(m, Fraction(1, 2)), lo, hi, max_cells=40))
    wrong = [Binomial(m + 2, Fraction(1, 2)), Binomial(m - 2, Fraction(1, 2))]  # mean +-1
    assert_rejects([chi2_integer(x, model, lo, hi, max_cells=40) for model in wrong])


@pytest.mark.parametrize("m", [10**6, 10**6 + 1, 10**9, 10**9 + 1])
def test_half_fits_for_large_m(m: int) -> None:
    size = 60_000
    x = binomial_half(np.full(size, m, dtype=np.int64), SeededRandom(m % 1000))
    sd = math.sqrt(m) / 2
    lo, hi = math.floor(m / 2 - 8 * sd), math.ceil(m / 2 + 8 * sd)
    assert_fits(chi2_integer(x, _ScipyBinomial(m), lo, hi, max_cells=40))
    shift = round(0.2 * sd)  # mean off by 0.1 sd; the same mean with an 8% larger sd
    wrong = [_ScipyBinomial(m + shift), _ScipyBinomial(round(1.2 * m), m / 2 / round(1.2 * m))]
    assert_rejects([chi2_integer(x, model, lo, hi, max_cells=40) for model in wrong])


def test_half_fits_for_m_2_to_the_62() -> None:
    # Berry-Esseen: |P[(X - m/2) / sd <= z] - Phi(z)| <= 0.4748 / sqrt(m) = 2**-32, far below
    # the resolution of 40 equiprobable normal cells; a 0.1-sd shift must be rejected.
    m, size = 1 << 62, 60_000
    x = binomial_half(np.full(size, m, dtype=np.int64), SeededRandom(62))
    z = (x - (1 << 61)).astype(np.float64) / float(1 << 30)
    edges = stats.norm.ppf(np.linspace(0, 1, 41)[1:-1])
    observed = np.bincount(np.searchsorted(edges, z), minlength=40)
    assert_fits(chi2_cells(observed, np.full(40, 1 / 40)))
    shifted = np.diff(stats.norm.cdf(np.concatenate([[-np.inf], edges, [np.inf]]) - 0.1))
    assert_rejects([chi2_cells(observed, shifted)])


def test_binomial_uses_the_fast_path_with_any_p() -> None:
    # p = 5/16: four digits, the first ones on m >= 2048 (rejection), the last on popcounts
    n, p, size = 20_000, Fraction(5, 16), 100_000
    x = binomial(np.full(size, n), p, SeededRandom(16))
    wrong = [Fraction(5 * n - 64, 16 * n), Fraction(5 * n + 64, 16 * n)]  # mean off by 4
    lo, hi = _window(n, p, *wrong)
    assert_fits(chi2_integer(x, Binomial(n, p), lo, hi, max_cells=40))
    assert_rejects([chi2_integer(x, Binomial(n, q), lo, hi, max_cells=40) for q in wrong])


def test_popcount_path_still_fits() -> None:
    n, p = 5_000, Fraction(1, 3)
    x = binomial_popcount(np.full(20_000, n), p, SeededRandom(5))
    lo, hi = _window(n, p)
    assert_fits(chi2_integer(x, Binomial(n, p), lo, hi, max_cells=40))


def test_block_width_satisfies_the_domination_condition() -> None:
    # w**2 - w ln 4 >= n ln 4, checked in exact rationals with an upper bound on ln 4
    mpmath.mp.prec = 200
    ln4_hi = Fraction(int(mpmath.floor(mpmath.log(4) * 2**150)) + 1, 2**150)
    rng = np.random.default_rng(11)
    ns = [512, 513, 1000, 2047, 2048, 10**6, 10**9, 2**40 + 7, 2**61 - 1, 2**61]
    ns += rng.integers(512, 2**61, size=300).tolist()
    widths = large.block_width(np.array(ns, dtype=np.int64)).tolist()
    for n, w in zip(ns, widths, strict=True):
        assert w * w - w * ln4_hi >= n * ln4_hi, (n, w)
        assert (w - 2) ** 2 < n * 1.3863 + 2 * w  # and not much larger than needed


@pytest.mark.parametrize("n", [512, 700, 2048, 2049])
def test_envelope_dominates_every_offset_exactly(n: int) -> None:
    # a(d) = 4**j C(2n, n + d) / C(2n, n) <= 1 for every offset d on both sides
    w = int(large.block_width(np.array([n]))[0])
    num = den = 1  # R(n, d) = num / den = prod_{i <= d} (n + 1 - i) / (n + i)
    worst = Fraction(0)
    for d in range(n + 1):
        if d:
            num *= n + 1 - d
            den *= n + d
        for j in {d // w, (d - 1) // w} if d else {0}:  # sign 0: y = d; sign 1: y = d - 1
            assert num << (2 * j) <= den, (n, d, j)
        if d == w:
            worst = Fraction(num << 2, den)
    assert worst > Fraction(1, 2)  # the first block boundary is nearly tight: not vacuous


@pytest.mark.parametrize("n", [10**6, 10**9 + 3, 2**61])
def test_envelope_dominates_at_block_boundaries_for_large_n(n: int) -> None:
    # R decreases in d, so a <= 1 on block j follows from its value at d = j w
    w = int(large.block_width(np.array([n]))[0])
    for j in range(1, 60):
        assert _mp_threshold(n, j * w, j) < 1, (n, j)


def test_float_bounds_bracket_the_exact_threshold() -> None:
    rng = np.random.default_rng(7)
    rows = []
    for n in (512, 513, 1000, 2048, 4099, 20_000):
        w = int(large.block_width(np.array([n]))[0])
        ds = {0, 1, w - 1, w, w + 1, 2 * w, n // 2 - 1, n // 2, *rng.integers(0, 4 * w, 30)}
        rows += [(n, int(d), j) for d in ds for j in range(4) if d <= n // 2]
    n, d, j = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    t_lo, t_hi, valid = large.threshold_bounds(n, d, j)
    assert valid.all()
    ratios = _ratios(rows)
    tight = 0
    for i, (ni, di, ji) in enumerate(rows):
        a = ratios[ni, di] * 4**ji
        assert Fraction(float(t_lo[i])) <= a <= Fraction(float(t_hi[i])), rows[i]
        if a > Fraction(1, 2**40):
            assert float(t_hi[i] - t_lo[i]) <= 1e-9 * float(a), rows[i]
            tight += 1
    assert tight > 300


def test_float_bounds_bracket_high_precision_values_for_large_n() -> None:
    rng = np.random.default_rng(8)
    rows = []
    for n in (10**6, 10**9 + 1, 2**40 + 7, 3 * 10**15, 2**61):
        w = int(large.block_width(np.array([n]))[0])
        ds = [0, 1, w, 3 * w + 5, n // 2, *rng.integers(0, 6 * w, 12).tolist()]
        rows += [(n, d, j) for d in ds for j in range(0, 7, 2)]
    n, d, j = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    t_lo, t_hi, valid = large.threshold_bounds(n, d, j)
    assert valid.all()
    for i, row in enumerate(rows):
        a = _mp_threshold(*row)
        assert mpmath.mpf(float(t_lo[i])) <= a <= mpmath.mpf(float(t_hi[i])), row
        if a > mpmath.mpf(2) ** -40:
            assert float(t_hi[i] - t_lo[i]) <= 1e-9 * float(a), row


def test_float_bounds_refuse_offsets_beyond_half() -> None:
    n = np.array([1000, 1000, 1000], dtype=np.int64)
    _, _, valid = large.threshold_bounds(n, np.array([500, 501, 1000]), np.zeros(3, np.int64))
    assert valid.tolist() == [True, False, False]


@pytest.mark.parametrize(("n", "d", "j"), [(10**5, 16_385, 0), (3 * 10**7, 16_385, 2)])
def test_interval_bounds_bracket_the_exact_threshold(n: int, d: int, j: int) -> None:
    assert d > large.EXACT_OFFSET  # the interval (not the rational) branch
    a = Fraction(math.perm(n, d) << (2 * j), math.perm(n + d, d))
    for prec in (64, 200):
        lo, hi = large.threshold_interval(n, d, j, prec)
        assert lo <= math.floor(a * 2**prec) <= hi <= lo + 4  # one unit of margin each side


def test_log_factorial_interval_contains_log_gamma() -> None:
    ctx = MPIntervalContext()
    ctx.prec = 300
    mpmath.mp.prec = 400
    for k in (0, 1, 4096, 4097, 10**6, 2**61):
        box = large.log_factorial_interval(ctx, k, 4096)
        value = mpmath.loggamma(k + 1)
        assert box.a <= value <= box.b and box.delta < mpmath.mpf(2) ** -200


@pytest.mark.parametrize(("n", "d", "j"), [(5000, 70, 0), (10**6, 1500, 1), (10**12, 20_000, 1)])
def test_ties_continue_the_same_uniform_exactly(n: int, d: int, j: int) -> None:
    # first word = floor(a 2**64): the second word decides, against exact digits of a
    if d <= large.EXACT_OFFSET:
        a2 = math.floor(Fraction(math.perm(n, d) << (2 * j), math.perm(n + d, d)) * 2**128)
    else:
        ctx = mpmath.MPContext()
        ctx.prec = 400
        a2 = int(ctx.floor(_mp_threshold(n, d, j) * ctx.mpf(2) ** 128))
    first, low = divmod(a2, 2**64)
    assert 0 < low < 2**64 - 1  # a 2**128 is not within one unit of a multiple of 2**64
    below = ScriptedRandom([low - 1])
    assert large.accept_exact(n, d, j, first, below) and below.used == 1
    above = ScriptedRandom([low + 1])
    assert not large.accept_exact(n, d, j, first, above) and above.used == 1


def test_dyadic_threshold_tie_is_a_rejection() -> None:
    # a(3, 1, 0) = 3/4: U = 3/4 exactly on the first word is not below it (no further word)
    rng = ScriptedRandom([])
    assert not large.accept_exact(3, 1, 0, 3 << 62, rng)
    assert large.accept_exact(3, 1, 0, (3 << 62) - 1, rng)


def test_rejection_round_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    # one proposal per round: words are (geometric, uniform offset, sign, acceptance, ...)
    monkeypatch.setattr(large, "_MAX_PROPOSALS", 1)
    n = 10**6
    w = int(large.block_width(np.array([n]))[0])
    d = 700  # block 0, sign 0: X = 700
    a64 = math.floor(_exact_threshold(n, d, 0) * 2**128)
    first, low = divmod(a64, 2**64)
    offset_word = (1 << 63) - (1 << 63) % w + d
    accept_round = [1, offset_word, 0, first, low - 1]  # tie, then U below a
    reject_round = [1, offset_word, 0, first, low + 1]  # tie, then U above a
    certain = [1, (1 << 63) - (1 << 63) % w, 0, 0]  # X = 0 has a = 1: accepted at once
    rng = ScriptedRandom(accept_round)
    assert binomial_half(np.array([2 * n]), rng).tolist() == [n + d]
    assert rng.used == len(accept_round)
    rng = ScriptedRandom(reject_round + certain)
    assert binomial_half(np.array([2 * n]), rng).tolist() == [n]
    # odd m: one more fair bit (the top bit of the first byte of the next word)
    rng = ScriptedRandom([*certain, 1 << 7])
    assert binomial_half(np.array([2 * n + 1]), rng).tolist() == [n + 1]
    # sign 1 maps y to -(y + 1)
    rng = ScriptedRandom([1, offset_word, 1 << 7, 0])
    assert binomial_half(np.array([2 * n]), rng).tolist() == [n - d - 1]


def test_geometric_quarter_law_and_zero_words() -> None:
    j = large.geometric_quarter(SeededRandom(4), 400_000)
    assert_fits(chi2_integer(j, Geometric(math.log(4)), 0, 20))
    assert_rejects([chi2_integer(j, Geometric(math.log(3)), 0, 20)])
    # a zero word adds 32 and continues: 0, then 0b100 (one zero pair) -> 33
    assert large.geometric_quarter(ScriptedRandom([0, 0b100]), 1).tolist() == [33]


def test_half_shapes_zero_and_huge() -> None:
    rng = SeededRandom(1)
    m = np.array([0, 1, 2047, 2048, 2**62, 2**62 - 1, 0], dtype=np.int64)
    x = binomial_half(m, rng)
    assert x.dtype == np.int64 and x.shape == m.shape
    assert x[0] == 0 and x[-1] == 0 and ((x >= 0) & (x <= m)).all()
    for i in (4, 5):  # within 6 sd (2**30 each) of 2**61
        assert abs(int(x[i]) - 2**61) < 6 * 2**30
    assert binomial_half(np.zeros(0, dtype=np.int64), rng).shape == (0,)
    y = binomial(np.array([[2**62, 0], [5_000, 4_096]]), Fraction(1, 3), rng)
    assert y.shape == (2, 2) and y[0, 1] == 0
    assert abs(int(y[0, 0]) - 2**62 / 3) < 6 * math.sqrt(2**62 * 2 / 9)


def test_large_path_with_secure_random_fits() -> None:
    m = 10**6 + 1
    x = binomial_half(np.full(30_000, m, dtype=np.int64), SecureRandom())
    sd = math.sqrt(m) / 2
    lo, hi = math.floor(m / 2 - 8 * sd), math.ceil(m / 2 + 8 * sd)
    assert_fits(chi2_integer(x, _ScipyBinomial(m), lo, hi, max_cells=40))


def test_interval_ties_never_raise_even_for_a_dyadic_looking_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Beyond EXACT_OFFSET a tie is decided from interval bounds on a. Bounds that straddle an
    # integer at every precision (a = N / 2**64 exactly, seen through +-1 units) used to end in
    # ArithmeticError; a tie must instead draw further words of the same U and decide.
    big = 1 << 40

    def straddling(n: int, d: int, j: int, prec: int) -> tuple[int, int]:
        return (big << (prec - 64)) - 1, (big << (prec - 64)) + 1

    monkeypatch.setattr(large, "threshold_interval", straddling)
    n, d = 10**9, large.EXACT_OFFSET + 1
    assert not large.accept_exact(n, d, 0, big + 1, ScriptedRandom([]))  # U >= a at once
    rng = ScriptedRandom([5])  # U = (N - 1 + 5 / 2**64) / 2**64: below a by one more word
    assert large.accept_exact(n, d, 0, big - 1, rng) and rng.used == 1
    rng = ScriptedRandom([5])  # U = (N + 5 / 2**64) / 2**64 > a: one more word decides
    assert not large.accept_exact(n, d, 0, big, rng) and rng.used == 1
    rng = ScriptedRandom([0, 0, 7])  # U agrees with a on 192 bits, then exceeds it
    assert not large.accept_exact(n, d, 0, big, rng) and rng.used == 3
    # a threshold just below N / 2**64 (bounds N 2**(p - 64) - 3 .. - 1): U = N / 2**64 is above
    monkeypatch.setattr(
        large,
        "threshold_interval",
        lambda n, d, j, p: ((big << (p - 64)) - 3, (big << (p - 64)) - 1),
    )
    assert not large.accept_exact(n, d, 0, big, ScriptedRandom([0]))


@pytest.mark.parametrize("m", [1024, 2048])
def test_every_proposal_maps_and_accepts_exactly(m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # For every sign s and y = j w + v up to one block beyond the support, script the words of
    # one round (J: a word with 2j trailing zeros; V: a word = v mod w above the rejection zone
    # of uniform_below; S: top bit of the first byte; U) and check: the output is n + y (s = 0)
    # or n - y - 1 (s = 1); each of 0..m arises once; with f = floor(a 2**64) for the exact
    # a = 4**j C(2n, n + d) / C(2n, n), U's word f - 1 is accepted and f + 1 rejected without
    # further words (f > 0; for a < 2**-64 every 8th y, to save time); offsets d = y + s > n are
    # rejected even with U = 0 (d = n + 1 and every 4th y). So the acceptance probability of
    # every x is a(x) to within 2**-63 and the law is Binomial(m, 1/2).
    monkeypatch.setattr(large, "_MAX_PROPOSALS", 1)
    n = m // 2
    w = int(large.block_width(np.array([n]))[0])
    base = (1 << 63) - (1 << 63) % w + w
    certain = [1, base, 0, 0]  # j = 0, v = 0, s = 0, U = 0: x = 0 with a = 1
    half = binomial_half if m >= HALF_CUTOFF else large.binomial_half_large
    ratio = [Fraction(1)]  # R(n, d) = C(2n, n + d) / C(2n, n)
    for d in range(1, n + 1):
        ratio.append(ratio[-1] * Fraction(n + 1 - d, n + d))
    seen: list[int] = []
    for s in (0, 1):
        for y in range(n + w):
            j, v = divmod(y, w)
            head = [1 << (2 * j), base + v, s << 7]
            d = y + s

            def run(u: int, extra: list[int], head: list[int] = head) -> tuple[int, int]:
                rng = ScriptedRandom([*head, u, *extra])
                return int(half(np.array([m], dtype=np.int64), rng)[0]), rng.used

            if d > n:
                if y % 4 == 0 or d == n + 1:
                    assert run(0, certain) == (n, 8), (s, y)
                continue
            f = math.floor(ratio[d] * 4**j * 2**64)
            assert f <= 2**64 and (f < 2**64 or d == 0), (s, y)  # a <= 1, = 1 only at x = 0
            k = n + y if s == 0 else n - y - 1
            if f > 0:
                assert run(f - 1, []) == (k, 4), (s, y)
            if f + 1 < 2**64 and (f > 0 or y % 8 == 0):  # a < 2**-64: every 8th y (time)
                assert run(f + 1, certain) == (n, 8), (s, y)
            seen.append(k)
    assert sorted(seen) == list(range(m + 1))


def test_block_width_at_the_critical_sizes() -> None:
    # the n where w is just enough: n_w = floor((w**2 - w ln 4) / ln 4) and its neighbours, for
    # small w and for w up to the one of n = 2**61 (exact rationals, ln 4 bracketed to 2**-200)
    mpmath.mp.prec = 260
    ln4_hi = Fraction(int(mpmath.floor(mpmath.log(4) * 2**200)) + 1, 2**200)
    ln4_lo = ln4_hi - Fraction(1, 2**200)
    rng = np.random.default_rng(12)
    ws = list(range(27, 700)) + rng.integers(700, 1_787_897_416, 700).tolist() + [1_787_897_415]
    ns = []
    for w in ws:
        crit = math.floor((w * w - w * ln4_lo) / ln4_lo)
        ns += [n for n in (crit, crit + 1) if 512 <= n <= 2**61]
    widths = large.block_width(np.array(ns, dtype=np.int64)).tolist()
    for n, w in zip(ns, widths, strict=True):
        assert w * w - w * ln4_hi >= n * ln4_hi, (n, w)
    assert any(w * w - w * ln4_lo < (n + 1) * ln4_lo for n, w in zip(ns, widths, strict=True))


def test_float_bounds_at_block_edges_where_n_is_not_a_float() -> None:
    # n above 2**53 is rounded when converted; offsets at the block edges with the real j
    rows = []
    for n in (2**53 + 1, 2**53 + 3, 2**61 - 1, 2**60 + 12345):
        w = int(large.block_width(np.array([n]))[0])
        for k in range(0, 9):
            for d in (k * w - 1, k * w, k * w + 1, (k + 1) * w):
                if d >= 0:
                    rows += [(n, d, j) for j in {max(d - 1, 0) // w, d // w}]
    n, d, j = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    t_lo, t_hi, valid = large.threshold_bounds(n, d, j)
    assert valid.all()
    for i, row in enumerate(rows):
        a = _mp_threshold(*row)
        assert mpmath.mpf(float(t_lo[i])) <= a <= mpmath.mpf(float(t_hi[i])), row
        assert a <= 1, row


def test_half_tails_beyond_3_and_4_sd() -> None:
    # rejection samplers err first in the tails (blocks j >= 2 lie beyond 3.3 sd): cells
    # |z| < 3, 3..3.5, 3.5..4, > 4 sd on each side with exact binomial probabilities
    m, size = 2**40 + 1, 1_000_000
    x = binomial_half(np.full(size, m, dtype=np.int64), SeededRandom(40))
    sd = math.sqrt(m) / 2
    cuts = [-4.0, -3.5, -3.0, 3.0, 3.5, 4.0]
    edges = [math.floor(m / 2 + c * sd) for c in cuts]  # cell i: edges[i-1] < K <= edges[i]
    observed = np.bincount(np.searchsorted(edges, x, side="left"), minlength=len(edges) + 1)

    def cells(law: Any) -> Any:
        cdf = np.array([float(law.cdf(e)) for e in edges])
        return np.diff(np.concatenate([[0.0], cdf, [1.0]]))

    assert observed[0] + observed[-1] > 30  # about 63 draws beyond 4 sd
    assert_fits(chi2_cells(observed, cells(stats.binom(m, 0.5)), max_cells=10**6))
    wider = stats.norm(m / 2, 1.05 * sd)  # 5% more spread: about 1.5 times the 4-sd tails
    assert_rejects([chi2_cells(observed, cells(wider), max_cells=10**6)])


def test_half_entries_with_different_m_in_one_call() -> None:
    # one vector mixing sizes (and the popcount path): each entry follows its own m
    sizes = [1000, 2048, 2049, 10**5 + 1, 2**40]
    m = np.repeat(np.array(sizes, dtype=np.int64), 40_000)
    order = np.random.default_rng(3).permutation(m.size)
    x = np.empty_like(m)
    x[order] = binomial_half(m[order], SeededRandom(77))
    for size in sizes:
        xs = x[m == size]
        sd = math.sqrt(size) / 2
        lo, hi = math.floor(size / 2 - 8 * sd), math.ceil(size / 2 + 8 * sd)
        assert_fits(chi2_integer(xs, _ScipyBinomial(size), lo, hi, max_cells=40))
        shifted = _ScipyBinomial(size + 2 * round(0.1 * sd) + 2)  # mean off by >= 0.1 sd
        assert_rejects([chi2_integer(xs, shifted, lo, hi, max_cells=40)])


def test_popcount_of_an_entry_above_one_batch_counts_exactly_its_bits() -> None:
    """An entry of more than ``2**26`` trials (more than one batch of words) counts exactly its
    own bits: with every scripted word all ones, ``2**26 + 65`` trials give ``2**26 + 65``
    successes from ``2**20`` whole words, one more whole word and one bit of a last word."""
    from privhist.noise.binomial import binomial_half_popcount

    m = 2**26 + 65
    rng = ScriptedRandom([2**64 - 1] * (2**20 + 2))
    assert binomial_half_popcount(np.array([m], dtype=np.int64), rng).tolist() == [m]
    assert rng.used == 2**20 + 2


def test_offsets_up_to_exact_offset_use_the_exact_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offsets ``d <= EXACT_OFFSET`` are compared with the threshold's exact digits (the
    rational ``4**j perm(n, d) / perm(n + d, d)``), larger ones through bounds: the boundary
    offset itself takes the oracle, and gives the same answer as the bounds."""
    from privhist.noise import _binomial_large as big_path

    n, d, j = 3 * big_path.EXACT_OFFSET, big_path.EXACT_OFFSET, 1
    first = 1 << 62
    want = big_path.less_by_bounds(
        first, SeededRandom(0), lambda prec: big_path.threshold_interval(n, d, j, prec)
    )

    def refused(*args: Any) -> bool:
        raise AssertionError("bounds used at the exact offset")

    monkeypatch.setattr(big_path, "less_by_bounds", refused)
    assert big_path.accept_exact(n, d, j, first, SeededRandom(0)) == want
