"""Attacks on the networked secure-aggregation runtime, each over loopback (127.0.0.1), each
ending in a refusal, an abort naming the culprit, or the exact sum.

The server runs in this process (a thread drives :class:`Coordinator`); honest clients are
threads running :func:`run_client` with their own certificates; the attacker speaks gRPC
directly. Inputs come from the ``sum`` task's data seeds, so the exact sum is known.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from privhist.core.errors import ProtocolAbort, ProtocolError, UnsupportedError
from privhist.core.random import RandomSource, SecureRandom, SeededRandom
from privhist.federated.secagg import credentials, runtime, shamir
from privhist.federated.secagg.aggregator import SecAggregator, run_in_process
from privhist.federated.secagg.client import ClientResult, run_client
from privhist.federated.secagg.messages import SERVICE, Message, pack_vector
from privhist.federated.secagg.protocol import RoundConfig, SecAggClient, Stage
from privhist.federated.secagg.tasks import RoundSpec, make_task

PARAMS: dict[str, Any] = {
    "clients": 5,
    "dimension": 4,
    "modulus": 97,
    "data_seed": 1,
    "epsilon": 1.0,
    "delta": 0.0,
}


def exact_sum(params: dict[str, Any], ids: list[int]) -> list[int]:
    task = make_task("sum", params)
    spec = RoundSpec(0, params["modulus"], params["dimension"])
    total = sum(task.client_vector(spec, u, SecureRandom()) for u in ids)
    return [int(v) for v in np.asarray(total) % params["modulus"]]


class Deployment:
    """A server with its coordinator thread, and the credentials of every client id."""

    def __init__(self, tmp: Path, params: dict[str, Any], variant: str = "secagg", **kw: Any):
        self.params = params
        self.dep = credentials.issue(tmp, params["clients"], "127.0.0.1", days=1)
        self.ca = self.dep.ca.read_bytes()
        self.coord = runtime.Coordinator(make_task("sum", params), variant, **kw)
        self.server, port = runtime.start_server(
            self.coord,
            "127.0.0.1",
            0,
            self.dep.server_key.read_bytes(),
            self.dep.server_cert.read_bytes(),
            self.ca,
        )
        self.target = f"127.0.0.1:{port}"
        self.outcome: dict[str, Any] = {}
        self.results: dict[int, ClientResult | str] = {}
        self._threads: list[threading.Thread] = []
        self._driver = threading.Thread(target=self._drive)
        self._driver.start()

    def _drive(self) -> None:
        try:
            self.outcome["release"] = self.coord.run()
        except ProtocolError as exc:
            self.outcome["error"] = str(exc)

    def pem(self, u: int) -> tuple[bytes, bytes]:
        return self.dep.client_cert(u).read_bytes(), self.dep.client_key(u).read_bytes()

    def channel(self, as_client: int | None) -> grpc.Channel:
        if as_client is None:
            creds = grpc.ssl_channel_credentials(root_certificates=self.ca)
        else:
            cert, key = self.pem(as_client)
            creds = grpc.ssl_channel_credentials(self.ca, key, cert)
        return grpc.secure_channel(self.target, creds)

    def honest(self, ids: list[int], **kw: Any) -> None:
        def go(u: int) -> None:
            cert, key = self.pem(u)
            try:
                self.results[u] = run_client(
                    self.target, self.ca, u, cert_pem=cert, key_pem=key, timeout=30, **kw
                )
            except ProtocolError as exc:
                self.results[u] = str(exc)

        for u in ids:
            t = threading.Thread(target=go, args=(u,))
            t.start()
            self._threads.append(t)

    def finish(self) -> dict[str, Any]:
        for t in self._threads:
            t.join(90)
        self._driver.join(90)
        self.server.stop(0)
        return self.outcome


@pytest.fixture
def deploy(tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    made: list[Deployment] = []

    def make(params: dict[str, Any] = PARAMS, variant: str = "secagg", **kw: Any) -> Deployment:
        kw.setdefault("stage_timeout", 5.0)
        kw.setdefault("join_timeout", 20.0)
        d = Deployment(tmp_path / f"d{len(made)}", params, variant, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.server.stop(0)


def call(ch: grpc.Channel, method: str, payload: Any, timeout: float = 10) -> bytes:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    out: bytes = ch.unary_unary(f"/{SERVICE}/{method}")(data, timeout=timeout)
    return out


def refused(ch: grpc.Channel, method: str, payload: Any, timeout: float = 10) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call(ch, method, payload, timeout)
    code: grpc.StatusCode = info.value.code()
    return code


# -- 1. unauthenticated clients ---------------------------------------------------------------


def test_unauthenticated_and_misnamed_callers_are_refused(
    deploy: Callable[..., Deployment], tmp_path: Path
) -> None:
    d = deploy()
    # no client certificate: the TLS handshake fails before any handler runs
    with d.channel(None) as ch:
        assert refused(ch, "Join", {"client": 1}, 5) is grpc.StatusCode.UNAVAILABLE
    # a client certificate from another deployment's CA
    other = credentials.issue(tmp_path / "other", 3, "127.0.0.1", days=1)
    creds = grpc.ssl_channel_credentials(
        d.ca, other.client_key(1).read_bytes(), other.client_cert(1).read_bytes()
    )
    with grpc.secure_channel(d.target, creds) as ch:
        assert refused(ch, "Join", {"client": 1}, 5) is grpc.StatusCode.UNAVAILABLE
    # the deployment's server certificate is not a client certificate (refused by its purpose)
    creds = grpc.ssl_channel_credentials(
        d.ca, d.dep.server_key.read_bytes(), d.dep.server_cert.read_bytes()
    )
    with grpc.secure_channel(d.target, creds) as ch:
        assert refused(ch, "Join", {"client": 1}, 5) is grpc.StatusCode.UNAVAILABLE
    # one connection cannot join as two ids: client 1 asking as 2 is refused
    with d.channel(1) as ch:
        assert json.loads(call(ch, "Join", {"client": 1}))["task"] == "sum"
        assert refused(ch, "Join", {"client": 2}) is grpc.StatusCode.PERMISSION_DENIED
        assert refused(ch, "NextRound", {"client": 2, "after": -1}) is (
            grpc.StatusCode.PERMISSION_DENIED
        )
    d.honest(list(range(5)))
    out = d.finish()
    assert out["release"] == {"sum": exact_sum(PARAMS, list(range(5))), "contributors": 5}


def test_only_client_names_carry_an_id() -> None:
    assert credentials.client_id_of([b"privhist-client-7"]) == 7
    for names in (
        [b"privhist-server"],
        [b"privhist-client-07"],
        [b"privhist-client-1048576"],
        [b"privhist-client-1", b"privhist-client-2"],
        [],
        [b"\xff"],
    ):
        assert credentials.client_id_of(names) is None


# -- 2. impersonation ---------------------------------------------------------------------------


def test_an_insider_cannot_send_in_another_clients_name(
    deploy: Callable[..., Deployment],
) -> None:
    d = deploy()
    d.honest(list(range(5)))
    seen: list[tuple[grpc.StatusCode, str]] = []
    with d.channel(3) as ch:  # client 3 (honest in its own round) also forges client 0's input
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not d.outcome:
            server = d.coord._server
            if server is None:
                time.sleep(0.01)
                continue
            rid, q, dim = server.config.round_id, server.config.modulus, server.config.dimension
            y = pack_vector(np.zeros(dim, dtype=np.int64), q)
            forged = Message("masked", rid, 0, {"y": y}).encode()
            with pytest.raises(grpc.RpcError) as info:
                call(ch, "Exchange", forged)
            seen.append((info.value.code(), str(info.value.details())))
            if len(seen) >= 50:
                break
            time.sleep(0.005)
    out = d.finish()
    denied = [c for c, _ in seen if c is grpc.StatusCode.PERMISSION_DENIED]
    # every forgery is denied; one sent as the round ended finds no round open
    assert denied and all(c in denied or why == "no round is open" for c, why in seen)
    assert out["release"] == {"sum": exact_sum(PARAMS, list(range(5))), "contributors": 5}
    assert all(isinstance(r, ClientResult) and r.status == "finished" for r in d.results.values())


# -- 3. Sybil -----------------------------------------------------------------------------------


def test_one_credential_cannot_take_the_other_ids(deploy: Callable[..., Deployment]) -> None:
    d = deploy(join_timeout=3.0)
    with d.channel(1) as ch:  # the attacker holds client 1's credential only
        for u in (2, 3, 4):
            assert refused(ch, "Join", {"client": u}) is grpc.StatusCode.PERMISSION_DENIED
    d.honest([0, 1])  # client 1 takes part (it would send zeros); 2..4 never join
    out = d.finish()
    # two contributors are fewer than the round's fixed threshold (3 of 5): nothing is summed
    assert "release" not in out and "needs 3 contributors" in out["error"]
    assert all(isinstance(r, ClientResult) and r.status == "aborted" for r in d.results.values())


# -- 4. one bad share ---------------------------------------------------------------------------


class OffByOne(SecAggClient):
    """Reveals one share of another client's self-mask seed off by one."""

    def _on_unmask_req(self, msg: Message) -> Message:
        out = super()._on_unmask_req(msg)
        seeds = list(out.body["seed_shares"])
        i = next(i for i, (v, _) in enumerate(seeds) if v != self.id)
        v, y = seeds[i]
        seeds[i] = (v, (y + 1) % shamir.PRIME)
        return Message(out.type, out.round, out.sender, {**out.body, "seed_shares": seeds})


