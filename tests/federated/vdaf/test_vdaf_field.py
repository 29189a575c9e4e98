"""Field64 / Field128 arithmetic against Python integers, and the draft's encoding rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privhist.core.errors import ProtocolError, ValidationError
from privhist.federated.vdaf.field import Field64, Field128, FieldVec

FIELDS = [Field64, Field128]


def _edges(f: type[FieldVec]) -> list[int]:
    p = f.MODULUS
    out = [0, 1, 2, p - 1, p - 2, (p - 1) // 2, (p + 1) // 2, 2**32 - 1, 2**32, 2**32 + 1]
    out += [2**63, 2**63 - 1, p - 2**32, (28 << 64) % p, (2**64 - 1) % p, (2**96) % p]
    return [x % p for x in out]


@pytest.mark.parametrize("f", FIELDS)
def test_extreme_values_pairwise(f: type[FieldVec]) -> None:
    p = f.MODULUS
    e = _edges(f)
    a = [x for x in e for _ in e]
    b = [y for _ in e for y in e]
    fa, fb = f.from_ints(a), f.from_ints(b)
    assert (fa + fb).to_ints() == [(x + y) % p for x, y in zip(a, b, strict=True)]
    assert (fa - fb).to_ints() == [(x - y) % p for x, y in zip(a, b, strict=True)]
    assert (fa * fb).to_ints() == [(x * y) % p for x, y in zip(a, b, strict=True)]
    assert (-fa).to_ints() == [(-x) % p for x in a]


@pytest.mark.parametrize("f", FIELDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_vectors_match_python_ints(f: type[FieldVec], data: st.DataObject) -> None:
    p = f.MODULUS
    n = data.draw(st.integers(1, 40))
    a = data.draw(st.lists(st.integers(0, p - 1), min_size=n, max_size=n))
    b = data.draw(st.lists(st.integers(0, p - 1), min_size=n, max_size=n))
    fa, fb = f.from_ints(a), f.from_ints(b)
    assert (fa * fb).to_ints() == [(x * y) % p for x, y in zip(a, b, strict=True)]
    assert (fa + fb).to_ints() == [(x + y) % p for x, y in zip(a, b, strict=True)]
    assert (fa - fb).to_ints() == [(x - y) % p for x, y in zip(a, b, strict=True)]
    assert fa.total().to_ints() == [sum(a) % p]


@pytest.mark.parametrize("f", FIELDS)
def test_sums_along_axes_and_broadcasting(f: type[FieldVec]) -> None:
    p = f.MODULUS
    rng = np.random.default_rng(1)
    vals = [int(x) % p * (2**61 + 1) % p for x in rng.integers(0, 2**62, size=600)]
    vals[:5] = [p - 1] * 5
    m = f.from_ints(np.array(vals, dtype=object).reshape(20, 30))
    rows = [sum(vals[i * 30 : (i + 1) * 30]) % p for i in range(20)]
    cols = [sum(vals[j::30]) % p for j in range(30)]
    assert m.sum(axis=1).to_ints() == rows
    assert m.sum(axis=0).to_ints() == cols
    assert (m * 3).to_ints() == [3 * v % p for v in vals]
    row = f.from_ints(vals[:30])
    assert (m + row)[1].to_ints() == [
        (x + y) % p for x, y in zip(vals[30:60], vals[:30], strict=True)
    ]


@pytest.mark.parametrize("f", FIELDS)
def test_encoding_is_little_endian_and_refuses_overflow(f: type[FieldVec]) -> None:
    p = f.MODULUS
    x = f.from_ints([1, p - 1])
    enc = x.encode()
    assert enc[: f.ENCODED_SIZE] == (1).to_bytes(f.ENCODED_SIZE, "little")
    assert f.decode(enc) == x
    with pytest.raises(ProtocolError, match="modulus"):
        f.decode(p.to_bytes(f.ENCODED_SIZE, "little"))
    with pytest.raises(ProtocolError, match="whole number"):
        f.decode(b"\x00" * (f.ENCODED_SIZE + 1))
    # the largest encodable value above p is refused too
    with pytest.raises(ProtocolError):
        f.decode(b"\xff" * f.ENCODED_SIZE)


@pytest.mark.parametrize("f", FIELDS)
def test_from_ints_refuses_floats_bools_and_out_of_range(f: type[FieldVec]) -> None:
    with pytest.raises(ValidationError):
        f.from_ints(np.array([1.0, 2.0]))
    with pytest.raises(ValidationError):
        f.from_ints([True])
    with pytest.raises(ValidationError):
        f.from_ints([f.MODULUS])
    assert f.from_ints([-1]).to_ints() == [f.MODULUS - 1]
    assert f.from_small(np.array([-3, 4])).to_signed() == [-3, 4]


def test_draft_parameters() -> None:
    # draft-irtf-cfrg-vdaf-20, Table 3
    assert Field64.MODULUS == 2**32 * 4294967295 + 1
    assert Field128.MODULUS == 2**66 * 4611686018427387897 + 1
    for f, order in ((Field64, 2**32), (Field128, 2**66)):
        g = f.GENERATOR
        assert pow(g, order, f.MODULUS) == 1 and pow(g, order // 2, f.MODULUS) != 1
