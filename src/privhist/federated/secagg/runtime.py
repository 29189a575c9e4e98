"""The networked runtime: one server, N client processes, gRPC over TLS.

Transport: gRPC (``grpcio``) with three unary methods of the service
``privhist.federated.v1.SecAgg`` carrying raw bytes, no protoc code generation:

* ``Join``: ``{"client": id}`` -> the task's name and public parameters;
* ``NextRound``: ``{"client": id, "after": r}`` -> the next secure sum's protocol parameters
  (blocks until the server opens it), ``{"finished": release}``, or ``{"excluded": true}``; the
  first call (``after = -1``) also tells the server the client is ready, and the first round
  opens when every client is ready (or ``join_timeout`` passed: the others are left out);
* ``Exchange``: one protocol message (:mod:`privhist.federated.secagg.messages`) -> the server's
  next message for that client, returned when the stage closes.

The server side (:class:`Coordinator`) drives the transport-free
:class:`~privhist.federated.secagg.protocol.SecAggServer`: a stage closes when every expected
client has sent, or after ``stage_timeout`` seconds (the silent ones have dropped). A rejected
message (malformed, replayed, out of order, ...) gets ``INVALID_ARGUMENT`` with a one-line reason
and changes nothing. Every stage is written to the round log. Links use TLS; for tests and for
``privhist federated run`` a self-signed certificate for 127.0.0.1 is generated with
``cryptography`` (:func:`self_signed_certificate`).

Dropouts can be injected per client (``drop_at``: the stage whose message it never sends, in
the first round); the client process then exits.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from privhist.core.errors import ProtocolAbort, ProtocolError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.federated.secagg.messages import SERVER, Message, decode
from privhist.federated.secagg.protocol import (
    STAGES,
    RoundConfig,
    SecAggClient,
    SecAggServer,
    Stage,
)
from privhist.federated.secagg.tasks import (
    RoundSpec,
    Task,
    make_task,
    noise_source,
    round_config,
)

SERVICE = "privhist.federated.v1.SecAgg"
#: the module ``run_local`` starts once per client (``privhist federated client``)
CLIENT_MODULE = "privhist.cli.federated_client"
#: bound on a JSON control message (Join, NextRound)
MAX_CONTROL_BYTES = 1 << 16
#: gRPC message size bound
MAX_GRPC_BYTES = 256 << 20

Log = Callable[[dict[str, Any]], None]


def self_signed_certificate(host: str = "127.0.0.1") -> tuple[bytes, bytes]:
    """A fresh P-256 key and a self-signed certificate for ``host`` (PEM key, PEM cert)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "privhist federated")])
    now = datetime.datetime.now(datetime.UTC)
    san: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        san.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        san.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def _control(data: bytes, fields: set[str]) -> dict[str, Any]:
    """A small JSON control request with exactly ``fields`` (integers)."""
    if len(data) > MAX_CONTROL_BYTES:
        raise ProtocolError("control message too large")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("control message is not JSON") from None
    if not isinstance(obj, dict) or set(obj) != fields:
        raise ProtocolError(f"control message must have the fields {sorted(fields)}")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in obj.values()):
        raise ProtocolError("control message fields must be integers")
    return obj


@dataclass
class StageRecord:
    """One line of the round log."""

    round: int
    stage: str
    expected: int
    received: int
    seconds: float
    timed_out: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "stage": self.stage,
            "expected": self.expected,
            "received": self.received,
            "seconds": round(self.seconds, 4),
            "timed_out": self.timed_out,
        }


