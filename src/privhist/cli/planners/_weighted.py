"""``privhist plan NAME`` for every weighted selector (``wgm``, ``dp-sips``, ``cumulative-sips``):
the selector's parameters and Pr[released] by the number of users holding a key
(:func:`privhist.planning.user_level.selector_curve`). :func:`planners` gives one planner per
selector the catalogue names, so a new selector needs no module here.

``--plot FILE`` draws that curve, with the numbers of users at which a key is released with
probability 1/2 and 0.99 marked when the curve reaches them."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from privhist.cli.common import check_plot_path, counted, note, print_report

COMMON = ("epsilon", "delta", "max_count")
#: the largest --max-partitions planned (the selectors tabulate one weight per kept key)
MAX_PARTITIONS = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-partitions", type=int, help="keys each user keeps (Delta0; 20)")
    parser.add_argument(
        "--degree", type=int, default=1, help="keys each holder of the key keeps (1)"
    )
    parser.add_argument("--keys-only", action="store_true", help="no second release for counts")
    parser.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw Pr[released] by the number of users holding a key (PNG/SVG/PDF)",
    )


def run(name: str, args: argparse.Namespace) -> int:
    import privhist.mechanisms.registry as registry
    from privhist.core.errors import ValidationError
    from privhist.planning.plan import MAX_PLAN_COUNT
    from privhist.planning.user_level import selector_curve

    fn = f"plan {name}"
    check_plot_path(args.plot, fn)
    if args.max_partitions is not None and args.max_partitions > MAX_PARTITIONS:
        raise ValidationError(
            "--max-partitions",
            fn,
            f"<= {MAX_PARTITIONS} (the largest accepted)",
            args.max_partitions,
        )
    if args.max_count > MAX_PLAN_COUNT:
        raise ValidationError(
            "--max-count", fn, f"<= {MAX_PLAN_COUNT} (the largest accepted)", args.max_count
        )
    cls = registry.weighted_registry()[name]
    kwargs: dict[str, Any] = {"counts": not args.keys_only}
    if args.max_partitions is not None:
        kwargs["max_keys"] = args.max_partitions
    selector = cls(args.epsilon, args.delta, **kwargs)
    curve = selector_curve(selector, args.max_count, degree=args.degree)
    report = {
        "mechanism": name,
        "guarantee": str(selector.guarantee()),
        "parameters": selector.parameters(),
        "users_at_half": curve["users_at_half"],
        "users_at_99": curve["users_at_99"],
        "reporting_probability": [float(p) for p in curve["probability"]],
    }
    if args.plot:
        note(f"plot written to {plot_plan(report, args.plot, degree=curve['degree'])}")
    print_report(report, args.json)
    return 0


def plot_plan(report: dict[str, Any], path: str | Path, *, degree: int) -> Path:
    """Draw a plan of :func:`run`: Pr[released] by the number of users holding the key, each
    keeping ``degree`` keys, with ``users_at_half`` and ``users_at_99`` marked where given."""
    from privhist.planning.plot import plot_curves

    name = report["mechanism"]
    label = f"{name}: each holder keeping {counted(degree, 'key')}"
    marks = [
        (f"Pr[released] >= {level} from {counted(report[at], 'user')} ({at})", report[at])
        for at, level in (("users_at_half", "1/2"), ("users_at_99", "0.99"))
        if report[at] is not None
    ]
    title = (
        f"Probability that a key is released, by the number of users holding it ({name})\n"
        f"{report['guarantee']}, user-level neighbours, up to "
        f"{counted(report['parameters']['max_keys'], 'key')} per user"
    )
    return plot_curves(
        [(label, report["reporting_probability"])],
        path,
        title=title,
        xlabel="users holding the key",
        highlight=label,
        marks=marks,
    )


def planners() -> list[Any]:
    """One planner (``NAME``, ``COMMON``, ``add_arguments``, ``run``) per weighted selector of
    :data:`privhist.cli.catalogue.WEIGHTED`."""
    from privhist.cli import catalogue

    return [
        SimpleNamespace(
            NAME=name,
            COMMON=COMMON,
            add_arguments=add_arguments,
            run=functools.partial(run, name),
            __doc__=f"``privhist plan {name}``: the {name} selector's parameters and "
            "Pr[released] by the number of users holding a key",
        )
        for name in catalogue.WEIGHTED
    ]
