"""Exact arithmetic under the samplers: floors of exp(-x) 2**64, tables, and the tie paths."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from tests.scripted_random import ScriptedRandom

from privhist.noise import (
    bernoulli_exp,
    bernoulli_exp_array,
    bernoulli_rational,
    discrete_laplace,
    geometric,
)
from privhist.noise._exact import (
    LazyUniform,
    exp_bounds,
    exp_neg_floor,
    exp_neg_oracle,
    rational_oracle,
)
from privhist.noise._tables import (
    ThresholdTable,
    exp_power_floors,
    geometric_table,
    invert,
    invert_words,
    laplace_table,
    truncated_table,
)
from privhist.noise.bernoulli import compare_word
from privhist.noise.gaussian import _plan

MP = mpmath.MPContext()
MP.prec = 800
TWO64 = 1 << 64


def mp_floor(value: object, bits: int) -> int:
    scaled = value * MP.mpf(2) ** bits  # type: ignore[operator]
    f = MP.floor(scaled)
    err = scaled * MP.mpf(2) ** (20 - MP.prec)  # generous bound on the rounding error
    assert scaled - f > err and f + 1 - scaled > err, "too close to an integer to decide"
    return int(f)


def mp_exp_neg(x: Fraction) -> object:
    return MP.exp(-MP.mpf(x.numerator) / x.denominator)


XS = [
    Fraction(1),
    Fraction(1, 2),
    Fraction(1, 3),
    Fraction(10, 3),
    Fraction(1, 1000),
    Fraction(1, 10**12),
    Fraction(44),
    Fraction(45),
    Fraction(100),
    Fraction(123456789, 1000),
    Fraction(2**70 + 1, 2**69),
    Fraction(7, 2**40),
]


@pytest.mark.parametrize("x", XS, ids=str)
@pytest.mark.parametrize("bits", [64, 128, 640])
def test_exp_neg_floor_matches_high_precision(x: Fraction, bits: int) -> None:
    assert exp_neg_floor(x, bits) == mp_floor(mp_exp_neg(x), bits)


@pytest.mark.parametrize(
    "x", [-x for x in XS] + [Fraction(1), Fraction(5, 7), Fraction(30), Fraction(2**65 + 3, 2**60)]
)
def test_exp_bounds_enclose_the_value(x: Fraction) -> None:
    for prec in (10, 64, 200):
        lo, hi = exp_bounds(x, prec)
        exact = MP.exp(MP.mpf(x.numerator) / x.denominator) * MP.mpf(2) ** prec
        assert lo <= exact <= hi
        assert hi - lo <= 8 or exact < 1  # tight: a few units at scale 2**prec


def test_exp_neg_floor_of_zero_and_tiny_values() -> None:
    assert exp_neg_floor(Fraction(0)) == TWO64
    assert exp_neg_floor(Fraction(10**6)) == 0
    assert exp_neg_oracle(Fraction(0))(64) == (TWO64, True)


def powers(a: object, n: int) -> list[object]:
    """[a, a**2, ..., a**n] by repeated multiplication (800-bit precision)."""
    out = [a]
    for _ in range(n - 1):
        out.append(out[-1] * a)  # type: ignore[operator]
    return out


def _mp_table_check(floors: tuple[int, ...], thresholds: list[object]) -> None:
    assert len(floors) == len(thresholds)
    for f, t in zip(floors, thresholds, strict=True):
        assert f == mp_floor(t, 64)


@pytest.mark.parametrize("x", [Fraction(1), Fraction(1, 3), Fraction(1, 1000), Fraction(30)])
def test_geometric_table_floors_are_exact(x: Fraction) -> None:
    table = geometric_table(x)
    a = mp_exp_neg(x)
    ts = powers(a, table.size + 1)
    _mp_table_check(table.floors, ts[:-1])
    assert mp_floor(ts[-1], 64) == 0  # every later threshold is below 2**-64
    assert table.floors[-1] >= 1


@pytest.mark.parametrize("x", [Fraction(1), Fraction(3, 10), Fraction(1, 1000), Fraction(3, 7)])
def test_laplace_table_floors_are_exact(x: Fraction) -> None:
    table = laplace_table(x)
    a = mp_exp_neg(x)
    ts = [2 * p / (1 + a) for p in powers(a, table.size + 1)]
    _mp_table_check(table.floors, ts[:-1])
    assert mp_floor(ts[-1], 64) == 0


@pytest.mark.parametrize(("x", "m"), [(Fraction(1, 10**6), 4096), (Fraction(1, 3), 16)])
def test_truncated_table_floors_are_exact(x: Fraction, m: int) -> None:
    table = truncated_table(x, m)
    a = mp_exp_neg(x)
    ps = powers(a, m)
    am = ps[-1]
    ts = [(p - am) / (1 - am) for p in ps[:-1]]
    while ts and mp_floor(ts[-1], 64) == 0:
        ts.pop()
    _mp_table_check(table.floors, ts)
    assert table.threshold(m)(64) == (0, True)


@pytest.mark.parametrize(("x", "count"), [(Fraction(1, 3), 3), (Fraction(4096, 10**9 + 7), 4096)])
def test_exp_power_floors_are_exact(x: Fraction, count: int) -> None:
    table = exp_power_floors(x, count)
    assert table.dtype == np.uint64 and table.shape == (count,)
    assert int(table[0]) == TWO64 - 1  # p = 1, capped
    a = mp_exp_neg(x)
    for j, p in enumerate(powers(a, count - 1), start=1):
        assert int(table[j]) == mp_floor(p, 64)


@pytest.mark.parametrize("sigma2", [Fraction(1), Fraction(10, 3), Fraction(1000), Fraction(1, 5)])
def test_gaussian_acceptance_table_is_exact(sigma2: Fraction) -> None:
    plan = _plan(sigma2)
    assert plan.table is not None
    s2 = MP.mpf(sigma2.numerator) / sigma2.denominator
    c = MP.mpf(plan.centre.numerator) / plan.centre.denominator
    for y in range(plan.table.shape[0]):
        if y == plan.centre:  # exp(0) = 1: the capped 2**64
            assert int(plan.table[y]) == TWO64 - 1
            continue
        expected = mp_floor(MP.exp(-((y - c) ** 2) / (2 * s2)), 64)
        assert int(plan.table[y]) == expected


# --- the rare tie paths, forced with scripted words -------------------------------------------


def digits(value: object, j: int) -> int:
    """The j-th 64-bit word of the binary expansion of value in [0, 1)."""
    return mp_floor(value, 64 * j) % TWO64


def test_bernoulli_exp_tie_continues_with_the_next_digits() -> None:
    e1 = mp_exp_neg(Fraction(1))
    d1, d2, d3 = digits(e1, 1), digits(e1, 2), digits(e1, 3)
    cases = [([d1, d2 - 1], True), ([d1, d2 + 1], False), ([d1, d2, d3 - 1], True)]
    cases += [([d1, d2, d3 + 1], False), ([d1 - 1], True), ([d1 + 1], False)]
    for words, expected in cases:
        rng = ScriptedRandom(words)
        assert bernoulli_exp(1, rng, 1).tolist() == [expected]
        assert rng.used == len(words)


def test_bernoulli_exp_below_two_to_the_minus_64() -> None:
    value = mp_exp_neg(Fraction(100))  # about 2**-144: first two words are 0
    d3 = digits(value, 3)
    assert digits(value, 1) == digits(value, 2) == 0 and d3 > 0
    assert bernoulli_exp(100, ScriptedRandom([0, 0, d3 - 1]), 1).tolist() == [True]
    assert bernoulli_exp(100, ScriptedRandom([0, 0, d3 + 1]), 1).tolist() == [False]
    assert bernoulli_exp(100, ScriptedRandom([1]), 1).tolist() == [False]


def test_rational_ties_and_dyadic_ends() -> None:
    third = 0x5555555555555555
    assert bernoulli_rational(1, 3, ScriptedRandom([third, third, third - 1])).item() is True
    assert bernoulli_rational(1, 3, ScriptedRandom([third, third + 1])).item() is False
    # 1/2 = 0.1000...: a tie on the first word means U >= 1/2 without drawing more
    rng = ScriptedRandom([1 << 63])
    assert bernoulli_rational(1, 2, rng).item() is False and rng.used == 1
    assert bernoulli_rational(1, 2, ScriptedRandom([(1 << 63) - 1])).item() is True
    # huge denominators take the same exact path
    num, den = 2**100 + 1, 3 * 2**100
    f = (num << 64) // den
    assert bernoulli_rational(num, den, ScriptedRandom([f - 1])).item() is True
    assert bernoulli_rational(num, den, ScriptedRandom([f + 1])).item() is False


def test_probability_one_is_capped_and_resolved_exactly() -> None:
    one = rational_oracle(1, 1)
    rng = ScriptedRandom([TWO64 - 1, 0])
    assert compare_word(TWO64, one, rng, 1).tolist() == [True]
    rng = ScriptedRandom([TWO64 - 2])
    assert compare_word(TWO64, one, rng, 1).tolist() == [True]


def test_lazy_uniform_keeps_its_words() -> None:
    u = LazyUniform(ScriptedRandom([5, 7]), first_word=3)
    assert u.prefix(1) == 3
    assert u.prefix(2) == (3 << 64) | 5
    assert u.prefix(3) == (((3 << 64) | 5) << 64) | 7
    assert u.prefix(2) == (3 << 64) | 5


def geometric_count(u_lo: object, u_hi: object, x: Fraction) -> int:
    """#{k >= 1 : U < exp(-x k)} = ceil(-ln(U) / x) - 1, the same for every U in [u_lo, u_hi]."""
    xs = MP.mpf(x.numerator) / x.denominator
    counts = {int(MP.ceil(-MP.log(u) / xs)) - 1 for u in (u_lo, u_hi)}
    assert len(counts) == 1, "the scripted prefix does not determine the sample"
    return counts.pop()


