"""``privhist federated serve|client|run``: secure aggregation over the network.

``serve`` runs the server of a federated task (sample-and-threshold, TFFE or a plain sum) over
gRPC with TLS; ``client`` is one client process; ``run --clients N`` starts a server here and N
client processes on 127.0.0.1, with injected dropouts, a progress bar and a round log. The
protocol and the runtime are :mod:`privhist.federated.secagg` and
:mod:`privhist.federated.secagg.runtime`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from privhist.cli import federated_client
from privhist.cli.commands import _vdaf
from privhist.core.errors import ValidationError

FN = "privhist federated"
STAGE_NAMES = federated_client.STAGE_NAMES


def _task_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task", choices=["sample-threshold", "tffe", "sum"], default="sample-threshold"
    )
    p.add_argument("--clients", type=int, required=True, help="number of clients N")
    p.add_argument("--secure-sum", choices=["secagg", "secagg+"], default="secagg+")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--sampling-rate", type=float, help="sample-threshold: Poisson rate p")
    p.add_argument("--threshold", type=int, help="sample-threshold: release counts >= this")
    p.add_argument("--support", type=int, default=16, help="sample-threshold: dictionary size")
    p.add_argument("--exponent", type=float, default=1.1, help="Zipf exponent of client data")
    p.add_argument("--dimension", type=int, default=8, help="tffe/sum: vector length d")
    p.add_argument("--max-items", type=int, default=10, help="tffe: items per client")
    p.add_argument("--bits", type=int, default=4, help="tffe: 2**bits quantile bins")
    p.add_argument("--theta", type=float, default=0.2, help="tffe: cPBM theta")
    p.add_argument("--modulus", type=int, default=1 << 32, help="sum: modulus q")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the clients' synthetic data")
    p.add_argument("--neighbours", type=int, help="SecAgg+ graph degree k (even)")
    p.add_argument("--reconstruction-threshold", type=int, help="Shamir threshold t")
    p.add_argument("--stage-timeout", type=float, default=10.0, help="seconds per stage (10)")
    p.add_argument("--join-timeout", type=float, default=120.0, help="seconds to join (120)")
    p.add_argument("--log", help="append the round log here (JSON lines)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register(sub: Any) -> None:
    p = sub.add_parser("federated", help="secure aggregation over the network (serve/client/run)")
    fs = p.add_subparsers(dest="federated_command", metavar="ACTION", parser_class=type(p))
    fs.required = True
    s = fs.add_parser("serve", help="run the server of a federated task")
    _task_arguments(s)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    s.add_argument("--tls-key", help="PEM private key (default: a fresh self-signed pair)")
    s.add_argument("--tls-cert", help="PEM certificate matching --tls-key")
    s.add_argument("--write-cert", help="write the server certificate here (for clients)")
    s.set_defaults(run=_serve)
    c = fs.add_parser("client", help="one client process")
    federated_client.add_arguments(c)
    c.set_defaults(run=federated_client.run)
    r = fs.add_parser("run", help="a server and N client processes on this machine")
    _task_arguments(r)
    r.add_argument("--seed", type=int, help="reproducible, NOT private client randomness")
    r.add_argument("--drop", type=float, default=0.0, help="fraction of clients that drop")
    r.add_argument("--drop-seed", type=int, help="seed of the dropout schedule")
    r.add_argument(
        "--drop-schedule", help="explicit dropouts: ID:STAGE[,ID:STAGE...] (overrides --drop)"
    )
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(run=_run)
    _vdaf.add_actions(fs)  # Prio3 (VDAF) actions: privhist federated vdaf-*


def _params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {
        "clients": args.clients,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "data_seed": args.data_seed,
    }
    if args.task == "sample-threshold":
        params.update(
            support=args.support,
            exponent=args.exponent,
            sampling_rate=args.sampling_rate,
            threshold=args.threshold,
        )
    elif args.task == "tffe":
        params.update(
            dimension=args.dimension, max_items=args.max_items, bits=args.bits, theta=args.theta
        )
    else:
        params.update(dimension=args.dimension, modulus=args.modulus)
    return params


def _logger(args: argparse.Namespace) -> Any:
    if not args.log:
        return None
    path = Path(args.log)

    def log(record: dict[str, Any]) -> None:
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    return log


def _print(args: argparse.Namespace, release: dict[str, Any], records: list[Any]) -> None:
    if args.json:
        print(json.dumps({"release": release, "round_log": [r.to_dict() for r in records]}))
        return
    for key, value in release.items():
        print(f"{key:<15}{value}")
    print("round log")
    for r in records:
        flag = " (timed out)" if r.timed_out else ""
        print(
            f"  round {r.round} {r.stage:<9} {r.received}/{r.expected} clients "
            f"{r.seconds:.3f} s{flag}"
        )


def _serve(args: argparse.Namespace) -> int:
    from privhist.federated.secagg import runtime
    from privhist.federated.secagg.tasks import make_task

    if (args.tls_key is None) != (args.tls_cert is None):
        raise ValidationError("--tls-key", FN, "given together with --tls-cert", args.tls_key)
    if args.tls_key:
        key_pem, cert_pem = Path(args.tls_key).read_bytes(), Path(args.tls_cert).read_bytes()
    else:
        key_pem, cert_pem = runtime.self_signed_certificate(args.host)
    if args.write_cert:
        Path(args.write_cert).write_bytes(cert_pem)
    coord = runtime.Coordinator(
        make_task(args.task, _params(args)),
        args.secure_sum,
        stage_timeout=args.stage_timeout,
        join_timeout=args.join_timeout,
        threshold=args.reconstruction_threshold,
        neighbours=args.neighbours,
        log=_logger(args),
    )
    server, port = runtime.start_server(coord, args.host, args.port, key_pem, cert_pem)
    print(f"listening on {args.host}:{port}", file=sys.stderr, flush=True)
    try:
        release = coord.run()
    finally:
        server.stop(grace=2.0)
    _print(args, release, coord.records)
    return 0


def _schedule(args: argparse.Namespace) -> dict[int, str]:
    from privhist.core.random import default_source
    from privhist.federated.secagg import runtime

    if args.drop_schedule:
        out: dict[int, str] = {}
        for part in args.drop_schedule.split(","):
            who, _, stage = part.partition(":")
            if not who.strip().isdigit() or stage not in STAGE_NAMES:
                raise ValidationError("--drop-schedule", FN, "ID:STAGE[,ID:STAGE...]", part)
            out[int(who)] = stage
        return out
    return runtime.drop_schedule(args.clients, args.drop, default_source(args.drop_seed))


def _run(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from privhist.federated.secagg import runtime

    drops = _schedule(args)
    show = not args.no_progress and not args.json and sys.stderr.isatty()
    rounds = 2 if args.task == "tffe" else 1
    with Progress(disable=not show, transient=True) as bar:
        job = bar.add_task("secure aggregation", total=5 * rounds)
        res = runtime.run_local(
            args.task,
            _params(args),
            args.secure_sum,
            seed=args.seed,
            drops=drops,
            stage_timeout=args.stage_timeout,
            join_timeout=args.join_timeout,
            threshold=args.reconstruction_threshold,
            neighbours=args.neighbours,
            log=_logger(args),
            progress=lambda _stage: bar.advance(job),
        )
    _print(args, res.release, res.records)
    ended = [c for c in res.clients.values() if c["returncode"] != 0]
    if not args.json:
        print(
            f"clients        {len(res.clients)} processes, {len(drops)} injected dropouts, "
            f"{len(ended)} failed; {res.seconds:.1f} s"
        )
    return 0 if not ended else 1
