"""``privhist estimate``: the sum of frequencies of selected keys from a private sample.

    privhist estimate SAMPLE --where SPEC [--json]

``SAMPLE`` is the CSV or JSON written by ``privhist sample``. ``SPEC`` selects keys:

* ``all`` — every key;
* ``key=a,b,c`` — the listed keys;
* ``prefix=abc`` — keys starting with ``abc``;
* ``regex=PATTERN`` — keys matching the Python regular expression (``re.search``).

The estimate is ``sum of estimate`` over the selected rows (equation 8); the printed bias and
standard deviation add the per-row exact bias and variance (keys are sanitised independently).
All three are of the frequencies as sampled, clamped to the sample's ``--max-frequency``. The
bias covers the released rows only: a selected key the sample left out has estimate 0 and a
bias of its own (negative), which no release can state, since which keys were left out is
exactly what the sample hides; the output says so (``bias_covers``).
Estimation is post-processing and costs no privacy. A sample whose integrity check fails (a cut
or edited file: :mod:`privhist.io.integrity`), or that holds a non-finite estimate or a negative
variance, is refused.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any

from privhist.core.errors import ValidationError


def register(sub: Any) -> None:
    p = sub.add_parser("estimate", help="estimate the sum of frequencies of selected keys")
    p.add_argument("sample", help="a private sample written by `privhist sample` (.csv/.json)")
    p.add_argument("--where", default="all", help="all | key=a,b | prefix=P | regex=R")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def parse_where(spec: str) -> Any:
    """A predicate on key strings from ``SPEC`` (see the module notes)."""
    fn = "estimate"
    if spec == "all":
        return lambda k: True
    kind, sep, value = spec.partition("=")
    if not sep:
        raise ValidationError("--where", fn, "all, key=..., prefix=... or regex=...", spec)
    if kind == "key":
        wanted = set(value.split(","))
        return lambda k: k in wanted
    if kind == "prefix":
        return lambda k: k.startswith(value)
    if kind == "regex":
        try:
            pat = re.compile(value)
        except re.error as exc:
            raise ValidationError("--where", fn, f"a valid regex ({exc})", value) from None
        return lambda k: pat.search(k) is not None
    raise ValidationError("--where", fn, "all, key=..., prefix=... or regex=...", spec)


def _rows(path: str) -> list[dict[str, Any]]:
    from privhist.io.samples import read_sample

    return read_sample(path, "estimate")


def run(args: argparse.Namespace) -> int:
    pred = parse_where(args.where)
    rows = [r for r in _rows(args.sample) if pred(str(r["key"]))]
    est = sum(float(r["estimate"]) for r in rows if r["estimate"] is not None)
    bias = sum(float(r["bias"]) for r in rows if r["bias"] is not None)
    var = sum(float(r["variance"]) for r in rows if r["variance"] is not None)
    out = {
        "where": args.where,
        "keys": len(rows),
        "estimate": est,
        "bias": bias,
        "std": math.sqrt(var),
        "bias_covers": BIAS_COVERS,
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            if k != "bias_covers":
                print(f"{k:<9} {v}")
        print(f"bias: of {BIAS_COVERS}; {BIAS_NOTE}")
    return 0


#: what the printed bias adds up
BIAS_COVERS = "the released rows selected"
BIAS_NOTE = "selected keys the sample left out add a negative bias no release can state"
