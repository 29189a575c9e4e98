"""``privhist plan cumulative-sips``: the cumulative-sips selector's parameters and Pr[released]
by the number of users holding a key (see :mod:`privhist.cli.planners._weighted`)."""

from __future__ import annotations

import argparse

from privhist.cli.planners._weighted import COMMON, add_arguments

NAME = "cumulative-sips"
__all__ = ["COMMON", "NAME", "add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from privhist.cli.planners._weighted import run as run_weighted

    return run_weighted(NAME, args)
