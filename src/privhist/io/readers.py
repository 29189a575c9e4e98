"""Readers: turn a file into a lazy table of records with a ``key`` (and ``user``) column.

Every reader returns a :class:`polars.LazyFrame` and reads nothing but the file's header or
schema until the engine collects it, so counting a large file materialises only the aggregated
counts. Supported formats, inferred from the file name or given as ``format``:

============  ==============================  ===============================================
format        file names                      records
============  ==============================  ===============================================
``csv``       ``.csv``, ``.csv.gz``           one row per record; ``key``/``user`` columns
``tsv``       ``.tsv``, ``.tsv.gz``           as ``csv``, tab-separated
``parquet``   ``.parquet``, ``.pq``           one row per record
``ndjson``    ``.ndjson``, ``.jsonl`` (+.gz)  one JSON object per line
``text``      ``.txt``, ``.txt.gz``           one record per word (see :data:`WORD_PATTERN`);
                                              with ``user``, each line is one user
``fimi``      ``.dat``, ``.fimi`` (+.gz)      one basket per line, integer items separated by
                                              whitespace; each item is one record and, with
                                              ``user``, each line is one user
============  ==============================  ===============================================

Keys are normalised so that counting does not depend on the file format: integer keys become
``Int64``, every other scalar type becomes ``String`` (``1.5`` -> ``"1.5"``, ``True`` ->
``"true"``). Nulls are kept; the engine counts and drops them.

Errors are typed: a missing, unreadable or empty file, a malformed file and a missing column
raise :class:`~privhist.core.errors.InputDataError`; an unknown format raises
:class:`~privhist.core.errors.ValidationError`.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Final, Literal

import polars as pl

from privhist.core.errors import InputDataError, ValidationError

Format = Literal["csv", "tsv", "parquet", "ndjson", "text", "fimi"]

#: the formats :func:`scan` understands
FORMATS: Final[tuple[str, ...]] = ("csv", "tsv", "parquet", "ndjson", "text", "fimi")

#: file-name extensions (after removing a trailing ``.gz``) and the format they imply
EXTENSIONS: Final[dict[str, str]] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".txt": "text",
    ".dat": "fimi",
    ".fimi": "fimi",
}

#: a word of a plain-text file, matched after lower-casing: a maximal run of ASCII letters,
#: digits and apostrophes that holds at least one letter or digit (so ``don't`` and ``'tis`` are
#: words, a lone quote mark is not). Other characters, including non-ASCII letters, separate
#: words.
WORD_PATTERN: Final[str] = r"[a-z0-9']*[a-z0-9][a-z0-9']*"

#: rows of a CSV or NDJSON file used to decide whether the key column holds integers
INFER_ROWS: Final[int] = 10_000

_COMPRESSIBLE: Final[frozenset[str]] = frozenset({"csv", "tsv", "ndjson", "text", "fimi"})


def infer_format(path: str | os.PathLike[str], function: str = "scan") -> str:
    """The format implied by a file name, e.g. ``"csv"`` for ``counts.csv.gz``.

    >>> infer_format("retail.dat"), infer_format("words.txt.gz"), infer_format("x.jsonl")
    ('fimi', 'text', 'ndjson')

    Raises:
        ValidationError: the extension names no known format.
    """
    name = Path(path).name.lower()
    stem = name[: -len(".gz")] if name.endswith(".gz") else name
    suffix = Path(stem).suffix
    fmt = EXTENSIONS.get(suffix)
    if fmt is None or (stem != name and fmt not in _COMPRESSIBLE):
        raise ValidationError(
            "format",
            function,
            f"one of {', '.join(FORMATS)} (or a file name ending in "
            f"{', '.join(sorted(EXTENSIONS))}, optionally followed by .gz)",
            f"None, and the format cannot be inferred from {Path(path).name!r}",
        )
    return fmt


def scan(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    key: str = "key",
    user: str | bool | None = None,
    infer_keys: bool = True,
    function: str = "scan",
) -> pl.LazyFrame:
    """Lazily read records from ``path`` as a table with columns ``key`` (and ``user``).

    Args:
        path: the file to read. ``.gz`` files are decompressed (CSV, TSV, NDJSON, text, FIMI)
            in memory before parsing, so large inputs are better uncompressed or Parquet.
        format: one of :data:`FORMATS`; inferred from the file name when None.
        key: the key column of a CSV, TSV, Parquet or NDJSON file (ignored for ``text`` and
            ``fimi``, whose keys are words and items).
        user: the user (privacy unit) column of a tabular file, or None for record-level data.
            For ``text`` and ``fimi`` any true value or column name asks for one user per line
            (``user`` is then the 1-based line number).
        infer_keys: when True, a CSV or NDJSON key column whose first :data:`INFER_ROWS`
            values are all integers is read as ``Int64``; when False keys are always read as
            text (and so is the user column). Parquet files carry their own types.
        function: the name used in error messages (for callers that wrap :func:`scan`).

    Returns:
        A lazy frame with column ``key`` (``Int64`` or ``String``) and, when requested,
        ``user``. Nothing beyond the header or schema has been read yet.

    Raises:
        InputDataError: the file is missing, unreadable, empty or malformed, or lacks a column.
        ValidationError: the format is unknown or cannot be inferred.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "visits.csv").write_text("page,who\\nhome,1\\nabout,2\\nhome,2\\n")
        >>> lf = scan(d / "visits.csv", key="page", user="who")
        >>> lf.collect().sort("key", "user").rows()
        [('about', 2), ('home', 1), ('home', 2)]
    """
    fmt = resolve_format(path, format, function)
    p = _check_file(path, function)
    if fmt in ("text", "fimi"):
        return _scan_lines_format(p, fmt, bool(user))
    if isinstance(user, bool):
        raise ValidationError("user", function, f"a column name for format {fmt!r}", user)
    if user is not None and user == key:
        raise ValidationError("user", function, f"a column other than the key column {key!r}", user)
    lf = _scan_table(p, fmt, key, user, infer_keys)
    return select_records(lf, key=key, user=user, function=function, source=str(p))


def select_records(
    frame: pl.LazyFrame | pl.DataFrame,
    *,
    key: str = "key",
    user: str | None = None,
    function: str = "scan",
    source: str = "the data",
) -> pl.LazyFrame:
    """Select and rename the ``key`` (and ``user``) columns of a table, normalising key types.

    Integer keys become ``Int64``; other scalar keys become ``String``. The user column keeps its
    type (it is only grouped on).

    >>> select_records(pl.DataFrame({"w": [1.5, 2.0], "u": [1, 1]}), key="w", user="u").collect()
    shape: (2, 2)
    ┌─────┬──────┐
    │ key ┆ user │
    │ --- ┆ ---  │
    │ str ┆ i64  │
    ╞═════╪══════╡
    │ 1.5 ┆ 1    │
    │ 2.0 ┆ 1    │
    └─────┴──────┘

    Raises:
        InputDataError: a column is missing or holds nested values.
    """
    lf = frame.lazy()
    try:
        schema = lf.collect_schema()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputDataError(f"cannot read {source}: {_first_line(exc)}") from exc
    names = list(schema.names())
    for param, column in (("key", key), ("user", user)):
        if column is not None and column not in schema:
            raise InputDataError(
                f"parameter '{param}' of {function} must be one of the columns of {source} "
                f"({', '.join(map(repr, names))}); got {column!r}"
            )
    exprs = [_key_expr(key, schema[key], function, source)]
    if user is not None:
        if schema[user].is_nested():
            raise InputDataError(
                f"parameter 'user' of {function} must name a column of scalar values; "
                f"got {user!r} of type {schema[user]}"
            )
        exprs.append(pl.col(user).alias("user"))
    return lf.select(exprs)


def resolve_format(
    path: str | os.PathLike[str], format: str | None = None, function: str = "scan"
) -> str:
    """The canonical format of ``path``: ``format`` (aliases allowed) or inferred from the name.

    >>> resolve_format("a.csv"), resolve_format("a.bin", "jsonl")
    ('csv', 'ndjson')

    Raises:
        ValidationError: the format is unknown or cannot be inferred.
    """
    if format is None:
        return infer_format(path, function)
    fmt = str(format).lower()
    aliases = {"jsonl": "ndjson", "txt": "text", "dat": "fimi", "pq": "parquet"}
    fmt = aliases.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ValidationError("format", function, f"one of {', '.join(FORMATS)}", format)
    return fmt


# -- internals ----------------------------------------------------------------------------


def _check_file(path: str | os.PathLike[str], function: str) -> Path:
    """Fail early and clearly on a missing, unreadable or empty file."""
    p = Path(path)
    if not p.exists():
        raise InputDataError(
            f"parameter 'path' of {function} must be an existing file; got {str(p)!r}"
        )
    if p.is_dir():
        raise InputDataError(
            f"parameter 'path' of {function} must be a file; got directory {str(p)!r}"
        )
    try:
        if p.name.lower().endswith(".gz"):
            with gzip.open(p, "rb") as fh:
                first = fh.read(1)
        else:
            with open(p, "rb") as fh:
                first = fh.read(1)
    except (OSError, EOFError) as exc:
        raise InputDataError(f"cannot read {str(p)!r}: {exc}") from exc
    if not first:
        raise InputDataError(f"file {str(p)!r} is empty")
    return p


def _scan_table(p: Path, fmt: str, key: str, user: str | None, infer_keys: bool) -> pl.LazyFrame:
    try:
        if fmt in ("csv", "tsv"):
            return pl.scan_csv(
                p,
                separator="\t" if fmt == "tsv" else ",",
                infer_schema=infer_keys,
                infer_schema_length=INFER_ROWS,
            )
        if fmt == "ndjson":
            lf = pl.scan_ndjson(p, infer_schema_length=INFER_ROWS)
            if not infer_keys:
                present = lf.collect_schema()
                wanted = [c for c in (key, user) if c is not None and c in present]
                overrides = {c: pl.String() for c in wanted}
                lf = pl.scan_ndjson(p, infer_schema_length=INFER_ROWS, schema_overrides=overrides)
            return lf
        return pl.scan_parquet(p)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputDataError(f"cannot read {str(p)!r} as {fmt}: {_first_line(exc)}") from exc


def _scan_lines_format(p: Path, fmt: str, with_user: bool) -> pl.LazyFrame:
    lines = _scan_lines(p, with_user)
    if fmt == "text":
        tokens = pl.col("line").str.to_lowercase().str.extract_all(WORD_PATTERN)
    else:
        tokens = pl.col("line").str.extract_all(r"\S+")
    cols = [tokens.alias("key")]
    if with_user:
        cols.append(pl.col("user").cast(pl.Int64))
    lf = lines.select(cols).explode("key", empty_as_null=False).filter(pl.col("key").is_not_null())
    if fmt == "fimi":
        # strict: a non-integer item is a malformed FIMI file, reported when collected
        lf = lf.with_columns(pl.col("key").cast(pl.Int64, strict=True))
    return lf


def _scan_lines(p: Path, with_user: bool) -> pl.LazyFrame:
    """One row per line of the file (column ``line``; ``user`` = 1-based line number)."""
    index = "user" if with_user else None
    scan_lines = getattr(pl, "scan_lines", None)
    if scan_lines is not None:
        lf: pl.LazyFrame = scan_lines(p, name="line", row_index_name=index, row_index_offset=1)
        return lf
    # older Polars: a CSV scan with no quoting and a separator that text does not contain
    return pl.scan_csv(
        p,
        has_header=False,
        separator="\x1f",
        quote_char=None,
        new_columns=["line"],
        schema_overrides={"line": pl.String()},
        truncate_ragged_lines=True,
        row_index_name=index,
        row_index_offset=1,
    ).select(([index] if index else []) + ["line"])


def _key_expr(key: str, dtype: pl.DataType, function: str, source: str) -> pl.Expr:
    col = pl.col(key)
    if dtype.is_integer():
        return col.cast(pl.Int64).alias("key")
    if dtype.is_nested() or dtype == pl.Object:
        raise InputDataError(
            f"parameter 'key' of {function} must name a column of scalar values; "
            f"got {key!r} of type {dtype} in {source}"
        )
    if dtype == pl.String:
        return col.alias("key")
    return col.cast(pl.String).alias("key")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
