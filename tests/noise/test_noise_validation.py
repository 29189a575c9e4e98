"""Bad parameters fail closed with a ValidationError naming the parameter; shapes and dtypes."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from privhist.core.errors import ValidationError
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

R = SeededRandom(0)

BAD: list[tuple[str, Callable[[], Any]]] = [
    ("num", lambda: bernoulli_rational(4, 3, R, 2)),
    ("num", lambda: bernoulli_rational(-1, 3, R, 2)),
    ("den", lambda: bernoulli_rational(0, 0, R, 2)),
    ("num", lambda: bernoulli_rational(0.5, 1, R, 2)),
    ("num", lambda: bernoulli_rational(np.array([1, 5]), np.array([2, 3]), R)),
    ("den", lambda: bernoulli_rational(np.array([0, 1]), np.array([0, 3]), R)),
    ("size", lambda: bernoulli_rational(np.array([1, 1]), np.array([2, 3]), R, size=3)),
    ("size", lambda: bernoulli_rational(1, 3, R, size=-1)),
    ("x", lambda: bernoulli_exp(-1, R, 2)),
    ("x", lambda: bernoulli_exp(0.5, R, 2)),
    ("size", lambda: bernoulli_exp(1, R, 2.0)),
    ("numerators", lambda: bernoulli_exp_array([1, -1], 3, R)),
    ("numerators", lambda: bernoulli_exp_array([0.5], 3, R)),
    ("denominator", lambda: bernoulli_exp_array([1], 0, R)),
    ("denominator", lambda: bernoulli_exp_array([1], 2**62, R)),
    ("x", lambda: geometric(0, R, 2)),
    ("x", lambda: geometric(Fraction(-1, 2), R, 2)),
    ("x", lambda: geometric(Fraction(1, 2**41), R, 2)),
    ("x", lambda: geometric(1.0, R, 2)),
    ("scale", lambda: discrete_laplace(0, R, 2)),
    ("scale", lambda: discrete_laplace(-3, R, 2)),
    ("scale", lambda: discrete_laplace(2.5, R, 2)),
    ("scale", lambda: discrete_laplace(2**41, R, 2)),
    ("scale", lambda: discrete_laplace(True, R, 2)),
    ("sigma2", lambda: discrete_gaussian(0, R, 2)),
    ("sigma2", lambda: discrete_gaussian(-Fraction(1, 2), R, 2)),
    ("sigma2", lambda: discrete_gaussian("1", R, 2)),
    ("n", lambda: binomial(-1, Fraction(1, 2), R)),
    ("n", lambda: binomial(np.array([3, -2]), Fraction(1, 2), R)),
    ("n", lambda: binomial(np.array([1.5]), Fraction(1, 2), R)),
    ("n", lambda: binomial(2**63, Fraction(1, 2), R)),
    ("p", lambda: binomial(3, Fraction(3, 2), R)),
    ("p", lambda: binomial(3, -1, R)),
    ("p", lambda: binomial(3, 0.5, R)),
    ("size", lambda: binomial(np.array([1, 2]), Fraction(1, 2), R, size=3)),
]


@pytest.mark.parametrize(("parameter", "call"), BAD)
def test_bad_parameters_raise_validation_error(parameter: str, call: Callable[[], Any]) -> None:
    with pytest.raises(ValidationError) as err:
        call()
    assert err.value.parameter == parameter
    assert f"parameter '{parameter}' of " in str(err.value)


SAMPLERS: list[Callable[[Any], Any]] = [
    lambda size: bernoulli_rational(1, 3, R, size),
    lambda size: bernoulli_exp(Fraction(1, 3), R, size),
    lambda size: geometric(Fraction(1, 3), R, size),
    lambda size: discrete_laplace(Fraction(10, 3), R, size),
    lambda size: discrete_laplace(10**6, R, size),
    lambda size: discrete_gaussian(Fraction(10, 3), R, size),
    lambda size: discrete_gaussian(10**8, R, size),
    lambda size: binomial(5, Fraction(1, 3), R, size),
]


@pytest.mark.parametrize("sample", SAMPLERS)
@pytest.mark.parametrize("size", [0, (0,), (0, 3), 1, 7, (2, 3)])
def test_shapes_and_dtypes(sample: Callable[[Any], Any], size: Any) -> None:
    out = sample(size)
    shape = size if isinstance(size, tuple) else (size,)
    assert out.shape == shape
    assert out.dtype in (np.bool_, np.int64)


def test_integer_samplers_return_int64() -> None:
    for out in (
        geometric(1, R, 3),
        discrete_laplace(1, R, 3),
        discrete_gaussian(1, R, 3),
        binomial(np.array([1, 2], dtype=np.int32), Fraction(1, 2), R),
    ):
        assert out.dtype == np.int64


def test_scalar_rational_bernoulli_without_size_is_zero_dimensional() -> None:
    out = bernoulli_rational(1, 3, R)
    assert out.shape == () and out.dtype == np.bool_
    assert bernoulli_rational(np.array([], dtype=np.int64), 3, R).shape == (0,)


def test_no_randomness_is_spent_on_certain_outcomes() -> None:
    class Refuse(SeededRandom):
        def uint64(self, n: int) -> Any:
            if n:
                raise AssertionError("randomness drawn for a certain outcome")
            return super().uint64(0)

    rng = Refuse(0)
    assert bernoulli_rational(3, 3, rng, 4).all()
    assert not bernoulli_rational(0, 3, rng, 4).any()
    assert bernoulli_exp(0, rng, 4).all()
    assert binomial(np.array([4, 9]), 1, rng).tolist() == [4, 9]
