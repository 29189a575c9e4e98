"""``privhist plan cpbm``: the (epsilon, delta) and Renyi-DP curve of one cPBM secure sum
(Lemma 2 and equation (8) of the federated frequency estimation paper).

``--plot FILE`` draws that Renyi-DP curve, epsilon by order on log axes, with the order at which
equation (8) gives the smallest epsilon at ``--delta`` marked."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from privhist.cli.common import add_once, check_plot_path, note, print_report
from privhist.core.errors import ValidationError

#: the largest --users planned (the accounting sums over Binomial(users / 2) per Renyi order)
MAX_USERS = 100_000

NAME = "cpbm"
#: epsilon is what this planner computes; a given --epsilon is a target to compare with
EPSILON_OPTIONAL = True
COMMON = ("epsilon", "delta")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_once(parser, "--users", type=int, help="[cpbm] users in the secure sum (n)")
    add_once(parser, "--dimension", type=int, help="[cpbm] coordinates each user sends (D)")
    add_once(parser, "--m", type=int, help="[cpbm] binomial trials per coordinate")
    add_once(parser, "--theta", type=float, help="[cpbm] theta in (0, 1/4]")
    add_once(
        parser,
        "--plot",
        metavar="FILE",
        help="[cpbm] also draw the Renyi-DP curve, epsilon by order, the best order marked "
        "(PNG/SVG/PDF)",
    )


def run(args: argparse.Namespace) -> int:
    from privhist.federated.cpbm_accounting import calibrate_m, cpbm_rdp

    fn = "plan cpbm"
    check_plot_path(args.plot, fn)
    for flag, value in (
        ("--users", args.users),
        ("--dimension", args.dimension),
        ("--m", args.m),
        ("--theta", args.theta),
    ):
        if value is None:
            raise ValidationError(flag, fn, "given", None)
    if args.delta is None or args.delta <= 0:
        raise ValidationError("--delta", fn, "a number in (0, 1)", args.delta)
    if args.users > MAX_USERS:
        # Lemma 2's expectations run over Binomial(users / 2) for every Renyi order
        raise ValidationError("--users", fn, f"<= {MAX_USERS} (the largest accepted)", args.users)
    curve = cpbm_rdp(args.users, args.theta, args.m, args.dimension)
    eps = curve.epsilon(args.delta)
    report = {
        "mechanism": "cpbm",
        "users": args.users,
        "dimension": args.dimension,
        "m": args.m,
        "theta": args.theta,
        "delta": args.delta,
        "epsilon": eps,
        "best_order": curve.best_order(args.delta),
        "rdp_curve": [[o, e] for o, e in zip(curve.orders, curve.rdp, strict=True)],
    }
    if args.epsilon is not None:
        report["target_epsilon"] = args.epsilon
        report["meets_target"] = eps <= args.epsilon
        try:
            report["largest_m_for_target"] = calibrate_m(
                args.epsilon, args.delta, args.users, args.theta, args.dimension
            )
        except ValidationError:
            report["largest_m_for_target"] = None
    if args.plot:
        note(f"plot written to {plot_plan(report, args.plot)}")
    print_report(report, args.json)
    return 0


def plot_plan(report: dict[str, Any], path: str | Path) -> Path:
    """Draw a plan of :func:`run`: its ``rdp_curve`` (the orders with a finite, positive
    epsilon: the axes are logarithmic), with ``best_order`` marked."""
    from privhist.planning.plot import Panel, plot_panels

    points = [(o, e) for o, e in report["rdp_curve"] if math.isfinite(e) and e > 0]
    best = report["best_order"]
    marks = (
        [(f"best order {best:g} at delta {report['delta']:g}", best)] if math.isfinite(best) else []
    )
    target = ""
    if "target_epsilon" in report:
        met = "met" if report["meets_target"] else "not met"
        target = f" (target {report['target_epsilon']:g}: {met})"
    panel = Panel(
        title=f"({report['epsilon']:.4g}, {report['delta']:g})-DP by equation (8){target}",
        xlabel="Renyi order alpha",
        ylabel="Renyi-DP epsilon(alpha)",
        series=[("one secure sum", [o for o, _ in points], [e for _, e in points])],
        marks=marks,
        xscale="log",
        yscale="log",
    )
    title = (
        f"Renyi-DP of one cPBM secure sum: {report['users']} users, dimension "
        f"{report['dimension']}, m {report['m']}, theta {report['theta']:g}"
    )
    return plot_panels([panel], path, title=title)
