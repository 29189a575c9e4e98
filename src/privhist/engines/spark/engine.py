"""The Spark engine: :class:`~privhist.engines.base.Engine` on Apache Spark DataFrames.

``SparkEngine(spark)`` counts a Spark ``DataFrame`` (or a CSV/TSV, Parquet or NDJSON file that
Spark reads) with the DataFrame API: null accounting, contribution bounding and per-key counts and
units run on the executors. Per-key mechanisms then draw from keyed streams (the
:class:`~privhist.core.requests.KeyedDraw` request): on the executors
(:mod:`privhist.engines.spark.noise`), and only the released rows come back to the driver; or,
when the per-key table has at most ``driver_keys`` keys, on the driver from the collected table,
which saves a Spark job and gives the same release. Other mechanisms draw on the driver from the
per-key table (one row per distinct key). The mechanisms and the
:class:`~privhist.session.Session` are the same as with the local engine::

    from privhist import Session
    from privhist.engines.spark import SparkEngine

    release = Session(engine=SparkEngine(spark)).histogram(
        spark.read.parquet("s3://lake/visits"), key="page", user="user_id",
        max_partitions=5, epsilon=1, delta=1e-8)

Sessions and paths
------------------
The engine never starts Spark: it reads a DataFrame with the DataFrame's own session and a file
with the session it was given or the one active in this process
(:mod:`privhist.engines.spark.sessions`), classic or Spark Connect alike; with none, a file is
refused with a typed error. A file given as a URI (``hdfs://``, ``s3a://``, ``file:/``, ``dbfs:/``)
goes to Spark unchecked, and Spark's own message says what is missing; a plain path is a file on
this machine, checked here and given to Spark as its ``file:`` URI. Parquet releases are written
on the destination's own file system (:mod:`privhist.engines.spark.publish`).

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
:class:`~privhist.core.requests.KeyedDraw` answer (``Session(noise_on="executors")``); with
``noise_on="driver"``, the plain local engine's draw. The tests compare them. Each user keeps the
``k`` pairs of smallest priority (ties, which need equal codes, broken by key order).

A source of at most ``driver_rows`` records (2**22 by default) is counted on the driver instead,
by the local engine from its key and user columns collected as Arrow, to the same release
(:class:`SparkEngine`); ``release.diagnostics["counting"]`` says where a keyed draw counted.
Otherwise counting is one Spark job (:mod:`privhist.engines.spark.bounding`): the records are
shuffled by user once; each partition is null-counted, grouped into pairs, bounded and counted per
key in one ``mapInArrow`` pass; a ``groupBy(key)`` of the partitions' rows gives the per-key
table, with the count's facts (records, nulls, users) in its null-key row. The secret is drawn
before that pass (it cannot know yet whether some user holds more than ``k`` keys); when none
does, a seeded source is put back to its state before the draw, so that seeded runs still read
the local engine's words. Vote selection's votes (:class:`~privhist.core.requests.UserVotes`)
are cast on the driver from the distinct (user, key) pairs the executors find: the rule is
sequential over users. A Parquet release is written by Spark itself, staged and published after
the spend commits (:mod:`privhist.engines.spark.publish`).

Key and user types follow the local engine's rules (:mod:`privhist.io.readers`): files' keys are
text unless ``key_type="int"`` (each key cast on its own; a key that is not an integer is a null
key); a table's integer columns stay integers. Text and FIMI files are read by the local engine
only. Priorities are stored as signed 64-bit values shifted by ``2**63``, which preserves their
unsigned order.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from privhist.core.data import Counts
from privhist.core.errors import (
    InputDataError,
    MissingInputError,
    UnsupportedError,
    ValidationError,
)
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.requests import (
    ColumnValues,
    Fields,
    GroupAggregates,
    GroupTable,
    KeyCounts,
    KeyedDraw,
    KeyWeights,
    Request,
    UserKeys,
    UserVotes,
    ValueRange,
    Values,
)
from privhist.core.validation import check_positive_int
from privhist.core.weighted import VoteCounts
from privhist.engines.base import Draw, Engine, Handler, Publisher
from privhist.engines.priorities import PairPriorities
from privhist.engines.spark.columns import arrow_keys, ddl
from privhist.engines.weights import per_key_weights
from privhist.io.files import local_uri, uri_scheme
from privhist.io.release import Release

#: file formats the Spark engine reads itself
SPARK_FORMATS = ("csv", "tsv", "parquet", "ndjson")

#: the default largest per-key table drawn on the driver (:class:`SparkEngine`): 2**20 keys
#: are about 25 MB of integer columns there
DRIVER_KEYS = 2**20

#: the default largest source counted on the driver (:class:`SparkEngine`): 2**22 records are
#: 64 MB of integer (key, user) columns there
DRIVER_ROWS = 2**22

#: the most bytes per record (of ``driver_rows``) that Spark's size estimate of the selected
#: columns may give for a source to be counted for the driver: Spark estimates a text value at 20
#: bytes and a long at 8, so a table of text keys and users is within it, and so is a file
#: (estimated by its size on disk) of up to ``driver_rows`` lines of that width. A larger
#: estimate says the source is large, and counting its records would be a job for nothing
ROW_BYTES = 64

#: the text of a key that ``key_type="int"`` reads as an integer (Java regex, ASCII digits);
#: :mod:`privhist.io.readers` states the rule
INTEGER_TEXT = r"\A[+-]?[0-9]+\z"


#: what :meth:`SparkEngine.compute`'s spinner says Spark is doing for a request
_VERBS: Mapping[type[Request], str] = {
    GroupAggregates: "Aggregating",
    ColumnValues: "Reading",
    KeyWeights: "Reading",
    ValueRange: "Reading",
}


def _is_spark_frame(source: Any) -> bool:
    return type(source).__module__.startswith("pyspark") and type(source).__name__ == "DataFrame"


class SparkEngine(Engine):
    """Counting on Apache Spark (see the module notes).

    Args:
        spark: the ``SparkSession`` (classic or Spark Connect). By default the session of the
            source DataFrame, or for a file path the session active in this process
            (:func:`~privhist.engines.spark.sessions.active_session`); the engine never starts
            one.
        driver_keys: the largest per-key table whose keyed draw (``noise_on="executors"``, the
            default) runs on the driver, from the same keyed streams and so to the same release,
            instead of in a Spark job: collecting a table of up to this many keys from the
            cached count costs less than a job that groups it into noise blocks (a warm
            stability histogram of 10**6 user-level records on ``local[2]``: 2.6 CPU s in all
            instead of 3.0, medians of 6 interleaved runs). 0 draws every table on the
            executors.
        driver_rows: the largest source (records, nulls included) whose keys are counted on
            the driver: its key and user columns, read and typed as on the executors, come to
            the driver as one Arrow table, and the local engine counts them (per-key counts,
            the weighted selectors' pairs, vote selection's votes) with the same priorities,
            and draws from the same keyed streams, so the release is the same; a source this
            small costs more in Spark's jobs than in counting (a cold user-level histogram of
            10**6 records on ``local[2]``: about 2 CPU s on the driver, 7-9 on the
            executors). A source is counted first (a Parquet file on this machine from its
            footers, any other by one Spark job) when Spark's size estimate of its selected
            columns (plan statistics, no job) is at most :data:`ROW_BYTES` bytes a record, and
            collected only when it has at most ``driver_rows`` records: a larger source never
            comes to the driver, and pays for the count when the estimate let it through (a
            job of 0.3-0.5 CPU s for 10**7 Parquet records in a warm session, none for a local
            Parquet file). Spark Connect gives no estimate: it always counts on the executors.
            0 counts every source there.
    """

    name = "spark"

    def __init__(
        self,
        spark: Any = None,
        *,
        driver_keys: int = DRIVER_KEYS,
        driver_rows: int = DRIVER_ROWS,
    ) -> None:
        self._spark = spark
        self._build: Callable[[], Any] | None = None
        self.driver_keys = check_positive_int(driver_keys, "SparkEngine", "driver_keys", minimum=0)
        self.driver_rows = check_positive_int(driver_rows, "SparkEngine", "driver_rows", minimum=0)

    @classmethod
    def when_needed(
        cls,
        build: Callable[[], Any],
        *,
        driver_keys: int = DRIVER_KEYS,
        driver_rows: int = DRIVER_ROWS,
    ) -> SparkEngine:
        """An engine whose session ``build()`` makes when a release first needs one (to read a
        source, or to check a Parquet destination), once; a dry run, or a release its
        parameters or its budget refuse, starts no Spark. The ``privhist`` command's engine."""
        engine = cls(driver_keys=driver_keys, driver_rows=driver_rows)
        engine._build = build
        return engine

    @property
    def spark(self) -> Any:
        """The session given (or built, :meth:`when_needed`), else the one active in this
        process (a typed error if none)."""
        if self._spark is None and self._build is not None:
            self._spark = self._build()
        if self._spark is not None:
            return self._spark
        from privhist.engines.spark.sessions import active_session

        return active_session("SparkEngine")

    def session_for(self, source: Any) -> Any:
        """The session that reads ``source``: the one given, else a DataFrame's own, else the
        active one."""
        if self._spark is None and _is_spark_frame(source):
            return source.sparkSession
        return self.spark

    def accepts(self, source: Any) -> bool:
        return _is_spark_frame(source) or isinstance(source, str | os.PathLike)

    def describe(self, source: Any) -> str:
        if isinstance(source, str | os.PathLike):
            return os.fspath(source)
        return "a Spark DataFrame"

    def handlers(self) -> Mapping[type[Request], Handler]:
        return {
            KeyCounts: self._key_counts,
            UserKeys: self._user_keys,
            UserVotes: self._user_votes,
            ColumnValues: self._column_values,
            KeyWeights: self._key_weights,
            KeyedDraw: self._keyed_draw,
            GroupAggregates: self._group_aggregates,
            ValueRange: self._value_range,
        }

    def compute(
        self, source: Any, request: Request, rng: RandomSource, *, progress: bool = False
    ) -> Any:
        """:meth:`Engine.compute <privhist.engines.base.Engine.compute>`, with a spinner and the
        time elapsed on a terminal while Spark works (``progress``, as the local engine shows
        its reads): the command line turns Spark's own progress bar off, and a release on a
        cluster can take minutes."""
        from privhist.engines.local.progress import status

        verb = _VERBS.get(type(request), "Counting")
        with status(f"{verb} {self.describe(source)} on Spark", enabled=progress):
            return super().compute(source, request, rng, progress=progress)

    def publisher(
        self, output: str | os.PathLike[str], format: str | None, source: Any = None
    ) -> Publisher | None:
        """The Spark writer of a Parquet ``output`` on its own file system
        (:func:`~privhist.engines.spark.publish.parquet_publisher`), so every Parquet release
        of this engine is a dataset written by Spark with the session that reads ``source``."""
        from privhist.engines.spark.publish import parquet_publisher

        return parquet_publisher(self.session_for(source), output, format)

    # -- the requests ----------------------------------------------------------------------

    def _key_counts(
        self, source: Any, request: KeyCounts, rng: RandomSource, progress: bool
    ) -> Counts:
        selected, answer = self._read(source, request, "count", rng, progress)
        if answer is not None:
            answered: Counts = answer
            return answered
        counted = self._count_selected(selected, request, rng)
        info = counted.info
        info.pop("keys_counted")
        try:
            keys, counts, units = _collect(counted.table, with_units="units" in counted.columns)
        finally:
            counted.close()
        return Counts.from_arrays(
            keys, counts, units, neighbouring=counted.neighbouring, info=info, function="count"
        )

    def _user_keys(self, source: Any, request: UserKeys, rng: RandomSource, progress: bool) -> Any:
        """The distinct (user, key) pairs of ``source``, kept on the executors, as a
        :class:`~privhist.core.weighted.WeightedSource` for the weighted selectors:
        :class:`~privhist.engines.spark.weighting.SparkWeightedSource`."""
        from privhist.engines.spark.weighting import SparkWeightedSource

        fn = "histogram"
        if not request.fields.user_level:
            raise ValidationError(
                "user", fn, "a user column (weighted selectors are user-level)", None
            )
        selected, answer = self._read(source, request, fn, rng, progress)
        if answer is not None:
            return answer
        return SparkWeightedSource(selected, rng)

    def _user_votes(
        self, source: Any, request: UserVotes, rng: RandomSource, progress: bool
    ) -> VoteCounts:
        """Vote selection's votes. The rule is sequential over users (each vote depends on the
        votes cast before it), so the distinct (user, key) pairs are found on the executors and
        collected to the driver, which runs the rule as the local engine does
        (:func:`~privhist.engines.local.weighting.vote_codes`, then
        :func:`~privhist.mechanisms.user_level.votes.cast_coded_votes`; other than text and
        integer columns by :func:`~privhist.mechanisms.user_level.votes.cast_votes`): the driver
        holds one row per distinct pair, and the votes equal the local engine's for a seed."""
        import polars as pl
        from pyspark.sql import functions as F

        from privhist.engines.local.weighting import null_records, vote_codes
        from privhist.mechanisms.user_level.votes import cast_coded_votes, cast_votes

        fn = "histogram"
        if not request.fields.user_level:
            raise ValidationError("user", fn, "a user column (vote selection is user-level)", None)
        selected, answer = self._read(source, request, fn, rng, progress)
        if answer is not None:
            votes: VoteCounts = answer
            return votes
        # the distinct pairs with their numbers of records, null users and keys included (for
        # the facts about the records left out, as the local engine states them)
        tallies = pl.from_arrow(
            selected.select("user", "key")
            .groupBy("user", "key")
            .agg(F.count(F.lit(1)).alias("n"))
            .toArrow()
        )
        assert isinstance(tallies, pl.DataFrame)
        nulls = null_records(tallies, "n")
        table = tallies.drop_nulls(["user", "key"]).select("user", "key")
        if all(t == pl.String or t.is_integer() for t in table.dtypes):
            # text and integers coded as the local engine codes them (arrow_keys's int64)
            coded = table.select(pl.col(pl.String), pl.exclude(pl.String).cast(pl.Int64))
            users, keys, labels = vote_codes(coded.select("user", "key"))
            votes = cast_coded_votes(
                users, keys, labels, cap=request.cap, top_cap=request.top_cap, rng=rng
            )
        else:
            pairs = table.to_arrow()
            votes = cast_votes(
                arrow_keys(pairs.column("user")),
                arrow_keys(pairs.column("key")),
                cap=request.cap,
                top_cap=request.top_cap,
                rng=rng,
            )
        votes.info.update(nulls)
        return votes

    def _column_values(
        self, source: Any, request: ColumnValues, rng: RandomSource, progress: bool
    ) -> Values:
        """The column's cells as text, each parsed on its own as a double on the executors
        (empty and non-numeric cells and NaN dropped and counted), collected as one array."""
        from pyspark.sql import functions as F

        fn = "quantiles"
        df, _ = self._frame(source, request.fields, fn)
        column = self._column(df, request.fields.key_column, "column", fn)
        x = F.trim(F.col(column).cast("string")).try_cast("double")
        values = df.select(F.when(~F.isnan(x), x).alias("x"))
        arrow = values.toArrow()
        raw = np.asarray(arrow.column("x").to_numpy(zero_copy_only=False), dtype=np.float64)
        kept = np.sort(raw[~np.isnan(raw)])  # canonical order, as every engine answers
        facts = {"rows": int(raw.shape[0]), "dropped": int(raw.shape[0] - kept.shape[0])}
        return Values(kept, facts=facts)

    def _key_weights(
        self, source: Any, request: KeyWeights, rng: RandomSource, progress: bool
    ) -> Values:
        """Keys as text and (with a weight column) weights parsed as doubles on the executors,
        then checked and aggregated by :func:`~privhist.engines.weights.per_key_weights` as
        every engine does."""
        from pyspark.sql import functions as F

        fn = "sample"
        df, _ = self._frame(source, request.fields, fn)
        key = self._column(df, request.fields.key_column, "key", fn)
        cols = [F.col(key).cast("string").alias("key")]
        if request.weight is not None:
            weight = self._column(df, request.weight, "weight", fn)
            w = F.trim(F.col(weight).cast("string")).try_cast("double")
            cols.append(w.alias("w"))
        arrow = df.select(*cols).toArrow()
        keys = np.array(arrow.column("key").to_pylist(), dtype=object)
        weights = None
        if request.weight is not None:
            weights = np.asarray(arrow.column("w").to_numpy(zero_copy_only=False), dtype=np.float64)
        return per_key_weights(keys, weights, request, fn)

    def _group_aggregates(
        self, source: Any, request: GroupAggregates, rng: RandomSource, progress: bool
    ) -> GroupTable:
        """Clamped sums and counts per group: Spark computes the keys and fixed-point values, and
        each partition of records shuffled by user is bounded and aggregated by the local
        engine's functions (:mod:`privhist.engines.spark.aggregate`)."""
        from pyspark.sql import functions as F

        from privhist.engines.spark.aggregate import (
            ROWS,
            aggregate_rows,
            collect_table,
            group_columns,
            parsed,
        )

        fn = "aggregate"
        fields = request.fields
        df, _ = self._frame(source, fields, fn)
        by = fields.by or (fields.key_column,)
        columns = sorted({s.column for s in request.values})
        user = str(fields.user) if fields.user_level else None
        for c in [*by, *([user] if user else []), *columns]:
            self._column(df, c, "by", fn)
        frame, types = group_columns(df, by, user, columns)
        index = {c: i for i, c in enumerate(columns)}
        exprs = [F.col("key"), *([F.col("user")] if user else [])]
        exprs += [parsed(F.col(f"v{index[c]}")).alias(f"x{index[c]}") for c in columns]
        frame = frame.select(*exprs)
        valid = F.col("key").isNotNull() & (F.col("user").isNotNull() if user else F.lit(True))
        key_is_int = len(by) == 1 and types == ("int",)
        inside = F.lit(True)
        if request.groups is not None:
            wanted = sorted({int(g) if key_is_int else str(g) for g in request.groups})
            inside = F.col("key").isin(wanted) if wanted else F.lit(False)
        row = frame.agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.col("key").isNull().cast("long")).alias("null_groups"),
            *([F.sum(F.col("user").isNull().cast("long")).alias("null_users")] if user else []),
            F.sum((valid & ~inside).cast("long")).alias("outside"),
        ).collect()[0]
        facts: dict[str, Any] = {
            "records": int(row["records"] or 0),
            "null_groups": int(row["null_groups"] or 0),
        }
        if user:
            facts["null_users"] = int(row["null_users"] or 0)
        if request.groups is not None:
            facts["records_outside_groups"] = int(row["outside"] or 0)
        kept = frame.filter(valid & inside)
        secret, undo = _tentative_secret(rng)
        parts = (kept.repartition("user") if user else kept).mapInArrow(
            aggregate_rows(secret, request, key_is_int),
            ROWS.format(key="bigint" if key_is_int else "string"),
        )
        summed = parts.groupBy("key", "name", "index").agg(F.sum("value").alias("value"))
        table = collect_table(summed, request, types, facts)
        if not (facts.get("users_bounded") or facts.get("pairs_bounded")):
            undo()  # no priority was used: the secret is not drawn (as the local engine)
        if not user:
            for name in ("users_bounded", "pairs_bounded", "users"):
                table.facts.pop(name, None)
        table.facts["records_kept"] = int(table.records.sum())
        return table

    def _value_range(
        self, source: Any, request: ValueRange, rng: RandomSource, progress: bool
    ) -> tuple[Any, Any]:
        from pyspark.sql import functions as F

        from privhist.engines.spark.aggregate import value_range_counts, value_units

        fn = "aggregate"
        fields = request.fields
        df, _ = self._frame(source, fields, fn)
        column = self._column(df, fields.key_column, "column", fn)
        cols = [F.col(column).alias("v0")]
        if fields.user_level:
            user = self._column(df, str(fields.user), "user", fn)
            cols.insert(0, F.col(user).alias("user"))
        return value_range_counts(value_units(df.select(*cols), request), request.grid)

    def _keyed_draw(
        self, source: Any, request: KeyedDraw, rng: RandomSource, progress: bool
    ) -> Draw:
        """Count now and return the draw of the keyed streams: on the executors, each per-key
        block of :mod:`privhist.engines.spark.noise` reads its stream; a table of at most
        :attr:`driver_keys` keys is collected and drawn on the driver by
        :func:`privhist.engines.keyed_noise.release_keyed`. Either way the release equals that of
        the local engine's counts for the same seed."""
        from privhist.engines.keyed_noise import release_keyed
        from privhist.engines.spark.noise import release_table

        mechanism = request.mechanism
        selected, answer = self._read(source, request, "count", rng, progress)
        if answer is not None:
            local: Draw = answer

            def draw_here() -> Release:
                release = local()
                release.diagnostics["noise"] = "driver (keyed)"
                release.diagnostics["counting"] = "driver"
                return release

            return draw_here
        counted = self._count_selected(selected, request.counts, rng)
        keys_counted = counted.info.pop("keys_counted")

        def draw() -> Release:
            try:
                if keys_counted <= self.driver_keys:
                    keys, counts, units = _collect(
                        counted.table, with_units="units" in counted.columns
                    )
                    table = Counts.from_arrays(
                        keys, counts, units, neighbouring=counted.neighbouring,
                        info=counted.info, function="count",
                    )  # fmt: skip
                    release, where = release_keyed(mechanism, table, rng), "driver (keyed)"
                else:
                    release = release_table(
                        counted.table, counted.neighbouring, mechanism, rng, counted.info
                    )
                    where = "executors"
            finally:
                counted.close()
            release.diagnostics.setdefault("distinct_keys_counted", keys_counted)
            release.diagnostics["noise"] = where
            release.diagnostics["counting"] = "executors"
            return release

        return draw

    def count_table(self, source: Any, request: KeyCounts, rng: RandomSource) -> Counted:
        """The per-key table ``(key, count[, units])`` as a Spark DataFrame over a cached
        aggregate (one row per key kept, in no order; the caller closes it), the count's facts
        and the neighbouring relation the bounds give.

        Counting is one Spark job: the facts (records, nulls, users) ride in the null-key row of
        the same aggregate as the per-key counts (:mod:`privhist.engines.spark.bounding`)."""
        return self._count_selected(self._selected(source, request.fields, "count"), request, rng)

    def _count_selected(self, df: Any, request: KeyCounts, rng: RandomSource) -> Counted:
        """:meth:`count_table` of the selected columns ``df`` (:meth:`_selected`)."""
        from pyspark.sql import functions as F

        if not request.fields.user_level:
            grouped = df.groupBy("key").agg(F.count(F.lit(1)).alias("count")).cache()
            key_row = F.col("key").isNotNull()
            try:
                row = grouped.agg(
                    F.sum("count").alias("records"),
                    F.sum(F.when(~key_row, F.col("count"))).alias("null_keys"),
                    F.count("key").alias("keys"),
                    F.sum(F.when(key_row, F.col("count"))).alias("kept"),
                ).collect()[0]
            except BaseException:
                grouped.unpersist()
                raise
            keys = int(row["keys"])
            info: dict[str, Any] = {
                "records": int(row["records"] or 0),
                "null_keys": int(row["null_keys"] or 0),
                "distinct_keys": keys,
                "records_kept": int(row["kept"] or 0),
                "keys_counted": keys,
            }
            return Counted(grouped, grouped.filter(key_row), info, Neighbouring.add_remove())

        from privhist.engines.local.counting import contribution_bounds
        from privhist.engines.spark.bounding import FACTS, partition_function, partition_schema

        k, c, defaulted = contribution_bounds(
            True, request.max_partitions, request.max_per_partition, "count"
        )
        secret, undo = _tentative_secret(rng)
        key_is_int = df.schema["key"].dataType.simpleString() == "bigint"
        partial = df.repartition("user").mapInArrow(
            partition_function(secret, k, c, key_is_int), partition_schema(ddl(df, "key"))
        )
        grouped = (
            partial.groupBy("key")
            .agg(
                F.sum("count").alias("count"),
                F.sum("units").alias("units"),
                *(F.sum(name).alias(name) for name in FACTS),
            )
            .cache()
        )
        try:
            row = grouped.agg(
                F.count("key").alias("distinct_keys"),
                F.sum((F.col("units") > 0).cast("long")).alias("keys_counted"),
                F.sum("count").alias("records_kept"),
                *(F.sum(name).alias(name) for name in FACTS),
            ).collect()[0]
        except BaseException:
            grouped.unpersist()
            raise
        facts = {name: int(row[name] or 0) for name in FACTS}
        if not facts["users_bounded"]:
            undo()  # no priority was used: the secret is not drawn (as the local engine)
        info = {
            "records": facts["records"],
            "null_keys": facts["null_keys"],
            "null_users": facts["null_users"],
            "users": facts["users"],
            "distinct_keys": int(row["distinct_keys"] or 0),
            "users_bounded": facts["users_bounded"],
            "records_kept": int(row["records_kept"] or 0),
            "max_partitions_contributed": k,
            "max_contributions_per_partition": c,
            "bounds_defaulted": defaulted,
            "keys_counted": int(row["keys_counted"] or 0),
        }
        table = grouped.filter(F.col("key").isNotNull() & (F.col("units") > 0)).select(
            "key", "count", "units"
        )
        return Counted(grouped, table, info, Neighbouring.user(k, c))

    # -- reading -------------------------------------------------------------------------------

    def _selected(self, source: Any, fields: Fields, fn: str) -> Any:
        """The records of ``source`` as a DataFrame of ``key`` (and ``user``), read and typed
        as every request of this engine reads them."""
        df, from_file = self._frame(source, fields, fn)
        return self._select(df, fields, from_file, fn)

    def _read(
        self, source: Any, request: Any, fn: str, rng: RandomSource, progress: bool
    ) -> tuple[Any, Any]:
        """The records of ``source`` as :meth:`_selected` reads them for ``request``, and the
        local engine's answer to ``request`` when they are few enough to count on the driver
        (:meth:`_on_driver`; the same priorities and keyed streams, so the same release), else
        None for the executors to answer. Inside :meth:`reading`, what was read for one request
        serves the next with the same fields."""
        memo = self._memo(source)
        read = None if memo is None else memo.get((request.fields, fn))
        if read is None:
            selected = self._selected(source, request.fields, fn)
            read = (selected, self._on_driver(selected, source, request.fields))
            if memo is not None:
                memo[(request.fields, fn)] = read
        selected, small = read
        if small is None:
            return selected, None
        # the spinner is :meth:`compute`'s: no second one on the driver
        return selected, _local().compute(small, _as_selected(request), rng)

    def _on_driver(self, selected: Any, source: Any, fields: Fields) -> Any:
        """``selected`` (the records of ``source``) as one Arrow table on the driver when it has
        at most :attr:`driver_rows` records, else None (see the class notes): counted only when
        Spark's size estimate of it (no job) is at most :data:`ROW_BYTES` a record -- a Parquet
        file on this machine from its footers, any other source by a Spark job -- and collected
        only when the count is at most :attr:`driver_rows`; a collect that fails leaves the
        source to the executors."""
        if self.driver_rows == 0:
            return None
        size = _estimated_bytes(selected)
        if size is None or size > ROW_BYTES * self.driver_rows:
            return None
        rows = _footer_rows(source, fields)
        if rows is None:
            rows = selected.count()  # one job (Spark reads a Parquet file's footers too)
        if rows > self.driver_rows:
            return None
        try:
            table = selected.toArrow()
        except Exception:  # e.g. above spark.driver.maxResultSize (long text keys)
            return None  # the executors count it, and raise again if the data is at fault
        return table if table.num_rows <= self.driver_rows else None  # grown since its count

    def _frame(self, source: Any, fields: Fields, fn: str) -> tuple[Any, bool]:
        reading = fields.reading
        if _is_spark_frame(source):
            if reading.format is not None:
                raise ValidationError(
                    "input_format", fn, "None when source is a table", reading.format
                )
            if isinstance(fields.user, bool):
                raise ValidationError(
                    "user", fn, "a column name when source is a table", fields.user
                )
            return source, False
        if not isinstance(source, str | os.PathLike):
            raise ValidationError(
                "source", fn, "a Spark DataFrame or a file path", type(source).__name__
            )
        from pathlib import Path

        from privhist.io.readers import FileFormat, separator_of

        path = os.fspath(source)
        spec = FileFormat(reading.format, reading.columns, reading.separator).resolve(path, fn)
        fmt = str(spec.name)
        if fmt not in SPARK_FORMATS:
            raise UnsupportedError(
                f"the Spark engine reads {', '.join(SPARK_FORMATS)} files; {fmt} files are read "
                "by the local engine"
            )
        local = uri_scheme(source) is None
        location = path
        if local:
            # a plain path is a file on this machine: checked here, read by Spark by its URI
            if not os.path.exists(path):
                raise InputDataError(f"cannot read {path}: no such file")
            location = local_uri(path)
        reader = self.spark.read
        try:
            if fmt in ("csv", "tsv"):
                # the separator as the local engine reads it (tabs detected from a local header)
                sep = separator_of(Path(path), spec) if local else spec.separator
                df = reader.csv(
                    location,
                    header=spec.columns is None,
                    inferSchema=False,
                    sep=sep or ("\t" if fmt == "tsv" else ","),
                )
                if spec.columns is not None:
                    if len(df.columns) != len(spec.columns):
                        raise MissingInputError(
                            "columns",
                            fn,
                            f"name every column of {path!r}, which has {len(df.columns)} field(s)",
                            f"{len(spec.columns)} name(s)",
                        )
                    df = df.toDF(*spec.columns)
            elif fmt == "ndjson":
                df = reader.json(location)
            else:
                df = reader.parquet(location)
            df.schema  # noqa: B018 (Spark Connect reads lazily: a missing file is found here)
        except InputDataError:
            raise
        except Exception as exc:  # Spark raises many kinds (AnalysisException, Py4JJavaError)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputDataError(f"cannot read {path}: {first}") from exc
        return df, True

    def _column(self, df: Any, column: str, param: str, fn: str) -> str:
        """``column`` if ``df`` has it, else the error naming the columns it has."""
        if column not in df.columns:
            names = ", ".join(map(repr, df.columns))
            raise MissingInputError(
                param, fn, f"be one of the columns of the data ({names})", repr(column)
            )
        return column

    def _select(self, df: Any, fields: Fields, from_file: bool, fn: str) -> Any:
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegralType, StringType

        from privhist.io.readers import check_key_type

        if fields.composite:
            # a key over several columns, as one text key (privhist.core.groups)
            from privhist.engines.spark.aggregate import group_columns

            assert fields.by is not None
            who = str(fields.user) if fields.user_level else None
            for c in [*fields.by, *([who] if who else [])]:
                self._column(df, c, "by", fn)
            frame, _ = group_columns(df, fields.by, who, ())
            return frame
        key_type = check_key_type(fields.reading.key_type, fn, default=None)
        if from_file and key_type is None:
            key_type = "str"
        schema = {f.name: f.dataType for f in df.schema.fields}
        wanted = [("key", fields.key_column)]
        if fields.user_level:
            wanted.append(("user", str(fields.user)))
        for param, column in wanted:
            if column not in schema:
                names = ", ".join(map(repr, schema))
                raise MissingInputError(
                    param, fn, f"be one of the columns of the data ({names})", repr(column)
                )
        key_dtype = schema[fields.key_column]
        key = F.col(fields.key_column)
        if isinstance(key_dtype, IntegralType) and key_type in (None, "int"):
            key = key.cast("long")
        elif key_type == "int":
            # each key on its own, as the local engine casts it: an optional sign and decimal
            # digits in the Int64 range, else a null key (Spark's own cast trims spaces, reads
            # "7.0" as 7, and under ANSI mode fails the whole job on the first such key)
            text = key if isinstance(key_dtype, StringType) else key.cast("string")
            key = F.when(text.rlike(INTEGER_TEXT), text.try_cast("long"))
        elif not isinstance(key_dtype, StringType):
            key = key.cast("string")
        exprs = [key.alias("key")]
        if fields.user_level:
            user_dtype = schema[str(fields.user)]
            user = F.col(str(fields.user))
            user = user.cast("long" if isinstance(user_dtype, IntegralType) else "string")
            exprs.append(user.alias("user"))
        return df.select(*exprs)


