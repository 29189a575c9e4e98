"""Every sampler branch, exact at single outcomes.

The law tests (``test_noise_*.py``) pool outcomes into about 100 cells, so a sampler that doubles
the mass at 0 or never outputs one residue class of a split passes them. Here each branch is
checked where such defects live:

* **word maps** (scripted words, :class:`tests.scripted_random.ScriptedRandom`): a sampler that
  inverts one 64-bit word ``W`` outputs ``#{k : W < floor(T_k 2**64)}`` for the tails ``T_k``
  of its law; every boundary word (``floor - 1`` and ``floor + 1``, for every ``k``) is fed to
  the public sampler and its output compared with the floors computed here in 400-bit mpmath
  from the law's closed form. So ``P[output = k]`` is the exact pmf up to the ``2**-64`` tie
  mass, for *every* ``k`` (each residue class of a split, 0, the last table entry).
* **composition and rejection**: the split ``G = L + 4096 H`` and the large-scale discrete
  Laplace loop (a geometric magnitude, a sign bit, ``(negative, 0)`` rejected and redrawn) are
  checked on random scripted word streams against a model of the documented algorithm run on the
  independent floors, including which words each round consumes;
* **points and classes** (real randomness): exact two-sided binomial tests of single outcomes
  (0, boundaries of the tables and of the split) and of every residue class mod 4096, Bonferroni
  over the points at alpha = 1e-6, each with a power check that rejects the planted defects
  (twice the mass at 0; one residue class never output).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.scripted_random import ScriptedRandom
from tests.stats import ALPHA

from privhist.core.random import SeededRandom
from privhist.noise import (
    bernoulli_exp,
    bernoulli_exp_array,
    bernoulli_rational,
    binomial,
    discrete_gaussian,
    discrete_laplace,
    geometric,
)

MP = mpmath.MPContext()
MP.prec = 400


@pytest.fixture(autouse=True)
def _whole_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted words below are whole first words of ``U``: the table samplers read them
    through :func:`~privhist.noise._tables.invert_words` (the path every undecided first byte
    takes; the byte-first path is checked by the goodness-of-fit tests of tests/noise)."""
    import importlib

    tables = importlib.import_module("privhist.noise._tables")

    def words_only(table: Any, rng: Any, n: int) -> Any:
        return tables.invert_words(table, rng.uint64(n), rng)

    for name in ("_tables", "bernoulli", "geometric", "laplace"):
        module = importlib.import_module(f"privhist.noise.{name}")
        monkeypatch.setattr(module, "invert", words_only)


TWO64 = 1 << 64
MAX_WORD = TWO64 - 1
SPLIT = 4096  # the split of small geometric rates: G = L + 4096 H


# -- independent tails and floors ------------------------------------------------------------


def _mpq(x: Fraction) -> Any:
    return MP.mpf(x.numerator) / x.denominator


def _floor64(t: Any) -> int:
    """``floor(t 2**64)``, refusing a value within ``2**-300`` of an integer (undecidable)."""
    scaled = t * MP.mpf(2) ** 64
    f = MP.floor(scaled)
    assert scaled - f > MP.mpf(2) ** -300 or scaled == f, "too close to an integer"
    return int(f)


def geometric_tails(x: Fraction, count: int | None = None) -> list[Any]:
    """``P[G >= k] = exp(-x k)``, ``k = 1..``, until ``2**-64`` (or ``count`` of them)."""
    a = MP.exp(-_mpq(x))
    out, t = [], a
    while (count is None and t * TWO64 >= 1) or (count is not None and len(out) < count):
        out.append(t)
        t *= a
    return out


def laplace_tails(x: Fraction) -> list[Any]:
    """``P[|Z| >= k] = 2 a**k / (1 + a)`` for the discrete Laplace with ``a = exp(-x)``."""
    a = MP.exp(-_mpq(x))
    return [2 * t / (1 + a) for t in geometric_tails(x) if 2 * t / (1 + a) * TWO64 >= 1]


def truncated_tails(x: Fraction, m: int) -> list[Any]:
    """``P[G mod m >= k] = (a**k - a**m) / (1 - a**m)``, ``k = 1..m-1``: the low part of the
    split (``G mod m`` and ``G // m`` are independent, the pmf ``(1 - a) a**(q m + l)``
    factorises)."""
    a = MP.exp(-_mpq(x))
    am = a**m
    return [(a**k - am) / (1 - am) for k in range(1, m)]


