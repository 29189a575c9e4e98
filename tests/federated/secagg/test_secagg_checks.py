"""The checks secure aggregation relies on, each at its boundary: round parameters (the
threshold a majority of every closed neighbourhood), Shamir sharing (every point and value in the
field, exactly ``t`` shares), the ideal sum's input ranges, and a client's checks of what a
malicious server forwards (public keys that repeat, shares of the wrong length, addressed to
someone else, or outside the field), and the server's check of a reconstructed key."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from privhist.core.errors import InputDataError, ProtocolError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.secagg import RoundConfig, crypto, shamir
from privhist.federated.secagg.messages import Message
from privhist.federated.secagg.protocol import (
    _KEY,
    _SEED,
    SecAggClient,
    SecAggServer,
    _associated,
    default_threshold,
)
from privhist.federated.secure_sum import IdealSecureSum

PRIME = shamir.PRIME


# -- round parameters -------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "k"), [(2, 0), (5, 0), (6, 0), (10, 4), (10, 6), (9, 8), (9, 100)])
def test_default_threshold_is_a_majority_of_the_closed_neighbourhood(n: int, k: int) -> None:
    size = n if k == 0 or k >= n - 1 else k + 1
    t = default_threshold(n, k)
    assert 2 * t > size >= 2 * (t - 1)  # the smallest strict majority
    RoundConfig(1, 101, 2, tuple(range(n)), t, k)


def test_round_config_bounds() -> None:
    ids = tuple(range(6))
    RoundConfig(1, 101, 2, ids, 2)  # t = 2 is the smallest
    RoundConfig(1, 101, 2, ids, 6)  # t = n with the complete graph
    RoundConfig(1, 101, 2, ids, 3, 2)  # k = 2: closed neighbourhoods of 3
    RoundConfig(1, 101, 2, ids, 6, 6)  # k >= n - 1 is the complete graph
    RoundConfig(1, 101, 2, (0, 1), 2)  # two clients
    for bad, name in (
        (dict(threshold=1), "threshold"),
        (dict(threshold=7), "threshold"),
        (dict(threshold=4, neighbours=2), "threshold"),
        (dict(threshold=3, neighbours=-2), "neighbours"),
        (dict(threshold=3, neighbours=3), "neighbours"),
        (dict(threshold=2, clients=(0,)), "clients"),
        (dict(threshold=2, clients=(0, 0)), "clients"),
    ):
        args: dict[str, Any] = dict(round_id=1, modulus=101, dimension=2, clients=ids)
        args.update(bad)
        with pytest.raises(ValidationError) as err:
            RoundConfig(**args)
        assert err.value.parameter == name, (bad, err.value.parameter)


# -- Shamir sharing ---------------------------------------------------------------------------


@pytest.mark.parametrize("t", [1, 2, 3, 5])
def test_every_t_subset_reconstructs_and_the_field_ends_are_usable(t: int) -> None:
    rng = SeededRandom(t)
    secret = rng.randbelow(PRIME)
    xs = [1, 2, 7, PRIME - 2, PRIME - 1]
    shares = shamir.split(secret, t, xs, rng)
    assert all(0 <= y < PRIME for y in shares)
    for subset in itertools.combinations(range(len(xs)), t):
        assert shamir.reconstruct([(xs[i], shares[i]) for i in subset], t) == secret
    if t > 1:  # t - 1 shares are refused, not interpolated to a wrong value
        with pytest.raises(ProtocolError):
            shamir.reconstruct([(xs[i], shares[i]) for i in range(t - 1)], t)


def test_shamir_refuses_points_and_values_outside_the_field() -> None:
    rng = SeededRandom(1)
    with pytest.raises(ValidationError):
        shamir.split(1, 2, [1, PRIME], rng)
    with pytest.raises(ValidationError):
        shamir.split(1, 2, [0, 1], rng)
    with pytest.raises(ValidationError):
        shamir.split(PRIME, 2, [1, 2], rng)
    assert shamir.split(PRIME - 1, 1, [1], rng) == [PRIME - 1]
    for pts in ([(0, 5), (1, 6)], [(1, PRIME), (2, 6)], [(1, 5), (PRIME, 6)], [(1, -1), (2, 3)]):
        with pytest.raises(ProtocolError, match="outside the field"):
            shamir.reconstruct(pts, 2)
    assert shamir.reconstruct([(1, PRIME - 1), (2, PRIME - 1)], 2) == PRIME - 1


# -- the ideal secure sum ---------------------------------------------------------------------


def test_ideal_sum_ranges() -> None:
    IdealSecureSum(1 << 62, 1)
    with pytest.raises(ValidationError):
        IdealSecureSum((1 << 62) + 1, 1)
    agg = IdealSecureSum(7, 2)
    assert agg.aggregate([[[0, 6]], [[6, 0]]]).tolist() == [6, 6] and agg.contributors == 2
    for bad in ([[-1, 0]], [[7, 0]], [[0.5, 1]], [[1, 2, 3]]):
        with pytest.raises(InputDataError):
            agg.aggregate([bad])


def test_ideal_sum_is_exact_for_batches_larger_than_one_reduction_step() -> None:
    m = (1 << 61) + 1  # 2**62 // m = 1: every row is reduced on its own
    rows = np.full((5, 3), m - 1, dtype=np.int64)
    agg = IdealSecureSum(m, 3)
    assert agg.aggregate([rows]).tolist() == [(5 * (m - 1)) % m] * 3
    assert agg.contributors == 5


# -- what a client checks -----------------------------------------------------------------------


def _round(n: int = 4, t: int = 3) -> tuple[RoundConfig, dict[int, SecAggClient], SecAggServer]:
    config = RoundConfig(21, 1 << 20, 3, tuple(range(n)), t)
    x = SeededRandom(2).uniform_below(1 << 20, n * 3).reshape(n, 3)
    clients = {u: SecAggClient(u, config, x[u], SeededRandom(40 + u)) for u in range(n)}
    return config, clients, SecAggServer(config, SeededRandom(3))


def _roster_for(server: SecAggServer, clients: dict[int, SecAggClient]) -> dict[int, Message]:
    for c in clients.values():
        server.receive(c.advertise().encode())
    return server.close_stage()


def test_a_roster_with_a_repeated_public_key_is_refused() -> None:
    for which in (1, 2):  # a repeated encryption key, then a repeated masking key
        config, clients, server = _round()
        replies = _roster_for(server, clients)
        body = replies[0].body
        keys = [list(k) for k in body["keys"]]
        keys[1][which] = keys[0][which]
        bad = Message("roster", config.round_id, -1, {"keys": [tuple(k) for k in keys]})
        with pytest.raises(ProtocolError, match="repeat"):
            clients[0].handle(bad)


def test_a_roster_listing_the_client_itself_or_too_few_is_refused() -> None:
    config, clients, server = _round()
    replies = _roster_for(server, clients)
    keys = list(replies[0].body["keys"])
    me = (0, clients[0]._c.public_bytes, clients[0]._s.public_bytes)
    with pytest.raises(ProtocolError, match="itself"):
        clients[0].handle(Message("roster", config.round_id, -1, {"keys": [*keys, me]}))
    config, clients, server = _round()
    replies = _roster_for(server, clients)
    few = list(replies[0].body["keys"])[:1]  # the client and one other: 2 < t = 3
    with pytest.raises(ProtocolError, match="fewer than t"):
        clients[0].handle(Message("roster", config.round_id, -1, {"keys": few}))


def _forward_with(plain_for: Any, commit: bool = False) -> None:
    """Run a round to the forward stage, then hand client 0 a forward message whose share from
    client 1 is ``plain_for(v=1, u=0)``, correctly encrypted; with ``commit`` the dealer's
    commitments are to the shares in that plaintext (as a malicious dealer would publish)."""
    config, clients, server = _round()
    replies = _roster_for(server, clients)
    shares = {u: clients[u].handle(replies[u]) for u in clients}
    for msg in shares.values():
        assert msg is not None
        server.receive(msg)
    fwd = server.close_stage()[0]
    rid = config.round_id
    sender = clients[1]
    key = crypto.encryption_key(sender._c.private_bytes, clients[0]._c.public_bytes, rid)
    plain = plain_for(1, 0)
    ct = crypto.encrypt(key, plain, _associated(rid, 1, 0), SeededRandom(5))
    inbox = []
    for v, c, kc, sc in fwd.body["inbox"]:
        if v == 1:
            c = ct
            if commit:
                ks, bs = plain[8 : 8 + shamir.SHARE_BYTES], plain[8 + shamir.SHARE_BYTES :]
                kc = crypto.commitment(_KEY, rid, 1, 0, ks)
                sc = crypto.commitment(_SEED, rid, 1, 0, bs)
        inbox.append((v, c, kc, sc))
    clients[0].handle(Message("forward", rid, -1, {"inbox": inbox}))


def _plain(v: int, u: int, ks: int, bs: int, width: int = shamir.SHARE_BYTES) -> bytes:
    return (
        v.to_bytes(4, "big")
        + u.to_bytes(4, "big")
        + ks.to_bytes(width, "big")
        + bs.to_bytes(width, "big")
    )


def test_forwarded_shares_are_checked() -> None:
    with pytest.raises(ProtocolError, match="wrong length"):
        _forward_with(lambda v, u: _plain(v, u, 1, 1)[:-1])
    with pytest.raises(ProtocolError, match="wrong length"):
        _forward_with(lambda v, u: _plain(v, u, 1, 1) + b"\x00")
    with pytest.raises(ProtocolError, match="someone else"):
        _forward_with(lambda v, u: _plain(v, 3, 1, 1))
    with pytest.raises(ProtocolError, match="someone else"):
        _forward_with(lambda v, u: _plain(2, u, 1, 1))
    for ks, bs in ((PRIME, 1), (1, PRIME)):
        with pytest.raises(ProtocolError, match="outside the field"):
            _forward_with(lambda v, u, ks=ks, bs=bs: _plain(v, u, ks, bs))
    # a share its dealer did not commit to is refused; the largest field elements, committed
    # to, are shares like any other
    with pytest.raises(ProtocolError, match="do not match its commitments"):
        _forward_with(lambda v, u: _plain(v, u, PRIME - 1, PRIME - 1))
    _forward_with(lambda v, u: _plain(v, u, PRIME - 1, PRIME - 1), commit=True)


def test_the_server_refuses_a_reconstructed_key_that_is_not_the_advertised_one() -> None:
    """Client 3 advertises one masking key and deals (consistent, committed) shares of another,
    then drops after sharing: the server rebuilds the dealt key, finds it is not the advertised
    ``s_pk`` and refuses to unmask with it, naming client 3."""
    _config, clients, server = _round()
    for c in clients.values():
        server.receive(c.advertise().encode())
    clients[3]._s = crypto.KeyPair(SeededRandom(99))  # the key it shares is not the advertised one
    replies = server.close_stage()
    shares = {u: clients[u].handle(replies[u]) for u in clients}
    for msg in shares.values():
        assert msg is not None
        server.receive(msg)
    replies = server.close_stage()
    for _ in range(3):  # masked inputs, acknowledgements, unmasking; client 3 has dropped
        sent = {u: clients[u].handle(replies[u]) for u in range(3)}
        for msg in sent.values():
            assert msg is not None
            server.receive(msg)
        replies = server.close_stage()
    assert all(not m.body["ok"] for m in replies.values())
    assert "client 3 dealt shares of a key that does not match its s_pk" in (server.reason or "")
    assert set(server.culprits) == {3}
    with pytest.raises(ProtocolError, match="no result"):
        server.result  # noqa: B018  (the property raises: nothing is released)


# -- boundaries of the round, the sharing and the server's checks -----------------------------


def test_round_config_refuses_round_ids_and_dimensions_outside_their_ranges() -> None:
    from privhist.federated.secagg.protocol import MAX_DIMENSION

    ids = tuple(range(3))
    RoundConfig((1 << 63) - 1, 101, 1, ids, 2)  # the largest round id, the smallest dimension
    RoundConfig(0, 101, MAX_DIMENSION, ids, 2)
    for bad, name in (
        (dict(round_id=1 << 63), "round_id"),
        (dict(round_id=-1), "round_id"),
        (dict(dimension=0), "dimension"),
        (dict(dimension=MAX_DIMENSION + 1), "dimension"),
        (dict(dimension=2.0), "dimension"),
        (dict(dimension="2"), "dimension"),
    ):
        args: dict[str, Any] = dict(round_id=1, modulus=101, dimension=2, clients=ids, threshold=2)
        args.update(bad)
        with pytest.raises(ValidationError) as err:
            RoundConfig(**args)
        assert err.value.parameter == name, (bad, err.value.parameter)


@pytest.mark.parametrize("t", [1, 2, 3, 4])
def test_split_many_deals_polynomials_of_degree_below_t(t: int) -> None:
    """Any ``t`` of the shares determine each secret, and ``t + 1`` shares lie on one polynomial
    of degree ``< t``: one changed share breaks that (the check with ``m = t + 1`` is not
    vacuous)."""
    xs = [1, 2, 3, 5, 8]
    secrets = [5, PRIME - 1, 123456789]
    rows = shamir.split_many(secrets, t, xs, SeededRandom(7 + t))
    for secret, ys in zip(secrets, rows, strict=True):
        for subset in itertools.combinations(range(len(xs)), t):
            assert shamir.reconstruct([(xs[i], ys[i]) for i in subset], t) == secret
        w = shamir.Weights(xs[: t + 1])
        ys1 = ys[: t + 1]
        for challenge in (0, 17, PRIME - 3):
            assert w.consistent(ys1, t, challenge)
            bad = [*ys1[:-1], (ys1[-1] + 1) % PRIME]
            assert not w.consistent(bad, t, challenge)


def _play(
    config: RoundConfig, clients: dict[int, SecAggClient], server: SecAggServer, masked: set[int]
) -> dict[int, Message]:
    """Advertise and share with every client, then only ``masked`` send their masked inputs;
    returns the server's replies after that stage (and the later ones while it continues)."""
    for c in clients.values():
        server.receive(c.advertise().encode())
    replies = server.close_stage()
    for u in clients:
        msg = clients[u].handle(replies[u])
        assert msg is not None
        server.receive(msg)
    replies = server.close_stage()
    alive = sorted(masked)
    for _ in range(3):  # masked inputs, acknowledgements, unmasking
        if any(u not in replies or replies[u].type == "done" for u in alive):
            break
        for u in alive:
            msg = clients[u].handle(replies[u])
            assert msg is not None
            server.receive(msg)
        replies = server.close_stage()
    return replies


