"""Writers: a :class:`~privhist.core.release.Release` as CSV, JSON or Parquet.

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

import contextlib
import dataclasses
import datetime as _dt
import io
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from pathlib import Path, PurePath
from typing import IO, Any, Final

import numpy as np
import polars as pl

from privhist.core.errors import ValidationError
from privhist.core.faults import checkpoint
from privhist.core.release import Release
from privhist.io.integrity import seal_metadata

#: the formats :func:`write_release` writes
WRITE_FORMATS: Final[tuple[str, ...]] = ("csv", "json", "parquet")

#: the Parquet key-value metadata entry holding the release metadata as JSON
PARQUET_METADATA_KEY: Final[str] = "privhist"

_EXTENSIONS: Final[dict[str, str]] = {
    ".csv": "csv",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def release_to_frame(release: Release) -> pl.DataFrame:
    """The release as a table with the columns of :meth:`Release.columns`.

    >>> import numpy as np
    >>> r = Release(keys=np.array(["a", "b"], dtype=object), values=np.array([5, 3]))
    >>> release_to_frame(r).columns
    ['key', 'count']
    """
    columns: dict[str, pl.Series] = {}
    for name, values in release.columns().items():
        arr = np.asarray(values)
        if name == "key" and arr.dtype.kind in "OU":
            columns[name] = pl.Series(name, arr.tolist(), dtype=pl.String)
        elif name == "key" and arr.dtype.kind in "iu":
            columns[name] = pl.Series(name, arr.astype(np.int64, copy=False))
        elif name == release.value_column or (
            name in ("lower", "upper") and arr.dtype.kind in "iu"
        ):
            # counts, and the integer intervals of noisy integer counts, stay integers
            columns[name] = pl.Series(name, arr.astype(np.int64, copy=False))
        elif name != "key":
            columns[name] = pl.Series(name, arr.astype(np.float64, copy=False))
        else:
            columns[name] = pl.Series(name, arr)
    return pl.DataFrame(columns)


def metadata_to_json(release: Release, function: str = "metadata_to_json") -> dict[str, Any]:
    """The release's metadata converted to JSON-safe values (see the module notes).

    >>> from fractions import Fraction
    >>> import numpy as np
    >>> r = Release(keys=np.array([1]), metadata={"epsilon": Fraction(1, 3), "n": np.int64(4)})
    >>> metadata_to_json(r)
    {'epsilon': '1/3', 'n': 4}

    Raises:
        ValidationError: a value cannot be represented in JSON.
    """
    converted = _jsonable(release.metadata, "metadata", function)
    assert isinstance(converted, dict)
    return converted


#: first characters that make a spreadsheet read a cell as a formula (escaped in CSV output)
FORMULA_PREFIXES: Final[tuple[str, ...]] = ("=", "+", "-", "@", "\t", "\r")


def escape_formula(text: str) -> str:
    """``text`` as a spreadsheet shows it literally: one apostrophe in front of a cell that a
    spreadsheet would run as a formula, anything else unchanged.

    >>> print(escape_formula('=HYPERLINK("http://x")'), escape_formula("plain"))
    '=HYPERLINK("http://x") plain
    """
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def _csv_frame(release: Release, escape_formulas: bool) -> pl.DataFrame:
    frame = release_to_frame(release)
    if escape_formulas and frame.schema.get("key") == pl.String:
        starts = pl.lit(False)
        for prefix in FORMULA_PREFIXES:
            starts = starts | pl.col("key").str.starts_with(prefix)
        frame = frame.with_columns(
            pl.when(starts).then(pl.lit("'") + pl.col("key")).otherwise(pl.col("key")).alias("key")
        )
    return frame


def release_to_csv(release: Release, *, escape_formulas: bool = True) -> str:
    """The release as CSV text (header first), as :func:`write_release` writes it.

    Text keys that a spreadsheet would run as formulas are escaped unless ``escape_formulas`` is
    False (see the module notes).

    >>> import numpy as np
    >>> r = Release(keys=np.array([7, 9]), values=np.array([5, 3]))
    >>> print(release_to_csv(r), end="")
    key,count
    7,5
    9,3
    >>> r = Release(keys=np.array(["=1+1", "a"], dtype=object), values=np.array([5, 3]))
    >>> print(release_to_csv(r), end="")
    key,count
    '=1+1,5
    a,3
    """
    text = _csv_frame(release, escape_formulas).write_csv()
    return text if isinstance(text, str) else ""


def encode_release(
    release: Release,
    format: str,
    *,
    escape_formulas: bool = True,
    function: str = "encode_release",
) -> bytes:
    """The bytes :func:`write_release` would write for ``format`` (``csv``, ``json`` or
    ``parquet``), built in memory: a release can be made ready before its budget is charged
    and written only after, so no byte of it reaches the disk unpaid.

    >>> import numpy as np
    >>> encode_release(Release(keys=np.array([1]), values=np.array([2])), "csv").split()
    [b'key,count', b'1,2']
    """
    fmt = _resolve_write_format(Path("release"), format, function)
    if fmt == "csv":
        return release_to_csv(release, escape_formulas=escape_formulas).encode("utf-8")
    if fmt == "json":
        return _to_json(release, 2, function, seal=True).encode("utf-8") + b"\n"
    frame = release_to_frame(release)
    buf = io.BytesIO()
    frame.write_parquet(
        buf, metadata={PARQUET_METADATA_KEY: _parquet_meta(release, frame, function)}
    )
    return buf.getvalue()


def _parquet_meta(release: Release, frame: pl.DataFrame, fn: str) -> str:
    """The metadata JSON of a Parquet file, with its integrity entry (row count; checksum of the
    metadata: see :mod:`privhist.io.integrity`)."""
    meta = seal_metadata(metadata_to_json(release, fn), None, row_count=frame.height)
    return json.dumps(meta, allow_nan=False, ensure_ascii=False)


def write_bytes_atomic(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None
) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`write_atomic`)."""

    def writer(fh: IO[bytes]) -> None:
        fh.write(data)

    return write_atomic(path, writer, mode=mode)


