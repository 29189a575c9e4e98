"""``privhist plan aggregate``: the expected error of each metric of an aggregation, and with
private groups the group size released with probability 1/2, before any data is read.

``--plot FILE`` draws those errors against group size, one panel per metric on log axes (a sum's
noise, the same at every size, as a flat line), with private groups' sizes released with
probability 1/2 and 0.99 marked."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privhist.cli.common import add_once, check_plot_path, counted, note, print_report

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
    add_once(
        parser,
        "--plot",
        metavar="FILE",
        help="[aggregate] also draw each metric's expected error against the --sizes (PNG/SVG/PDF)",
    )


def run(args: argparse.Namespace) -> int:
    from privhist.analytics.aggregate import Aggregation, plan
    from privhist.cli.commands.aggregate import parse_metric, parse_weights
    from privhist.core.errors import ValidationError

    check_plot_path(args.plot, "plan aggregate")
    metrics = dict(parse_metric(t) for t in args.metric)
    by = tuple(c.strip() for c in args.by.split(",") if c.strip())
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        raise ValidationError("--sizes", "plan aggregate", "integers", args.sizes) from None
    if min(sizes) < 1:
        raise ValidationError("--sizes", "plan aggregate", "group sizes >= 1", args.sizes)
    user_level = args.user_level or args.user is not None
    aggregation = Aggregation(
        metrics,
        by,
        args.epsilon,
        args.delta,
        user_level,
        args.max_partitions,
        args.max_per_partition,
        (("public",),) if args.public else None,
        noise=args.noise,
        weights=parse_weights(args.weight, "plan aggregate"),
    )
    report = plan(aggregation, sizes)
    if args.plot:
        written = plot_plan(report, args.plot, sizes, user_level=user_level)
        note(f"plot written to {written}")
    print_report(report, args.json)
    return 0


#: the labels of a metric's errors by group size in a plan (other such entries keep their key)
BY_SIZE = {
    "relative_error_std": "relative error std (noise std / group size)",
    "mean_error_std_at_middle": "mean error std, group mean at the middle",
    "mean_error_std_at_bounds": "mean error std, group mean at a bound",
    "variance_error_std": "variance error std, largest variance (units squared)",
    "rank_error_std": "rank error std (a share of the group)",
}

#: the y axis of each kind of metric
UNITS = {
    "count": "relative error std",
    "count_users": "relative error std",
    "sum": "error std (column units)",
    "mean": "error std (column units)",
    "variance": "error std",
    "quantiles": "rank error std",
}


def error_panels(
    report: dict[str, Any], sizes: Sequence[int], *, user_level: bool = False
) -> list[Any]:
    """The panels :func:`plot_plan` draws from a plan of
    :func:`privhist.analytics.aggregate.plan` for the group ``sizes``: per metric, each of its
    errors by group size and a sum's ``noise_std`` (the same at every size), at the positive
    sizes (the axes are logarithmic)."""
    from privhist.planning.plot import Panel

    unit = "user" if user_level else "record"
    positive = sorted({n for n in sizes if n > 0})
    panels = []
    for name, entry in report["metrics"].items():
        series = []
        for key, by_size in entry.items():
            if isinstance(by_size, dict):
                points = [(n, by_size[n]) for n in positive if by_size[n] > 0]
                series.append(
                    (BY_SIZE.get(key, key), [n for n, _ in points], [e for _, e in points])
                )
        if not series and "noise_std" in entry:
            flat = [entry["noise_std"]] * len(positive)
            series.append(("noise std, the same at every group size", positive, flat))
        method = f", {entry['method']}" if "method" in entry else ""
        panels.append(
            Panel(
                title=f"{name} ({entry['kind']}{method}, "
                f"{entry['share_of_whole_budget']:.3g} of the budget)",
                xlabel=f"group size ({unit}s)",
                ylabel=UNITS.get(entry["kind"], "error std"),
                series=series,
                xscale="log",
                yscale="log",
            )
        )
    return panels


def selection_marks(report: dict[str, Any], *, user_level: bool = False) -> list[Any]:
    """``(label, size)`` of the group sizes at which a plan with private groups releases a group
    with probability 1/2 and 0.99 (none with public groups, nor beyond the counts it looked at)."""
    unit = "user" if user_level else "record"
    return [
        (f"a group released with probability {level} from {counted(report[at], unit)}", report[at])
        for at, level in (
            ("released_with_probability_one_half_at", "1/2"),
            ("released_with_probability_0.99_at", "0.99"),
        )
        if report.get(at) is not None
    ]


def plot_plan(
    report: dict[str, Any], path: str | Path, sizes: Sequence[int], *, user_level: bool = False
) -> Path:
    """Draw a plan of :func:`privhist.analytics.aggregate.plan` for the group ``sizes``: the
    panels of :func:`error_panels` under the plan's guarantee, with the
    :func:`selection_marks` in each."""
    from privhist.planning.plot import plot_panels

    g = report["guarantee"]
    title = (
        "Expected error of each metric of the aggregation, by group size\n"
        f"({g['epsilon']:g}, {g['delta']:g})-DP, {report['neighbouring']}\n"
        f"{report['noise']} noise, groups {report['groups']}"
    )
    panels = error_panels(report, sizes, user_level=user_level)
    marks = selection_marks(report, user_level=user_level)
    return plot_panels(panels, path, title=title, marks=marks)
