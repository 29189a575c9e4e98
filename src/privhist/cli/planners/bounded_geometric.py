"""``privhist plan bounded-geometric``: the bounded geometric counting mechanism written out in
integers (Balcer & Vadhan, Section 3).

``--plot FILE`` draws the distribution written out: Pr[output = z] for every output ``z`` in
``[0, n]``, the true count's bar in another colour and the outputs within the accuracy's
``half_width`` of it shaded."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from privhist.cli.common import add_once, check_plot_path, note, print_report
from privhist.core.errors import ValidationError

NAME = "bounded-geometric"
COMMON = ("epsilon",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_once(parser, "--n", type=int, help="[bounded-geometric] the public bound n on the count")
    add_once(parser, "--true-count", type=int, help="[bounded-geometric] the count c to write out")
    add_once(
        parser,
        "--plot",
        metavar="FILE",
        help="[bounded-geometric] also draw the output distribution at the true count "
        "(PNG/SVG/PDF)",
    )


def run(args: argparse.Namespace) -> int:
    from privhist.planning.finite import plan_bounded_geometric

    check_plot_path(args.plot, "plan bounded-geometric")
    for flag, value in (("--n", args.n), ("--true-count", args.true_count)):
        if value is None:
            raise ValidationError(flag, "plan bounded-geometric", "an integer", None)
    report = plan_bounded_geometric(args.epsilon, args.n, args.true_count)
    if args.plot:
        note(f"plot written to {plot_plan(report, args.plot)}")
    print_report(report, args.json)
    return 0


def plot_plan(report: dict[str, Any], path: str | Path) -> Path:
    """Draw a plan of :func:`~privhist.planning.finite.plan_bounded_geometric`: its ``pmf`` as
    one bar per output, the true count's bar marked and the outputs within ``half_width`` of it
    (where the output lies but with probability ``beta``) shaded."""
    from fractions import Fraction

    from privhist.planning.plot import plot_bars

    par, acc = report["parameters"], report["accuracy"]
    n, c, width = par["n"], par["true_count"], acc["half_width"]
    title = (
        f"Output distribution of the bounded geometric mechanism at true count {c} "
        f"(n = {n})\n({report['guarantee']['epsilon']:.6g}, 0)-DP for counting queries "
        f"(eps~/2 <= epsilon/2 = {par['epsilon'] / 2:g})"
    )
    return plot_bars(
        [float(Fraction(p)) for p in report["pmf"]],
        path,
        title=title,
        xlabel="output z",
        ylabel="Pr[output = z]",
        highlight=(f"the true count {c}", c),
        band=(
            f"within {width} of it: Pr[outside] <= {acc['beta']}",
            max(0, c - width),
            min(n, c + width),
        ),
    )