class Inversion:
    """The exact output of one-word inversion against tails ``T_1 > T_2 > ...``: for a word
    ``W`` equal to no floor (and not 0), ``#{k : W < floor(T_k 2**64)}``."""

    def __init__(self, tails: Sequence[Any]) -> None:
        self.floors = [_floor64(t) for t in tails]
        self.asc = sorted(self.floors)

    def __call__(self, word: int) -> int:
        assert word not in self._set and word > 0, "a tie: decided by further words"
        return len(self.asc) - bisect.bisect_right(self.asc, word)

    @property
    def _set(self) -> set[int]:
        if not hasattr(self, "_floorset"):
            self._floorset = set(self.floors)
        return self._floorset

    def boundary_words(self) -> list[int]:
        """``F_k - 1`` and ``F_k + 1`` for every ``k``, where they tie with no floor."""
        words = []
        for f in self.floors:
            for w in (f - 1, f + 1):
                if 0 < w <= MAX_WORD and w not in self._set:
                    words.append(w)
        return words


def _sign_words(signs: Sequence[bool]) -> list[int]:
    """Words whose bits, as :meth:`RandomSource.bits` reads them, are ``signs``."""
    words = []
    for start in range(0, len(signs), 64):
        w = 0
        for i, s in enumerate(signs[start : start + 64]):
            if s:
                w |= 1 << (8 * (i // 8) + 7 - i % 8)
        words.append(w)
    return words


def _run(sampler: Callable[..., Any], words: Sequence[int], *args: Any) -> tuple[list[int], int]:
    rng = ScriptedRandom(words)
    out = sampler(*args, rng)
    return [int(v) for v in np.asarray(out).ravel()], rng.used


# -- one-word tables through the public samplers ---------------------------------------------


@pytest.mark.parametrize("x", [Fraction(1), Fraction(1, 3), Fraction(10, 7), Fraction(1, 1000)])
def test_geometric_table_path_maps_every_boundary_word(x: Fraction) -> None:
    inv = Inversion(geometric_tails(x))
    words = inv.boundary_words()
    out, used = _run(lambda rng: geometric(x, rng, len(words)), words)
    assert used == len(words)
    assert out == [inv(w) for w in words]
    # the top word gives 0 and the word just above the last floor its index
    assert _run(lambda rng: geometric(x, rng, 1), [MAX_WORD])[0] == [0]


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(10, 3), Fraction(1000), Fraction(1456)])
def test_laplace_table_path_maps_every_boundary_word_and_sign(scale: Fraction) -> None:
    inv = Inversion(laplace_tails(1 / scale))
    words = inv.boundary_words()
    n = len(words)
    for negative in (False, True):
        stream = words + _sign_words([negative] * n)
        out, used = _run(lambda rng: discrete_laplace(scale, rng, n), stream)
        assert used == len(stream)
        expected = [inv(w) for w in words]
        assert out == [-e if negative else e for e in expected]
    # P[Z = 0] = 1 - T_1 exactly: words at or above F_1 give 0 whatever the sign
    f1 = inv.floors[0]
    assert _run(
        lambda rng: discrete_laplace(scale, rng, 2), [f1 + 1, MAX_WORD, *_sign_words([True, False])]
    )[0] == [0, 0]


# -- the split of small rates: G = L + 4096 H --------------------------------------------------

#: rates below 45 / 2**16: the split path; 1 / 5000 has H in one table, 1 / 10**7 splits twice
SPLIT_RATES = [Fraction(1, 5000), Fraction(7, 10**6 + 1)]


@pytest.mark.parametrize("x", SPLIT_RATES, ids=str)
def test_split_low_part_maps_every_residue_class(x: Fraction) -> None:
    low = Inversion(truncated_tails(x, SPLIT))
    assert len(low.floors) == SPLIT - 1
    words = low.boundary_words()
    n = len(words)
    out, used = _run(lambda rng: geometric(x, rng, n), words + [MAX_WORD] * n)  # H = 0
    assert used == 2 * n
    expected = [low(w) for w in words]
    assert out == expected
    # every residue 0..4095 is reached, each on the word interval of its exact probability
    assert set(expected) == set(range(SPLIT))