def test_the_round_aborts_with_one_masked_input_fewer_than_its_contributors() -> None:
    """``t = 3`` and at least 4 contributors: 3 masked inputs (enough for ``t``) abort the
    round; 4 are enough."""
    n = 5
    x = SeededRandom(2).uniform_below(1 << 20, n * 3).reshape(n, 3)
    for masked, ok in (({0, 1, 2}, False), ({0, 1, 2, 3}, True)):
        config = RoundConfig(21, 1 << 20, 3, tuple(range(n)), 3, 0, 4)
        clients = {u: SecAggClient(u, config, x[u], SeededRandom(40 + u)) for u in range(n)}
        server = SecAggServer(config, SeededRandom(3))
        replies = _play(config, clients, server, masked)
        assert all(m.body["ok"] is ok for m in replies.values()), server.reason
        if ok:
            expect = x[sorted(masked)].sum(axis=0) % (1 << 20)
            assert server.result.tolist() == expect.tolist()
        else:
            assert "only 3 masked inputs arrived; the round needs 4 contributors" in (
                server.reason or ""
            )


def test_the_server_refuses_a_rebuilt_seed_outside_256_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Client 3 deals consistent, committed shares of ``2**256 + 5`` (a field element, not a
    32-byte seed) as its self-mask seed: the server names it and aborts, releasing nothing."""
    from privhist.federated.secagg import protocol

    n = 4
    config = RoundConfig(21, 1 << 20, 3, tuple(range(n)), 3)
    x = SeededRandom(2).uniform_below(1 << 20, n * 3).reshape(n, 3)
    clients = {u: SecAggClient(u, config, x[u], SeededRandom(40 + u)) for u in range(n)}
    server = SecAggServer(config, SeededRandom(3))
    seed3 = int.from_bytes(clients[3]._b, "big")
    split_many = shamir.split_many

    def deal(secrets: list[int], t: int, xs: list[int], rng: Any) -> list[list[int]]:
        if secrets[1] == seed3:
            secrets = [secrets[0], (1 << 256) + 5]
        return split_many(secrets, t, xs, rng)

    monkeypatch.setattr(protocol.shamir, "split_many", deal)
    replies = _play(config, clients, server, set(range(n)))
    assert all(not m.body["ok"] for m in replies.values())
    assert "client 3 dealt shares of a seed outside [0, 2**256)" in (server.reason or "")
    assert set(server.culprits) == {3}
    with pytest.raises(ProtocolError, match="no result"):
        server.result  # noqa: B018  (the property raises: nothing is released)
