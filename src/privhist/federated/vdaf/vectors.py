"""Known-answer tests in the JSON format of draft-irtf-cfrg-vdaf-20, Appendix C.

A test-vector file holds the VDAF's parameters, the application context, the verification key,
the reports (measurement, nonce, sharding randomness and the expected public share, input
shares, verifier shares and messages, output shares), the expected aggregate shares and result,
and a list of *operations* to run in order, each with ``success`` true (the output must equal
the file's) or false (the operation must fail: a ``bad_*`` vector, whose report must be
rejected). Operations consume the file's messages, so a corrupted input share is verified as
given.

The variant comes from the file name (``Prio3Histogram_1.json`` -> Prio3Histogram); the draft
repository's two test-only variants are ``Prio3SumVecWithMultiproof`` (SumVec over Field64 with
three proofs, as its generator builds it) and ``Prio3HigherDegree`` (a degree-3 gadget).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privhist.core.errors import PrivhistError, ProtocolError, ValidationError
from privhist.federated.vdaf.field import Field64, FieldVec
from privhist.federated.vdaf.prio3 import (
    Prio3,
    VerifyState,
    prio3_count,
    prio3_higher_degree,
    prio3_histogram,
    prio3_multihot_count_vec,
    prio3_sum,
    prio3_sum_vec,
    prio3_sum_vec_multiproof,
)

Builder = Callable[[Mapping[str, Any]], Prio3[Any, Any]]

VARIANTS: dict[str, Builder] = {
    "Prio3Count": lambda d: prio3_count(d["shares"]),
    "Prio3Sum": lambda d: prio3_sum(d["shares"], d["max_measurement"]),
    "Prio3SumVec": lambda d: prio3_sum_vec(
        d["shares"], d["length"], d["max_measurement"], d["chunk_length"]
    ),
    "Prio3SumVecWithMultiproof": lambda d: prio3_sum_vec_multiproof(
        d["shares"], Field64, 3, d["length"], d["max_measurement"], d["chunk_length"]
    ),
    "Prio3Histogram": lambda d: prio3_histogram(d["shares"], d["length"], d["chunk_length"]),
    "Prio3MultihotCountVec": lambda d: prio3_multihot_count_vec(
        d["shares"], d["length"], d["max_weight"], d["chunk_length"]
    ),
    "Prio3HigherDegree": lambda d: prio3_higher_degree(d["shares"]),
}


@dataclass
class VectorResult:
    """The outcome of one test-vector file."""

    path: str
    variant: str
    passed: bool
    operations: int = 0
    rejected: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        name = Path(self.path).name
        if not self.passed:
            return f"FAIL {name} ({self.variant}): {self.failures[0]}"
        extra = ""
        if self.rejected:
            extra = f", bad report rejected: {self.rejected[0]}"
        return f"PASS {name} ({self.variant}, {self.operations} operations{extra})"


def variant_of(path: str | Path) -> str:
    """The variant named by a test-vector file's name (``<Variant>_<suffix>.json``)."""
    stem = Path(path).name.split(".")[0]
    name = stem.split("_")[0]
    if name not in VARIANTS:
        raise ValidationError("file", "vdaf-check", f"named after one of {sorted(VARIANTS)}", stem)
    return name


def _hex(x: Any, what: str) -> bytes:
    if not isinstance(x, str):
        raise ProtocolError(f"{what} must be a hex string")
    return bytes.fromhex(x)


def run_vector(data: Mapping[str, Any], variant: str, path: str = "") -> VectorResult:
    """Run every operation of one parsed test vector and compare with its expected values."""
    res = VectorResult(path, variant, False)
    try:
        vdaf = VARIANTS[variant](data)
        ctx = _hex(data["ctx"], "ctx")
        key = _hex(data["verify_key"], "verify_key")
        reports = data["reports"]
        ops = data["operations"]
    except (KeyError, TypeError, ValueError, PrivhistError) as exc:
        res.failures.append(f"cannot read the vector: {exc}")
        return res
    states: dict[tuple[int, int], VerifyState] = {}
    outs: dict[tuple[int, int], FieldVec] = {}

    def expect(ok: bool, what: str) -> None:
        if not ok:
            raise AssertionError(what)

    for op in ops:
        kind = op.get("operation")
        success = bool(op.get("success"))
        r = op.get("report_index", 0)
        j = op.get("aggregator_id", 0)
        rnd = op.get("round", 0)
        rep = reports[r] if isinstance(r, int) and 0 <= r < len(reports) else {}
        tag = f"{kind} (report {r}, aggregator {j})"
        try:
            if kind == "shard":
                public, shares = vdaf.shard(
                    ctx, rep["measurement"], _hex(rep["nonce"], "nonce"), _hex(rep["rand"], "rand")
                )
                expect(vdaf.encode_public_share(public).hex() == rep["public_share"], "public")
                for a, share in enumerate(shares):
                    got = vdaf.encode_input_share(share).hex()
                    expect(got == rep["input_shares"][a], f"input share {a}")
            elif kind == "verify_init":
                public = vdaf.decode_public_share(_hex(rep["public_share"], "public_share"))
                share = vdaf.decode_input_share(j, _hex(rep["input_shares"][j], "input_share"))
                state, vshare = vdaf.verify_init(
                    key, ctx, j, _hex(rep["nonce"], "nonce"), public, share
                )
                got = vdaf.encode_verifier_share(vshare).hex()
                expect(got == rep["verifier_shares"][0][j], "verifier share")
                states[(r, j)] = state
            elif kind == "verifier_shares_to_message":
                vshares = [
                    vdaf.decode_verifier_share(_hex(x, "verifier_share"))
                    for x in rep["verifier_shares"][rnd]
                ]
                msg = vdaf.verifier_shares_to_message(ctx, vshares)
                got = vdaf.encode_verifier_message(msg).hex()
                expect(got == rep["verifier_messages"][rnd], "verifier message")
            elif kind == "verify_next":
                msg = vdaf.decode_verifier_message(
                    _hex(rep["verifier_messages"][rnd - 1], "verifier_message")
                )
                out = vdaf.verify_next(states[(r, j)], msg)
                expect(out.encode().hex() == rep["out_shares"][j], "output share")
                outs[(r, j)] = out
            elif kind == "aggregate":
                agg = vdaf.agg_init()
                for (_r, a), out in sorted(outs.items()):
                    if a == j:
                        agg = vdaf.agg_update(agg, out)
                expect(vdaf.encode_agg_share(agg).hex() == data["agg_shares"][j], "agg share")
            elif kind == "unshard":
                aggs = [vdaf.decode_agg_share(_hex(x, "agg_share")) for x in data["agg_shares"]]
                result = vdaf.unshard(aggs, len(reports))
                expect(result == data["agg_result"], f"result {result}")
            else:
                raise AssertionError(f"unknown operation {kind!r}")
        except AssertionError as exc:
            res.failures.append(f"{tag}: {exc} differs from the vector")
            return res
        except (PrivhistError, KeyError, IndexError, TypeError, ValueError) as exc:
            if success:
                res.failures.append(f"{tag} failed: {exc}")
                return res
            res.rejected.append(f"{kind}: {exc}")
            res.operations += 1
            continue
        if not success:
            res.failures.append(f"{tag} succeeded but the vector expects it to fail")
            return res
        res.operations += 1
    res.passed = True
    return res