@dataclass
class Counted:
    """A distributed count: ``table`` (``key, count[, units]``, one row per key kept) is a view
    of the cached aggregate ``cached``; :meth:`close` releases the cache."""

    cached: Any
    table: Any
    info: dict[str, Any]
    neighbouring: Neighbouring

    @property
    def columns(self) -> list[str]:
        return list(self.table.columns)

    def close(self) -> None:
        self.cached.unpersist()


def _tentative_secret(rng: RandomSource) -> tuple[bytes, Callable[[], None]]:
    """The priorities' secret, drawn from ``rng`` before the one counting pass knows whether a
    user holds more than ``k`` keys, and the function that takes the draw back when none does.

    The local engine draws the secret only when some user is bounded; a seeded (NOT private)
    source is therefore restored to its state before the draw, so that both engines read the
    same words for the noise that follows. A private source is never restored: an unused draw
    from the operating system's CSPRNG has no effect on any release. (A non-private source whose
    state cannot be copied is not restored either: its releases stay valid, only the word-for-word
    equality with the local engine is lost when no user is bounded.)"""
    saved = None
    if not rng.private:
        with contextlib.suppress(Exception):
            saved = copy.deepcopy(rng.__dict__)
    secret = PairPriorities.draw(rng).secret

    def undo() -> None:
        if saved is not None:
            rng.__dict__.clear()
            rng.__dict__.update(saved)

    return secret, undo


