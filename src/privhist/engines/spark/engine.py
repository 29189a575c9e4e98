"""The Spark engine: :class:`~privhist.engines.base.Engine` on Apache Spark DataFrames.

``SparkEngine(spark)`` counts a Spark ``DataFrame`` (or a CSV/TSV, Parquet or NDJSON file that
Spark reads) with the DataFrame API: null accounting, contribution bounding and per-key counts and
units run on the executors. Per-key mechanisms then draw on the executors too, from keyed streams
(:mod:`privhist.engines.spark.noise`, :meth:`SparkEngine.prepare_release`), and only the released
rows come back to the driver; other mechanisms draw on the driver from the per-key table (one row
per distinct key). The mechanisms and the :class:`~privhist.session.Session` are the same as with
the local engine::

    from privhist import Session
    from privhist.engines.spark import SparkEngine

    release = Session(engine=SparkEngine(spark)).histogram(
        spark.read.parquet("s3://lake/visits"), key="page", user="user_id",
        max_partitions=5, epsilon=1, delta=1e-8)

Randomness on the executors
---------------------------
Spark's ``rand()`` and any seed shipped to executors are never used. Contribution bounding needs one
priority per (user, key) pair; they come from :mod:`privhist.engines.priorities`: a 256-bit secret
is drawn on the driver from the release's :class:`~privhist.core.random.RandomSource` (the
operating system's CSPRNG for a private release) and shipped to the executors, which compute each
pair's priority as AES-256 of the pair's 128-bit code in vectorised Arrow batches
(``mapInArrow``). A priority is a function of the pair and the secret only, so:

* it does not depend on how Spark partitions or orders the data (a test counts the same data in
  1 and in 7 partitions), and
* uniformity and independence are those of a pseudorandom function: on distinct pairs the
  priorities are indistinguishable from i.i.d. uniform 64-bit values, so each user keeps a uniform
  ``k``-subset of their keys, independently of every other user (the argument in
  :mod:`privhist.engines.priorities`).

The secret is drawn only when some user holds more than ``k`` keys, exactly as the local engine
does, so for the same seed (a NOT private run) both engines compute the same priorities and the
same counts, and **the same release**: with noise on the executors, the local engine's
:class:`~privhist.engines.keyed_noise.KeyedNoise` draw; with ``noise="driver"``, the plain local
engine's draw. The tests compare them. Each user keeps the ``k`` pairs of smallest priority
(ties, which need equal codes, broken by key order), through a window ``row_number`` over the
user's pairs.

Key and user types follow the local engine's rules (:mod:`privhist.io.readers`): files' keys are
text unless ``key_type="int"`` (each key cast on its own; a key that is not an integer is a null
key); a table's integer columns stay integers. Text and FIMI files are read by the local engine
only. Priorities are stored as signed 64-bit values shifted by ``2**63``, which preserves their
unsigned order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, Final

import numpy as np

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, UnsupportedError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.release import Release
from privhist.engines.base import CountRequest
from privhist.engines.keyed_noise import runs_per_key
from privhist.engines.priorities import PairPriorities

#: file formats the Spark engine reads itself
SPARK_FORMATS = ("csv", "tsv", "parquet", "ndjson")

#: where per-key mechanisms draw their noise
NOISE_PLACES: Final[tuple[str, ...]] = ("executors", "driver")

_SHIFT = np.uint64(1 << 63)


def _is_spark_frame(source: Any) -> bool:
    return type(source).__module__.startswith("pyspark") and type(source).__name__ == "DataFrame"


class SparkEngine:
    """Counting on Apache Spark (see the module notes).

    Args:
        spark: the ``SparkSession``; by default the active one, or a new ``local[*]`` session.
    """

    name = "spark"
    #: provides a weighted source (:meth:`weighted_source`) for the weighted selectors
    weighted = True

    def __init__(self, spark: Any = None, *, noise: str = "executors") -> None:
        if noise not in NOISE_PLACES:
            raise ValidationError("noise", "SparkEngine", "'executors' or 'driver'", noise)
        self._spark = spark
        self.noise = noise

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from pyspark.sql import SparkSession

            self._spark = SparkSession.builder.master("local[*]").getOrCreate()
        return self._spark

    def accepts(self, source: Any) -> bool:
        return _is_spark_frame(source) or isinstance(source, str | os.PathLike)

    def describe(self, source: Any) -> str:
        if isinstance(source, str | os.PathLike):
            return os.fspath(source)
        return "a Spark DataFrame"

    def weighted_source(self, source: Any, request: CountRequest, rng: RandomSource) -> Any:
        """The distinct (user, key) pairs of ``source``, kept on the executors, as a
        :class:`~privhist.core.weighted.WeightedSource` for the weighted selectors (WGM,
        DP-SIPS): :class:`~privhist.engines.spark.weighting.SparkWeightedSource`."""
        from privhist.engines.spark.weighting import SparkWeightedSource

        fn = "weighted_source"
        if not request.user_level:
            raise ValidationError(
                "user", fn, "a user column (weighted selectors are user-level)", None
            )
        df, from_file = self._frame(source, request, fn)
        return SparkWeightedSource(self._select(df, request, from_file, fn), rng)

    def count(
        self,
        source: Any,
        request: CountRequest,
        rng: RandomSource,
        *,
        progress: bool = False,
    ) -> Counts:
        table, info, neighbouring = self.count_table(source, request, rng)
        info.pop("keys_counted")
        try:
            keys, counts, units = _collect(table, with_units="units" in table.columns)
        finally:
            table.unpersist()
        return Counts.from_arrays(
            keys, counts, units, neighbouring=neighbouring, info=info, function="count"
        )

    def prepare_release(
        self,
        source: Any,
        request: CountRequest,
        mechanism: Any,
        rng: RandomSource,
        *,
        progress: bool = False,
    ) -> Callable[[], Release]:
        """Count ``source`` now and return the function that draws the release (the release
        path calls it inside its ledger transaction).

        With ``noise="executors"`` (the default) a per-key mechanism
        (:func:`privhist.engines.keyed_noise.runs_per_key`) draws on the executors from keyed
        streams (:mod:`privhist.engines.spark.noise`); the release equals
        :func:`privhist.engines.keyed_noise.release_keyed` of the local engine's counts for the
        same seed. Every other mechanism, and every mechanism with ``noise="driver"``, draws on
        the driver from the collected per-key table, exactly as with the local engine.
        """
        if self.noise == "executors" and runs_per_key(mechanism):
            from privhist.engines.spark.noise import release_table

            table, info, neighbouring = self.count_table(source, request, rng)
            keys_counted = info.pop("keys_counted")

            def draw_on_executors() -> Release:
                try:
                    release = release_table(table, neighbouring, mechanism, rng, info)
                finally:
                    table.unpersist()
                release.diagnostics.setdefault("distinct_keys_counted", keys_counted)
                release.diagnostics.setdefault("engine", self.name)
                release.diagnostics["noise"] = "executors"
                return release

            return draw_on_executors
        counts = self.count(source, request, rng, progress=progress)

        def draw_on_driver() -> Release:
            release: Release = mechanism.release(counts, rng)
            release.diagnostics.setdefault("distinct_keys_counted", len(counts))
            release.diagnostics.setdefault("engine", self.name)
            release.diagnostics["noise"] = "driver"
            return release

        return draw_on_driver

    def count_table(
        self, source: Any, request: CountRequest, rng: RandomSource
    ) -> tuple[Any, dict[str, Any], Neighbouring]:
        """The per-key table ``(key, count[, units])`` as a cached Spark DataFrame (one row per
        key kept, in no order; the caller unpersists it), the count's facts and the
        neighbouring relation the bounds give."""
        from pyspark.sql import functions as F

        fn = "count"
        df, from_file = self._frame(source, request, fn)
        user_level = request.user_level
        df = self._select(df, request, from_file, fn)
        nulls = df.agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.col("key").isNull().cast("long")).alias("null_keys"),
            (
                F.sum(F.col("user").isNull().cast("long")) if user_level else F.lit(0).cast("long")
            ).alias("null_users"),
        ).collect()[0]
        info: dict[str, Any] = {
            "records": int(nulls["records"]),
            "null_keys": int(nulls["null_keys"] or 0),
        }
        if not user_level:
            table = (
                df.filter(F.col("key").isNotNull())
                .groupBy("key")
                .agg(F.count(F.lit(1)).alias("count"))
                .cache()
            )
            row = table.agg(F.count(F.lit(1)).alias("keys"), F.sum("count").alias("n")).collect()
            keys = int(row[0]["keys"])
            info.update({"distinct_keys": keys, "records_kept": int(row[0]["n"] or 0)})
            info["keys_counted"] = keys
            return table, info, Neighbouring.add_remove()

        k = request.max_partitions if request.max_partitions is not None else 1
        c = request.max_per_partition if request.max_per_partition is not None else 1
        info["null_users"] = int(nulls["null_users"] or 0)
        pairs = (
            df.filter(F.col("key").isNotNull() & F.col("user").isNotNull())
            .groupBy("user", "key")
            .agg(F.count(F.lit(1)).alias("n"))
            .cache()
        )
        try:
            sizes = pairs.groupBy("user").agg(F.count(F.lit(1)).alias("s"))
            stats = sizes.agg(
                F.count(F.lit(1)).alias("users"),
                F.sum((F.col("s") > k).cast("long")).alias("bounded"),
            ).collect()[0]
            users, bounded = int(stats["users"]), int(stats["bounded"] or 0)
            distinct_keys = pairs.select("key").distinct().count()
            if bounded:
                from pyspark.sql.window import Window

                priorities = PairPriorities.draw(rng)  # on the driver, as the local engine
                ranked = pairs.mapInArrow(
                    _priority_batches(priorities.secret),
                    f"{_ddl(pairs, 'user')}, {_ddl(pairs, 'key')}, n long, priority long",
                )
                order = Window.partitionBy("user").orderBy("priority", "key")
                kept = ranked.withColumn("rank", F.row_number().over(order)).filter(
                    F.col("rank") <= k
                )
            else:
                kept = pairs
            table = (
                kept.groupBy("key")
                .agg(
                    F.sum(F.least(F.col("n"), F.lit(c))).alias("count"),
                    F.count(F.lit(1)).alias("units"),
                )
                .cache()
            )
            row = table.agg(F.count(F.lit(1)).alias("keys"), F.sum("count").alias("n")).collect()
        finally:
            pairs.unpersist()
        info.update(
            {
                "users": users,
                "distinct_keys": int(distinct_keys),
                "users_bounded": bounded,
                "records_kept": int(row[0]["n"] or 0),
                "max_partitions_contributed": k,
                "max_contributions_per_partition": c,
                "keys_counted": int(row[0]["keys"]),
            }
        )
        return table, info, Neighbouring.user(k, c)

    # -- reading -------------------------------------------------------------------------------

    def _frame(self, source: Any, request: CountRequest, fn: str) -> tuple[Any, bool]:
        if _is_spark_frame(source):
            if request.format is not None:
                raise ValidationError("format", fn, "None when source is a table", request.format)
            if isinstance(request.user, bool):
                raise ValidationError(
                    "user", fn, "a column name when source is a table", request.user
                )
            return source, False
        if not isinstance(source, str | os.PathLike):
            raise ValidationError(
                "source", fn, "a Spark DataFrame or a file path", type(source).__name__
            )
        from privhist.io.readers import resolve_format

        path = os.fspath(source)
        fmt = resolve_format(path, request.format, fn)
        if fmt not in SPARK_FORMATS:
            raise UnsupportedError(
                f"the Spark engine reads {', '.join(SPARK_FORMATS)} files; {fmt} files are read "
                "by the local engine"
            )
        if not os.path.exists(path) and "://" not in path:
            raise InputDataError(f"cannot read {path}: no such file")
        reader = self.spark.read
        try:
            if fmt in ("csv", "tsv"):
                df = reader.csv(
                    path, header=True, inferSchema=False, sep="\t" if fmt == "tsv" else ","
                )
            elif fmt == "ndjson":
                df = reader.json(path)
            else:
                df = reader.parquet(path)
        except Exception as exc:  # Spark raises many kinds (AnalysisException, Py4JJavaError)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputDataError(f"cannot read {path}: {first}") from exc
        return df, True

    def _select(self, df: Any, request: CountRequest, from_file: bool, fn: str) -> Any:
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegralType, StringType

        from privhist.io.readers import check_key_type

        key_type = check_key_type(request.key_type, fn, default=None)
        if from_file and key_type is None:
            key_type = "str"
        fields = {f.name: f.dataType for f in df.schema.fields}
        wanted = [("key", request.key)]
        if request.user_level:
            wanted.append(("user", str(request.user)))
        for param, column in wanted:
            if column not in fields:
                names = ", ".join(map(repr, fields))
                raise InputDataError(
                    f"parameter '{param}' of {fn} must be one of the columns of the data "
                    f"({names}); got {column!r}"
                )
        key_dtype = fields[request.key]
        key = F.col(request.key)
        if key_type == "int" or (key_type is None and isinstance(key_dtype, IntegralType)):
            key = key.cast("long")
        elif not isinstance(key_dtype, StringType):
            key = key.cast("string")
        exprs = [key.alias("key")]
        if request.user_level:
            user_dtype = fields[str(request.user)]
            user = F.col(str(request.user))
            user = user.cast("long" if isinstance(user_dtype, IntegralType) else "string")
            exprs.append(user.alias("user"))
        return df.select(*exprs)


def _ddl(df: Any, column: str) -> str:
    return f"{column} {df.schema[column].dataType.simpleString()}"


def _priority_batches(secret: bytes) -> Any:
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


def _collect(table: Any, *, with_units: bool) -> tuple[Any, Any, Any]:
    """The per-key table on the driver as arrays (keys: int64, or an object array of text)."""
    arrow = table.toArrow()
    keys = arrow_keys(arrow.column("key"))
    counts = np.asarray(arrow.column("count").to_numpy(), dtype=np.int64)
    units = np.asarray(arrow.column("units").to_numpy(), dtype=np.int64) if with_units else None
    return keys, counts, units
