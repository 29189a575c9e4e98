"""``privhist range``: private range counts of a numeric column from hierarchical
sample-and-threshold histograms (Bharadwaj & Cormode 2022, Section 4.2;
:mod:`privhist.analytics.range_query`).

Example::

    privhist range times.csv --column latency --range 0 2000 --query 0 100 --query 100 500 \\
        --epsilon 1 --delta 1e-8

Each query ``A B`` is answered on ``[A, B)`` snapped to the nearest leaf boundaries, with the
estimate, an exact confidence interval, the pruning bound of the withheld nodes and the Lemma's
worst case. One release answers every query, so the guarantee does not grow with their number.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from privhist.cli.commands.quantiles import add_common, common_kwargs, print_note
from privhist.cli.common import print_dry_run, session_for


def register(sub: Any) -> None:
    p = sub.add_parser("range", help="private range counts of a numeric column")
    add_common(p)
    p.add_argument(
        "--query",
        nargs=2,
        type=float,
        action="append",
        required=True,
        metavar=("A", "B"),
        help="a range [A, B) inside the public range (repeatable)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    fn = "range"
    release = session_for(args, fn).range_counts(
        args.input, queries=[(a, b) for a, b in args.query], **common_kwargs(args)
    )
    if args.dry_run:
        return print_dry_run(release, args.json)
    g = release.metadata["guarantee"]
    rows = release.to_polars().to_dicts()
    if args.json:
        print(json.dumps({"ranges": rows, **release.metadata}))
    else:
        print(
            f"{'range':>27}  {'estimate':>12}  {'interval':>25}  {'pruning <=':>11}  "
            f"{'lemma <=':>11}"
        )
        for x in rows:
            rng_text = f"[{x['answered_from']:.6g}, {x['answered_to']:.6g})"
            interval = f"[{x['lower']}, {x['upper']}]"
            print(
                f"{rng_text:>27}  {x['estimate']:>12.6g}  {interval:>25}  "
                f"{x['pruning_bound']:>11.4g}  {x['lemma_bound']:>11.4g}"
            )
        print(f"guarantee: {g['statement']}")
    print_note(release.metadata, release.diagnostics, args.clamp)
    return 0