def _estimated_bytes(df: Any) -> int | None:
    """Spark's own estimate of ``df``'s size in bytes, from the statistics of its optimised plan
    (no job runs; for files, their size scaled to the selected columns); None when the session
    gives none (Spark Connect)."""
    try:
        return int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    except Exception:  # no JVM handle (Spark Connect) or a plan without statistics
        return None


def _footer_rows(source: Any, fields: Fields) -> int | None:
    """The records of a Parquet file (or directory of Parquet files) on this machine, read from
    its footers on the driver without a Spark job; None for any other source."""
    if not isinstance(source, str | os.PathLike) or uri_scheme(source) is not None:
        return None
    from privhist.io.readers import FileFormat

    path, r = os.fspath(source), fields.reading
    try:
        if FileFormat(r.format, r.columns, r.separator).resolve(path, "count").name != "parquet":
            return None
        import pyarrow.dataset as ds

        return int(ds.dataset(path, format="parquet").count_rows())
    except Exception:  # unreadable here: Spark counts it
        return None


def _local() -> Engine:
    from privhist.engines.local import LocalEngine

    return LocalEngine()


def _as_selected(request: Any) -> Any:
    """``request`` with its fields naming the columns of :meth:`SparkEngine._selected`: ``key``
    and (user-level) ``user``, read as the table's own types."""
    fields = Fields("key", "user" if request.fields.user_level else None)
    return dataclasses.replace(request, fields=fields)


def _collect(table: Any, *, with_units: bool) -> tuple[Any, Any, Any]:
    """The per-key table on the driver as arrays (keys: int64, or an object array of text)."""
    arrow = table.toArrow()
    keys = arrow_keys(arrow.column("key"))
    counts = np.asarray(arrow.column("count").to_numpy(), dtype=np.int64)
    units = np.asarray(arrow.column("units").to_numpy(), dtype=np.int64) if with_units else None
    return keys, counts, units
