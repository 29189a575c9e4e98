"""The samplers' rare paths, forced: what no sample of realistic size reaches.

* Table entries whose floor the interval bounds do not decide (probability about ``2**-40`` per
  entry) are computed from each table's exact oracle. Here every entry is forced through its
  oracle and compared with a 400-bit mpmath floor, for every table builder.
* ``floor_from_bounds`` raises its precision until a floor is decided (a threshold within
  ``2**-200`` of a dyadic rational needs four rounds), and fails closed on one it never decides.
* An offset beyond the support of Binomial(2n, 1/2) is rejected without another word.
* Bernoulli with probability exactly 0 or 1 in the array path.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from tests.scripted_random import ScriptedRandom

from privhist.noise import _tables
from privhist.noise._exact import floor_from_bounds

MP = mpmath.MPContext()
MP.prec = 400


def _floor64(t: Any) -> int:
    return int(MP.floor(t * MP.mpf(2) ** 64))


@pytest.fixture
def oracle_only(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Tables built with every floor taken from its entry's oracle (the path for undecided
    bounds); caches cleared before and after so no other test sees these tables."""
    shift_floors = _tables._floors

    def every_entry_from_its_oracle(bounds: Any, w: int, threshold: Any) -> list[int]:
        floors = [threshold(k)(64)[0] for k in range(1, len(bounds) + 1)]
        while floors and floors[-1] == 0:
            floors.pop()
        return floors

    builders = [
        _tables.geometric_table,
        _tables.laplace_table,
        _tables.truncated_table,
        _tables.exp_power_floors,
    ]
    for b in builders:
        b.cache_clear()
    monkeypatch.setattr(_tables, "_floors", every_entry_from_its_oracle)
    yield
    monkeypatch.setattr(_tables, "_floors", shift_floors)
    for b in builders:
        b.cache_clear()


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(7, 2)])
def test_every_table_entry_from_its_oracle_is_exact(oracle_only: Any, x: Fraction) -> None:
    a = MP.exp(-MP.mpf(x.numerator) / x.denominator)
    geo = _tables.geometric_table(x).floors
    assert geo == [_floor64(a**k) for k in range(1, len(geo) + 1)]
    lap = _tables.laplace_table(x).floors
    assert lap == [_floor64(2 * a**k / (1 + a)) for k in range(1, len(lap) + 1)]
    m = 16
    trunc = _tables.truncated_table(x, m).floors
    am = a**m
    assert trunc == [_floor64((a**k - am) / (1 - am)) for k in range(1, len(trunc) + 1)]
    powers = [int(v) for v in _tables.exp_power_floors(x, 12)]
    assert powers[0] == (1 << 64) - 1  # exp(0) = 1, capped
    assert powers[1:] == [_floor64(a**j) for j in range(1, 12)]


def test_exp_power_floors_of_no_entries_is_empty() -> None:
    assert _tables.exp_power_floors(Fraction(1, 3), 0).shape == (0,)


def test_floor_from_bounds_raises_its_precision_until_decided() -> None:
    """``T = 1/2 - 2**-200``: bounds of width two units at every precision decide
    ``floor(T 2**64)`` only from 137 guard bits on (guards 32, 64, 128, 256)."""
    asked: list[int] = []

    def bounds(prec: int) -> tuple[int, int]:
        asked.append(prec)
        assert len(asked) < 20, "the precision never grows"
        exact = (1 << (prec - 1)) - (1 << max(0, prec - 200))  # T 2**prec, floored
        return exact - 1, exact + 1

    assert floor_from_bounds(bounds, 64) == (1 << 63) - 1
    assert asked == [64 + 32, 64 + 64, 64 + 128, 64 + 256]


def test_floor_from_bounds_fails_closed_on_a_dyadic_threshold() -> None:
    calls = 0

    def bounds(prec: int) -> tuple[int, int]:
        nonlocal calls
        calls += 1
        assert calls < 20, "the precision never grows"
        half = 1 << (prec - 1)
        return half - 1, half + 1  # T = 1/2 exactly: never decided by bounds

    with pytest.raises(ArithmeticError, match="dyadic"):
        floor_from_bounds(bounds, 64)