def _off_by_one(u: int, config: RoundConfig, vector: Any, rng: RandomSource) -> SecAggClient:
    return OffByOne(u, config, vector, rng)


@pytest.mark.parametrize(("variant", "clients", "k"), [("secagg", 5, None), ("secagg+", 10, 4)])
def test_a_bad_share_is_caught_and_the_sum_is_exact(
    deploy: Callable[..., Deployment], variant: str, clients: int, k: int | None
) -> None:
    params = {**PARAMS, "clients": clients}
    d = deploy(params, variant, neighbours=k)
    honest = [u for u in range(clients) if u != 1]
    d.honest(honest)
    d.honest([1], make_protocol=_off_by_one)
    out = d.finish()
    assert out["release"] == {
        "sum": exact_sum(params, list(range(clients))),
        "contributors": clients,
    }
    culprits = d.coord.records[-1].culprits
    assert list(culprits) == [1] and "does not match" in culprits[1]


def _round(n: int, t: int, factory: Callable[..., SecAggClient]) -> Any:
    config = RoundConfig(3, 101, 3, tuple(range(n)), t)
    x = SeededRandom(5).uniform_below(101, n * 3).reshape(n, 3)
    server_rng = SeededRandom(9)
    from privhist.federated.secagg.protocol import SecAggServer

    server = SecAggServer(config, server_rng)
    clients = {u: factory(u, config, x[u], SeededRandom(20 + u)) for u in range(n)}
    outbox = {u: c.advertise() for u, c in clients.items()}
    while outbox:
        for msg in outbox.values():
            server.receive(msg.encode(), msg.sender)
        replies = server.close_stage()
        outbox = {}
        for u, m in replies.items():
            reply = clients[u].handle(m.encode())
            if reply is not None:
                outbox[u] = reply
    return server, x


