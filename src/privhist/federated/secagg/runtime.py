"""The networked runtime: one server, N client processes, gRPC over mutual TLS.

Transport: gRPC (``grpcio``) with three unary methods of the service
``privhist.federated.v1.SecAgg`` carrying raw bytes, no protoc code generation:

* ``Join``: ``{"client": id}`` -> the task's name and public parameters;
* ``NextRound``: ``{"client": id, "after": r}`` -> the next secure sum's protocol parameters
  (blocks until the server opens it), ``{"finished": release}``, ``{"excluded": true}`` or
  ``{"error": reason}``; the first call (``after = -1``) also tells the server the client is
  ready, and the first round opens when every client is ready (or ``join_timeout`` passed: the
  others are left out);
* ``Exchange``: one protocol message (:mod:`privhist.federated.secagg.messages`) -> the server's
  next message for that client, returned when the stage closes.

**Who is calling.** The server is started with a deployment's CA
(:mod:`privhist.federated.secagg.credentials`) and requires a client certificate signed by it
on every connection; a call's client id is the one in the verified certificate. A control
request naming another id, or a protocol message whose ``sender`` is another client, is refused
(``PERMISSION_DENIED``) and changes nothing. Without a CA the server only runs with
``insecure=True`` (ids are then whatever clients claim; loopback demos only).

**Bounded resources.** Every call counts against limits while it runs: at most
``PER_CLIENT_CALLS`` per client id and per connection, and a global bound below the worker
threads, so one client's flood (or one connection's) gets ``RESOURCE_EXHAUSTED`` at once while
every other client keeps a thread; a ``NextRound`` for a round that cannot exist yet is refused
instead of waiting; waits end when the caller cancels. Messages are bounded by the task's
largest round (the gRPC limit) and JSON nesting by
:data:`~privhist.federated.secagg.messages.MAX_DEPTH` (``INVALID_ARGUMENT``).

The server side (:class:`Coordinator`) drives the transport-free
:class:`~privhist.federated.secagg.protocol.SecAggServer`: a stage closes when every expected
client has sent, or after ``stage_timeout`` seconds (the silent ones have dropped). A rejected
message (malformed, replayed, out of order, ...) gets ``INVALID_ARGUMENT`` with a one-line reason
and changes nothing. Every stage is written to the round log, with the clients the round caught
cheating. The threshold and the minimum number of contributors are fixed from the planned
population before the first round, so fewer clients joining never lowers them.

Dropouts can be injected per client (``drop_at``: the stage whose message it never sends, in
the first round); the client process then exits. The client side is
:mod:`privhist.federated.secagg.client`.
"""

from __future__ import annotations

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
from typing import Any

import grpc

from privhist.core.errors import ProtocolAbort, ProtocolError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.federated.secagg import credentials
from privhist.federated.secagg.messages import (
    MAX_CONTROL_BYTES,
    SERVER,
    SERVICE,
    Message,
    decode,
    loads,
)
from privhist.federated.secagg.protocol import (
    STAGES,
    RoundConfig,
    SecAggServer,
    Stage,
)
from privhist.federated.secagg.tasks import RoundSpec, Task, make_task, round_config

#: the module ``run_local`` starts once per client
CLIENT_MODULE = "privhist.federated.secagg.client"
#: calls one client id (or one connection) may have running at once; an honest client has one
PER_CLIENT_CALLS = 2
#: most clients one server takes (two worker threads each)
MAX_SERVE_CLIENTS = 4096
#: most client processes ``run_local`` starts on this machine
MAX_LOCAL_CLIENTS = 256

Log = Callable[[dict[str, Any]], None]


class Denied(ProtocolError):
    """A call by someone who may not make it (``PERMISSION_DENIED``)."""


class Busy(ProtocolError):
    """A call over a resource limit (``RESOURCE_EXHAUSTED``)."""


