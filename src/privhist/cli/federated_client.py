"""One federated client process: ``privhist federated client``, also runnable as
``python -m privhist.cli.federated_client`` (what ``privhist federated run`` starts: it skips the
loading of every other command, which matters when dozens of clients start on one machine)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

STAGE_NAMES = ["advertise", "shares", "masked", "ack", "unmask"]


def add_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--server", required=True, help="HOST:PORT of the server")
    c.add_argument("--cert", required=True, help="the server's PEM certificate")
    c.add_argument("--id", type=int, required=True, help="this client's id in [0, N)")
    c.add_argument("--seed", type=int, help="reproducible, NOT private client randomness")
    c.add_argument("--drop-at", choices=STAGE_NAMES, help="inject a dropout before this stage")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds per call (300)")
    c.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from privhist.federated.secagg import runtime

    res = runtime.run_client(
        args.server,
        Path(args.cert).read_bytes(),
        args.id,
        seed=args.seed,
        drop_at=args.drop_at,
        timeout=args.timeout,
    )
    if args.json:
        print(json.dumps(asdict(res)))
    else:
        print(f"client {res.client}: {res.status} after {res.rounds} round(s) {res.detail}")
    return 0 if res.status in ("finished", "dropped", "excluded") else 1


def main(argv: Sequence[str] | None = None) -> int:
    from privhist.core.errors import PrivhistError

    p = argparse.ArgumentParser(prog="privhist federated client")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except (PrivhistError, OSError) as exc:
        print(f"privhist: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


def _entry() -> Any:
    raise SystemExit(main())


if __name__ == "__main__":
    _entry()
