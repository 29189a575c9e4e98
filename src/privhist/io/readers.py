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

Key and user types are public choices, never inferred from the data
-------------------------------------------------------------------
How a record's key is parsed must not depend on any other record: if one odd row could switch a
whole column between integers and text, ``"007"`` and ``"7"`` would be one key in a dataset and
two keys in its neighbour, and the release would tell the two apart with certainty. So:

* The key type is ``key_type``, ``"str"`` or ``"int"`` (:data:`KEY_TYPES`), chosen by the caller.
  When it is None each format uses its default: ``"int"`` for ``fimi`` (items are integers by the
  format's definition), ``"str"`` for every other format.
* CSV, TSV and NDJSON key and user columns are always read as text, whatever the rows look like
  (no schema inference for them). NDJSON numbers and booleans become their JSON text (``7`` ->
  ``"7"``), arrays and objects their JSON text.
* With ``key_type="str"`` every key is ``String``: a Parquet (or table) integer becomes its
  decimal text, other scalar types their text (``1.5`` -> ``"1.5"``, ``True`` -> ``"true"``).
* With ``key_type="int"`` every key is ``Int64``, cast one record at a time and never strictly:
  text that is an optional sign followed by decimal digits becomes that integer (``"007"`` and
  ``"7"`` are both ``7``), anything else (``"zzz"``, ``" 7"``, ``"7.0"``, an integer outside the
  ``Int64`` range) becomes a null key, which the engine counts in ``info["null_keys"]`` and drops
  like any missing key. Integer columns are cast directly, other non-text columns through their
  text.
* Users are compared as text for every file format (``"007"`` and ``"7"`` are two users), so a
  Parquet integer user column becomes its decimal text. For ``text`` and ``fimi`` files the user
  is the line number, an ``Int64``.

Tables given directly (:func:`select_records`) have a schema fixed by whoever built them, so with
``key_type=None`` they keep it: integer keys become ``Int64``, other scalar keys ``String``, and
the user column keeps its type. Nulls are kept everywhere; the engine counts and drops them.

Headers and separators
----------------------
A CSV or TSV file's first line is its header, unless ``columns`` names its columns: then the file
has no header, and its first line is a record like the others (a headerless file read without
``columns`` would lose its first record and name its columns after it). ``separator`` is the one
character between fields: ``","`` for CSV and ``"\\t"`` for TSV by default. A CSV file *with* a
header whose first line holds tabs and no comma is read as tab-separated: the header is the
file's schema, so this looks at no record. A headerless file is never sniffed, since its first
line is a record and how every record is split must not depend on one of them (as for key
types above); give ``separator`` for it. :class:`FileFormat` holds the three choices (format,
columns, separator) as one value, for requests that carry how a file is read.

Errors are typed: a missing, unreadable or empty file, a malformed file and a missing column
raise :class:`~privhist.core.errors.InputDataError`; an unknown format raises
:class:`~privhist.core.errors.ValidationError`.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import polars as pl

from privhist.core.errors import InputDataError, MissingInputError, ValidationError

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

#: the key types a caller can choose (see "Key and user types" above)
KEY_TYPES: Final[tuple[str, ...]] = ("str", "int")

#: rows of an NDJSON file read to list its fields (to report a missing column); the types found
#: there are not used
SCHEMA_ROWS: Final[int] = 10_000

_COMPRESSIBLE: Final[frozenset[str]] = frozenset({"csv", "tsv", "ndjson", "text", "fimi"})

#: the formats whose files may have no header (``columns``) and another ``separator``
DELIMITED: Final[tuple[str, ...]] = ("csv", "tsv")

#: the longest header line looked at to detect a tab separator, in bytes
_HEADER_BYTES: Final[int] = 1 << 20


@dataclass(frozen=True)
class FileFormat:
    """How a file is read: its format and, for CSV and TSV, its column names when it has no
    header and the character between fields (module notes, "Headers and separators").

    Attributes:
        name: one of :data:`FORMATS` (or an alias such as ``"jsonl"``); None to infer it from
            the file name.
        columns: the file has no header and these are its column names, in order; None when
            the first line is the header.
        separator: one character between fields; None for the format's (``","`` for CSV, with
            tabs detected from a header; ``"\\t"`` for TSV).

    >>> FileFormat("csv", ("age", "work"), "\\t").describe()
    "csv, no header, columns 'age', 'work', separator '\\\\t'"
    >>> FileFormat.of("tsv").to_dict()
    {'format': 'tsv', 'columns': None, 'separator': None}
    """

    name: str | None = None
    columns: tuple[str, ...] | None = None
    separator: str | None = None

    def __post_init__(self) -> None:
        if self.columns is not None and not isinstance(self.columns, tuple):
            if isinstance(self.columns, str) or not isinstance(self.columns, Sequence):
                raise ValidationError(
                    "columns", "FileFormat", "a list of column names", self.columns
                )
            object.__setattr__(self, "columns", tuple(self.columns))

    @classmethod
    def of(
        cls,
        format: str | FileFormat | None = None,
        *,
        columns: Sequence[str] | None = None,
        separator: str | None = None,
        function: str = "scan",
    ) -> FileFormat:
        """One :class:`FileFormat` from a format name or value and the ``columns`` and
        ``separator`` arguments of a reader; a choice made twice must agree.

        Raises:
            ValidationError: ``columns`` or ``separator`` contradict ``format``.
        """
        if not isinstance(format, FileFormat):
            if format is not None and not isinstance(format, str):
                raise ValidationError("format", function, f"one of {', '.join(FORMATS)}", format)
            return cls(format, _columns(columns, function), separator)
        for param, given, held in (
            ("columns", columns, format.columns),
            ("separator", separator, format.separator),
        ):
            if given is not None and held is not None and tuple(given) != tuple(held):
                raise ValidationError(param, function, f"{held!r} as the format says", given)
        return cls(
            format.name,
            format.columns if columns is None else _columns(columns, function),
            format.separator if separator is None else separator,
        )

    def resolve(self, path: str | os.PathLike[str], function: str = "scan") -> FileFormat:
        """The format with its name resolved (inferred from ``path`` when None) and its
        ``columns`` and ``separator`` checked against it (no file is read).

        Raises:
            ValidationError: the format is unknown, or ``columns``/``separator`` are given for a
                format that has neither, or are not valid.
        """
        fmt = resolve_format(path, self.name, function)
        columns = _columns(self.columns, function)
        if fmt not in DELIMITED:
            for param, value in (("columns", columns), ("separator", self.separator)):
                if value is not None:
                    raise ValidationError(
                        param, function, f"None for format {fmt!r} (only CSV and TSV)", value
                    )
        return FileFormat(fmt, columns, check_separator(self.separator, function))

    def describe(self) -> str:
        """A short text for messages and metadata."""
        parts = [self.name or "format from the file name"]
        if self.columns is not None:
            parts.append("no header, columns " + ", ".join(map(repr, self.columns)))
        if self.separator is not None:
            parts.append(f"separator {self.separator!r}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The three choices as JSON-ready values."""
        columns = None if self.columns is None else list(self.columns)
        return {"format": self.name, "columns": columns, "separator": self.separator}


def check_separator(separator: object, function: str = "scan") -> str | None:
    """``separator`` checked: None, or one character that is not a line break or a quote.

    >>> check_separator(";"), check_separator(None)
    (';', None)

    Raises:
        ValidationError: it is anything else.
    """
    if separator is None:
        return None
    ok = (
        isinstance(separator, str)
        and len(separator) == 1
        and separator not in '\r\n"'
        and len(separator.encode("utf-8")) == 1
    )
    if not ok:
        raise ValidationError(
            "separator",
            function,
            "one ASCII character other than a line break or a double quote (e.g. ',', ';', '\\t')",
            separator,
        )
    return separator  # type: ignore[return-value]


def parse_separator(text: str, function: str = "scan") -> str:
    """A separator as a command line spells it: one character, or ``\\t``, ``tab``,
    ``comma``, ``semicolon``, ``space`` or ``pipe``.

    >>> parse_separator("\\\\t") == parse_separator("tab") == "\\t", parse_separator(";")
    (True, ';')

    Raises:
        ValidationError: it names no separator :func:`check_separator` accepts.
    """
    names = {"\\t": "\t", "tab": "\t", "comma": ",", "semicolon": ";", "space": " ", "pipe": "|"}
    value = names.get(text.lower(), text) if isinstance(text, str) else text
    checked = check_separator(value, function)
    if checked is None:  # pragma: no cover - a string is never None
        raise ValidationError("separator", function, "one character", text)
    return checked


def _columns(columns: object, function: str) -> tuple[str, ...] | None:
    """``columns`` checked: None, or a non-empty list of distinct, non-empty names."""
    if columns is None:
        return None
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise ValidationError("columns", function, "a list of column names", columns)
    names = tuple(columns)
    if not names or any(not isinstance(c, str) or not c.strip() for c in names):
        raise ValidationError(
            "columns", function, "a non-empty list of non-empty column names", list(names)
        )
    if len(set(names)) != len(names):
        twice = sorted({c for c in names if names.count(c) > 1})
        raise ValidationError(
            "columns", function, "distinct column names", f"{', '.join(twice)} more than once"
        )
    return names


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
            "input_format",
            function,
            f"one of {', '.join(FORMATS)} (or a file name ending in "
            f"{', '.join(sorted(EXTENSIONS))}, optionally followed by .gz)",
            f"None, and the format cannot be inferred from {Path(path).name!r}",
        )
    return fmt


def scan(
    path: str | os.PathLike[str],
    *,
    format: str | FileFormat | None = None,
    key: str = "key",
    user: str | bool | None = None,
    key_type: str | None = None,
    columns: Sequence[str] | None = None,
    separator: str | None = None,
    function: str = "scan",
) -> pl.LazyFrame:
    """Lazily read records from ``path`` as a table with columns ``key`` (and ``user``).

    Args:
        path: the file to read. ``.gz`` files are decompressed (CSV, TSV, NDJSON, text, FIMI)
            in memory before parsing, so large inputs are better uncompressed or Parquet.
        format: one of :data:`FORMATS`, or a :class:`FileFormat`; inferred from the file name
            when None.
        key: the key column of a CSV, TSV, Parquet or NDJSON file (ignored for ``text`` and
            ``fimi``, whose keys are words and items).
        user: the user (privacy unit) column of a tabular file, or None for record-level data.
            For ``text`` and ``fimi`` any true value or column name asks for one user per line
            (``user`` is then the 1-based line number).
        key_type: ``"str"`` or ``"int"``, the type every key is read as, record by record
            (see the module notes); None for the format's default, ``"int"`` for ``fimi`` and
            ``"str"`` otherwise. Never inferred from the data.
        columns: CSV/TSV only: the file has no header, and these are its column names (its
            first line is then a record). None: the first line is the header.
        separator: CSV/TSV only: the one character between fields; None for ``","`` (CSV; tab
            when the header holds tabs and no comma) or ``"\\t"`` (TSV). Never sniffed from a
            headerless file.
        function: the name used in error messages (for callers that wrap :func:`scan`).

    Returns:
        A lazy frame with column ``key`` (``String`` or ``Int64``, as ``key_type`` says) and,
        when requested, ``user`` (``String``, or the ``Int64`` line number for ``text`` and
        ``fimi``). Nothing beyond the header or schema has been read yet.

    Raises:
        InputDataError: the file is missing, unreadable, empty or malformed, or lacks a column.
        ValidationError: the format is unknown or cannot be inferred.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "visits.csv").write_text("page,who\\nhome,1\\nabout,2\\nhome,2\\n")
        >>> lf = scan(d / "visits.csv", key="page", user="who")
        >>> lf.collect().sort("key", "user").rows()
        [('about', '2'), ('home', '1'), ('home', '2')]
        >>> _ = (d / "ids.csv").write_text("id\\n007\\n7\\nzzz\\n")
        >>> scan(d / "ids.csv", key="id").collect()["key"].to_list()
        ['007', '7', 'zzz']
        >>> scan(d / "ids.csv", key="id", key_type="int").collect()["key"].to_list()
        [7, 7, None]

        A file without a header, and one whose fields are separated by tabs:

        >>> _ = (d / "adult.data").write_text("39,State-gov\\n50,Private\\n")
        >>> scan(d / "adult.data", format="csv", columns=["age", "work"], key="age").collect()[
        ...     "key"].to_list()
        ['39', '50']
        >>> _ = (d / "basket.dat").write_text("item\\tuser\\nmilk\\t1\\n")
        >>> scan(d / "basket.dat", format="csv", key="item", user="user").collect().rows()
        [('milk', '1')]
    """
    spec = FileFormat.of(format, columns=columns, separator=separator, function=function)
    spec = spec.resolve(path, function)
    fmt = str(spec.name)
    kind = check_key_type(key_type, function, default=default_key_type(fmt))
    p = check_file(path, function)
    if fmt in ("text", "fimi"):
        return _scan_lines_format(p, fmt, bool(user), kind)
    if isinstance(user, bool):
        raise ValidationError("user", function, f"a column name for format {fmt!r}", user)
    if user is not None and user == key:
        raise ValidationError("user", function, f"a column other than the key column {key!r}", user)
    lf = _scan_table(p, spec, key, user, function)
    return _select(lf, key, user, kind, True, function, str(p))


def scan_columns(
    path: str | os.PathLike[str],
    columns: Sequence[str],
    *,
    format: str | FileFormat | None = None,
    function: str = "scan",
) -> pl.LazyFrame:
    """Lazily read the named ``columns`` of a table file (CSV, TSV, Parquet, NDJSON) as they are:
    text in CSV, TSV and NDJSON files, the file's own types in Parquet (part of the format, not
    of any record). What an aggregation reads: its group, user and value columns.

    Raises:
        InputDataError: the file is missing, unreadable or lacks a column.
        ValidationError: the format is unknown, or not a table format.
    """
    spec = FileFormat.of(format, function=function).resolve(path, function)
    fmt = str(spec.name)
    if fmt not in ("csv", "tsv", "parquet", "ndjson"):
        raise ValidationError(
            "input_format", function, "a table format (csv, tsv, parquet, ndjson)", fmt
        )
    p = check_file(path, function)
    wanted = list(dict.fromkeys(columns))
    try:
        if fmt == "ndjson":
            names = pl.scan_ndjson(p, infer_schema_length=SCHEMA_ROWS).collect_schema().names()
            lf = pl.scan_ndjson(p, schema={c: pl.String() for c in wanted if c in names})
        else:
            lf = _scan_table(p, spec, wanted[0], None, function)
            names = lf.collect_schema().names()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputDataError(f"cannot read {str(p)!r} as {fmt}: {_first_error_line(exc)}") from exc
    missing = [c for c in wanted if c not in names]
    if missing:
        raise InputDataError(
            f"the columns {', '.join(map(repr, missing))} are not in {str(p)!r} "
            f"({', '.join(map(repr, names))})"
        )
    return lf.select(wanted)


def select_records(
    frame: pl.LazyFrame | pl.DataFrame,
    *,
    key: str = "key",
    user: str | None = None,
    key_type: str | None = None,
    function: str = "scan",
    source: str = "the data",
) -> pl.LazyFrame:
    """Select and rename the ``key`` (and ``user``) columns of a table, normalising key types.

    With ``key_type=None`` the table's schema decides, as it is fixed by whoever built the table
    (like an array's dtype): integer keys become ``Int64``, other scalar keys ``String``. With
    ``"str"`` or ``"int"`` every key is cast to that type record by record, as :func:`scan` does
    (a value that is not an integer becomes a null key under ``"int"``). The user column keeps
    its type (it is only grouped on).

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

    >>> df = pl.DataFrame({"w": [7, 12], "u": [1, 1]})
    >>> select_records(df, key="w", key_type="str").collect()["key"].to_list()
    ['7', '12']

    Raises:
        InputDataError: a column is missing or holds nested values.
        ValidationError: ``key_type`` is not None, ``"str"`` or ``"int"``.
    """
    kind = check_key_type(key_type, function, default=None)
    return _select(frame, key, user, kind, False, function, source)


def check_key_type(key_type: object, function: str, default: str | None = "str") -> str | None:
    """``key_type`` checked against :data:`KEY_TYPES`, or ``default`` when it is None.

    >>> check_key_type("int", "count"), check_key_type(None, "count")
    ('int', 'str')

    Raises:
        ValidationError: ``key_type`` is neither None nor one of :data:`KEY_TYPES`.
    """
    if key_type is None:
        return default
    if not isinstance(key_type, str) or key_type not in KEY_TYPES:
        raise ValidationError(
            "key_type", function, f"one of {', '.join(map(repr, KEY_TYPES))}", key_type
        )
    return key_type


def default_key_type(fmt: str) -> str:
    """The key type of a format when the caller gives none: ``"int"`` for FIMI, else ``"str"``.

    >>> default_key_type("fimi"), default_key_type("csv")
    ('int', 'str')
    """
    return "int" if fmt == "fimi" else "str"


def resolve_format(
    path: str | os.PathLike[str], format: str | FileFormat | None = None, function: str = "scan"
) -> str:
    """The canonical format of ``path``: ``format`` (aliases allowed; a :class:`FileFormat`'s
    name) or inferred from the name.

    >>> resolve_format("a.csv"), resolve_format("a.bin", "jsonl")
    ('csv', 'ndjson')

    Raises:
        ValidationError: the format is unknown or cannot be inferred.
    """
    if isinstance(format, FileFormat):
        format = format.name
    if format is None:
        return infer_format(path, function)
    fmt = str(format).lower()
    aliases = {"jsonl": "ndjson", "txt": "text", "dat": "fimi", "pq": "parquet"}
    fmt = aliases.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ValidationError("input_format", function, f"one of {', '.join(FORMATS)}", format)
    return fmt


# -- internals ----------------------------------------------------------------------------


def _select(
    frame: pl.LazyFrame | pl.DataFrame,
    key: str,
    user: str | None,
    key_type: str | None,
    user_as_text: bool,
    function: str,
    source: str,
) -> pl.LazyFrame:
    """:func:`select_records` with a checked ``key_type`` (None: keep the schema's type)."""
    lf = frame.lazy()
    try:
        schema = lf.collect_schema()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputDataError(f"cannot read {source}: {_first_error_line(exc)}") from exc
    names = list(schema.names())
    for param, column in (("key", key), ("user", user)):
        if column is not None and column not in schema:
            raise MissingInputError(
                param,
                function,
                f"be one of the columns of {source} ({', '.join(map(repr, names))})",
                repr(column),
            )
    exprs = [_key_expr(key, schema[key], key_type, function, source)]
    if user is not None:
        if schema[user].is_nested() or schema[user] == pl.Object:
            raise MissingInputError(
                "user",
                function,
                "name a column of scalar values",
                f"{user!r} of type {schema[user]}",
            )
        col = pl.col(user)
        if user_as_text and schema[user].is_integer() and schema[user] != pl.UInt64:
            # a file's integer column: equal as integers exactly when equal as decimal text, so
            # users are compared as text without paying for the conversion
            col = col.cast(pl.Int64, strict=False)
        elif user_as_text and schema[user] != pl.String:
            col = col.cast(pl.String)
        exprs.append(col.alias("user"))
    return lf.select(exprs)


def check_file(path: str | os.PathLike[str], function: str) -> Path:
    """Fail early and clearly on a missing, unreadable or empty file."""
    p = Path(path)
    if not p.exists():
        raise MissingInputError("path", function, "be an existing file", repr(str(p)))
    if p.is_dir():
        raise MissingInputError("path", function, "be a file", f"directory {str(p)!r}")
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


def _first_line(p: Path) -> bytes:
    """The file's first line (at most :data:`_HEADER_BYTES`), decompressed for ``.gz``."""
    opener: Any = gzip.open if p.name.lower().endswith(".gz") else open
    try:
        with opener(p, "rb") as fh:
            line: bytes = fh.readline(_HEADER_BYTES)
    except (OSError, EOFError) as exc:
        raise InputDataError(f"cannot read {str(p)!r}: {exc}") from exc
    return line


def separator_of(p: Path, spec: FileFormat) -> str:
    """The separator to split ``p`` with (module notes): the one given, the format's, or a tab
    for a CSV file whose header holds tabs and no comma."""
    if spec.separator is not None:
        return spec.separator
    if spec.name == "tsv":
        return "\t"
    if spec.columns is None:  # the first line is the header, not a record
        header = _first_line(p)
        if b"\t" in header and b"," not in header:
            return "\t"
    return ","


def _scan_delimited(p: Path, spec: FileFormat, function: str) -> pl.LazyFrame:
    """A CSV/TSV scan with every column as text (only the key and user columns are used)."""
    sep = separator_of(p, spec)
    if spec.columns is None:
        return pl.scan_csv(p, separator=sep, infer_schema=False)
    # no header: the number of names must be the number of fields (read from the first line,
    # which only decides whether the read is refused, never how a record is split)
    fields = pl.scan_csv(p, has_header=False, separator=sep, infer_schema=False)
    found = len(fields.collect_schema())
    if found != len(spec.columns):
        raise MissingInputError(
            "columns",
            function,
            f"name every column of {str(p)!r}, which has {found} field(s) in its first "
            f"line split by {sep!r}",
            f"{len(spec.columns)} name(s)",
        )
    return pl.scan_csv(
        p, has_header=False, new_columns=list(spec.columns), separator=sep, infer_schema=False
    )


def _scan_table(
    p: Path, spec: FileFormat, key: str, user: str | None, function: str
) -> pl.LazyFrame:
    """A lazy scan whose key and user columns are text whatever the rows hold (Parquet: the
    file's own schema, which is part of the format, not of any record)."""
    fmt = spec.name
    try:
        if fmt in DELIMITED:
            return _scan_delimited(p, spec, function)
        if fmt == "ndjson":
            # the first rows only list the fields, so a missing column is reported; the scan
            # itself reads exactly the key and user fields, as text, and ignores the rest
            fields = pl.scan_ndjson(p, infer_schema_length=SCHEMA_ROWS).collect_schema().names()
            for param, column in (("key", key), ("user", user)):
                if column is not None and column not in fields:
                    raise MissingInputError(
                        param,
                        function,
                        f"be one of the columns of {str(p)!r} ({', '.join(map(repr, fields))})",
                        repr(column),
                    )
            wanted = [key] if user is None else [key, user]
            return pl.scan_ndjson(p, schema={c: pl.String() for c in wanted})
        return pl.scan_parquet(p)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputDataError(f"cannot read {str(p)!r} as {fmt}: {_first_error_line(exc)}") from exc


def _scan_lines_format(p: Path, fmt: str, with_user: bool, key_type: str | None) -> pl.LazyFrame:
    lines = _scan_lines(p, with_user)
    if fmt == "text":
        tokens = pl.col("line").str.to_lowercase().str.extract_all(WORD_PATTERN)
    else:
        tokens = pl.col("line").str.extract_all(r"\S+")
    cols = [tokens.alias("key")]
    if with_user:
        cols.append(pl.col("user").cast(pl.Int64))
    lf = lines.select(cols).explode("key", empty_as_null=False).filter(pl.col("key").is_not_null())
    if key_type == "int":
        # each token on its own: a malformed FIMI item (or a word that is not a number) becomes
        # a null key, counted and dropped by the engine; no other token is affected
        lf = lf.with_columns(pl.col("key").cast(pl.Int64, strict=False))
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


def _key_expr(
    key: str, dtype: pl.DataType, key_type: str | None, function: str, source: str
) -> pl.Expr:
    col = pl.col(key)
    if dtype.is_nested() or dtype == pl.Object:
        raise MissingInputError(
            "key",
            function,
            "name a column of scalar values",
            f"{key!r} of type {dtype} in {source}",
        )
    if key_type == "int" or (key_type is None and dtype.is_integer()):
        if dtype.is_integer():
            return col.cast(pl.Int64, strict=False).alias("key")
        if dtype != pl.String:
            col = col.cast(pl.String)
        return col.cast(pl.Int64, strict=False).alias("key")
    if dtype == pl.String:
        return col.alias("key")
    return col.cast(pl.String).alias("key")


def _first_error_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