def self_signed_certificate(host: str = "127.0.0.1") -> tuple[bytes, bytes]:
    """A fresh key and a certificate for ``host`` signed by a throw-away CA (PEM key, PEM
    certificate chain ending with the CA), for servers run with ``insecure=True``."""
    authority = credentials.Authority(days=1)
    pem = authority.server(host)
    return pem.key, pem.cert + authority.cert_pem


def check_host(host: str, function: str) -> str:
    """An IP address or a DNS name (raises :class:`ValidationError` otherwise)."""
    if not isinstance(host, str) or not 0 < len(host) <= 253:
        raise ValidationError("host", function, "an IP address or a host name", host)
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    labels = host.split(".")
    digits = all(lab.isdigit() for lab in labels)
    ok = all(
        0 < len(lab) <= 63
        and all(c.isalnum() or c == "-" for c in lab)
        and lab[0] != "-"
        and lab[-1] != "-"
        for lab in labels
    )
    if digits or not ok:
        raise ValidationError("host", function, "an IP address or a host name", host)
    return host


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _control(data: bytes, fields: set[str]) -> dict[str, Any]:
    """A small JSON control request with exactly ``fields`` (integers)."""
    if len(data) > MAX_CONTROL_BYTES:
        raise ProtocolError("control message too large")
    obj = loads(data, "control message")
    if not isinstance(obj, dict) or set(obj) != fields:
        raise ProtocolError(f"control message must have the fields {sorted(fields)}")
    if any(type(v) is not int or abs(v) >= 1 << 63 for v in obj.values()):
        raise ProtocolError("control message fields must be 64-bit integers")
    return obj


@dataclass(frozen=True)
class Caller:
    """Who made a call: the client id of its verified certificate (None without
    authentication) and its connection."""

    client: int | None
    peer: str


@dataclass
class StageRecord:
    """One line of the round log."""

    round: int
    stage: str
    expected: int
    received: int
    seconds: float
    timed_out: bool
    culprits: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "round": self.round,
            "stage": self.stage,
            "expected": self.expected,
            "received": self.received,
            "seconds": round(self.seconds, 4),
            "timed_out": self.timed_out,
        }
        if self.culprits:
            out["culprits"] = {str(u): why for u, why in sorted(self.culprits.items())}
        return out


class _Limits:
    """Running calls per client id, per connection and in all."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._lock = threading.Lock()
        self._running = 0
        self._by_client: dict[int, int] = {}
        self._by_peer: dict[str, int] = {}

    def enter(self, caller: Caller) -> None:
        with self._lock:
            if self._running >= self.total:
                raise Busy("the server is at its limit of running calls")
            if self._by_peer.get(caller.peer, 0) >= PER_CLIENT_CALLS:
                raise Busy(f"at most {PER_CLIENT_CALLS} running calls per connection")
            if caller.client is not None and (
                self._by_client.get(caller.client, 0) >= PER_CLIENT_CALLS
            ):
                raise Busy(f"at most {PER_CLIENT_CALLS} running calls per client")
            self._running += 1
            self._by_peer[caller.peer] = self._by_peer.get(caller.peer, 0) + 1
            if caller.client is not None:
                self._by_client[caller.client] = self._by_client.get(caller.client, 0) + 1

    def leave(self, caller: Caller) -> None:
        with self._lock:
            self._running -= 1
            left = self._by_peer[caller.peer] - 1
            if left:
                self._by_peer[caller.peer] = left
            else:
                del self._by_peer[caller.peer]
            if caller.client is not None:
                left = self._by_client[caller.client] - 1
                if left:
                    self._by_client[caller.client] = left
                else:
                    del self._by_client[caller.client]


def message_bound(task: Task) -> int:
    """A bound on any message of ``task``'s rounds (the gRPC receive limit)."""
    ids = tuple(range(max(2, task.clients)))
    bound = MAX_CONTROL_BYTES
    for modulus, dimension in task.round_shapes():
        config = RoundConfig(0, modulus, dimension, ids, 2)
        bound = max(bound, config.max_message_bytes())
    return bound