class Coordinator:
    """The server: runs the task's rounds over the protocol, for the gRPC handlers.

    Args:
        task: The federated task (public parameters only).
        variant: ``"secagg"`` or ``"secagg+"``.
        stage_timeout: Seconds a stage waits for silent clients.
        join_timeout: Seconds to wait for all clients to join before the first round.
        threshold, neighbours: Protocol parameters (defaults per round).
        rng: The server's source (SecAgg+ graph, session id).
        log: Called with every round-log record (dict).
    """

    def __init__(
        self,
        task: Task,
        variant: str,
        *,
        stage_timeout: float = 10.0,
        join_timeout: float = 120.0,
        threshold: int | None = None,
        neighbours: int | None = None,
        rng: RandomSource | None = None,
        log: Log | None = None,
    ) -> None:
        if stage_timeout <= 0 or join_timeout <= 0:
            raise ValidationError("stage_timeout", "Coordinator", "> 0", stage_timeout)
        self.task = task
        self.variant = variant
        self.stage_timeout = float(stage_timeout)
        self.join_timeout = float(join_timeout)
        self.threshold = threshold
        self.neighbours = neighbours
        self.rng = SecureRandom() if rng is None else rng
        self.session = int(self.rng.uniform_below(1 << 40, 1)[0])
        self.log: Log = log or (lambda _r: None)
        self.records: list[StageRecord] = []
        self._cond = threading.Condition()
        self._joined: set[int] = set()
        self._ready: set[int] = set()
        self._round = -1
        self._round_payload: dict[str, Any] = {}
        self._round_clients: set[int] = set()
        self._server: SecAggServer | None = None
        self._closed = 0
        self._replies: dict[int, dict[int, bytes]] = {}
        self.release: dict[str, Any] | None = None
        self.error: str | None = None
        self._fetched_final: set[int] = set()
        self._alive: list[int] = list(range(task.clients))

    # -- handlers (gRPC threads) -----------------------------------------------------------

    def join(self, data: bytes) -> bytes:
        req = _control(data, {"client"})
        u = req["client"]
        if not 0 <= u < self.task.clients:
            raise ProtocolError(f"client id {u} outside [0, {self.task.clients})")
        with self._cond:
            self._joined.add(u)
            self._cond.notify_all()
        return json.dumps(
            {"task": self.task.name, "params": self.task.params, "variant": self.variant}
        ).encode()

    def next_round(self, data: bytes) -> bytes:
        req = _control(data, {"client", "after"})
        u, after = req["client"], req["after"]
        deadline = time.monotonic() + self.join_timeout + 60 * self.stage_timeout
        with self._cond:
            if after == -1 and u in self._joined:  # the client has built its task: ready
                self._ready.add(u)
                self._cond.notify_all()
            while self._round <= after and self.release is None and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProtocolError("timed out waiting for the next round")
                self._cond.wait(left)
            if self.error is not None:
                return json.dumps({"error": self.error}).encode()
            if self._round > after and self._server is not None:
                if u not in self._round_clients:
                    return json.dumps({"excluded": True}).encode()
                return json.dumps(self._round_payload).encode()
            self._fetched_final.add(u)
            self._cond.notify_all()
            return json.dumps({"finished": self.release}).encode()

    def exchange(self, data: bytes) -> bytes:
        with self._cond:
            server = self._server
            if server is None:
                raise ProtocolError("no round is open")
            msg = decode(data, server.config.max_message_bytes())
            stage_index = self._closed
            server.receive(msg)
            self._cond.notify_all()
            deadline = time.monotonic() + 2 * self.stage_timeout + 5.0
            while self._closed <= stage_index:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProtocolError("timed out waiting for the stage to close")
                self._cond.wait(left)
            reply = self._replies[stage_index].get(msg.sender)
            if reply is None:  # the stage closed without this client (aborted round)
                done = Message(
                    "done", server.config.round_id, SERVER, {"ok": False, "reason": "dropped"}
                )
                return done.encode()
            return reply

    # -- driver (server main thread) -------------------------------------------------------

    def run(self, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Wait for the clients, run every round, and return the release."""
        step = progress or (lambda _s: None)
        with self._cond:
            end = time.monotonic() + self.join_timeout
            while len(self._ready) < self.task.clients and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
            self._alive = sorted(self._ready)
        self.log({"event": "joined", "clients": len(self._alive)})
        try:
            while (spec := self.task.next_round()) is not None:
                self._run_round(spec, step)
        except (ProtocolError, ValidationError) as exc:
            with self._cond:
                self.error = str(exc)
                self._cond.notify_all()
            raise
        release = self.task.release()
        with self._cond:
            self.release = release
            self._server = None
            self._cond.notify_all()
            end = time.monotonic() + max(2.0, self.stage_timeout)
            while not set(self._alive) <= self._fetched_final and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
        return release

    def _run_round(self, spec: RoundSpec, step: Callable[[str], None]) -> None:
        config = round_config(
            spec,
            self._alive,
            self.variant,
            session=self.session,
            threshold=self.threshold,
            neighbours=self.neighbours,
        )
        server = SecAggServer(config, self.rng)
        with self._cond:
            self._server = server
            self._round_clients = set(config.clients)
            self._round_payload = {"spec": spec.to_dict(), "config": config.to_dict()}
            self._round = spec.index
            self._cond.notify_all()
        for stage in STAGES:
            t0 = time.monotonic()
            with self._cond:
                end = t0 + self.stage_timeout
                while server.pending() and time.monotonic() < end:
                    self._cond.wait(end - time.monotonic())
                timed_out = bool(server.pending())
                expected = len(server.pending()) + len(server.received[server.stage])
                received = len(server.received[server.stage])
                replies = server.close_stage()
                self._replies[self._closed] = {u: m.encode() for u, m in replies.items()}
                self._closed += 1
                self._cond.notify_all()
            rec = StageRecord(
                spec.index, stage, expected, received, time.monotonic() - t0, timed_out
            )
            self.records.append(rec)
            self.log(rec.to_dict())
            step(stage)
            if server.stage is Stage.ABORTED:
                raise ProtocolAbort(f"round {spec.index} aborted: {server.reason}")
        self.task.record(server.result, len(server.survivors["masked"]))
        self._alive = server.survivors["unmask"]


def _handler(fn: Callable[[bytes], bytes]) -> Callable[[bytes, Any], bytes]:
    def call(request: bytes, context: Any) -> bytes:
        try:
            return fn(request)
        except ProtocolError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc).splitlines()[0][:300])
            raise  # unreachable: abort raises

    return call


def start_server(
    coordinator: Coordinator, host: str, port: int, key_pem: bytes, cert_pem: bytes
) -> tuple[grpc.Server, int]:
    """Serve ``coordinator`` over TLS on ``host:port`` (port 0: any free port)."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(_handler(fn))
        for name, fn in (
            ("Join", coordinator.join),
            ("NextRound", coordinator.next_round),
            ("Exchange", coordinator.exchange),
        )
    }
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=coordinator.task.clients + 8),
        handlers=[grpc.method_handlers_generic_handler(SERVICE, handlers)],
        options=[
            ("grpc.max_receive_message_length", MAX_GRPC_BYTES),
            ("grpc.max_send_message_length", MAX_GRPC_BYTES),
        ],
    )
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)])
    bound = server.add_secure_port(f"{host}:{port}", creds)
    if bound == 0:
        raise ValidationError("port", "start_server", "a free port", f"{host}:{port}")
    server.start()
    return server, bound


