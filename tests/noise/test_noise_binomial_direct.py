"""Statistical and exact tests of the two newer paths of :func:`privhist.noise.binomial`:

* the direct rejection sampler around the mode (:mod:`privhist.noise._binomial_direct`) for
  entries whose mode ``M`` and ``n - M`` are both at least ``MIN_MODE``: envelope domination for
  every offset, float bounds against exact rationals and 320-bit mpmath, ties, every proposal
  scripted, and goodness of fit (alpha = 1e-6) with power checks, tails included;
* the finish of at most ``FINISH_TRIALS`` undecided trials with one uniform per trial.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.scripted_random import ScriptedRandom
from tests.stats import assert_fits, assert_rejects, chi2_cells, chi2_integer

from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import Binomial, binomial
from privhist.noise import _binomial_direct as direct
from privhist.noise.binomial import FINISH_TRIALS, finish_trials

BENCH_P = Fraction(115837317431, 2**40)  # sample-and-threshold's rate at epsilon = 1


class _Scipy:
    """Reference law from scipy (incomplete beta), float64 far below alpha."""

    def __init__(self, n: int, p: float) -> None:
        self.law = stats.binom(n, p)

    def pmf(self, k: Any) -> Any:
        return self.law.pmf(k)

    def cdf(self, k: int) -> float:
        return float(self.law.cdf(k))

    def sf(self, k: int) -> float:  # P[X >= k]
        return float(self.law.sf(k - 1))


def _window(n: int, p: Fraction) -> tuple[int, int]:
    mean, sd = n * float(p), math.sqrt(n * float(p) * (1 - float(p)))
    return max(0, math.floor(mean - 8 * sd)), min(n, math.ceil(mean + 8 * sd))


def _setup(n: int, p: Fraction) -> tuple[int, int, int, direct.Setup]:
    s = direct.Setup(np.array([n], dtype=np.int64), p)
    return int(s.mode[0]), int(s.rest[0]), int(s.width[0]), s


def _ratios(n: int, p: Fraction) -> dict[int, Fraction]:
    """``R(x) = f(M + x) / f(M)`` for every ``x`` in ``-M..N``, by exact running products."""
    m = (n + 1) * p.numerator // p.denominator
    rest = n - m
    odds = p / (1 - p)
    out = {0: Fraction(1)}
    r = Fraction(1)
    for d in range(1, rest + 1):
        r *= Fraction(rest - d + 1, m + d) * odds
        out[d] = r
    r = Fraction(1)
    for d in range(1, m + 1):
        r *= Fraction(m - d + 1, rest + d) / odds
        out[-d] = r
    return out


def _block(x: int, w: int) -> int:
    return (x if x >= 0 else -x - 1) // w


def _mp_ratio(n: int, p: Fraction, x: int, j: int) -> Any:
    """``4**j f(M + x) / f(M)`` from mpmath's log-gamma at 320 bits (independent of the module)."""
    ctx = mpmath.MPContext()
    ctx.prec = 320
    m = (n + 1) * p.numerator // p.denominator
    rest = n - m
    lp = ctx.log(ctx.mpf(p.numerator)) - ctx.log(ctx.mpf(p.denominator - p.numerator))
    log_a = (
        j * ctx.log(4)
        + ctx.loggamma(m + 1)
        + ctx.loggamma(rest + 1)
        - ctx.loggamma(m + x + 1)
        - ctx.loggamma(rest - x + 1)
        + x * lp
    )
    return ctx.exp(log_a)


# -- which entries go where -------------------------------------------------------------------


def test_eligible_at_the_edges() -> None:
    p = Fraction(1, 10)  # M = floor((n + 1) / 10)
    n = np.array([2549, 2559, 2569, 10**9, 0, 300], dtype=np.int64)
    assert direct.eligible(n, p).tolist() == [False, True, True, True, False, False]
    q = Fraction(9, 10)  # N = n - M is the small side
    assert direct.eligible(np.array([2559, 2570], dtype=np.int64), q).tolist() == [False, True]
    huge_den = Fraction(1, 3 * 2**62)
    assert not direct.eligible(np.array([2**62], dtype=np.int64), huge_den).any()
    # both sides exactly at MIN_MODE (n = 512, p = 1/2: M = 256 = n - M), from the definition
    for q in (Fraction(1, 2), Fraction(1, 3), Fraction(2, 3)):
        ns = np.arange(2 * direct.MIN_MODE - 8, 3 * direct.MIN_MODE + 8, dtype=np.int64)
        want = []
        for k in ns.tolist():
            m = (k + 1) * q.numerator // q.denominator
            want.append(m >= direct.MIN_MODE and k - m >= direct.MIN_MODE)
        assert direct.eligible(ns, q).tolist() == want, q
    assert direct.eligible(np.array([512], dtype=np.int64), Fraction(1, 2)).tolist() == [True]


