"""Client and server state machines of SecAgg / SecAgg+, independent of any transport.

Protocol: Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving Machine
Learning" (CCS 2017), Section 4 (the protocol's rounds 0-4: advertise keys, share keys, masked
input collection, consistency check, unmasking), on the complete graph; with
``neighbours = k`` the sparse-graph variant of Bell et al., "Secure Single-Server Aggregation
with (Poly)Logarithmic Overhead" (CCS 2020), their semi-honest construction: keys, shares and
pairwise masks only between neighbours of a random Harary graph, threshold ``t`` counted in
each client's closed neighbourhood.

Double masking (Bonawitz et al., Section 3). Client ``u`` with input ``x_u`` in ``Z_q^d`` sends

    ``y_u = x_u + PRG(b_u) + sum_{v in N(u) cap U_2} sign(u, v) PRG(s_{u,v})  (mod q)``

with ``sign = +1`` for ``u < v`` and ``-1`` otherwise, ``s_{u,v} = KA(s_u^SK, s_v^PK)`` and a
fresh self-mask seed ``b_u``. It Shamir-shares ``b_u`` and ``s_u^SK`` (threshold ``t``) among its
closed neighbourhood, each share encrypted under ``KA(c_u^SK, c_v^PK)`` and relayed by the
server. In round 4 every surviving client reveals, for each neighbour ``v``, the share of ``b_v``
if ``v``'s masked input arrived (``v in U_3``) and the share of ``s_v^SK`` otherwise, never both;
the server reconstructs, removes the self masks of ``U_3`` and the pairwise masks between ``U_3``
and the clients that dropped after sharing, and obtains ``sum_{u in U_3} x_u mod q``.

Threat model (what the tests check, and what they do not):

* **Server**: honest-but-curious. It follows the protocol and may try to learn from everything it
  receives (its transcript). The output reveals only the sum over ``U_3``; the transcript of a
  round, even with dropouts, never holds ``t`` shares of both ``b_u`` and ``s_u^SK`` for any
  client, so no single ``x_u`` is determined (Bonawitz et al., Section 6, honest-but-curious
  setting). A *malicious* server (one that lies about who dropped to different clients) is not
  covered: there are no signatures and no PKI here, the consistency check only makes clients
  agree on a digest of ``U_3``.
* **Clients**: the server together with fewer than ``t`` honest-but-curious clients (in SecAgg+,
  fewer than ``t`` in any one closed neighbourhood) learns nothing beyond the sum of the other
  inputs (Bonawitz et al., Section 6); the default ``t = floor(n/2) + 1`` is a majority. For
  SecAgg+ the degree ``k`` and threshold ``t`` must be set from Bell et al.'s bounds for the
  corruption and dropout fractions of the deployment; the defaults here (``k`` the even number
  at least ``3 ceil(log2 n)``, ``t`` a majority of the closed neighbourhood) are a convenience,
  not their calibration.
* **Dropouts**: any client may drop at any stage. The output is correct whenever at least ``t``
  clients survive each stage and, for every secret the server needs, at least ``t`` holders of
  its shares survive to round 4; otherwise the server aborts (``done`` with ``ok = false``) and
  :class:`~privhist.core.errors.ProtocolAbort` is raised. Clients refuse to reveal shares when
  fewer than ``t`` of their closed neighbourhood are in ``U_3`` / ``U_4``.
* **Transport**: confidentiality and integrity of client-server links, and who a client is, are
  the transport's job (mutual TLS in :mod:`privhist.federated.secagg.runtime`: the sender of a
  message is the id in the client's verified certificate, passed to :meth:`SecAggServer.receive`);
  shares are end-to-end encrypted and authenticated client to client, bound to the round and
  both ids.
* **Malicious clients** (beyond the papers' semi-honest model; docs/federated/threat-model.md):
  every field a client controls is checked. Public keys of small order are refused. Each
  Shamir share is committed to (a truncated SHA-256, :func:`~privhist.federated.secagg.crypto.
  commitment`) in the dealer's ``shares`` message; the holder checks the share it decrypts
  against it, and the server rebuilds every secret from all the shares it holds (more than
  ``t`` whenever more than ``t`` holders survive), checking that they lie on one polynomial of
  degree ``< t``. A revealed share that does not match its commitment names its holder, whose
  share is left out (the secret is rebuilt from the others when ``t`` remain); shares that match
  their commitments but disagree name the dealer, and the round aborts. A rebuilt key must match
  the advertised ``s^PK``. What a malicious client can still do: send any masked input (shift
  the sum by anything in ``Z_q^d``, its own input's range here), refuse or drop (abort the round
  when too few remain), or deal bad shares (abort naming it).
* **Minimum contributors**: the server aborts before any share is revealed when fewer than
  ``max(t, min_contributors)`` masked inputs arrived, so no sum of fewer inputs is computed.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import RandomSource
from privhist.federated.secagg import crypto, shamir
from privhist.federated.secagg.graph import Graph, complete_graph, harary_graph
from privhist.federated.secagg.messages import (
    MAX_CLIENTS,
    SERVER,
    Message,
    decode,
    digest_ids,
    pack_vector,
    unpack_vector,
    width,
)

I64 = npt.NDArray[np.int64]

#: the client stages, in order (a client "drops at" one of them: it sends nothing from there on)
STAGES = ("advertise", "shares", "masked", "ack", "unmask")

_KEY, _SEED = b"k", b"s"


def default_neighbours(n: int) -> int:
    """SecAgg+'s default degree: the even number at least ``3 ceil(log2 n)`` (a degree of
    ``n - 1`` or more is the complete graph)."""
    k = 3 * max(1, math.ceil(math.log2(max(n, 2))))
    return k + k % 2


def default_threshold(n: int, neighbours: int) -> int:
    """A majority of the closed neighbourhood: ``floor(size / 2) + 1``."""
    size = n if neighbours == 0 or neighbours >= n - 1 else neighbours + 1
    return size // 2 + 1


@dataclass(frozen=True)
class RoundConfig:
    """The public parameters of one round, known to the server and every client.

    Attributes:
        round_id: Binds keys and ciphertexts to this round (replays of other rounds fail).
        modulus: ``q`` in ``[2, 2**62]``.
        dimension: ``d``, the length of every input.
        clients: The eligible client ids (distinct, in ``[0, 2**20)``).
        threshold: ``t``: shares needed to reconstruct a secret.
        neighbours: ``k`` (even) for SecAgg+, or 0 for SecAgg (the complete graph).
        min_contributors: The round aborts before unmasking unless at least this many masked
            inputs arrived (and at least ``t``); 0 means ``t``.
    """

    round_id: int
    modulus: int
    dimension: int
    clients: tuple[int, ...]
    threshold: int
    neighbours: int = 0
    min_contributors: int = 0

    def __post_init__(self) -> None:
        fn = "RoundConfig"
        crypto.check_modulus(self.modulus, fn)
        if not isinstance(self.round_id, int) or not 0 <= self.round_id < 1 << 63:
            raise ValidationError("round_id", fn, "an integer in [0, 2**63)", self.round_id)
        if not isinstance(self.dimension, int) or not 1 <= self.dimension <= MAX_DIMENSION:
            raise ValidationError(
                "dimension", fn, f"an integer in [1, {MAX_DIMENSION}]", self.dimension
            )
        ids = list(self.clients)
        if len(set(ids)) != len(ids) or any(not 0 <= i < MAX_CLIENTS for i in ids):
            raise ValidationError("clients", fn, "distinct ids in [0, 2**20)", ids[:10])
        n = len(ids)
        if n < 2:
            raise ValidationError("clients", fn, "at least 2 clients", n)
        k = self.neighbours
        if not isinstance(k, int) or k < 0 or k % 2:
            raise ValidationError("neighbours", fn, "0 or an even integer >= 2", k)
        size = n if k == 0 or k >= n - 1 else k + 1
        if not isinstance(self.threshold, int) or not 2 <= self.threshold <= size:
            raise ValidationError(
                "threshold", fn, f"an integer in [2, {size}] (closed neighbourhood)", self.threshold
            )
        mc = self.min_contributors
        if not isinstance(mc, int) or not 0 <= mc <= n:
            raise ValidationError("min_contributors", fn, f"an integer in [0, {n}]", mc)

    @property
    def contributors_needed(self) -> int:
        """Masked inputs the round needs before it unmasks: ``max(t, min_contributors)``."""
        return max(self.threshold, self.min_contributors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "round_id": self.round_id,
            "modulus": self.modulus,
            "dimension": self.dimension,
            "clients": list(self.clients),
            "threshold": self.threshold,
            "neighbours": self.neighbours,
            "min_contributors": self.min_contributors,
        }

    @classmethod
    def from_dict(cls, obj: Any) -> RoundConfig:
        """Checked inverse of :meth:`to_dict` (malformed input raises :class:`ProtocolError`)."""
        keys = {
            "round_id",
            "modulus",
            "dimension",
            "clients",
            "threshold",
            "neighbours",
            "min_contributors",
        }
        if not isinstance(obj, dict) or set(obj) != keys:
            raise ProtocolError(f"round config must have the fields {sorted(keys)}")
        if not isinstance(obj["clients"], list) or len(obj["clients"]) > MAX_CLIENTS:
            raise ProtocolError("round config: 'clients' must be a list")
        ints = [obj[k] for k in keys - {"clients"}] + list(obj["clients"])
        if any(isinstance(v, bool) or not isinstance(v, int) for v in ints):
            raise ProtocolError("round config: every field must be an integer")
        try:
            return cls(
                obj["round_id"],
                obj["modulus"],
                obj["dimension"],
                tuple(obj["clients"]),
                obj["threshold"],
                obj["neighbours"],
                obj["min_contributors"],
            )
        except ValidationError as exc:
            raise ProtocolError(f"round config: {exc}") from None

    def max_message_bytes(self) -> int:
        """A bound on any honest message of this round (the masked vector dominates)."""
        n = len(self.clients)
        vec = 4 * (width(self.modulus) * self.dimension // 3 + 2)
        return vec + 400 * n + 4096


#: largest vector length a round accepts (a masked vector of 2**24 entries is at most 171 MB)
MAX_DIMENSION = 1 << 24


def _sign(u: int, v: int) -> int:
    return 1 if u < v else -1


def _signed_sum(start: I64, rows: I64, signs: I64, q: int) -> I64:
    """``start + sum_i signs[i] rows[i]`` modulo ``q`` (entries of ``start`` and ``rows`` in
    ``[0, q)`` or, for ``start``, below ``2 q``; ``signs`` in ``{-1, +1}``), in int64 without
    overflow: the rows are added in blocks small enough that no partial sum leaves int64."""
    per = max(1, ((1 << 62) // q) - 2)  # |partial sums| stay below 2**62 + 2 q
    total = start % q
    for lo in range(0, rows.shape[0], per):
        total = (total + signs[lo : lo + per] @ rows[lo : lo + per]) % q
    return total


def _associated(round_id: int, u: int, v: int) -> bytes:
    return (
        b"privhist/secagg/v1/share"
        + round_id.to_bytes(8, "big")
        + u.to_bytes(4, "big")
        + (v.to_bytes(4, "big"))
    )


def _commit(kind: bytes, round_id: int, dealer: int, holder: int, share: int) -> bytes:
    return crypto.commitment(
        kind, round_id, dealer, holder, share.to_bytes(shamir.SHARE_BYTES, "big")
    )


class SecAggClient:
    """One client's side of a round.

    Args:
        client_id: Its id (one of ``config.clients``).
        config: The round's public parameters.
        vector: Its input, ``d`` integers in ``[0, q)``.
        rng: Source of its keys, seeds, Shamir coefficients and nonces (``SecureRandom``).
        agreements: Memo of agreed keys (:class:`~privhist.federated.secagg.crypto.Agreements`);
            its own by default; an in-process simulation of honest clients may pass one shared
            memo, which computes each pair's keys once.

    Drive it with :meth:`advertise` then :meth:`handle` on each server message; each returns the
    reply to send (``None`` once the round is over).
    """

    def __init__(
        self,
        client_id: int,
        config: RoundConfig,
        vector: Any,
        rng: RandomSource,
        agreements: crypto.Agreements | None = None,
    ) -> None:
        fn = "SecAggClient"
        if client_id not in config.clients:
            raise ValidationError("client_id", fn, "one of the round's clients", client_id)
        x = np.asarray(vector)
        if x.shape != (config.dimension,) or x.dtype.kind not in "iu":
            raise ValidationError(
                "vector", fn, f"{config.dimension} integers", f"{x.dtype} array {x.shape}"
            )
        if x.size and (int(x.min()) < 0 or int(x.max()) >= config.modulus):
            raise ValidationError("vector", fn, f"entries in [0, {config.modulus})", "out of range")
        self.id = client_id
        self.config = config
        self._x = x.astype(np.int64)
        self._rng = rng
        self._agree = crypto.Agreements() if agreements is None else agreements
        self._c = crypto.KeyPair(rng)
        self._s = crypto.KeyPair(rng)
        self._b = crypto.random_bytes(rng, crypto.SEED_BYTES)
        self.stage = "advertise"
        self._keys: dict[int, tuple[bytes, bytes]] = {}
        self._held: dict[int, tuple[int, int]] = {}  # v -> (share of s_v^SK, share of b_v)
        self._u2: set[int] = set()
        self._u3: set[int] = set()
        self.finished = False
        self.aborted_reason: str | None = None

    def _msg(self, kind: str, **body: Any) -> Message:
        return Message(kind, self.config.round_id, self.id, body)

    def _expect(self, msg: Message, kind: str) -> None:
        if msg.round != self.config.round_id or msg.sender != SERVER:
            raise ProtocolError(f"client {self.id}: message from another round or sender")
        if msg.type == "done":
            return
        if msg.type != kind:
            raise ProtocolError(f"client {self.id}: expected '{kind}', got '{msg.type}'")

    def advertise(self) -> Message:
        """Round 0: the two public keys."""
        if self.stage != "advertise":
            raise ProtocolError(f"client {self.id}: keys were already advertised")
        self.stage = "roster"
        return self._msg("advertise", c_pk=self._c.public_bytes, s_pk=self._s.public_bytes)

    def handle(self, msg: Message | bytes) -> Message | None:
        """Process one server message and return the reply (``None`` when the round ended)."""
        if isinstance(msg, bytes | bytearray):
            msg = decode(bytes(msg), self.config.max_message_bytes())
        if self.finished:
            raise ProtocolError(f"client {self.id}: the round is over")
        self._expect(msg, self.stage)
        if msg.type == "done":
            self.finished = True
            if not msg.body["ok"]:
                self.aborted_reason = str(msg.body["reason"])
            return None
        handler = {
            "roster": self._on_roster,
            "forward": self._on_forward,
            "survivors": self._on_survivors,
            "unmask_req": self._on_unmask_req,
        }[msg.type]
        return handler(msg)

    def _closed(self) -> set[int]:
        return set(self._keys) | {self.id}

    def _on_roster(self, msg: Message) -> Message:
        t = self.config.threshold
        keys = {v: (c, s) for v, c, s in msg.body["keys"]}
        if self.id in keys or not set(keys) <= set(self.config.clients):
            raise ProtocolError(f"client {self.id}: roster lists itself or unknown clients")
        if len(keys) + 1 < t:
            raise ProtocolError(f"client {self.id}: fewer than t = {t} clients in the roster")
        publics = [c for c, _ in keys.values()] + [s for _, s in keys.values()]
        if len(set(publics)) != len(publics):
            raise ProtocolError(f"client {self.id}: public keys repeat in the roster")
        self._keys = keys
        closed = sorted([*keys, self.id])
        xs = [w + 1 for w in closed]
        key_sh, seed_sh = shamir.split_many(
            [int.from_bytes(self._s.private_bytes, "big"), int.from_bytes(self._b, "big")],
            t,
            xs,
            self._rng,
        )
        cts = []
        commits = []
        rid = self.config.round_id
        commit_key = crypto.Committer(_KEY, rid, self.id)
        commit_seed = crypto.Committer(_SEED, rid, self.id)
        nb = shamir.SHARE_BYTES
        me = self.id.to_bytes(4, "big")
        ad = _associated(rid, self.id, 0)[:-4]  # bound to the round, the sender, the receiver
        fresh = iter(crypto.nonces(self._rng, len(closed) - 1))
        for w, ks, bs in zip(closed, key_sh, seed_sh, strict=True):
            kb, bb = ks.to_bytes(nb, "big"), bs.to_bytes(nb, "big")
            commits.append((w, commit_key(w, kb), commit_seed(w, bb)))
            if w == self.id:
                self._held[w] = (ks, bs)
                continue
            aead = self._agree.cipher(self._c, keys[w][0], rid, "encrypt")
            wb = w.to_bytes(4, "big")
            ct = crypto.encrypt(aead, me + wb + kb + bb, ad + wb, self._rng, next(fresh))
            cts.append((w, ct))
        self.stage = "forward"
        return self._msg("shares", ciphertexts=cts, commitments=commits)

    def _on_forward(self, msg: Message) -> Message:
        rid, q, d = self.config.round_id, self.config.modulus, self.config.dimension
        senders = {v for v, _, _, _ in msg.body["inbox"]}
        if not senders <= set(self._keys):
            raise ProtocolError(f"client {self.id}: forwarded shares from non-neighbours")
        if len(senders) + 1 < self.config.threshold:
            raise ProtocolError(f"client {self.id}: fewer than t clients shared keys")
        held: dict[int, tuple[int, int]] = {}
        nb = shamir.SHARE_BYTES
        me = self.id.to_bytes(4, "big")
        for v, ct, kc, sc in msg.body["inbox"]:
            aead = self._agree.cipher(self._c, self._keys[v][0], rid, "decrypt")
            try:
                plain = crypto.decrypt(aead, ct, _associated(rid, v, self.id))
            except ProtocolError:
                raise ProtocolError(
                    f"client {self.id}: the shares of client {v} fail authentication"
                ) from None
            if len(plain) != 8 + 2 * nb:
                raise ProtocolError(f"client {self.id}: share plaintext of wrong length")
            if int.from_bytes(plain[:4], "big") != v or plain[4:8] != me:
                raise ProtocolError(f"client {self.id}: share addressed to someone else")
            kb, bb = plain[8 : 8 + nb], plain[8 + nb :]
            ks, bs = int.from_bytes(kb, "big"), int.from_bytes(bb, "big")
            if ks >= shamir.PRIME or bs >= shamir.PRIME:
                raise ProtocolError(f"client {self.id}: share outside the field")
            if kc != crypto.commitment(_KEY, rid, v, self.id, kb) or sc != crypto.commitment(
                _SEED, rid, v, self.id, bb
            ):
                raise ProtocolError(
                    f"client {self.id}: the shares of client {v} do not match its commitments"
                )
            held[v] = (ks, bs)
        self._held.update(held)
        self._u2 = senders | {self.id}
        y = self._x + crypto.prg_uniform(self._b, q, d)
        peers = sorted(senders)
        if peers:
            masks = self._agree.masks(self._s, [self._keys[v][1] for v in peers], rid, q, d)
            signs = np.array([_sign(self.id, v) for v in peers], dtype=np.int64)
            y = _signed_sum(y, masks, signs, q)
        y %= q
        self.stage = "survivors"
        return self._msg("masked", y=pack_vector(y, q))

    def _on_survivors(self, msg: Message) -> Message:
        ids = msg.body["ids"]
        u3 = set(ids)
        if self.id not in u3 or not u3 <= self._u2:
            raise ProtocolError(f"client {self.id}: U3 is inconsistent with U2")
        if len(u3) < self.config.threshold:
            raise ProtocolError(f"client {self.id}: fewer than t neighbours survived (U3)")
        self._u3 = u3
        self.stage = "unmask_req"
        return self._msg("ack", digest=digest_ids(sorted(u3)))

    def _on_unmask_req(self, msg: Message) -> Message:
        u4 = set(msg.body["ids"])
        if not u4 <= self._u3 or self.id not in u4:
            raise ProtocolError(f"client {self.id}: U4 is not a subset of U3")
        if len(u4) < self.config.threshold:
            raise ProtocolError(f"client {self.id}: fewer than t neighbours survived (U4)")
        key_shares, seed_shares = [], []
        for v in sorted(self._u2):
            ks, bs = self._held[v]
            if v in self._u3:
                seed_shares.append((v, bs))  # v's input arrived: reveal its self-mask seed only
            else:
                key_shares.append((v, ks))  # v dropped after sharing: reveal its mask key only
        self.stage = "done"
        return self._msg("unmask", key_shares=key_shares, seed_shares=seed_shares)


class Stage(enum.Enum):
    ADVERTISE = "advertise"
    SHARES = "shares"
    MASKED = "masked"
    ACK = "ack"
    UNMASK = "unmask"
    DONE = "done"
    ABORTED = "aborted"


_NEXT = {
    Stage.ADVERTISE: Stage.SHARES,
    Stage.SHARES: Stage.MASKED,
    Stage.MASKED: Stage.ACK,
    Stage.ACK: Stage.UNMASK,
    Stage.UNMASK: Stage.DONE,
}


class SecAggServer:
    """The server's side of a round: :meth:`receive` client messages, :meth:`close_stage` when
    every expected client answered or the stage timed out.

    Every message is checked completely before it changes any state, so a rejected message
    (:class:`ProtocolError`) leaves the server as it was. ``transcript`` keeps every accepted
    message (what an honest-but-curious server holds). ``culprits`` names the clients caught
    sending a share that does not match its commitment, or dealing inconsistent shares.

    Args:
        config: The round's public parameters.
        rng: Draws the SecAgg+ graph and the consistency challenge (``SecureRandom`` in real
            use).
    """

    def __init__(self, config: RoundConfig, rng: RandomSource) -> None:
        self.config = config
        self._rng = rng
        self.stage = Stage.ADVERTISE
        self.received: dict[Stage, dict[int, Message]] = {s: {} for s in _NEXT}
        self.graph: Graph = {}
        self.survivors: dict[str, list[int]] = {}
        self.transcript: list[Message] = []
        self.reason = ""
        self.culprits: dict[int, str] = {}
        self._result: I64 | None = None
        self._vectors: dict[int, I64] = {}
        self._expect: set[int] = set(config.clients)
        self._public_keys: set[bytes] = set()
        self._commits: dict[int, dict[int, tuple[bytes, bytes]]] = {}
        self._sent: dict[int, bytes] = {}
        self._u2: set[int] = set()
        self._u3: set[int] = set()

    # -- receiving -----------------------------------------------------------------------

    def _expected(self) -> set[int]:
        """Who may send in the current stage."""
        return self._expect if self.stage in _NEXT else set()

    def pending(self) -> set[int]:
        """Clients the current stage still waits for."""
        if self.stage not in _NEXT:
            return set()
        return self._expect - self.received[self.stage].keys()

    def receive(self, data: bytes | Message, sender: int | None = None) -> None:
        """Accept one client message or raise :class:`ProtocolError` (state unchanged).

        ``sender``: the authenticated id of the client that sent it (the transport's); a message
        whose ``sender`` field says otherwise is refused.
        """
        msg = data if isinstance(data, Message) else decode(data, self.config.max_message_bytes())
        if sender is not None and msg.sender != sender:
            raise ProtocolError(
                f"server: client {sender} sent a message in the name of client {msg.sender}"
            )
        stage = self.stage
        if msg.round != self.config.round_id:
            raise ProtocolError(f"server: message of round {msg.round}, not {self.config.round_id}")
        if stage not in _NEXT:
            raise ProtocolError(f"server: the round is {stage.value}; no message expected")
        if msg.type != stage.value:
            raise ProtocolError(f"server: expected '{stage.value}' messages, got '{msg.type}'")
        u = msg.sender
        if u in self.received[stage]:
            raise ProtocolError(f"server: duplicate '{msg.type}' from client {u}")
        if u not in self._expect:
            raise ProtocolError(f"server: client {u} may not send '{msg.type}' now")
        getattr(self, f"_check_{stage.value}")(msg)
        self.received[stage][u] = msg
        self.transcript.append(msg)

    def _check_advertise(self, msg: Message) -> None:
        c, s = msg.body["c_pk"], msg.body["s_pk"]
        if c == s or c in self._public_keys or s in self._public_keys:
            raise ProtocolError(f"server: client {msg.sender} reuses a public key")
        if not (crypto.usable_public_key(c) and crypto.usable_public_key(s)):
            raise ProtocolError(f"server: client {msg.sender} advertised a key of small order")
        self._public_keys.update((c, s))

    def _check_shares(self, msg: Message) -> None:
        u = msg.sender
        to = {v for v, _ in msg.body["ciphertexts"]}
        if to != self.graph[u]:
            raise ProtocolError(f"server: client {u} must send one ciphertext to each neighbour")
        commits = {w: (kc, sc) for w, kc, sc in msg.body["commitments"]}
        if commits.keys() != self.graph[u] | {u}:
            raise ProtocolError(
                f"server: client {u} must commit to one share per member of its neighbourhood"
            )
        self._commits[u] = commits

    def _check_masked(self, msg: Message) -> None:
        self._vectors[msg.sender] = unpack_vector(
            msg.body["y"], self.config.modulus, self.config.dimension
        )

    def _check_ack(self, msg: Message) -> None:
        if msg.body["digest"] != self._sent[msg.sender]:
            raise ProtocolError(f"server: client {msg.sender} acknowledged another U3")

    def _check_unmask(self, msg: Message) -> None:
        u = msg.sender
        u2 = self._u2
        u3 = self._u3
        closed = (self.graph[u] | {u}) & u2
        want_keys, want_seeds = closed - u3, closed & u3
        got_keys = {v for v, _ in msg.body["key_shares"]}
        got_seeds = {v for v, _ in msg.body["seed_shares"]}
        if got_keys != want_keys or got_seeds != want_seeds:
            raise ProtocolError(f"server: client {u} sent shares for the wrong clients")

    # -- closing stages ------------------------------------------------------------------

    def close_stage(self) -> dict[int, Message]:
        """End the current stage (who has not sent has dropped) and return the next stage's
        message for every remaining client. On too few survivors the round aborts: every
        remaining client gets ``done`` with ``ok = false`` and :attr:`stage` becomes ABORTED."""
        stage = self.stage
        if stage not in _NEXT:
            raise ProtocolError(f"server: the round is already {stage.value}")
        alive = sorted(self.received[stage])
        self.survivors[stage.value] = alive
        t = self.config.threshold
        if len(alive) < t:
            return self._abort(f"only {len(alive)} clients sent '{stage.value}' (t = {t})", alive)
        need = self.config.contributors_needed
        if stage is Stage.MASKED and len(alive) < need:
            return self._abort(
                f"only {len(alive)} masked inputs arrived; the round needs {need} contributors",
                alive,
            )
        out: dict[int, Message] = {}
        rid = self.config.round_id
        if stage is Stage.ADVERTISE:
            k = self.config.neighbours
            self.graph = complete_graph(alive) if k == 0 else harary_graph(alive, k, self._rng)
            adv = self.received[stage]
            for u in alive:
                rows = [
                    (v, adv[v].body["c_pk"], adv[v].body["s_pk"]) for v in sorted(self.graph[u])
                ]
                out[u] = Message("roster", rid, SERVER, {"keys": rows})
        elif stage is Stage.SHARES:
            self._u2 = set(alive)
            inbox: dict[int, list[tuple[int, bytes, bytes, bytes]]] = {u: [] for u in alive}
            for v in alive:
                commits = self._commits[v]
                for w, ct in self.received[stage][v].body["ciphertexts"]:
                    if w in inbox:
                        inbox[w].append((v, ct, *commits[w]))
            for u in alive:
                out[u] = Message("forward", rid, SERVER, {"inbox": inbox[u]})
        elif stage in (Stage.MASKED, Stage.ACK):
            if stage is Stage.MASKED:
                self._u3 = set(alive)
            kind = "survivors" if stage is Stage.MASKED else "unmask_req"
            members = set(alive)
            for u in alive:
                ids = sorted((self.graph[u] | {u}) & members)
                if stage is Stage.MASKED:
                    self._sent[u] = digest_ids(ids)
                out[u] = Message(kind, rid, SERVER, {"ids": ids})
        else:
            try:
                self._result = self._unmask()
            except ProtocolError as exc:
                return self._abort(str(exc), alive)
            for u in alive:
                out[u] = Message("done", rid, SERVER, {"ok": True, "reason": ""})
        self.stage = _NEXT[stage]
        self._expect = set(alive) if self.stage in _NEXT else set()
        return out

    def _abort(self, reason: str, alive: list[int]) -> dict[int, Message]:
        self.stage = Stage.ABORTED
        self.reason = reason
        self._vectors.clear()
        self._expect = set()
        rid = self.config.round_id
        return {u: Message("done", rid, SERVER, {"ok": False, "reason": reason}) for u in alive}

    def _rebuild(
        self,
        dealer: int,
        kind: bytes,
        points: list[tuple[int, int]],
        challenge: int,
        memo: dict[tuple[int, ...], shamir.Weights],
    ) -> int:
        """The secret ``dealer`` shared (its key or its seed) from the revealed ``(holder,
        share)`` points, checked (class notes); raises :class:`ProtocolError` naming the
        culprit when it cannot be rebuilt."""
        t, rid = self.config.threshold, self.config.round_id
        what = "key" if kind == _KEY else "seed"

        def weights(pts: list[tuple[int, int]]) -> shamir.Weights:
            xs = tuple(w + 1 for w, _ in pts)
            found = memo.get(xs)
            if found is None:
                found = memo[xs] = shamir.Weights(xs)
            return found

        def ys(pts: list[tuple[int, int]]) -> list[int]:
            return [y for _, y in pts]

        if len(points) > t:
            w8 = weights(points)
            if w8.consistent(ys(points), t, challenge):
                return w8.at_zero(ys(points))
        # inconsistent, or no redundancy: check every share against the dealer's commitment
        index = 0 if kind == _KEY else 1
        commits = self._commits[dealer]
        good = []
        for w, y in points:
            if _commit(kind, rid, dealer, w, y) == commits[w][index]:
                good.append((w, y))
            else:
                self.culprits[w] = (
                    f"revealed a share of client {dealer}'s {what} that does not match the "
                    "dealer's commitment"
                )
        if len(good) < t:
            kept = {w for w, _ in good}
            bad = sorted(w for w, _ in points if w not in kept)
            raise ProtocolError(
                f"only {len(good)} valid shares of client {dealer}'s {what} (t = {t}); "
                f"client(s) {bad} revealed shares that do not match their commitments"
            )
        w8 = weights(good)
        if not w8.consistent(ys(good), t, challenge):
            self.culprits[dealer] = f"dealt shares of its {what} that lie on no one polynomial"
            raise ProtocolError(
                f"client {dealer} dealt inconsistent shares of its {what} (its committed shares "
                f"lie on no polynomial of degree < {t})"
            )
        return w8.at_zero(ys(good))

    def _unmask(self) -> I64:
        q, d, rid = self.config.modulus, self.config.dimension, self.config.round_id
        u2 = self._u2
        u3 = self.survivors["masked"]
        key_pts: dict[int, list[tuple[int, int]]] = {}
        seed_pts: dict[int, list[tuple[int, int]]] = {}
        for u, msg in sorted(self.received[Stage.UNMASK].items()):
            for v, y in msg.body["key_shares"]:
                key_pts.setdefault(v, []).append((u, y))
            for v, y in msg.body["seed_shares"]:
                seed_pts.setdefault(v, []).append((u, y))
        challenge = self._rng.randbelow(shamir.PRIME)
        memo: dict[tuple[int, ...], shamir.Weights] = {}
        adv = self.received[Stage.ADVERTISE]
        seeds: dict[int, bytes] = {}
        keys: dict[int, bytes] = {}
        for u in u3:  # rebuild every secret before any mask is expanded
            b = self._rebuild(u, _SEED, seed_pts.get(u, []), challenge, memo)
            if b >= 1 << 256:
                self.culprits[u] = "dealt shares of a seed outside [0, 2**256)"
                raise ProtocolError(f"client {u} dealt shares of a seed outside [0, 2**256)")
            seeds[u] = b.to_bytes(32, "big")
        for v in sorted(u2 - set(u3)):
            sk_int = self._rebuild(v, _KEY, key_pts.get(v, []), challenge, memo)
            sk = sk_int.to_bytes(32, "big") if sk_int < 1 << 256 else b""
            if not sk or crypto.public_key(sk) != adv[v].body["s_pk"]:
                self.culprits[v] = "dealt shares of a key that does not match its s_pk"
                raise ProtocolError(
                    f"client {v} dealt shares of a key that does not match its s_pk"
                )
            keys[v] = sk
        total = np.zeros(d, dtype=np.int64)
        block = 1024  # rows expanded at once: bounded memory for any n
        for lo in range(0, len(u3), block):
            part = u3[lo : lo + block]
            ones = np.ones(len(part), dtype=np.int64)
            total = _signed_sum(total, np.stack([self._vectors[u] for u in part]), ones, q)
            self_masks = crypto.prg_uniform_many([seeds[u] for u in part], q, d)
            total = _signed_sum(total, self_masks, -ones, q)
        alive = set(u3)
        for v, sk in keys.items():
            peers = sorted(self.graph[v] & alive)
            if not peers:
                continue
            key = crypto.private_key(sk)
            pair_seeds = [crypto.mask_key(key, adv[u].body["s_pk"], rid) for u in peers]
            # u added sign(u, v) PRG(s_uv); remove it
            signs = np.array([-_sign(u, v) for u in peers], dtype=np.int64)
            total = _signed_sum(total, crypto.prg_uniform_many(pair_seeds, q, d), signs, q)
        self._vectors.clear()
        return total

    @property
    def result(self) -> I64:
        """``sum_{u in U_3} x_u mod q`` once the round is done."""
        if self.stage is not Stage.DONE or self._result is None:
            raise ProtocolError(f"server: no result; the round is {self.stage.value}")
        return self._result
