"""The networked runtime end to end: gRPC over TLS on 127.0.0.1, client processes, injected
dropouts, the same release as the in-process run with the same seeds."""

from __future__ import annotations

import json
import threading
from typing import Any

import grpc
import pytest

from privhist.cli.main import main
from privhist.federated.secagg import credentials, runtime
from privhist.federated.secagg.client import run_client
from privhist.federated.secagg.tasks import make_task, run_task_in_process

ST_PARAMS: dict[str, Any] = {
    "clients": 20,
    "epsilon": 2.0,
    "delta": 0.05,
    "sampling_rate": 0.5,
    "threshold": None,
    "support": 2,
    "exponent": 3.0,
    "data_seed": 4,
}


def _by_stage(drops: dict[int, str]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for u, s in drops.items():
        out.setdefault(s, set()).add(u)
    return out


def test_twenty_client_processes_three_dropouts_give_the_in_process_release() -> None:
    drops = {3: "shares", 8: "masked", 14: "unmask"}
    res = runtime.run_local(
        "sample-threshold", ST_PARAMS, "secagg+", seed=5, drops=drops, stage_timeout=3.0
    )
    ref = run_task_in_process(
        make_task("sample-threshold", ST_PARAMS), "secagg+", 5, _by_stage(drops)
    )
    assert res.release == ref
    assert res.release["keys"] == [0] and res.release["contributors"] == 18
    # every process exited by itself, cleanly; the dropped ones at their stage
    assert len(res.clients) == 20 and all(c["returncode"] == 0 for c in res.clients.values())
    status = {u: c["result"]["status"] for u, c in res.clients.items()}
    assert {u for u, s in status.items() if s == "dropped"} == set(drops)
    assert all(c["result"]["release"] == ref for u, c in res.clients.items() if u not in drops)
    timed_out = [r.stage for r in res.records if r.timed_out]
    assert timed_out == ["shares", "masked", "unmask"]


def test_cli_run_completes_a_tffe_round_like_the_in_process_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # six clients need a large epsilon for cPBM's target quantile to exist (equation (5))
    argv = ["federated", "run", "--task", "tffe", "--clients", "6", "--epsilon", "16"]
    argv += ["--delta", "1e-3", "--dimension", "2", "--max-items", "3", "--bits", "2"]
    argv += ["--secure-sum", "secagg", "--seed", "6", "--data-seed", "2", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    params = {"clients": 6, "epsilon": 16.0, "delta": 1e-3, "data_seed": 2, "dimension": 2}
    params.update(max_items=3, bits=2, theta=0.2)
    ref = run_task_in_process(make_task("tffe", params), "secagg", 6)
    assert out["release"] == ref and len(ref["estimate"]) == 2
    assert [r["stage"] for r in out["round_log"]] == [
        "advertise",
        "shares",
        "masked",
        "ack",
        "unmask",
    ] * 2


def test_bad_messages_over_the_wire_are_refused_and_the_round_completes(tmp_path: Any) -> None:
    params = {"clients": 3, "dimension": 4, "modulus": 97, "data_seed": 1}
    params.update(epsilon=1.0, delta=0.0)
    dep = credentials.issue(tmp_path, 3, "127.0.0.1", days=1)
    ca = dep.ca.read_bytes()
    coord = runtime.Coordinator(make_task("sum", params), "secagg", stage_timeout=10.0)
    server, port = runtime.start_server(
        coord, "127.0.0.1", 0, dep.server_key.read_bytes(), dep.server_cert.read_bytes(), ca
    )
    target = f"127.0.0.1:{port}"

    def pem(u: int) -> tuple[bytes, bytes]:
        return dep.client_cert(u).read_bytes(), dep.client_key(u).read_bytes()

    try:
        cert0, key0 = pem(0)
        creds = grpc.ssl_channel_credentials(ca, key0, cert0)
        with grpc.secure_channel(target, creds) as ch:
            for method, payload in (
                ("Join", b"not json"),
                ("Join", json.dumps({"client": 99}).encode()),
                ("NextRound", json.dumps({"client": 0}).encode()),
                ("Exchange", b"\x00" * 10),
            ):
                with pytest.raises(grpc.RpcError) as info:
                    ch.unary_unary(f"/{runtime.SERVICE}/{method}")(payload, timeout=10)
                assert info.value.code() in (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    grpc.StatusCode.PERMISSION_DENIED,
                )
        results: dict[int, Any] = {}

        def client(u: int) -> None:
            cert, key = pem(u)
            results[u] = run_client(target, ca, u, cert_pem=cert, key_pem=key, seed=3, timeout=30)

        threads = [threading.Thread(target=client, args=(u,)) for u in range(3)]
        for t in threads:
            t.start()
        release = coord.run()
        for t in threads:
            t.join(timeout=30)
    finally:
        server.stop(grace=1.0)
    ref = run_task_in_process(make_task("sum", params), "secagg", 3)
    assert release == ref
    assert all(r.status == "finished" and r.release == ref for r in results.values())


def test_serve_and_client_commands(tmp_path: Any) -> None:
    import subprocess
    import sys

    from privhist.cli import federated_client

    creds = tmp_path / "creds"
    assert main(["federated", "credentials", "--clients", "3", "--out", str(creds)]) == 0
    log = tmp_path / "rounds.jsonl"
    argv = [sys.executable, "-m", "privhist", "federated", "serve", "--task", "sum"]
    argv += ["--clients", "3", "--dimension", "4", "--modulus", "97", "--secure-sum", "secagg"]
    argv += ["--ca", str(creds / "ca.pem"), "--tls-key", str(creds / "server.key")]
    argv += ["--tls-cert", str(creds / "server.pem")]
    argv += ["--log", str(log), "--json", "--stage-timeout", "20"]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        target = line.split()[-1]
        codes: list[int] = []

        def client(u: int) -> None:
            codes.append(
                federated_client.main(
                    [
                        *["--server", target, "--ca", str(creds / "ca.pem"), "--id", str(u)],
                        *["--cert", str(creds / f"client-{u}.pem")],
                        *["--key", str(creds / f"client-{u}.key"), "--json"],
                    ]
                )
            )

        threads = [threading.Thread(target=client, args=(u,)) for u in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        out, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, err
    assert codes == [0, 0, 0]
    params = {"clients": 3, "dimension": 4, "modulus": 97, "data_seed": 0}
    params.update(epsilon=1.0, delta=1e-6)
    ref = run_task_in_process(make_task("sum", params), "secagg", None)
    assert json.loads(out)["release"] == ref
    stages = [json.loads(r).get("stage") for r in log.read_text().splitlines()]
    assert stages == [None, "advertise", "shares", "masked", "ack", "unmask"]