@dataclass
class ClientResult:
    """How a client process ended."""

    client: int
    status: str  # "finished", "dropped", "excluded", "aborted", "refused"
    release: dict[str, Any] | None = None
    rounds: int = 0
    bytes_sent: int = 0
    detail: str = ""


def run_client(
    target: str,
    cert_pem: bytes,
    client: int,
    *,
    seed: int | None = None,
    drop_at: str | None = None,
    timeout: float = 300.0,
) -> ClientResult:
    """One client: join, take part in every round it is asked to, return the release."""
    if drop_at is not None and drop_at not in STAGES:
        raise ValidationError("drop_at", "run_client", f"one of {list(STAGES)}", drop_at)
    creds = grpc.ssl_channel_credentials(root_certificates=cert_pem)
    opts = [
        ("grpc.max_receive_message_length", MAX_GRPC_BYTES),
        ("grpc.max_send_message_length", MAX_GRPC_BYTES),
    ]
    with grpc.secure_channel(target, creds, options=opts) as channel:

        def call(method: str, payload: bytes) -> bytes:
            stub = channel.unary_unary(f"/{SERVICE}/{method}")
            try:
                out: bytes = stub(payload, timeout=timeout, wait_for_ready=True)
            except grpc.RpcError as exc:
                raise ProtocolError(f"{method}: {exc.code().name}: {exc.details()}") from None
            return out

        info = json.loads(call("Join", json.dumps({"client": client}).encode()))
        task = make_task(str(info["task"]), dict(info["params"]))
        rng = noise_source(seed, client)
        after, sent, rounds = -1, 0, 0
        while True:
            resp = json.loads(
                call("NextRound", json.dumps({"client": client, "after": after}).encode())
            )
            if "finished" in resp:
                return ClientResult(client, "finished", resp["finished"], rounds, sent)
            if resp.get("excluded"):
                return ClientResult(client, "excluded", None, rounds, sent)
            if "error" in resp:
                return ClientResult(client, "aborted", None, rounds, sent, str(resp["error"]))
            spec = RoundSpec.from_dict(resp["spec"])
            config = RoundConfig.from_dict(resp["config"])
            after = spec.index
            vector = task.client_vector(spec, client, rng)
            proto = SecAggClient(client, config, vector, SecureRandom())
            first = rounds == 0
            rounds += 1
            msg: Message | None = proto.advertise()
            while msg is not None:
                if first and drop_at == msg.type:
                    return ClientResult(client, "dropped", None, rounds, sent, drop_at)
                data = msg.encode()
                sent += len(data)
                reply = call("Exchange", data)
                try:
                    msg = proto.handle(reply)
                except ProtocolError as exc:  # refuse to go on (e.g. too few neighbours left)
                    return ClientResult(client, "refused", None, rounds, sent, str(exc))
            if proto.aborted_reason is not None:
                return ClientResult(client, "aborted", None, rounds, sent, proto.aborted_reason)


