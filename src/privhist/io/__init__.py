"""Records in, releases out: readers, the :class:`~privhist.io.release.Release` table and its
files.

Readers (:mod:`privhist.io.readers`) return lazy Polars tables with a ``key`` (and ``user``)
column; a :class:`~privhist.io.release.Release` converts itself to Polars, pandas and Arrow
tables and encodes itself as CSV, JSON or Parquet; writers (:mod:`privhist.io.writers`) write it
atomically (:mod:`privhist.io.files`). This layer knows files and tables, nothing of privacy: it
sits just above ``core`` (``docs/concepts/architecture.md``). The names below load on first
use, so importing a module of this package does not import Polars until a reader or a table is
needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "FORMATS": "privhist.io.readers",
    "FileFormat": "privhist.io.readers",
    "parse_separator": "privhist.io.readers",
    "WORD_PATTERN": "privhist.io.readers",
    "infer_format": "privhist.io.readers",
    "resolve_format": "privhist.io.readers",
    "scan": "privhist.io.readers",
    "select_records": "privhist.io.readers",
    "Release": "privhist.io.release",
    "PARQUET_METADATA_KEY": "privhist.io.release",
    "metadata_to_json": "privhist.io.release",
    "release_to_csv": "privhist.io.release",
    "release_to_frame": "privhist.io.release",
    "release_to_json": "privhist.io.release",
    "WRITE_FORMATS": "privhist.io.files",
    "StagedRelease": "privhist.io.files",
    "check_destination": "privhist.io.files",
    "stage_release": "privhist.io.writers",
    "write_release": "privhist.io.writers",
}

if TYPE_CHECKING:
    from privhist.io.files import WRITE_FORMATS, StagedRelease, check_destination
    from privhist.io.readers import (
        FORMATS,
        WORD_PATTERN,
        FileFormat,
        infer_format,
        parse_separator,
        resolve_format,
        scan,
        select_records,
    )
    from privhist.io.release import (
        PARQUET_METADATA_KEY,
        Release,
        metadata_to_json,
        release_to_csv,
        release_to_frame,
        release_to_json,
    )
    from privhist.io.writers import stage_release, write_release


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privhist.io' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(_LAZY)


__all__ = [
    "FORMATS",
    "PARQUET_METADATA_KEY",
    "WORD_PATTERN",
    "WRITE_FORMATS",
    "FileFormat",
    "Release",
    "StagedRelease",
    "check_destination",
    "infer_format",
    "metadata_to_json",
    "parse_separator",
    "release_to_csv",
    "release_to_frame",
    "release_to_json",
    "resolve_format",
    "scan",
    "select_records",
    "stage_release",
    "write_release",
]