def test_without_spare_shares_a_lying_holder_aborts_the_round_by_name() -> None:
    # n = t: exactly t shares of each seed; client 1's wrong one cannot be outvoted
    server, _ = _round(3, 3, lambda u, c, x, r: (OffByOne if u == 1 else SecAggClient)(u, c, x, r))
    assert server.stage is Stage.ABORTED and "client(s) [1]" in server.reason
    assert 1 in server.culprits


class BadDealer(SecAggClient):
    """Deals its seed shares from two different polynomials (each committed honestly)."""

    def _on_roster(self, msg: Message) -> Message:
        real = shamir.split_many

        def split_many(secrets: Any, t: int, xs: Any, rng: RandomSource) -> list[list[int]]:
            rows = real(secrets, t, xs, rng)
            for secret, shares in zip(secrets, rows, strict=True):
                if secret == int.from_bytes(self._b, "big"):
                    shares[-1] = (shares[-1] + 1) % shamir.PRIME
            return rows

        shamir.split_many = split_many  # type: ignore[assignment]
        try:
            return super()._on_roster(msg)
        finally:
            shamir.split_many = real


def test_a_dealer_of_inconsistent_shares_is_named() -> None:
    server, _ = _round(5, 3, lambda u, c, x, r: (BadDealer if u == 2 else SecAggClient)(u, c, x, r))
    assert server.stage is Stage.ABORTED and "client 2 dealt inconsistent shares" in server.reason
    assert list(server.culprits) == [2]


def test_a_small_order_public_key_is_refused() -> None:
    config = RoundConfig(3, 101, 3, (0, 1, 2), 2)
    from privhist.federated.secagg.protocol import SecAggServer

    server = SecAggServer(config, SeededRandom(1))
    good = SecAggClient(0, config, np.zeros(3, dtype=np.int64), SeededRandom(2)).advertise()
    bad = Message("advertise", 3, 0, {"c_pk": bytes(32), "s_pk": good.body["s_pk"]})
    with pytest.raises(ProtocolError, match="small order"):
        server.receive(bad.encode(), 0)
    server.receive(good.encode(), 0)


