"""Arrow columns on the Spark executors: DDL of a column, keys as NumPy arrays, and the
``mapInArrow`` function that adds each (user, key) pair's priority
(:mod:`privhist.engines.priorities`). Shared by the counting, weighting and noise modules of the
Spark engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from privhist.engines.priorities import PairPriorities

_SHIFT = np.uint64(1 << 63)


def ddl(df: Any, column: str) -> str:
    return f"{column} {df.schema[column].dataType.simpleString()}"


def priority_batches(secret: bytes) -> Any:
    """The ``mapInArrow`` function adding each pair's priority (shipped with the secret only)."""

    def add(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        f = PairPriorities(secret)
        for batch in batches:
            users = batch.column("user").to_numpy(zero_copy_only=False)
            keys = batch.column("key").to_numpy(zero_copy_only=False)
            prio = (f(users, keys) - _SHIFT).view(np.int64)  # unsigned order as signed
            yield pa.RecordBatch.from_arrays(
                [batch.column("user"), batch.column("key"), batch.column("n"), pa.array(prio)],
                names=["user", "key", "n", "priority"],
            )

    return add


def arrow_keys(column: Any) -> Any:
    """An Arrow key column as a NumPy array: int64 for integer keys, else an object array."""
    import pyarrow as pa

    if pa.types.is_integer(column.type):
        return np.asarray(column.to_numpy(), dtype=np.int64)
    return np.array(column.to_pylist(), dtype=object)