def test_mode_and_rest_exact_beyond_int64_products() -> None:
    p = Fraction(2**61 - 1, 2**61 + 5)
    n = np.array([2**20, 2**40, 2**62 - 1], dtype=np.int64)
    s = direct.Setup(n, p)
    for i, k in enumerate(n.tolist()):
        assert int(s.mode[i]) == (k + 1) * p.numerator // p.denominator
        r = (k + 1) * p.numerator % p.denominator
        c = Fraction(r - p.numerator, int(s.mode[i]) * (p.denominator - p.numerator))
        assert abs(Fraction(float(s.c[i])) - c) <= abs(c) * Fraction(1, 2**50)


# -- the envelope -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "p"),
    [
        (520, Fraction(1, 2)),
        (2570, Fraction(1, 10)),
        (2570, Fraction(9, 10)),
        (1500, Fraction(2, 7)),
        (4000, BENCH_P),
    ],
    ids=str,
)
def test_envelope_dominates_every_offset_exactly(n: int, p: Fraction) -> None:
    m, rest, w, _ = _setup(n, p)
    assert min(m, rest) >= direct.MIN_MODE
    ratios = _ratios(n, p)
    assert max(ratios.values()) == 1  # M is the mode
    for x, r in ratios.items():
        assert r * 4 ** _block(x, w) <= 1, x


def test_block_width_check_is_rigorous() -> None:
    # h(w) >= ln 4 with exact A, B and ln 4 bracketed from above, over many sizes and rates
    mpmath.mp.prec = 200
    ln4_hi = Fraction(int(mpmath.floor(mpmath.log(4) * 2**150)) + 1, 2**150)
    rng = np.random.default_rng(5)
    ns = [*rng.integers(600, 2**62, 300).tolist(), 600, 2**53 + 1, 2**62]
    for p in (Fraction(1, 2), Fraction(1, 10), Fraction(9, 10), BENCH_P, Fraction(3, 2**40)):
        ok = [k for k in ns if direct.eligible(np.array([k], dtype=np.int64), p)[0]]
        s = direct.Setup(np.array(ok, dtype=np.int64), p)
        for i, k in enumerate(ok):
            w = int(s.width[i])
            big_a, big_b = (k + 1) * (1 - p), (k + 1) * p
            h = Fraction(w * (w - 1), 2) * (1 / (big_a + w) + 1 / (big_b + w))
            assert h >= ln4_hi, (k, p, w)
            # and w is not wasteful: the round success 3 / (8 w f(M)) stays above 0.45
            fm = float(stats.binom(k, float(p)).pmf(int(s.mode[i])))
            assert 3 / (8 * w * fm) > 0.45, (k, p, w)


# -- float bounds and exact decisions ---------------------------------------------------------


def _bounds_at(s: Any, m: int, rest: int, x: Any, j: Any) -> Any:
    """``ratio_bounds`` for offsets ``x`` and blocks ``j`` of one (n, p)'s setup ``s``."""
    size = x.shape[0]
    return direct.ratio_bounds(
        np.full(size, m),
        np.full(size, rest),
        np.full(size, s.c[0]),
        x,
        j,
        np.full(size, s.a_up[0]),
        np.full(size, s.b_up[0]),
    )


@pytest.mark.parametrize(
    ("n", "p"),
    [(520, Fraction(1, 2)), (2570, Fraction(1, 10)), (2570, Fraction(9, 10)), (4000, BENCH_P)],
    ids=str,
)
def test_float_bounds_bracket_the_exact_ratio(n: int, p: Fraction) -> None:
    m, rest, w, s = _setup(n, p)
    ratios = _ratios(n, p)
    xs = sorted(ratios)[:: 1 if p.denominator < 100 else 5]  # big denominators: every 5th
    blocks = [_block(x, w) for x in xs]
    for extra in (0, 1, 3):  # the real block and larger j (a > 1 is allowed in the bounds)
        x = np.array(xs, dtype=np.int64)
        j = np.array([b + extra for b in blocks], dtype=np.int64)
        t_lo, t_hi, valid = _bounds_at(s, m, rest, x, j)
        for i, xv in enumerate(xs):
            a = ratios[xv] * 4 ** int(j[i])
            assert Fraction(float(t_lo[i])) <= a <= Fraction(float(t_hi[i])), (xv, int(j[i]))
        # the series covers |x| <= min(M, N) / 4, and there the bounds are tight
        inner = np.abs(x) * 4 <= min(m, rest)
        assert valid[inner & (j < 20)].all()
        tight = inner & (t_lo > 1e-12)
        assert (t_hi[tight] / t_lo[tight] < 1 + 1e-9).all()