# -- 5. thread exhaustion -----------------------------------------------------------------------


def test_a_flood_of_calls_from_one_client_does_not_starve_the_others(
    deploy: Callable[..., Deployment],
) -> None:
    params = {**PARAMS, "clients": 4}
    d = deploy(params)
    codes: list[grpc.StatusCode] = []
    with d.channel(3) as ch:  # client 3 floods and never takes part
        stub = ch.unary_unary(f"/{SERVICE}/NextRound")
        calls = [
            stub.future(json.dumps({"client": 3, "after": a}).encode(), timeout=60)
            for a in [10**9] * 15 + [-1] * 15
        ]
        d.honest([0, 1, 2])
        out = d.finish()
        for c in calls:
            try:
                c.result(timeout=5)
                codes.append(grpc.StatusCode.OK)
            except grpc.FutureTimeoutError:
                c.cancel()
            except grpc.RpcError as exc:
                codes.append(exc.code())
    assert out["release"] == {"sum": exact_sum(params, [0, 1, 2]), "contributors": 3}
    # beyond PER_CLIENT_CALLS running at once, the flood is refused at once (and a far round
    # is refused outright even when under the limit)
    refusals = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT)
    assert sum(c in refusals for c in codes) >= 30 - 2 * runtime.PER_CLIENT_CALLS
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes


# -- 6. hostile bytes and numbers ---------------------------------------------------------------


def test_nested_and_oversized_messages_are_refused_and_the_round_completes(
    deploy: Callable[..., Deployment],
) -> None:
    d = deploy()
    with d.channel(2) as ch:
        for method in ("Join", "NextRound", "Exchange"):
            code = refused(ch, method, b"[" * 3000 + b"]" * 3000)
            assert code is grpc.StatusCode.INVALID_ARGUMENT
        nested = b'{"v": 2, "type": "masked", "round": 0, "sender": 2, "y": ' + b"[" * 40
        assert refused(ch, "Exchange", nested + b"]" * 40 + b"}") in (
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        big = b" " * (d.coord.max_message_bytes + 1)
        assert refused(ch, "Exchange", big) is grpc.StatusCode.RESOURCE_EXHAUSTED
    d.honest(list(range(5)))
    out = d.finish()
    assert out["release"] == {"sum": exact_sum(PARAMS, list(range(5))), "contributors": 5}


def _cli(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "privhist", *argv], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--clients", "18446744073709551616", "--task", "sum"], "--clients"),
        (["run", "--clients", "3", "--dimension", "-4", "--task", "sum"], "--dimension"),
        (["run", "--clients", "3", "--task", "tffe", "--bits", "99"], "--bits"),
        (["run", "--clients", "300", "--task", "sum"], "one process each"),
        (["serve", "--clients", "3", "--stage-timeout", "nan"], "--stage-timeout"),
        (["serve", "--clients", "3", "--host", "256.1.1.1", "--insecure"], "host"),
        (["serve", "--clients", "3"], "--ca"),
        (["serve", "--clients", "3", "--insecure", "--host", "0.0.0.0"], "loopback"),
    ],
)
def test_cli_refuses_bad_numbers_hosts_and_missing_credentials_in_one_line(
    argv: list[str], says: str
) -> None:
    p = _cli(["federated", *argv])
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privhist: error:") and says in lines[0]


def test_cli_bad_key_and_certificate_files_give_one_line(tmp_path: Path) -> None:
    dep = credentials.issue(tmp_path / "d", 2, "127.0.0.1", days=1)
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key\n")
    base = ["federated", "serve", "--clients", "2", "--ca", str(dep.ca)]
    for key, cert, says in (
        (bad, dep.server_cert, "--tls-key"),
        (dep.server_key, bad, "--tls-cert"),
        (tmp_path / "missing.pem", dep.server_cert, "--tls-key"),
        (dep.client_key(0), dep.server_cert, "--tls-cert"),  # a key of another certificate
    ):
        p = _cli([*base, "--tls-key", str(key), "--tls-cert", str(cert)])
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and says in lines[0], p.stderr


# -- 7. never above the request -----------------------------------------------------------------


