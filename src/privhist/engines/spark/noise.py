"""Per-key noise on the Spark executors: :func:`privhist.engines.keyed_noise.release_keyed`, run
where the per-key table is.

The per-key table ``(key, count[, units])`` of a distributed count stays on the executors. The
driver draws the 256-bit noise secret from the release's
:class:`~privhist.core.random.RandomSource` and ships it with the mechanism (its public
parameters only); each key's noise block (:func:`privhist.engines.keyed_noise.key_blocks`, here
as a Spark expression) groups the table, and ``applyInArrow`` releases each block from its Arrow
table with :func:`privhist.engines.keyed_noise.release_block`, reading the block's AES-256-CTR
keystream. The released rows form a Spark DataFrame (:func:`released_frame`) that the driver
collects in canonical key order only when the release is asked for (:func:`release_table`).

For the same secret and the same per-key table the rows are exactly those of the local
:func:`~privhist.engines.keyed_noise.release_keyed` (a test compares them), whatever the
partitioning; the argument for the law of the release is in :mod:`privhist.engines.keyed_noise`.

Which mechanisms run here: the per-key ones of
:data:`~privhist.engines.keyed_noise.PER_KEY_MECHANISMS` (``stability``, ``gaussian-threshold``,
``stability-geometric``, ``optimal-selection``, ``pws``, ``sample-and-threshold``). The others
(``dense``, ``basic-geometric`` and ``keep-heavy`` over a public domain, ``pure-sparse`` and
``compact`` whose draws are joint over keys) run on the driver after the distributed count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from privhist.core.data import Counts
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import RandomSource
from privhist.engines.keyed_noise import (
    COLUMNS,
    NOISE_BLOCKS,
    check_mechanism,
    draw_secret,
    finish,
    release_block,
)
from privhist.engines.spark.columns import arrow_keys
from privhist.io.release import Release


def _column_types(mechanism: Any, neighbouring: Neighbouring) -> dict[str, str]:
    """The Spark types of the mechanism's release columns, from a release of one made-up key
    under a fixed (public, discarded) stream: only the column layout is read."""
    big = 10**6
    units = [big] if neighbouring.relation is Relation.USER else None
    probe = Counts.from_arrays([0], [big], units, neighbouring=neighbouring)
    rel = release_block(
        mechanism, probe.keys, probe.counts, probe.units, neighbouring, bytes(32), 0, False
    )
    out = {}
    for name in COLUMNS:
        col = getattr(rel, name)
        if col is not None:
            out[name] = "double" if np.asarray(col).dtype.kind == "f" else "long"
    return out


def _block_function(
    mechanism: Any,
    neighbouring: Neighbouring,
    secret: bytes,
    private: bool,
    with_units: bool,
    types: dict[str, str],
) -> Callable[[Any, Any], Any]:
    """The ``applyInArrow`` function releasing one block (shipped with the secret)."""

    def run(group: Any, table: Any) -> Any:
        import pyarrow as pa

        block = int(group[0].as_py())
        keys = table.column("key").to_numpy(zero_copy_only=False)
        counts = np.asarray(table.column("count").to_numpy(zero_copy_only=False), dtype=np.int64)
        units = (
            np.asarray(table.column("units").to_numpy(zero_copy_only=False), dtype=np.int64)
            if with_units
            else None
        )
        if keys.dtype.kind not in "iu":
            keys = np.asarray(keys, dtype=object)
        rel = release_block(mechanism, keys, counts, units, neighbouring, secret, block, private)
        out_keys = rel.keys if rel.keys.dtype.kind in "iu" else rel.keys.tolist()
        arrays = [pa.array(out_keys, type=table.schema.field("key").type)]
        for name, kind in types.items():
            col = getattr(rel, name)
            arrays.append(pa.array(np.asarray(col, dtype="f8" if kind == "double" else "i8")))
        return pa.Table.from_arrays(arrays, names=["key", *types])

    return run


def released_frame(
    table: Any, neighbouring: Neighbouring, mechanism: Any, secret: bytes, private: bool
) -> tuple[Any, dict[str, str]]:
    """The released rows as a Spark DataFrame (``key`` and the mechanism's columns; not
    sorted) and the columns' Spark types."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    key_type = table.schema["key"].dataType
    if isinstance(key_type, StringType):
        code = F.conv(F.substring(F.sha2(F.col("key"), 256), 1, 8), 16, 10).cast("long")
    else:
        code = F.col("key").cast("long")
    with_units = "units" in table.columns
    types = _column_types(mechanism, neighbouring)
    fn = _block_function(mechanism, neighbouring, secret, private, with_units, types)
    schema = ", ".join([f"key {key_type.simpleString()}", *(f"{n} {t}" for n, t in types.items())])
    frame = table.withColumn("block", F.pmod(code, F.lit(NOISE_BLOCKS)))
    return frame.groupBy("block").applyInArrow(fn, schema), types


def release_table(
    table: Any,
    neighbouring: Neighbouring,
    mechanism: Any,
    rng: RandomSource,
    info: dict[str, Any],
) -> Release:
    """Draw the noise secret from ``rng`` (on the driver), release ``table`` on the executors and
    collect the released rows in canonical key order."""
    check_mechanism(mechanism, neighbouring, "release_table")
    secret = draw_secret(rng)
    frame, types = released_frame(table, neighbouring, mechanism, secret, rng.private)
    arrow = frame.toArrow()
    keys = arrow_keys(arrow.column("key"))
    order = np.argsort(keys, kind="stable")
    cols: dict[str, Any] = {}
    for name, kind in types.items():
        col = np.asarray(arrow.column(name).to_numpy(), dtype="f8" if kind == "double" else "i8")
        cols[name] = col[order]
    return finish(mechanism, keys[order], cols, rng, info)