def first_word(table: ThresholdTable, word: int) -> list[int]:
    """Scripted words from which :func:`invert` reads ``word`` as the first word of one ``U``:
    with a byte guide, a word whose first byte is the top byte of ``word`` (little-endian: its
    lowest byte), then, if that byte does not decide, a word whose top 56 bits are the rest."""
    if table.byte_guide is None:
        return [word]
    if table.byte_guide[word >> 56] >= 0:
        return [word >> 56]
    return [word >> 56, (word & ((1 << 56) - 1)) << 8]


def test_geometric_tie_on_a_table_entry() -> None:
    table = geometric_table(Fraction(1))
    e1 = mp_exp_neg(Fraction(1))
    f2, d2 = table.floors[1], digits(e1**2, 2)
    assert geometric(1, ScriptedRandom([*first_word(table, f2), d2 - 1]), 1).tolist() == [2]
    assert geometric(1, ScriptedRandom([*first_word(table, f2), d2 + 1]), 1).tolist() == [1]


@pytest.mark.parametrize("x", [Fraction(1), Fraction(1, 1000)])
@pytest.mark.parametrize("second", [1, 1 << 40, (1 << 64) - 3])
def test_geometric_first_word_zero_goes_beyond_the_table(x: Fraction, second: int) -> None:
    third = 12345
    u_lo = MP.mpf(second * TWO64 + third) / MP.mpf(2) ** 192
    u_hi = MP.mpf(second * TWO64 + third + 1) / MP.mpf(2) ** 192
    expected = geometric_count(u_lo, u_hi, x)
    table = geometric_table(x)
    assert expected >= table.size  # decided beyond the table
    words = [*first_word(table, 0), second, third, *[1] * 8]
    assert geometric(x, ScriptedRandom(words), 1).tolist() == [expected]


