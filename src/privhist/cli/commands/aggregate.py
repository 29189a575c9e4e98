"""``privhist aggregate``: counts, distinct users, sums, means, variances and quantiles per group
(:meth:`privhist.session.Session.aggregate`).

Example::

    privhist aggregate people.csv --by country,device --metric count \\
        --metric 'sum(amount,0,100)' --metric 'mean(age,0,120)' \\
        --metric 'quantiles(latency,0.5,0.9,0,1000)' --epsilon 1 --delta 1e-6 -o out.csv

A metric is ``count``, ``count_users``, ``sum(COLUMN,LOWER,UPPER)``, ``mean(...)``,
``variance(...)`` or ``quantiles(COLUMN,Q1,Q2,...,LOWER,UPPER)``; a bound may be ``auto``; an
optional ``NAME=`` in front names its output column (default: ``sum_amount`` and the like).
Public groups: ``--partitions FILE`` (a CSV with the group columns) or ``--product a=x,y b=1,2``.
"""

from __future__ import annotations

import argparse
import json
import re
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
from privhist.core.errors import MissingInputError, ValidationError

FN = "aggregate"

_METRIC = re.compile(r"^(?:(?P<name>[A-Za-z_][\w.-]*)=)?(?P<kind>\w+)(?:\((?P<args>[^()]*)\))?$")


def parse_metric(text: str) -> tuple[str, Any]:
    """``(output name, Metric)`` of one ``--metric`` (see the module notes)."""
    from privhist import metrics as m

    match = _METRIC.match(text.strip())
    kinds = ("count", "count_users", "sum", "mean", "variance", "quantiles")
    if match is None or match["kind"] not in kinds:
        raise ValidationError(
            "--metric",
            FN,
            "count, count_users, sum(C,LO,HI), mean(...), variance(...) or quantiles(C,Q...,LO,HI)",
            text,
        )
    kind = match["kind"]
    args = [a.strip() for a in (match["args"] or "").split(",") if a.strip()]

    def bound(value: str) -> Any:
        if value == "auto":
            return value
        try:
            return float(value)
        except ValueError:
            raise ValidationError(
                "--metric", FN, "bounds that are numbers or 'auto'", text
            ) from None

    if kind in ("count", "count_users"):
        if args:
            raise ValidationError("--metric", FN, f"{kind} without arguments", text)
        metric = m.count() if kind == "count" else m.count_users()
        return match["name"] or kind, metric
    if kind == "quantiles":
        if len(args) < 4:
            raise ValidationError("--metric", FN, "quantiles(COLUMN,Q...,LOWER,UPPER)", text)
        try:
            levels = [float(q) for q in args[1:-2]]
        except ValueError:
            raise ValidationError("--metric", FN, "levels that are numbers", text) from None
        if not all(0 <= q <= 1 for q in levels):
            raise ValidationError("--metric", FN, "quantile levels Q in [0, 1]", text)
    elif len(args) != 3:
        raise ValidationError("--metric", FN, f"{kind}(COLUMN,LOWER,UPPER)", text)
    lower, upper = bound(args[-2]), bound(args[-1])
    try:
        if kind == "quantiles":
            metric = m.quantiles(args[0], levels, lower, upper)
        else:
            metric = getattr(m, kind)(args[0], lower, upper)
    except ValidationError as exc:
        # the metric's own check names its Python parameter ("'upper' of metrics.sum"): say it
        # of the --metric the user wrote
        expected = f"a {kind} metric whose {exc.parameter} is {exc.expected}"
        raise ValidationError("--metric", FN, expected, text) from exc
    return match["name"] or f"{kind}_{args[0]}", metric


def parse_product(items: list[str]) -> Any:
    from privhist import metrics as m

    values: dict[str, list[Any]] = {}
    for item in items:
        column, sep, rest = item.partition("=")
        if not sep or not column or not rest:
            raise ValidationError("--product", FN, "COLUMN=v1,v2,... items", item)
        values[column] = [_value(v) for v in rest.split(",")]
    return m.product(values)


def parse_weights(items: list[str] | None, fn: str = FN) -> dict[str, float] | None:
    """``NAME=W`` items (a metric's name or ``groups``) as a weights mapping."""
    if not items:
        return None
    out: dict[str, float] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        try:
            out[name.strip()] = float(rest)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ValidationError("--weight", fn, "NAME=WEIGHT items", item)
    return out


