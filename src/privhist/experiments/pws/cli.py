"""``privhist experiment pws``: its flags, the settings they give, and the files a run writes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privhist.core.errors import ValidationError
from privhist.experiments import _common
from privhist.experiments.pws.claims import summary_markdown
from privhist.experiments.pws.plots import figures
from privhist.experiments.pws.runner import Results, run_experiment
from privhist.experiments.pws.settings import (
    COLUMNS,
    NAME,
    QUICK,
    RETAIL_FILE,
    SHAKESPEARE_FILE,
    ZIPF_KEYS,
    Settings,
)


def write_outputs(res: Results, out_dir: Path) -> list[Path]:
    """Write every CSV, PNG and the summary (plots are drawn before the first file is written)."""
    summary = summary_markdown(res)
    figs = figures(res, out_dir)
    written: list[Path] = []
    try:
        for name, rows in res.tables.items():
            written.append(_common.write_csv(out_dir / name, rows, COLUMNS[name]))
        for path, fig in figs:
            written.append(_common.save_figure(fig, path))
        written.append(_common.write_text(out_dir / "summary.md", summary))
    finally:
        plt = _common.pyplot()
        for _, fig in figs:
            plt.close(fig)
    return written


# -- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``privhist experiment pws`` (the command line registers them)."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="reduced run for tests: 10^4 Zipf keys, coarser delta and tau grids, estimation "
        "at eps = 0.5 only",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("experiment-output") / NAME,
        help=_common.OUTPUT_DIR_HELP,
    )
    parser.add_argument(
        "--zipf-keys", type=int, default=None, help=f"keys of the Zipf data (default {ZIPF_KEYS})"
    )
    parser.add_argument(
        "--retail",
        type=Path,
        default=None,
        help=f"FIMI baskets (default ../shared/data/{RETAIL_FILE}; skipped with a message when "
        "absent)",
    )
    parser.add_argument(
        "--shakespeare",
        type=Path,
        default=None,
        help=f"plain text (default ../shared/data/{SHAKESPEARE_FILE}; skipped with a message "
        "when absent)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Validate the flags (errors name the flag) and build the run's :class:`Settings`."""
    fn = "experiment pws"
    quick = bool(args.quick)
    n = (
        args.zipf_keys
        if args.zipf_keys is not None
        else (QUICK["zipf_keys"] if quick else ZIPF_KEYS)
    )
    if isinstance(n, bool) or not isinstance(n, int) or not 10 <= n <= 10**7:
        raise ValidationError("zipf_keys", fn, "an integer in [10, 10**7]", n)
    _common.check_output_dir(args.output_dir, fn)
    retail = args.retail if args.retail is not None else _common.default_data_path(RETAIL_FILE)
    shakespeare = (
        args.shakespeare
        if args.shakespeare is not None
        else _common.default_data_path(SHAKESPEARE_FILE)
    )
    if quick:
        return Settings(
            zipf_keys=n,
            figure2_deltas=QUICK["figure2_deltas"],
            figure4_taus=QUICK["figure4_taus"],
            estimation_epsilons=QUICK["estimation_epsilons"],
            bias_taus=QUICK["bias_taus"],
            variance_taus=QUICK["variance_taus"],
            nrmse_taus=QUICK["nrmse_taus"],
            retail=retail,
            shakespeare=shakespeare,
            quick=True,
        )
    return Settings(zipf_keys=n, retail=retail, shakespeare=shakespeare)


def run(args: argparse.Namespace) -> int:
    """``privhist experiment pws``: compute every table, then write the files; returns 0."""
    settings = settings_from_args(args)
    show = not args.no_progress and not args.quick
    res = _run_with_progress(settings, show)
    for note in res.notes:
        print(f"privhist: note: {note}", file=sys.stderr)
    written = write_outputs(res, Path(args.output_dir))
    print(f"wrote {', '.join(str(p) for p in written)} ({res.timings['total']:.1f} s)")
    return 0


def _run_with_progress(settings: Settings, show: bool) -> Results:
    return _common.run_with_progress(lambda tick: run_experiment(settings, tick), "pws", show)
