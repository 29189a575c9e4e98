"""Counting records per key on one machine, with per-user contribution bounding.

This is the embedded engine: Polars for files and tables (lazy scans, one collect, the streaming
engine), NumPy for in-memory arrays. Its output is :class:`~privhist.core.data.Counts`, what
every mechanism consumes.

Contribution bounding
---------------------
With a user column every user is a privacy unit, and a user-level guarantee needs bounds on
what one user can change (PipelineDP's names, also used by
:class:`~privhist.core.neighbouring.Neighbouring`):

* ``max_partitions_contributed`` (``k``): each user keeps at most ``k`` of their distinct keys,
  a uniformly random ``k``-subset when they hold more. Every (user, key) pair gets a
  pseudorandom 64-bit priority, a keyed function of the pair under a 256-bit secret drawn from
  the :class:`~privhist.core.random.RandomSource` (:mod:`privhist.engines.priorities`: the
  same priorities in every engine, whatever the partitioning), and each user keeps the ``k``
  pairs of smallest priority: with the pairs grouped by user, each user holding more than
  ``k`` keys is one row of a padded matrix, and a partial sort of each row gives its ``k``-th
  smallest priority (an exact sort by (user, priority) for users holding many keys). A tie is
  broken by key order.
* ``max_contributions_per_partition`` (``c``): each kept (user, key) pair keeps at most ``c`` of
  its ``n`` records. Records of one pair are interchangeable for counting, so keeping a uniform
  random ``c``-subset of them and keeping ``min(n, c)`` give the same count; no randomness is
  needed.

The choice for one user depends only on that user's records and on the secret, so removing
or adding a user leaves everyone else's bounded data unchanged, and each user changes at most
``k`` counts by at most ``c`` each: the sensitivity recorded as ``Neighbouring.user(k, c)``.
The secret is drawn only when some user holds more than ``k`` keys (one draw for all passes), so
a seeded run gives the same result every time, in every engine.

Scale
-----
A user-level count holds the distinct (user, key) pairs in memory (records are aggregated by the
streaming engine as they are read). For Parquet files of more than
:data:`ROWS_PER_USER_PARTITION` rows the users are split into parts by a hash of the user id and
each part is read and bounded in its own pass, so memory holds one part at a time (the file is
read once per part). Integer user columns of files stay integers (equal as integers exactly when
equal as text), which avoids converting every user id to a string. When both users and keys are
integers, each record becomes one integer code ``(user - u0) * R + (key - k0)``; one sort of the
codes groups records into (user, key) pairs in (user, key) order, and the sorted codes are
processed in chunks of whole users on one thread per core (each chunk's arrays small and
reused: fresh arrays of every pair cost more in page faults than in arithmetic); above
:data:`_CODE_ROWS_PER_PASS` records the passes split users by id ranges. Bounded users keep the
``k`` pairs of smallest ``(priority, key)``, found by a partial sort of each user's row in a
padded matrix (an exact sort for users holding many keys, or on ties).

Key types
---------
How a key is parsed is a public choice (``key_type``), never inferred from the data: with
inference, one record could switch a whole column between integers and text and so merge or
split other records' keys (``"007"`` and ``"7"``), which would make neighbouring datasets give
disjoint releases. Files are read as :func:`privhist.io.scan` describes: keys are text by
default (``"int"`` for FIMI); with ``key_type="int"`` each key is cast on its own and a value
that is not an integer becomes a null key. Users read from files are compared as text. Tables
and arrays keep the types their caller gave them unless ``key_type`` is given.

Nulls
-----
Records with a null key (and, with a user column, a null user) are counted in ``info`` and
dropped; they never fail a count. Under ``key_type="int"`` this includes keys that are not
integers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import polars as pl

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import check_positive_int
from privhist.engines.local.progress import status
from privhist.engines.priorities import LazyPriorities, column_codes
from privhist.io.readers import (
    FileFormat,
    check_key_type,
    default_key_type,
    resolve_format,
    scan,
    select_records,
)

Source = str | os.PathLike[str] | pl.LazyFrame | pl.DataFrame

#: bounds used when a user column is given without them (recorded in ``info``)
DEFAULT_MAX_PARTITIONS_CONTRIBUTED: Final[int] = 1
DEFAULT_MAX_CONTRIBUTIONS_PER_PARTITION: Final[int] = 1

#: user-level Parquet files of more (user, key) records than this are counted in several passes
#: over disjoint sets of users (see :func:`_count_users`), so memory holds one pass's pairs
ROWS_PER_USER_PARTITION: Final[int] = 34_000_000

#: rows per batch of a streamed record-level count of integer keys, and how many counted
#: batches pile up before they are merged
_BATCH_ROWS: Final[int] = 4_000_000
_MERGE_EVERY: Final[int] = 16

#: bounded users holding at most this many keys are ranked in padded matrices (one row per
#: user, a partial sort of each row); larger ones by one sort of their rows
_MATRIX_MAX_KEYS: Final[int] = 64

#: key ranges up to this size are counted with dense arrays in the integer user-level path
_DENSE_KEYS: Final[int] = 1 << 22

#: the integer user-level path reads at most about this many records per pass (about 20 bytes
#: a record at the peak of the read and the sort of their codes), so memory stays near 3 GB
_CODE_ROWS_PER_PASS: Final[int] = 150_000_000

#: sorted codes are processed in chunks of about this many records (whole users), so the
#: working arrays stay small and are reused instead of faulted in afresh
_CODE_CHUNK: Final[int] = 1 << 20

#: seed of the (non-cryptographic) hash that assigns users to passes
_PARTITION_SEED: Final[int] = 0x5EED

#: integer keys whose range is at most ``2 * records + _DENSE_SLACK`` are counted with
#: ``np.bincount``; wider ranges are sorted
_DENSE_SLACK: Final[int] = 1 << 20

#: user-level counts tally their chunks, and aggregates run their passes, on one thread per
#: core, at most this many
_MAX_THREADS: Final[int] = 4


def count(
    source: Source,
    *,
    key: str = "key",
    user: str | bool | None = None,
    format: str | FileFormat | None = None,
    key_type: str | None = None,
    max_partitions_contributed: int | None = None,
    max_contributions_per_partition: int | None = None,
    rng: RandomSource | None = None,
    progress: bool = True,
) -> Counts:
    """Count records per key, bounding each user's contribution when ``user`` is given.

    Args:
        source: a file (any format :func:`privhist.io.scan` reads) or a Polars table.
        key: the key column (ignored for ``text`` and ``fimi`` files).
        user: the user column, or None when every record is its own privacy unit. For ``text``
            and ``fimi`` files, ``True`` (or any column name) makes each line one user.
        format: the file format when it cannot be inferred from the name (files only).
        key_type: ``"str"`` or ``"int"``: every key is read as text, or cast on its own to an
            integer (a key that is not an integer becomes a null key, counted in
            ``info["null_keys"]`` and dropped). None means ``"str"`` for files, except FIMI
            files (``"int"``), and the table's own column type for tables. Never inferred from
            the data; see :mod:`privhist.io.readers`.
        max_partitions_contributed: ``k``, the most distinct keys one user keeps (with
            ``user`` only; default 1).
        max_contributions_per_partition: ``c``, the most records one user keeps per key
            (with ``user`` only; default 1).
        rng: randomness for choosing which keys a user keeps; ``SecureRandom()`` when None.
            Used only for users holding more than ``k`` keys.
        progress: allow a status display on stderr for reads taking more than half a second
            (shown only when stderr is a terminal).

    Returns:
        Counts sorted by key. Without ``user``: record counts, ``units`` None, add/remove
        neighbours. With ``user``: bounded counts, ``units`` the number of users keeping each
        key, ``Neighbouring.user(k, c)``. ``info`` holds ``records`` (rows read, nulls
        included), ``null_keys``, ``distinct_keys`` (non-null keys in the input),
        ``records_kept`` and, with ``user``, ``null_users``, ``users`` (distinct non-null users
        with a non-null key), ``users_bounded`` (users holding more than ``k`` keys), the
        bounds and ``bounds_defaulted`` (the bounds that took their default). For files it
        also holds ``source``, ``format`` and ``key_type``.

    Raises:
        InputDataError: the file is missing, unreadable, empty or malformed, or lacks a column.
        ValidationError: a parameter is out of range, or bounds are given without ``user``.

    Example:
        >>> import polars as pl
        >>> from privhist.core.random import SeededRandom
        >>> visits = pl.DataFrame({"page": ["a", "b", "a", "a", None], "who": [1, 1, 2, 2, 3]})
        >>> c = count(visits, key="page")
        >>> c.keys.tolist(), c.counts.tolist(), c.info["null_keys"]
        (['a', 'b'], [3, 1], 1)
        >>> c = count(visits, key="page", user="who", max_partitions_contributed=2,
        ...           max_contributions_per_partition=1, rng=SeededRandom(0))
        >>> c.keys.tolist(), c.counts.tolist(), c.units.tolist()
        (['a', 'b'], [2, 1], [2, 1])
        >>> ids = pl.DataFrame({"id": ["007", "7", "zzz"]})
        >>> c = count(ids, key="id", key_type="int")
        >>> c.keys.tolist(), c.counts.tolist(), c.info["null_keys"]
        ([7], [2], 1)
    """
    fn = "count"
    check_key_type(key_type, fn)
    if user is False:
        user = None
    with_user = user is not None
    k, c, defaulted = contribution_bounds(
        with_user, max_partitions_contributed, max_contributions_per_partition, fn
    )
    path: str | os.PathLike[str] | None = None
    fmt: str | None = None
    if isinstance(source, pl.LazyFrame | pl.DataFrame):
        if format is not None:
            raise ValidationError("input_format", fn, "None when source is a table", format)
        if isinstance(user, bool):
            raise ValidationError("user", fn, "a column name when source is a table", user)
        lf = select_records(
            source, key=key, user=user, key_type=key_type, function=fn, source="the table"
        )
        label = "table"
    elif isinstance(source, str | os.PathLike):
        path = source
        fmt = resolve_format(path, format, fn)
        if key_type is None:
            key_type = default_key_type(fmt)
        lf = scan(
            path, format=_with_name(format, fmt), key=key, user=user, key_type=key_type, function=fn
        )
        label = os.fspath(path)
    else:
        raise ValidationError(
            "source", fn, "a file path or a Polars DataFrame/LazyFrame", type(source).__name__
        )

    with status(f"Counting {label}", enabled=progress):
        if with_user:
            parts = _user_partitions(path, fmt)
            result = _count_users(lf, k, c, rng or SecureRandom(), label, parts)
        else:
            result = _count_records(lf, label)
    if with_user:
        result.info["bounds_defaulted"] = defaulted
    if path is not None:
        result.info["source"] = label
        result.info["format"] = fmt
        result.info["key_type"] = key_type
    return result


def count_array(
    keys: npt.ArrayLike,
    users: npt.ArrayLike | None = None,
    *,
    max_partitions_contributed: int | None = None,
    max_contributions_per_partition: int | None = None,
    rng: RandomSource | None = None,
) -> Counts:
    """Count an in-memory array of keys (one record per entry).

    Integer keys are counted with ``np.bincount`` when their range is small and by sorting
    otherwise; string keys (``str`` or object arrays, ``None`` for a null key) with a Polars
    group-by. With ``users`` (one user per entry), contribution bounding is applied exactly as in
    :func:`count`.

    Args:
        keys: one-dimensional array of integer or string keys.
        users: optional array of user ids, the same length as ``keys``.
        max_partitions_contributed: ``k`` (with ``users`` only; default 1).
        max_contributions_per_partition: ``c`` (with ``users`` only; default 1).
        rng: randomness for contribution bounding; ``SecureRandom()`` when None.

    Returns:
        Counts sorted by key (integer keys as ``int64``, string keys as an object array).

    Raises:
        ValidationError: the array is not one-dimensional or has an unsupported type.

    Example:
        >>> import numpy as np
        >>> c = count_array(np.array([3, 1, 3, 3]))
        >>> c.keys.tolist(), c.counts.tolist(), c.info["records"]
        ([1, 3], [1, 3], 4)
    """
    fn = "count_array"
    arr = np.asarray(keys)
    if arr.ndim != 1:
        raise ValidationError("keys", fn, "a one-dimensional array", f"shape {arr.shape}")
    if users is None:
        contribution_bounds(False, max_partitions_contributed, max_contributions_per_partition, fn)
        if arr.dtype.kind in "iu":
            return _count_integers(arr, fn)
        frame = pl.DataFrame({"key": _string_series(arr, fn)})
        return _count_records(frame.lazy(), "array")
    k, c, defaulted = contribution_bounds(
        True, max_partitions_contributed, max_contributions_per_partition, fn
    )
    u = np.asarray(users)
    if u.ndim != 1 or u.shape[0] != arr.shape[0]:
        raise ValidationError(
            "users", fn, f"a one-dimensional array of length {arr.shape[0]}", f"shape {u.shape}"
        )
    if arr.dtype.kind in "iu":
        key_series = _integer_series(arr, fn)
    else:
        key_series = _string_series(arr, fn)
    try:
        user_series = pl.Series("user", u)
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        raise ValidationError("users", fn, "an array of ids", f"dtype {u.dtype}") from exc
    frame = pl.DataFrame([key_series, user_series])
    result = _count_users(frame.lazy(), k, c, rng or SecureRandom(), "array")
    result.info["bounds_defaulted"] = defaulted
    return result


def count_tallies(
    tallies: pl.LazyFrame,
    *,
    user: bool,
    max_partitions_contributed: int | None = None,
    max_contributions_per_partition: int | None = None,
    rng: RandomSource | None = None,
    progress: bool = True,
    label: str = "table",
) -> Counts:
    """:func:`count` of records given as tallies: each row of ``tallies`` (columns ``key``,
    ``user`` when ``user`` is True, and ``n``, a positive integer) stands for ``n`` records of
    that key (and user).

    The result is the one :func:`count` gives on the records themselves, seeded draws included:
    tallies of the same (user, key) are added up before bounding, so rows need not be distinct;
    only the pairs and their record counts enter the bounding. Keys keep the table's type
    (``Int64`` or ``String``), as do users.

    Args:
        tallies: the rows, a lazy table.
        user: whether the rows carry a ``user`` column (user-level counts).
        max_partitions_contributed: ``k`` (with ``user`` only; default 1).
        max_contributions_per_partition: ``c`` (with ``user`` only; default 1).
        rng: randomness for contribution bounding; ``SecureRandom()`` when None.
        progress: allow a status display on stderr (only when stderr is a terminal).
        label: how errors name the data.

    Returns:
        Counts as :func:`count` returns them for a table (``info`` counts records, not rows).

    Raises:
        InputDataError: the table cannot be read or lacks a column.
        ValidationError: a bound is out of range or given without ``user``, or a tally ``n``
            is below 1 (a pair of no records would count as a key its user holds).

    Example:
        >>> rows = pl.LazyFrame({"key": ["a", "b", None], "n": [3, 1, 2]})
        >>> c = count_tallies(rows, user=False)
        >>> c.keys.tolist(), c.counts.tolist(), c.info["records"], c.info["null_keys"]
        (['a', 'b'], [3, 1], 6, 2)
    """
    fn = "count"
    k, c, defaulted = contribution_bounds(
        user, max_partitions_contributed, max_contributions_per_partition, fn
    )
    try:
        schema = tallies.collect_schema()
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputDataError(f"cannot read {label}: {first}") from exc
    wanted = ["key", *(["user"] if user else []), "n"]
    missing = [name for name in wanted if name not in schema]
    if missing:
        raise InputDataError(f"the tallies of {label} lack the columns {', '.join(missing)}")
    if not schema["n"].is_integer():
        raise ValidationError("tallies", fn, "a table whose column 'n' is of integers", schema["n"])
    with status(f"Counting {label}", enabled=progress):
        if user:
            result = _count_users(tallies, k, c, rng or SecureRandom(), label, tallied=True)
            result.info["bounds_defaulted"] = defaulted
        else:
            result = _count_records(tallies, label, tallied=True)
    return result


# -- internals ----------------------------------------------------------------------------


def _user_partitions(path: str | os.PathLike[str] | None, fmt: str | None) -> int:
    """How many passes a user-level count takes: one per :data:`ROWS_PER_USER_PARTITION` rows of
    a Parquet file (its row count is in its metadata); one for every other source."""
    if path is None or fmt != "parquet":
        return 1
    try:
        rows = int(pl.scan_parquet(os.fspath(path)).select(pl.len()).collect().item())
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return 1  # the scan itself reports the problem
    return max(1, -(-rows // ROWS_PER_USER_PARTITION))


def contribution_bounds(
    with_user: bool, k: int | None, c: int | None, fn: str
) -> tuple[int, int, list[str]]:
    """``(k, c, defaulted)``: the bounds checked, defaults filled in, and the names of those
    that took their default; with no user column both must be None (each record is a unit)."""
    if not with_user:
        for name, value in (
            ("max_partitions_contributed", k),
            ("max_contributions_per_partition", c),
        ):
            if value is not None:
                raise ValidationError(
                    name, fn, "None without a user column (each record is its own unit)", value
                )
        return 1, 1, []
    defaulted = []
    if k is None:
        k = DEFAULT_MAX_PARTITIONS_CONTRIBUTED
        defaulted.append("max_partitions_contributed")
    if c is None:
        c = DEFAULT_MAX_CONTRIBUTIONS_PER_PARTITION
        defaulted.append("max_contributions_per_partition")
    k = check_positive_int(k, fn, "max_partitions_contributed")
    c = check_positive_int(c, fn, "max_contributions_per_partition")
    return k, c, defaulted


def _collect(query: pl.LazyFrame, label: str) -> pl.DataFrame:
    """Run the one query that reads the data (streaming engine: memory bounded by the groups)."""
    try:
        return query.collect(engine="streaming")
    except (pl.exceptions.PolarsError, OSError) as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise InputDataError(f"cannot read {label}: {first}") from exc


def _count_records(lf: pl.LazyFrame, label: str, tallied: bool = False) -> Counts:
    """Record counts per key; with ``tallied``, each row of ``lf`` stands for ``n`` records."""
    try:
        integer_keys = lf.collect_schema()["key"] == pl.Int64
    except (pl.exceptions.PolarsError, OSError):
        integer_keys = False  # the read below reports the problem
    if integer_keys and not tallied:
        return _count_integer_stream(lf, label)
    if tallied:
        df = _collect(
            lf.group_by("key").agg(
                pl.col("n").cast(pl.Int64).sum(), pl.col("n").fill_null(0).min().alias("least")
            ),
            label,
        )
        _check_tallies(df["least"])
    else:
        df = _collect(lf.group_by("key").agg(pl.len().alias("n")), label)
    n = df["n"].cast(pl.Int64)
    nulls = df["key"].is_null()
    records = int(n.sum())
    null_keys = int(n.filter(nulls).sum())
    kept = df.filter(~nulls).sort("key")
    counts = _int64(kept["n"])
    info: dict[str, Any] = {
        "records": records,
        "null_keys": null_keys,
        "distinct_keys": kept.height,
        "records_kept": int(counts.sum()),
    }
    return Counts(
        keys=_keys(kept["key"]),
        counts=counts,
        units=None,
        neighbouring=Neighbouring.add_remove(),
        info=info,
    )


def _count_integer_stream(lf: pl.LazyFrame, label: str) -> Counts:
    """Record counts of integer keys, read in batches that are counted as they arrive.

    Each batch is counted with ``np.bincount`` when its keys span a small range (else by
    sorting), and kept as (key, count) pairs; the pairs are merged whenever
    :data:`_MERGE_EVERY` batches have piled up. Memory holds one batch and the distinct keys, never
    the column (about 3x less CPU than a hashed group-by on Zipf keys).
    """
    records = null_keys = 0
    partial_keys: list[npt.NDArray[np.int64]] = []
    partial_counts: list[npt.NDArray[np.int64]] = []

    def merge() -> None:
        keys = np.concatenate(partial_keys)
        counts = np.concatenate(partial_counts)
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        partial_keys[:] = [keys[starts]]
        partial_counts[:] = [np.add.reduceat(counts, starts).astype(np.int64)]

    try:
        for batch in lf.select("key").collect_batches(chunk_size=_BATCH_ROWS):
            column = batch["key"]
            records += column.len()
            null_keys += column.null_count()
            values = column.drop_nulls().to_numpy()
            if values.size == 0:
                continue
            part = _count_integers(values, "count")
            partial_keys.append(part.keys)
            partial_counts.append(part.counts)
            if len(partial_keys) >= _MERGE_EVERY:
                merge()
    except (pl.exceptions.PolarsError, OSError) as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise InputDataError(f"cannot read {label}: {first}") from exc
    if partial_keys:
        merge()
        keys, counts = partial_keys[0], partial_counts[0]
    else:
        keys = np.zeros(0, dtype=np.int64)
        counts = np.zeros(0, dtype=np.int64)
    info: dict[str, Any] = {
        "records": records,
        "null_keys": null_keys,
        "distinct_keys": int(keys.shape[0]),
        "records_kept": int(counts.sum()),
    }
    return Counts(
        keys=keys, counts=counts, units=None, neighbouring=Neighbouring.add_remove(), info=info
    )


def _count_users(
    lf: pl.LazyFrame,
    k: int,
    c: int,
    rng: RandomSource,
    label: str,
    partitions: int = 1,
    tallied: bool = False,
) -> Counts:
    """Bounded per-key counts and units, over ``partitions`` disjoint sets of users; with
    ``tallied``, each row of ``lf`` stands for ``n`` records of its (user, key).

    With ``partitions > 1`` the users are split by a hash of the user id and each part is read,
    bounded and counted on its own, so memory holds one part's (user, key) pairs at a time. A
    user's records all fall in one part, and each user's choice depends only on their own records
    and fresh priorities, so the bounded dataset, and the counts, have the same distribution for
    any number of parts (the hash only decides which pass a user is counted in; it is no source
    of randomness of the release).
    """
    try:
        schema = lf.collect_schema()
        integer_ids = schema["user"] == pl.Int64 and schema["key"] == pl.Int64
    except (pl.exceptions.PolarsError, OSError):
        integer_ids = False  # the read below reports the problem
    prio = LazyPriorities(rng)
    if integer_ids and not tallied:
        fast = count_user_codes(lf, k, c, prio, label)
        if fast is not None:
            return fast
    records = null_keys = null_users = users = users_bounded = 0
    partials: list[pl.DataFrame] = []
    keys_seen: list[pl.DataFrame] = []
    for part in range(partitions):
        query = lf
        if partitions > 1:
            bucket = pl.col("user").hash(seed=_PARTITION_SEED) % partitions
            query = lf.filter(bucket == part)
        if tallied:  # repeated pairs are merged by _bound, after its sort
            query = query.select("user", "key", pl.col("n").cast(pl.Int64))
        else:
            query = query.group_by("user", "key").agg(pl.len().alias("n"))
        pairs = _collect(query, label)
        if tallied:
            _check_tallies(pairs["n"])
        pairs = pairs.with_columns(pl.col("n").cast(pl.Int64))
        null_key = pairs["key"].is_null()
        null_user = pairs["user"].is_null()
        records += int(pairs["n"].sum())
        null_keys += int(pairs["n"].filter(null_key).sum())
        null_users += int(pairs["n"].filter(null_user).sum())
        pairs = pairs.filter(~null_key & ~null_user)
        keys_seen.append(pairs.select(pl.col("key").unique()))
        kept, part_users, part_bounded = _bound(pairs, k, c, prio, merge=tallied)
        del pairs
        users += part_users
        users_bounded += part_bounded
        partials.append(
            kept.group_by("key").agg(pl.col("n").sum().alias("count"), pl.len().alias("units"))
        )
        del kept
    table = (
        pl.concat(partials)
        .group_by("key")
        .agg(pl.col("count").sum(), pl.col("units").sum())
        .sort("key")
    )
    counts = _int64(table["count"])
    info: dict[str, Any] = {
        "records": records,
        "null_keys": null_keys,
        "null_users": null_users,
        "users": users,
        "distinct_keys": pl.concat(keys_seen)["key"].n_unique(),
        "users_bounded": users_bounded,
        "records_kept": int(counts.sum()),
        "max_partitions_contributed": k,
        "max_contributions_per_partition": c,
    }
    if partitions > 1:
        info["user_partitions"] = partitions
    return Counts(
        keys=_keys(table["key"]),
        counts=counts,
        units=_int64(table["units"]),
        neighbouring=Neighbouring.user(k, c),
        info=info,
    )


def _check_tallies(n: pl.Series) -> None:
    """Refuse tallies below one record (a null tally too)."""
    least = n.min()
    if n.null_count() or (least is not None and int(least) < 1):  # type: ignore[arg-type]
        raise ValidationError("tallies", "count", "a table of tallies n >= 1", least)


def bound_contributions(
    pairs: pl.DataFrame,
    max_partitions_contributed: int,
    max_contributions_per_partition: int,
    rng: RandomSource,
) -> pl.DataFrame:
    """Bound each user's contribution, on a table of (user, key) pairs with record counts.

    Args:
        pairs: columns ``user``, ``key`` and ``n`` (records of that pair), one row per distinct
            non-null (user, key) pair.
        max_partitions_contributed: ``k``; a user holding more than ``k`` keys keeps a uniformly
            random ``k`` of them (the ``k`` smallest of their pairs' pseudorandom priorities,
            :mod:`privhist.engines.priorities`).
        max_contributions_per_partition: ``c``; each kept pair keeps ``min(n, c)`` records.
        rng: the source of the priorities' secret (drawn only when a user holds more than ``k``
            keys).

    Returns:
        The kept pairs: columns ``user``, ``key``, ``n`` (now at most ``c``), grouped by user
        (sorted by (user, key) for a seeded source).

    Example:
        >>> from privhist.core.random import SeededRandom
        >>> pairs = pl.DataFrame({"user": [1, 1, 1, 2], "key": ["a", "b", "c", "a"],
        ...                       "n": [5, 1, 2, 1]})
        >>> kept = bound_contributions(pairs, 2, 3, SeededRandom(0))
        >>> kept.group_by("user").len().sort("user")["len"].to_list(), kept["n"].max() <= 3
        ([2, 1], True)
    """
    k = check_positive_int(
        max_partitions_contributed, "bound_contributions", "max_partitions_contributed"
    )
    c = check_positive_int(
        max_contributions_per_partition, "bound_contributions", "max_contributions_per_partition"
    )
    kept, _, _ = _bound(pairs, k, c, LazyPriorities(rng))
    return kept


def _bound(
    pairs: pl.DataFrame, k: int, c: int, prio: LazyPriorities, merge: bool = False
) -> tuple[pl.DataFrame, int, int]:
    """:func:`bound_contributions`, also returning the number of users and of bounded users.

    The pairs are sorted by user (by (user, key) for a seeded source, which fixes the order the
    priorities are drawn in, so seeded runs are reproducible): each user's pairs are then one
    contiguous run, and per-user sizes and ranks come from run boundaries in linear time. With
    ``merge`` a pair may come in several rows (tallies of its records): after the sort, adjacent
    rows of one pair are added up (one comparison of neighbours finds them).
    """
    # priorities are a function of the pair, so only grouping users together matters; the key
    # order inside a user breaks ties (equal priorities) reproducibly
    pairs = pairs.select("user", "key", pl.col("n").cast(pl.Int64)).sort("user", "key")
    m = pairs.height
    if m == 0:
        return pairs, 0, 0
    user = pairs["user"]
    same_user = user == user.shift(1)
    if merge and (same_user & (pairs["key"] == pairs["key"].shift(1))).any():
        pairs = pairs.group_by("user", "key", maintain_order=True).agg(pl.col("n").sum())
        m = pairs.height
        user = pairs["user"]
        same_user = user == user.shift(1)
    boundary = (~same_user).fill_null(True).to_numpy()
    starts = np.flatnonzero(boundary)
    sizes = np.diff(np.append(starts, m))  # distinct keys held by each user
    users, keys = pairs["user"], pairs["key"]

    def priorities(rows: npt.NDArray[np.int64] | None) -> npt.NDArray[np.uint64]:
        u, v = (users, keys) if rows is None else (users.gather(rows), keys.gather(rows))
        return prio(column_codes(prio, u), column_codes(prio, v))

    keep, users_bounded = _keep_mask(sizes, k, priorities)
    if keep is not None:
        pairs = pairs.filter(pl.Series(keep))
    kept = pairs.with_columns(pl.col("n").clip(upper_bound=c))
    return kept, int(starts.size), users_bounded


def _keep_mask(
    sizes: npt.NDArray[np.int64],
    k: int,
    priorities: Callable[[npt.NDArray[np.int64] | None], npt.NDArray[np.uint64]],
) -> tuple[npt.NDArray[np.bool_] | None, int]:
    """Which pairs the users keep, for pairs grouped by user in runs of ``sizes`` and in key
    order inside each run: all of a user holding at most ``k`` keys, else the ``k`` of smallest
    ``(priority, key)``; and how many users were bounded. ``priorities(rows)`` gives the
    priorities of those rows (``None``: of every row); it is asked only for the rows of bounded
    users. Returns None for the mask when every pair is kept."""
    bounded = sizes > k
    users_bounded = int(np.count_nonzero(bounded))
    if not users_bounded:
        return None, 0
    m = int(sizes.sum())
    every = users_bounded == sizes.size
    big_rows = None if every else np.flatnonzero(np.repeat(bounded, sizes))
    big_sizes = sizes if every else sizes[bounded]
    # pseudorandom priorities of the pairs themselves (engines/priorities.py), whatever the row
    # order: each user keeps the k smallest, a uniform k-subset of their keys, independently
    # of every other user
    chosen = _smallest_k(priorities(big_rows), big_sizes, k)
    if big_rows is None:
        return chosen, users_bounded
    keep = np.ones(m, dtype=np.bool_)
    keep[big_rows] = chosen
    return keep, users_bounded


def _smallest_k(
    priority: npt.NDArray[np.uint64], sizes: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.bool_]:
    """For rows in runs of ``sizes`` (every run longer than ``k``, rows in key order inside a
    run), whether each row is among its run's ``k`` smallest ``(priority, key)``.

    Runs of at most :data:`_MATRIX_MAX_KEYS` rows are put in a padded matrix, one row per run:
    one matrix as wide as the longest run when that at most doubles the rows, else one per size
    class (sizes in ``(2**(j-1), 2**j]``). The ``k``-th smallest priority of each matrix row
    (``np.partition``) is its run's threshold, and a run keeps the priorities at or below it.
    A run where that keeps more than ``k`` (equal priorities at the threshold, probability about
    ``s**2 / 2**64`` for a run of ``s``) and longer runs are ranked exactly by one stable sort by
    ``(run, priority)``, which breaks ties by key.
    """
    n = int(priority.shape[0])
    runs_total = int(sizes.shape[0])
    run_starts = np.cumsum(sizes) - sizes
    exact = sizes > _MATRIX_MAX_KEYS
    classes: list[npt.NDArray[np.int64] | None] = []
    if not exact.any() and runs_total * int(sizes.max()) <= 2 * n:
        classes.append(None)  # one matrix for every run, rows in their own order
    else:
        lower, width = k, 2
        while width < k + 1:
            width *= 2
        while lower < _MATRIX_MAX_KEYS:
            upper = min(width, _MATRIX_MAX_KEYS)
            in_class = np.flatnonzero((sizes > lower) & (sizes <= upper))
            if in_class.size:
                classes.append(in_class)
            lower, width = upper, width * 2
    whole = len(classes) == 1 and classes[0] is None
    keep = None if whole else np.zeros(n, dtype=np.bool_)
    for runs in classes:
        if runs is None:
            class_sizes, class_starts, values, rows = sizes, run_starts, priority, None
        else:
            class_sizes = sizes[runs]
            class_starts = np.cumsum(class_sizes) - class_sizes
            rows = _run_rows(run_starts[runs], class_sizes, class_starts)
            values = priority[rows]
        count = int(class_sizes.shape[0])
        columns = int(class_sizes.max())
        # each row's run, by a cumulative sum over run starts (cheaper than np.repeat)
        mark = np.zeros(values.shape[0], dtype=np.int64)
        mark[class_starts] = 1
        owner = np.cumsum(mark) - 1
        del mark
        flat = np.arange(values.shape[0], dtype=np.int64)
        flat += (np.arange(count, dtype=np.int64) * columns - class_starts)[owner]
        matrix = np.full(count * columns, np.iinfo(np.uint64).max, dtype=np.uint64)
        matrix[flat] = values
        del flat
        threshold = np.partition(matrix.reshape(count, columns), k - 1, axis=1)[:, k - 1]
        del matrix
        chosen = values <= threshold[owner]
        if int(np.count_nonzero(chosen)) != k * count:  # a run keeps more than k: ties
            kept_per_run = np.add.reduceat(chosen.astype(np.int64), class_starts)
            tied = kept_per_run > k
            exact[np.flatnonzero(tied) if runs is None else runs[tied]] = True
        if keep is None:
            keep = chosen
        else:
            keep[rows] = chosen
    if keep is None:
        keep = np.zeros(n, dtype=np.bool_)
    if exact.any():
        ranked = np.flatnonzero(exact)
        class_sizes = sizes[ranked]
        class_starts = np.cumsum(class_sizes) - class_sizes
        rows = _run_rows(run_starts[ranked], class_sizes, class_starts)
        owner = np.repeat(np.arange(ranked.size), class_sizes)
        # a stable sort by (run, priority) of rows in key order: ties go by key
        order = np.lexsort((priority[rows], owner))
        rank = np.arange(rows.size) - class_starts[owner]
        keep[rows] = False
        keep[rows[order[rank < k]]] = True
    return keep


def _run_rows(
    starts: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64], packed: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The row numbers of runs starting at ``starts`` with ``sizes``, one run after the other
    (``packed``: where each run starts in the output)."""
    rows = np.repeat(starts - packed, sizes)
    rows += np.arange(rows.shape[0], dtype=np.int64)
    return rows


