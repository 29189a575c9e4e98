"""Prio3 end to end in process: correct sums, malicious reports rejected, typed errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.vdaf.prio3 import (
    HelperShare,
    LeaderShare,
    Prio3,
    prio3_count,
    prio3_histogram,
    prio3_multihot_count_vec,
    prio3_sum,
    prio3_sum_vec,
)

CTX = b"privhist tests"
KEY = bytes(range(32))


def _verify(vdaf: Prio3[Any, Any], nonce: bytes, public: Any, shares: list[Any]) -> Any:
    """Run verification; the output shares, or None when the report is rejected."""
    try:
        inits = [vdaf.verify_init(KEY, CTX, j, nonce, public, s) for j, s in enumerate(shares)]
        msg = vdaf.verifier_shares_to_message(CTX, [vs for _, vs in inits])
        return [vdaf.verify_next(st, msg) for st, _ in inits]
    except ProtocolError:
        return None


def _aggregate(vdaf: Prio3[Any, Any], measurements: list[Any], seed: int) -> Any:
    rng = SeededRandom(seed)
    aggs = [vdaf.agg_init() for _ in range(vdaf.SHARES)]
    for m in measurements:
        nonce, public, shares = vdaf.shard_random(CTX, m, rng)
        outs = _verify(vdaf, nonce, public, shares)
        assert outs is not None, m
        aggs = [vdaf.agg_update(a, o) for a, o in zip(aggs, outs, strict=True)]
    return vdaf.unshard(aggs, len(measurements))


@pytest.mark.parametrize("shares", [2, 3])
def test_each_variant_sums_valid_measurements(shares: int) -> None:
    assert _aggregate(prio3_count(shares), [0, 1, 1, 0, 1], 1) == 3
    assert _aggregate(prio3_sum(shares, 1000), [0, 999, 1000, 17], 2) == 2016
    vec = prio3_sum_vec(shares, 3, 7, 2)
    assert _aggregate(vec, [[1, 2, 3], [7, 0, 7]], 3) == [8, 2, 10]
    hist = prio3_histogram(shares, 10, 3)
    data = [0, 9, 9, 4, 4, 4]
    assert _aggregate(hist, data, 4) == np.bincount(data, minlength=10).tolist()
    mh = prio3_multihot_count_vec(shares, 5, 2, 2)
    rows = [[True, False, False, False, True], [False] * 5, [False, False, True, True, False]]
    assert _aggregate(mh, rows, 5) == [1, 0, 1, 1, 1]


def _malicious(vdaf: Prio3[Any, Any], encoded: list[int], seed: int) -> Any:
    rng = SeededRandom(seed)
    nonce = rng.uint64(2).tobytes()
    rand = rng.uint64(vdaf.RAND_SIZE // 8).tobytes()
    public, shares = vdaf.shard_encoded(CTX, vdaf.field.from_ints(encoded), nonce, rand)
    return _verify(vdaf, nonce, public, shares)


@pytest.mark.parametrize(
    "encoded",
    [
        [2, 0, 0, 0, 0, 0, 0, 0],  # a count of 2
        [1, 1, 0, 0, 0, 0, 0, 0],  # two buckets
        [0, 0, 0, 0, 0, 0, 0, 0],  # none
        [1, 1, -1, 0, 0, 0, 0, 0],  # sums to one, not 0/1
        [10**6, 0, 0, 0, 0, 0, 0, 1 - 10**6],  # a million in one bucket, sum one
    ],
)
def test_invalid_histogram_contributions_are_rejected(encoded: list[int]) -> None:
    vdaf = prio3_histogram(2, 8, 3)
    for seed in range(3):
        assert _malicious(vdaf, encoded, seed) is None
    # power check: the same path accepts a one-hot vector
    assert _malicious(vdaf, [0, 0, 1, 0, 0, 0, 0, 0], 9) is not None


def test_invalid_count_sum_and_multihot_rejected() -> None:
    assert _malicious(prio3_count(2), [2], 1) is None
    assert _malicious(prio3_count(2), [1], 1) is not None
    s = prio3_sum(2, 5)  # bits 3, weights 1, 2, 2
    assert _malicious(s, [1, 1, 2], 1) is None
    assert _malicious(s, [1, 1, 1], 1) is not None
    mh = prio3_multihot_count_vec(2, 4, 1, 2)  # weight bits 1
    assert _malicious(mh, [1, 1, 0, 0, 1], 1) is None  # claims weight 1, holds 2
    assert _malicious(mh, [1, 0, 0, 0, 1], 1) is not None


def test_tampered_shares_are_rejected() -> None:
    vdaf = prio3_histogram(2, 6, 2)
    nonce, public, shares = vdaf.shard_random(CTX, 3, SeededRandom(3))
    leader, helper = shares
    assert isinstance(leader, LeaderShare) and isinstance(helper, HelperShare)
    meas = leader.meas.copy()
    meas[0] = meas[0] + 1
    assert (
        _verify(vdaf, nonce, public, [LeaderShare(meas, leader.proofs, leader.blind), helper])
        is None
    )
    seed = bytes([helper.seed[0] ^ 1]) + helper.seed[1:]
    assert _verify(vdaf, nonce, public, [leader, HelperShare(seed, helper.blind)]) is None
    other = bytes(16)
    assert _verify(vdaf, other, public, shares) is None  # another nonce
    assert _verify(vdaf, nonce, public, shares) is not None


def test_encodings_round_trip_and_refuse_wrong_lengths() -> None:
    vdaf = prio3_histogram(2, 5, 2)
    _nonce, public, shares = vdaf.shard_random(CTX, 1, SeededRandom(4))
    for j, s in enumerate(shares):
        data = vdaf.encode_input_share(s)
        assert len(data) == vdaf.input_share_size(j)
        assert vdaf.encode_input_share(vdaf.decode_input_share(j, data)) == data
        with pytest.raises(ProtocolError):
            vdaf.decode_input_share(j, data + b"\x00")
    enc = vdaf.encode_public_share(public)
    assert vdaf.decode_public_share(enc) == public
    with pytest.raises(ProtocolError):
        vdaf.decode_public_share(enc[:-1])
    # upload = nonce + public share + input shares (draft Section 7.2.6)
    assert vdaf.upload_size() == 16 + len(enc) + sum(
        len(vdaf.encode_input_share(s)) for s in shares
    )


def test_client_side_validation_is_typed() -> None:
    with pytest.raises(ValidationError):
        prio3_histogram(2, 4, 2).shard_random(CTX, 4)
    with pytest.raises(ValidationError):
        prio3_count(2).shard_random(CTX, 2)
    with pytest.raises(ValidationError):
        prio3_sum(2, 10).shard_random(CTX, 11)
    with pytest.raises(ValidationError):
        prio3_multihot_count_vec(2, 3, 1, 2).shard_random(CTX, [True, True, False])
    with pytest.raises(ValidationError):
        prio3_histogram(1, 4, 2)
    with pytest.raises(ValidationError):
        prio3_histogram(2, 4, 2).shard(CTX, 1, bytes(15), bytes(128))


@pytest.mark.parametrize(
    ("vdaf", "measure"),
    [
        (prio3_histogram(2, 10, 3), lambda i: i % 10),
        (prio3_count(3), lambda i: i % 2),
        (prio3_sum(2, 100), lambda i: i),
        (prio3_sum_vec(2, 4, 7, 3), lambda i: [i % 8] * 4),
        (
            prio3_multihot_count_vec(2, 6, 2, 2),
            lambda i: [True, False, False, False, False, i % 2 == 0],
        ),
    ],
)
def test_batched_verification_equals_one_at_a_time(vdaf: Prio3[Any, Any], measure: Any) -> None:
    rng = SeededRandom(21)
    reports = [vdaf.shard_random(CTX, measure(i), rng) for i in range(9)]
    bad = vdaf.field.zeros(vdaf.flp.MEAS_LEN)
    bad[0] = bad[0] + 2  # an invalid report in the middle of the batch
    nonce = reports[4][0]
    reports[4] = (nonce, *vdaf.shard_encoded(CTX, bad, nonce, bytes(vdaf.RAND_SIZE)))
    one_shares = []
    for j in range(vdaf.SHARES):
        single = [vdaf.verify_init(KEY, CTX, j, n, p, s[j]) for n, p, s in reports]
        many = vdaf.verify_init_many(KEY, CTX, j, [(n, p, s[j]) for n, p, s in reports])
        for a, b in zip(single, many, strict=True):
            assert isinstance(b, tuple)
            assert a[0] == b[0]
            assert vdaf.encode_verifier_share(a[1]) == vdaf.encode_verifier_share(b[1])
        one_shares.append([vs for _, vs in single])
    per_report = [[one_shares[j][r] for j in range(vdaf.SHARES)] for r in range(9)]
    many_msgs = vdaf.verifier_shares_to_message_many(CTX, per_report)
    for r, shares in enumerate(per_report):
        if r == 4:
            with pytest.raises(ProtocolError):
                vdaf.verifier_shares_to_message(CTX, shares)
            assert isinstance(many_msgs[r], ProtocolError)
        else:
            assert many_msgs[r] == vdaf.verifier_shares_to_message(CTX, shares)


def test_batched_verification_falls_back_for_rejection_sampling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report whose XOF candidates include a value >= p (rejection sampling, about 2**-60
    per element) is redone by the one-report path; the results are unchanged."""
    vdaf = prio3_histogram(2, 6, 2)
    rng = SeededRandom(5)
    reports = [vdaf.shard_random(CTX, i % 6, rng) for i in range(4)]
    expected = [vdaf.verify_init(KEY, CTX, 1, n, p, s[1]) for n, p, s in reports]
    real = Prio3._xof_bytes
    hit = []

    def overflowing(self: Any, seed: bytes, usage: int, ctx: bytes, binder: bytes, n: int) -> bytes:
        out = real(self, seed, usage, ctx, binder, n)
        if binder.endswith(reports[2][0]):  # the query randomness of report 2
            hit.append(1)
            return b"\xff" * 16 + out[16:]
        return out

    monkeypatch.setattr(Prio3, "_xof_bytes", overflowing)
    got = vdaf.verify_init_many(KEY, CTX, 1, [(n, p, s[1]) for n, p, s in reports])
    assert hit
    for a, b in zip(expected, got, strict=True):
        assert isinstance(b, tuple)
        assert a[0] == b[0]
        assert vdaf.encode_verifier_share(a[1]) == vdaf.encode_verifier_share(b[1])