def test_geometric_tie_among_repeated_floors() -> None:
    # for x = 1/1000 many consecutive tail floors equal 1: a word of 1 ties with all of them
    x = Fraction(1, 1000)
    assert sum(1 for f in geometric_table(x).floors if f == 1) > 100
    second = 1 << 63
    u_lo = (1 + MP.mpf(second) / TWO64) / TWO64
    u_hi = (1 + MP.mpf(second + 1) / TWO64) / TWO64
    expected = geometric_count(u_lo, u_hi, x)
    words = [*first_word(geometric_table(x), 1), second, *[7] * 8]
    assert geometric(x, ScriptedRandom(words), 1).tolist() == [expected]


def test_discrete_laplace_tie_then_sign() -> None:
    table = laplace_table(Fraction(1))
    e1 = mp_exp_neg(Fraction(1))
    t3 = 2 * e1**3 / (1 + e1)
    f3, d3 = table.floors[2], digits(t3, 2)
    # magnitude word, its continuation, then a word of sign bits (bit 7 is the first bit)
    w = first_word(table, f3)
    assert len(w) == 2  # the top byte of a floor never decides
    assert discrete_laplace(1, ScriptedRandom([*w, d3 - 1, 0]), 1).tolist() == [3]
    assert discrete_laplace(1, ScriptedRandom([*w, d3 + 1, 0]), 1).tolist() == [2]
    assert discrete_laplace(1, ScriptedRandom([*w, d3 - 1, 1 << 7]), 1).tolist() == [-3]


def test_exp_array_table_tie() -> None:
    f = int(exp_power_floors(Fraction(1, 3), 3)[1])
    d2 = digits(mp_exp_neg(Fraction(1, 3)), 2)
    assert bernoulli_exp_array([1], 3, ScriptedRandom([f, d2 - 1])).tolist() == [True]
    assert bernoulli_exp_array([1], 3, ScriptedRandom([f, d2 + 1])).tolist() == [False]
    # exp(0) needs no randomness at all
    assert bernoulli_exp_array([0, 0], 3, ScriptedRandom([])).tolist() == [True, True]


