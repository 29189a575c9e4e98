"""Aggregations on Spark: :class:`~privhist.core.requests.GroupAggregates` and
:class:`~privhist.core.requests.ValueRange` over a Spark DataFrame.

The group key (one column, or several as one text key, :mod:`privhist.core.groups`), the user and
the clamped fixed-point values are computed by Spark expressions; the records are then shuffled by
user, and each partition is bounded and aggregated on the executor by the local engine's own
functions (:func:`privhist.engines.local.aggregate.bound` and
:func:`~privhist.engines.local.aggregate.partial_rows`) with the priorities' secret drawn on the
driver, so each user's choices are those of the local engine for the same secret. Per-partition
rows of disjoint users add up, and the driver sums them into the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from privhist.core.groups import SEPARATOR
from privhist.core.requests import GroupAggregates, GroupTable, ValueRange
from privhist.engines.priorities import PairPriorities

#: the schema of the partitions' long rows (a null key carries the partition's facts)
ROWS = "key {key}, name string, index long, value long"

#: the fact of the records whose value is empty or not a number, per value column: a
#: partition's row names it ``values_not_numbers:COLUMN``
NOT_NUMBERS = "values_not_numbers"


def group_columns(df: Any, by: Sequence[str], user: str | None, values: Sequence[str]) -> Any:
    """The records as ``key`` (one column as it is; several as one text key), ``user`` and the
    raw value columns ``v0, v1, ...``; and the group columns' types."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    schema = {f.name: f.dataType for f in df.schema.fields}
    types = tuple("int" if isinstance(schema[c], IntegralType) else "str" for c in by)
    if len(by) == 1:
        key = F.col(by[0]).cast("long" if types[0] == "int" else "string")
    else:
        parts = [
            F.regexp_replace(
                F.regexp_replace(F.col(c).cast("string"), r"\\", r"\\\\"), SEPARATOR, r"\\s"
            )
            for c in by
        ]
        anynull = F.lit(False)
        for c in by:
            anynull = anynull | F.col(c).isNull()
        key = F.when(~anynull, F.concat_ws(SEPARATOR, *parts))
    exprs = [key.alias("key")]
    if user is not None:
        u = F.col(user)
        exprs.append(
            u.cast("long" if isinstance(schema[user], IntegralType) else "string").alias("user")
        )
    exprs += [F.col(c).alias(f"v{i}") for i, c in enumerate(values)]
    return df.select(*exprs), types


def is_spark_frame(source: Any) -> bool:
    """Whether ``source`` is a Spark DataFrame (classic or Spark Connect), without importing
    Spark."""
    return type(source).__module__.startswith("pyspark") and type(source).__name__ == "DataFrame"


def column_kinds(df: Any) -> dict[str, tuple[str, str]]:
    """Each column of a Spark DataFrame with its kind
    (:data:`privhist.engines.local.aggregate.KINDS`) and its type's name, from its schema
    alone: numbers (integers, floats, decimals), a type of no values, arrays, maps and structs
    (not scalar), and every other type (text, booleans, dates), which is not a type of
    numbers."""
    from pyspark.sql.types import ArrayType, MapType, NullType, NumericType, StructType

    out: dict[str, tuple[str, str]] = {}
    for f in df.schema.fields:
        t = f.dataType
        if isinstance(t, NumericType):
            kind = "number"
        elif isinstance(t, NullType):
            kind = "empty"
        elif isinstance(t, ArrayType | MapType | StructType):
            kind = "nested"
        else:
            kind = "other"
        out[f.name] = (kind, t.simpleString())
    return out


def parsed(column: Any) -> Any:
    """A value column's cells as doubles: each read as text and parsed on its own (null when
    empty, not a number, or not finite), as the local engine parses them."""
    from pyspark.sql import functions as F

    x = F.trim(column.cast("string")).try_cast("double")
    finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))
    return F.when(finite, x)


