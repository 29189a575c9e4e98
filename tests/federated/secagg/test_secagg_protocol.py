"""SecAgg / SecAgg+ state machines: equality with the ideal sum, dropouts, aborts, what the
server's transcript holds, and rejection of bad messages."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from privhist.core.errors import ProtocolAbort, ProtocolError
from privhist.core.random import SeededRandom
from privhist.federated.secagg import RoundConfig, SecAggregator, run_in_process, shamir
from privhist.federated.secagg.messages import Message, pack_vector
from privhist.federated.secagg.protocol import STAGES, SecAggClient, SecAggServer, Stage
from privhist.federated.secure_sum import IdealSecureSum


def _inputs(n: int, d: int, q: int, seed: int = 0) -> np.ndarray:
    return SeededRandom(seed).uniform_below(q, n * d).reshape(n, d)


def _run(config: RoundConfig, x: np.ndarray, drops: dict[str, Any] | None = None) -> Any:
    rngs = {u: SeededRandom(100 + u) for u in config.clients}
    return run_in_process(
        config, {u: x[u] for u in config.clients}, rngs.__getitem__, SeededRandom(7), drops
    )


@pytest.mark.parametrize("variant", ["secagg", "secagg+"])
@pytest.mark.parametrize("q", [2, 3, 64 * 12 + 1, (1 << 61) - 1, 1 << 62])
def test_equals_ideal_sum_mod_q(variant: str, q: int) -> None:
    n, d = 24, 9
    x = _inputs(n, d, q, seed=q % 1000)
    agg = SecAggregator(q, d, variant=variant, rng=SeededRandom(1))
    got = agg.aggregate([x[:5], x[5:]])
    assert np.array_equal(got, IdealSecureSum(q, d).aggregate([x]))
    assert agg.contributors == n
    if variant == "secagg+":
        assert agg.last is not None
        degrees = {len(v) for v in agg.last.server.graph.values()}
        assert degrees == {agg.config_for(n).neighbours} and max(degrees) < n - 1


def _expected_sum(x: np.ndarray, q: int, survivors: list[int]) -> np.ndarray:
    return IdealSecureSum(q, x.shape[1]).aggregate([x[survivors]])


def test_every_dropout_pattern_up_to_n_minus_t_secagg() -> None:
    # n = 5, t = 3: every set of at most 2 clients, each dropping at any stage
    n, d, q, t = 5, 3, 101, 3
    config = RoundConfig(1, q, d, tuple(range(n)), t)
    x = _inputs(n, d, q)
    patterns = 0
    for size in (1, 2):
        for who in itertools.combinations(range(n), size):
            for stages in itertools.product(STAGES, repeat=size):
                drops: dict[str, set[int]] = {}
                for u, s in zip(who, stages, strict=True):
                    drops.setdefault(s, set()).add(u)
                out = _run(config, x, drops)
                assert out.ok, drops
                early = {u for u, s in zip(who, stages, strict=True) if s in STAGES[:3]}
                survivors = [u for u in range(n) if u not in early]
                assert out.server.survivors["masked"] == survivors
                assert np.array_equal(out.server.result, _expected_sum(x, q, survivors))
                patterns += 1
    assert patterns == 5 * 5 + 10 * 25


def test_dropout_patterns_secagg_plus() -> None:
    # n = 10, k = 4, t = 3: a closed neighbourhood has 5 members, so any 2 dropouts leave t
    n, d, q, k, t = 10, 4, 1 << 40, 4, 3
    config = RoundConfig(2, q, d, tuple(range(n)), t, k)
    x = _inputs(n, d, q, seed=3)
    rng = SeededRandom(9)
    for _ in range(40):
        who = [int(v) for v in rng.uniform_below(n, 2)]
        stages = [STAGES[int(i)] for i in rng.uniform_below(len(STAGES), 2)]
        drops: dict[str, set[int]] = {}
        for u, s in zip(who, stages, strict=True):
            drops.setdefault(s, set()).add(u)
        out = _run(config, x, drops)
        assert out.ok, drops
        survivors = out.server.survivors["masked"]
        early = {u for u, s in zip(who, stages, strict=True) if s in STAGES[:3]}
        assert set(survivors) == set(range(n)) - early
        assert np.array_equal(out.server.result, _expected_sum(x, q, survivors))


@pytest.mark.parametrize("stage", STAGES)
def test_below_t_survivors_aborts_and_reveals_nothing(stage: str) -> None:
    n, d, q, t = 5, 3, 97, 3
    config = RoundConfig(3, q, d, tuple(range(n)), t)
    x = _inputs(n, d, q)
    out = _run(config, x, {stage: {0, 1, 2}})
    server = out.server
    assert server.stage is Stage.ABORTED and "t = 3" in server.reason
    with pytest.raises(ProtocolError, match="no result"):
        _ = server.result
    # the survivors were told the round aborted
    assert all(c.aborted_reason for u, c in out.clients.items() if u in (3, 4) and c.finished)
    # no secret can be rebuilt from the transcript: at most 2 < t shares of anything arrived
    shares: dict[tuple[str, int], int] = {}
    for m in server.transcript:
        if m.type == "unmask":
            for kind in ("key_shares", "seed_shares"):
                for v, _ in m.body[kind]:
                    shares[(kind, v)] = shares.get((kind, v), 0) + 1
    assert all(c < t for c in shares.values())
    agg = SecAggregator(q, d, rng=SeededRandom(1), dropouts={stage: [0, 1, 2]})
    with pytest.raises(ProtocolAbort):
        agg.aggregate([x])


def test_transcript_never_holds_both_secrets_of_a_client() -> None:
    n, d, q, t = 8, 4, 1009, 4
    config = RoundConfig(4, q, d, tuple(range(n)), t)
    x = _inputs(n, d, q, seed=4)
    out = _run(config, x, {"masked": {1, 2}, "unmask": {5}})
    assert out.ok
    server = out.server
    keys: dict[int, list[tuple[int, int]]] = {}
    seeds: dict[int, list[tuple[int, int]]] = {}
    for m in server.transcript:
        if m.type == "unmask":
            for v, y in m.body["key_shares"]:
                keys.setdefault(v, []).append((m.sender + 1, y))
            for v, y in m.body["seed_shares"]:
                seeds.setdefault(v, []).append((m.sender + 1, y))
    assert set(keys) == {1, 2} and set(seeds) == set(range(n)) - {1, 2}
    for u in range(n):
        assert not (len(keys.get(u, [])) >= t and len(seeds.get(u, [])) >= t)
    # the dropped clients' inputs never arrived; for a survivor, t - 1 seed shares rebuild a
    # value other than its seed (which the server only learns with t shares)
    client = out.clients[0]
    true_seed = int.from_bytes(client._b, "big")
    assert shamir.reconstruct(seeds[0], t) == true_seed
    partial = [*seeds[0][: t - 1], (999, 0)]
    assert shamir.reconstruct(partial, t) != true_seed
    # the masked input alone differs from the input everywhere it is compared
    y0 = next(m for m in server.transcript if m.type == "masked" and m.sender == 0)
    assert y0.body["y"] != pack_vector(x[0], q)


def _honest_round(n: int = 5, t: int = 3) -> tuple[RoundConfig, dict[int, SecAggClient], Any]:
    config = RoundConfig(11, 1 << 20, 6, tuple(range(n)), t)
    x = _inputs(n, 6, 1 << 20, seed=8)
    clients = {u: SecAggClient(u, config, x[u], SeededRandom(50 + u)) for u in range(n)}
    return config, clients, x


def test_server_rejects_bad_messages_and_still_completes() -> None:
    config, clients, x = _honest_round()
    server = SecAggServer(config, SeededRandom(1))
    q, d = config.modulus, config.dimension
    adv = {u: c.advertise() for u, c in clients.items()}

    def rejected(data: bytes | Message, sender: int | None = None) -> None:
        before = (server.stage, {s: dict(r) for s, r in server.received.items()})
        with pytest.raises(ProtocolError):
            server.receive(data, sender)
        assert (server.stage, {s: dict(r) for s, r in server.received.items()}) == before

    rejected(b"garbage")
    rejected(b"{}")
    rejected(Message("advertise", 12, 0, adv[0].body).encode())  # another round (replay)
    rejected(Message("masked", 11, 0, {"y": pack_vector(x[0], q)}).encode())  # out of order
    rejected(Message("advertise", 11, 99, adv[0].body).encode())  # unknown client
    server.receive(adv[0].encode())
    rejected(adv[0].encode())  # duplicate
    rejected(Message("advertise", 11, 1, adv[0].body).encode())  # reused public keys
    for u in range(1, 5):
        server.receive(adv[u].encode())
    replies = server.close_stage()
    shares = {u: clients[u].handle(replies[u].encode()) for u in range(5)}
    assert all(s is not None for s in shares.values())
    s0 = shares[0]
    assert s0 is not None
    body = dict(s0.body)
    rejected(Message("shares", 11, 0, {**body, "ciphertexts": body["ciphertexts"][1:]}).encode())
    rejected(Message("shares", 11, 0, {**body, "commitments": body["commitments"][1:]}).encode())
    rejected(s0.encode(), sender=1)  # client 1 sending in the name of client 0
    rejected(adv[1].encode())  # a stage that is over
    for u in range(5):
        msg = shares[u]
        assert msg is not None
        server.receive(msg.encode())
    replies = server.close_stage()
    masked = {u: clients[u].handle(replies[u].encode()) for u in range(5)}
    w = len(pack_vector(x[0], q)) // d
    good = masked[0]
    assert good is not None
    for bad_y in (good.body["y"][:-1], good.body["y"] + b"\x00" * w, (q).to_bytes(w, "little") * d):
        rejected(Message("masked", 11, 0, {"y": bad_y}).encode())
    wire = good.encode()
    rejected(wire[:-4])  # the attachment is shorter than its declared length
    rejected(wire.partition(b"\x00")[0])  # no attachment
    rejected(wire + b"\x00")
    for u in range(5):
        msg = masked[u]
        assert msg is not None
        server.receive(msg.encode())
    replies = server.close_stage()
    acks = {u: clients[u].handle(replies[u].encode()) for u in range(5)}
    rejected(Message("ack", 11, 0, {"digest": bytes(32)}).encode())
    for u in range(5):
        msg = acks[u]
        assert msg is not None
        server.receive(msg.encode())
    replies = server.close_stage()
    unmask = {u: clients[u].handle(replies[u].encode()) for u in range(5)}
    m0 = unmask[0]
    assert m0 is not None
    # asking the server to take a key share of a surviving client (both secrets of one client)
    both = Message("unmask", 11, 0, {"key_shares": [(1, 5)], "seed_shares": m0.body["seed_shares"]})
    rejected(both.encode())
    for u in range(5):
        msg = unmask[u]
        assert msg is not None
        server.receive(msg.encode())
    server.close_stage()
    assert np.array_equal(server.result, IdealSecureSum(q, d).aggregate([x]))
    rejected(m0.encode())  # after the end


def test_clients_reject_inconsistent_server_messages() -> None:
    config, clients, _ = _honest_round()
    server = SecAggServer(config, SeededRandom(1))
    for c in clients.values():
        server.receive(c.advertise().encode())
    replies = server.close_stage()
    c0 = clients[0]
    with pytest.raises(ProtocolError, match="expected 'roster'"):
        c0.handle(Message("survivors", 11, -1, {"ids": [0, 1, 2]}).encode())
    bad_roster = Message("roster", 11, -1, {"keys": [(0, bytes(32), bytes(32))]})
    with pytest.raises(ProtocolError):
        c0.handle(bad_roster)
    shares = {u: clients[u].handle(replies[u]) for u in range(5)}
    for msg in shares.values():
        assert msg is not None
        server.receive(msg)
    replies = server.close_stage()
    fwd = replies[0]
    forged = [(v, ct[:-1] + bytes([ct[-1] ^ 1]), k, s) for v, ct, k, s in fwd.body["inbox"]]
    with pytest.raises(ProtocolError, match="authentication"):
        c0.handle(Message("forward", 11, -1, {"inbox": forged}))
    # a share that does not match the commitment its dealer published names the dealer
    v, ct, kc, _sc = fwd.body["inbox"][0]
    lying = [(v, ct, kc, bytes(16)), *fwd.body["inbox"][1:]]
    with pytest.raises(ProtocolError, match=f"shares of client {v} do not match"):
        c0.handle(Message("forward", 11, -1, {"inbox": lying}))
    masked = {u: clients[u].handle(replies[u]) for u in range(5)}
    for msg in masked.values():
        assert msg is not None
        server.receive(msg)
    replies = server.close_stage()
    with pytest.raises(ProtocolError, match="U3"):
        c0.handle(Message("survivors", 11, -1, {"ids": [1, 2, 3, 4]}))
    acks = {u: clients[u].handle(replies[u]) for u in range(5)}
    for msg in acks.values():
        assert msg is not None
        server.receive(msg)
    replies = server.close_stage()
    with pytest.raises(ProtocolError, match="U4"):
        c0.handle(Message("unmask_req", 11, -1, {"ids": [0, 1, 2, 3, 4, 7]}))


def test_a_client_whose_neighbourhood_lost_too_many_refuses_and_the_round_aborts() -> None:
    from privhist.federated.secagg.graph import harary_graph

    n, d, q, k, t = 10, 3, 1 << 20, 4, 4
    config = RoundConfig(5, q, d, tuple(range(n)), t, k)
    graph = harary_graph(list(range(n)), k, SeededRandom(7))  # what the server will draw
    lost = sorted(graph[0])[:2]
    out = _run(config, _inputs(n, d, q), {"masked": set(lost)})
    assert 0 in out.refusals and "fewer than t" in out.refusals[0]
    assert not out.ok and out.server.stage is Stage.ABORTED
