"""``privhist experiment sample-threshold``: its flags, the settings they give, and the files a
run writes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privhist.core.errors import ValidationError
from privhist.experiments import _common
from privhist.experiments.sample_threshold.claims import summary_markdown
from privhist.experiments.sample_threshold.data import default_shakespeare
from privhist.experiments.sample_threshold.plots import plot_figure
from privhist.experiments.sample_threshold.runner import Results, run_experiment
from privhist.experiments.sample_threshold.settings import (
    ALPHA,
    COLUMNS,
    EPSILONS,
    FIGURE1_BUCKETS,
    FIGURE2_BUCKETS,
    HH_COLUMNS,
    NAME,
    POPULATION,
    QUICK,
    REPETITIONS,
    SHAKESPEARE_FILE,
    THRESHOLD_COLUMNS,
    Settings,
)


def write_outputs(results: Results, output_dir: Path) -> list[Path]:
    """Write CSV, PNG and markdown files (each atomically); figures are drawn first, so a
    plotting failure leaves the directory untouched."""
    figures = {"figure1.png": plot_figure(results, "1")}
    if results.settings.figure2:
        figures["figure2.png"] = plot_figure(results, "2")
    summary = summary_markdown(results)
    threshold_rows = [
        {
            "epsilon": c.epsilon,
            "delta": results.settings.delta,
            "alpha": float(ALPHA),
            "sampling_rate": float(c.sampling_rate),
            "threshold_paper": c.threshold_paper,
            "delta_exact_paper": c.delta_paper,
            "threshold_theorem1": c.threshold_theorem1,
            "threshold_exact": c.threshold_exact,
            "delta_exact_exact": c.delta_exact,
        }
        for c in results.calibrations
    ]
    written = [
        _common.write_csv(output_dir / "results.csv", results.rows, COLUMNS),
        _common.write_csv(output_dir / "thresholds.csv", threshold_rows, THRESHOLD_COLUMNS),
    ]
    if results.heavy_hitters:
        written.append(
            _common.write_csv(output_dir / "heavy_hitters.csv", results.heavy_hitters, HH_COLUMNS)
        )
    for name, fig in figures.items():
        written.append(_common.save_figure(fig, output_dir / name))
    written.append(_common.write_text(output_dir / "summary.md", summary))
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``privhist experiment sample-threshold`` (the command line registers them)."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="reduced run for tests: n = 10^5, 2 repetitions, epsilon 0.1/0.5/1, B = 2^6, "
        "2^8, 2^10",
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    parser.add_argument(
        "--population", type=int, default=None, help="clients of the synthetic data (10^6)"
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("experiment-output") / NAME,
        help=_common.OUTPUT_DIR_HELP,
    )
    parser.add_argument(
        "--shakespeare",
        type=Path,
        default=None,
        help=f"the Shakespeare text (default ../shared/data/{SHAKESPEARE_FILE}; skipped with a "
        "message when absent)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="worker processes (default 2; 1 runs inline)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Validate the flags and build the run's :class:`Settings`."""
    fn = f"experiment {NAME}"
    quick = bool(args.quick)
    reps = args.reps if args.reps is not None else (QUICK["reps"] if quick else REPETITIONS)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 2:
        raise ValidationError("reps", fn, "an integer >= 2 (standard errors need two)", reps)
    pop = args.population
    if pop is None:
        pop = QUICK["population"] if quick else POPULATION
    if isinstance(pop, bool) or not isinstance(pop, int) or pop < 100:
        raise ValidationError("population", fn, "an integer >= 100", pop)
    if args.seed is None or args.seed < 0:
        raise ValidationError("seed", fn, "an integer >= 0", args.seed)
    if args.workers < 1:
        raise ValidationError("workers", fn, "an integer >= 1", args.workers)
    _common.check_output_dir(args.output_dir, fn)
    shakespeare = args.shakespeare if args.shakespeare is not None else default_shakespeare()
    return Settings(
        population=pop,
        reps=reps,
        seed=int(args.seed),
        epsilons=QUICK["epsilons"] if quick else EPSILONS,  # type: ignore[arg-type]
        figure1=QUICK["figure1"] if quick else FIGURE1_BUCKETS,  # type: ignore[arg-type]
        figure2=QUICK["figure2"] if quick else FIGURE2_BUCKETS,  # type: ignore[arg-type]
        workers=1 if quick else int(args.workers),
        shakespeare=shakespeare,
        heavy_hitters=not quick,
    )


def run(args: argparse.Namespace) -> int:
    """``privhist experiment sample-threshold``: run the grid, then write the files; returns 0."""
    settings = settings_from_args(args)
    if settings.shakespeare is not None and not settings.shakespeare.is_file():
        print(
            f"privhist: Shakespeare data {settings.shakespeare} is absent: that column is skipped",
            file=sys.stderr,
        )
    show = not args.no_progress and not args.quick
    results = _run_with_progress(settings, show)
    written = write_outputs(results, Path(args.output_dir))
    for note in results.notes:
        print(f"privhist: note: {note}", file=sys.stderr)
    print(f"wrote {', '.join(str(p) for p in written)} ({results.seconds:.1f} s)")
    return 0


def _run_with_progress(settings: Settings, show: bool) -> Results:
    return _common.run_with_progress(
        lambda tick: run_experiment(settings, tick), "sample-threshold cells", show
    )