class Coordinator:
    """The server: runs the task's rounds over the protocol, for the gRPC handlers.

    Args:
        task: The federated task (public parameters only).
        variant: ``"secagg"`` or ``"secagg+"``.
        stage_timeout: Seconds a stage waits for silent clients.
        join_timeout: Seconds to wait for all clients to join before the first round.
        threshold, neighbours: Protocol parameters (defaults from the planned population).
        rng: The server's source (SecAgg+ graph, session id, consistency challenges).
        log: Called with every round-log record (dict).
        insecure: Accept calls without a client certificate, taking ids from the requests
            (loopback demos only; module notes).
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
        insecure: bool = False,
    ) -> None:
        fn = "Coordinator"
        for name, value in (("stage_timeout", stage_timeout), ("join_timeout", join_timeout)):
            if not isinstance(value, int | float) or not 0 < value <= 86400:
                raise ValidationError(name, fn, "a number of seconds in (0, 86400]", value)
        if not 2 <= task.clients <= MAX_SERVE_CLIENTS:
            raise ValidationError("clients", fn, f"in [2, {MAX_SERVE_CLIENTS}]", task.clients)
        self.task = task
        self.variant = variant
        self.stage_timeout = float(stage_timeout)
        self.join_timeout = float(join_timeout)
        self.threshold = threshold
        self.neighbours = neighbours
        self.insecure = bool(insecure)
        self.min_contributors = task.min_contributors()
        # the round's parameters for the planned population: checked now, stated before it runs
        self.plan = round_config(
            RoundSpec(0, 2, 1),
            list(range(task.clients)),
            variant,
            planned=task.clients,
            threshold=threshold,
            neighbours=neighbours,
            min_contributors=self.min_contributors,
        )
        self.rng = SecureRandom() if rng is None else rng
        self.session = int(self.rng.uniform_below(1 << 40, 1)[0])
        self.log: Log = log or (lambda _r: None)
        self.records: list[StageRecord] = []
        self.workers = 2 * task.clients + 8
        self.limits = _Limits(self.workers - 4)
        self.max_message_bytes = message_bound(task)
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

    # -- who is calling ----------------------------------------------------------------------

    def caller(self, context: Any) -> Caller:
        """The caller of a gRPC call: its certificate's client id (refused when it has none or
        one outside the task), or, insecure, none."""
        peer = str(context.peer())
        if self.insecure:
            return Caller(None, peer)
        auth = context.auth_context() or {}
        client = credentials.client_id_of(list(auth.get("x509_common_name", [])))
        if client is None:
            raise Denied("the connection has no client certificate of this deployment")
        if client >= self.task.clients:
            raise Denied(f"client {client} is not one of the task's {self.task.clients} clients")
        return Caller(client, peer)

    def _claimed(self, caller: Caller, claimed: int) -> int:
        if not 0 <= claimed < self.task.clients:
            raise ProtocolError(f"client id {claimed} outside [0, {self.task.clients})")
        if caller.client is not None and claimed != caller.client:
            raise Denied(f"client {caller.client} asked in the name of client {claimed}")
        return claimed

    # -- handlers (gRPC threads) -----------------------------------------------------------

    def join(self, data: bytes, caller: Caller, context: Any = None) -> bytes:
        req = _control(data, {"client"})
        u = self._claimed(caller, req["client"])
        with self._cond:
            self._joined.add(u)
            self._cond.notify_all()
        return json.dumps(
            {"task": self.task.name, "params": self.task.params, "variant": self.variant}
        ).encode()

    def _wait(self, context: Any, deadline: float, done: Callable[[], bool], what: str) -> None:
        """Wait (holding the condition) until ``done()``; gives up at ``deadline`` or when the
        caller cancels."""
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"timed out waiting for {what}")
            if context is not None and not context.is_active():
                raise ProtocolError("the call was cancelled")
            self._cond.wait(min(left, 1.0))

    def next_round(self, data: bytes, caller: Caller, context: Any = None) -> bytes:
        req = _control(data, {"client", "after"})
        u, after = self._claimed(caller, req["client"]), req["after"]
        deadline = time.monotonic() + self.join_timeout + 60 * self.stage_timeout
        with self._cond:
            if after < -1 or after > self._round:
                raise ProtocolError(f"no round after {after} can be asked for now")
            if after == -1 and u in self._joined:  # the client has built its task: ready
                self._ready.add(u)
                self._cond.notify_all()
            self._wait(
                context,
                deadline,
                lambda: self._round > after or self.release is not None or self.error is not None,
                "the next round",
            )
            if self.error is not None:
                return json.dumps({"error": self.error}).encode()
            if self._round > after and self._server is not None:
                if u not in self._round_clients:
                    return json.dumps({"excluded": True}).encode()
                return json.dumps(self._round_payload).encode()
            self._fetched_final.add(u)
            self._cond.notify_all()
            return json.dumps({"finished": self.release}).encode()

    def exchange(self, data: bytes, caller: Caller, context: Any = None) -> bytes:
        with self._cond:
            server = self._server
            if server is None:
                raise ProtocolError("no round is open")
            msg = decode(data, server.config.max_message_bytes())
            if caller.client is not None and msg.sender != caller.client:
                raise Denied(f"client {caller.client} sent a message in the name of {msg.sender}")
            stage_index = self._closed
            server.receive(msg, caller.client)
            self._cond.notify_all()
            deadline = time.monotonic() + 2 * self.stage_timeout + 5.0
            self._wait(context, deadline, lambda: self._closed > stage_index, "the stage to close")
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
            release = self.task.release()
        except (ProtocolError, ValidationError) as exc:
            with self._cond:
                self.error = str(exc)
                self._cond.notify_all()
            raise
        with self._cond:
            self.release = release
            self._server = None
            self._cond.notify_all()
            end = time.monotonic() + max(2.0, self.stage_timeout)
            while not set(self._alive) <= self._fetched_final and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
        return release

    def _run_round(self, spec: RoundSpec, step: Callable[[str], None]) -> None:
        need = self.plan.contributors_needed
        if len(self._alive) < need:
            raise ProtocolAbort(
                f"round {spec.index} refused: {len(self._alive)} clients are available; it "
                f"needs {need} contributors (threshold t = {self.plan.threshold}, minimum "
                f"contributors {self.min_contributors}, fixed for {self.task.clients} planned)"
            )
        config = round_config(
            spec,
            self._alive,
            self.variant,
            session=self.session,
            planned=self.task.clients,
            threshold=self.threshold,
            neighbours=self.neighbours,
            min_contributors=self.min_contributors,
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
                spec.index,
                stage,
                expected,
                received,
                time.monotonic() - t0,
                timed_out,
                dict(server.culprits),
            )
            self.records.append(rec)
            self.log(rec.to_dict())
            step(stage)
            if server.stage is Stage.ABORTED:
                raise ProtocolAbort(f"round {spec.index} aborted: {server.reason}")
        self.task.record(server.result, len(server.survivors["masked"]))
        self._alive = server.survivors["unmask"]


_STATUS = {
    Denied: grpc.StatusCode.PERMISSION_DENIED,
    Busy: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def _handler(
    coordinator: Coordinator, fn: Callable[[bytes, Caller, Any], bytes]
) -> Callable[[bytes, Any], bytes]:
    def call(request: bytes, context: Any) -> bytes:
        try:
            caller = coordinator.caller(context)
            coordinator.limits.enter(caller)
            try:
                return fn(request, caller, context)
            finally:
                coordinator.limits.leave(caller)
        except ProtocolError as exc:
            code = _STATUS.get(type(exc), grpc.StatusCode.INVALID_ARGUMENT)
            context.abort(code, str(exc).splitlines()[0][:300])
            raise  # unreachable: abort raises

    return call


def start_server(
    coordinator: Coordinator,
    host: str,
    port: int,
    key_pem: bytes,
    cert_pem: bytes,
    ca_pem: bytes | None = None,
) -> tuple[grpc.Server, int]:
    """Serve ``coordinator`` over TLS on ``host:port`` (port 0: any free port), requiring a
    client certificate signed by ``ca_pem`` on every connection; without ``ca_pem`` only an
    ``insecure`` coordinator on a loopback host is served."""
    fn = "start_server"
    check_host(host, fn)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValidationError("port", fn, "an integer in [0, 65535]", port)
    if ca_pem is None and not coordinator.insecure:
        raise ValidationError(
            "ca", fn, "the deployment's CA (clients must be authenticated)", "none"
        )
    if coordinator.insecure and not is_loopback(host):
        raise ValidationError("host", fn, "a loopback address when insecure", host)
    try:
        credentials.check_pair(key_pem, cert_pem, fn)
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError(
            "--tls-key", fn, "a PEM key and its certificate", "unreadable"
        ) from None
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(_handler(coordinator, fn))
        for name, fn in (
            ("Join", coordinator.join),
            ("NextRound", coordinator.next_round),
            ("Exchange", coordinator.exchange),
        )
    }
    size = coordinator.max_message_bytes
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=coordinator.workers),
        handlers=[grpc.method_handlers_generic_handler(SERVICE, handlers)],
        options=[
            ("grpc.max_receive_message_length", size),
            ("grpc.max_send_message_length", max(size, 1 << 20)),
        ],
        maximum_concurrent_rpcs=4 * coordinator.workers,
    )
    creds = grpc.ssl_server_credentials(
        [(key_pem, cert_pem)],
        root_certificates=ca_pem,
        require_client_auth=ca_pem is not None,
    )
    try:
        bound = server.add_secure_port(f"{host}:{port}", creds)
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise ValidationError("port", fn, "a free port on a local address", f"{host}:{port}")
    server.start()
    return server, bound


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
    if not 0 <= clients <= MAX_SERVE_CLIENTS:
        raise ValidationError("clients", "drop_schedule", f"in [0, {MAX_SERVE_CLIENTS}]", clients)
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
    """Start a server here and one client *process* per client on 127.0.0.1, each with its own
    certificate from a fresh deployment CA (mutual TLS); wait until the release and until every
    process has exited."""
    fn = "run_local"
    task = make_task(task_name, dict(params))
    if not 2 <= task.clients <= MAX_LOCAL_CLIENTS:
        raise ValidationError(
            "clients", fn, f"in [2, {MAX_LOCAL_CLIENTS}] (one process each)", task.clients
        )
    drop = dict(drops or {})
    for u, s in drop.items():
        if s not in STAGES or not 0 <= u < task.clients:
            raise ValidationError("drops", fn, "client ids -> stage names", f"{u}:{s}")
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
    procs: dict[int, subprocess.Popen[bytes]] = {}
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="privhist-federated-") as tmp:
        dep = credentials.issue(tmp, task.clients, "127.0.0.1", days=1)
        server, port = start_server(
            coord,
            "127.0.0.1",
            0,
            dep.server_key.read_bytes(),
            dep.server_cert.read_bytes(),
            dep.ca.read_bytes(),
        )
        env = dict(os.environ)
        try:
            for u in range(task.clients):
                argv = [
                    python or sys.executable,
                    "-m",
                    CLIENT_MODULE,
                    "--server",
                    f"127.0.0.1:{port}",
                    "--ca",
                    str(dep.ca),
                    "--cert",
                    str(dep.client_cert(u)),
                    "--key",
                    str(dep.client_key(u)),
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
