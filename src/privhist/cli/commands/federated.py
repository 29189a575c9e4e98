"""``privhist federated credentials|serve|client|run``: secure aggregation over the network.

``credentials`` issues a deployment's CA, the server's certificate and one certificate per
client id (to hand to each client out of band); ``serve`` runs the server of a federated task
(sample-and-threshold, TFFE or a plain sum) over gRPC with mutual TLS, refusing to start without
the CA unless ``--insecure`` (loopback demos only); ``client`` is one client process; ``run
--clients N`` issues fresh credentials and starts a server here and N client processes on
127.0.0.1, with injected dropouts, a progress bar and a round log. The protocol and the runtime
are :mod:`privhist.federated.secagg` and :mod:`privhist.federated.secagg.runtime`. Every number
is checked against its range before anything starts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from privhist.cli import federated_client
from privhist.cli.commands import _vdaf
from privhist.cli.common import LISTEN_HELP, counted
from privhist.core.errors import ValidationError

FN = "privhist federated"
#: the protocol's stages (privhist.federated.secagg.protocol.STAGES, not imported at start-up)
STAGE_NAMES = ("advertise", "shares", "masked", "ack", "unmask")

#: (flag, attribute, lowest, highest, integer?) of every number; None: no bound on that side
_BOUNDS: list[tuple[str, str, float, float, bool]] = [
    ("--clients", "clients", 2, 4096, True),
    ("--epsilon", "epsilon", 0.0, 100.0, False),
    ("--delta", "delta", 0.0, 1.0, False),
    ("--sampling-rate", "sampling_rate", 0.0, 1.0, False),
    ("--threshold", "threshold", 1, 1 << 20, True),
    ("--support", "support", 1, 1 << 20, True),
    ("--exponent", "exponent", 0.0, 100.0, False),
    ("--dimension", "dimension", 1, 1 << 20, True),
    ("--max-items", "max_items", 1, 1 << 20, True),
    ("--bits", "bits", 1, 16, True),
    ("--theta", "theta", 0.0, 0.25, False),
    ("--modulus", "modulus", 2, 1 << 62, True),
    ("--data-seed", "data_seed", 0, (1 << 40) - 1, True),
    ("--neighbours", "neighbours", 2, 4096, True),
    ("--reconstruction-threshold", "reconstruction_threshold", 2, 4096, True),
    ("--min-contributors", "min_contributors", 2, 4096, True),
    ("--stage-timeout", "stage_timeout", 0.0, 86400.0, False),
    ("--join-timeout", "join_timeout", 0.0, 86400.0, False),
    ("--port", "port", 0, 65535, True),
    ("--seed", "seed", 0, (1 << 40) - 1, True),
    ("--drop", "drop", 0.0, 1.0, False),
    ("--drop-seed", "drop_seed", 0, (1 << 40) - 1, True),
    ("--days", "days", 1, 3650, True),
]
#: flags whose lowest value is excluded (> rather than >=)
_OPEN_BELOW = {"--epsilon", "--sampling-rate", "--exponent", "--theta", "--stage-timeout"}
_OPEN_BELOW |= {"--join-timeout"}
#: flags whose highest value is excluded
_OPEN_ABOVE = {"--delta", "--drop"}


def check_numbers(args: argparse.Namespace, command: str) -> None:
    """Every numeric flag present in ``args`` within its range (one-line
    :class:`ValidationError` otherwise)."""
    for flag, attr, lo, hi, integer in _BOUNDS:
        value = getattr(args, attr, None)
        if value is None:
            continue
        low_ok = value > lo if flag in _OPEN_BELOW else value >= lo
        high_ok = value < hi if flag in _OPEN_ABOVE else value <= hi
        finite = integer or math.isfinite(value)
        if not (finite and low_ok and high_ok):
            left = "(" if flag in _OPEN_BELOW else "["
            right = ")" if flag in _OPEN_ABOVE else "]"
            kind = "an integer" if integer else "a number"
            raise ValidationError(flag, command, f"{kind} in {left}{lo:g}, {hi:g}{right}", value)


def _task_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task",
        choices=["sample-threshold", "tffe", "sum"],
        default="sample-threshold",
        help="what the clients send and the server releases, on synthetic client data: "
        "sample-threshold (the items sampled at least --threshold times), tffe (the "
        "frequencies of --dimension items, in two rounds) or sum (random vectors mod "
        "--modulus; tests); default %(default)s",
    )
    p.add_argument("--clients", type=int, required=True, help="number of clients N")
    p.add_argument(
        "--secure-sum",
        choices=["secagg", "secagg+"],
        default="secagg+",
        help="the secure-aggregation protocol: secagg (every pair of clients shares masks) or "
        "secagg+ (only neighbours in a random graph of degree --neighbours do); default "
        "%(default)s",
    )
    p.add_argument(
        "--epsilon",
        type=float,
        default=1.0,
        help="sample-threshold/tffe: the epsilon the release is calibrated to (1)",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=1e-6,
        help="sample-threshold/tffe: the delta the release is calibrated to (1e-6)",
    )
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
    p.add_argument(
        "--min-contributors",
        type=int,
        help="fewest masked inputs a round accepts (default: a majority of N; tffe: N, its "
        "calibration's n: state fewer to tolerate dropouts)",
    )
    p.add_argument("--stage-timeout", type=float, default=10.0, help="seconds per stage (10)")
    p.add_argument("--join-timeout", type=float, default=120.0, help="seconds to join (120)")
    p.add_argument("--log", help="append the round log here (JSON lines)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "federated", help="secure aggregation over the network (credentials/serve/client/run)"
    )
    fs = p.add_subparsers(dest="federated_command", metavar="ACTION", parser_class=type(p))
    fs.required = True
    k = fs.add_parser("credentials", help="issue a deployment's CA and certificates")
    k.add_argument("--clients", type=int, required=True, help="one certificate per id 0..N-1")
    k.add_argument("--host", default="127.0.0.1", help="the server's address (in its cert)")
    k.add_argument("--out", required=True, help="folder to write the files into")
    k.add_argument("--days", type=int, default=30, help="validity in days (30)")
    k.set_defaults(run=_credentials)
    s = fs.add_parser("serve", help="run the server of a federated task")
    _task_arguments(s)
    s.add_argument(
        "--host", default="127.0.0.1", help=f"{LISTEN_HELP}; a loopback address with --insecure"
    )
    s.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    s.add_argument(
        "--ca", help="the deployment CA's certificate: clients must present one it signed"
    )
    s.add_argument("--tls-key", help="the server's PEM private key (from 'credentials')")
    s.add_argument("--tls-cert", help="the server's PEM certificate")
    s.add_argument(
        "--insecure",
        action="store_true",
        help="DANGER: accept clients without certificates, trusting the ids they claim "
        "(loopback hosts only, for demos)",
    )
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
    if args.min_contributors is not None:
        if args.min_contributors > args.clients:
            raise ValidationError(
                "--min-contributors",
                FN,
                f"at most --clients ({args.clients})",
                args.min_contributors,
            )
        params["min_contributors"] = args.min_contributors
    if args.task == "sample-threshold":
        params.update(
            support=args.support,
            exponent=args.exponent,
            sampling_rate=args.sampling_rate,
            threshold=args.threshold,
        )
    elif args.task == "tffe":
        if args.dimension > 1024:
            raise ValidationError(
                "--dimension", f"{FN} --task tffe", "at most 1024", args.dimension
            )
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
    width = max(len(key) for key in release) + 2
    for key, value in release.items():
        print(f"{key:<{width}}{value}")
    print("round log")
    for r in records:
        flag = " (timed out)" if r.timed_out else ""
        print(
            f"  round {r.round} {r.stage:<9} {r.received}/{r.expected} clients "
            f"{r.seconds:.3f} s{flag}"
        )
        for who, why in sorted(r.culprits.items()):
            print(f"    client {who} caught: {why}")


def _credentials(args: argparse.Namespace) -> int:
    from privhist.federated.secagg import credentials, runtime

    fn = f"{FN} credentials"
    check_numbers(args, fn)
    runtime.check_host(args.host, fn)
    dep = credentials.issue(args.out, args.clients, args.host, days=args.days)
    print(
        f"wrote {dep.ca} (give it to the server and every client), {dep.server_key} and "
        f"{dep.server_cert} (the server's), client-ID.key and client-ID.pem for ids 0 to "
        f"{args.clients - 1} (each to its client only) in {dep.folder}"
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    from privhist.federated.secagg import credentials, runtime
    from privhist.federated.secagg.tasks import make_task

    fn = f"{FN} serve"
    check_numbers(args, fn)
    runtime.check_host(args.host, fn)
    if (args.tls_key is None) != (args.tls_cert is None):
        raise ValidationError("--tls-key", fn, "given together with --tls-cert", args.tls_key)
    if args.insecure:
        if args.ca:
            raise ValidationError("--insecure", fn, "not given with --ca", True)
        if not runtime.is_loopback(args.host):
            raise ValidationError("--host", f"{fn} --insecure", "a loopback address", args.host)
        print(
            "WARNING: --insecure: clients are NOT authenticated; anyone who can reach "
            f"{args.host} may join under any id (demo only)",
            file=sys.stderr,
            flush=True,
        )
        ca_pem = None
    else:
        if not (args.ca and args.tls_key):
            raise ValidationError(
                "--ca",
                fn,
                "given with --tls-key and --tls-cert (issue them with 'privhist federated "
                "credentials'; --insecure for a loopback demo)",
                None,
            )
        ca_pem = credentials.read_pem(args.ca, "certificate", fn, "--ca")
    if args.tls_key:
        key_pem = credentials.read_pem(args.tls_key, "key", fn, "--tls-key")
        cert_pem = credentials.read_pem(args.tls_cert, "certificate", fn, "--tls-cert")
        credentials.check_pair(key_pem, cert_pem, fn)
        if ca_pem is not None:
            credentials.check_signed_by(cert_pem, ca_pem, fn, "--tls-cert")
    else:
        key_pem, cert_pem = runtime.self_signed_certificate(args.host)
    if args.write_cert:
        Path(args.write_cert).write_bytes(cert_pem if ca_pem is None else ca_pem)
    coord = runtime.Coordinator(
        make_task(args.task, _params(args)),
        args.secure_sum,
        stage_timeout=args.stage_timeout,
        join_timeout=args.join_timeout,
        threshold=args.reconstruction_threshold,
        neighbours=args.neighbours,
        log=_logger(args),
        insecure=args.insecure,
    )
    server, port = runtime.start_server(coord, args.host, args.port, key_pem, cert_pem, ca_pem)
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
            who = who.strip()
            if not who.isdigit() or int(who) >= args.clients or stage not in STAGE_NAMES:
                raise ValidationError(
                    "--drop-schedule", FN, "ID:STAGE[,ID:STAGE...] with ids below --clients", part
                )
            out[int(who)] = stage
        return out
    return runtime.drop_schedule(args.clients, args.drop, default_source(args.drop_seed))


def _run(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from privhist.federated.secagg import runtime

    fn = f"{FN} run"
    check_numbers(args, fn)
    if args.clients > runtime.MAX_LOCAL_CLIENTS:
        raise ValidationError(
            "--clients", fn, f"at most {runtime.MAX_LOCAL_CLIENTS} (one process each)", args.clients
        )
    drops = _schedule(args)
    show = not args.no_progress and not args.json and sys.stderr.isatty()
    rounds = 2 if args.task == "tffe" else 1
    params = _params(args)
    with Progress(disable=not show, transient=True) as bar:
        job = bar.add_task("secure aggregation", total=5 * rounds)
        res = runtime.run_local(
            args.task,
            params,
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
            f"clients        {counted(len(res.clients), 'process', 'processes')}, "
            f"{counted(len(drops), 'injected dropout')}, "
            f"{len(ended)} failed; {res.seconds:.1f} s"
        )
    return 0 if not ended else 1