@pytest.mark.parametrize("x", SPLIT_RATES, ids=str)
def test_split_high_part_maps_every_boundary_word(x: Fraction) -> None:
    if 45 * (x * SPLIT).denominator > (1 << 16) * (x * SPLIT).numerator:
        pytest.skip("H is split again: see the two-level test")
    high = Inversion(geometric_tails(x * SPLIT))
    words = high.boundary_words()
    n = len(words)
    out, used = _run(lambda rng: geometric(x, rng, n), [MAX_WORD] * n + words)  # L = 0
    assert used == 2 * n
    assert out == [SPLIT * high(w) for w in words]


def _split_model(x: Fraction) -> Callable[[list[int]], tuple[int, int]]:
    """The documented split on a word stream: ``G = L + 4096 H`` with ``L`` the first word's
    truncated inversion and ``H`` geometric with rate ``4096 x`` (split again when its table
    would be too large). Returns ``(G, words used)`` for one sample."""
    low = Inversion(truncated_tails(x, SPLIT))
    y = x * SPLIT
    if 45 * y.denominator <= (1 << 16) * y.numerator:
        high = Inversion(geometric_tails(y))

        def one(ws: list[int]) -> tuple[int, int]:
            return low(ws[0]) + SPLIT * high(ws[1]), 2

        return one
    inner = _split_model(y)

    def two(ws: list[int]) -> tuple[int, int]:
        h, used = inner(ws[1:])
        return low(ws[0]) + SPLIT * h, 1 + used

    return two


@pytest.mark.parametrize("x", [*SPLIT_RATES, Fraction(1, 10**8)], ids=str)
def test_split_composition_on_random_words(x: Fraction) -> None:
    """``n`` samples draw ``n`` low words, then (recursively) the high parts' words."""
    model = _split_model(x)
    gen = np.random.default_rng(11)
    n = 4000
    levels = 2 if 45 * (x * SPLIT).denominator <= (1 << 16) * (x * SPLIT).numerator else 3
    words = [int(w) for w in gen.integers(1, MAX_WORD, size=levels * n, dtype=np.uint64)]
    out, used = _run(lambda rng: geometric(x, rng, n), words)
    assert used == levels * n
    # word j of each level belongs to sample j
    expected = [model([words[level * n + j] for level in range(levels)])[0] for j in range(n)]
    assert out == expected


# -- the large-scale discrete Laplace: geometric magnitude, sign, rejection ------------------


