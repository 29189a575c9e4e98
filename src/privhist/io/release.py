"""``Release``: what a mechanism publishes.

Keys come in a canonical, data-independent order (sorted), so the order of rows reveals nothing
beyond the set of released keys. ``values`` are the released (noisy or sampled) counts,
``estimates`` unbiased-or-stated frequency estimates where the mechanism gives them, ``lower`` /
``upper`` a confidence interval at ``metadata['confidence']`` for each estimate. ``metadata``
records the mechanism, its parameters, the guarantee, the neighbouring relation, the randomness
source and the library version. The release converts itself to tables (Polars, pandas,
Arrow) and encodes itself as CSV, JSON or Parquet (:meth:`Release.encode`);
:mod:`privhist.io.writers` writes it to files.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import polars as pl

from privhist.core.errors import ValidationError
from privhist.io.files import (
    check_destination,
    jsonable,
    resolve_write_format,
    write_bytes_atomic,
)
from privhist.io.integrity import seal_csv, seal_metadata

#: the Parquet key-value metadata entry holding the release metadata as JSON
PARQUET_METADATA_KEY: Final[str] = "privhist"


@dataclass(frozen=True)
class Release:
    keys: npt.NDArray[Any]
    values: npt.NDArray[np.int64] | None = None
    estimates: npt.NDArray[np.float64] | None = None
    #: integer bounds for noisy integer counts, floats for scaled estimates
    lower: npt.NDArray[Any] | None = None
    upper: npt.NDArray[Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: exact, NON-private facts about the input for the data holder; never written out
    diagnostics: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: further released columns, in order, after the standard ones (one value per row)
    extra: dict[str, npt.NDArray[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @property
    def value_column(self) -> str:
        """The column name of ``values`` in tables and files (``count`` unless stated)."""
        return str(self.metadata.get("value_column", "count"))

    @property
    def key_column(self) -> str:
        """The column name of ``keys`` (``key`` unless stated: ``q`` for quantile levels)."""
        return str(self.metadata.get("key_column", "key"))

    @property
    def estimate_column(self) -> str:
        """The column name of ``estimates`` (``estimate`` unless stated)."""
        return str(self.metadata.get("estimate_column", "estimate"))

    @property
    def private(self) -> bool:
        """Whether the release was drawn from a private (secure) random source."""
        return bool(self.metadata.get("randomness", {}).get("private", False))

    @property
    def has_intervals(self) -> bool:
        return self.lower is not None and self.upper is not None

    def columns(self) -> dict[str, npt.NDArray[Any]]:
        """The table of the release: ``key``, then ``count``, ``estimate``, ``lower``, ``upper``
        as the mechanism provides them, then the :attr:`extra` columns. A release whose keys,
        values or estimates are something else names their columns in its metadata
        (``key_column``, ``value_column``, ``estimate_column``; ``pws``: ``shifted_count``)."""
        names = self.metadata.get("key_columns")
        out: dict[str, npt.NDArray[Any]] = {}
        if isinstance(names, list | tuple) and len(names) > 1:
            # keys over several columns (an aggregation's groups): one column each
            for i, name in enumerate(names):
                out[str(name)] = _column([k[i] for k in self.keys.tolist()])
        elif isinstance(names, list | tuple) and len(names) == 1:
            out[str(names[0])] = self.keys
        else:
            out[self.key_column] = self.keys
        if self.values is not None:
            out[self.value_column] = self.values
        if self.estimates is not None:
            out[self.estimate_column] = self.estimates
        if self.lower is not None and self.upper is not None:
            out["lower"] = self.lower
            out["upper"] = self.upper
        for name, values in self.extra.items():
            if name in out:
                raise ValidationError("extra", "Release", "columns of new names", name)
            out[name] = np.asarray(values)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.columns().items()}

    def to_polars(self) -> Any:
        """The release as a Polars ``DataFrame`` (columns as :meth:`columns`; raw keys)."""
        return release_to_frame(self)

    def to_arrow(self) -> Any:
        """The release as a pyarrow ``Table``, the metadata under the schema key ``privhist``
        (needs pyarrow)."""
        table = self.to_polars().to_arrow()
        meta = json.dumps(metadata_to_json(self), allow_nan=False, ensure_ascii=False)
        return table.replace_schema_metadata({PARQUET_METADATA_KEY: meta})

    def to_pandas(self) -> Any:
        """The release as a pandas ``DataFrame``, the metadata in ``DataFrame.attrs``
        (needs pandas and pyarrow: ``pip install 'privhist[pandas]'``)."""
        try:
            frame = self.to_polars().to_pandas()
        except ImportError as exc:
            raise ImportError(
                "Release.to_pandas needs pandas and pyarrow "
                f"(pip install 'privhist[pandas]'): {exc}"
            ) from exc
        frame.attrs["privhist"] = dict(self.metadata)
        return frame

    def encode(self, format: str, *, escape_formulas: bool = True) -> bytes:
        """The release as the bytes of a ``csv``, ``json`` or ``parquet`` file
        (:func:`encode_release`)."""
        return encode_release(self, format, escape_formulas=escape_formulas)

    def write(
        self,
        path: Any,
        format: str | None = None,
        *,
        escape_formulas: bool = True,
    ) -> Any:
        """Write the release atomically as CSV, JSON or Parquet (format from the name when
        None); see :mod:`privhist.io.writers`. Returns the path written."""
        _, fmt = check_destination(path, format, "Release.write")
        data = encode_release(self, fmt, escape_formulas=escape_formulas, function="Release.write")
        return write_bytes_atomic(path, data)

    def lookup(self, key: Any) -> int | None:
        """The released count of ``key`` (None when the key was not released)."""
        i = int(np.searchsorted(self.keys, key))
        if i < len(self) and self.keys[i] == key and self.values is not None:
            return int(self.values[i])
        return None


def _column(values: list[Any]) -> npt.NDArray[Any]:
    """A list of values as an array: int64 for integers, objects otherwise."""
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)


def release_to_frame(release: Release) -> pl.DataFrame:
    """The release as a table with the columns of :meth:`Release.columns`.

    >>> import numpy as np
    >>> r = Release(keys=np.array(["a", "b"], dtype=object), values=np.array([5, 3]))
    >>> release_to_frame(r).columns
    ['key', 'count']
    """
    columns: dict[str, pl.Series] = {}
    key = release.key_column
    for name, values in release.columns().items():
        arr = np.asarray(values)
        if arr.dtype.kind in "OUS":
            columns[name] = pl.Series(
                name, [None if v is None else str(v) for v in arr.tolist()], dtype=pl.String
            )
        elif arr.dtype.kind == "b":
            columns[name] = pl.Series(name, arr)
        elif arr.dtype.kind in "iu" and (
            name in (key, release.value_column, "lower", "upper")
            or name in release.extra
            or name in (release.metadata.get("key_columns") or ())
        ):
            # keys, counts, the integer intervals of noisy integer counts and integer columns
            # stay integers
            columns[name] = pl.Series(name, arr.astype(np.int64, copy=False))
        elif name == release.value_column:
            columns[name] = pl.Series(name, arr.astype(np.int64, copy=False))
        else:
            columns[name] = pl.Series(name, arr.astype(np.float64, copy=False))
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
    converted = jsonable(release.metadata, "metadata", function)
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
    if not escape_formulas:
        return frame
    for name, dtype in frame.schema.items():
        if dtype != pl.String:
            continue
        starts = pl.lit(False)
        for prefix in FORMULA_PREFIXES:
            starts = starts | pl.col(name).str.starts_with(prefix)
        frame = frame.with_columns(
            pl.when(starts).then(pl.lit("'") + pl.col(name)).otherwise(pl.col(name)).alias(name)
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
    fmt = resolve_write_format(Path("release"), format, function)
    if fmt == "csv":
        text = release_to_csv(release, escape_formulas=escape_formulas)
        if release.metadata.get("integrity") == "sealed":
            # a file privhist reads back (a weighted sample): a row count and checksum trailer
            text = seal_csv(text)
        return text.encode("utf-8")
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
            lists.append([jsonable(v, f"{name}[{i}]") for i, v in enumerate(arr.tolist())])
        else:
            lists.append(arr.tolist())
    return [dict(zip(names, row, strict=True)) for row in zip(*lists, strict=True)]
