"""One federated client: :func:`run_client`, and the process entry point
``python -m privhist.federated.secagg.client`` (what ``privhist federated run`` starts once per
client, and what ``privhist federated client`` wraps; it loads nothing but the protocol, which
matters when dozens of clients start on one machine). The process prints one line: a JSON
object with ``--json``, a sentence otherwise; errors print one line on stderr.

A client authenticates with its own certificate and key (issued by the deployment's CA,
:mod:`privhist.federated.secagg.credentials`) and verifies the server with the CA's certificate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from privhist.core.errors import PrivhistError, ProtocolError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.federated.secagg.credentials import read_pem
from privhist.federated.secagg.messages import MAX_CONTROL_BYTES, SERVICE, Message
from privhist.federated.secagg.protocol import STAGES, RoundConfig, SecAggClient
from privhist.federated.secagg.tasks import RoundSpec, make_task, noise_source

#: ``(client id, config, vector, rng) -> protocol client`` (tests substitute misbehaving ones)
ProtocolFactory = Callable[[int, RoundConfig, Any, RandomSource], SecAggClient]
#: retries of a call the server refused for load (``RESOURCE_EXHAUSTED``)
RETRIES = 8


@dataclass
class ClientResult:
    """How a client process ended."""

    client: int
    status: str  # "finished", "dropped", "excluded", "aborted", "refused"
    release: dict[str, Any] | None = None
    rounds: int = 0
    bytes_sent: int = 0
    detail: str = ""


def _reply(data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except ValueError:
        raise ProtocolError("the server's reply is not JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError("the server's reply is not a JSON object")
    return obj


def run_client(
    target: str,
    ca_pem: bytes,
    client: int,
    *,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    seed: int | None = None,
    drop_at: str | None = None,
    timeout: float = 300.0,
    make_protocol: ProtocolFactory | None = None,
) -> ClientResult:
    """One client: join, take part in every round it is asked to, return the release.

    Args:
        target: ``HOST:PORT`` of the server.
        ca_pem: The deployment CA's certificate (verifies the server).
        client: This client's id (the one in its certificate).
        cert_pem, key_pem: This client's certificate and key (none: an insecure server).
        seed: Reproducible, NOT private task randomness.
        drop_at: Inject a dropout before this stage of the first round.
        timeout: Seconds per call.
        make_protocol: Builds the protocol client (default :class:`SecAggClient`).
    """
    import grpc  # loaded here: the CLI registers this module's flags without it

    fn = "run_client"
    if drop_at is not None and drop_at not in STAGES:
        raise ValidationError("drop_at", fn, f"one of {list(STAGES)}", drop_at)
    if (cert_pem is None) != (key_pem is None):
        raise ValidationError("cert_pem", fn, "given together with key_pem", "one of them")
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca_pem, private_key=key_pem, certificate_chain=cert_pem
    )
    opts = [("grpc.max_receive_message_length", 256 << 20)]
    factory: ProtocolFactory = make_protocol or SecAggClient
    with grpc.secure_channel(target, creds, options=opts) as channel:

        def call(method: str, payload: bytes) -> bytes:
            stub = channel.unary_unary(f"/{SERVICE}/{method}")
            for attempt in range(RETRIES + 1):
                try:
                    out: bytes = stub(payload, timeout=timeout, wait_for_ready=True)
                    return out
                except grpc.RpcError as exc:
                    code = exc.code()
                    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and attempt < RETRIES:
                        time.sleep(0.05 * 2**attempt)
                        continue
                    raise ProtocolError(f"{method}: {code.name}: {exc.details()}") from None
            raise AssertionError("unreachable")

        def control(method: str, **fields: int) -> dict[str, Any]:
            data = json.dumps({"client": client, **fields}).encode()
            if len(data) > MAX_CONTROL_BYTES:
                raise ValidationError("client", fn, "a small control request", len(data))
            return _reply(call(method, data))

        info = control("Join")
        task = make_task(str(info["task"]), dict(info["params"]))
        rng = noise_source(seed, client)
        after, sent, rounds = -1, 0, 0
        while True:
            resp = control("NextRound", after=after)
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
            proto = factory(client, config, vector, SecureRandom())
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


def add_arguments(c: argparse.ArgumentParser) -> None:
    """The client's flags (also those of ``privhist federated client``)."""
    c.add_argument("--server", required=True, help="HOST:PORT of the server")
    c.add_argument("--ca", required=True, help="the deployment CA's PEM certificate")
    c.add_argument("--cert", help="this client's PEM certificate (issued by the CA)")
    c.add_argument("--key", help="this client's PEM private key")
    c.add_argument("--id", type=int, required=True, help="this client's id in [0, N)")
    c.add_argument("--seed", type=int, help="reproducible, NOT private client randomness")
    c.add_argument("--drop-at", choices=list(STAGES), help="inject a dropout before this stage")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds per call (300)")
    c.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Run one client from parsed flags; prints its outcome; the exit status."""
    fn = "privhist federated client"
    if not 0 <= args.id < 1 << 20:
        raise ValidationError("--id", fn, "an integer in [0, 2**20)", args.id)
    if not 0 < args.timeout <= 86400:
        raise ValidationError("--timeout", fn, "seconds in (0, 86400]", args.timeout)
    if args.seed is not None and not 0 <= args.seed < 1 << 40:
        raise ValidationError("--seed", fn, "an integer in [0, 2**40)", args.seed)
    if (args.cert is None) != (args.key is None):
        raise ValidationError("--cert", fn, "given together with --key", args.cert)
    ca = read_pem(args.ca, "certificate", fn, "--ca")
    cert = None if args.cert is None else read_pem(args.cert, "certificate", fn, "--cert")
    key = None if args.key is None else read_pem(args.key, "key", fn, "--key")
    res = run_client(
        args.server,
        ca,
        args.id,
        cert_pem=cert,
        key_pem=key,
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
    p = argparse.ArgumentParser(prog="privhist federated client")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except (PrivhistError, OSError) as exc:
        print(f"privhist: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
