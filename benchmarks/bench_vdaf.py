"""Prio3Histogram: client time, upload bytes and verification time, privhist vs the draft's code.

Usage: python benchmarks/bench_vdaf.py --reference-poc PATH [--reference-python PY]
       [--buckets 10 100 1000] [--rounds 5] [--reports 64]

The peer is the Python reference implementation published with draft-irtf-cfrg-vdaf-20 (its
``poc/`` folder, package ``vdaf_poc``; it needs Python >= 3.12 with ``pycryptodomex``). Obtain it
from the draft's public repository (cfrg/draft-irtf-cfrg-vdaf, tag ``draft-irtf-cfrg-vdaf-20``)
into a scratch folder and pass ``--reference-poc <checkout>/poc``; without it the reference rows
say "skipped" and only privhist is measured.

What is timed, per report, for both implementations with the same parameters (two aggregators,
``chunk_length = isqrt(length)`` as the draft recommends, the same context and key):

* client: ``shard`` of a fresh measurement plus the encoding of the public share and both input
  shares to bytes;
* verification: decoding the public and input shares, ``verify_init`` at both aggregators,
  ``verifier_shares_to_message`` and ``verify_next`` at both (the whole verification of one
  report; halve it for one aggregator's share), one report at a time as the reference's API
  does; and, for privhist only, the same through ``verify_init_many`` /
  ``verifier_shares_to_message_many`` on all the worker's reports at once (what the deployed
  aggregators do, in batches of 64), per report, with its ratio to the reference's
  one-at-a-time figure.

CPU seconds of the worker process (``time.process_time``) after one untimed warm-up report.
Each (implementation, size) runs in a fresh process; rounds interleave the two (the order
alternates), the ratio is taken inside each round and the median of the rounds' ratios is
printed with the machine's load average. Upload bytes are the encoded nonce, public share and
input shares, beside the size the draft's encoding (Section 7.2.6) gives for the parameters.
Prints numbers; asserts nothing.

Goal (issue #32): client and verification at least 10x faster than the reference code; upload
within 10 % of the draft's encoding size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CTX = b"privhist benchmark"
SRC = Path(__file__).resolve().parents[1] / "src"


def _regular(n: int, offset: int) -> bytes:
    return bytes((i + offset) % 256 for i in range(n))


def worker_ours(buckets: int, chunk: int, reports: int) -> dict[str, Any]:
    from privhist.federated.vdaf.prio3 import prio3_histogram

    vdaf = prio3_histogram(2, buckets, chunk)
    key = _regular(vdaf.VERIFY_KEY_SIZE, 7)

    def client(i: int) -> tuple[bytes, bytes, list[bytes]]:
        nonce = _regular(16, i)
        public, shares = vdaf.shard(CTX, i % buckets, nonce, _regular(vdaf.RAND_SIZE, 3 * i))
        return nonce, vdaf.encode_public_share(public), [vdaf.encode_input_share(s) for s in shares]

    def verify(nonce: bytes, public_b: bytes, shares_b: list[bytes]) -> None:
        public = vdaf.decode_public_share(public_b)
        inits = []
        for j, b in enumerate(shares_b):
            share = vdaf.decode_input_share(j, b)
            inits.append(vdaf.verify_init(key, CTX, j, nonce, public, share))
        msg = vdaf.verifier_shares_to_message(CTX, [vs for _, vs in inits])
        for state, _ in inits:
            vdaf.verify_next(state, msg)

    def verify_batch(uploads: list[tuple[bytes, bytes, list[bytes]]]) -> None:
        decoded = [
            (
                n,
                vdaf.decode_public_share(p),
                [vdaf.decode_input_share(j, b) for j, b in enumerate(s)],
            )
            for n, p, s in uploads
        ]
        inits = [
            vdaf.verify_init_many(key, CTX, j, [(n, p, s[j]) for n, p, s in decoded])
            for j in range(2)
        ]
        shares = [[inits[0][r][1], inits[1][r][1]] for r in range(len(decoded))]  # type: ignore[index]
        msgs = vdaf.verifier_shares_to_message_many(CTX, shares)
        for r, msg in enumerate(msgs):
            for j in range(2):
                vdaf.verify_next(inits[j][r][0], msg)  # type: ignore[index, arg-type]

    return _measure(client, verify, reports, verify_batch)


def worker_reference(buckets: int, chunk: int, reports: int, poc: str) -> dict[str, Any]:
    sys.path.insert(0, poc)
    from vdaf_poc.vdaf_prio3 import Prio3Histogram  # type: ignore[import-not-found]

    vdaf = Prio3Histogram(2, buckets, chunk)
    key = _regular(vdaf.VERIFY_KEY_SIZE, 7)

    def client(i: int) -> tuple[bytes, bytes, list[bytes]]:
        nonce = _regular(16, i)
        public, shares = vdaf.shard(CTX, i % buckets, nonce, _regular(vdaf.RAND_SIZE, 3 * i))
        return nonce, vdaf.encode_public_share(public), [vdaf.encode_input_share(s) for s in shares]

    def verify(nonce: bytes, public_b: bytes, shares_b: list[bytes]) -> None:
        public = vdaf.decode_public_share(public_b)
        inits = []
        for j, b in enumerate(shares_b):
            share = vdaf.decode_input_share(j, b)
            inits.append(vdaf.verify_init(key, CTX, j, None, nonce, public, share))
        msg = vdaf.verifier_shares_to_message(CTX, None, [vs for _, vs in inits])
        for state, _ in inits:
            vdaf.verify_next(CTX, state, msg)

    return _measure(client, verify, reports)


def _measure(client: Any, verify: Any, reports: int, batch: Any = None) -> dict[str, Any]:
    verify(*client(10_000))  # warm-up, untimed
    t0 = time.process_time()
    uploads = [client(i) for i in range(reports)]
    t1 = time.process_time()
    for up in uploads:
        verify(*up)
    t2 = time.process_time()
    nonce, public, shares = uploads[0]
    out = {
        "client_s": (t1 - t0) / reports,
        "verify_s": (t2 - t1) / reports,
        "upload_bytes": len(nonce) + len(public) + sum(len(s) for s in shares),
    }
    if batch is not None:
        batch(uploads[:2])  # warm-up of the batched path, untimed
        t3 = time.process_time()
        batch(uploads)
        out["verify_batch_s"] = (time.process_time() - t3) / reports
    return out


def draft_upload_bytes(buckets: int, chunk: int) -> int:
    """Nonce, public share and both input shares by the draft's Section 7.2.6, for
    Prio3Histogram (Field128, XofTurboShake128 seeds of 32 bytes, one proof, two shares)."""
    calls = -(-buckets // chunk)
    wire = 1 << (calls).bit_length()  # next_power_of_2(1 + calls)
    proof_len = 2 * chunk + 2 * (wire - 1) + 1
    leader = 16 * (buckets + proof_len) + 32
    helper = 32 + 32
    return 16 + 2 * 32 + leader + helper


def _run(kind: str, buckets: int, chunk: int, reports: int, args: argparse.Namespace) -> Any:
    here = str(Path(__file__).resolve())
    if kind == "ours":
        cmd = [sys.executable, here, "--worker", "ours"]
        env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    else:
        cmd = [args.reference_python, here, "--worker", "reference", "--poc", args.reference_poc]
        env = dict(os.environ)
    cmd += ["--buckets", str(buckets), "--chunk", str(chunk), "--reports", str(reports)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--buckets", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reports", type=int, default=64, help="reports per worker process")
    p.add_argument("--reference-poc", help="the draft's poc/ folder (package vdaf_poc)")
    p.add_argument("--reference-python", default=sys.executable, help="Python >= 3.12 for it")
    p.add_argument("--worker", choices=["ours", "reference"], help=argparse.SUPPRESS)
    p.add_argument("--poc", help=argparse.SUPPRESS)
    p.add_argument("--chunk", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        chunk = args.chunk or max(1, math.isqrt(args.buckets[0]))
        if args.worker == "ours":
            res = worker_ours(args.buckets[0], chunk, args.reports)
        else:
            res = worker_reference(args.buckets[0], chunk, args.reports, args.poc)
        print(json.dumps(res))
        return

    ref_ok = bool(args.reference_poc) and (Path(args.reference_poc) / "vdaf_poc").is_dir()
    print(f"load average at start: {os.getloadavg()}")
    print(f"privhist: {sys.executable}; reference: ", end="")
    print(f"{args.reference_poc} with {args.reference_python}" if ref_ok else "skipped (no poc)")
    rows: dict[int, dict[str, list[Any]]] = {b: {"ours": [], "ref": []} for b in args.buckets}
    for r in range(args.rounds):
        for k, b in enumerate(args.buckets):
            chunk = max(1, math.isqrt(b))
            reports = max(3, args.reports if b <= 100 else args.reports // 4)
            order = ["ours", "ref"] if (r + k) % 2 == 0 else ["ref", "ours"]
            for kind in order:
                if kind == "ref" and not ref_ok:
                    continue
                res = _run("ours" if kind == "ours" else "reference", b, chunk, reports, args)
                rows[b][kind].append(res)
        print(f"round {r + 1}/{args.rounds} done; load average {os.getloadavg()}", flush=True)

    print()
    print(
        f"{'buckets':>7} {'chunk':>5} {'client ms':>10} {'ref':>9} {'ratio':>7} "
        f"{'verify ms':>10} {'ref':>9} {'ratio':>7} {'batched':>8} {'ratio':>7} "
        f"{'upload B':>9} {'ref':>7} {'draft':>7}"
    )
    for b in args.buckets:
        chunk = max(1, math.isqrt(b))
        ours, ref = rows[b]["ours"], rows[b]["ref"]
        c = statistics.median(x["client_s"] for x in ours) * 1e3
        v = statistics.median(x["verify_s"] for x in ours) * 1e3
        vb = statistics.median(x["verify_batch_s"] for x in ours) * 1e3
        up = ours[0]["upload_bytes"]
        if ref:
            rc = statistics.median(x["client_s"] for x in ref) * 1e3
            rv = statistics.median(x["verify_s"] for x in ref) * 1e3
            cr = statistics.median(
                y["client_s"] / x["client_s"] for x, y in zip(ours, ref, strict=True)
            )
            vr = statistics.median(
                y["verify_s"] / x["verify_s"] for x, y in zip(ours, ref, strict=True)
            )
            br = statistics.median(
                y["verify_s"] / x["verify_batch_s"] for x, y in zip(ours, ref, strict=True)
            )
            rup = ref[0]["upload_bytes"]
            print(
                f"{b:>7} {chunk:>5} {c:>10.3f} {rc:>9.3f} {cr:>6.1f}x {v:>10.3f} {rv:>9.3f} "
                f"{vr:>6.1f}x {vb:>8.3f} {br:>6.1f}x {up:>9} {rup:>7} "
                f"{draft_upload_bytes(b, chunk):>7}"
            )
        else:
            print(
                f"{b:>7} {chunk:>5} {c:>10.3f} {'skipped':>9} {'':>7} {v:>10.3f} "
                f"{'skipped':>9} {'':>7} {vb:>8.3f} {'':>7} {up:>9} {'':>7} "
                f"{draft_upload_bytes(b, chunk):>7}"
            )
    print(
        "\nms: median CPU milliseconds per report; ratio: median over rounds of the reference's "
        "time over privhist's in the same round; verify: both aggregators' whole verification, "
        "one report at a time; batched: the same in one batch of the worker's reports"
    )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
