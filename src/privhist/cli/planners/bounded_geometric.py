"""``privhist plan bounded-geometric``: the bounded geometric counting mechanism written out in
integers (Balcer & Vadhan, Section 3)."""

from __future__ import annotations

import argparse

from privhist.cli.common import add_once, print_report
from privhist.core.errors import ValidationError

NAME = "bounded-geometric"
COMMON = ("epsilon",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_once(parser, "--n", type=int, help="[bounded-geometric] the public bound n on the count")
    add_once(parser, "--true-count", type=int, help="[bounded-geometric] the count c to write out")


def run(args: argparse.Namespace) -> int:
    from privhist.planning.finite import plan_bounded_geometric

    for flag, value in (("--n", args.n), ("--true-count", args.true_count)):
        if value is None:
            raise ValidationError(flag, "plan bounded-geometric", "an integer", None)
    report = plan_bounded_geometric(args.epsilon, args.n, args.true_count)
    print_report(report, args.json)
    return 0
