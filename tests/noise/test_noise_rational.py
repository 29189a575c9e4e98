"""Conservative rational rounding: rational_at_most / rational_at_least."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from privhist.core.errors import ValidationError
from privhist.noise import rational_at_least, rational_at_most


def brute_force(x: Fraction, big_n: int) -> tuple[Fraction, Fraction]:
    below = max(Fraction(math.floor(x * q), q) for q in range(1, big_n + 1))
    above = min(Fraction(math.ceil(x * q), q) for q in range(1, big_n + 1))
    return below, above


def test_best_approximations_match_brute_force() -> None:
    gen = np.random.default_rng(12345)
    values = [Fraction(v) for v in gen.normal(0, 10, size=150).tolist()]
    values += [Fraction(math.pi), Fraction(math.e), Fraction(1, 3) + Fraction(1, 10**9)]
    for x in values:
        for big_n in (1, 2, 7, 100, 997):
            lo, hi = rational_at_most(x, big_n), rational_at_least(x, big_n)
            assert (lo, hi) == brute_force(x, big_n)
            assert lo <= x <= hi
            assert lo.denominator <= big_n and hi.denominator <= big_n


def test_exact_when_the_denominator_is_small_enough() -> None:
    assert (
        rational_at_most(Fraction(3, 7), 7)
        == rational_at_least(Fraction(3, 7), 7)
        == Fraction(3, 7)
    )
    assert rational_at_most(5) == rational_at_least(5) == 5
    assert rational_at_most(0.5) == Fraction(1, 2)


def test_floats_round_the_conservative_way() -> None:
    # 0.1 as a float is slightly above 1/10
    assert rational_at_most(0.1) == Fraction(1, 10)
    up = rational_at_least(0.1)
    assert up > Fraction(0.1) and up.denominator <= 2**20
    assert rational_at_least(Decimal("0.25")) == Fraction(1, 4)
    assert rational_at_least("0.1") == Fraction(1, 10)  # decimal strings are exact
    # typical use: a Laplace scale 1 / epsilon rounded up
    eps = 0.3
    scale = rational_at_least(Fraction(1) / Fraction(eps))
    assert scale >= 1 / Fraction(eps) and scale - 1 / Fraction(eps) < Fraction(1, 2**19)


def test_default_denominator_bound_is_two_to_the_20() -> None:
    x = Fraction(math.pi)
    assert rational_at_most(x).denominator <= 2**20 < rational_at_most(x, 2**30).denominator


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "one third", None, True, 1j])
def test_bad_values_raise(bad: object) -> None:
    with pytest.raises(ValidationError) as err:
        rational_at_most(bad)
    assert err.value.parameter == "x"


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_denominator_bounds_raise(bad: object) -> None:
    with pytest.raises(ValidationError) as err:
        rational_at_least(0.3, bad)  # type: ignore[arg-type]
    assert err.value.parameter == "max_denominator"
