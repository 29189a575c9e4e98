"""Primitives of the secure aggregation protocol: field prime, Shamir, mask PRG, AEAD, messages."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist.core.errors import ProtocolError
from privhist.core.random import SeededRandom
from privhist.federated.secagg import crypto, shamir
from privhist.federated.secagg.messages import (
    Message,
    decode,
    pack_vector,
    unpack_vector,
)


def _probably_prime(n: int) -> bool:
    if n % 2 == 0:
        return n == 2
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71):
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def test_field_is_the_smallest_prime_above_2_256() -> None:
    assert shamir.PRIME > 1 << 256
    assert _probably_prime(shamir.PRIME)
    assert not any(_probably_prime(c) for c in range((1 << 256) + 1, shamir.PRIME))


def test_shamir_any_t_shares_reconstruct_and_fewer_do_not() -> None:
    rng = SeededRandom(5)
    secret = rng.randbelow(1 << 256)
    xs = list(range(1, 8))
    t = 4
    shares = shamir.split(secret, t, xs, rng)
    pts = list(zip(xs, shares, strict=True))
    for start in range(4):
        subset = pts[start : start + t]
        assert shamir.reconstruct(subset, t) == secret
    with pytest.raises(ProtocolError):
        shamir.reconstruct(pts[: t - 1], t)
    # a wrong share among t gives another value: reconstruction does not verify, the protocol
    # checks a reconstructed key against its advertised public key
    forged = [*pts[: t - 1], (pts[t - 1][0], (pts[t - 1][1] + 1) % shamir.PRIME)]
    assert shamir.reconstruct(forged, t) != secret


def _share_cells(
    secret: int, t: int, bits: int, rng: SeededRandom, coefficient_bits: int | None
) -> list[int]:
    """Joint top-bit cells of the first t - 1 shares; ``coefficient_bits`` draws the polynomial's
    coefficients below 2**coefficient_bits instead of on the whole field (a broken sharer)."""
    cells = []
    for _ in range(6000):
        if coefficient_bits is None:
            shares = shamir.split(secret, t, list(range(1, t + 1)), rng)[: t - 1]
        else:
            coeffs = [secret] + [rng.randbelow(1 << coefficient_bits) for _ in range(t - 1)]
            shares = [
                sum(c * x**i for i, c in enumerate(coeffs)) % shamir.PRIME for x in range(1, t)
            ]
        cell = 0
        for y in shares:
            cell = (cell << bits) | min(y >> (256 - bits), (1 << bits) - 1)
        cells.append(cell)
    return cells


def _share_cell_law(t: int, bits: int) -> np.ndarray:
    # the top bits of a uniform field element: 2**(256 - bits) values per cell, the last
    # cell also holding the 297 elements at or above 2**256
    per = np.full(1 << bits, float(1 << (256 - bits)))
    per[-1] = shamir.PRIME - ((1 << bits) - 1) * (1 << (256 - bits))
    p1 = per / shamir.PRIME
    p = p1
    for _ in range(t - 2):
        p = np.outer(p, p1).reshape(-1)
    return p / p.sum()


@pytest.mark.parametrize("t", [2, 3])
def test_shamir_t_minus_1_shares_are_uniform_whatever_the_secret(t: int) -> None:
    # perfect secrecy: the t - 1 shares a coalition holds are jointly uniform on the field for
    # every secret; their top bits (jointly binned) are tested for secrets 0 and 2**256 - 1
    rng = SeededRandom(11)
    bits = 8 if t == 2 else 4
    law = _share_cell_law(t, bits)
    for secret in (0, (1 << 256) - 1):
        counts = np.bincount(
            np.asarray(_share_cells(secret, t, bits, rng, None)), minlength=law.size
        )
        assert stats.chisquare(counts, law * counts.sum()).pvalue > ALPHA


def test_power_shares_of_a_sharer_with_short_coefficients_are_rejected() -> None:
    # coefficients below 2**250 leave the top bits of the shares near those of the secret
    rng = SeededRandom(12)
    law = _share_cell_law(2, 8)
    counts = np.bincount(np.asarray(_share_cells(0, 2, 8, rng, 250)), minlength=law.size)
    assert stats.chisquare(counts, law * counts.sum()).pvalue < ALPHA


def _biased(seed: bytes, q: int, n: int) -> np.ndarray:
    """The rejected design: w-bit words reduced mod q (modulo bias)."""
    w = max(1, (q - 1).bit_length())
    words = crypto.prg_words(seed, n) & np.uint64((1 << w) - 1)
    return (words % np.uint64(q)).astype(np.int64)


def _binned(values: np.ndarray, q: int, bins: int) -> np.ndarray:
    if q <= bins:
        return np.bincount(values, minlength=q)
    idx = (values.astype(object) * bins // q).astype(np.int64) if q > 1 << 53 else None
    if idx is None:
        idx = (values.astype(np.float64) * bins / q).astype(np.int64)
    return np.bincount(np.minimum(idx, bins - 1), minlength=bins)


def _expected(q: int, bins: int) -> np.ndarray:
    """Exact bin probabilities of the uniform law on [0, q) under _binned."""
    if q <= bins:
        return np.full(q, 1.0 / q)
    edges = [-(-(b * q) // bins) for b in range(bins + 1)]  # first value in each bin
    return np.diff(np.asarray(edges, dtype=np.float64)) / q


@pytest.mark.parametrize("q", [2, 3, 7, 10, 64001, (1 << 40) + 15, 3 << 60, 1 << 62])
def test_mask_prg_is_uniform_mod_q(q: int) -> None:
    n, bins = 120_000, 64
    values = crypto.prg_uniform(b"\x07" * 32, q, n)
    assert values.min() >= 0 and values.max() < q
    counts = _binned(values, q, bins)
    exp = _expected(q, bins) * n
    assert stats.chisquare(counts, exp).pvalue > ALPHA


@pytest.mark.parametrize("q", [3, 3 << 60])
def test_power_the_modulo_biased_variant_is_rejected(q: int) -> None:
    n, bins = 120_000, 64
    values = _biased(b"\x07" * 32, q, n)
    counts = _binned(values, q, bins)
    exp = _expected(q, bins) * n
    assert stats.chisquare(counts, exp).pvalue < ALPHA


def test_mask_prg_is_a_function_of_its_seed() -> None:
    a = crypto.prg_uniform(b"\x01" * 32, 1001, 5000)
    assert np.array_equal(a, crypto.prg_uniform(b"\x01" * 32, 1001, 5000))
    assert not np.array_equal(a, crypto.prg_uniform(b"\x02" * 32, 1001, 5000))
    with pytest.raises(Exception, match="modulus"):
        crypto.prg_uniform(b"\x01" * 32, 1, 5)


@pytest.mark.parametrize("q", [2, 1001, 1 << 32, (1 << 40) + 15, 3 << 60, 1 << 62])
def test_the_batched_mask_prg_gives_each_seeds_own_masks(q: int) -> None:
    seeds = [bytes([i]) * 32 for i in range(1, 40)]
    rows = crypto.prg_uniform_many(seeds, q, 300)
    assert rows.shape == (39, 300)
    for seed, row in zip(seeds, rows, strict=True):
        assert row.tolist() == crypto.prg_uniform(seed, q, 300).tolist()
    assert crypto.prg_uniform_many([], q, 5).shape == (0, 5)


def test_the_batched_mask_prg_reads_on_when_a_row_runs_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a first pass of one word leaves (nearly) every row short: each continues its own stream
    monkeypatch.setattr(crypto, "first_batch", lambda size, accept: 1)
    seeds = [bytes([i]) * 32 for i in range(1, 20)]
    rows = crypto.prg_uniform_many(seeds, 1001, 50)
    assert [r.tolist() for r in rows] == [crypto.prg_uniform(s, 1001, 50).tolist() for s in seeds]


@pytest.mark.parametrize("t", [2, 19, 60])
def test_shares_dealt_together_lie_on_their_own_polynomials(t: int) -> None:
    rng = SeededRandom(t)
    xs = sorted({rng.randbelow(1 << 20) + 1 for _ in range(t + 6)})
    secrets = [rng.randbelow(shamir.PRIME) for _ in range(3)] + [shamir.PRIME - 1]
    rows = shamir.split_many(secrets, t, xs, rng)
    weights = shamir.Weights(xs)
    challenge = rng.randbelow(shamir.PRIME)
    for secret, ys in zip(secrets, rows, strict=True):
        assert all(0 <= y < shamir.PRIME for y in ys)
        assert weights.consistent(ys, t, challenge)  # degree < t: no lane spilled
        if t > 2:
            assert not weights.consistent(ys, t - 1, challenge)
        pts = list(zip(xs, ys, strict=True))
        assert shamir.reconstruct(pts[-t:], t) == secret
        assert shamir.reconstruct(pts[:t], t) == secret


def test_interpolation_denominators_match_their_definition() -> None:
    import math

    rng = SeededRandom(8)
    for m in (1, 3, 4, 37, 90):
        for top in (50, 1 << 20, 1 << 40):
            xs = sorted({rng.randbelow(top) + 1 for _ in range(m)})
            want = [x * math.prod([x - z for z in xs if z != x]) % shamir.PRIME for x in xs]
            assert shamir._denominators(xs) == want


def test_agreement_and_authenticated_encryption() -> None:
    rng = SeededRandom(2)
    a, b = crypto.KeyPair(rng), crypto.KeyPair(rng)
    k_ab = crypto.encryption_key(a.private_bytes, b.public_bytes, 9)
    assert k_ab == crypto.encryption_key(b.private_bytes, a.public_bytes, 9)
    assert k_ab != crypto.encryption_key(b.private_bytes, a.public_bytes, 10)  # bound to round
    assert k_ab != crypto.mask_key(a.private_bytes, b.public_bytes, 9)  # bound to purpose
    ct = crypto.encrypt(k_ab, b"share", b"ad", rng)
    assert crypto.decrypt(k_ab, ct, b"ad") == b"share"
    bad = bytearray(ct)
    bad[-1] ^= 1
    for blob, ad in ((bytes(bad), b"ad"), (ct, b"other"), (ct[:20], b"ad")):
        with pytest.raises(ProtocolError):
            crypto.decrypt(k_ab, blob, ad)
    with pytest.raises(ProtocolError):
        crypto.agree(a.private_bytes, bytes(32), b"x", 0)  # low-order point


def _advertise() -> dict[str, object]:
    rng = SeededRandom(3)
    msg = Message("advertise", 4, 2, {"c_pk": crypto.random_bytes(rng, 32), "s_pk": bytes(32)})
    out: dict[str, object] = json.loads(msg.encode())
    return out


def test_messages_round_trip_and_reject_malformed() -> None:
    obj = _advertise()
    ok = decode(json.dumps(obj).encode())
    assert ok.type == "advertise" and ok.round == 4 and ok.sender == 2
    bad_variants = [
        b"\x80not json",
        b"[1, 2]",
        json.dumps({**obj, "v": 1}).encode(),  # an older version
        b"[" * 500 + b"]" * 500,  # nested deeper than MAX_DEPTH
        json.dumps({**obj, "type": "nope"}).encode(),
        json.dumps({**obj, "extra": 1}).encode(),
        json.dumps({k: v for k, v in obj.items() if k != "s_pk"}).encode(),
        json.dumps({**obj, "c_pk": base64.b64encode(bytes(31)).decode()}).encode(),
        json.dumps({**obj, "c_pk": "!!!not base64!!!"}).encode(),
        json.dumps({**obj, "round": -1}).encode(),
        json.dumps({**obj, "sender": True}).encode(),
        json.dumps({**obj, "sender": 1 << 40}).encode(),
    ]
    for data in bad_variants:
        with pytest.raises(ProtocolError):
            decode(data)
    with pytest.raises(ProtocolError, match="exceeds"):
        decode(json.dumps(obj).encode(), max_bytes=50)


@pytest.mark.parametrize("q", [2, 255, 256, 257, 1 << 62])
def test_vector_packing_checks_length_and_range(q: int) -> None:
    v = SeededRandom(1).uniform_below(q, 50)
    data = pack_vector(v, q)
    assert np.array_equal(unpack_vector(data, q, 50), v)
    with pytest.raises(ProtocolError, match="bytes"):
        unpack_vector(data[:-1], q, 50)
    with pytest.raises(ProtocolError, match="bytes"):
        unpack_vector(data, q, 49)
    too_big = pack_vector(np.full(50, q - 1), q)
    if q & (q - 1):  # q not a power of two: q itself fits the width and must be refused
        w = len(too_big) // 50
        raw = bytearray(too_big)
        raw[:w] = q.to_bytes(w, "little")
        with pytest.raises(ProtocolError, match="outside"):
            unpack_vector(bytes(raw), q, 50)
