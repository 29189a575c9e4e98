"""Aggregations on the local engine: group keys over several columns, contribution bounding per
group, and clamped fixed-point sums, counts and trees per group
(:class:`~privhist.core.requests.GroupAggregates`), and the range of a column's values
(:class:`~privhist.core.requests.ValueRange`).

Bounding (user-level data): each user keeps a uniformly random subset of at most ``k`` of its
groups (the ``k`` of smallest pseudorandom priority of the (user, group) pair, under the secret
of :mod:`privhist.engines.priorities`), and in each kept group a uniformly random subset of at
most ``c`` of its records (the ``c`` of smallest priority of (user, record), a record named by
:func:`~privhist.engines.priorities.record_codes` from its group, its fixed-point values and its
rank among the user's identical records, which are interchangeable). The secret is drawn from the
release's source only when some user is bounded, as every count of this package does; the choices
depend on the records and the secret only, not on their order or partitioning, so every engine makes
the same ones.

Groups of several columns are carried through the local engine as integer codes
(:class:`GroupCoder`: the columns' codes in mixed radix), not as a key text per record; the text
is written once per group, for the priorities and for the output, so the choices and the table
are those the key texts give.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import polars as pl

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.groups import SEPARATOR
from privhist.core.random import RandomSource
from privhist.core.requests import (
    Fields,
    GroupAggregates,
    GroupTable,
    Reading,
    ValueRange,
    ValueSpec,
)
from privhist.core.sparse import SparseCounts
from privhist.engines.local.counting import count_user_codes
from privhist.engines.priorities import (
    LazyPriorities,
    PairPriorities,
    column_codes,
    group_codes,
    record_codes,
)

#: how an aggregation reads a column, judged from its type alone (:func:`column_kinds`): values
#: that are numbers; text cells parsed one by one (CSV, TSV and NDJSON files); a type that holds
#: no values (all null); a column that is not scalar; any other scalar type (text, categories,
#: booleans, dates), which is not a type of numbers
KINDS: Final[tuple[str, ...]] = ("number", "cells", "empty", "nested", "other")


def dtype_kind(dtype: pl.DataType) -> str:
    """The kind (:data:`KINDS`) of a table's column of type ``dtype``: integers, floats and
    decimals are numbers, ``Null`` holds no values, lists, structs, arrays and objects are not
    scalar, and every other type is ``"other"``: :func:`parsed` reads none of a boolean's,
    date's or duration's values as a number, and a text or category column is text, not
    numbers, whatever its cells hold (the caller casts numbers written as text)."""
    if dtype.is_numeric():
        return "number"
    if dtype == pl.Null:
        return "empty"
    if dtype.is_nested() or dtype == pl.Object:
        return "nested"
    return "other"


def column_kinds(
    source: Any, reading: Reading, function: str, wanted: Sequence[str] = ()
) -> dict[str, tuple[str, str]] | None:
    """Each column of ``source`` with its kind (:data:`KINDS`) and its type's name, as the local
    engine reads it, from the schema alone: no record is read.

    A Polars, pandas or pyarrow table: its types; a pandas column of Python objects (or of an
    extension type) among ``wanted`` by the type Polars gives it, as the engine converts it
    (such a column's type is in its values, which the conversion looks at in memory; the other
    columns of objects are ``"cells"``). A file: a Parquet file's schema; the header (or the
    given ``columns``) of a CSV or TSV file, and the fields of an NDJSON file's first records,
    every one ``"cells"`` (text read one cell at a time). None when the columns cannot be
    listed so (a text or FIMI file, a file Polars cannot open this way): the engine's read then
    reports what is wrong.

    Raises:
        InputDataError: ``source`` is a path that does not exist, a directory, or an empty or
            unreadable file (:func:`privhist.io.readers.check_file`).
    """
    if isinstance(source, str | os.PathLike):
        return _file_kinds(Path(source), reading, function)
    if isinstance(source, pl.DataFrame | pl.LazyFrame):
        try:
            schema = source.lazy().collect_schema()
        except pl.exceptions.PolarsError:
            return None
        return {c: (dtype_kind(d), str(d)) for c, d in schema.items()}
    module = type(source).__module__
    if module.startswith("pyarrow") and hasattr(source, "slice"):
        try:  # the types Polars gives the table, from its schema (no row)
            empty = pl.from_arrow(source.slice(0, 0))
        except (TypeError, ValueError, pl.exceptions.PolarsError):
            return None
        assert isinstance(empty, pl.DataFrame)
        return {c: (dtype_kind(d), str(d)) for c, d in empty.schema.items()}
    if module.startswith("pandas") and type(source).__name__ == "DataFrame":
        return {str(c): _pandas_kind(source[c], str(c) in wanted) for c in source.columns}
    return None


def _pandas_kind(series: Any, wanted: bool) -> tuple[str, str]:
    """A pandas column's kind (:func:`column_kinds`): by its NumPy kind for numbers, booleans and
    dates; a column of Python objects (or of an extension type) by the type Polars gives it when
    ``wanted``, as the engine converts it (a column of objects by the values it holds; one of
    nulls holds no values), else ``"cells"``."""
    dtype = series.dtype
    kind = getattr(dtype, "kind", "O")
    if kind in "iuf":
        return "number", str(dtype)
    if kind in "bcmM":
        return "other", str(dtype)
    if not wanted:
        return "cells", str(dtype)
    try:
        converted = pl.Series(pl.from_pandas(series))
    except (TypeError, ValueError, ImportError, pl.exceptions.PolarsError):
        return "cells", str(dtype)  # mixed values: the engine's conversion says what is wrong
    if converted.null_count() == converted.len():
        return "empty", str(dtype)
    return dtype_kind(converted.dtype), f"{dtype} ({converted.dtype})"


def _file_kinds(p: Path, reading: Reading, function: str) -> dict[str, tuple[str, str]] | None:
    from privhist.io.readers import SCHEMA_ROWS, FileFormat, check_file, separator_of

    spec = FileFormat(reading.format, reading.columns, reading.separator).resolve(p, function)
    check_file(p, function)
    try:
        if spec.name == "parquet":
            schema = pl.read_parquet_schema(p)
            return {c: (dtype_kind(d), str(d)) for c, d in schema.items()}
        if spec.name in ("csv", "tsv"):
            if spec.columns is not None:
                names = list(spec.columns)
            else:
                sep = separator_of(p, spec)
                lf = pl.scan_csv(p, separator=sep, infer_schema=False)
                names = lf.collect_schema().names()
        elif spec.name == "ndjson":
            lf = pl.scan_ndjson(p, infer_schema_length=SCHEMA_ROWS)
            names = lf.collect_schema().names()
        else:
            return None
    except (pl.exceptions.PolarsError, OSError, InputDataError):
        return None  # the engine's read says what is wrong
    return {c: ("cells", "text") for c in names}


def group_frame(
    source: Any,
    fields: Fields,
    values: Sequence[str],
    function: str,
    read: Any,
    collect: Any = None,
) -> tuple[pl.LazyFrame, tuple[str, ...], GroupCoder | None]:
    """The records as a lazy table with ``key`` (the group: one column as it is, several as one
    text key, :mod:`privhist.core.groups`), ``user`` (user-level data) and the raw value columns
    ``v0, v1, ...``; the type of each group column; and, when ``collect`` is given and the groups
    span several columns whose codes fit (:func:`group_coder`), the :class:`GroupCoder` whose
    integer codes ``key`` then holds instead of the text. ``read(columns)`` gives the source's
    columns (a file scan or a table)."""
    by = fields.by or (fields.key_column,)
    user = str(fields.user) if fields.user_level else None
    wanted = [*by, *([user] if user is not None else []), *values]
    lf: pl.LazyFrame = read(wanted)
    schema = lf.collect_schema()
    types = _group_types(by, schema, function)
    coder = group_coder(lf, by, types, collect) if collect is not None and len(by) > 1 else None
    key = coder.expr() if coder is not None else _group_key(by, [schema[c] for c in by], types)
    exprs = [key.alias("key")]
    if user is not None:
        exprs.append(_user_id(user, schema[user]).alias("user"))
    exprs += [pl.col(c).alias(f"v{i}") for i, c in enumerate(values)]
    return lf.select(exprs), types, coder


def group_tallies(fields: Fields, function: str, read: Any) -> pl.LazyFrame:
    """The records as a lazy table of tallies: one row per distinct combination of the user
    (user-level data) and the group columns' values, with columns ``key`` (the group, as in
    :func:`group_frame`), ``user`` and ``n`` (its number of records, ``Int64``).

    The records are grouped before any key text is written, so the text is built once per row
    of the tally, not once per record. Integer, text and boolean columns are grouped by their
    values, which are equal exactly when their texts are; a column of any other type (floats,
    where ``-0.0`` and ``0.0`` group together but print differently, dates, decimals) is grouped
    by its text. Either way the key is a one-to-one function of a row's non-null values
    (:mod:`privhist.core.groups`), so the rows with a non-null key are exactly the distinct
    (user, key) pairs (distinct keys, record-level) with their record counts; rows with a null
    key or user stand for the records that carry one. ``read(columns)`` gives the source's
    columns."""
    by = fields.by or (fields.key_column,)
    user = str(fields.user) if fields.user_level else None
    lf: pl.LazyFrame = read([*by, *([user] if user is not None else [])])
    schema = lf.collect_schema()
    types = _group_types(by, schema, function)
    dtypes = [schema[c] for c in by]
    names = [f"g{i}" for i in range(len(by))]
    columns = [
        (pl.col(c) if _groups_by_value(d) else pl.col(c).cast(pl.String)).alias(g)
        for c, d, g in zip(by, dtypes, names, strict=True)
    ]
    keys = names
    if user is not None:
        columns.insert(0, _user_id(user, schema[user]).alias("user"))
        keys = ["user", *names]
    tally = lf.select(columns).group_by(keys).len("n")
    out = [_group_key(names, dtypes, types).alias("key")]
    if user is not None:
        out.append(pl.col("user"))
    return tally.select(*out, pl.col("n").cast(pl.Int64))


#: composite groups are coded as integers while the product of their columns' code ranges is at
#: most this (beyond it their key text is written per record, as before)
MAX_GROUP_CODES: Final[int] = 1 << 22


@dataclass(frozen=True)
class GroupCoder:
    """Integer codes of the groups of several columns, one per record, before any key text is
    written: the columns' codes in mixed radix (an integer column's value minus its smallest, a
    column of any other type the rank of its text among the column's distinct texts), null when
    any part is null. Equal codes are equal keys of :func:`group_frame` and the reverse;
    :meth:`keys` writes the key text of codes (built once per distinct code)."""

    by: tuple[str, ...]
    types: tuple[str, ...]
    lows: tuple[int, ...]  # an integer column's smallest value (0 for the others)
    texts: tuple[pl.Series | None, ...]  # the sorted distinct texts of a non-integer column
    radices: tuple[int, ...]

    @property
    def width(self) -> int:
        """One more than the largest code."""
        return math.prod(self.radices)

    def expr(self) -> pl.Expr:
        """Each record's code (``Int64``)."""
        code: pl.Expr | None = None
        for c, t, lo, texts, r in zip(
            self.by, self.types, self.lows, self.texts, self.radices, strict=True
        ):
            if t == "int":
                digit = pl.col(c).cast(pl.Int64) - lo
            else:
                assert texts is not None
                digit = pl.col(c).cast(pl.String).cast(pl.Enum(texts)).to_physical()
            digit = digit.cast(pl.Int64)
            code = digit if code is None else code * r + digit
        assert code is not None
        return code

    def keys(self, codes: npt.NDArray[np.int64]) -> pl.Series:
        """The key text (:func:`group_frame`'s ``key``) of each code."""
        rest = np.asarray(codes, dtype=np.int64).copy()
        parts: list[pl.Series] = []
        for i in reversed(range(len(self.by))):
            digit = rest % self.radices[i]
            rest //= self.radices[i]
            texts = self.texts[i]
            if texts is None:
                parts.append(pl.Series(f"g{i}", digit + self.lows[i], dtype=pl.Int64))
            else:
                parts.append(texts.gather(digit).alias(f"g{i}"))
        frame = pl.DataFrame(parts[::-1])
        names = [f"g{i}" for i in range(len(self.by))]
        dtypes: list[pl.DataType] = [pl.Int64() if t == "int" else pl.String() for t in self.types]
        return frame.select(_group_key(names, dtypes, self.types).alias("key")).to_series()

    def key_codes(
        self, prio: LazyPriorities | PairPriorities
    ) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]:
        """A function from group codes to the codes the priority function gives their key texts
        (:func:`~privhist.engines.priorities.column_codes`), each text hashed once: the bounded
        pairs get the priorities their key texts would, as in every other engine."""
        known = np.zeros(self.width, dtype=np.bool_)
        cache = np.zeros(self.width, dtype=np.int64)

        def of(codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
            missing = np.unique(codes[~known[codes]])
            if missing.size:  # threads may code the same texts: they write equal values
                cache[missing] = column_codes(prio, self.keys(missing))
                known[missing] = True
            out: npt.NDArray[np.int64] = cache[codes]
            return out

        return of

    def mapped(self, codes: pl.Series, fn: Callable[[pl.Series], npt.ArrayLike]) -> Any:
        """``fn`` of the key texts of ``codes`` (no nulls), as a NumPy array, computed once per
        distinct code."""
        distinct = codes.unique()
        values = pl.Series(np.asarray(fn(self.keys(distinct.to_numpy()))))
        return codes.replace_strict(distinct, values, return_dtype=values.dtype).to_numpy()

    def written(self, rows: pl.DataFrame) -> pl.DataFrame:
        """``rows`` with their ``key`` codes written as key texts."""
        if rows.height == 0:
            return rows.with_columns(pl.col("key").cast(pl.String))
        distinct = rows["key"].unique()
        texts = self.keys(distinct.to_numpy())
        return rows.with_columns(
            pl.col("key").replace_strict(distinct, texts, return_dtype=pl.String)
        )


def group_coder(
    lf: pl.LazyFrame, by: Sequence[str], types: tuple[str, ...], collect: Any
) -> GroupCoder | None:
    """The :class:`GroupCoder` of ``lf``'s group columns ``by`` (one pass for the integer
    columns' ranges, one per text column for its distinct texts: each query's result is small,
    so the columns stream through it), or None when their codes would exceed
    :data:`MAX_GROUP_CODES`."""
    ranges = [
        e
        for i, (c, t) in enumerate(zip(by, types, strict=True))
        if t == "int"
        for e in (pl.col(c).min().alias(f"lo{i}"), pl.col(c).max().alias(f"hi{i}"))
    ]
    row = collect(lf.select(ranges)).row(0, named=True) if ranges else {}
    lows: list[int] = []
    texts: list[pl.Series | None] = []
    radices: list[int] = []
    for i, (c, t) in enumerate(zip(by, types, strict=True)):
        if t == "int":
            lo, hi = row[f"lo{i}"], row[f"hi{i}"]
            lows.append(0 if lo is None else int(lo))
            texts.append(None)
            radices.append(1 if lo is None else int(hi) - int(lo) + 1)
        else:
            distinct = collect(lf.select(pl.col(c).cast(pl.String).alias("v")).unique())["v"]
            values = distinct.drop_nulls().sort()
            lows.append(0)
            texts.append(values)
            radices.append(max(values.len(), 1))
        if math.prod(radices) > MAX_GROUP_CODES:
            return None
    return GroupCoder(tuple(by), types, tuple(lows), tuple(texts), tuple(radices))


def count_group_codes(
    fields: Fields,
    function: str,
    read: Any,
    k: int,
    c: int,
    rng: RandomSource,
    collect: Any,
    label: str,
) -> Counts | None:
    """User-level bounded counts per group of several columns, with integer users, through the
    integer code path of :func:`~privhist.engines.local.counting.count`: each record's (user,
    group code) sorted as one integer, the key text written once per group. The counts, the
    bounding and its priorities (of the key texts) are those of :func:`group_tallies` counted
    by :func:`~privhist.engines.local.counting.count_tallies`. None when the users are not
    integers or the codes too wide (the tallies then count)."""
    by = fields.by or (fields.key_column,)
    user = str(fields.user)
    lf: pl.LazyFrame = read([*by, user])
    schema = lf.collect_schema()
    if not schema[user].is_integer():
        return None
    types = _group_types(by, schema, function)
    coder = group_coder(lf, by, types, collect)
    if coder is None:
        return None
    coded = lf.select(_user_id(user, schema[user]).alias("user"), coder.expr().alias("key"))
    prio = LazyPriorities(rng)
    counts = count_user_codes(coded, k, c, prio, label, key_codes=coder.key_codes(prio))
    if counts is None:
        return None
    text = coder.keys(counts.keys).to_numpy().astype(object)
    order = np.argsort(text, kind="stable")
    units = counts.units[order] if counts.units is not None else None
    return Counts(text[order], counts.counts[order], units, counts.neighbouring, counts.info)


def _group_types(by: Sequence[str], schema: pl.Schema, function: str) -> tuple[str, ...]:
    """The type of each group column (``"int"`` or ``"str"``), refusing nested columns."""
    for c in by:
        if schema[c].is_nested():
            raise InputDataError(
                f"parameter 'by' of {function} must name scalar columns; got {c!r}"
            )
    return tuple("int" if schema[c].is_integer() else "str" for c in by)


def _group_key(
    columns: Sequence[str], dtypes: Sequence[pl.DataType], types: tuple[str, ...]
) -> pl.Expr:
    """The key of the group columns ``columns`` (of ``dtypes``): one column as its integer or
    text, several as one text key (null when any part is null)."""
    if len(columns) == 1:
        return pl.col(columns[0]).cast(pl.Int64 if types[0] == "int" else pl.String)
    parts = [_key_part(c, d) for c, d in zip(columns, dtypes, strict=True)]
    return pl.concat_str(parts, separator=SEPARATOR)  # null if any part is null


def _user_id(column: str, dtype: pl.DataType) -> pl.Expr:
    """A user column as the engines compare it: integers as ``Int64``, anything else as text."""
    return pl.col(column).cast(pl.Int64 if dtype.is_integer() else pl.String)


def _groups_by_value(dtype: pl.DataType) -> bool:
    """Whether a group column's values are equal exactly when their key texts are."""
    return dtype.is_integer() or dtype == pl.String or dtype == pl.Boolean


def _key_part(column: str, dtype: pl.DataType) -> pl.Expr:
    """A group column's values as the text of a key part (:mod:`privhist.core.groups`): each
    backslash doubled and each separator written ``\\s``. Numbers, booleans and dates print
    neither, and a text column in which neither occurs needs no escape (the test is one scan)."""
    raw = pl.col(column).cast(pl.String)
    if dtype.is_numeric() or dtype.is_temporal() or dtype == pl.Boolean:
        return raw
    escaped = raw.str.replace_all("\\", "\\\\", literal=True).str.replace_all(
        SEPARATOR, "\\s", literal=True
    )
    needed = (
        raw.str.contains("\\", literal=True) | raw.str.contains(SEPARATOR, literal=True)
    ).any()
    return pl.when(needed).then(escaped).otherwise(raw)


def parsed(column: pl.Expr, dtype: pl.DataType | None = None) -> pl.Expr:
    """A value column's cells as numbers: each read as text and parsed on its own (null when
    empty, not a number, or not finite). An integer column (``dtype``) is cast directly: its
    text parsed and the integer converted are both the nearest double, so they are equal."""
    if dtype is not None and dtype.is_integer():
        return column.cast(pl.Float64)
    x = column.cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    return pl.when(x.is_finite()).then(x)


def with_units(
    df: pl.DataFrame, specs: Sequence[ValueSpec], columns: Sequence[str]
) -> pl.DataFrame:
    """``df`` (with parsed value columns ``x0, x1, ...`` for ``columns``) with each spec's clamped
    fixed-point units ``s0, s1, ...``: ``floor(x / resolution + 1/2)`` computed by NumPy's true
    IEEE division (every engine converts with this function, so all agree to the unit; Polars'
    division by a constant multiplies by its reciprocal, which can differ by one unit at a half).
    """
    index = {c: i for i, c in enumerate(columns)}
    added: list[pl.Series] = []
    done: dict[tuple[str, float, int, int], pl.Series] = {}  # specs of equal units share them
    for j, spec in enumerate(specs):
        same = (spec.column, spec.resolution, spec.low, spec.high)
        if same in done:
            added.append(done[same].alias(f"s{j}"))
            continue
        x = df[f"x{index[spec.column]}"].to_numpy()  # float64, null as NaN
        invalid = np.isnan(x)
        v = np.where(invalid, 0.0, x)  # then in place: floor(v / resolution + 1/2), clamped
        np.divide(v, spec.resolution, out=v)
        v += 0.5
        np.floor(v, out=v)
        np.clip(v, spec.low, spec.high, out=v)
        units = pl.Series(f"s{j}", v.astype(np.int64), dtype=pl.Int64)
        if invalid.any():
            units = units.scatter(np.flatnonzero(invalid), None)
        done[same] = units
        added.append(units)
    return df.with_columns(added).drop([f"x{i}" for i in range(len(columns))])


#: aggregates of more records than this are answered in several passes over disjoint sets of
#: users (user-level data, by a hash of the user id) or of records, so memory holds at most this
#: many records at once, over the passes that run together (about 250 bytes a record at the
#: peak of the bounding)
ROWS_PER_AGGREGATE_PASS: Final[int] = 8_000_000

#: tables of at least this many records are aggregated in passes on several threads at once
#: (the NumPy steps of the bounding run on one core each); smaller ones in one pass
CONCURRENT_AGGREGATE_RECORDS: Final[int] = 1 << 21

#: the seed of the hash that assigns users to passes (it decides only which pass reads a user)
_PASS_SEED: Final[int] = 0x27A66


def aggregate_passes(lf: pl.LazyFrame, collect: Any, threads: int = 1) -> int:
    """How many passes :func:`aggregates` takes over ``lf`` when ``threads`` of them run at
    once: one per :data:`ROWS_PER_AGGREGATE_PASS` records, times ``threads`` from
    :data:`CONCURRENT_AGGREGATE_RECORDS` records on (a Parquet file's count is in its
    metadata). The passes running together hold at most ``ROWS_PER_AGGREGATE_PASS`` records.
    """
    rows = int(collect(lf.select(pl.len())).item())
    passes = max(1, -(-rows // ROWS_PER_AGGREGATE_PASS))
    return passes * threads if rows >= CONCURRENT_AGGREGATE_RECORDS else passes


def aggregates(
    lf: pl.LazyFrame,
    types: tuple[str, ...],
    request: GroupAggregates,
    rng: RandomSource,
    collect: Any,
    coder: GroupCoder | None = None,
    passes: int = 1,
    threads: int = 1,
) -> GroupTable:
    """Answer ``request`` from :func:`group_frame`'s table (see the module notes); ``coder``:
    the one whose codes the table's ``key`` holds, if any.

    With ``passes > 1`` the table is read once per pass, each pass keeping a disjoint set of
    users (user-level: by a hash of the user id, so each user's records are all in one pass) or
    of records, and its long rows (:func:`partial_rows`) and facts are added up; ``threads``
    passes run at once (``collect`` must then be safe to call from several threads). Each
    user's bounding depends only on their own records and the one secret of ``rng`` (drawn
    once, under a lock, by :class:`~privhist.engines.priorities.LazyPriorities`), so the table
    is the one a single pass gives, draws included, in any order of the passes."""
    specs = request.values
    columns = sorted({s.column for s in specs})
    index = {c: i for i, c in enumerate(columns)}
    user_level = request.fields.user_level
    exprs = [pl.col("key")] + ([pl.col("user")] if user_level else [])
    schema = lf.collect_schema()
    exprs += [
        parsed(pl.col(f"v{index[c]}"), schema[f"v{index[c]}"]).alias(f"x{index[c]}")
        for c in columns
    ]
    query = lf.select(exprs)
    groups = None
    if request.groups is not None:
        groups = _group_array(request.groups, pl.String() if coder else schema["key"])
    prio = LazyPriorities(rng)
    facts: dict[str, Any] = {}
    parts: list[pl.DataFrame] = []

    def one(part: int) -> tuple[pl.DataFrame, dict[str, int]]:
        read = query
        if passes > 1:
            if user_level:
                read = query.filter(pl.col("user").hash(seed=_PASS_SEED) % passes == part)
            else:
                read = query.with_row_index("_row").filter(pl.col("_row") % passes == part)
                read = read.drop("_row")
        df: pl.DataFrame = with_units(collect(read), specs, columns)
        return _one_pass(df, request, groups, prio, coder)

    if threads > 1 and passes > 1:
        # the NumPy steps release the GIL: 10^7 records in four passes, two at a time, took
        # 3.9-4.1 s of wall time where two passes one after the other took 4.5-5.1 s, for the
        # same CPU time
        with ThreadPoolExecutor(max_workers=min(threads, passes)) as pool:
            results = list(pool.map(one, range(passes)))
    else:
        results = [one(part) for part in range(passes)]
    for rows, found in results:
        parts.append(rows)
        for name, value in found.items():
            if isinstance(value, dict):  # a number per value column
                into = facts.setdefault(name, {})
                for column, n in value.items():
                    into[column] = into.get(column, 0) + n
            else:
                facts[name] = facts.get(name, 0) + value
    if passes > 1:
        facts["passes"] = passes
    rows = parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical_relaxed")
    if coder is not None:
        rows = coder.written(rows)
    return table_from_rows(rows, specs, types, groups, facts)


def _one_pass(
    df: pl.DataFrame,
    request: GroupAggregates,
    groups: npt.NDArray[Any] | None,
    prio: LazyPriorities,
    coder: GroupCoder | None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The long rows of one pass's records (:func:`aggregates`), and its facts (numbers of
    records, all additive over passes; ``values_not_numbers``: per value column, the records
    of the groups aggregated, before bounding, whose value is empty or not a finite number,
    which :func:`partial_rows` leaves out of the column's aggregates)."""
    specs = request.values
    user_level = request.fields.user_level
    facts: dict[str, Any] = {"records": df.height, "null_groups": int(df["key"].null_count())}
    keep = pl.col("key").is_not_null()
    if user_level:
        facts["null_users"] = int(df["user"].null_count())
        keep = keep & pl.col("user").is_not_null()
    if facts["null_groups"] or facts.get("null_users"):  # a filter copies every column
        df = df.filter(keep)
    if groups is not None:
        if coder is None:
            wanted = pl.Series(groups.tolist(), dtype=df["key"].dtype)
        else:  # the codes present whose key texts are among the groups
            present = df["key"].drop_nulls().unique()
            texts = coder.keys(present.to_numpy())
            wanted = present.filter(
                texts.is_in(pl.Series(groups.tolist(), dtype=pl.String).implode())
            )
        inside = df["key"].is_in(wanted.implode())
        facts["records_outside_groups"] = int((~inside).sum())
        if facts["records_outside_groups"]:
            df = df.filter(inside)
    # the units of each value column (the specs of one column agree on its nulls)
    first: dict[str, int] = {}
    for j, spec in enumerate(specs):
        first.setdefault(spec.column, j)
    facts["values_not_numbers"] = {c: int(df[f"s{j}"].null_count()) for c, j in first.items()}
    users = None
    if user_level:
        df, bounded, users = bound(df, request, len(specs), prio, coder)
        facts.update(bounded)
    facts["records_kept"] = df.height
    return partial_rows(df, specs, user_level, users), facts


def _group_array(groups: Sequence[Any], dtype: pl.DataType) -> npt.NDArray[Any]:
    if dtype.is_integer():
        return np.array(sorted({int(g) for g in groups}), dtype=np.int64)
    return np.array(sorted({str(g) for g in groups}), dtype=object)


def bound(
    df: pl.DataFrame,
    request: GroupAggregates,
    n_specs: int,
    prio: LazyPriorities | PairPriorities,
    coder: GroupCoder | None = None,
) -> tuple[pl.DataFrame, dict[str, int], pl.DataFrame]:
    """The records of each user bounded to ``k`` groups and ``c`` records per group (module
    notes), with its facts (``users``, the users kept: each keeps at least one record;
    ``users_bounded`` and ``pairs_bounded``) and the users of each group (a table of ``key`` and
    ``users``: the kept pairs of each group, for :func:`partial_rows`); ``prio`` gives the
    priorities of (user, name) pairs (:class:`~privhist.engines.priorities.PairPriorities`);
    ``coder``, the one whose codes ``key`` holds: groups are then named by their key texts.

    In NumPy over integer codes: each record's (user, group) pair is a code, one sort groups the
    pairs; a user holding more than ``k`` groups keeps the ``k`` of smallest pair priority; a kept
    pair with more than ``c`` records keeps the ``c`` smallest by (priority, values with nulls
    last, rank among identical records), the order a sort of those columns gives. Identical
    records (same user, group and values) are interchangeable, so which of them takes which rank
    changes no kept table; the sorts need not be stable. The records kept are returned in their
    input order."""
    k = request.max_partitions or 1
    c = request.max_per_partition or 1
    facts = {"users": 0, "users_bounded": 0, "pairs_bounded": 0}

    def key_codes(keys: pl.Series) -> Any:
        if coder is None:
            return column_codes(prio, keys)
        return coder.mapped(keys, lambda texts: column_codes(prio, texts))

    def named_groups(keys: pl.Series) -> Any:
        return group_codes(keys) if coder is None else coder.mapped(keys, group_codes)

    n = df.height
    if n == 0:
        return df, facts, _group_users(df["key"], np.zeros(0, np.int64))
    ucode, n_users = _codes(df["user"])
    kcode, n_keys = _codes(df["key"])
    if n_users * n_keys >= 1 << 62:  # keep the pair code in int64: make the codes dense
        ucode, n_users = _dense(ucode)
        kcode, n_keys = _dense(kcode)
    pair_row = ucode
    pair_row *= n_keys
    pair_row += kcode
    del kcode
    order = _argsort(pair_row)
    sorted_pairs = pair_row[order]
    start = _run_starts(sorted_pairs)
    starts = np.flatnonzero(start)
    pairs = sorted_pairs[starts]  # the distinct pairs, sorted
    del sorted_pairs
    first = order[starts]  # a record of each (all of a pair's records share user and group)
    count = np.diff(np.append(starts, n))
    pair_of = np.empty(n, dtype=np.int64)
    index = np.cumsum(start, dtype=np.int64)
    index -= 1
    pair_of[order] = index
    del order, start, index
    pair_user = pairs // n_keys
    degree = np.bincount(pair_user, minlength=n_users)
    facts["users"] = int(np.count_nonzero(degree))  # a hash of the ids took 30-60 ms a pass
    keep_pair = np.ones(pairs.shape[0], dtype=bool)
    over = np.flatnonzero(degree[pair_user] > k)
    if over.size:
        facts["users_bounded"] = int((degree > k).sum())
        rows = pl.Series(first[over])
        p = prio(column_codes(prio, df["user"].gather(rows)), key_codes(df["key"].gather(rows)))
        # the k of smallest priority per user (a tie of two pairs' 64-bit priorities, about
        # 2**-64 a pair, goes to the pair of smaller code: the stable sort keeps their order)
        ranks = _ranks(pair_user[over], np.lexsort((p, pair_user[over])))
        keep_pair[over[ranks >= k]] = False
    keep = keep_pair[pair_of]
    full = keep_pair & (count > c)
    if full.any():
        facts["pairs_bounded"] = int(full.sum())
        big = np.flatnonzero(full[pair_of])
        rows = pl.Series(big)
        cols = [df[f"s{j}"].gather(rows) for j in range(n_specs)]
        fills = [x.fill_null(0).to_numpy().astype(np.int64) for x in cols]
        nulls = [x.is_null().to_numpy() for x in cols]
        bp = pair_row[big]
        # the rank among identical records (same pair and values)
        record = _record_key(bp, fills, nulls)
        if record is not None:
            ident = _argsort(record)
            same = ~_run_starts(record[ident])
        else:
            ident = np.lexsort((*_value_keys(fills, nulls), bp))
            same = ~_run_starts(bp[ident])
            for f, z in zip(fills, nulls, strict=True):
                same[1:] &= (f[ident][1:] == f[ident][:-1]) & (z[ident][1:] == z[ident][:-1])
        idx = np.arange(big.size, dtype=np.int64)
        rank_k = np.empty(big.size, dtype=np.int64)
        rank_k[ident] = idx - np.maximum.accumulate(np.where(same, 0, idx))
        named = record_codes(
            named_groups(df["key"].gather(rows)), list(zip(fills, nulls, strict=True)), rank_k
        )
        p = prio(column_codes(prio, df["user"].gather(rows)), named.view(np.int64))
        pair = pair_of[big]
        order = _by_pair_then_priority(pair, pairs.shape[0], p, rank_k, fills, nulls)
        # sorted by pair, the over-full pairs' records are blocks of their counts in pair order:
        # a record's rank in its pair is its position less its block's start
        sizes = count[full]
        starts_at = np.cumsum(sizes) - sizes
        position = np.arange(big.size, dtype=np.int64)
        position -= np.repeat(starts_at, sizes)
        keep[big[order[position >= c]]] = False
    # each group's users are its kept pairs (every kept pair keeps a record): a record of each
    # such pair names the group
    kept = np.flatnonzero(keep_pair)
    pair_key = pairs[kept] - pair_user[kept] * n_keys
    per_key = np.bincount(pair_key, minlength=n_keys)
    groups = np.flatnonzero(per_key != 0)
    one_of = np.empty(n_keys, dtype=np.int64)
    one_of[pair_key] = first[kept]  # a record of some kept pair of each group
    names = df["key"].gather(pl.Series(one_of[groups]))
    return df.filter(pl.Series(keep)), facts, _group_users(names, per_key[groups])


def _group_users(keys: pl.Series, users: npt.NDArray[np.int64]) -> pl.DataFrame:
    return pl.DataFrame([keys.alias("key"), pl.Series("users", users, dtype=pl.Int64)])


def _argsort(x: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """An order sorting ``x`` (not stable: Polars' parallel sort, several times NumPy's), as
    Polars' unsigned row indices."""
    return pl.Series(x).arg_sort().to_numpy()


def _dense(codes: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], int]:
    _, dense = np.unique(codes, return_inverse=True)
    out = dense.reshape(-1).astype(np.int64)
    return out, int(out.max()) + 1


def _record_key(
    bp: npt.NDArray[np.int64],
    fills: list[npt.NDArray[np.int64]],
    nulls: list[npt.NDArray[np.bool_]],
) -> npt.NDArray[np.int64] | None:
    """One int64 per record, equal exactly when the pair and every value (with its null flag)
    are: the pair code and each column's offset value (0 for null) in mixed radix; None when
    that does not fit in 63 bits. Columns equal to an earlier one add nothing."""
    key = bp.copy()
    width = int(bp.max()) + 1
    seen: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]] = []
    for f, z in zip(fills, nulls, strict=True):
        if any(np.array_equal(f, g) and np.array_equal(z, y) for g, y in seen):
            continue
        seen.append((f, z))
        lo, hi = int(f.min()), int(f.max())
        span = hi - lo + 2
        width *= span
        if width >= 1 << 63:
            return None
        key = key * span + np.where(z, 0, f - lo + 1)
    return key


def _by_pair_then_priority(
    pair: npt.NDArray[np.int64],
    n_pairs: int,
    p: npt.NDArray[np.uint64],
    rank_k: npt.NDArray[np.int64],
    fills: list[npt.NDArray[np.int64]],
    nulls: list[npt.NDArray[np.bool_]],
) -> npt.NDArray[np.int64]:
    """The order of records by (pair, priority, values with nulls last, rank among identical
    records); ``pair`` is the pair's index among the ``n_pairs`` sorted pair codes (it orders
    the pairs as their codes do).

    Two records of a pair tie on their 64-bit priority with probability about 2**-64, so one sort
    of the pair index joined to the priority's leading bits in one int64 almost always decides;
    a tie of those leading bits falls back to the sort by (pair, priority), and a tie of whole
    priorities to the full sort."""
    shift = 63 - max(n_pairs - 1, 1).bit_length()  # the bits left for the priority's prefix
    joined = (pair.astype(np.uint64) << np.uint64(shift)) | (p >> np.uint64(64 - shift))
    order = _argsort(joined.view(np.int64))
    sj = joined[order]
    if not (sj[1:] == sj[:-1]).any():
        return order
    order = (
        pl.DataFrame({"pair": pair, "p": p})
        .select(pl.arg_sort_by("pair", "p"))
        .to_series()
        .to_numpy()
        .astype(np.int64)
    )
    sb, sp = pair[order], p[order]
    if not ((sb[1:] == sb[:-1]) & (sp[1:] == sp[:-1])).any():
        return order
    return np.lexsort((rank_k, *_value_keys(fills, nulls), p, pair))


def _value_keys(
    fills: list[npt.NDArray[np.int64]], nulls: list[npt.NDArray[np.bool_]]
) -> list[npt.NDArray[Any]]:
    """The ``np.lexsort`` keys ordering records by their values, the first column first and
    each with nulls last (its null flag before its value), least significant key first."""
    keys: list[npt.NDArray[Any]] = []
    for f, z in zip(reversed(fills), reversed(nulls), strict=True):
        keys += [f, z]
    return keys


def _codes(series: pl.Series) -> tuple[npt.NDArray[np.int64], int]:
    """Integer codes of a column's values (equal values, equal codes; from 0, not necessarily
    dense) and one more than the largest: integers as their offset from the smallest when their
    range is at most a few times their number, else their dense rank; text by a categorical."""
    if series.dtype.is_integer():
        lo, hi = series.min(), series.max()
        if isinstance(lo, int) and isinstance(hi, int):
            if -(1 << 62) <= lo <= hi < 1 << 62 and hi - lo < 4 * series.len() + 1024:
                codes = series.to_numpy().astype(np.int64)  # a copy: changed in place
                codes -= lo
                return codes, hi - lo + 1
        codes = series.rank("dense").to_numpy().astype(np.int64) - 1
    else:
        codes = series.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    return codes, int(codes.max()) + 1


def _run_starts(ids: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """Where each run of equal values of ``ids`` starts."""
    start = np.empty(ids.shape[0], dtype=bool)
    if ids.shape[0]:
        start[0] = True
        np.not_equal(ids[1:], ids[:-1], out=start[1:])
    return start


def _ranks(ids: npt.NDArray[Any], order: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Each entry's rank within its id in the given ``order`` (a sort by id first)."""
    sorted_ids = ids[order]
    idx = np.arange(sorted_ids.shape[0], dtype=np.int64)
    first = np.maximum.accumulate(np.where(_run_starts(sorted_ids), idx, 0))
    out = np.empty(sorted_ids.shape[0], dtype=np.int64)
    out[order] = idx - first
    return out


def _keys(series: pl.Series) -> npt.NDArray[Any]:
    if series.dtype.is_integer():
        return series.to_numpy().astype(np.int64)
    return series.to_numpy().astype(object)


def partial_rows(
    df: pl.DataFrame,
    specs: Sequence[ValueSpec],
    user_level: bool,
    users: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The aggregates of bounded records in long form: one row ``(key, name, index, value)`` per
    group and aggregate (``records``, ``users``, and per spec ``j``: ``n{j}``, ``sum{j}``,
    ``sq{j}``, ``tree{j}`` with the node as ``index``). Rows of disjoint sets of users (a Spark
    partition of records shuffled by user) add up to the rows of their union. ``users``: each
    group's number of users when :func:`bound` has counted them (else they are counted here)."""
    parts: list[pl.LazyFrame] = []
    lf = df.lazy()
    key = pl.col("key")
    base = [pl.len().cast(pl.Int64).alias("records")]
    if users is None:
        base.append(
            (pl.col("user").n_unique() if user_level else pl.len()).cast(pl.Int64).alias("users")
        )
    for j, spec in enumerate(specs):
        v = pl.col(f"s{j}")
        base.append(v.count().cast(pl.Int64).alias(f"n{j}"))
        base.append(v.sum().cast(pl.Int64).alias(f"sum{j}"))
        if spec.squares:
            base.append(((v - spec.center) ** 2).sum().cast(pl.Int64).alias(f"sq{j}"))
    wide = lf.group_by(key).agg(base)
    if users is not None:  # a distinct count per group took 60-75 ms of 2*10^6 records
        later = [e.meta.output_name() for e in base[1:]]
        wide = wide.join(users.lazy(), on="key", how="left").select(
            "key", "records", "users", *later
        )
    names = [n for n in wide.collect_schema().names() if n != "key"]
    parts.append(
        wide.unpivot(index="key", on=names, variable_name="name", value_name="value")
        .with_columns(pl.lit(0, pl.Int64).alias("index"))
        .select("key", "name", "index", pl.col("value").cast(pl.Int64))
    )
    for j, spec in enumerate(specs):
        if spec.tree is None:
            continue
        levels, b = spec.tree
        v = pl.col(f"s{j}")
        leaves = b**levels
        # one pass over the records counts the leaves; each level above sums the (far fewer)
        # leaf counts of its nodes
        leaf_counts = (
            lf.filter(v.is_not_null())
            .group_by(key, (((v - spec.low) * leaves) // (spec.high - spec.low + 1)).alias("leaf"))
            .agg(pl.len().cast(pl.Int64).alias("value"))
            .collect()
            .lazy()
        )
        offset = 0
        for level in range(1, levels + 1):
            node = (offset + pl.col("leaf") // b ** (levels - level)).cast(pl.Int64)
            parts.append(
                leaf_counts.group_by("key", node.alias("index"))
                .agg(pl.col("value").sum())
                .select("key", pl.lit(f"tree{j}").alias("name"), "index", "value")
            )
            offset += b**level
    return pl.concat(parts, how="vertical_relaxed").collect()


def table_from_rows(
    rows: pl.DataFrame,
    specs: Sequence[ValueSpec],
    types: tuple[str, ...],
    groups: npt.NDArray[Any] | None,
    facts: dict[str, Any],
) -> GroupTable:
    """The :class:`GroupTable` of summed long rows (:func:`partial_rows`): every group present,
    or exactly ``groups`` (absent ones with zeros), in sorted order."""
    if groups is None:  # the distinct keys found once by hashing, then sorted (few)
        distinct = rows["key"].unique() if rows.height else None
        out_keys = np.unique(_keys(distinct)) if distinct is not None else np.zeros(0, object)
        if rows.height and rows["key"].dtype.is_integer():
            out_keys = out_keys.astype(np.int64)
    else:
        out_keys = groups
    g = int(out_keys.shape[0])
    summed = rows.group_by("key", "name", "index").agg(pl.col("value").sum())
    pos = _positions(out_keys, summed["key"]) if g else np.zeros(0, np.int64)
    names = summed["name"].to_numpy()
    index = summed["index"].to_numpy().astype(np.int64)
    value = summed["value"].to_numpy().astype(np.int64)

    def column(name: str, width: int = 0) -> npt.NDArray[np.int64]:
        mask = names == name
        out: npt.NDArray[np.int64] = np.zeros((g, width) if width else g, dtype=np.int64)
        if width:
            out[pos[mask], index[mask]] = value[mask]
        else:
            out[pos[mask]] = value[mask]
        return out

    values: dict[str, dict[str, Any]] = {}
    for j, spec in enumerate(specs):
        entry: dict[str, Any] = {"n": column(f"n{j}"), "sum": column(f"sum{j}")}
        if spec.squares:
            entry["squares"] = column(f"sq{j}")
        if spec.tree is not None:  # kept by its non-zero nodes: a group fills few of them
            mask = names == f"tree{j}"
            entry["tree"] = SparseCounts.from_cells(
                (g, spec.nodes), pos[mask], index[mask], value[mask]
            )
        values[spec.name] = entry
    return GroupTable(out_keys, column("records"), column("users"), values, types, facts)


def _positions(out_keys: npt.NDArray[Any], keys: pl.Series) -> npt.NDArray[np.int64]:
    """``np.searchsorted(out_keys, keys)`` with each distinct key searched once."""
    distinct = keys.unique()
    at = np.searchsorted(out_keys, _keys(distinct)).astype(np.int64)
    mapped = keys.replace_strict(distinct, pl.Series(at, dtype=pl.Int64), return_dtype=pl.Int64)
    return mapped.to_numpy().astype(np.int64)


def value_range(lf: pl.LazyFrame, request: ValueRange, collect: Any) -> tuple[Any, Any]:
    """Units per bucket of ``request.grid`` of their largest and of their smallest value (a
    unit: a user, or a record for record-level data)."""
    grid = np.asarray(request.grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or (np.diff(grid) <= 0).any():
        raise ValidationError("grid", "ValueRange", "increasing numbers", request.grid)
    x = pl.col("v0").cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    frame = lf.select(
        [
            *([pl.col("user")] if request.fields.user_level else []),
            pl.when(x.is_finite()).then(x).alias("x"),
        ]
    ).filter(pl.col("x").is_not_null())
    if request.fields.user_level:
        frame = (
            frame.filter(pl.col("user").is_not_null())
            .group_by("user")
            .agg(pl.col("x").max().alias("hi"), pl.col("x").min().alias("lo"))
        )
    else:
        frame = frame.select(pl.col("x").alias("hi"), pl.col("x").alias("lo"))
    df: pl.DataFrame = collect(frame)
    hi = np.searchsorted(grid, df["hi"].to_numpy(), side="left")
    lo = np.searchsorted(grid, df["lo"].to_numpy(), side="left")
    n = grid.size + 1
    return (
        np.bincount(hi, minlength=n).astype(np.int64),
        np.bincount(lo, minlength=n).astype(np.int64),
    )
