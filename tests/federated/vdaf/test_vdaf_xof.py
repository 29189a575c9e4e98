"""The XOFs: RFC 9861's TurboSHAKE128 vector and digests of the draft's XOF test vectors."""

from __future__ import annotations

import hashlib

import pytest

from privhist.core.errors import ValidationError
from privhist.federated.vdaf.field import Field64, Field128
from privhist.federated.vdaf.xof import Xof, XofFixedKeyAes128, XofTurboShake128, turboshake128

# SHA-256 of derived_seed + expanded_vec_field128 (hex) in the draft's test_vec/<name>.json
# (seed bytes i % 256, dst b"domain separation tag", binder b"binder string", 40 elements)
DIGESTS = {
    XofTurboShake128: "19f95a2a4d1b356b0a7f4e9184ee026a32125655b50318d8f70f7aff1ded0970",
    XofFixedKeyAes128: "fa262220d6b286fd16326972de7cb01c8c5211a59b4f868d55112c8b3e333ec9",
}


def test_turboshake128_rfc9861_empty_message() -> None:
    # RFC 9861, Section 5: TurboSHAKE128(M = empty, D = 0x1F, 32)
    expect = "1e415f1c5983aff2169217277d17bb538cd945a397ddec541f1ce41af2c1b74c"
    assert turboshake128(b"", 0x1F, 32).hex() == expect


@pytest.mark.parametrize("cls", [XofTurboShake128, XofFixedKeyAes128])
def test_draft_xof_vectors(cls: type[Xof]) -> None:
    seed = bytes(i % 256 for i in range(cls.SEED_SIZE))
    dst, binder = b"domain separation tag", b"binder string"
    derived = cls.derive_seed(seed, dst, binder).hex()
    vec = cls.expand_into_vec(Field128, seed, dst, binder, 40).encode().hex()
    assert hashlib.sha256((derived + vec).encode()).hexdigest() == DIGESTS[cls]
    assert hashlib.sha256((derived + vec[:-2] + "00").encode()).hexdigest() != DIGESTS[cls]


@pytest.mark.parametrize("cls", [XofTurboShake128, XofFixedKeyAes128])
def test_stream_is_continuous(cls: type[Xof]) -> None:
    seed = bytes(cls.SEED_SIZE)
    x = cls(seed, b"d", b"b")
    parts = x.next(5) + x.next(27) + x.next(1) + x.next(100)
    assert parts == cls(seed, b"d", b"b").next(133)


def test_rejection_sampling_keeps_only_field_elements() -> None:
    class Ones(Xof):
        """A stream of 0xff bytes then zeros: every first candidate overflows."""

        SEED_SIZE = 1

        def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
            self.pos = 0

        def next(self, length: int) -> bytes:
            out = bytes(0xFF if self.pos + i < 16 else 7 for i in range(length))
            self.pos += length
            return out

    v = Ones(b"", b"", b"").next_vec(Field64, 3)
    assert v.to_ints() == [int.from_bytes(bytes([7] * 8), "little")] * 3


def test_seed_lengths_are_checked() -> None:
    with pytest.raises(ValidationError):
        XofFixedKeyAes128(bytes(15), b"", b"")
    with pytest.raises(ValidationError):
        XofTurboShake128(bytes(256), b"", b"")
