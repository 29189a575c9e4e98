"""Two-aggregator Prio3Histogram over gRPC with mutual TLS and distributed DP.

Parties (identities are the common names of their certificates, :mod:`.tls`):

* ``client-<k>``: shards its bucket (:meth:`Prio3.shard_random`) and uploads the public share
  with its input share to each aggregator (``Upload``: leader share to the leader, helper seed
  to the helper). Each aggregator keeps at most one report per client identity and per nonce.
* ``leader`` (aggregator 0): on the collector's ``Collect``, verifies the stored reports with
  the helper in batches (the draft's ping-pong, Section 5.8.1: it sends its verifier shares,
  the helper answers with the verifier message or a rejection, both finish with
  ``verify_next``), tells the helper which reports both accepted (``Commit``: the helper
  aggregates exactly those), adds its noise (:mod:`.dp`) and returns its aggregate share.
* ``helper`` (aggregator 1): answers ``Verify`` and ``Commit`` from the leader only, and
  ``AggregateShare`` from the collector only; adds its own noise.
* ``collector``: fetches both aggregate shares, checks that both aggregators aggregated the same
  reports (count and a SHA-256 of their nonces) and at least ``min_batch_size`` of them, and
  unshards: ``counts + N_leader + N_helper`` as signed integers; optionally drops buckets below
  a threshold (post-processing).

A client's upload is binary, ``nonce || public share || input share`` in the draft's encodings
(so a report costs exactly the draft's encoding size plus gRPC and TLS framing); the messages
between the parties are JSON with hex-encoded Prio3 messages. All are unary gRPC methods of the
service ``privhist.federated.vdaf.v1.Prio3``. A handler reads the sender from
the verified peer certificate; requests from the wrong role get ``PERMISSION_DENIED``, malformed
ones ``INVALID_ARGUMENT``. A batch is collected once (Prio3 allows each report to be aggregated
once); reports are bounded by the task's ``max_reports``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import RandomSource, SecureRandom, SeededRandom
from privhist.federated.vdaf import tls
from privhist.federated.vdaf.dp import AggregatorNoise, false_positive_threshold
from privhist.federated.vdaf.field import FieldVec
from privhist.federated.vdaf.prio3 import Prio3, VerifyState, prio3_histogram

SERVICE = "privhist.federated.vdaf.v1.Prio3"
MAX_MESSAGE = 64 << 20
VERIFY_BATCH = 64


class Caller(Protocol):
    """Anything that sends one request to an aggregator (a :class:`Channel`)."""

    def call(self, method: str, payload: bytes) -> bytes: ...


class PermissionDenied(ProtocolError):
    """The authenticated sender may not call this method."""


@dataclass(frozen=True)
class Task:
    """The public parameters every party of one collection shares (a JSON file).

    Attributes:
        task_id: A name; the Prio3 application context is ``b"privhist vdaf " + task_id``.
        length: Histogram buckets.
        chunk_length: ParallelSum chunk (default ``isqrt(length)``, the draft's advice).
        epsilon, delta, noise: Each aggregator's noise (:class:`.dp.AggregatorNoise`).
        min_batch_size: Fewest accepted reports an aggregator releases a share for.
        max_reports: Most reports an aggregator stores.
    """

    task_id: str
    length: int
    epsilon: float
    delta: float = 0.0
    noise: str = "laplace"
    chunk_length: int = 0
    min_batch_size: int = 10
    max_reports: int = 100_000

    def __post_init__(self) -> None:
        fn = "vdaf Task"
        if not self.task_id or len(self.task_id) > 200:
            raise ValidationError("task_id", fn, "1 to 200 characters", self.task_id)
        if self.min_batch_size < 1 or self.max_reports < self.min_batch_size:
            raise ValidationError("min_batch_size", fn, "in [1, max_reports]", self.min_batch_size)
        if self.chunk_length == 0:
            object.__setattr__(self, "chunk_length", max(1, int(self.length**0.5)))
        self.noise_model()  # validates epsilon, delta, noise
        self.vdaf()

    @property
    def ctx(self) -> bytes:
        return b"privhist vdaf " + self.task_id.encode()

    def vdaf(self) -> Prio3[int, list[int]]:
        return prio3_histogram(2, self.length, self.chunk_length)

    def noise_model(self) -> AggregatorNoise:
        return AggregatorNoise(self.epsilon, self.delta, self.noise)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "length": self.length,
            "chunk_length": self.chunk_length,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "noise": self.noise,
            "min_batch_size": self.min_batch_size,
            "max_reports": self.max_reports,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        known = set(cls.__dataclass_fields__)
        if not isinstance(d, dict) or not set(d) <= known or "task_id" not in d:
            raise ValidationError(
                "task", "vdaf Task", f"a JSON object with keys {sorted(known)}", d
            )
        return cls(**d)

    @classmethod
    def load(cls, path: str | Path) -> Task:
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as exc:
            raise ValidationError("task", "vdaf Task", "a readable task JSON file", path) from exc


def _json(data: bytes, keys: set[str]) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("request is not JSON") from None
    if not isinstance(obj, dict) or set(obj) != keys:
        raise ProtocolError(f"request must have the fields {sorted(keys)}")
    return obj


def _unhex(x: Any, what: str) -> bytes:
    if not isinstance(x, str):
        raise ProtocolError(f"{what} must be a hex string")
    try:
        return bytes.fromhex(x)
    except ValueError:
        raise ProtocolError(f"{what} is not hex") from None


def _checksum(nonces: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for n in sorted(nonces):
        h.update(n)
    return h.hexdigest()


@dataclass
class _Report:
    client: str
    public: bytes
    share: bytes


@dataclass
class _Aggregator:
    """State and checks both aggregators share."""

    task: Task
    agg_id: int
    verify_key: bytes
    rng: RandomSource
    vdaf: Prio3[int, list[int]] = field(init=False)
    reports: dict[bytes, _Report] = field(default_factory=dict)
    clients: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.vdaf = self.task.vdaf()
        if len(self.verify_key) != self.vdaf.VERIFY_KEY_SIZE:
            raise ValidationError("verify_key", "aggregator", "32 bytes", len(self.verify_key))

    def upload(self, sender: str, data: bytes) -> bytes:
        """A client's report, in binary: ``nonce || public share || input share`` (the
        draft's encodings, whose lengths the task fixes)."""
        if not sender.startswith("client-"):
            raise PermissionDenied(f"{sender} is not a client")
        k = self.vdaf.NONCE_SIZE
        pub = self.vdaf.xof.SEED_SIZE * self.vdaf.SHARES if self.vdaf.uses_joint_rand else 0
        if len(data) != k + pub + self.vdaf.input_share_size(self.agg_id):
            raise ProtocolError("report of the wrong size")
        nonce, public, share = data[:k], data[k : k + pub], data[k + pub :]
        self.vdaf.decode_public_share(public)  # lengths only; contents are checked in verify
        with self.lock:
            if sender in self.clients:
                raise ProtocolError(f"{sender} already uploaded a report")
            if nonce in self.reports:
                raise ProtocolError("nonce already used")
            if len(self.reports) >= self.task.max_reports:
                raise ProtocolError("the task holds its maximum number of reports")
            self.clients.add(sender)
            self.reports[nonce] = _Report(sender, public, share)
        return b"{}"

    def noisy(self, agg: FieldVec) -> tuple[FieldVec, bool]:
        noise = self.task.noise_model().sample(self.task.length, self.rng)
        return agg + self.vdaf.field.from_small(noise), self.rng.private


class Helper(_Aggregator):
    """Aggregator 1."""

    def __init__(self, task: Task, verify_key: bytes, rng: RandomSource | None = None) -> None:
        super().__init__(task, 1, verify_key, SecureRandom() if rng is None else rng)
        self.pending: dict[str, dict[bytes, FieldVec]] = {}
        self.used: set[bytes] = set()
        self.results: dict[str, dict[str, Any]] = {}

    def verify(self, sender: str, data: bytes) -> bytes:
        if sender != "leader":
            raise PermissionDenied(f"{sender} is not the leader")
        req = _json(data, {"batch", "items"})
        batch = str(req["batch"])
        items = req["items"]
        if not isinstance(items, list) or len(items) > 4 * VERIFY_BATCH:
            raise ProtocolError("items must be a bounded list")
        vdaf, ctx = self.vdaf, self.task.ctx
        # the reports this helper can verify: known, not verified before, same public share,
        # and decodable; the others are answered with a rejection
        todo: list[tuple[int, bytes, Any, Any, Any]] = []
        for k, item in enumerate(items):
            if not isinstance(item, dict) or set(item) != {"nonce", "public_share", "verifier"}:
                raise ProtocolError("item must have nonce, public_share, verifier")
            nonce = _unhex(item["nonce"], "nonce")
            with self.lock:
                if batch in self.results:
                    raise ProtocolError("batch already committed")
                rep = self.reports.get(nonce)
                fresh = rep is not None and nonce not in self.used
                self.used.add(nonce)
            if not fresh or rep is None or rep.public != _unhex(item["public_share"], "public"):
                continue
            try:
                public = vdaf.decode_public_share(rep.public)
                share = vdaf.decode_input_share(1, rep.share)
                leader_vs = vdaf.decode_verifier_share(_unhex(item["verifier"], "verifier"))
            except ProtocolError:
                continue
            todo.append((k, nonce, public, share, leader_vs))
        answers: list[str | None] = [None] * len(items)
        inits = vdaf.verify_init_many(
            self.verify_key, ctx, 1, [(n, pub, sh) for _, n, pub, sh, _ in todo]
        )
        live = [(t, init) for t, init in zip(todo, inits, strict=True) if isinstance(init, tuple)]
        msgs = vdaf.verifier_shares_to_message_many(ctx, [[t[4], init[1]] for t, init in live])
        for (t, init), msg in zip(live, msgs, strict=True):
            if isinstance(msg, ProtocolError):
                continue
            try:
                out = vdaf.verify_next(init[0], msg)
            except ProtocolError:
                continue
            with self.lock:
                self.pending.setdefault(batch, {})[t[1]] = out
            answers[t[0]] = vdaf.encode_verifier_message(msg).hex()
        return json.dumps({"messages": answers}).encode()

    def commit(self, sender: str, data: bytes) -> bytes:
        if sender != "leader":
            raise PermissionDenied(f"{sender} is not the leader")
        req = _json(data, {"batch", "accepted"})
        batch = str(req["batch"])
        nonces = [_unhex(x, "nonce") for x in req["accepted"]]
        with self.lock:
            if batch in self.results:
                raise ProtocolError("batch already committed")
            pending = self.pending.pop(batch, {})
            if len(set(nonces)) != len(nonces) or not set(nonces) <= set(pending):
                raise ProtocolError("commit names reports the helper did not accept")
            agg = self.vdaf.agg_init()
            for n in nonces:
                agg = self.vdaf.agg_update(agg, pending[n])
            if len(nonces) < self.task.min_batch_size:
                raise ProtocolError(f"fewer than {self.task.min_batch_size} accepted reports")
            noisy, private = self.noisy(agg)
            self.results[batch] = {
                "agg_share": self.vdaf.encode_agg_share(noisy).hex(),
                "count": len(nonces),
                "checksum": _checksum(nonces),
                "private": private,
            }
            return json.dumps({"count": len(nonces), "checksum": _checksum(nonces)}).encode()

    def aggregate_share(self, sender: str, data: bytes) -> bytes:
        if sender != "collector":
            raise PermissionDenied(f"{sender} is not the collector")
        req = _json(data, {"batch"})
        with self.lock:
            res = self.results.get(str(req["batch"]))
        if res is None:
            raise ProtocolError("no such batch")
        return json.dumps(res).encode()

    def handlers(self) -> dict[str, Callable[[str, bytes], bytes]]:
        return {
            "Upload": self.upload,
            "Verify": self.verify,
            "Commit": self.commit,
            "AggregateShare": self.aggregate_share,
        }


class Leader(_Aggregator):
    """Aggregator 0; ``helper_call(method, payload)`` reaches the helper (authenticated)."""

    def __init__(
        self,
        task: Task,
        verify_key: bytes,
        helper_call: Callable[[str, bytes], bytes],
        rng: RandomSource | None = None,
    ) -> None:
        super().__init__(task, 0, verify_key, SecureRandom() if rng is None else rng)
        self.helper_call = helper_call
        self.collected = False

    def collect(self, sender: str, data: bytes) -> bytes:
        if sender != "collector":
            raise PermissionDenied(f"{sender} is not the collector")
        _json(data, set())
        with self.lock:
            if self.collected:
                raise ProtocolError("the batch was already collected")
            self.collected = True
            reports = list(self.reports.items())
        vdaf, ctx = self.vdaf, self.task.ctx
        batch = os.urandom(16).hex()
        agg = vdaf.agg_init()
        accepted: list[bytes] = []
        rejected = 0
        for start in range(0, len(reports), VERIFY_BATCH):
            chunk = reports[start : start + VERIFY_BATCH]
            states: list[tuple[bytes, VerifyState]] = []
            items = []
            decoded = []
            for nonce, rep in chunk:
                try:
                    public = vdaf.decode_public_share(rep.public)
                    share = vdaf.decode_input_share(0, rep.share)
                except ProtocolError:
                    rejected += 1
                    continue
                decoded.append((nonce, public, share, rep.public))
            inits = vdaf.verify_init_many(
                self.verify_key, ctx, 0, [(n, pub, sh) for n, pub, sh, _ in decoded]
            )
            for (nonce, _, _, public_bytes), init in zip(decoded, inits, strict=True):
                if not isinstance(init, tuple):
                    rejected += 1
                    continue
                state, vs = init
                states.append((nonce, state))
                items.append(
                    {
                        "nonce": nonce.hex(),
                        "public_share": public_bytes.hex(),
                        "verifier": vdaf.encode_verifier_share(vs).hex(),
                    }
                )
            if not items:
                continue
            resp = json.loads(
                self.helper_call("Verify", json.dumps({"batch": batch, "items": items}).encode())
            )
            messages = resp.get("messages")
            if not isinstance(messages, list) or len(messages) != len(states):
                raise ProtocolError("the helper's answer does not match the request")
            for (nonce, state), msg_hex in zip(states, messages, strict=True):
                if msg_hex is None:
                    rejected += 1
                    continue
                try:
                    msg = vdaf.decode_verifier_message(_unhex(msg_hex, "message"))
                    out = vdaf.verify_next(state, msg)
                except ProtocolError:
                    rejected += 1
                    continue
                agg = vdaf.agg_update(agg, out)
                accepted.append(nonce)
        if len(accepted) < self.task.min_batch_size:
            raise ProtocolError(
                f"{len(accepted)} accepted reports, fewer than {self.task.min_batch_size}"
            )
        commit = {"batch": batch, "accepted": [n.hex() for n in accepted]}
        ack = json.loads(self.helper_call("Commit", json.dumps(commit).encode()))
        if ack.get("count") != len(accepted) or ack.get("checksum") != _checksum(accepted):
            raise ProtocolError("the helper aggregated other reports")
        noisy, private = self.noisy(agg)
        return json.dumps(
            {
                "batch": batch,
                "agg_share": vdaf.encode_agg_share(noisy).hex(),
                "count": len(accepted),
                "rejected": rejected,
                "checksum": _checksum(accepted),
                "private": private,
            }
        ).encode()

    def handlers(self) -> dict[str, Callable[[str, bytes], bytes]]:
        return {"Upload": self.upload, "Collect": self.collect}


# -- transport ------------------------------------------------------------------------------


def _rpc(fn: Callable[[str, bytes], bytes]) -> Callable[[bytes, Any], bytes]:
    def call(request: bytes, context: Any) -> bytes:
        try:
            sender = tls.peer_identity(context)
            return fn(sender, request)
        except PermissionDenied as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc)[:300])
            raise
        except (ProtocolError, ValidationError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc).splitlines()[0][:300])
            raise

    return call


