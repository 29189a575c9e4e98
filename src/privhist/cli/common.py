"""Small pieces shared by the ``privhist`` commands and planners.

A command module lives in :mod:`privhist.cli.commands` and defines ``register(subparsers)``; a
planner (``privhist plan NAME``) lives in :mod:`privhist.cli.planners` and defines ``NAME``,
``add_arguments(parser)`` and ``run(args) -> int``. Both are found by name, so adding one never
edits :mod:`privhist.cli.main`. Errors are raised as :class:`privhist.core.errors.PrivhistError`;
``main`` turns them into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_once(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    """Add ``flag`` to ``parser`` unless another planner already added it.

    Planners share the one ``privhist plan`` parser, so two of them may both want ``--n``; the
    first definition wins and the help text of the second is dropped.
    """
    if flag in parser._option_string_actions:
        return
    parser.add_argument(flag, **kwargs)


def print_report(report: dict[str, Any], as_json: bool) -> None:
    """Print a planner's report: one JSON object, or one ``key value`` line per entry (lists
    one item per line, indexed)."""
    if as_json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        if isinstance(value, list):
            print(f"{key}:")
            for i, v in enumerate(value):
                print(f"  {i:>5}  {v}")
        elif isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k:<24} {v}")
        else:
            print(f"{key:<14} {value}")


def note(message: str) -> None:
    """One informational line on stderr, in the form every privhist message takes."""
    print(f"privhist: {message}", file=sys.stderr)


def add_ledger_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dataset`` and ``--ledger``: charge the release to a dataset's budget."""
    parser.add_argument("--dataset", help="dataset id in the budget ledger; the release is charged")
    parser.add_argument("--ledger", help="budget ledger (SQLite) path; default: user data dir")


def session_for(args: argparse.Namespace, function: str) -> Any:
    """The :class:`~privhist.session.Session` a command's ``--ledger``/``--dataset`` describe.

    ``--ledger`` needs ``--dataset``; without ``--dataset`` nothing is charged. The ledger must
    exist (``privhist budget init`` creates it) and hold the dataset.
    """
    from privhist.accounting.ledger import default_ledger_path
    from privhist.core.errors import ValidationError
    from privhist.session import Session

    engine: Any = getattr(args, "engine", None) or "local"
    if engine == "spark":
        from privhist.engines.spark import SparkEngine
        from privhist.engines.spark.sessions import spark_session

        master = getattr(args, "spark_master", None) or "local[*]"
        engine = SparkEngine(spark_session(master))
    elif getattr(args, "spark_master", None) is not None:
        raise ValidationError("--spark-master", function, "given with --engine spark", None)
    dataset = getattr(args, "dataset", None)
    progress = not getattr(args, "no_progress", True)
    if dataset is None:
        if getattr(args, "ledger", None) is not None:
            raise ValidationError("--dataset", function, "a dataset id with --ledger", None)
        return Session(engine=engine, progress=progress)
    return Session(args.ledger or default_ledger_path(), dataset, engine=engine, progress=progress)