def test_float_bounds_against_mpmath_for_large_n() -> None:
    rows = []
    for n, p in [
        (10**9, BENCH_P),
        (2**53 + 1, Fraction(1, 3)),
        (2**61 - 1, Fraction(1, 2)),
        (2**40, Fraction(2**30 - 1, 2**31)),
        (10**12, Fraction(999, 1000)),
    ]:
        w = _setup(n, p)[2]
        for k in range(0, 9):
            for y in (k * w - 1, k * w, k * w + 1, (k + 1) * w - 1):
                if y >= 0:
                    rows += [(n, p, y, k if y >= k * w else k - 1), (n, p, -(y + 1), y // w)]
    for n, p, x, j in rows:
        s = _setup(n, p)[3]
        t_lo, t_hi, valid = direct.ratio_bounds(
            s.mode, s.rest, s.c, np.array([x]), np.array([j]), s.a_up, s.b_up
        )
        a = _mp_ratio(n, p, x, j)
        assert valid[0], (n, p, x, j)
        assert mpmath.mpf(float(t_lo[0])) <= a <= mpmath.mpf(float(t_hi[0])), (n, p, x, j)
        assert a - 1 < 1e-60, (n, p, x, j)  # a <= 1, up to log-gamma at 320 bits


def test_far_offsets_get_only_an_upper_bound() -> None:
    n, p = 2570, Fraction(1, 10)
    m, rest, w, s = _setup(n, p)
    ratios = _ratios(n, p)
    xs = [x for x in ratios if 4 * abs(x) > min(m, rest)]
    x = np.array(xs, dtype=np.int64)
    j = np.array([_block(v, w) for v in xs], dtype=np.int64)
    t_lo, t_hi, valid = _bounds_at(s, m, rest, x, j)
    assert not valid.any() and (t_lo == 0).all()
    for i, xv in enumerate(xs):
        assert ratios[xv] * 4 ** int(j[i]) <= Fraction(float(t_hi[i])), xv


@pytest.mark.parametrize(("x", "j"), [(3, 0), (-40, 1), (100, 2), (-1, 0)])
def test_ties_continue_the_same_uniform_exactly(x: int, j: int) -> None:
    n, p = 2570, Fraction(1, 10)
    m, rest, _, _ = _setup(n, p)
    a = _ratios(n, p)[x] * 4**j
    f128 = math.floor(a * 2**128)
    hi, lo = f128 >> 64, f128 & ((1 << 64) - 1)
    args = (m, rest, x, j, p.numerator, p.denominator)
    assert direct.accept_exact(*args, hi - 1, ScriptedRandom([]))
    assert not direct.accept_exact(*args, hi + 1, ScriptedRandom([]))
    assert direct.accept_exact(*args, hi, ScriptedRandom([lo - 1]))
    assert not direct.accept_exact(*args, hi, ScriptedRandom([lo + 1]))
    assert not direct.accept_exact(
        m, rest, rest + 1, 0, p.numerator, p.denominator, 0, ScriptedRandom([])
    )


def test_interval_path_agrees_with_the_rational_one(monkeypatch: pytest.MonkeyPatch) -> None:
    n, p = 2570, Fraction(1, 10)
    m, rest, _, _ = _setup(n, p)
    ratios = _ratios(n, p)
    for x, j in [(50, 1), (-60, 2), (200, 4)]:
        a = ratios[x] * 4**j
        lo, hi = direct.ratio_interval(m, rest, x, j, p.numerator, p.denominator, 200)
        assert lo <= a * 2**200 <= hi and hi - lo < 2**8
        f128 = math.floor(a * 2**128)
        top, low = f128 >> 64, f128 & ((1 << 64) - 1)
        monkeypatch.setattr(direct, "EXACT_OFFSET", 0)  # force the interval comparison
        args = (m, rest, x, j, p.numerator, p.denominator)
        assert direct.accept_exact(*args, top, ScriptedRandom([low - 1]))
        assert not direct.accept_exact(*args, top, ScriptedRandom([low + 1]))
        monkeypatch.undo()


@pytest.mark.parametrize(("n", "p"), [(520, Fraction(1, 2)), (2570, Fraction(9, 10))], ids=str)
def test_every_proposal_maps_and_accepts_exactly(
    n: int, p: Fraction, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As for Binomial(m, 1/2): for every sign s and y = j w + v up to one block beyond the
    # support, script one round (J: a word with 2j trailing zeros; V: v above uniform_below's
    # rejection zone; S: top bit of the first byte; U) and check that the output is M + x, that
    # U = floor(a 2**64) - 1 is accepted and floor(a 2**64) + 1 rejected without further words,
    # and that offsets outside the support are rejected even with U = 0. Every k in 0..n arises
    # once, so the acceptance probability of every x is a(x) to within 2**-63.
    monkeypatch.setattr(direct, "_MAX_PROPOSALS", 1)
    m, rest, w, _ = _setup(n, p)
    ratios = _ratios(n, p)
    base = (1 << 63) - (1 << 63) % w + w
    certain = [1, base, 0, 0]  # j = 0, v = 0, s = 0, U = 0: x = 0 with a = 1
    seen = []
    for s in (0, 1):
        for y in range(max(m, rest) + w):
            j, v = divmod(y, w)
            x = y if s == 0 else -(y + 1)
            # J: a zero word counts 32 and continues; then a word with 2 (j mod 32) zeros
            head = [0] * (j // 32) + [1 << (2 * (j % 32)), base + v, s << 7]
            one, two = len(head) + 1, len(head) + 1 + len(certain)

            def run(u: int, extra: list[int], head: list[int] = head) -> tuple[int, int]:
                rng = ScriptedRandom([*head, u, *extra])
                out = direct.binomial_direct(np.array([n], dtype=np.int64), p, rng)
                return int(out[0]), rng.used

            if x not in ratios:
                if y % 4 == 0 or x in (rest + 1, -m - 1):
                    assert run(0, certain) == (m, two), (s, y)
                continue
            f = math.floor(ratios[x] * 4**j * 2**64)
            assert f < 2**64 or x == 0
            if f > 0:
                assert run(f - 1, []) == (m + x, one), (s, y)
            if f + 1 < 2**64 and (f > 0 or y % 8 == 0):
                assert run(f + 1, certain) == (m, two), (s, y)
            seen.append(m + x)
    assert sorted(seen) == list(range(n + 1))


# -- goodness of fit --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "p"),
    [
        (520, Fraction(1, 2)),
        (2570, Fraction(1, 10)),
        (2570, Fraction(9, 10)),
        (10**5, Fraction(3, 8)),
        (7_812_500, BENCH_P),
        (2**40 + 3, Fraction(1, 3)),
        (10**9, Fraction(2**61 - 1, 2**62 + 5)),  # (n + 1) a beyond int64
    ],
    ids=str,
)
def test_direct_fits(n: int, p: Fraction) -> None:
    size = 100_000
    x = direct.binomial_direct(np.full(size, n, dtype=np.int64), p, SeededRandom(n % 1000 + 3))
    lo, hi = _window(n, p)
    sd = math.sqrt(n * float(p) * (1 - float(p)))
    assert_fits(chi2_integer(x, _Scipy(n, float(p)), lo, hi, max_cells=60))
    # power: the mean moved by 0.05 sd, or the spread by 3 %
    shifted = _Scipy(n, float(p) + 0.05 * sd / n)
    pvalues = [chi2_integer(x, shifted, lo, hi, max_cells=60)]
    wider = stats.norm(n * float(p), 1.03 * sd)

    class _Wide:
        def pmf(self, k: Any) -> Any:
            return wider.cdf(np.asarray(k) + 0.5) - wider.cdf(np.asarray(k) - 0.5)

        def cdf(self, k: int) -> float:
            return float(wider.cdf(k + 0.5))

        def sf(self, k: int) -> float:
            return float(wider.sf(k - 0.5))

    pvalues.append(chi2_integer(x, _Wide(), lo, hi, max_cells=60))
    assert_rejects(pvalues)


def test_direct_tails_beyond_3_and_4_sd() -> None:
    # rejection errs first in the tails: cells |z| < 3, 3..3.5, 3.5..4, > 4 sd on each side
    n, p, size = 10**9, BENCH_P, 1_000_000
    x = binomial(np.full(size, n, dtype=np.int64), p, SeededRandom(41))
    mean, sd = n * float(p), math.sqrt(n * float(p) * (1 - float(p)))
    cuts = [-4.0, -3.5, -3.0, 3.0, 3.5, 4.0]
    edges = [math.floor(mean + c * sd) for c in cuts]
    observed = np.bincount(np.searchsorted(edges, x, side="left"), minlength=len(edges) + 1)

    def cells(law: Any) -> Any:
        cdf = np.array([float(law.cdf(e)) for e in edges])
        return np.diff(np.concatenate([[0.0], cdf, [1.0]]))

    assert observed[0] + observed[-1] > 30
    assert_fits(chi2_cells(observed, cells(stats.binom(n, float(p))), max_cells=10**6))
    wider = stats.norm(mean, 1.05 * sd)
    assert_rejects([chi2_cells(observed, cells(wider), max_cells=10**6)])


def test_mixed_paths_in_one_call_fit() -> None:
    # direct, digits with popcounts and rejection, and the finish, in one vector
    sizes = [5, 32, 33, 400, 2000, 2569, 2570, 10**5]
    n = np.repeat(np.array(sizes, dtype=np.int64), 30_000)
    order = np.random.default_rng(8).permutation(n.size)
    x = np.empty_like(n)
    x[order] = binomial(n[order], BENCH_P, SeededRandom(88))
    for k in sizes:
        xs = x[n == k]
        lo, hi = _window(k, BENCH_P)
        law = Binomial(k, BENCH_P) if k <= 2000 else _Scipy(k, float(BENCH_P))
        assert_fits(chi2_integer(xs, law, lo, hi, max_cells=40))
        sd = math.sqrt(k * float(BENCH_P) * (1 - float(BENCH_P)))
        assert_rejects([chi2_integer(xs, _Scipy(k, float(BENCH_P) + 0.1 * sd / k), lo, hi)])


def test_direct_secure_random_fits() -> None:
    n, p = 10**6, Fraction(1, 10)
    x = binomial(np.full(50_000, n, dtype=np.int64), p, SecureRandom())
    lo, hi = _window(n, p)
    assert_fits(chi2_integer(x, _Scipy(n, float(p)), lo, hi, max_cells=40))


# -- the finish: one uniform per remaining trial ---------------------------------------------


@pytest.mark.parametrize(
    ("n", "p"),
    [
        (1, Fraction(1, 3)),
        (7, Fraction(5, 16)),
        (FINISH_TRIALS, BENCH_P),
        (FINISH_TRIALS + 1, Fraction(2, 3)),
        (200, Fraction(2**70 + 1, 3 * 2**70)),
    ],
    ids=str,
)
def test_finish_fits(n: int, p: Fraction) -> None:
    size = 200_000
    x = binomial(np.full(size, n, dtype=np.int64), p, SeededRandom(n + 17))
    lo, hi = 0, n
    assert_fits(chi2_integer(x, Binomial(n, p), lo, hi))
    wrong = [p * Fraction(97, 100), 1 - (1 - p) * Fraction(97, 100)]
    assert_rejects([chi2_integer(x, Binomial(n, q), lo, hi) for q in wrong])


def test_finish_by_hand() -> None:
    ones = (1 << 64) - 1
    # p = 3/4: F = 3 * 2**62 exactly; W = F is a failure without a further word (U' >= p')
    f = 3 << 62
    rng = ScriptedRandom([0, f, ones, f - 1])
    assert binomial(4, Fraction(3, 4), rng).item() == 2 and rng.used == 4
    # p = 1/3: a tie W = floor(2**64 / 3) continues with the next word of the same U'
    f = (1 << 64) // 3
    assert binomial(1, Fraction(1, 3), ScriptedRandom([f, 0])).item() == 1
    assert binomial(1, Fraction(1, 3), ScriptedRandom([f, ones])).item() == 0


def test_finish_groups_use_their_own_remainder() -> None:
    # two groups leaving the digit loop at different digits: p = 0.101 (binary) = 5/8
    m = np.array([2, 3], dtype=np.int64)
    groups = [(np.array([0]), 5), (np.array([1]), 2)]  # p' = 5/8 and p' = 2/8 = 1/4
    words = [(5 << 61) - 1, 5 << 61, (1 << 62) - 1, 1 << 62, 0]
    out = finish_trials(m, groups, 8, ScriptedRandom(words))
    assert out.tolist() == [1, 2]
