"""What every experiment shares: summary statistics, seeds, and atomic CSV / PNG / markdown files.

An experiment computes everything first and writes its files last, each one atomically (a hidden
temporary file beside the destination, renamed over it), so a failed or interrupted run leaves
no partial output behind.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, UnsupportedError, ValidationError


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample standard deviation over ``sqrt(len)``).

    >>> m, se = mean_se([1.0, 2.0, 3.0])
    >>> m, round(se, 12)
    (2.0, 0.57735026919)
    >>> mean_se([4.0])
    (4.0, nan)
    """
    n = len(values)
    if n == 0:
        raise ValidationError("values", "mean_se", "at least one value", "none")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, math.nan
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def derived_seed(seed: int, *parts: object) -> int:
    """A 63-bit seed for one part of an experiment, from the run's seed and the part's labels.

    Each configuration gets its own reproducible stream whatever the order (or process) in which
    the configurations run.

    >>> derived_seed(1, "binomial", 64) == derived_seed(1, "binomial", 64)
    True
    >>> derived_seed(1, "binomial", 64) == derived_seed(2, "binomial", 64)
    False
    """
    text = "\x1f".join([str(seed), *(str(p) for p in parts)])
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


#: ``--output-dir`` of every experiment
OUTPUT_DIR_HELP = "where the CSV, PNG and markdown files go (default %(default)s)"


def check_output_dir(path: str | os.PathLike[str], function: str) -> Path:
    """The output directory: it may exist (as a directory) or be creatable under an existing
    ancestor. Nothing is created here."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValidationError("output_dir", function, "a directory", str(out))
    return out


def default_data_path(name: str) -> Path:
    """``../shared/data/NAME`` from the working directory, or beside the source tree's project
    directory when that one exists (the experiments' default for the real datasets)."""
    here = Path("..") / "shared" / "data" / name
    if here.is_file():
        return here
    tree = Path(__file__).resolve().parents[3].parent / "shared" / "data" / name
    return tree if tree.is_file() else here


def read_key_counts(
    path: str | os.PathLike[str], fmt: str, function: str
) -> tuple[list[Any], npt.NDArray[np.int64]]:
    """Distinct keys (sorted) and their record counts in a file read by
    :func:`privhist.io.readers.scan` (``fimi``: every item of every basket is one record;
    ``text``: every word token is one record). Data preparation, not a release.

    Raises :class:`~privhist.core.errors.InputDataError` when the file holds no record.
    """
    import polars as pl

    from privhist.io.readers import scan

    frame = (
        scan(path, format=fmt, function=function)
        .group_by("key")
        .agg(pl.len().alias("n"))
        .sort("key")
        .collect()
    )
    if frame.height == 0:
        raise InputDataError(f"{path}: no records")
    return frame["key"].to_list(), frame["n"].to_numpy().astype(np.int64)


def rows_where(rows: Iterable[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    """The rows whose columns equal ``match``.

    >>> rows_where([{"a": 1, "b": 2}, {"a": 2, "b": 2}], a=2)
    [{'a': 2, 'b': 2}]
    """
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


class Tick(Protocol):
    """A progress callback: ``done`` of ``total`` steps, optionally naming the current one."""

    def __call__(self, done: int, total: int, label: str | None = None, /) -> None: ...


_R = TypeVar("_R")


def run_with_progress(work: Callable[[Tick | None], _R], description: str, show: bool) -> _R:
    """``work(tick)`` under a transient progress bar on stderr, or ``work(None)`` when ``show``
    is false or stderr is not a terminal.

    ``tick(done, total, label)`` moves the bar; with a ``label`` the bar reads
    ``"{description}: {label}"``.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    if not show or not console.is_terminal:
        return work(None)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def tick(done: int, total: int, label: str | None = None, /) -> None:
            if label is None:
                bar.update(task, completed=done, total=total)
            else:
                bar.update(task, completed=done, total=total, description=f"{description}: {label}")

        return work(tick)


def _atomic(path: Path, writer: Callable[[IO[bytes]], None]) -> Path:
    """Create the missing directories, then write ``path`` atomically with mode 0644."""
    from privhist.io.writers import write_atomic  # polars loads only when files are written

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, writer, mode=0o644)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    from privhist.io.writers import write_text_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, text, mode=0o644)


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """CSV with a header of ``columns``; floats in ``repr`` precision, NaN as an empty cell.

    >>> print(csv_text([{"a": 1, "b": 0.5}, {"a": 2, "b": float("nan")}], ["a", "b"]), end="")
    a,b
    1,0.5
    2,
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        cells = []
        for c in columns:
            v = row.get(c)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append("")
            else:
                cells.append(repr(v) if isinstance(v, float) else str(v))
        w.writerow(cells)
    return buf.getvalue()


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Path:
    """Write ``rows`` as CSV (see :func:`csv_text`) atomically."""
    return write_text(path, csv_text(rows, columns))


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnsupportedError("plots need matplotlib: pip install 'privhist[plot]'") from None
    return plt


def save_figure(fig: Any, path: Path, *, dpi: int = 110) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    plt = pyplot()

    def writer(fh: IO[bytes]) -> None:
        fig.savefig(fh, format="png", dpi=dpi)

    try:
        return _atomic(path, writer)
    finally:
        plt.close(fig)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table.

    >>> print(markdown_table(["a", "b"], [[1, "x"]]))
    | a | b |
    |---|---|
    | 1 | x |
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
