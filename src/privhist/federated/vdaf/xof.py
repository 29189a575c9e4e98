"""Extendable output functions of draft-irtf-cfrg-vdaf-20, Section 6.2.

* :class:`XofTurboShake128` (Section 6.2.1): TurboSHAKE128 (RFC 9861) with domain byte 1 over
  ``len(dst) as 2 LE bytes || dst || len(seed) as 1 byte || seed || binder``. The output stream
  is the tail of the regenerated prefix on every ``next``, as the draft writes it (Prio3 reads
  each instance once). TurboSHAKE128 is pycryptodome's C implementation.
* :class:`XofFixedKeyAes128` (Section 6.2.2): a fixed AES-128 key derived by TurboSHAKE128
  (domain byte 2) from ``dst`` and ``binder``; output block ``i`` is the circular
  correlation-robust hash ``AES(k, s(x)) xor s(x)`` of ``x = seed xor LE128(i)``, with
  ``s(lo || hi) = hi || (hi xor lo)`` (Guo et al. 2020, Section 4.2).

Both derive field vectors by rejection sampling (:meth:`Xof.next_vec`): ``ENCODED_SIZE`` bytes
at a time, read as a little-endian integer, kept if below the modulus. Both fields use every bit
of their encoding (``8 * ENCODED_SIZE == MODULUS.bit_length()``), so the draft's mask
``next_power_of_2(MODULUS) - 1`` changes nothing. Candidates are drawn in whole batches of the
number still missing, which consumes exactly the bytes the draft's one-at-a-time loop consumes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

import numpy as np
from Crypto.Hash import TurboSHAKE128
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from privhist.core.errors import ValidationError
from privhist.federated.vdaf.field import FieldVec

V = TypeVar("V", bound=FieldVec)


def _turboshake128_public(message: bytes, domain: int, length: int) -> bytes:
    h = TurboSHAKE128.new(domain=domain, data=message)
    return bytes(h.read(length))


def _oneshot_function() -> Callable[[bytes, int, int], bytes] | None:
    """pycryptodome's one-call Keccak (``keccak_oneshot`` with 12 rounds and the domain byte as
    padding: TurboSHAKE128), half the per-call cost of its ``TurboSHAKE128`` object. It is an
    internal interface, so it is used only if it imports and agrees with the public one."""
    try:
        from Crypto.Hash.keccak import _raw_keccak_lib
        from Crypto.Util._raw_api import (
            c_size_t,
            c_ubyte,
            c_uint8_ptr,
            create_output_buffer,
            get_raw_buffer,
        )
    except (ImportError, AttributeError):
        return None

    def oneshot(message: bytes, domain: int, length: int) -> bytes:
        out = create_output_buffer(length)
        err = _raw_keccak_lib.keccak_oneshot(
            c_uint8_ptr(message),
            c_size_t(len(message)),
            out,
            c_size_t(length),
            c_size_t(32),
            c_ubyte(12),
            c_ubyte(domain),
        )
        if err:
            raise ValueError(f"keccak_oneshot failed ({err})")
        return bytes(get_raw_buffer(out))

    try:
        for m, d, n in ((b"", 1, 32), (bytes(range(200)), 1, 500), (b"x" * 170, 2, 16)):
            if oneshot(m, d, n) != _turboshake128_public(m, d, n):
                return None
    except (ValueError, TypeError, AttributeError):
        return None
    return oneshot


_ONESHOT = _oneshot_function()


def turboshake128(message: bytes, domain: int, length: int) -> bytes:
    """``TurboSHAKE128(M, D, L)`` of RFC 9861, Section 2.1 (pycryptodome's C Keccak)."""
    if length <= 0:
        return b""
    if _ONESHOT is not None:
        return _ONESHOT(message, domain, length)
    return _turboshake128_public(message, domain, length)


class Xof:
    """The XOF interface of the draft (Section 6.2)."""

    SEED_SIZE: ClassVar[int]

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        raise NotImplementedError

    def next(self, length: int) -> bytes:
        raise NotImplementedError

    def next_vec(self, field: type[V], length: int) -> V:
        """The next ``length`` field elements, by rejection sampling (draft ``next_vec``)."""
        size = field.ENCODED_SIZE
        parts: list[V] = []
        need = length
        while need > 0:
            cand = field._from_le_bytes(self.next(need * size), need)
            ok = field._canonical(cand.v)
            parts.append(cand[ok])
            need -= int(ok.sum())
        if not parts:
            return field.zeros(0)
        return parts[0] if len(parts) == 1 else field.concat(parts)

    @classmethod
    def derive_seed(cls, seed: bytes, dst: bytes, binder: bytes) -> bytes:
        return cls(seed, dst, binder).next(cls.SEED_SIZE)

    @classmethod
    def expand_into_vec(
        cls, field: type[V], seed: bytes, dst: bytes, binder: bytes, length: int
    ) -> V:
        return cls(seed, dst, binder).next_vec(field, length)


class XofTurboShake128(Xof):
    """XofTurboShake128 (draft Section 6.2.1); seeds of 32 bytes by default, at most 255."""

    SEED_SIZE = 32

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        if len(seed) > 255:
            raise ValidationError("seed", "XofTurboShake128", "at most 255 bytes", len(seed))
        if len(dst) > 65535:
            raise ValidationError("dst", "XofTurboShake128", "at most 65535 bytes", len(dst))
        self._m = len(dst).to_bytes(2, "little") + dst + bytes([len(seed)]) + seed + binder
        self._consumed = 0

    def next(self, length: int) -> bytes:
        # as the draft writes it: the stream's next ``length`` bytes are the tail of
        # TurboSHAKE128(M, 1, consumed + length) (each call regenerates the prefix; Prio3 reads
        # each instance once, so this costs one Keccak call per XOF)
        if length <= 0:
            return b""
        self._consumed += length
        return turboshake128(self._m, 1, self._consumed)[-length:]


class XofFixedKeyAes128(Xof):
    """XofFixedKeyAes128 (draft Section 6.2.2): 16-byte seeds; meant for Poplar1's IDPF."""

    SEED_SIZE = 16

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        if len(seed) != self.SEED_SIZE:
            raise ValidationError("seed", "XofFixedKeyAes128", "16 bytes", len(seed))
        if len(dst) > 65535:
            raise ValidationError("dst", "XofFixedKeyAes128", "at most 65535 bytes", len(dst))
        key = turboshake128(len(dst).to_bytes(2, "little") + dst + binder, 2, 16)
        self._aes = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        self._seed = np.frombuffer(seed, dtype="<u8").astype(np.uint64)
        self._consumed = 0

    def next(self, length: int) -> bytes:
        offset = self._consumed % 16
        end = self._consumed + length
        first, last = self._consumed // 16, end // 16  # blocks first..last inclusive
        self._consumed = end
        idx = np.arange(first, last + 1, dtype=np.uint64)
        blocks = np.empty((idx.size, 2), dtype=np.uint64)
        blocks[:, 0] = self._seed[0] ^ idx  # LE128(i) has i in the low word (i < 2**64)
        blocks[:, 1] = self._seed[1]
        lo, hi = blocks[:, 0], blocks[:, 1]
        sigma = np.stack([hi, hi ^ lo], axis=1).astype("<u8")
        enc = np.frombuffer(self._aes.update(sigma.tobytes()), dtype="<u8").reshape(-1, 2)
        out = bytes((enc ^ sigma).astype("<u8").tobytes())
        return out[offset : offset + length]