def release_to_json(release: Release, *, indent: int | None = 2) -> str:
    """The release as a JSON document ``{"metadata": ..., "rows": [...]}``.

    >>> import numpy as np
    >>> r = Release(keys=np.array(["a"], dtype=object), values=np.array([5]),
    ...             metadata={"mechanism": "demo"})
    >>> print(release_to_json(r, indent=None))
    {"metadata": {"mechanism": "demo"}, "rows": [{"key": "a", "count": 5}]}

    Raises:
        ValidationError: the metadata holds a value that cannot be represented in JSON.
    """
    return _to_json(release, indent, "release_to_json")


def _to_json(release: Release, indent: int | None, fn: str, *, seal: bool = False) -> str:
    metadata, rows = metadata_to_json(release, fn), _rows(release)
    if seal:  # files carry a row count and checksum (privhist.io.integrity)
        metadata = seal_metadata(metadata, rows)
    document = {"metadata": metadata, "rows": rows}
    return json.dumps(document, indent=indent, allow_nan=False, ensure_ascii=False)


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


def check_destination(
    path: str | os.PathLike[str], format: str | None = None, function: str = "write_release"
) -> tuple[Path, str]:
    """Validate an output path and format before any work is done; return both resolved.

    Refused: an unknown format or one the file name contradicts, a missing directory, a
    directory, and a directory where no file can be created (probed with an empty file).
    """
    dest = Path(path)
    fmt = _resolve_write_format(dest, format, function)
    if not dest.parent.is_dir():
        raise ValidationError("path", function, "a file in an existing directory", str(dest))
    if dest.is_dir():
        raise ValidationError("path", function, "a file, not a directory", str(dest))
    _probe_writable(dest, function)
    return dest, fmt


def _probe_writable(dest: Path, function: str) -> None:
    """Refuse, before any data is read or any budget spent, a directory where no file can be
    created: an empty hidden file is created there and removed at once."""
    try:
        fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".probe")
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ValidationError(
            "path", function, f"a file in a directory privhist can write ({reason})", str(dest)
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)


@dataclass
class StagedRelease:
    """A release written completely to a hidden file beside its destination, not yet visible.

    :meth:`publish` renames it over the destination in one step; :meth:`discard` removes it.
    A staged file holds the whole release, readable by anyone who can list the directory: stage
    a charged release only after its spend is committed (see the module notes), never while the
    ledger transaction is open, since a kill then leaves the release on disk and the spend
    rolled back.
    """

    staged: Path
    dest: Path

    def publish(self) -> Path:
        """Rename the staged file over the destination; a failed rename removes it and raises."""
        try:
            checkpoint("staged")
            os.replace(self.staged, self.dest)
        except OSError as exc:
            self.discard()
            raise _write_error(self.dest, exc) from None
        except BaseException:
            self.discard()
            raise
        checkpoint("published")
        return self.dest

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.staged.unlink()


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