def count_user_codes(
    lf: pl.LazyFrame,
    k: int,
    c: int,
    prio: LazyPriorities,
    label: str,
    key_codes: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None = None,
) -> Counts | None:
    """:func:`_count_users` for integer users and keys, by sorting one integer per record.

    Each record becomes the code ``(user - u0) * R + (key - k0)`` (``R`` the key range), so one
    sort of a single integer column groups records by (user, key) in (user, key) order, and runs
    of equal codes are the pairs with their record counts. The sorted codes are then processed
    in chunks of whole users (:func:`_code_chunks`), on one thread per core, each chunk's
    working arrays small enough to stay in cache and be reused rather than faulted in afresh
    (the kernel zeroing fresh pages was most of the cost of one-shot arrays of every pair).
    With more than :data:`_CODE_ROWS_PER_PASS` records the users are split into ranges of ids,
    one pass (one read) each, so memory holds one pass's codes. Returns None when the codes
    would not fit in 63 bits (the general path then counts).

    ``key_codes``, when given, maps keys to the codes the priority function takes for them
    (keys that stand for texts: :meth:`~privhist.engines.local.aggregate.GroupCoder.key_codes`);
    else keys enter the priorities as themselves.
    """
    stats = _collect(
        lf.select(
            pl.len().alias("records"),
            pl.col("key").null_count().alias("null_keys"),
            pl.col("user").null_count().alias("null_users"),
            pl.col("user").min().alias("u0"),
            pl.col("user").max().alias("u1"),
            pl.col("key").min().alias("k0"),
            pl.col("key").max().alias("k1"),
        ),
        label,
    ).row(0, named=True)
    info: dict[str, Any] = {
        "records": int(stats["records"]),
        "null_keys": int(stats["null_keys"]),
        "null_users": int(stats["null_users"]),
        "users": 0,
        "distinct_keys": 0,
        "users_bounded": 0,
        "records_kept": 0,
        "max_partitions_contributed": k,
        "max_contributions_per_partition": c,
    }
    empty = np.zeros(0, dtype=np.int64)
    if stats["u0"] is None or stats["k0"] is None:
        return Counts(empty, empty, empty, Neighbouring.user(k, c), info)
    u0, u1, k0, k1 = (int(stats[x]) for x in ("u0", "u1", "k0", "k1"))
    width = k1 - k0 + 1
    if (u1 - u0 + 1) * width >= 1 << 62 or width > 1 << 40:
        return None
    partitions = max(1, -(-info["records"] // _CODE_ROWS_PER_PASS))
    valid = lf.filter(pl.col("user").is_not_null() & pl.col("key").is_not_null())
    code = ((pl.col("user") - u0) * width + (pl.col("key") - k0)).alias("code")
    span = u1 - u0 + 1
    tally = _Tally(width, c)
    threads = worker_threads()
    for part in range(partitions):
        lo = u0 + span * part // partitions
        hi = u0 + span * (part + 1) // partitions
        query = (
            valid if partitions == 1 else valid.filter(pl.col("user").is_between(lo, hi, "left"))
        )
        codes = _collect(query.select(code), label)["code"].sort().to_numpy()
        if codes.size == 0:
            continue
        chunks = _code_chunks(codes, width)
        # one worker per core, each over every threads-th chunk with its own tallies (the
        # keyed priorities are a function of the pair, so the split changes nothing drawn)
        work = partial(
            _tally_chunks, codes, width=width, k=k, c=c, prio=prio, u0=u0, k0=k0, names=key_codes
        )
        if threads > 1 and len(chunks) > 1:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                parts = list(pool.map(work, [chunks[t::threads] for t in range(threads)]))
        else:
            parts = [work(chunks)]
        del work
        del codes
        for other in parts:
            tally.merge(other)
    out_keys, count_sum, unit_sum, distinct = tally.result()
    info["users"] = tally.users
    info["users_bounded"] = tally.bounded
    info["distinct_keys"] = distinct
    info["records_kept"] = int(count_sum.sum())
    if partitions > 1:
        info["user_partitions"] = partitions
    return Counts(out_keys + k0, count_sum, unit_sum, Neighbouring.user(k, c), info)


def _sorted_pairs(
    users: npt.NDArray[Any], keys: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """The distinct (user, key) pairs of two integer arrays (no nulls) with their numbers of
    records, sorted by (user, key), by one sort of the code ``(user - u0) * R + (key - k0)`` per
    record (several times faster than a two-column unique and sort); None when the codes would
    not fit in 63 bits."""
    if users.shape[0] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    if max(int(users.max()), int(keys.max())) >= 1 << 62:
        return None
    u0, u1, k0, k1 = int(users.min()), int(users.max()), int(keys.min()), int(keys.max())
    width = k1 - k0 + 1
    if (u1 - u0 + 1) * width >= 1 << 62:
        return None
    codes = users.astype(np.int64) - u0
    codes *= width
    codes += keys.astype(np.int64, copy=False)
    codes -= k0
    ordered = pl.Series(codes).sort().to_numpy()
    del codes
    first = np.empty(ordered.shape[0], dtype=np.bool_)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    del first
    pair = ordered[starts]
    n = np.diff(starts, append=ordered.shape[0])
    pair_users = pair // width
    pair_keys = pair - pair_users * width
    return pair_users + u0, pair_keys + k0, n


def _code_chunks(codes: npt.NDArray[np.int64], width: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges of sorted codes of about :data:`_CODE_CHUNK` records each, every
    one ending where a user's codes end."""
    n = int(codes.shape[0])
    out: list[tuple[int, int]] = []
    start = 0
    while start < n:
        stop = min(start + _CODE_CHUNK, n)
        if stop < n:  # move to the first code of the next user
            user = int(codes[stop - 1]) // width
            stop = int(np.searchsorted(codes, (user + 1) * width, side="left"))
        out.append((start, stop))
        start = stop
    return out


class _Tally:
    """Per-key sums of kept records (``min(n, c)``) and kept pairs (units), the keys seen, and
    the numbers of users and bounded users, over chunks of sorted codes. Keys are offsets
    ``key - k0`` in ``[0, width)``: dense arrays while ``width <= _DENSE_KEYS``, else lists of
    per-chunk sums merged at the end."""

    def __init__(self, width: int, c: int) -> None:
        self.width = width
        self.c = c
        self.dense = width <= _DENSE_KEYS
        size = width if self.dense else 0
        self.units = np.zeros(size, dtype=np.int64)
        self.counts = np.zeros(size if c > 1 else 0, dtype=np.int64)
        self.seen = np.zeros(size, dtype=np.bool_)
        self.parts: list[tuple[npt.NDArray[np.int64], ...]] = []
        self.users = 0
        self.bounded = 0

    def add(
        self,
        keys: npt.NDArray[np.int64],
        kept: npt.NDArray[np.int64],
        kept_n: npt.NDArray[np.int64] | None,
    ) -> None:
        """One chunk: the keys of its pairs, the keys of the kept pairs and (``c > 1``) their
        record counts clipped to ``c``."""
        if self.dense:
            self.seen[keys] = True
            self.units += np.bincount(kept, minlength=self.width)
            if kept_n is not None:
                self.counts += np.bincount(kept, weights=kept_n, minlength=self.width).astype(
                    np.int64
                )
            return
        held, inverse = np.unique(kept, return_inverse=True)
        units = np.bincount(inverse, minlength=held.size).astype(np.int64)
        sums = (
            units
            if kept_n is None
            else np.bincount(inverse, weights=kept_n, minlength=held.size).astype(np.int64)
        )
        self.parts.append((np.unique(keys), held, units, sums))

    def merge(self, other: _Tally) -> None:
        self.users += other.users
        self.bounded += other.bounded
        if self.dense:
            self.seen |= other.seen
            self.units += other.units
            if self.c > 1:
                self.counts += other.counts
        else:
            self.parts.extend(other.parts)

    def result(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
        """Held key offsets (sorted), their record sums, their units, and the distinct keys."""
        if self.dense:
            held = np.flatnonzero(self.units)
            units = self.units[held]
            sums = units if self.c == 1 else self.counts[held]
            return held.astype(np.int64), sums, units, int(np.count_nonzero(self.seen))
        if not self.parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty, 0
        seen, held, units, sums = (np.concatenate(x) for x in zip(*self.parts, strict=True))
        merged, inverse = np.unique(held, return_inverse=True)
        unit_sum = np.bincount(inverse, weights=units, minlength=merged.size).astype(np.int64)
        count_sum = np.bincount(inverse, weights=sums, minlength=merged.size).astype(np.int64)
        return merged.astype(np.int64), count_sum, unit_sum, int(np.unique(seen).size)


def _tally_chunks(
    codes: npt.NDArray[np.int64],
    chunks: list[tuple[int, int]],
    width: int,
    k: int,
    c: int,
    prio: LazyPriorities,
    u0: int,
    k0: int,
    names: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None = None,
) -> _Tally:
    """Pairs, contribution bounding and per-key sums for chunks of sorted codes (whole users
    each), in chunk order; ``names`` maps keys to their priority codes (default: themselves)."""
    tally = _Tally(width, c)
    for start, stop in chunks:
        chunk = codes[start:stop]
        m = int(chunk.shape[0])
        first = np.empty(m, dtype=np.bool_)
        first[0] = True
        np.not_equal(chunk[1:], chunk[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        del first
        pair = chunk[starts]
        users = pair // width
        keys = pair - users * width
        del pair
        new_user = np.empty(users.shape[0], dtype=np.bool_)
        new_user[0] = True
        np.not_equal(users[1:], users[:-1], out=new_user[1:])
        user_starts = np.flatnonzero(new_user)
        del new_user
        sizes = np.diff(user_starts, append=users.shape[0])

        def priorities(
            rows: npt.NDArray[np.int64] | None,
            users: npt.NDArray[np.int64] = users,
            keys: npt.NDArray[np.int64] = keys,
        ) -> npt.NDArray[np.uint64]:
            u, kk = (users, keys) if rows is None else (users[rows], keys[rows])
            kk = kk + k0
            return prio(u + u0, kk if names is None else names(kk))

        keep, bounded = _keep_mask(sizes, k, priorities)
        tally.users += int(user_starts.shape[0])
        tally.bounded += bounded
        kept = keys if keep is None else keys[keep]
        kept_n = None
        if c > 1:
            n = np.diff(starts, append=m)
            kept_n = np.minimum(n if keep is None else n[keep], c)
        tally.add(keys, kept, kept_n)
    return tally


def _count_integers(arr: npt.NDArray[Any], fn: str) -> Counts:
    """Record counts of an integer array: ``np.bincount`` over a small range, else a sort.

    Non-negative keys below ``2 * n + _DENSE_SLACK`` are counted in place (no shifted copy of
    the array: the bins below the smallest key stay empty); only keys with a negative or a
    large smallest value are shifted first. The largest key is found first so that a wide range
    is never allocated as bins.
    """
    n = int(arr.shape[0])
    if n == 0:
        keys = np.zeros(0, dtype=np.int64)
        counts = np.zeros(0, dtype=np.int64)
    else:
        hi = int(arr.max())
        if hi >= 1 << 63:
            raise ValidationError("keys", fn, "integers below 2**63", hi)
        values = arr.astype(np.int64, copy=False)
        dense: npt.NDArray[np.intp] | None = None
        lo = 0
        if hi < 2 * n + _DENSE_SLACK:
            # one thread: two threads' bins (fresh pages) and their sum took a third more CPU
            # than one bincount, which they gained back in wall time only on idle cores
            try:
                dense = np.bincount(values, minlength=hi + 1)
            except ValueError:  # a negative key: count the shifted range below
                dense = None
        if dense is None:
            lo = int(values.min())
            if hi - lo + 1 <= 2 * n + _DENSE_SLACK:
                dense = np.bincount(values - lo, minlength=hi - lo + 1)
        if dense is not None:
            # a boolean mask first: nonzero over int64 bins is about 5x slower than over bools
            present = np.flatnonzero(dense != 0)
            keys = present.astype(np.int64, copy=False)
            if lo:
                keys = keys + lo
            counts = dense[present].astype(np.int64, copy=False)
        else:
            ordered = np.sort(values)
            starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
            keys = ordered[starts]
            counts = np.diff(np.append(starts, n)).astype(np.int64)
    info = {"records": n, "null_keys": 0, "distinct_keys": int(keys.shape[0]), "records_kept": n}
    return Counts(
        keys=keys, counts=counts, units=None, neighbouring=Neighbouring.add_remove(), info=info
    )


def worker_threads() -> int:
    """Threads for work split in chunks (tallies, aggregate passes): the cores this process
    may use, at most :data:`_MAX_THREADS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_THREADS))


def _integer_series(arr: npt.NDArray[Any], fn: str) -> pl.Series:
    if arr.size and int(arr.max()) >= 1 << 63:
        raise ValidationError("keys", fn, "integers below 2**63", int(arr.max()))
    return pl.Series("key", arr.astype(np.int64, copy=False))


def _string_series(arr: npt.NDArray[Any], fn: str) -> pl.Series:
    expected = "an array of integers or strings (None for a missing key)"
    if arr.dtype.kind not in "UO" and arr.size:
        raise ValidationError("keys", fn, expected, f"dtype {arr.dtype}")
    try:
        if arr.dtype.kind == "O":
            return pl.Series("key", arr.tolist(), dtype=pl.String, strict=True)
        return pl.Series("key", arr, dtype=pl.String)
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        raise ValidationError("keys", fn, expected, "values of mixed or other types") from exc


def _keys(series: pl.Series) -> npt.NDArray[Any]:
    if series.dtype == pl.String or series.dtype == pl.Null:
        return np.array(series.to_list(), dtype=object)
    return _int64(series)


def _int64(series: pl.Series) -> npt.NDArray[np.int64]:
    return np.array(series.cast(pl.Int64).to_numpy(), dtype=np.int64)


def _with_name(given: str | FileFormat | None, name: str) -> FileFormat:
    """The file layout given (column names, separator) under its resolved format ``name``."""
    if isinstance(given, FileFormat):
        return FileFormat(name, given.columns, given.separator)
    return FileFormat(name)
