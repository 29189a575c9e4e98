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

from privhist.core.text import counted as counted  # the commands word their counts with it


def add_once(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    """Add ``flag`` to ``parser`` unless it is already there.

    Each planner has its own ``privhist plan NAME`` parser, which holds the shared flags it names
    in ``COMMON`` before the planner adds its own: a flag both define keeps the first definition
    and the second's help text is dropped.
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


#: the file formats ``--plot FILE`` writes (by its extension)
PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_plot_path(path: str | None, function: str) -> None:
    """``--plot FILE`` (when given) names a PNG, SVG or PDF file: checked before any work, so
    that a name matplotlib cannot write fails in one line instead of after the plan."""
    from pathlib import Path

    from privhist.core.errors import ValidationError

    if path is not None and Path(path).suffix.lower() not in PLOT_FORMATS:
        raise ValidationError("--plot", function, "a .png, .svg or .pdf file", path)


def note(message: str) -> None:
    """One informational line on stderr, in the form every privhist message takes."""
    print(f"privhist: {message}", file=sys.stderr)


#: ``--ledger`` of every command that reads or charges a ledger
LEDGER_HELP = "budget ledger (SQLite) path; default: ledger.sqlite in the user data dir"

#: ``--input-format`` (simulate's ``--format``) of every command that reads a data file
INPUT_FORMAT_HELP = "the file's format when its name does not tell (default: from the extension)"

#: ``--secure-sum`` of the commands that simulate a federated protocol in this process
SECURE_SUM_HELP = (
    "how the clients' vectors are summed: ideal (the sum itself), or the secagg or secagg+ "
    "protocol run among simulated clients (slower; the release is the same); default "
    "%(default)s"
)

#: ``--host`` of every command that serves (a federated server, a Prio3 aggregator)
LISTEN_HELP = "the address to listen on (default %(default)s)"


def add_ledger_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dataset`` and ``--ledger``: charge the release to a dataset's budget."""
    parser.add_argument("--dataset", help="dataset id in the budget ledger; the release is charged")
    parser.add_argument("--ledger", help=LEDGER_HELP)


def add_engine_arguments(parser: argparse.ArgumentParser, what: str = "records are read") -> None:
    """``--engine`` (the names of :mod:`privhist.engines.registry`), where Spark runs
    (``--spark-master``, ``--spark-remote``, ``--spark-conf``) and ``--noise-on``."""
    from privhist.engines.registry import ENGINES, NAMES

    parser.add_argument(
        "--engine",
        choices=list(NAMES),
        default=NAMES[0],
        help=f"where {what}: " + "; ".join(f"{n}: {d}" for n, (d, _) in ENGINES.items()),
    )
    parser.add_argument(
        "--spark-master",
        metavar="URL",
        help="with --engine spark: the master of a classic Spark session, this process being "
        "the driver (local[*], spark://HOST:7077, yarn, k8s://...); default local[*]",
    )
    parser.add_argument(
        "--spark-remote",
        metavar="URL",
        help="with --engine spark: a Spark Connect server, sc://HOST[:PORT][/;PARAMS] (default: "
        "the SPARK_REMOTE environment variable)",
    )
    parser.add_argument(
        "--spark-conf",
        metavar="KEY=VALUE",
        action="append",
        help="with --engine spark: a Spark setting (repeatable); spark.sql.shuffle.partitions "
        "defaults to 3 per core of the cluster instead of Spark's 200",
    )
    parser.add_argument(
        "--noise-on",
        choices=["driver", "executors"],
        help="where per-key mechanisms draw their noise: on the driver (this process), or where "
        "the data lives from keyed streams (the local engine draws the same streams, so both "
        "engines give the same release for a seed in either mode); default: the engine's "
        "(local: driver, spark: executors)",
    )


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """``--columns`` (a CSV file without a header: its column names) and ``--separator``."""
    parser.add_argument(
        "--columns",
        type=lambda text: tuple(c.strip() for c in text.split(",")),
        help="the file has no header line: these are its column names, comma-separated "
        "(a,b,c); its first line is then a record",
    )
    parser.add_argument(
        "--separator",
        help="the character between fields of a CSV file (',' by default; 'tab' or '\\t' for "
        "tabs, which are also detected from a header holding tabs and no comma)",
    )


def layout(args: argparse.Namespace, function: str) -> dict[str, Any]:
    """The ``columns`` and ``separator`` Session arguments of the layout flags."""
    from privhist.io.readers import parse_separator

    sep = getattr(args, "separator", None)
    return {
        "columns": getattr(args, "columns", None),
        "separator": None if sep is None else parse_separator(sep, function),
    }


def add_dry_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dry-run`` (and ``--json`` unless the command has it)."""
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the cost, the remaining budget and Pr[released] by true count as a table "
        "(JSON with --json); read no data, spend nothing",
    )
    if "--json" not in parser._option_string_actions:
        parser.add_argument("--json", action="store_true", help="print one JSON object")


def print_dry_run(dry: Any, as_json: bool) -> int:
    """Print a :class:`~privhist.session.DryRun` as a table (or one JSON object)."""
    if as_json:
        print(json.dumps(dry.to_dict()))
    else:
        print(dry)
    return 0


def session_for(args: argparse.Namespace, function: str) -> Any:
    """The :class:`~privhist.session.Session` a command's ``--ledger``/``--dataset`` describe.

    ``--ledger`` needs ``--dataset``; without ``--dataset`` nothing is charged. The ledger must
    exist (``privhist budget init`` creates it) and hold the dataset.
    """
    from privhist.accounting.ledger import default_ledger_path
    from privhist.core.errors import ValidationError
    from privhist.session import Session

    engine: Any = getattr(args, "engine", None) or "local"
    progress = not getattr(args, "no_progress", True)
    if engine == "spark":
        engine = _spark_engine(args, function, progress)
    else:
        for flag in ("--spark-master", "--spark-remote", "--spark-conf"):
            value = getattr(args, flag[2:].replace("-", "_"), None)
            if value is not None:
                raise ValidationError(flag, function, "given with --engine spark", value)
    dataset = getattr(args, "dataset", None)
    noise_on = getattr(args, "noise_on", None)
    if dataset is None:
        if getattr(args, "ledger", None) is not None:
            raise ValidationError("--dataset", function, "a dataset id with --ledger", None)
        return Session(engine=engine, noise_on=noise_on, progress=progress)
    return Session(
        args.ledger or default_ledger_path(),
        dataset,
        engine=engine,
        noise_on=noise_on,
        progress=progress,
    )


def _spark_engine(args: argparse.Namespace, function: str, progress: bool) -> Any:
    """The Spark engine on the session ``--spark-master``/``--spark-remote`` (or
    ``SPARK_REMOTE``) and ``--spark-conf`` describe
    (:func:`~privhist.engines.spark.sessions.build_session`). The options are checked here; the
    session is started when the release first needs it (:meth:`SparkEngine.when_needed
    <privhist.engines.spark.SparkEngine.when_needed>`), so a dry run, or a release refused by
    its parameters or its budget, answers at once, without starting Spark."""
    import os

    from privhist.core.errors import ValidationError
    from privhist.engines.local.progress import status
    from privhist.engines.spark import SparkEngine
    from privhist.engines.spark.sessions import build_session, check_arguments, parse_conf

    master = getattr(args, "spark_master", None)
    remote = getattr(args, "spark_remote", None)
    from_env = os.environ.get("SPARK_REMOTE") or None
    if master is not None and remote is None and from_env is not None:
        raise ValidationError(
            "--spark-master",
            function,
            "given without SPARK_REMOTE in the environment (it names a Spark Connect server; "
            "unset it, or give --spark-remote)",
            master,
        )
    conf = parse_conf(getattr(args, "spark_conf", None), function)
    remote = remote or from_env
    check_arguments(master=master, remote=remote, function=function)
    where = remote or master or "local[*]"

    def build() -> Any:
        with status(f"Starting Spark ({where})", enabled=progress):
            return build_session(master=master, remote=remote, conf=conf, function=function)

    return SparkEngine.when_needed(build)
