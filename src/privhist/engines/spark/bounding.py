"""One-pass user-level counting on Spark: null accounting, contribution bounding and per-key
partial counts in a single ``mapInArrow`` over the records shuffled by user.

The records ``(key, user)`` are hash-partitioned by user (one shuffle of the raw records), so a
user's records all land in one partition; each partition is then read as one Arrow table by
:func:`partition_function`, which does on the executor what the local engine does per pass
(:mod:`privhist.engines.local.counting`):

1. counts the partition's records, null keys and null users (the null accounting: the same
   definitions as the local engine, a record with both null counts in both);
2. groups the rows with a key and a user into distinct ``(user, key)`` pairs with their record
   counts ``n``;
3. for each user holding more than ``k`` keys, computes the keyed priorities of its pairs
   (:class:`~privhist.engines.priorities.PairPriorities` under the secret drawn on the driver) and
   keeps the ``k`` pairs of smallest ``(priority, key)``: one stable sort of the bounded users'
   pairs, already in ``(user, key)`` order, by ``(user, priority)``;
4. sums ``min(n, c)`` and the number of kept pairs per key, listing every key seen (a key none of
   whose pairs is kept has units 0, so the distinct keys of the input are counted in the same
   pass).

It returns one row per key of the partition and one row of facts with a null key
(:data:`FACTS`). A ``groupBy(key)`` of these rows gives the per-key table and, in its null-key
row, the facts of the whole input: counting is one Spark job, one shuffle of the records and one
(small) shuffle of per-partition per-key rows.

Each user's choice depends only on its own pairs and the secret, so the kept pairs, and the
counts, are those of the local engine for the same secret whatever the partitioning (ties in
priority, which need two equal 64-bit codes, are broken by key order in both). A partition is held
in one Python worker's memory (about 16 bytes a record with integer ids): on a cluster, choose
``spark.sql.shuffle.partitions`` (or let adaptive execution coalesce) so that a partition holds a
few million records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import numpy as np

from privhist.engines.priorities import PairPriorities

#: the per-partition facts, summed over partitions in the null-key row of the per-key table
FACTS: Final[tuple[str, ...]] = ("records", "null_keys", "null_users", "users", "users_bounded")


def partition_schema(key_ddl: str) -> str:
    """The Spark schema (DDL) of :func:`partition_function`'s rows, for a key of ``key_ddl``
    (e.g. ``"key bigint"``)."""
    return ", ".join([key_ddl, "count long", "units long", *(f"{f} long" for f in FACTS)])


def partition_function(
    secret: bytes, k: int, c: int, key_is_int: bool
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function bounding and counting one partition of records shuffled by
    user (shipped with the secret, ``k``, ``c`` and the key type only)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        parts = list(batches)
        if not parts:
            return
        table = pa.Table.from_batches(parts)
        del parts
        yield from bound_table(table, PairPriorities(secret), k, c, key_is_int).to_batches()

    return run


def bound_table(table: Any, f: PairPriorities, k: int, c: int, key_is_int: bool) -> Any:
    """The per-key rows and the facts row of one partition (see the module notes), an Arrow
    table of :func:`partition_schema`'s columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    records = table.num_rows
    key_col, user_col = table.column("key"), table.column("user")
    null_keys, null_users = key_col.null_count, user_col.null_count
    if null_keys or null_users:
        valid = pc.and_(pc.is_valid(key_col), pc.is_valid(user_col))
        table = table.filter(valid)
        key_col, user_col = table.column("key"), table.column("user")
    out = None
    if key_is_int and pa.types.is_integer(user_col.type):
        out = _count_int_pairs(_int64_view(user_col), _int64_view(key_col), f, k, c)
    if out is None:
        out = _count_pairs(table, f, k, c)
    keys, counts, units, users, users_bounded = out
    key_type = pa.int64() if key_is_int else pa.string()
    m = len(keys)
    facts = (records, null_keys, null_users, users, users_bounded)
    integer = isinstance(keys, np.ndarray) and keys.dtype.kind == "i"  # the integer path's ids
    key_array = _int64_array(keys) if integer else _arrow(keys, key_type)
    columns = [
        pa.concat_arrays([key_array, pa.nulls(1, key_type)]),
        pa.concat_arrays([_int64_array(counts), pa.nulls(1, pa.int64())]),
        pa.concat_arrays([_int64_array(units), pa.nulls(1, pa.int64())]),
    ]
    for value in facts:
        columns.append(pa.concat_arrays([pa.nulls(m, pa.int64()), _int64_array([value])]))
    return pa.Table.from_arrays(columns, names=["key", "count", "units", *FACTS])


