"""Reading records from files and writing releases.

Readers (:mod:`privhist.io.readers`) return lazy Polars tables with a ``key`` (and ``user``)
column; writers (:mod:`privhist.io.writers`) write a release atomically as CSV, JSON or Parquet.
"""

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
from privhist.io.writers import (
    PARQUET_METADATA_KEY,
    WRITE_FORMATS,
    StagedRelease,
    check_destination,
    metadata_to_json,
    release_to_csv,
    release_to_frame,
    release_to_json,
    stage_release,
    write_release,
)

__all__ = [
    "FORMATS",
    "PARQUET_METADATA_KEY",
    "WORD_PATTERN",
    "WRITE_FORMATS",
    "FileFormat",
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