def serve(
    party: Leader | Helper, creds: tls.Credentials, host: str = "127.0.0.1", port: int = 0
) -> tuple[grpc.Server, int]:
    """Serve an aggregator with mutual TLS on ``host:port`` (0: any free port)."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(_rpc(fn)) for name, fn in party.handlers().items()
    }
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        handlers=[grpc.method_handlers_generic_handler(SERVICE, handlers)],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE),
        ],
    )
    bound = server.add_secure_port(f"{host}:{port}", tls.server_credentials(creds))
    if bound == 0:
        raise ValidationError("port", "vdaf serve", "a free port", f"{host}:{port}")
    server.start()
    return server, bound


class Channel:
    """A mutually authenticated channel to one aggregator."""

    def __init__(self, target: str, creds: tls.Credentials, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self._channel = grpc.secure_channel(
            target,
            tls.channel_credentials(creds),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE),
                ("grpc.max_send_message_length", MAX_MESSAGE),
            ],
        )

    def call(self, method: str, payload: bytes) -> bytes:
        stub = self._channel.unary_unary(f"/{SERVICE}/{method}")
        try:
            out: bytes = stub(payload, timeout=self.timeout, wait_for_ready=True)
        except grpc.RpcError as exc:
            raise ProtocolError(f"{method}: {exc.code().name}: {exc.details()}") from None
        return out

    def close(self) -> None:
        self._channel.close()


def upload(
    task: Task,
    bucket: int,
    leader: Caller,
    helper: Caller,
    rng: RandomSource | None = None,
) -> int:
    """A client's report: shard ``bucket`` and send each aggregator its share; returns the
    bytes sent (JSON framing included)."""
    vdaf = task.vdaf()
    nonce, public, shares = vdaf.shard_random(task.ctx, bucket, rng)
    return send_report(vdaf, nonce, public, shares, leader, helper)


def send_report(
    vdaf: Prio3[Any, Any],
    nonce: bytes,
    public: Any,
    shares: list[Any],
    leader: Caller,
    helper: Caller,
) -> int:
    """Send an already sharded report (an honest one, or one built by a test's malicious
    client with :meth:`Prio3.shard_encoded`)."""
    sent = 0
    for channel, share in ((leader, shares[0]), (helper, shares[1])):
        body = nonce + vdaf.encode_public_share(public) + vdaf.encode_input_share(share)
        sent += len(body)
        channel.call("Upload", body)
    return sent


def collect(
    task: Task, leader: Caller, helper: Caller, threshold: int | None = None
) -> dict[str, Any]:
    """The collector: both aggregate shares, checked and unsharded into the noisy histogram.

    Args:
        threshold: Drop buckets whose noisy count is below it (post-processing); ``None``
            keeps every bucket.
    """
    vdaf = task.vdaf()
    lead = json.loads(leader.call("Collect", b"{}"))
    help_ = json.loads(helper.call("AggregateShare", json.dumps({"batch": lead["batch"]}).encode()))
    if lead["count"] != help_["count"] or lead["checksum"] != help_["checksum"]:
        raise ProtocolError("the aggregators aggregated different reports")
    if lead["count"] < task.min_batch_size:
        raise ProtocolError(f"batch of {lead['count']} reports below {task.min_batch_size}")
    shares = [
        vdaf.decode_agg_share(_unhex(lead["agg_share"], "agg_share")),
        vdaf.decode_agg_share(_unhex(help_["agg_share"], "agg_share")),
    ]
    counts = vdaf.merge(shares).to_signed()
    keep = list(range(task.length))
    if threshold is not None:
        keep = [b for b in keep if counts[b] >= threshold]
    return {
        "buckets": keep,
        "counts": [counts[b] for b in keep],
        "reports": lead["count"],
        "rejected": lead["rejected"],
        "threshold": threshold,
        "guarantee": task.noise_model().to_dict(),
        "private": bool(lead["private"] and help_["private"]),
        "task": task.to_dict(),
    }


def auto_threshold(task: Task, expected_false: float = 0.05) -> int:
    """:func:`.dp.false_positive_threshold` for the task."""
    return false_positive_threshold(task.noise_model(), task.length, expected_false)


#: the malicious reports :func:`invalid_report` builds, in turn
INVALID_KINDS = ("count of 1000", "two buckets", "no bucket", "bucket of -1", "split public share")


def invalid_report(task: Task, kind: int, rng: RandomSource) -> tuple[bytes, Any, list[Any], Any]:
    """A malicious client's report (for demonstrations and tests): an encoded vector that is not
    one-hot, proved and shared like an honest one; kind 4 is a valid vector whose public share
    is sent altered to the helper. Returns the nonce, the public share, the input shares and the
    public share to send the helper."""
    vdaf = task.vdaf()
    enc = [0] * task.length
    k = kind % len(INVALID_KINDS)
    if k == 0:
        enc[0] = 1000
    elif k == 1:
        enc[0] = enc[-1] = 1
    elif k == 3:
        enc[0], enc[-1] = -1, 1
        enc[task.length // 2] += 1
    elif k == 4:
        enc[0] = 1
    words = rng.uint64((vdaf.NONCE_SIZE + vdaf.RAND_SIZE) // 8).tobytes()
    nonce, rand = words[: vdaf.NONCE_SIZE], words[vdaf.NONCE_SIZE :]
    public, shares = vdaf.shard_encoded(task.ctx, vdaf.field.from_ints(enc), nonce, rand)
    helper_public = public
    if k == 4 and public is not None:
        helper_public = [bytes([public[0][0] ^ 1]) + public[0][1:], *public[1:]]
    return nonce, public, shares, helper_public


class _Drop:
    """A :class:`Caller` that sends nothing (a report meant for the other aggregator only)."""

    def call(self, method: str, payload: bytes) -> bytes:
        return b"{}"


@dataclass
class LocalRun:
    """What :func:`run_local` measured."""

    release: dict[str, Any]
    seconds: float
    upload_bytes: int


def run_local(
    task: Task,
    clients: int,
    invalid: int = 0,
    *,
    buckets: Callable[[int], int] | None = None,
    seed: int | None = None,
    threshold: int | None = None,
) -> LocalRun:
    """Leader, helper, collector and ``clients`` clients on 127.0.0.1 in this process, with a
    fresh PKI in a temporary folder and a fresh verification key; ``invalid`` clients, evenly
    spread, send :func:`invalid_report` reports. ``seed`` makes the clients' and the
    aggregators' randomness reproducible (the release is then marked not private)."""
    if not 0 <= invalid <= clients:
        raise ValidationError("invalid", "run_local", f"in [0, {clients}]", invalid)
    pick = buckets or (lambda i: i % task.length)
    t0 = time.perf_counter()
    key = os.urandom(32)
    rng: RandomSource = SecureRandom() if seed is None else SeededRandom(seed)
    lead_rng = None if seed is None else SeededRandom(seed + 1)
    help_rng = None if seed is None else SeededRandom(seed + 2)
    step = clients // invalid if invalid else clients + 1
    bad = [i * step for i in range(invalid)]
    vdaf = task.vdaf()
    sent = 0
    with tempfile.TemporaryDirectory(prefix="privhist-vdaf-") as tmp:
        names = ["leader", "helper", "collector"] + [f"client-{i}" for i in range(clients)]
        pki = tls.issue(tmp, names)
        helper = Helper(task, key, help_rng)
        hserver, hport = serve(helper, pki["helper"])
        to_helper = Channel(f"127.0.0.1:{hport}", pki["leader"])
        leader = Leader(task, key, to_helper.call, lead_rng)
        lserver, lport = serve(leader, pki["leader"])
        try:
            for i in range(clients):
                lead = Channel(f"127.0.0.1:{lport}", pki[f"client-{i}"])
                help_ = Channel(f"127.0.0.1:{hport}", pki[f"client-{i}"])
                try:
                    if i in bad:
                        nonce, public, shares, hpub = invalid_report(task, bad.index(i), rng)
                        send_report(vdaf, nonce, public, shares, lead, _Drop())
                        send_report(vdaf, nonce, hpub, shares, _Drop(), help_)
                    else:
                        sent += upload(task, pick(i), lead, help_, rng)
                finally:
                    lead.close()
                    help_.close()
            c_lead = Channel(f"127.0.0.1:{lport}", pki["collector"])
            c_help = Channel(f"127.0.0.1:{hport}", pki["collector"])
            try:
                release = collect(task, c_lead, c_help, threshold)
            finally:
                c_lead.close()
                c_help.close()
        finally:
            to_helper.close()
            lserver.stop(0)
            hserver.stop(0)
    # an honest client's bytes; both uploads carry the nonce: count it once, as the draft does
    honest = max(1, clients - invalid)
    per_client = (sent - vdaf.NONCE_SIZE * (clients - invalid)) // honest
    return LocalRun(release, time.perf_counter() - t0, per_client)
