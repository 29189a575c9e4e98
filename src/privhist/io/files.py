"""Files written safely: atomic replacement, staging beside the destination, destination checks,
and JSON-safe values.

Writes are atomic: the content is written to a hidden temporary file in the destination directory,
flushed to disk, and renamed over the destination only when complete, so a failure leaves no
partial file and never damages a file already there (:func:`write_atomic`). A staged file
(:class:`StagedRelease`) is complete but not yet visible; :meth:`StagedRelease.publish` renames it.
See :mod:`privhist.io.writers` for why a charged release is staged only after its spend commits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
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

from privhist.core.errors import ValidationError
from privhist.core.faults import checkpoint

#: the formats a release is written in
WRITE_FORMATS: Final[tuple[str, ...]] = ("csv", "json", "parquet")

_EXTENSIONS: Final[dict[str, str]] = {
    ".csv": "csv",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def check_destination(
    path: str | os.PathLike[str], format: str | None = None, function: str = "write_release"
) -> tuple[Path, str]:
    """Validate an output path and format before any work is done; return both resolved.

    Refused: an unknown format or one the file name contradicts, a missing directory, a
    directory, and a directory where no file can be created (probed with an empty file).
    """
    dest = Path(path)
    fmt = resolve_write_format(dest, format, function)
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


def write_bytes_atomic(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None
) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`write_atomic`)."""

    def writer(fh: IO[bytes]) -> None:
        fh.write(data)

    return write_atomic(path, writer, mode=mode)


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


def resolve_write_format(dest: Path, format: str | None, fn: str) -> str:
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


def jsonable(value: Any, where: str, fn: str = "write_release") -> Any:
    """Convert ``value`` to plain JSON types, or fail naming where the problem is."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return jsonable(value.item(), where, fn)
    if isinstance(value, np.ndarray):
        return [jsonable(v, f"{where}[{i}]", fn) for i, v in enumerate(value.tolist())]
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Enum):
        return jsonable(value.value, where, fn)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str | int | float | bool) and k is not None:
                raise ValidationError(
                    "release", fn, "metadata with string keys", f"{k!r} in {where}"
                )
            out[str(k)] = jsonable(v, f"{where}[{k!r}]", fn)
        return out
    if isinstance(value, list | tuple):
        return [jsonable(v, f"{where}[{i}]", fn) for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        items = [jsonable(v, f"{where}{{}}", fn) for v in value]
        return sorted(items, key=repr)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return jsonable(to_dict(), where, fn)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value), where, fn)
    raise ValidationError(
        "release",
        fn,
        "metadata made of JSON-representable values",
        f"{type(value).__name__} at {where}",
    )
