"""Parquet releases written by Spark: a dataset directory staged beside its destination and
published by one rename, only after the release's spend is committed.

When a release drawn by :class:`~privhist.engines.spark.SparkEngine` goes to a Parquet
destination, the released rows are written by Spark itself as a Parquet dataset, from the rows of
the release the driver already holds (the release is collected there in any case, so nothing is
recomputed from the source after the spend): the destination becomes a directory holding a part
file in canonical key order, plus ``_privhist.json``, the release metadata with its integrity
entry (row count, :mod:`privhist.io.integrity`). Readers of Parquet datasets (Spark, Arrow,
Polars) skip files whose names start with ``_``.

The order of the steps keeps the rule of :mod:`privhist.io.writers` (no unpaid release on disk)
and the one of the release path (a failure before the commit spends nothing):

1. inside the ledger transaction, the draw runs (on the executors for per-key noise) and its rows
   are collected into the release on the driver, and the metadata is encoded in memory: a
   failing or killed job leaves no spend and nothing on disk;
2. the spend is committed;
3. Spark writes the rows, sorted by key, into a hidden directory beside the destination
   (``.NAME.XXXX.tmp``), the driver adds ``_privhist.json`` and syncs it, and the directory is
   renamed to the destination in one step. A failure removes the hidden directory and raises (the
   spend is kept: the rows could have escaped); a kill leaves at most the hidden directory, whose
   spend is recorded.

The destination must not exist (a dataset directory cannot be renamed over a file or another
dataset in one step): it is refused before anything is spent.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from privhist.core.errors import ValidationError
from privhist.core.faults import checkpoint
from privhist.io.release import Release

#: the metadata file inside a released dataset
METADATA_FILE: Final[str] = "_privhist.json"


def parquet_publisher(
    spark: Any, output: str | os.PathLike[str], format: str | None
) -> Callable[[Release], Callable[[], Path] | None] | None:
    """The Parquet writer of ``output``, or None for other formats (they are encoded on the
    driver). It is called with the drawn release inside the transaction, encodes the
    metadata in memory and returns the function that writes and publishes after the commit
    (or None for a release that is not rows, e.g. ``compact``'s polynomial: the driver
    writes its single file, which ``read_compact`` reads back). Refuses (before anything
    is spent) a destination that exists."""
    if format != "parquet":
        return None
    dest = Path(output)
    if dest.exists() or dest.is_symlink():
        raise ValidationError(
            "output",
            "histogram on the Spark engine",
            "a Parquet destination that does not exist yet (Spark writes a dataset directory)",
            str(dest),
        )

    def prepare(release: Release) -> Callable[[], Path] | None:
        from privhist.io.integrity import seal_metadata
        from privhist.io.writers import metadata_to_json
        from privhist.mechanisms.registry import get_or_none

        cls = get_or_none(str(release.metadata.get("mechanism")))
        if cls is not None and cls.output_formats is not None:
            return None

        meta = seal_metadata(metadata_to_json(release, "histogram"), None, row_count=len(release))
        encoded = json.dumps(meta, allow_nan=False, ensure_ascii=False).encode("utf-8")
        frame = _driver_frame(spark, release)

        def publish() -> Path:
            return write_dataset(frame, dest, encoded)

        return publish

    return prepare


def _driver_frame(spark: Any, release: Release) -> Any:
    """The rows of a release drawn on the driver, as a Spark DataFrame in the release's
    (canonical) order: one partition, written as one part file."""
    from privhist.io.writers import release_to_frame

    return spark.createDataFrame(release_to_frame(release).to_pandas()).coalesce(1)


def write_dataset(frame: Any, dest: Path, metadata: bytes) -> Path:
    """Write ``frame`` (in canonical key order) as a Parquet dataset with ``metadata`` in a
    hidden directory beside ``dest``, then rename it to ``dest`` (module notes). A failure
    removes the hidden directory and raises an error naming ``dest``."""
    try:
        staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {dest}: {exc.strerror or exc}") from None
    try:
        frame.write.mode("overwrite").parquet(str(staging))
        meta = staging / METADATA_FILE
        with open(meta, "wb") as fh:
            fh.write(metadata)
            fh.flush()
            os.fsync(fh.fileno())
        _sync_dir(staging)
        checkpoint("staged")
        os.rename(staging, dest)
        _sync_dir(dest.parent)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OSError(exc.errno, f"cannot write {dest}: {exc.strerror or exc}") from None
    except Exception as exc:  # Spark's own errors (Py4JJavaError, AnalysisException)
        shutil.rmtree(staging, ignore_errors=True)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise OSError(errno.EIO, f"cannot write {dest}: {first}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    checkpoint("published")
    return dest


def _sync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
