"""Prio3 end to end in process: correct sums, malicious reports rejected, typed errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.vdaf.field import Field128
from privhist.federated.vdaf.flp import Flp, PolyEval, Valid
from privhist.federated.vdaf.prio3 import (
    HelperShare,
    LeaderShare,
    Prio3,
    prio3_count,
    prio3_higher_degree,
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
@pytest.mark.parametrize("stacked", [None, True])
def test_batched_verification_equals_one_at_a_time(
    vdaf: Prio3[Any, Any], measure: Any, stacked: bool | None
) -> None:
    """The one-report path (Python integers) against the batch, both by default (report by
    report) and stacked (one NumPy query on all reports: an independent implementation)."""
    rng = SeededRandom(21)
    reports = [vdaf.shard_random(CTX, measure(i), rng) for i in range(9)]
    bad = vdaf.field.zeros(vdaf.flp.MEAS_LEN)
    bad[0] = bad[0] + 2  # an invalid report in the middle of the batch
    nonce = reports[4][0]
    reports[4] = (nonce, *vdaf.shard_encoded(CTX, bad, nonce, bytes(vdaf.RAND_SIZE)))
    one_shares = []
    for j in range(vdaf.SHARES):
        single = [vdaf.verify_init(KEY, CTX, j, n, p, s[j]) for n, p, s in reports]
        batch = [(n, p, s[j]) for n, p, s in reports]
        many = vdaf.verify_init_many(KEY, CTX, j, batch, stacked=stacked)
        for a, b in zip(single, many, strict=True):
            assert isinstance(b, tuple)
            assert a[0] == b[0]
            assert vdaf.encode_verifier_share(a[1]) == vdaf.encode_verifier_share(b[1])
        one_shares.append([vs for _, vs in single])
    per_report = [[one_shares[j][r] for j in range(vdaf.SHARES)] for r in range(9)]
    many_msgs = vdaf.verifier_shares_to_message_many(CTX, per_report, stacked=stacked)
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
    got = vdaf.verify_init_many(KEY, CTX, 1, [(n, p, s[1]) for n, p, s in reports], stacked=True)
    assert hit
    for a, b in zip(expected, got, strict=True):
        assert isinstance(b, tuple)
        assert a[0] == b[0]
        assert vdaf.encode_verifier_share(a[1]) == vdaf.encode_verifier_share(b[1])


@pytest.mark.parametrize(
    "vdaf",
    [
        prio3_count(2),
        prio3_sum(3, 1000),
        prio3_sum_vec(2, 5, 3, 4),
        prio3_histogram(2, 10, 3),
        prio3_histogram(2, 100, 10),
        prio3_multihot_count_vec(2, 7, 3, 3),
        prio3_higher_degree(2),
    ],
    ids=lambda v: f"{v.name}-{v.flp.MEAS_LEN}",
)
def test_integer_query_equals_the_array_query(vdaf: Prio3[Any, Any]) -> None:
    """Flp.query_ints / decide_ints against the NumPy Flp.query / decide on random shares
    (valid proofs and arbitrary field elements alike), for every circuit."""
    flp, field = vdaf.flp, vdaf.field
    rng = np.random.default_rng(3)

    def rand(n: int) -> list[int]:
        return [int.from_bytes(rng.bytes(16), "little") % field.MODULUS for _ in range(n)]

    for trial in range(6):
        if trial < 3:  # a real report's shares
            _, _, shares = vdaf.shard_random(CTX, _valid_measurement(vdaf), SeededRandom(trial))
            share = shares[0]
            assert isinstance(share, LeaderShare)
            meas, proof = share.meas.to_ints(), share.proofs.to_ints()
        else:
            meas, proof = rand(flp.MEAS_LEN), rand(flp.PROOF_LEN)
        query, joint = rand(flp.QUERY_RAND_LEN), rand(flp.JOINT_RAND_LEN)
        for shares_n in (1, vdaf.SHARES):
            got = flp.query_ints(meas, proof, query, joint, shares_n)
            want = flp.query(
                field.from_ints(meas),
                field.from_ints(proof),
                field.from_ints(query),
                field.from_ints(joint) if joint else field.zeros(0),
                shares_n,
            )
            assert got == want.to_ints()
            assert flp.decide_ints(got) == flp.decide(want)
    # a report's summed verifier decides the same way in both, and accepts
    nonce, public, shares = vdaf.shard_random(CTX, _valid_measurement(vdaf), SeededRandom(9))
    vs = [vdaf.verify_init(KEY, CTX, j, nonce, public, s)[1] for j, s in enumerate(shares)]
    total = vs[0].verifiers
    for v in vs[1:]:
        total = total + v.verifiers
    assert flp.decide(total) and flp.decide_ints(total.to_ints())


def _valid_measurement(vdaf: Prio3[Any, Any]) -> Any:
    return {
        "Prio3Count": 1,
        "Prio3Sum": 7,
        "Prio3SumVec": [1, 0, 3, 2, 1],
        "Prio3Histogram": 3,
        "Prio3MultihotCountVec": [True, False, True, False, False, False, True],
        "Prio3HigherDegree": 2,
    }[vdaf.name]


def test_a_test_point_at_a_root_of_unity_aborts_in_both_queries() -> None:
    vdaf = prio3_histogram(2, 10, 3)
    flp, field = vdaf.flp, vdaf.field
    _, _, shares = vdaf.shard_random(CTX, 2, SeededRandom(1))
    share = shares[0]
    assert isinstance(share, LeaderShare)
    meas, proof = share.meas.to_ints(), share.proofs.to_ints()
    joint = [5] * flp.JOINT_RAND_LEN
    p_len = 8  # next_power_of_2(1 + 4 calls)
    root = pow(field.nth_root(p_len), 3, field.MODULUS)
    query = [11, 12, root]
    with pytest.raises(ProtocolError):
        flp.query_ints(meas, proof, query, joint, 2)
    with pytest.raises(ProtocolError):
        flp.query(
            field.from_ints(meas),
            field.from_ints(proof),
            field.from_ints(query),
            field.from_ints(joint),
            2,
        )
    # a 16th root that is not an 8th root is a valid point for both
    odd = pow(field.nth_root(2 * p_len), 3, field.MODULUS)
    got = flp.query_ints(meas, proof, [11, 12, odd], joint, 2)
    want = flp.query(
        field.from_ints(meas),
        field.from_ints(proof),
        field.from_ints([11, 12, odd]),
        field.from_ints(joint),
        2,
    )
    assert got == want.to_ints()


class _CubicTwice(Valid[int, int]):
    """A test circuit whose gadget polynomial has 4P values (degree 3, two calls: P = 4, 10
    values, 16 after extension), so the integer query takes its general Lagrange branch."""

    NAME = "CubicTwice"

    def __init__(self) -> None:
        self.field = Field128
        self.GADGETS = [PolyEval([0, 2, -3, 1], 2)]
        self.GADGET_CALLS = [2]
        self.MEAS_LEN = 2
        self.JOINT_RAND_LEN = 0
        self.OUTPUT_LEN = 2
        self.EVAL_OUTPUT_LEN = 2

    def eval(self, meas: Any, joint_rand: Any, num_shares: int, call: Any) -> Any:
        return call(0, meas.reshape(*meas.shape[:-1], 2, 1))

    def eval_ints(
        self, meas: list[int], joint_rand: list[int], num_shares: int, call: Any
    ) -> list[int]:
        out: list[int] = call(0, [[meas[0]], [meas[1]]])
        return out


def test_integer_query_general_gadget_size() -> None:
    flp = Flp(_CubicTwice())
    field = Field128
    assert flp.PROOF_LEN == 1 + 10
    rng = np.random.default_rng(8)
    for _ in range(4):
        meas, proof, query = (
            [int.from_bytes(rng.bytes(16), "little") % field.MODULUS for _ in range(n)]
            for n in (flp.MEAS_LEN, flp.PROOF_LEN, flp.QUERY_RAND_LEN)
        )
        want = flp.query(
            field.from_ints(meas), field.from_ints(proof), field.from_ints(query), field.zeros(0), 2
        )
        assert flp.query_ints(meas, proof, query, [], 2) == want.to_ints()
    # an honest proof of a valid measurement is accepted by both decisions
    meas_f = field.from_ints([2, 1])
    proof_f = flp.prove(meas_f, field.from_ints([5]), field.zeros(0))
    query = [3, 4, 77]
    got = flp.query_ints(meas_f.to_ints(), proof_f.to_ints(), query, [], 1)
    assert flp.decide_ints(got)
    bad = flp.prove(field.from_ints([3, 1]), field.from_ints([5]), field.zeros(0))
    assert not flp.decide_ints(flp.query_ints([3, 1], bad.to_ints(), query, [], 1))
