"""Writers: a :class:`~privhist.io.release.Release` as CSV, JSON or Parquet.

Every format holds one row per released key, in the release's (canonical, sorted) order, with
the columns of :meth:`Release.columns`: ``key``, then ``count``, ``estimate``, ``lower`` and
``upper`` as the mechanism provides them.

* CSV: the table only, header first (e.g. ``key,count``).
* JSON: ``{"metadata": {...}, "rows": [{"key": ..., "count": ...}, ...]}``.
* Parquet: the table, with the metadata as a JSON string under the file's key-value metadata
  entry ``privhist`` (see :data:`PARQUET_METADATA_KEY`).

JSON and Parquet files carry a row count and a SHA-256 checksum in their metadata (entry
``integrity``; see :mod:`privhist.io.integrity`), which privhist checks when it reads a release
back (``privhist compact-query``). CSV releases carry none: their readers are spreadsheets and
other programs, and privhist does not read them back.

Metadata is made JSON-safe: NumPy scalars and arrays become numbers and lists, ``Fraction`` and
``Decimal`` become strings (``"1/3"``), enums their values, objects with ``to_dict()`` that
dict, paths and dates strings; non-finite floats become ``"inf"``, ``"-inf"`` or ``"nan"``
strings. Anything else fails with a :class:`~privhist.core.errors.ValidationError` naming where
it was found. In the JSON rows, non-finite numbers (an unbounded interval end, say) are written
as ``null``, since JSON has no representation for them.

CSV is spreadsheet-safe by default: a text key that begins with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return would be run as a formula by a spreadsheet that opens the file
(``=HYPERLINK(...)``), so it is written with one apostrophe in front (``'=HYPERLINK(...)``), the
escape spreadsheets themselves use for "this cell is text". Only text keys are escaped (integer
keys and the numeric columns cannot start a formula). JSON and Parquet always hold the raw key;
``escape_formulas=False`` writes the raw key to CSV as well. To read such a CSV back, drop one
leading apostrophe from a key that starts with ``'`` followed by one of those characters.

Writes are atomic: the file is written to a temporary file in the destination directory and
renamed over the destination only when complete, so a failure leaves no partial file and never
damages a file already there.

No unpaid release on disk. A release that is charged to a budget ledger must not reach a file
before its spend is durable: a hidden temporary file written while the ledger transaction is open
survives a kill (SIGKILL, power loss) that rolls the spend back, and running the same release again
and again would then give unlimited free releases to average. So the release path encodes the
release in memory (:func:`encode_release`) inside the transaction and hands the bytes to
:func:`write_bytes_atomic` only after the COMMIT has returned (:meth:`privhist.session.Session.
charged`). The order of the steps, and what a kill at each leaves behind:

1. draw and encode, in memory, with the spend row written but not committed: a kill leaves no
   spend (SQLite rolls the open transaction back when the ledger is next opened) and no byte on
   disk;
2. COMMIT (durable: the ledger's ``synchronous=FULL`` syncs the file before COMMIT returns);
3. write the hidden temporary file and fsync it, then rename it over the destination: a kill here
   leaves the spend recorded and, at worst, a complete hidden file beside the destination, which
   has been paid for.

So at every instant, a readable release implies a recorded spend. The reverse does not hold (a kill
after the COMMIT can lose a paid release): the budget errs on the side of privacy. The crash test
``tests/hardening/test_kill.py`` kills a release at every step (:mod:`privhist.core.faults`) and
checks this. :func:`stage_release` and :func:`write_atomic` write whatever they are given at once;
call them with a charged release only after its spend has been committed, never inside
:meth:`privhist.accounting.ledger.Ledger.spend`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from privhist.io.files import (
    WRITE_FORMATS,
    StagedRelease,
    _file_mode,
    _stage,
    check_destination,
    write_atomic,
    write_bytes_atomic,
    write_text_atomic,
)
from privhist.io.release import (
    PARQUET_METADATA_KEY,
    Release,
    _csv_frame,
    _parquet_meta,
    _to_json,
    encode_release,
    escape_formula,
    metadata_to_json,
    release_to_csv,
    release_to_frame,
    release_to_json,
)

__all__ = [
    "PARQUET_METADATA_KEY",
    "WRITE_FORMATS",
    "StagedRelease",
    "check_destination",
    "encode_release",
    "escape_formula",
    "metadata_to_json",
    "release_to_csv",
    "release_to_frame",
    "release_to_json",
    "stage_release",
    "write_atomic",
    "write_bytes_atomic",
    "write_release",
    "write_text_atomic",
]


def write_release(
    release: Release, path: str | os.PathLike[str], format: str | None = None
) -> Path:
    """Write ``release`` to ``path`` atomically as CSV, JSON or Parquet.

    Args:
        release: what to write.
        path: the destination; its directory must exist. An existing file is replaced only
            once the new one is complete.
        format: ``csv``, ``json`` or ``parquet``; inferred from the extension when None.

    Returns:
        The destination path.

    Raises:
        ValidationError: unknown format, missing directory, or metadata that is not
            JSON-representable (JSON and Parquet).

    Example:
        >>> import tempfile, pathlib, numpy as np
        >>> r = Release(keys=np.array(["a", "b"], dtype=object), values=np.array([5, 3]))
        >>> out = write_release(r, pathlib.Path(tempfile.mkdtemp()) / "release.csv")
        >>> print(out.read_text(), end="")
        key,count
        a,5
        b,3
    """
    return stage_release(release, path, format, function="write_release").publish()


def stage_release(
    release: Release,
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    function: str = "stage_release",
) -> StagedRelease:
    """Write ``release`` completely to a hidden file beside ``path`` (see
    :class:`StagedRelease`). A failure removes the partial file and raises."""
    fn = function
    dest, fmt = check_destination(path, format, fn)

    writer: Callable[[IO[bytes]], None]
    if fmt == "csv":
        frame = _csv_frame(release, escape_formulas=True)

        def writer(fh: IO[bytes]) -> None:
            frame.write_csv(fh)

    elif fmt == "json":
        encoded = _to_json(release, 2, fn, seal=True).encode("utf-8") + b"\n"

        def writer(fh: IO[bytes]) -> None:
            fh.write(encoded)

    else:
        frame = release_to_frame(release)
        meta = _parquet_meta(release, frame, fn)

        def writer(fh: IO[bytes]) -> None:
            frame.write_parquet(fh, metadata={PARQUET_METADATA_KEY: meta})

    return StagedRelease(_stage(dest, writer, _file_mode(dest)), dest)