def write_atomic(
    path: str | os.PathLike[str], writer: Callable[[IO[bytes]], None], *, mode: int | None = None
) -> Path:
    """Write a file atomically: ``writer`` fills a hidden temporary file beside ``path``, which
    is flushed to disk and renamed over ``path`` only when complete.

    A failure (in ``writer`` or the rename) removes the temporary file and raises, leaving any
    file already at ``path`` untouched.

    Args:
        path: the destination; its directory must exist.
        writer: writes the whole content to the binary file object it is given.
        mode: the file's permission bits; by default an existing file's, else what ``open()``
            would give under the current umask.

    Returns:
        The destination path.

    Example:
        >>> import tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "data.bin"
        >>> write_atomic(out, lambda fh: None) == out, out.read_bytes()
        (True, b'')
    """
    dest = Path(path)
    return StagedRelease(
        _stage(dest, writer, _file_mode(dest) if mode is None else mode), dest
    ).publish()


def write_text_atomic(path: str | os.PathLike[str], text: str, *, mode: int | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`write_atomic`).

    Example:
        >>> import tempfile, pathlib
        >>> out = write_text_atomic(pathlib.Path(tempfile.mkdtemp()) / "note.txt", "héllo")
        >>> out.read_bytes()
        b'h\\xc3\\xa9llo'
    """
    data = text.encode("utf-8")

    def writer(fh: IO[bytes]) -> None:
        fh.write(data)

    return write_atomic(path, writer, mode=mode)


# -- internals ----------------------------------------------------------------------------


def _stage(dest: Path, writer: Callable[[IO[bytes]], None], mode: int) -> Path:
    """Write a hidden temporary file beside ``dest`` with ``writer``, flushed to disk and with
    permission bits ``mode``; return its path. A failure removes the partial file and raises."""
    try:
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    except OSError as exc:
        raise _write_error(dest, exc) from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            writer(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _write_error(dest, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp


def _write_error(dest: Path, exc: OSError) -> OSError:
    """An error that names the destination, not the hidden temporary file beside it."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OSError(exc.errno, f"cannot write {dest}: {reason}")


def _resolve_write_format(dest: Path, format: str | None, fn: str) -> str:
    if format is not None:
        fmt = str(format).lower()
        if fmt not in WRITE_FORMATS:
            raise ValidationError("format", fn, f"one of {', '.join(WRITE_FORMATS)}", format)
        named = _EXTENSIONS.get(dest.suffix.lower())
        if named is not None and named != fmt:
            # CSV bytes in a .json file (or Parquet in .csv) would be read wrongly later
            raise ValidationError(
                "format", fn, f"{named}, as the file name {dest.name!r} says (or rename it)", format
            )
        return fmt
    fmt_or_none = _EXTENSIONS.get(dest.suffix.lower())
    if fmt_or_none is None:
        raise ValidationError(
            "format",
            fn,
            f"one of {', '.join(WRITE_FORMATS)} (or a file name ending in "
            f"{', '.join(sorted(_EXTENSIONS))})",
            f"None, and the format cannot be inferred from {dest.name!r}",
        )
    return fmt_or_none


def _file_mode(dest: Path) -> int:
    """Keep an existing file's permissions; otherwise what ``open()`` would give."""
    try:
        return dest.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _rows(release: Release) -> list[dict[str, Any]]:
    columns = release.columns()
    names = list(columns)
    lists: list[list[Any]] = []
    for name in names:
        arr = np.asarray(columns[name])
        if arr.dtype.kind == "f":
            finite = np.isfinite(arr)
            values: list[Any] = arr.tolist()
            if not finite.all():
                for i in np.flatnonzero(~finite).tolist():
                    values[i] = None
            lists.append(values)
        elif arr.dtype.kind == "O":
            lists.append([_jsonable(v, f"{name}[{i}]") for i, v in enumerate(arr.tolist())])
        else:
            lists.append(arr.tolist())
    return [dict(zip(names, row, strict=True)) for row in zip(*lists, strict=True)]


def _jsonable(value: Any, where: str, fn: str = "write_release") -> Any:
    """Convert ``value`` to plain JSON types, or fail naming where the problem is."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return _jsonable(value.item(), where, fn)
    if isinstance(value, np.ndarray):
        return [_jsonable(v, f"{where}[{i}]", fn) for i, v in enumerate(value.tolist())]
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Enum):
        return _jsonable(value.value, where, fn)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str | int | float | bool) and k is not None:
                raise ValidationError(
                    "release", fn, "metadata with string keys", f"{k!r} in {where}"
                )
            out[str(k)] = _jsonable(v, f"{where}[{k!r}]", fn)
        return out
    if isinstance(value, list | tuple):
        return [_jsonable(v, f"{where}[{i}]", fn) for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        items = [_jsonable(v, f"{where}{{}}", fn) for v in value]
        return sorted(items, key=repr)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _jsonable(to_dict(), where, fn)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value), where, fn)
    raise ValidationError(
        "release",
        fn,
        "metadata made of JSON-representable values",
        f"{type(value).__name__} at {where}",
    )
