"""``privhist quantiles``: private quantiles of a numeric column from sample-and-threshold
histograms (Bharadwaj & Cormode 2022, Section 4.2; :mod:`privhist.analytics.quantiles`).

Example::

    privhist quantiles times.csv --column latency --range 0 2000 --q 0.5 0.9 0.99 \\
        --epsilon 1 --delta 1e-8 --levels 10

Every parameter is checked before the data is read. Values outside ``--range`` are an error
unless ``--clamp``; missing or non-numeric values are dropped. Exact facts about the input (values
read, dropped, clamped) go to stderr marked as not private and never into the output.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privhist.cli.common import (
    INPUT_FORMAT_HELP,
    add_dry_run_arguments,
    add_engine_arguments,
    add_layout_arguments,
    add_ledger_arguments,
    counted,
    layout,
    print_dry_run,
    session_for,
)

TABULAR = ("csv", "tsv", "parquet", "ndjson")


def add_common(p: argparse.ArgumentParser) -> None:
    """Flags shared by ``quantiles`` and ``range``."""
    p.add_argument("input", help="CSV, TSV, Parquet or NDJSON file, one value per row")
    p.add_argument("--column", required=True, help="the numeric column")
    p.add_argument(
        "--range",
        nargs=2,
        type=float,
        required=True,
        metavar=("LO", "HI"),
        help="public range [LO, HI) of the values",
    )
    p.add_argument("--epsilon", type=float, required=True, help="total epsilon")
    p.add_argument("--delta", type=float, required=True, help="total delta")
    p.add_argument("--levels", type=int, default=8, help="levels L (binary search: rounds)")
    p.add_argument("--branching", type=int, default=2, help="branching beta of the hierarchy")
    p.add_argument(
        "--clamp",
        action="store_true",
        help="move values outside the range to its ends (counted) instead of failing",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of intervals")
    p.add_argument("--sampling-rate", type=float, help="Poisson sampling rate per release")
    p.add_argument("--threshold", type=int, help="threshold tau per release")
    p.add_argument("--alpha", type=float, help="rate p = alpha (1 - e^-eps) per release (1/6)")
    p.add_argument(
        "--composition",
        choices=["pld", "basic"],
        help="how the budget is split over the releases: pld (default) gives each the largest "
        "epsilon whose certified PLD composition is within the budget; basic splits it evenly "
        "(the paper's Lemma 4.1)",
    )
    p.add_argument(
        "--input-format",
        choices=list(TABULAR),
        help=INPUT_FORMAT_HELP,
    )
    p.add_argument("--seed", type=int, help="reproducible, NOT private randomness (tests only)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    add_engine_arguments(p)
    add_dry_run_arguments(p)
    add_layout_arguments(p)
    add_ledger_arguments(p)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The per-release calibration flags given (sampling rate, threshold, alpha, composition)."""
    out: dict[str, Any] = {}
    for name in ("sampling_rate", "threshold", "alpha", "composition"):
        v = getattr(args, name)
        if v is not None:
            out[name] = v
    return out


def common_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The Session arguments ``quantiles`` and ``range`` share."""
    lo, hi = args.range
    return {
        "column": args.column,
        "lower": lo,
        "upper": hi,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "levels": args.levels,
        "branching": args.branching,
        "confidence": args.confidence,
        "clamp": args.clamp,
        "input_format": args.input_format,
        "seed": args.seed,
        "dry_run": args.dry_run,
        **layout(args, args.command),
        **options(args),
    }


def print_note(metadata: dict[str, Any], facts: dict[str, Any], clamp: bool) -> None:
    """The one stderr line: method, guarantee, seeded-source warning, exact input facts."""
    g = metadata["guarantee"]
    note = [
        f"method {metadata['method']}",
        f"guarantee ({g['epsilon']:.6g}, {g['delta']:.3g})-DP for "
        + (
            "one client's value replaced"
            if "replace" in g["neighbouring"]
            else "one client added or removed"
        ),
    ]
    if "warning" in metadata:
        note.append(metadata["warning"])
    note.append(input_note(facts, clamp))
    print("privhist: " + "; ".join(note), file=sys.stderr)


def input_note(facts: dict[str, Any], clamp: bool) -> str:
    parts = [counted(facts.get("rows", 0), "row") + " read"]
    parts.append(counted(facts.get("dropped", 0), "missing or non-numeric value") + " dropped")
    if clamp:
        parts.append(counted(facts.get("clamped", 0), "value") + " outside the range clamped")
    return "input (exact, not private, not in the output): " + ", ".join(parts)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "quantiles", help="private quantiles of a numeric column (sample-and-threshold)"
    )
    add_common(p)
    p.add_argument(
        "--q",
        nargs="+",
        type=float,
        required=True,
        metavar="Q",
        help="quantile levels in [0, 1]",
    )
    p.add_argument(
        "--method",
        choices=["hierarchical", "binary-search"],
        default="hierarchical",
        help="one hierarchical release for all quantiles, or --levels search rounds each",
    )
    p.add_argument(
        "--cohort-size",
        type=int,
        help="binary search on fixed-size cohorts: each round contacts exactly this many "
        "clients, without replacement (needs --clients; substitution neighbours)",
    )
    p.add_argument(
        "--clients",
        type=int,
        help="the public number of clients n for --cohort-size (the data must hold exactly n)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    fn = "quantiles"
    result = session_for(args, fn).quantiles(
        args.input,
        q=args.q,
        method=args.method,
        cohort_size=args.cohort_size,
        clients=args.clients,
        **common_kwargs(args),
    )
    if args.dry_run:
        return print_dry_run(result, args.json)
    facts = result.diagnostics
    if args.json:
        rows = result.to_polars().to_dicts()
        print(json.dumps({"quantiles": rows, **result.metadata}))
    else:
        g = result.metadata["guarantee"]
        head = f"{'q':>8}  {'value':>14}  {'bucket':>31}  rank error (pruning, sampling)"
        print(head)
        for row in result.to_polars().iter_rows(named=True):
            bucket = f"[{row['bucket_lower']:.6g}, {row['bucket_upper']:.6g}]"
            print(
                f"{row['q']:>8.6g}  {row['value']:>14.6g}  {bucket:>31}  "
                f"{row['pruning_rank_error']:.3g}, {row['sampling_rank_error']:.3g}"
            )
        print(
            "bucket: the interval of width (upper - lower) / branching**levels the answer lies "
            "in (its resolution, not a confidence interval)"
        )
        print(f"guarantee: {g['statement']}")
    print_note(result.metadata, facts, args.clamp)
    return 0