def _large_laplace_model(scale: Fraction, words: list[int], n: int) -> tuple[list[int], int]:
    """CKS 2020 Algorithm 2's last step on a word stream, as the sampler documents it: each round
    draws the geometric magnitudes of the samples still to do (their words level by level), then
    one sign bit each; ``(negative, 0)`` is rejected and redrawn in the next round."""
    x = 1 / scale
    model = _split_model(x)
    y_rate = x * SPLIT
    levels = 2 if 45 * y_rate.denominator <= (1 << 16) * y_rate.numerator else 3
    out: list[int | None] = [None] * n
    todo = list(range(n))
    pos = 0
    while todo:
        m = len(todo)
        mags = [model([words[pos + level * m + j] for level in range(levels)])[0] for j in range(m)]
        pos += levels * m
        nwords = (m + 63) // 64
        signs = []
        for j in range(m):
            w = words[pos + j // 64]
            i = j % 64
            signs.append(bool((w >> (8 * (i // 8) + 7 - i % 8)) & 1))
        pos += nwords
        rest = []
        for j, i in enumerate(todo):
            if signs[j] and mags[j] == 0:
                rest.append(i)
            else:
                out[i] = -mags[j] if signs[j] else mags[j]
        todo = rest
    return [int(v) for v in out if v is not None], pos


@pytest.mark.parametrize("scale", [Fraction(1457), Fraction(5000), Fraction(10**7 + 1, 3)], ids=str)
def test_large_scale_laplace_on_random_words(scale: Fraction) -> None:
    """Random words with the low and high words pushed to 0 often enough that ``(negative, 0)``
    happens and is redrawn; the sampler consumes the same words as the model."""
    gen = np.random.default_rng(int(scale.numerator % 1000))
    n = 500
    words = [int(w) for w in gen.integers(1, MAX_WORD, size=20 * n, dtype=np.uint64)]
    # make about a third of the first round's magnitudes 0 (top words: L = 0 and H = 0)
    for j in range(0, n, 3):
        for level in range(3):
            if level * n + j < len(words):
                words[level * n + j] = MAX_WORD
    expected, used_model = _large_laplace_model(scale, words, n)
    out, used = _run(lambda rng: discrete_laplace(scale, rng, n), words)
    assert out == expected and used == used_model
    assert 0 in out and any(v < 0 for v in out)


def test_large_scale_laplace_rejects_negative_zero_and_redraws() -> None:
    scale = Fraction(5000)
    low = Inversion(truncated_tails(1 / scale, SPLIT))
    w5 = next(w for w in low.boundary_words() if low(w) == 5)
    # round 1: L = 0, H = 0, negative: rejected; round 2: L = 5, H = 0, negative: -5
    stream = [MAX_WORD, MAX_WORD, *_sign_words([True]), w5, MAX_WORD, *_sign_words([True])]
    assert _run(lambda rng: discrete_laplace(scale, rng, 1), stream) == ([-5], len(stream))
    # positive 0 is kept at once
    stream = [MAX_WORD, MAX_WORD, *_sign_words([False])]
    assert _run(lambda rng: discrete_laplace(scale, rng, 1), stream) == ([0], 3)


# -- single points and residue classes with real randomness ---------------------------------


def _binom_pvalues(observed: Sequence[int], probs: Sequence[float], n: int) -> list[float]:
    """Exact two-sided binomial p-values (twice the smaller tail), vectorised; an outcome of
    probability 0 that occurs has p-value 0."""
    k = np.asarray(observed, dtype=np.float64)
    p = np.clip(np.asarray(probs, dtype=np.float64), 0.0, 1.0)
    lower = stats.binom.cdf(k, n, p)
    upper = stats.binom.sf(k - 1, n, p)
    out = np.minimum(1.0, 2 * np.minimum(lower, upper))
    out = np.where(p == 0, np.where(k == 0, 1.0, 0.0), out)
    return [float(v) for v in out]


def points_pvalue(samples: Any, points: dict[int, float]) -> float:
    """Bonferroni-adjusted p-value of exact two-sided binomial tests, one per listed outcome
    (no cell merging: a defect at one point is tested at that point)."""
    x = np.asarray(samples)
    obs = [int((x == v).sum()) for v in points]
    p = _binom_pvalues(obs, list(points.values()), x.size)
    return min(1.0, min(p) * len(p))


def classes_pvalue(labels: Any, probs: Sequence[float]) -> float:
    """The same for a partition of the outcomes into classes ``0..len(probs)-1``."""
    lab = np.asarray(labels)
    obs = np.bincount(lab, minlength=len(probs))[: len(probs)]
    p = _binom_pvalues(obs.tolist(), probs, lab.size)
    return min(1.0, min(p) * len(p))


def laplace_pmf(scale: Fraction, z: int) -> float:
    a = MP.exp(-1 / _mpq(scale))
    return float((1 - a) / (1 + a) * a ** abs(z))


def laplace_residues(scale: Fraction) -> list[float]:
    """``P[|Z| mod 4096 = r]`` for the discrete Laplace."""
    a = MP.exp(-1 / _mpq(scale))
    c = (1 - a) / (1 + a)
    geo = 1 / (1 - a**SPLIT)
    out = [float(c * (1 + 2 * (geo - 1)))]  # |Z| = 0, 4096, 8192, ...
    out += [float(2 * c * a**r * geo) for r in range(1, SPLIT)]
    return out


N_POINTS = 2_000_000


@pytest.mark.parametrize("scale", [Fraction(1500), Fraction(5000), Fraction(10**7 + 1, 3)], ids=str)
def test_large_scale_laplace_points_and_residue_classes(scale: Fraction) -> None:
    z = discrete_laplace(scale, SeededRandom(scale.numerator % 997), N_POINTS)
    points = {v: laplace_pmf(scale, v) for v in (0, 1, -1, 2, 4095, -4095, 4096, -4096, 4097)}
    classes = laplace_residues(scale)
    labels = np.abs(z) % SPLIT
    p_points = points_pvalue(z, points)
    p_classes = classes_pvalue(labels, classes)
    assert p_points >= ALPHA and p_classes >= ALPHA, (p_points, p_classes)
    # power: twice the mass at 0 (where the sample sees it), and a missing residue class, are
    # rejected on these samples
    if points[0] * N_POINTS >= 200:
        doubled = dict(points)
        doubled[0] *= 2
        assert points_pvalue(z, doubled) < ALPHA
        shifted = list(classes)
        shifted[0] += points[0]  # the class holding 0, with 0's mass doubled
        assert classes_pvalue(labels, shifted) < ALPHA
    missing = list(classes)
    missing[SPLIT - 1] = 0.0
    assert classes_pvalue(labels, missing) < ALPHA


@pytest.mark.parametrize("x", [Fraction(1, 2000), Fraction(1, 10**7)], ids=str)
def test_split_geometric_points_and_residue_classes(x: Fraction) -> None:
    g = geometric(x, SeededRandom(int(1 / x) % 991), N_POINTS)
    a = MP.exp(-_mpq(x))
    pmf = {k: float((1 - a) * a**k) for k in (0, 1, 4095, 4096, 4097, 8191, 8192)}
    geo = 1 / (1 - a**SPLIT)
    classes = [float((1 - a) * a**r * geo) for r in range(SPLIT)]
    labels = g % SPLIT
    assert points_pvalue(g, pmf) >= ALPHA and classes_pvalue(labels, classes) >= ALPHA
    if pmf[0] * N_POINTS >= 200:  # where the sample sees the point
        doubled = dict(pmf)
        doubled[0] *= 2
        assert points_pvalue(g, doubled) < ALPHA
    missing = list(classes)
    missing[1234] = 0.0
    assert classes_pvalue(labels, missing) < ALPHA


def dgauss_pmf(sigma2: Fraction, zs: Sequence[int]) -> dict[int, float]:
    s2 = _mpq(sigma2)
    norm = MP.sqrt(2 * MP.pi * s2) * (
        1 + 2 * MP.nsum(lambda k: MP.exp(-2 * MP.pi**2 * s2 * k**2), [1, MP.inf])
    )
    return {z: float(MP.exp(-MP.mpf(z * z) / (2 * s2)) / norm) for z in zs}


@pytest.mark.parametrize(
    "sigma2",
    [
        Fraction(1, 4),  # sigma < 1: proposal rate 1, centre sigma2
        Fraction(9, 4),  # the table path, small
        Fraction(40_000),  # the table path, proposals from the large-scale Laplace (t > 1456)
        Fraction(4100**2 + 1),  # the arithmetic path (sigma > 4096), int64 exponents
    ],
    ids=str,
)
def test_discrete_gaussian_single_points(sigma2: Fraction) -> None:
    z = discrete_gaussian(sigma2, SeededRandom(sigma2.numerator % 983), N_POINTS)
    sigma = math.sqrt(float(sigma2))
    far = int(3 * sigma) + 1
    pts = sorted({0, 1, -1, 2, -2, far, -far, int(sigma), -int(sigma)})
    pmf = dgauss_pmf(sigma2, pts)
    pmf = {k: v for k, v in pmf.items() if v * N_POINTS >= 20}
    assert points_pvalue(z, pmf) >= ALPHA
    doubled = dict(pmf)
    doubled[0] *= 2
    assert points_pvalue(z, doubled) < ALPHA
    if sigma > 1456:
        # the proposal's residue classes: the output mod 4096 is near uniform, each class exact
        # by summing the pmf (a missing class of the proposal would empty one)
        probs = _dg_residues(sigma2)
        labels = z % SPLIT
        assert classes_pvalue(labels, probs) >= ALPHA
        missing = list(probs)
        missing[7] = 0.0
        assert classes_pvalue(labels, missing) < ALPHA


def _dg_residues(sigma2: Fraction) -> list[float]:
    sigma = math.sqrt(float(sigma2))
    radius = int(12 * sigma) + 10
    zs = np.arange(-radius, radius + 1)
    w = np.exp(-(zs.astype(np.float64) ** 2) / (2 * float(sigma2)))
    w /= w.sum()
    return np.bincount(zs % SPLIT, weights=w, minlength=SPLIT).tolist()


def test_discrete_gaussian_python_int_path_residues() -> None:
    """``sigma = 1e6`` with a 2**20 denominator: proposals beyond ``sqrt(2**63 / b)`` take the
    Python-int acceptance; the output's residue classes mod 4096 stay exact."""
    sigma2 = Fraction(10**12 * (1 << 20) + 1, 1 << 20)
    z = discrete_gaussian(sigma2, SeededRandom(5), 2_000_000)
    assert (np.abs(z) > math.isqrt((1 << 63) // (1 << 20))).any()  # the path ran
    probs = [1 / SPLIT] * SPLIT  # sigma >> 4096: every class has mass 1/4096 to 1e-30
    labels = z % SPLIT
    assert classes_pvalue(labels, probs) >= ALPHA
    missing = list(probs)
    missing[0] = 0.0
    assert classes_pvalue(labels, missing) < ALPHA


# -- binomial: popcount, rejection (Bin(m, 1/2) large), direct, finish ------------------------


def binom_pmf(n: int, p: Fraction, ks: Sequence[int]) -> dict[int, float]:
    pm = _mpq(p)
    return {k: float(MP.binomial(n, k) * pm**k * (1 - pm) ** (n - k)) for k in ks if 0 <= k <= n}


@pytest.mark.parametrize(
    ("n", "p"),
    [
        (40, Fraction(1, 3)),  # digit splitting with popcounts and the per-trial finish
        (5000, Fraction(1, 2)),  # Bin(m, 1/2) by rejection (m >= 2048)
        (10**6, Fraction(1, 2)),
        (10**6, Fraction(2, 7)),  # the direct path (mode and n - mode >= 256)
        (600, Fraction(1, 8)),  # a dyadic p whose expansion ends (the undecided fail)
        (3000, Fraction(3, 1000)),  # mode below 256: digits, rejection halves, finish
    ],
    ids=str,
)
def test_binomial_single_points(n: int, p: Fraction) -> None:
    x = binomial(np.full(1_000_000, n), p, SeededRandom(n % 977))
    mode = math.floor((n + 1) * p)
    sd = math.sqrt(n * float(p) * (1 - float(p)))
    ks = {0, n, mode, mode - 1, mode + 1, mode + int(2 * sd) + 1, mode - int(2 * sd) - 1}
    pmf = {k: v for k, v in binom_pmf(n, p, sorted(ks)).items() if v * 1_000_000 >= 20}
    assert pmf, "no testable point"
    assert points_pvalue(x, pmf) >= ALPHA
    doubled = dict(pmf)
    k0 = max(pmf, key=lambda k: pmf[k])
    doubled[k0] *= 1.25  # a 25 % error at the mode is visible at this sample size
    assert points_pvalue(x, doubled) < ALPHA


def test_binomial_half_block_residues() -> None:
    """Bin(2n, 1/2) by rejection proposes offsets ``j w + v`` (blocks of width ``w``): the output
    offset's residue mod ``w`` has the exact law (a residue never proposed would be empty)."""
    from privhist.noise._binomial_large import block_width

    m = 20_000
    half = m // 2
    w = int(block_width(np.array([half], dtype=np.int64))[0])
    x = binomial(np.full(2_000_000, m), Fraction(1, 2), SeededRandom(3))
    off = np.abs(x - half)
    labels = off % w
    ks = np.arange(m + 1)
    pmf = stats.binom.pmf(ks, m, 0.5)
    probs = np.bincount(np.abs(ks - half) % w, weights=pmf, minlength=w).tolist()
    assert classes_pvalue(labels, probs) >= ALPHA
    missing = list(probs)
    missing[w - 1] = 0.0
    assert classes_pvalue(labels, missing) < ALPHA


# -- Bernoulli boundaries -------------------------------------------------------------------


@pytest.mark.parametrize(
    "x", [Fraction(1, 3), Fraction(5), Fraction(1, 10**9), Fraction(44)], ids=str
)
def test_bernoulli_exp_boundary_words(x: Fraction) -> None:
    f = _floor64(MP.exp(-_mpq(x)))
    assert _run(lambda rng: bernoulli_exp(x, rng, 2), [f - 1, f + 1])[0] == [1, 0]
    # a tie continues with the next 64 binary digits of exp(-x)
    g = _floor64(MP.exp(-_mpq(x)) * MP.mpf(2) ** 64 - f)
    assert _run(lambda rng: bernoulli_exp(x, rng, 1), [f, g - 1])[0] == [1]
    assert _run(lambda rng: bernoulli_exp(x, rng, 1), [f, g + 1])[0] == [0]


@pytest.mark.parametrize(("num", "den"), [(1, 3), (2, 7), (10**20 + 1, 10**21)])
def test_bernoulli_rational_scalar_boundary_words(num: int, den: int) -> None:
    f = (num << 64) // den
    assert _run(lambda rng: bernoulli_rational(num, den, rng, 2), [f - 1, f + 1])[0] == [1, 0]
    g = (num << 128) // den - (f << 64)
    assert _run(lambda rng: bernoulli_rational(num, den, rng, 1), [f, g - 1])[0] == [1]
    assert _run(lambda rng: bernoulli_rational(num, den, rng, 1), [f, g + 1])[0] == [0]


def test_bernoulli_rational_array_rejects_the_biased_words() -> None:
    """Arrays draw ``V`` uniform on ``[0, den)`` by rejecting words below ``2**64 mod den``."""
    den = 3
    low = TWO64 % den  # 1: the word 0 is rejected
    assert low == 1
    out, used = _run(
        lambda rng: bernoulli_rational(np.array([1]), np.array([den]), rng), [0, 3 * 5 + 1]
    )
    assert used == 2 and out == [0]  # V = 16 mod 3 = 1, not below 1
    assert _run(lambda rng: bernoulli_rational(np.array([1]), np.array([den]), rng), [3])[0] == [1]


def test_bernoulli_exp_array_factors_at_their_boundaries() -> None:
    """``exp(-(q + r / den))`` = ``[G >= q]`` times one factor per 12-bit chunk of ``r``: each
    factor's word decides it at its own exact floor."""
    den = 1 << 20  # two chunks: bits 0-11 and 12-19
    num = 3 * den + (5 << 12) + 7  # q = 3, chunks 5 (high) and 7 (low)
    # [G >= 3] for G geometric with rate 1: words below floor(e^-3 2**64) pass
    g3 = _floor64(MP.exp(-3))
    hi = _floor64(MP.exp(-MP.mpf(5 << 12) / den))
    lo = _floor64(MP.exp(-MP.mpf(7) / den))
    ok = [g3 - 1, hi - 1, lo - 1]
    assert _run(lambda rng: bernoulli_exp_array([num], den, rng), ok) == ([1], 3)
    for i in range(3):
        bad = list(ok)
        bad[i] += 2
        out, used = _run(lambda rng: bernoulli_exp_array([num], den, rng), bad)
        assert out == [0] and used == i + 1  # abandoned at the first failing factor


def test_bernoulli_exp_array_tie_continues_with_the_digits_of_its_own_factor() -> None:
    """A chunk factor's tie (``W == floor(exp(-v/den) 2**64)``) is decided by the next 64 digits
    of ``exp(-v / den)`` for that digit ``v``, not of another entry of the table."""
    den, v = 7, 3  # one 3-bit chunk; the factor is exp(-3/7)
    t = MP.exp(-MP.mpf(v) / den)
    f = _floor64(t)
    g = _floor64(t * MP.mpf(2) ** 64 - f)
    assert 0 < g < MAX_WORD
    assert _run(lambda rng: bernoulli_exp_array([v], den, rng), [f, g - 1]) == ([1], 2)
    assert _run(lambda rng: bernoulli_exp_array([v], den, rng), [f, g + 1]) == ([0], 2)


def test_binomial_finishing_trials_at_a_probability_within_2_64_of_one() -> None:
    """``p = 1 - 2**-70``: ``floor(p 2**64) = 2**64 - 1``, so every word below it is a success
    (a threshold one past it would wrap to 0 in uint64); the word ``2**64 - 1`` itself ties and
    is decided by the next 64 digits of ``p``, ``2**64 - 2**58``."""
    p = Fraction((1 << 70) - 1, 1 << 70)
    out, used = _run(lambda rng: binomial(3, p, rng), [5, MAX_WORD - 1, 1 << 63])
    assert (out, used) == ([3], 3)
    low = TWO64 - (1 << 58)
    assert _run(lambda rng: binomial(1, p, rng), [MAX_WORD, low - 1]) == ([1], 2)
    assert _run(lambda rng: binomial(1, p, rng), [MAX_WORD, low + 1]) == ([0], 2)


def test_bernoulli_rational_array_names_the_first_entry_above_its_denominator() -> None:
    from privhist.core.errors import ValidationError

    with pytest.raises(ValidationError, match=r"9 > 3"):
        bernoulli_rational(np.array([5, 9, 2]), np.array([5, 3, 1]), SeededRandom(0))


def test_binomial_half_below_the_cutoff_is_a_popcount_of_its_words() -> None:
    """Below ``HALF_CUTOFF`` trials Binomial(m, 1/2) is the number of ones among ``m`` random
    bits: ``ceil(m / 64)`` words, the last keeping its low ``m mod 64`` bits."""
    from privhist.noise.binomial import HALF_CUTOFF, binomial_half

    m = HALF_CUTOFF - 1  # 2047 = 31 * 64 + 63
    assert m == 31 * 64 + 63
    words = [0] * 31 + [1 << 63]  # only the dropped top bit of the last word is set
    assert _run(lambda rng: binomial_half(np.array([m]), rng), words) == ([0], 32)
    words = [MAX_WORD] * 31 + [MAX_WORD]
    assert _run(lambda rng: binomial_half(np.array([m]), rng), words) == ([m], 32)
    words = [0b1011] + [0] * 29 + [1 << 62, (1 << 63) | 0b111]
    assert _run(lambda rng: binomial_half(np.array([m]), rng), words) == ([3 + 1 + 3], 32)


def test_discrete_gaussian_acceptance_exponent_is_exact_where_int64_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """For ``sigma2 = a / b`` above 4096**2 the acceptance exponent ``d**2 b / (2 a)`` is formed
    in int64 only while ``d**2 b <= 2**63 - 1``. With ``b = 68710431911`` that holds up to
    ``d = 11585`` and fails at ``d = 11586`` (``d**2 b`` exceeds it by 49345949, and
    ``ceil((2**63 - 1) / b)`` is exactly ``11586**2``); both exponents reach the exact test
    whole."""
    from privhist.noise import gaussian

    b, top = 68710431911, 11586
    assert (top - 1) ** 2 * b <= (1 << 63) - 1 < top**2 * b
    s2 = Fraction(4100**2 * b + 1, b)
    plan = gaussian._plan(s2)
    assert plan.centre == 4100 and plan.table is None
    seen: list[tuple[int, int, int]] = []

    def spy(q: Any, r: Any, den: int, rng: Any) -> Any:
        seen.extend((int(qi), int(ri), den) for qi, ri in zip(q, r, strict=True))
        return np.zeros(q.shape[0], dtype=np.bool_)

    monkeypatch.setattr(gaussian, "exp_fraction_parts", spy)
    offsets = (top - 1, top)
    for d in offsets:
        gaussian._accept_arithmetic(plan, np.array([4100 + d], dtype=np.int64), SeededRandom(0))
    assert len(seen) == 2
    for d, (q, r, den) in zip(offsets, seen, strict=True):
        assert den == 2 * s2.numerator and 0 <= r < den
        assert q * den + r == d * d * b


def test_split_geometric_refuses_a_sample_of_2_62_or_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """``G = L + 4096 H``: a high part of ``2**50`` would make ``G >= 2**62``, and the sampler
    fails closed; one less is returned exactly. (Unreachable by chance: ``P[H >= 2**50]`` is
    ``exp(-4096 x 2**50)`` with ``x >= 2**-40``; the two inversions are scripted here.)"""
    import importlib

    from privhist.noise import _tables

    geo = importlib.import_module("privhist.noise.geometric")

    x = Fraction(1, 100_000)  # split once: the high part's rate 4096 x has its own table
    assert not geo.table_fits(x) and geo.table_fits(x * 4096)

    def scripted(high: int) -> Any:
        def invert(table: Any, rng: Any, n: int) -> Any:
            low = table is _tables.truncated_table(x, 4096)
            return np.full(n, 5 if low else high, dtype=np.int64)

        return invert

    monkeypatch.setattr(geo, "invert", scripted((1 << 50) - 1))
    assert geometric(x, SeededRandom(0), 1).tolist() == [5 + ((1 << 50) - 1) * 4096]
    monkeypatch.setattr(geo, "invert", scripted(1 << 50))
    with pytest.raises(OverflowError):
        geometric(x, SeededRandom(0), 1)


def test_byte_guide_kept_while_at_most_half_its_entries_are_undecided() -> None:
    """A table keeps its first-byte guide unless more than half of the 256 first bytes leave
    the draw undecided (a threshold inside the byte's range): exactly 128 undecided keep it,
    129 drop it (draws then read whole words)."""
    from privhist.noise._exact import rational_oracle
    from privhist.noise._tables import _finish

    def threshold(k: int) -> Any:
        return rational_oracle(1, 2)

    for undecided, kept in ((128, True), (129, False)):
        # one threshold inside each of the first `undecided` byte ranges, in decreasing order
        floors = sorted(((b << 56) + (1 << 55) for b in range(undecided)), reverse=True)
        table = _finish(floors, threshold)
        assert (table.byte_guide is not None) == kept, undecided
        if kept:
            assert int((table.byte_guide < 0).sum()) == undecided