def _count_int_pairs(
    user: np.ndarray[Any, Any], key: np.ndarray[Any, Any], f: PairPriorities, k: int, c: int
) -> tuple[Any, Any, Any, int, int] | None:
    """:func:`_count_pairs` for integer ids by sorting one code per record,
    ``(user - u0) * width + (key - k0)``: runs of equal codes are the pairs, in (user, key)
    order. None when the codes would not fit in 62 bits."""
    empty = np.zeros(0, dtype=np.int64)
    if user.size == 0:
        return empty, empty, empty, 0, 0
    u0, u1 = int(user.min()), int(user.max())
    k0, k1 = int(key.min()), int(key.max())
    width = k1 - k0 + 1
    if (u1 - u0 + 1) * width >= 1 << 62:
        return None
    codes = (user - u0) * width + (key - k0)
    codes.sort()
    first = np.empty(codes.size, dtype=np.bool_)
    first[0] = True
    np.not_equal(codes[1:], codes[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    pair = codes[starts]
    n = np.diff(np.append(starts, codes.size))
    del codes, first, starts
    pair_user = pair // width
    pair_key = pair - pair_user * width
    new_user = np.empty(pair.size, dtype=np.bool_)
    new_user[0] = True
    np.not_equal(pair_user[1:], pair_user[:-1], out=new_user[1:])
    sizes = np.diff(np.append(np.flatnonzero(new_user), pair.size))
    keep, users_bounded = keep_mask(sizes, k, f, pair_user + u0, pair_key + k0)
    kept_keys = pair_key[keep]
    kept_n = np.minimum(n[keep], c)
    if width <= max(1 << 20, 4 * pair.size):
        seen = np.bincount(pair_key, minlength=width).astype(np.bool_)
        units = np.bincount(kept_keys, minlength=width)
        counts = np.bincount(kept_keys, weights=kept_n, minlength=width)
        held = np.flatnonzero(seen)
        return held + k0, counts[held].astype(np.int64), units[held], sizes.size, users_bounded
    held, inverse = np.unique(pair_key, return_inverse=True)
    units = np.bincount(inverse[keep], minlength=held.size)
    counts = np.bincount(inverse[keep], weights=kept_n, minlength=held.size)
    return held + k0, counts.astype(np.int64), units, sizes.size, users_bounded


def _count_pairs(table: Any, f: PairPriorities, k: int, c: int) -> tuple[Any, Any, Any, int, int]:
    """Every key of the partition (no nulls) with the sum of ``min(n, c)`` and the number of
    pairs kept, the number of users and of bounded users: any id types, through Polars."""
    import polars as pl

    records = pl.from_arrow(table.select(["user", "key"]))
    assert isinstance(records, pl.DataFrame)
    pairs = (
        records.group_by("user", "key").agg(pl.len().cast(pl.Int64).alias("n")).sort("user", "key")
    )
    m = pairs.height
    if m == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, 0, 0
    user = pairs.get_column("user")
    boundary = (user != user.shift(1)).fill_null(True).to_numpy()
    sizes = np.diff(np.append(np.flatnonzero(boundary), m))
    keep, users_bounded = keep_mask(
        sizes, k, f, _codes(user, f), _codes(pairs.get_column("key"), f)
    )
    counts = (
        pairs.select(
            "key",
            pl.when(pl.Series(keep)).then(pl.col("n").clip(upper_bound=c)).otherwise(0).alias("c"),
            pl.Series("u", keep, dtype=pl.Int64),
        )
        .group_by("key")
        .agg(pl.col("c").sum().alias("count"), pl.col("u").sum().alias("units"))
    )
    return (
        counts.get_column("key").to_arrow(),
        counts.get_column("count").to_numpy().astype(np.int64),
        counts.get_column("units").to_numpy().astype(np.int64),
        int(sizes.size),
        users_bounded,
    )


def keep_mask(
    sizes: np.ndarray[Any, Any],
    k: int,
    f: PairPriorities,
    users: np.ndarray[Any, Any],
    keys: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, Any], int]:
    """Which pairs the users keep, for distinct pairs in ``(user, key)`` order grouped in runs
    of ``sizes`` (``users``, ``keys``: the pairs' ids or their 64-bit codes): all of a user
    holding at most ``k`` keys, else the ``k`` of smallest ``(priority, key)``; and the number
    of bounded users."""
    m = int(sizes.sum())
    keep = np.ones(m, dtype=np.bool_)
    bounded = sizes > k
    users_bounded = int(bounded.sum())
    if not users_bounded:
        return keep, 0
    big_rows = np.flatnonzero(np.repeat(bounded, sizes))
    big_sizes = sizes[bounded]
    priority = f(users[big_rows], keys[big_rows])
    # sort by (user, top bits of the priority) packed in one word; while no two pairs of a user
    # share those bits this is the order of the full priorities, else a stable sort by (user,
    # priority) of the rows, which are in (user, key) order, breaks the ties by key
    bits = max(1, users_bounded.bit_length())
    group = np.repeat(np.arange(users_bounded, dtype=np.uint64), big_sizes)
    packed = (group << np.uint64(64 - bits)) | (priority >> np.uint64(bits))
    order = np.argsort(packed)
    ordered = packed[order]
    if bool((ordered[1:] == ordered[:-1]).any()):
        order = np.lexsort((priority, group))
    del packed, ordered
    group_starts = np.cumsum(big_sizes) - big_sizes
    rank = np.arange(big_rows.size, dtype=np.int64) - np.repeat(group_starts, big_sizes)
    keep[big_rows] = False
    keep[big_rows[order[rank < k]]] = True
    return keep, users_bounded


def _int64_view(column: Any) -> np.ndarray[Any, Any]:
    """An integer Arrow column without nulls as an int64 NumPy array read from its buffer.

    PyArrow's own conversions to and from NumPy (``to_numpy``, ``pa.array``) import pandas on
    first use, about 0.5 CPU s in every new Python worker; the integer path makes none."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if arr.type != pa.int64():
        arr = arr.cast(pa.int64())
    if arr.null_count:
        raise ValueError("_int64_view: the column has nulls")
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr), offset=8 * arr.offset)


def _int64_array(values: Any) -> Any:
    """``values`` as an Arrow int64 array over the same memory (no conversion, see
    :func:`_int64_view`)."""
    import pyarrow as pa

    v = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(v), [None, pa.py_buffer(v)])


def _arrow(values: Any, type: Any) -> Any:
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values.cast(type)
    return pa.array(values, type)


def _codes(series: Any, f: PairPriorities) -> np.ndarray[Any, Any]:
    """The 64-bit codes of a Polars column of ids (:meth:`PairPriorities.codes`), text ids
    hashed once per distinct value."""
    import polars as pl

    if series.dtype.is_integer():
        return np.asarray(series.to_numpy(), dtype=np.int64).view(np.uint64)
    text = series.cast(pl.String)
    uniq = text.unique()
    table = f.codes(np.array(uniq.to_list(), dtype=object))
    lookup = pl.Series("code", table, dtype=pl.UInt64)
    return np.asarray(text.replace_strict(uniq, lookup, return_dtype=pl.UInt64).to_numpy())