TFFE = ["federated", "run", "--task", "tffe", "--clients", "8", "--epsilon", "16"]
TFFE += ["--delta", "1e-3", "--dimension", "3", "--drop-schedule", "2:shares,5:masked"]
TFFE += ["--stage-timeout", "3", "--no-progress", "--json", "--seed", "3"]


def test_a_guarantee_above_the_request_is_refused_not_published() -> None:
    p = _cli(TFFE, timeout=300)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "contributors" in lines[0] and p.stdout == ""


def test_calibrated_for_the_fewest_contributors_the_release_stays_within_the_request() -> None:
    p = _cli([*TFFE, "--min-contributors", "6"], timeout=300)
    assert p.returncode == 0, p.stderr
    release = json.loads(p.stdout)["release"]
    assert release["contributors"] == [6, 6] and release["epsilon"] <= 16.0


# -- 8. cost up front ---------------------------------------------------------------------------


def test_full_secagg_beyond_a_minute_is_refused_before_it_runs() -> None:
    agg = SecAggregator(3001, 12, variant="secagg")
    t0 = time.process_time()
    with pytest.raises(UnsupportedError, match="use 'secagg\\+'"):
        agg.aggregate([np.zeros((3000, 12), dtype=np.int64)])
    assert time.process_time() - t0 < 5  # refused from the estimate, nothing ran


def test_the_simulation_states_its_cost_before_each_round() -> None:
    said: list[str] = []
    agg = SecAggregator(101, 3, variant="secagg+", rng=SeededRandom(1), announce=said.append)
    x = SeededRandom(2).uniform_below(101, 40 * 3).reshape(40, 3)
    assert agg.aggregate([x]).tolist() == [int(v) for v in x.sum(axis=0) % 101]
    assert len(said) == 1 and "40 simulated clients" in said[0] and "CPU s" in said[0]


def test_shared_agreements_give_the_same_messages() -> None:
    config = RoundConfig(3, 101, 3, tuple(range(12)), 4, 4)
    x = SeededRandom(5).uniform_below(101, 36).reshape(12, 3)
    runs = [
        run_in_process(
            config,
            {u: x[u] for u in range(12)},
            lambda u: SeededRandom(100 + u),
            SeededRandom(7),
            {"masked": {4}},
            shared_agreements=shared,
            wire=wire,
        )
        for shared, wire in ((False, True), (True, True), (True, False))
    ]
    # shared keys and masks, and messages handed over without their wire form, change nothing
    for other in runs[1:]:
        assert [m.encode() for m in runs[0].server.transcript] == [
            m.encode() for m in other.server.transcript
        ]
        assert runs[0].server.result.tolist() == other.server.result.tolist()
    assert sum(runs[2].bytes_sent.values()) == 0 < sum(runs[0].bytes_sent.values())


def test_a_shared_memo_agrees_each_pair_once_per_purpose(monkeypatch: pytest.MonkeyPatch) -> None:
    from privhist.federated.secagg import crypto

    calls: list[bytes] = []
    real = crypto._exchange

    def counted(key: Any, peer: Any, info: bytes, round_id: int) -> bytes:
        calls.append(info)
        return real(key, peer, info, round_id)

    monkeypatch.setattr(crypto, "_exchange", counted)
    n, k = 14, 4
    config = RoundConfig(3, 101, 3, tuple(range(n)), 3, k)
    x = SeededRandom(5).uniform_below(101, n * 3).reshape(n, 3)
    out = run_in_process(
        config,
        {u: x[u] for u in range(n)},
        lambda u: SeededRandom(100 + u),
        SeededRandom(7),
        shared_agreements=True,
        wire=False,
    )
    assert out.ok and out.server.result.tolist() == [int(v) for v in x.sum(axis=0) % 101]
    pairs = n * k // 2  # edges of the Harary graph; no dropouts, so the server agrees nothing
    assert sorted(set(calls)) == sorted({crypto._ENC_INFO, crypto._MASK_INFO})
    assert calls.count(crypto._ENC_INFO) == calls.count(crypto._MASK_INFO) == pairs


def test_an_aborted_round_raises() -> None:
    with pytest.raises(ProtocolAbort):
        SecAggregator(101, 2, variant="secagg", dropouts={"masked": {0, 1}}).aggregate(
            [np.zeros((3, 2), dtype=np.int64)]
        )


def test_the_cli_names_the_protocols_stages() -> None:
    from privhist.cli.commands.federated import STAGE_NAMES
    from privhist.federated.secagg.protocol import STAGES

    assert STAGE_NAMES == STAGES
