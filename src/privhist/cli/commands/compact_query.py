"""``privhist compact-query RELEASE KEY...``: counts from a CompactHistogram release.

The release is the JSON (or Parquet) file written by ``privhist histogram --mechanism compact
--output FILE.json`` or by :func:`privhist.io.compact.write_compact`; every key of
the universe has a count, evaluated from the polynomial (Balcer & Vadhan, Theorem 7.2: ``D + 1``
field products and a CDF search per key). Querying is post-processing: it costs no budget.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compact-query", help="evaluate keys' counts in a compact (CompactHistogram) release"
    )
    p.add_argument("release", help="compact release file (JSON or Parquet)")
    p.add_argument("keys", nargs="+", metavar="KEY", help="keys of the release's universe")
    p.add_argument("--json", action="store_true", help="print one JSON object {key: count}")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from privhist.io.compact import read_compact
    from privhist.mechanisms.finite.compact import CompactCounts

    compact = CompactCounts(read_compact(args.release))
    keys: list[Any] = list(args.keys)
    counts = compact.counts(keys)  # validates every key before anything is printed
    if args.json:
        print(json.dumps(dict(zip(keys, counts, strict=True))))
    else:
        for key, value in zip(keys, counts, strict=True):
            sys.stdout.write(f"{key}\t{value}\n")
    return 0
