"""SecAgg / SecAgg+ behind the :class:`~privhist.federated.secure_sum.SecureAggregator`
interface: the protocol run in-process among simulated clients.

:func:`run_in_process` drives one :class:`~privhist.federated.secagg.protocol.SecAggServer` and
one :class:`~privhist.federated.secagg.protocol.SecAggClient` per input through the five stages,
every message going through its wire encoding (:mod:`privhist.federated.secagg.messages`), with
optional injected dropouts (a client dropping at a stage sends nothing from that stage on). It
also measures client and server CPU time and the bytes each client sends.

:class:`SecAggregator` is what TFFE/MFFE, sample-and-threshold rounds and TrieHH++ receive: its
``aggregate`` returns ``sum_{u in U_3} x_u mod q``, which equals
:class:`~privhist.federated.secure_sum.IdealSecureSum`'s output on the same inputs when no client
drops before sending its masked input. Its randomness (keys, seeds, graph) comes from its own
:class:`~privhist.core.random.RandomSource`, never from the devices' source, so a release is the
same whichever aggregator computed the sum.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ProtocolAbort, ProtocolError, UnsupportedError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.federated.secagg.crypto import Agreements
from privhist.federated.secagg.messages import Message
from privhist.federated.secagg.protocol import (
    STAGES,
    RoundConfig,
    SecAggClient,
    SecAggServer,
    Stage,
    default_neighbours,
    default_threshold,
)
from privhist.federated.secure_sum import IdealSecureSum, SecureAggregator

I64 = npt.NDArray[np.int64]

VARIANTS = ("secagg", "secagg+")


@dataclass
class RoundOutcome:
    """What one in-process round produced and cost.

    Attributes:
        server: The server state machine at the end (its ``transcript``, ``survivors``).
        clients: The client state machines.
        client_cpu: CPU seconds of every client's computation, summed.
        server_cpu: CPU seconds of the server's computation.
        bytes_sent: Bytes each client sent (by id).
        bytes_received: Bytes each client received (by id).
        refusals: Clients that stopped because a server message failed their checks (e.g.
            fewer than ``t`` of their neighbours survived), with the reason.
    """

    server: SecAggServer
    clients: dict[int, SecAggClient]
    client_cpu: float = 0.0
    server_cpu: float = 0.0
    bytes_sent: dict[int, int] = field(default_factory=dict)
    bytes_received: dict[int, int] = field(default_factory=dict)
    refusals: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.server.stage is Stage.DONE


def check_dropouts(dropouts: Mapping[str, Iterable[int]] | None, fn: str) -> dict[str, set[int]]:
    """``{stage: ids}`` with stages from :data:`~privhist.federated.secagg.protocol.STAGES`."""
    out: dict[str, set[int]] = {}
    for stage, ids in (dropouts or {}).items():
        if stage not in STAGES:
            raise ValidationError("dropouts", fn, f"stages among {list(STAGES)}", stage)
        out[stage] = {int(i) for i in ids}
    return out


def run_in_process(
    config: RoundConfig,
    vectors: Mapping[int, Any],
    client_rng: Callable[[int], RandomSource],
    server_rng: RandomSource,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    *,
    shared_agreements: bool = False,
    wire: bool = True,
) -> RoundOutcome:
    """One full round among in-process clients (see the module notes).

    Args:
        config: The round's public parameters (``vectors`` has one entry per client id).
        vectors: Each client's input.
        client_rng: ``id -> RandomSource`` for that client's keys and seeds.
        server_rng: The server's source (the SecAgg+ graph).
        dropouts: ``{stage: ids}``: these clients send nothing from that stage on.
        shared_agreements: Let the simulated clients share one memo of agreed keys, so each
            pair's two X25519 agreements are computed once instead of at both ends (the
            messages are the same bytes; ``client_cpu`` is then no longer each client's own
            cost, so measurements keep the default). The memo also hands each pair's mask
            ``PRG(s_{u,v})`` from the end that expanded it to the other end.
        wire: Send every message through its wire encoding (bytes counted). ``False`` hands
            the message objects over as they are (the same messages; nothing encoded,
            decoded or counted), for an aggregator that only wants the sum.
    """
    drop = check_dropouts(dropouts, "run_in_process")
    gone: set[int] = set()
    server = SecAggServer(config, server_rng)
    out = RoundOutcome(server, {})
    sent = dict.fromkeys(config.clients, 0)
    recv = dict.fromkeys(config.clients, 0)
    memo = Agreements(shared=True) if shared_agreements else None
    c0 = time.process_time()
    for u in config.clients:
        out.clients[u] = SecAggClient(u, config, vectors[u], client_rng(u), memo)
    client_cpu = time.process_time() - c0
    server_cpu = 0.0

    def encode(msg: Message) -> bytes | Message:
        return msg.encode() if wire else msg

    def size(data: bytes | Message) -> int:
        return len(data) if isinstance(data, bytes) else 0

    outbox: dict[int, bytes | Message] = {}
    gone |= drop.get("advertise", set())
    c0 = time.process_time()
    for u in config.clients:
        if u not in gone:
            outbox[u] = encode(out.clients[u].advertise())
    client_cpu += time.process_time() - c0
    for stage in STAGES:
        s0 = time.process_time()
        for u, data in outbox.items():
            sent[u] += size(data)
            server.receive(data)
        replies = server.close_stage()
        inbox = {u: encode(m) for u, m in replies.items()}
        server_cpu += time.process_time() - s0
        if server.stage is Stage.ABORTED:
            break
        nxt = STAGES[STAGES.index(stage) + 1] if stage != STAGES[-1] else None
        if nxt is not None:
            gone |= drop.get(nxt, set())
        outbox = {}
        c0 = time.process_time()
        for u, data in inbox.items():
            if u in gone:
                continue
            recv[u] += size(data)
            try:
                reply = out.clients[u].handle(data)
            except ProtocolError as exc:  # the client refuses to go on: for the server, a dropout
                out.refusals[u] = str(exc)
                gone.add(u)
                continue
            if reply is not None:
                outbox[u] = encode(reply)
        client_cpu += time.process_time() - c0
    out.client_cpu, out.server_cpu = client_cpu, server_cpu
    out.bytes_sent, out.bytes_received = sent, recv
    return out


#: the in-process simulation refuses full SecAgg rounds estimated above this many CPU seconds
MAX_SECAGG_SECONDS = 60.0

# CPU seconds of the simulation's unit operations on the reference machine (2 cores, x86-64,
# Python 3.11, cryptography 50; benchmarks/bench_secagg.py --cost-model measures them)
_KEYPAIR_S = 70e-6  # X25519 key pair from a seed
_AGREE_S = 40e-6  # X25519 exchange + HKDF
_PAIR_MISC_S = 40e-6  # per neighbour and client: AES-GCM both ways, commitments, encodings
_HORNER_S = 0.2e-6  # one step of Horner's rule on a client's two packed polynomials
_INTERPOLATE_S = 0.05e-6  # one small-integer product of an interpolation's weights
_PRG_CALL_S = 10e-6  # one mask expansion, fixed part
_PRG_ENTRY_S = 12e-9  # one mask entry (AES-CTR, rejection, modular addition)
_CLIENT_MISC_S = 300e-6  # per client and round: messages, state
# resident bytes
_PAIR_BYTES = 1200  # per neighbour and client: ciphertexts, commitments, held shares, memo
_CLIENT_BYTES = 12000  # per client: keys, state, encoded messages


@dataclass(frozen=True)
class RoundCost:
    """The estimated cost of one simulated round (:func:`round_cost`).

    Attributes:
        variant, clients, dimension, neighbours, threshold: The round.
        seconds: Estimated CPU seconds on the reference machine (all clients and the server).
        bytes: Estimated peak memory of the round's state.
    """

    variant: str
    clients: int
    dimension: int
    neighbours: int
    threshold: int
    seconds: float
    bytes: int

    def statement(self) -> str:
        """One line for the user, before the round runs."""
        graph = "complete graph" if self.variant == "secagg" else f"k = {self.neighbours}"
        return (
            f"{self.variant}: {self.clients} simulated clients, d = {self.dimension}, {graph}, "
            f"t = {self.threshold}: about {self.seconds:.3g} CPU s and "
            f"{self.bytes / 2**20:.0f} MiB per round (estimate)"
        )


def round_cost(variant: str, n: int, d: int, neighbours: int, threshold: int) -> RoundCost:
    """Operation counts of one in-process round times unit costs (module constants).

    Per round with ``s = k + 1`` (the closed neighbourhood; ``n`` for SecAgg): ``2n`` key
    pairs; ``n k / 2`` pairs of agreements (shared by both ends in the simulation); ``n k``
    encryptions and decryptions; ``n s t`` Horner steps to deal the shares (a client's two
    polynomials in one pass) and ``O(s^2)`` interpolation steps per rebuilt secret;
    ``n (k / 2 + 2)`` mask expansions of ``d`` entries (each pair's once, shared by its two ends
    in the simulation; each self mask by its client and by the server). Full SecAgg grows like
    ``n^3`` (the Shamir work), SecAgg+ like ``n log^2 n``.
    """
    k = n - 1 if neighbours == 0 or neighbours >= n - 1 else neighbours
    s = k + 1
    t = threshold
    seconds = (
        2 * n * _KEYPAIR_S
        + n * k * _AGREE_S
        + n * k * _PAIR_MISC_S
        + n * s * t * _HORNER_S
        + n * s * s * _INTERPOLATE_S
        + n * (k / 2 + 2) * (_PRG_CALL_S + d * _PRG_ENTRY_S)
        + n * _CLIENT_MISC_S
    )
    memory = n * k * _PAIR_BYTES + n * (_CLIENT_BYTES + 48 * d) + 2 * s * d * 8
    return RoundCost(variant, n, d, k if neighbours else 0, t, seconds, memory)


class SecAggregator(SecureAggregator):
    """The secure sum computed by running SecAgg (Bonawitz et al. 2017) or SecAgg+ (Bell et al.
    2020) among one simulated client per input vector.

    Args:
        modulus: ``q`` (2 to 2**62).
        dimension: ``d``.
        variant: ``"secagg"`` (complete graph) or ``"secagg+"`` (random Harary graph).
        threshold: ``t``; default a majority of the closed neighbourhood.
        neighbours: SecAgg+'s even degree ``k``; default
            :func:`~privhist.federated.secagg.protocol.default_neighbours`.
        rng: Source of all protocol randomness (``SecureRandom()`` by default); the clients'
            sources are derived from it, one after the other.
        dropouts: ``{stage: client indices}`` to inject (for tests and simulations); the sum is
            then over the clients whose masked input arrived (:attr:`survivors`).
        announce: Called with the round's estimated cost (:meth:`RoundCost.statement`) before
            each round runs.
        max_seconds: Full SecAgg rounds estimated above this many CPU seconds are refused
            before they run (:class:`~privhist.core.errors.UnsupportedError`, which suggests
            SecAgg+).

    The clients of one simulated round share a memo of agreed keys, AES-GCM key schedules and
    pairwise masks (:func:`run_in_process`'s ``shared_agreements``: what both ends of a pair
    compute alike is computed once), and hand each other the message objects without their
    wire encoding (``wire=False``); every client still draws its own keys, deals, encrypts,
    decrypts and checks its own shares and masks its own input, and the server checks,
    rebuilds and unmasks as over the network.

    >>> from privhist.core.random import SeededRandom
    >>> agg = SecAggregator(7, 2, rng=SeededRandom(1))
    >>> agg.aggregate([[[3, 6], [5, 1]], [4, 0]]).tolist()
    [5, 0]
    """

    def __init__(
        self,
        modulus: int,
        dimension: int,
        *,
        variant: str = "secagg",
        threshold: int | None = None,
        neighbours: int | None = None,
        rng: RandomSource | None = None,
        dropouts: Mapping[str, Iterable[int]] | None = None,
        round_id: int = 0,
        announce: Callable[[str], None] | None = None,
        max_seconds: float = MAX_SECAGG_SECONDS,
    ) -> None:
        super().__init__(modulus, dimension)
        fn = type(self).__name__
        if variant not in VARIANTS:
            raise ValidationError("variant", fn, f"one of {list(VARIANTS)}", variant)
        self.variant = variant
        self.threshold = threshold
        self.neighbours = neighbours
        self.rng = SecureRandom() if rng is None else rng
        self.dropouts = check_dropouts(dropouts, fn)
        self.round_id = round_id
        self.announce = announce
        if not (isinstance(max_seconds, int | float) and max_seconds > 0):
            raise ValidationError("max_seconds", fn, "a number > 0", max_seconds)
        self.max_seconds = float(max_seconds)
        self.cost: RoundCost | None = None
        self.contributors = 0
        self.survivors: list[int] = []
        self.last: RoundOutcome | None = None

    def config_for(self, n: int) -> RoundConfig:
        """The round's public parameters for ``n`` clients with ids ``0 .. n-1``."""
        if self.variant == "secagg":
            k = 0
        else:
            k = default_neighbours(n) if self.neighbours is None else self.neighbours
        t = default_threshold(n, k) if self.threshold is None else self.threshold
        return RoundConfig(self.round_id, self.modulus, self.dimension, tuple(range(n)), t, k)

    def plan(self, n: int) -> RoundCost:
        """The estimated cost of a round among ``n`` clients; refuses (before anything runs) a
        full SecAgg round estimated above ``max_seconds``."""
        config = self.config_for(n)
        cost = round_cost(self.variant, n, self.dimension, config.neighbours, config.threshold)
        if self.variant == "secagg" and cost.seconds > self.max_seconds:
            plus = SecAggregator(self.modulus, self.dimension, variant="secagg+").plan(n)
            raise UnsupportedError(
                f"secure sum 'secagg' among {n} simulated clients would take about "
                f"{cost.seconds:.0f} CPU s per round (its work grows like n^3; the limit is "
                f"{self.max_seconds:.0f} s): use 'secagg+' (k = {plus.neighbours}, about "
                f"{plus.seconds:.3g} CPU s)"
            )
        return cost

    def aggregate(self, shares: Iterable[Any]) -> I64:
        rows = [self._check_batch(b) for b in shares]
        x = np.concatenate(rows) if rows else np.zeros((0, self.dimension), dtype=np.int64)
        n = x.shape[0]
        if n < 2:
            raise ProtocolAbort(
                f"{type(self).__name__}: secure aggregation needs at least 2 clients; got {n}"
            )
        config = self.config_for(n)
        self.cost = self.plan(n)
        if self.announce is not None:
            self.announce(self.cost.statement())
        rng = self.rng
        outcome = run_in_process(
            config,
            {i: x[i] for i in range(n)},
            lambda _u: rng,
            rng,
            self.dropouts,
            shared_agreements=True,
            wire=False,
        )
        # keep what describes the round (graph, survivors, culprits, costs), not its messages
        outcome.clients.clear()
        outcome.server.transcript.clear()
        for received in outcome.server.received.values():
            received.clear()
        self.last = outcome
        server = outcome.server
        if server.stage is not Stage.DONE:
            raise ProtocolAbort(f"{type(self).__name__}: round aborted: {server.reason}")
        self.survivors = server.survivors["masked"]
        self.contributors = len(self.survivors)
        return server.result


