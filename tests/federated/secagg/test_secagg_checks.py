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