@pytest.mark.parametrize("table", [geometric_table(Fraction(1, 1000)), laplace_table(Fraction(1))])
def test_guide_agrees_with_a_full_search(table: object) -> None:
    asc = table.ascending  # type: ignore[attr-defined]
    guide = table.guide  # type: ignore[attr-defined]
    gen = np.random.default_rng(3)
    near = np.concatenate([asc, asc + np.uint64(1), asc - np.uint64(1)])  # wraps at 0: fine
    words = np.concatenate([gen.integers(0, 2**64, 200_000, dtype=np.uint64), near])
    g = guide[words >> np.uint64(48)]
    full = asc.shape[0] - np.searchsorted(asc, words, side="right")
    known = g >= 0
    assert (g[known] == full[known]).all()
    assert known.mean() > 0.5  # the guide answers most words
    assert (g[np.isin(words, asc)] == -1).all()  # a word equal to a floor is never guided


BYTE_TABLES = [
    laplace_table(Fraction(1)),
    geometric_table(Fraction(1)),
    laplace_table(Fraction(1, 10)),
    laplace_table(Fraction(3, 10)),
]


@pytest.mark.parametrize("table", BYTE_TABLES)
def test_byte_guide_agrees_with_a_full_search(table: ThresholdTable) -> None:
    assert table.byte_guide is not None and (table.byte_guide < 0).mean() <= 0.5
    asc = table.ascending
    for b in range(256):
        lo, hi = b << 56, ((b + 1) << 56) - 1
        inside = ((asc >= np.uint64(lo)) & (asc <= np.uint64(hi))).any()
        guided = int(table.byte_guide[b])
        assert (guided < 0) == bool(inside)
        if guided >= 0:  # both ends of the interval (and so every word in it) give this count
            ends = np.array([lo, hi], dtype=np.uint64)
            assert (asc.shape[0] - np.searchsorted(asc, ends, side="right") == guided).all()
    assert table.byte_guide[0] < 0  # the interval of 0 holds the entry standing for k > K


@pytest.mark.parametrize("table", BYTE_TABLES)
def test_byte_first_inversion_reads_the_same_uniform(table: ThresholdTable) -> None:
    """Every first byte, with several continuations: ``invert`` (a byte, then 56 bits for an
    undecided byte) equals the whole-word inversion of the word those bits form."""
    gen = np.random.default_rng(11)
    for b in range(256):
        for rest in (0, TWO64 - 1, int(gen.integers(0, 2**63)) * 2 + 1):
            word = (b << 56) | (rest >> 8)
            tail = [int(x) for x in gen.integers(0, 2**63, 6)]
            got = invert(table, ScriptedRandom([b, rest, *tail]), 1)
            want = invert_words(table, np.array([word], dtype=np.uint64), ScriptedRandom(tail))
            assert got.tolist() == want.tolist()
    # a vector: eight first bytes from one word, the rest words in the order of the undecided
    firsts = [0, 1, 200, int(np.flatnonzero(table.byte_guide < 0)[-1]), 7, 255, 3, 0]
    packed = sum(v << (8 * i) for i, v in enumerate(firsts))
    undecided = [i for i, v in enumerate(firsts) if table.byte_guide[v] < 0]
    rests = [int(x) for x in gen.integers(0, 2**63, len(undecided))]
    got = invert(table, ScriptedRandom([packed, *rests, *[5] * 20]), 8)
    words = [firsts[i] << 56 for i in range(8)]
    for i, r in zip(undecided, rests, strict=True):
        words[i] |= r >> 8
    want = invert_words(table, np.array(words, dtype=np.uint64), ScriptedRandom([5] * 20))
    assert got.tolist() == want.tolist()


def test_tables_with_dense_floors_draw_whole_words() -> None:
    for table in (laplace_table(Fraction(1, 1000)), truncated_table(Fraction(1, 10**6), 4096)):
        assert table.byte_guide is None
        rng = ScriptedRandom([3 << 60, 5 << 60])
        assert (
            invert(table, rng, 2).tolist()
            == invert_words(
                table, np.array([3 << 60, 5 << 60], dtype=np.uint64), ScriptedRandom([])
            ).tolist()
        )
        assert rng.used == 2


@pytest.mark.parametrize("sigma2", [Fraction(10, 3), Fraction(1000)])
def test_gaussian_acceptance_table_bounds_decide_almost_every_entry(
    sigma2: Fraction, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recurrence's interval bounds (rounded outwards, with ``2 log2(span) + 40`` spare
    bits) decide the floor of all but a few entries; only those are computed from ``exp``'s
    own digits (a recurrence that lost its bounds would send nearly every entry there)."""
    from privhist.noise import gaussian

    plan = _plan(sigma2)
    assert plan.table is not None
    calls = []
    oracle = gaussian.exp_neg_oracle

    def counted(x: Fraction) -> Any:
        calls.append(x)
        return oracle(x)

    monkeypatch.setattr(gaussian, "exp_neg_oracle", counted)
    table = gaussian._acceptance_table(sigma2, plan.centre, int(plan.table.shape[0]))
    assert (table == plan.table).all()
    assert len(calls) <= 2, len(calls)
