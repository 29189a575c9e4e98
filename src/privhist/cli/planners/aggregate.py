"""``privhist plan aggregate``: the expected error of each metric of an aggregation, and with
private groups the group size released with probability 1/2, before any data is read."""

from __future__ import annotations

import argparse

from privhist.cli.common import add_once, print_report

NAME = "aggregate"
COMMON = ("epsilon", "delta")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_once(
        parser,
        "--metric",
        action="append",
        required=True,
        help="[aggregate] a metric as for privhist aggregate (repeatable)",
    )
    add_once(parser, "--by", default="group", help="[aggregate] group column(s), comma-separated")
    add_once(parser, "--user-level", action="store_true", help="[aggregate] user-level data")
    add_once(
        parser,
        "--user",
        metavar="COLUMN",
        help="[aggregate] as privhist aggregate: a user column makes the plan user-level (the "
        "name itself is not needed to plan)",
    )
    add_once(parser, "--max-partitions", type=int, default=1, help="[aggregate] groups per user")
    add_once(
        parser, "--max-per-partition", type=int, default=1, help="[aggregate] records per group"
    )
    add_once(
        parser, "--public", action="store_true", help="[aggregate] the groups are given (public)"
    )
    add_once(
        parser,
        "--noise",
        choices=["auto", "gaussian", "laplace"],
        default="auto",
        help="[aggregate] the noise (auto: the smaller predicted error)",
    )
    add_once(
        parser,
        "--weight",
        action="append",
        metavar="NAME=W",
        help="[aggregate] a metric's weight in the budget split, or groups=W (repeatable)",
    )
    add_once(
        parser,
        "--sizes",
        default="100,1000,10000",
        help="[aggregate] group sizes to plan the errors for, comma-separated",
    )


def run(args: argparse.Namespace) -> int:
    from privhist.analytics.aggregate import Aggregation, plan
    from privhist.cli.commands.aggregate import parse_metric, parse_weights
    from privhist.core.errors import ValidationError

    metrics = dict(parse_metric(t) for t in args.metric)
    by = tuple(c.strip() for c in args.by.split(",") if c.strip())
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        raise ValidationError("--sizes", "plan aggregate", "integers", args.sizes) from None
    aggregation = Aggregation(
        metrics,
        by,
        args.epsilon,
        args.delta,
        args.user_level or args.user is not None,
        args.max_partitions,
        args.max_per_partition,
        (("public",),) if args.public else None,
        noise=args.noise,
        weights=parse_weights(args.weight, "plan aggregate"),
    )
    print_report(plan(aggregation, sizes), args.json)
    return 0
