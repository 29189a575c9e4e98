"""``privhist experiment federated-frequency``: its flags, the settings they give, and the files a
run writes."""

from __future__ import annotations

import argparse
from pathlib import Path

from privhist.core.errors import ValidationError
from privhist.core.validation import check_positive_int
from privhist.experiments import _common
from privhist.experiments.federated_frequency import plots
from privhist.experiments.federated_frequency.claims import summary_markdown
from privhist.experiments.federated_frequency.runner import Results, run_experiment
from privhist.experiments.federated_frequency.settings import (
    DATA,
    DATASETS,
    NAME,
    REAL_FILES,
    TABLES,
    Settings,
    paper_settings,
    quick_settings,
)

FUNCTION = f"experiment {NAME}"


def write_outputs(res: Results, output_dir: Path) -> list[Path]:
    """Write every CSV, PNG and the summary (each file atomically)."""
    written = []
    for fname, rows in (
        ("table1.csv", res.table1),
        ("table2.csv", res.table2),
        ("table3.csv", res.table3),
        ("table5.csv", res.table5),
        ("figure3.csv", res.figure3),
    ):
        if rows:
            written.append(_common.write_csv(output_dir / fname, rows, list(rows[0])))
    if res.figure3:
        written.append(_common.save_figure(plots.figure3(res), output_dir / "figure3.png"))
    if res.table2:
        written.append(_common.save_figure(plots.table2(res), output_dir / "table2.png"))
    written.append(_common.write_text(output_dir / "summary.md", summary_markdown(res)))
    return written


# -- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``privhist experiment federated-frequency`` (the command line registers
    them)."""
    parser.add_argument(
        "--output-dir",
        default="experiment-output/federated-frequency",
        help=_common.OUTPUT_DIR_HELP,
    )
    parser.add_argument("--quick", action="store_true", help="reduced sizes (for tests)")
    parser.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the run: each table cell draws from a stream derived from it (default "
        "%(default)s)",
    )
    parser.add_argument("--runs", type=int, help="runs per cell (5; quick: 1)")
    parser.add_argument(
        "--tables",
        nargs="+",
        choices=list(TABLES),
        help="which tables/figure (all by default)",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=list(DATASETS),
        help="which datasets: iid and hetero (synthetic), msweb and retail (real, read from "
        "--data-dir); default: iid, hetero and each real one whose file is there (--quick: "
        "iid and hetero)",
    )
    parser.add_argument(
        "--max-users",
        type=int,
        default=20_000,
        help="users of a real dataset (seeded random subset)",
    )
    parser.add_argument(
        "--data-dir",
        default=str(DATA),
        help="where the real datasets are (default ../shared/data)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The run's :class:`Settings` from the flags (not validated: :func:`run` checks them)."""
    tables = tuple(args.tables) if args.tables else TABLES
    datasets = None if args.datasets is None else tuple(args.datasets)
    data_dir = Path(args.data_dir)
    if args.quick:
        return quick_settings(args.seed, args.runs, datasets, data_dir, tables)
    return paper_settings(args.seed, args.runs, datasets, args.max_users, data_dir, tables)


def run(args: argparse.Namespace) -> int:
    """``privhist experiment federated-frequency``: compute every table, then write the files;
    returns 0."""
    out = _common.check_output_dir(args.output_dir, FUNCTION)
    if args.runs is not None:
        check_positive_int(args.runs, FUNCTION, "--runs")
    check_positive_int(args.max_users, FUNCTION, "--max-users")
    s = settings_from_args(args)
    missing = [
        d for d in s.datasets if d in REAL_FILES and not (s.data_dir / REAL_FILES[d]).exists()
    ]
    if missing:
        raise ValidationError("--datasets", FUNCTION, "datasets whose files exist", missing)
    show = not args.no_progress and not args.quick
    res = _common.run_with_progress(lambda tick: run_experiment(s, tick), NAME, show)
    for p in write_outputs(res, out):
        print(p)
    return 0