def test_binomial_half_rejects_offsets_beyond_the_support_without_a_word() -> None:
    from privhist.noise._binomial_large import accept_exact

    for j in (0, 1, 5):
        assert accept_exact(1000, 1001, j, 0, ScriptedRandom([])) is False
    # within the support an offset is decided by the same uniform (here surely accepted at 0)
    assert accept_exact(1000, 0, 0, 0, ScriptedRandom([0] * 4)) is True


def test_binomial_direct_rejects_offsets_beyond_the_support_without_a_word() -> None:
    from privhist.noise._binomial_direct import accept_exact

    mode, rest = 300, 700
    for x in (rest + 1, -(mode + 1)):
        assert accept_exact(mode, rest, x, 0, 1, 3, 0, ScriptedRandom([])) is False


def test_bernoulli_rational_arrays_at_probability_zero_and_one() -> None:
    from privhist.core.random import SeededRandom
    from privhist.noise import bernoulli_rational

    num = np.array([0, 5, 7, 0])
    den = np.array([3, 5, 7, 1])
    assert bernoulli_rational(num, den, SeededRandom(1)).tolist() == [False, True, True, False]


def test_exp_power_floors_keeps_its_length_when_the_tail_is_zero() -> None:
    """``exp(-10 j) 2**64 < 1`` from ``j = 5`` on: those entries are 0, and the table still
    has one entry per ``j`` (the Bernoulli tables index it by ``j``)."""
    x = Fraction(10)
    table = [int(v) for v in _tables.exp_power_floors(x, 8)]
    assert table == [(1 << 64) - 1] + [_floor64(MP.exp(-10 * j)) for j in range(1, 8)]
    assert table[5:] == [0, 0, 0] and table[4] > 0


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(5, 2)])
def test_laplace_table_bounds_enclose_and_are_tight(
    monkeypatch: pytest.MonkeyPatch, x: Fraction
) -> None:
    """The fixed-point bounds from which ``laplace_table`` takes its floors enclose
    ``2 a**k / (1 + a) 2**w`` (400-bit mpmath) and are a few units wide, so that they decide
    nearly every floor without the exact oracle."""
    seen: list[tuple[list[tuple[int, int]], int]] = []
    floors = _tables._floors

    def spy(bounds: Any, w: int, threshold: Any) -> list[int]:
        seen.append((list(bounds), w))
        return floors(bounds, w, threshold)

    _tables.laplace_table.cache_clear()
    monkeypatch.setattr(_tables, "_floors", spy)
    try:
        _tables.laplace_table(x)
    finally:
        _tables.laplace_table.cache_clear()
    ((bounds, w),) = seen
    a = MP.exp(-MP.mpf(x.numerator) / x.denominator)
    for k, (lo, hi) in enumerate(bounds, start=1):
        exact = 2 * a**k / (1 + a) * MP.mpf(2) ** w
        assert lo <= exact <= hi
        assert hi - lo <= 8 * k + 8


def test_truncated_table_oracle_rounds_its_bounds_outwards(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact oracle of ``truncated_table`` divides interval ends with outward rounding.
    Given exact powers (``a**k = 1/2``, ``a**m = 2**-40``), ``T = (2**39 - 1) / (2**40 - 1)``
    has binary digits ``0`` then 39 ones (period 40): ``floor(2 T) = 0``, and the 32 guard digits
    after it are all ones, so a lower end rounded up (to ``2**32`` at ``2**33``) would agree with
    the upper end and decide ``floor(2 T) = 1``."""
    x, m, k = Fraction(1, 3), 16, 3
    table = _tables.truncated_table(x, m)

    def exact_powers(y: Fraction, prec: int) -> tuple[int, int]:
        if y == -x * k:
            v = 1 << (prec - 1)
        elif y == -x * m:
            v = 1 << (prec - 40)
        else:
            raise AssertionError(f"unexpected exponent {y}")
        return v, v

    monkeypatch.setattr(_tables, "exp_bounds", exact_powers)
    oracle = table.threshold(k)
    t = Fraction((1 << 39) - 1, (1 << 40) - 1)
    for bits in (1, 5, 64):
        assert oracle(bits)[0] == (t * (1 << bits)).__floor__()