@dataclass
class RunResult:
    """A whole local run: the release, the round log and how every client ended."""

    release: dict[str, Any]
    records: list[StageRecord]
    clients: dict[int, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0


def drop_schedule(clients: int, fraction: float, rng: RandomSource) -> dict[int, str]:
    """Each client drops with probability ``fraction`` (rounded to whole 1/2**20), at a stage
    drawn uniformly among the five."""
    if not 0 <= fraction < 1:
        raise ValidationError("drop", "drop_schedule", "a fraction in [0, 1)", fraction)
    scale = 1 << 20
    cut = round(fraction * scale)
    out: dict[int, str] = {}
    for u in range(clients):
        if int(rng.uniform_below(scale, 1)[0]) < cut:
            out[u] = STAGES[int(rng.uniform_below(len(STAGES), 1)[0])]
    return out


def run_local(
    task_name: str,
    params: Mapping[str, Any],
    variant: str,
    *,
    seed: int | None = None,
    drops: Mapping[int, str] | None = None,
    stage_timeout: float = 10.0,
    join_timeout: float = 120.0,
    threshold: int | None = None,
    neighbours: int | None = None,
    log: Log | None = None,
    progress: Callable[[str], None] | None = None,
    python: str | None = None,
) -> RunResult:
    """Start a server here and one client *process* per client on 127.0.0.1 (TLS with a fresh
    self-signed certificate); wait until the release and until every process has exited."""
    task = make_task(task_name, dict(params))
    drop = dict(drops or {})
    for u, s in drop.items():
        if s not in STAGES or not 0 <= u < task.clients:
            raise ValidationError("drops", "run_local", "client ids -> stage names", f"{u}:{s}")
    key_pem, cert_pem = self_signed_certificate("127.0.0.1")
    coord = Coordinator(
        task,
        variant,
        stage_timeout=stage_timeout,
        join_timeout=join_timeout,
        threshold=threshold,
        neighbours=neighbours,
        log=log,
    )
    t0 = time.monotonic()
    server, port = start_server(coord, "127.0.0.1", 0, key_pem, cert_pem)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="privhist-federated-") as tmp:
        cert_path = Path(tmp) / "server.pem"
        cert_path.write_bytes(cert_pem)
        env = dict(os.environ)
        try:
            for u in range(task.clients):
                argv = [
                    python or sys.executable,
                    "-m",
                    CLIENT_MODULE,
                    "--server",
                    f"127.0.0.1:{port}",
                    "--cert",
                    str(cert_path),
                    "--id",
                    str(u),
                    "--json",
                ]
                if seed is not None:
                    argv += ["--seed", str(seed)]
                if u in drop:
                    argv += ["--drop-at", drop[u]]
                procs[u] = subprocess.Popen(
                    argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
                )
            release = coord.run(progress)
        finally:
            server.stop(grace=2.0)
            for u, p in procs.items():
                try:
                    out, err = p.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, err = p.communicate()
                line = out.decode().strip().splitlines()
                results[u] = {
                    "returncode": p.returncode,
                    "result": json.loads(line[-1]) if line and line[-1].startswith("{") else None,
                    "stderr": err.decode().strip()[-300:],
                }
    return RunResult(release, coord.records, results, time.monotonic() - t0)
