"""``privhist federated vdaf-*``: Prio3 (draft-irtf-cfrg-vdaf-20) from the command line.

``vdaf-check FILE.json [FILE.json ...]`` runs the draft's test vectors (its JSON format, the
variant taken from the file name, ``bad_*`` vectors included) and prints one line per file; it
exits 0 only when every value matches and every bad report is rejected.

The two-aggregator Prio3Histogram deployment (docs/federated/vdaf.md): ``vdaf-pki`` issues a
CA, party certificates and the aggregators' verification key; ``vdaf-helper`` and
``vdaf-leader`` serve the aggregators; ``vdaf-client`` uploads one report; ``vdaf-collect``
fetches the noisy histogram; ``vdaf-run`` does all of it on 127.0.0.1 with N clients.

This module is added to ``privhist federated`` by :mod:`privhist.cli.commands.federated` (its
name starts with ``_`` so that the plug-in loader does not make it a command of its own).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privhist.cli.common import LISTEN_HELP

FN = "privhist federated"
#: ``--task`` of every party of a deployment
TASK_HELP = "the task JSON file (public parameters, the same for every party)"
#: ``--pki`` of every party of a deployment
PKI_HELP = "the folder vdaf-pki wrote: ca.pem and this party's certificate and key"


def add_actions(fs: Any) -> None:
    """Add the ``vdaf-*`` actions to the ``privhist federated`` sub-parsers ``fs``."""
    c = fs.add_parser(
        "vdaf-check", help="run draft-irtf-cfrg-vdaf test vectors (Prio3) and compare"
    )
    c.add_argument("files", nargs="+", metavar="FILE.json", help="test-vector files")
    c.add_argument("--json", action="store_true", help="print one JSON object per file")
    c.set_defaults(run=_check)
    add_deployment_actions(fs)


def _check(args: argparse.Namespace) -> int:
    from privhist.cli.common import counted
    from privhist.federated.vdaf.vectors import check_file

    failed = 0
    for path in args.files:
        res = check_file(path)
        failed += not res.passed
        if args.json:
            print(
                json.dumps(
                    {
                        "file": path,
                        "variant": res.variant,
                        "passed": res.passed,
                        "operations": res.operations,
                        "rejected": res.rejected,
                        "failures": res.failures,
                    }
                )
            )
        else:
            print(res.line())
    if failed and not args.json:
        print(f"{failed} of {counted(len(args.files), 'file')} failed", file=sys.stderr)
    return 1 if failed else 0


def add_deployment_actions(fs: Any) -> None:
    """The two-aggregator Prio3Histogram roles (:mod:`privhist.federated.vdaf.deploy`)."""
    k = fs.add_parser("vdaf-pki", help="issue a CA, party certificates and a verification key")
    k.add_argument("--out", required=True, help="folder to write (keys are created mode 0600)")
    k.add_argument("--clients", type=int, required=True, help="client certificates client-0..N-1")
    k.add_argument("--host", default="127.0.0.1", help="the aggregators' host (in their SAN)")
    k.set_defaults(run=_pki)
    for role in ("leader", "helper"):
        a = fs.add_parser(f"vdaf-{role}", help=f"run the {role} aggregator of a Prio3 task")
        a.add_argument("--task", required=True, help=TASK_HELP)
        a.add_argument("--pki", required=True, help=PKI_HELP)
        a.add_argument("--verify-key", required=True, help="file with the 32-byte key, in hex")
        a.add_argument("--host", default="127.0.0.1", help=LISTEN_HELP)
        a.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
        a.add_argument("--port-file", help="write the bound port here")
        a.add_argument("--seconds", type=float, help="stop after this long (default: on signal)")
        a.add_argument("--noise-seed", type=int, help="reproducible, NOT private noise (tests)")
        if role == "leader":
            a.add_argument("--helper", required=True, help="HOST:PORT of the helper")
        a.set_defaults(run=_aggregator, role=role)
    c = fs.add_parser("vdaf-client", help="upload one Prio3Histogram report")
    c.add_argument("--task", required=True, help=TASK_HELP)
    c.add_argument("--pki", required=True, help=PKI_HELP)
    c.add_argument("--id", type=int, required=True, help="this client's number (client-ID)")
    c.add_argument("--leader", required=True, help="HOST:PORT")
    c.add_argument("--helper", required=True, help="HOST:PORT")
    c.add_argument(
        "--bucket",
        type=int,
        required=True,
        help="the bucket this client counts, in [0, the task's length)",
    )
    c.set_defaults(run=_client)
    o = fs.add_parser("vdaf-collect", help="collect the noisy histogram from both aggregators")
    o.add_argument("--task", required=True, help=TASK_HELP)
    o.add_argument("--pki", required=True, help=PKI_HELP)
    o.add_argument("--leader", required=True, help="HOST:PORT")
    o.add_argument("--helper", required=True, help="HOST:PORT")
    o.add_argument(
        "--threshold",
        help="drop buckets below this noisy count; 'auto': 0.05 expected empty buckets released",
    )
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.set_defaults(run=_collect)
    r = fs.add_parser("vdaf-run", help="leader, helper, collector and N clients on this machine")
    r.add_argument(
        "--clients",
        type=int,
        default=100,
        help="clients, one report each (client i counts bucket i mod --length); default "
        "%(default)s",
    )
    r.add_argument("--invalid", type=int, default=0, help="how many clients send bad reports")
    r.add_argument("--length", type=int, default=10, help="histogram buckets")
    r.add_argument("--epsilon", type=float, default=1.0, help="each aggregator's epsilon")
    r.add_argument(
        "--delta", type=float, default=0.0, help="each aggregator's delta (> 0 for gaussian)"
    )
    r.add_argument(
        "--noise",
        choices=["laplace", "gaussian"],
        default="laplace",
        help="each aggregator's noise: laplace (discrete Laplace, pure DP) or gaussian "
        "(discrete Gaussian, needs --delta > 0); default %(default)s",
    )
    r.add_argument(
        "--min-batch-size",
        type=int,
        default=10,
        help="fewest accepted reports the aggregators release their shares for (default "
        "%(default)s)",
    )
    r.add_argument("--threshold", help="as for vdaf-collect")
    r.add_argument("--seed", type=int, help="reproducible, NOT private randomness")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(run=_run_local)


def _threshold(args: argparse.Namespace, task: Any) -> int | None:
    from privhist.core.errors import ValidationError
    from privhist.federated.vdaf.deploy import auto_threshold

    if args.threshold is None:
        return None
    if args.threshold == "auto":
        return auto_threshold(task)
    try:
        return int(args.threshold)
    except ValueError:
        raise ValidationError("--threshold", FN, "an integer or 'auto'", args.threshold) from None


def _print_release(args: argparse.Namespace, release: dict[str, Any], extra: str = "") -> None:
    if args.json:
        print(json.dumps(release))
        return
    g = release["guarantee"]
    print(
        f"reports {release['reports']} accepted, {release['rejected']} rejected; "
        f"{g['noise']} noise per aggregator, epsilon {g['epsilon']}, delta {g['delta']}"
        f"{'' if release['private'] else ' (seeded noise: NOT private)'}{extra}"
    )
    if release["threshold"] is not None:
        print(f"buckets with a noisy count >= {release['threshold']}:")
    for b, c in zip(release["buckets"], release["counts"], strict=True):
        print(f"  {b:>6} {c:>8}")


def _pki(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from privhist.federated.vdaf import tls

    names = ["leader", "helper", "collector"] + [f"client-{i}" for i in range(args.clients)]
    tls.issue(args.out, names, (args.host,))
    key = Path(args.out) / "verify_key"
    key.touch(mode=0o600)
    key.write_text(os.urandom(32).hex() + "\n")
    print(
        f"wrote ca.pem, {len(names)} certificates and verify_key (aggregators only) to {args.out}"
    )
    return 0


def _aggregator(args: argparse.Namespace) -> int:
    import signal
    import threading
    from pathlib import Path

    from privhist.core.errors import ValidationError
    from privhist.core.random import SeededRandom
    from privhist.federated.vdaf import deploy, tls

    task = deploy.Task.load(args.task)
    try:
        key = bytes.fromhex(Path(args.verify_key).read_text().strip())
    except ValueError:
        raise ValidationError("--verify-key", FN, "a file with 64 hex digits", "") from None
    rng = None if args.noise_seed is None else SeededRandom(args.noise_seed)
    creds = tls.load(args.pki, args.role)
    to_helper = None
    party: deploy.Leader | deploy.Helper
    if args.role == "leader":
        to_helper = deploy.Channel(args.helper, creds)
        party = deploy.Leader(task, key, to_helper.call, rng)
    else:
        party = deploy.Helper(task, key, rng)
    server, port = deploy.serve(party, creds, args.host, args.port)
    if args.port_file:
        Path(args.port_file).write_text(f"{port}\n")
    print(f"{args.role} listening on {args.host}:{port}", file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait(args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop(1.0)
        if to_helper is not None:
            to_helper.close()
    return 0


def _client(args: argparse.Namespace) -> int:
    from privhist.federated.vdaf import deploy, tls

    task = deploy.Task.load(args.task)
    creds = tls.load(args.pki, f"client-{args.id}")
    lead, help_ = deploy.Channel(args.leader, creds), deploy.Channel(args.helper, creds)
    try:
        sent = deploy.upload(task, args.bucket, lead, help_)
    finally:
        lead.close()
        help_.close()
    print(f"client-{args.id}: report uploaded ({sent} bytes)")
    return 0


def _collect(args: argparse.Namespace) -> int:
    from privhist.federated.vdaf import deploy, tls

    task = deploy.Task.load(args.task)
    creds = tls.load(args.pki, "collector")
    lead, help_ = deploy.Channel(args.leader, creds), deploy.Channel(args.helper, creds)
    try:
        release = deploy.collect(task, lead, help_, _threshold(args, task))
    finally:
        lead.close()
        help_.close()
    _print_release(args, release)
    return 0


def _run_local(args: argparse.Namespace) -> int:
    from privhist.federated.vdaf import deploy

    task = deploy.Task(
        "local",
        length=args.length,
        epsilon=args.epsilon,
        delta=args.delta,
        noise=args.noise,
        min_batch_size=args.min_batch_size,
    )
    res = deploy.run_local(
        task, args.clients, args.invalid, seed=args.seed, threshold=_threshold(args, task)
    )
    extra = f"; {res.seconds:.1f} s, {res.upload_bytes} bytes uploaded per client"
    _print_release(args, res.release, extra)
    return 0