def _value(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def register(sub: Any) -> None:
    p = sub.add_parser(
        "aggregate", help="counts, users, sums, means, variances and quantiles per group"
    )
    p.add_argument("input", help="CSV, TSV, Parquet or NDJSON file")
    p.add_argument("--by", required=True, help="group column(s), comma-separated")
    p.add_argument(
        "--metric",
        action="append",
        required=True,
        help="count, count_users, sum(C,LO,HI), mean(C,LO,HI), variance(C,LO,HI) or "
        "quantiles(C,Q1,...,LO,HI); bounds may be 'auto'; NAME=... names the column "
        "(repeatable)",
    )
    p.add_argument(
        "--epsilon",
        type=float,
        required=True,
        help="total epsilon of the aggregation (split over its metrics and, unless the groups "
        "are public, their selection)",
    )
    p.add_argument("--delta", type=float, default=0.0, help="total delta (default 0)")
    p.add_argument("--user", help="user (privacy unit) column: user-level privacy")
    p.add_argument("--max-partitions", type=int, default=1, help="groups per user (1)")
    p.add_argument("--max-per-partition", type=int, default=1, help="records per user and group")
    public = p.add_mutually_exclusive_group()
    public.add_argument(
        "--partitions", help="public groups: a CSV file whose columns are the group columns"
    )
    public.add_argument(
        "--product", nargs="+", metavar="COLUMN=V1,V2", help="public groups: every combination"
    )
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of intervals")
    p.add_argument(
        "--noise",
        choices=["auto", "gaussian", "laplace"],
        default="auto",
        help="the noise (auto: the smaller predicted error for these parameters)",
    )
    p.add_argument(
        "--weight",
        action="append",
        metavar="NAME=W",
        help="a metric's weight in the budget split (default 1 each), or groups=W: the "
        "selection's weight against the metrics' total (repeatable)",
    )
    p.add_argument(
        "--input-format", choices=["csv", "tsv", "parquet", "ndjson"], help=INPUT_FORMAT_HELP
    )
    p.add_argument(
        "--output", "-o", help="output file (CSV, JSON, Parquet; default: CSV on stdout)"
    )
    p.add_argument("--format", choices=["csv", "json", "parquet"], help="output format")
    p.add_argument("--seed", type=int, help="reproducible, NOT private randomness (tests only)")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    add_engine_arguments(p)
    add_dry_run_arguments(p)
    add_layout_arguments(p)
    add_ledger_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    metrics = dict(parse_metric(t) for t in args.metric)
    if len(metrics) != len(args.metric):
        raise ValidationError("--metric", FN, "metrics of distinct names", args.metric)
    partitions: Any = None
    if args.product:
        partitions = parse_product(args.product)
    elif args.partitions:
        import os

        import polars as pl

        if not os.path.isfile(args.partitions):
            # values typed in place of the file (--partitions fr,de) read as a file name
            columns = [c.strip() for c in args.by.split(",") if c.strip()]
            product = " ".join(f"{c}=V1,V2" for c in columns)
            if len(columns) == 1:
                product = f"{columns[0]}={args.partitions}"
            raise MissingInputError(
                "--partitions",
                FN,
                "be a CSV file of the public groups whose header names the group columns "
                f"(for values on the command line: --product {product})",
                repr(args.partitions),
            )
        # the groups' values as text: matched to the group columns' types when compared
        partitions = pl.read_csv(args.partitions, infer_schema=False)
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    release: Any = session_for(args, FN).aggregate(
        args.input,
        by=by,
        metrics=metrics,
        epsilon=args.epsilon,
        delta=args.delta,
        user=args.user,
        max_partitions=args.max_partitions,
        max_per_partition=args.max_per_partition,
        partitions=partitions,
        confidence=args.confidence,
        noise=args.noise,
        weights=parse_weights(args.weight),
        input_format=args.input_format,
        output=args.output,
        output_format=args.format,
        seed=args.seed,
        dry_run=args.dry_run,
        **layout(args, FN),
    )
    if args.dry_run:
        return print_dry_run(release, args.json)
    if args.output is None:
        if args.json:
            print(json.dumps({"rows": release.to_polars().to_dicts(), **release.metadata}))
        else:
            sys.stdout.write(release.to_polars().write_csv())
    info = release.diagnostics
    facts = [
        counted(info.get("records", 0), "record"),
        counted(info.get("groups", 0), "group") + " released",
    ]
    if info.get("records_outside_groups"):
        outside = counted(info["records_outside_groups"], "record")
        facts.append(f"{outside} outside the public groups dropped")
    if info.get("null_groups"):
        facts.append(f"{counted(info['null_groups'], 'record')} with a null group dropped")
    for column, n in (info.get("values_not_numbers") or {}).items():
        if n:
            facts.append(
                f"{counted(n, 'record')} whose {column!r} is empty or not a number left out of "
                "its metrics"
            )
    print(
        f"privhist: guarantee {release.metadata['guarantee']['statement']}; "
        + ("" if release.private else "seeded: reproducible and NOT private; ")
        + "input (exact, not private, not in the output): "
        + ", ".join(facts),
        file=sys.stderr,
    )
    return 0
