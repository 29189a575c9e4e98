"""Reading back a private sample written by ``privhist sample`` (CSV or JSON), checked.

The file must pass its integrity check (:mod:`privhist.io.integrity`: a trailer line in CSV, an
``integrity`` entry in the JSON metadata), hold the columns ``key``, ``estimate``, ``bias`` and
``variance``, and every estimate, bias and variance must be empty or a finite number (a variance
not below zero). Anything else is an :class:`~privhist.core.errors.InputDataError`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Final

from privhist.core.errors import InputDataError
from privhist.io.integrity import verify_csv, verify_document

__all__ = ["SAMPLE_COLUMNS", "read_sample"]

#: the columns ``privhist estimate`` needs
SAMPLE_COLUMNS: Final[tuple[str, ...]] = ("key", "estimate", "bias", "variance")


def read_sample(
    path: str | os.PathLike[str], function: str = "read_sample"
) -> list[dict[str, Any]]:
    """The rows of a sample file, after its integrity and value checks (see the module notes).

    Raises:
        InputDataError: a missing, unreadable, cut, edited or malformed file.
    """
    p = Path(path)
    label = f"{function}: {os.fspath(path)}"
    if not p.is_file():
        raise InputDataError(f"{function}: no such file: {os.fspath(path)}")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputDataError(f"{label} cannot be read ({exc.strerror})") from None
    if not data:
        raise InputDataError(f"{label} is empty")
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise InputDataError(f"{label} is not a privhist sample (not JSON: {exc})") from None
        _, rows = verify_document(doc, label, rows_required=True)
    else:
        rows = _csv_rows(verify_csv(data, label), label)
    for i, row in enumerate(rows):
        _check_row(row, i, label)
    return rows


def _csv_rows(body: bytes, label: str) -> list[dict[str, Any]]:
    import polars as pl

    try:
        frame = pl.read_csv(body, schema_overrides={"key": pl.String})
    except (pl.exceptions.PolarsError, ValueError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputDataError(f"{label} is not a privhist sample ({first})") from None
    missing = [c for c in SAMPLE_COLUMNS if c not in frame.columns]
    if missing:
        raise InputDataError(f"{label} lacks columns {missing}")
    return frame.to_dicts()


def _check_row(row: dict[str, Any], index: int, label: str) -> None:
    missing = [c for c in SAMPLE_COLUMNS if c not in row]
    if missing:
        raise InputDataError(f"{label}: row {index} lacks {missing}")
    if row["key"] is None:
        raise InputDataError(f"{label}: row {index} has no key")
    for name in SAMPLE_COLUMNS[1:]:
        value = row[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputDataError(f"{label}: row {index} has a {name} that is not a number")
        if not math.isfinite(value) or (name == "variance" and value < 0):
            raise InputDataError(
                f"{label}: row {index} has {name} {value!r}; a privhist sample holds finite "
                "numbers (and variances >= 0)"
            )