def check_file(path: str | Path) -> VectorResult:
    """Run one test-vector file (variant from its name)."""
    try:
        variant = variant_of(path)
    except ValidationError as exc:
        return VectorResult(str(path), "?", False, failures=[str(exc)])
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return VectorResult(str(path), variant, False, failures=[f"unreadable: {exc}"])
    if not isinstance(data, dict):
        return VectorResult(str(path), variant, False, failures=["not a JSON object"])
    return run_vector(data, variant, str(path))


def generate_vector(
    vdaf: Prio3[Any, Any],
    params: Mapping[str, Any],
    measurements: list[Any],
    ctx: bytes = b"some application",
) -> dict[str, Any]:
    """A test vector in the draft's schema for ``measurements``, with the draft generator's
    regular inputs (``rand``, nonce and verification key ``i % 256``).

    Produced by this implementation: it documents our outputs (for other implementations to
    compare with); it is not evidence of agreement with the draft by itself.
    """

    def regular(n: int) -> bytes:
        return bytes(i % 256 for i in range(n))

    key, nonce = regular(vdaf.VERIFY_KEY_SIZE), regular(vdaf.NONCE_SIZE)
    reports: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    aggs = [vdaf.agg_init() for _ in range(vdaf.SHARES)]
    for r, m in enumerate(measurements):
        rand = regular(vdaf.RAND_SIZE)
        public, shares = vdaf.shard(ctx, m, nonce, rand)
        ops.append({"operation": "shard", "report_index": r, "success": True})
        inits = [vdaf.verify_init(key, ctx, j, nonce, public, s) for j, s in enumerate(shares)]
        ops += [
            {"operation": "verify_init", "aggregator_id": j, "report_index": r, "success": True}
            for j in range(vdaf.SHARES)
        ]
        msg = vdaf.verifier_shares_to_message(ctx, [vs for _, vs in inits])
        ops.append(
            {
                "operation": "verifier_shares_to_message",
                "report_index": r,
                "round": 0,
                "success": True,
            }
        )
        outs = [vdaf.verify_next(st, msg) for st, _ in inits]
        ops += [
            {
                "operation": "verify_next",
                "aggregator_id": j,
                "report_index": r,
                "round": 1,
                "success": True,
            }
            for j in range(vdaf.SHARES)
        ]
        aggs = [vdaf.agg_update(a, o) for a, o in zip(aggs, outs, strict=True)]
        reports.append(
            {
                "measurement": m,
                "nonce": nonce.hex(),
                "rand": rand.hex(),
                "public_share": vdaf.encode_public_share(public).hex(),
                "input_shares": [vdaf.encode_input_share(s).hex() for s in shares],
                "verifier_shares": [[vdaf.encode_verifier_share(vs).hex() for _, vs in inits]],
                "verifier_messages": [vdaf.encode_verifier_message(msg).hex()],
                "out_shares": [o.encode().hex() for o in outs],
            }
        )
    ops += [
        {"operation": "aggregate", "aggregator_id": j, "success": True} for j in range(vdaf.SHARES)
    ]
    ops.append({"operation": "unshard", "success": True})
    return {
        **dict(params),
        "ctx": ctx.hex(),
        "verify_key": key.hex(),
        "agg_param": "",
        "reports": reports,
        "agg_shares": [vdaf.encode_agg_share(a).hex() for a in aggs],
        "agg_result": vdaf.unshard(aggs, len(measurements)),
        "operations": ops,
    }