class NamedFactory:
    """``(modulus, dimension) -> SecAggregator`` with the protocol's name (for metadata)."""

    def __init__(self, name: str, rng: RandomSource, options: dict[str, Any]) -> None:
        self.name = name
        self.rng = rng
        self.options = options

    def __call__(self, modulus: int, dimension: int) -> SecureAggregator:
        return SecAggregator(modulus, dimension, variant=self.name, rng=self.rng, **self.options)


def aggregator_factory(
    name: str, rng: RandomSource | None = None, **options: Any
) -> Callable[[int, int], SecureAggregator]:
    """``(modulus, dimension) -> SecureAggregator`` by name: ``ideal``, ``secagg``, ``secagg+``.

    >>> aggregator_factory("ideal")(5, 3).aggregate([[1, 2, 4]]).tolist()
    [1, 2, 4]
    """
    if name == "ideal":
        if options:
            raise ValidationError("options", "aggregator_factory", "none for 'ideal'", options)
        return IdealSecureSum
    if name not in VARIANTS:
        raise ValidationError(
            "secure_sum", "aggregator_factory", "one of ['ideal', 'secagg', 'secagg+']", name
        )
    return NamedFactory(name, SecureRandom() if rng is None else rng, dict(options))


def secure_sum_option(name: str) -> Callable[[int, int], SecureAggregator] | None:
    """The CLI's ``--secure-sum``: None for ``ideal`` (the protocols' aggregated, in-process
    path), else the protocol's factory with ``SecureRandom`` keys."""
    return None if name == "ideal" else aggregator_factory(name)


#: the choices of ``--secure-sum``
SECURE_SUM_CHOICES = ("ideal", *VARIANTS)
