"""NTT, doubling, Lagrange evaluation and extension against the definitions, in Python ints."""

from __future__ import annotations

import random

import numpy as np
import pytest

from privhist.core.errors import ValidationError
from privhist.federated.vdaf import poly
from privhist.federated.vdaf.field import Field64, Field128, FieldVec

FIELDS = [Field64, Field128]


def _values(f: type[FieldVec], coeffs: list[int], n: int) -> list[int]:
    p, w = f.MODULUS, f.nth_root(n)
    return [sum(c * pow(w, i * j, p) for j, c in enumerate(coeffs)) % p for i in range(n)]


@pytest.mark.parametrize("f", FIELDS)
@pytest.mark.parametrize("n", [1, 2, 4, 16, 64])
def test_ntt_and_inverse(f: type[FieldVec], n: int) -> None:
    rnd = random.Random(n)
    coeffs = [rnd.randrange(f.MODULUS) for _ in range(n)]
    vals = _values(f, coeffs, n)
    assert poly.ntt(f.from_ints(coeffs)).to_ints() == vals
    assert poly.inv_ntt(f.from_ints(vals)).to_ints() == coeffs
    batch = f.from_ints(np.array([coeffs, vals], dtype=object))
    assert poly.ntt(batch)[0].to_ints() == vals
    doubled = poly.double_evaluations(f.from_ints(vals)).to_ints()
    assert doubled == _values(f, coeffs, 2 * n)
    t = rnd.randrange(f.MODULUS)
    expect = sum(c * pow(t, j, f.MODULUS) for j, c in enumerate(coeffs)) % f.MODULUS
    assert poly.poly_eval(f.from_ints(vals), t).to_ints() == [expect]


@pytest.mark.parametrize("f", FIELDS)
@pytest.mark.parametrize(("m", "n"), [(3, 4), (7, 8), (5, 8), (6, 16), (8, 8)])
def test_extend_values(f: type[FieldVec], m: int, n: int) -> None:
    rnd = random.Random(m * n)
    coeffs = [rnd.randrange(f.MODULUS) for _ in range(m)]
    vals = _values(f, coeffs, n)
    assert poly.extend_values(f.from_ints(vals[:m]), n).to_ints() == vals


def test_evaluation_at_a_root_of_unity_is_refused() -> None:
    w = Field64.nth_root(8)
    assert poly.is_root_of_unity(Field64, w, 8)
    with pytest.raises(ValidationError):
        poly.lagrange_weights(Field64, 8, w)