def aggregate_rows(
    secret: bytes, request: GroupAggregates, key_is_int: bool
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function bounding and aggregating one partition of records shuffled by
    user (shipped with the secret and the request only)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import polars as pl
        import pyarrow as pa

        from privhist.engines.local.aggregate import bound, partial_rows, with_units

        parts = list(batches)
        if not parts:
            return
        frame = pl.from_arrow(pa.Table.from_batches(parts))
        assert isinstance(frame, pl.DataFrame)
        columns = sorted({s.column for s in request.values})
        facts = {"users_bounded": 0, "pairs_bounded": 0, "users": 0}
        for i, column in enumerate(columns):  # parsed: null when empty or not a number
            facts[f"{NOT_NUMBERS}:{column}"] = int(frame[f"x{i}"].null_count())
        frame = with_units(frame, request.values, columns)
        users = None
        if request.fields.user_level and frame.height:
            frame, bounded, users = bound(
                frame, request, len(request.values), PairPriorities(secret)
            )
            facts.update(bounded)
        rows = partial_rows(frame, request.values, request.fields.user_level, users)
        key_type = pl.Int64 if key_is_int else pl.String
        extra = pl.DataFrame(
            {
                "key": pl.Series([None] * len(facts), dtype=key_type),
                "name": list(facts),
                "index": [0] * len(facts),
                "value": list(facts.values()),
            },
            schema={"key": key_type, "name": pl.String, "index": pl.Int64, "value": pl.Int64},
        )
        out = pl.concat([rows.with_columns(pl.col("key").cast(key_type)), extra])
        yield from out.to_arrow().to_batches()

    return run


def collect_table(
    rows: Any,
    request: GroupAggregates,
    types: tuple[str, ...],
    facts: dict[str, Any],
) -> GroupTable:
    """The driver's :class:`GroupTable` from the summed long rows (the facts in null-key rows)."""
    import polars as pl

    from privhist.engines.local.aggregate import table_from_rows

    frame = pl.from_arrow(rows.toArrow())
    assert isinstance(frame, pl.DataFrame)
    fact_rows = frame.filter(pl.col("key").is_null())
    for name, value in zip(fact_rows["name"].to_list(), fact_rows["value"].to_list(), strict=True):
        fact, _, column = name.partition(":")
        if fact == NOT_NUMBERS:  # per value column, as the local engine's facts
            into = facts.setdefault(NOT_NUMBERS, {})
            into[column] = into.get(column, 0) + int(value)
        else:
            facts[name] = facts.get(name, 0) + int(value)
    data = frame.filter(pl.col("key").is_not_null())
    groups = None
    if request.groups is not None:
        if data["key"].dtype.is_integer() or types == ("int",):
            groups = np.array(sorted({int(g) for g in request.groups}), dtype=np.int64)
        else:
            groups = np.array(sorted({str(g) for g in request.groups}), dtype=object)
    return table_from_rows(data, request.values, types, groups, facts)


def value_range_counts(units: Any, grid: Sequence[float]) -> tuple[Any, Any]:
    """Units per bucket of ``grid`` of their largest (``hi``) and smallest (``lo``) values."""
    arrow = units.toArrow()
    g = np.asarray(grid, dtype=np.float64)
    hi = np.searchsorted(g, np.asarray(arrow.column("hi").to_numpy(zero_copy_only=False)), "left")
    lo = np.searchsorted(g, np.asarray(arrow.column("lo").to_numpy(zero_copy_only=False)), "left")
    n = g.size + 1
    return (
        np.bincount(hi, minlength=n).astype(np.int64),
        np.bincount(lo, minlength=n).astype(np.int64),
    )


def value_units(df: Any, request: ValueRange) -> Any:
    """Each unit's largest and smallest finite value (a unit: a user, or a record)."""
    from pyspark.sql import functions as F

    x = F.trim(F.col("v0").cast("string")).try_cast("double")
    finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))
    vals = df.select(
        *([F.col("user")] if request.fields.user_level else []), F.when(finite, x).alias("x")
    )
    vals = vals.filter(F.col("x").isNotNull())
    if request.fields.user_level:
        vals = vals.filter(F.col("user").isNotNull())
        return vals.groupBy("user").agg(F.max("x").alias("hi"), F.min("x").alias("lo"))
    return vals.select(F.col("x").alias("hi"), F.col("x").alias("lo"))
