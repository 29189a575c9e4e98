"""The weighted source on Spark: the aggregate of the weighted selectors (WGM, DP-SIPS) on
DataFrames, equal to the local engine's for the same seed.

:class:`SparkWeightedSource` implements :class:`privhist.core.weighted.WeightedSource` over the
distinct (user, key) pairs of a Spark DataFrame (cached once, never collected), computing exactly
what :mod:`privhist.engines.local.weighting` computes:

* :meth:`~SparkWeightedSource.weighted_sums`: the pairs whose key is in ``exclude`` (keys released
  by an earlier DP-SIPS round) are removed from every user (a broadcast anti-join); each user's
  remaining degree ``t`` comes from a window count; a user holding more than ``max_keys`` keeps
  the ``max_keys`` pairs of smallest keyed priority (:mod:`privhist.engines.priorities`: AES-256
  of the pair's code under a 256-bit secret drawn on the driver, computed on the executors in
  ``mapInArrow`` batches); each kept pair weighs ``floor(scale / sqrt(min(t, max_keys)))``
  (Gopi et al. 2020, "Differentially Private Set Union", the weighted Gaussian algorithm, weights
  ``1 / sqrt(|S|)`` in integer units); the weights are summed per key (a group-by). Only the
  per-key table comes back to the driver.
* :meth:`~SparkWeightedSource.held_sums` is the same sum over subsets each user draws once per
  ``max_keys`` (the same bounding, cached on the source) and keeps: ``exclude`` removes keys from
  them without replacement, and ``t`` is recounted after the removal.
* :meth:`~SparkWeightedSource.unit_counts` and :meth:`~SparkWeightedSource.degree_histogram` are
  the same steps restricted to public keys, and a histogram of users' degrees.

Randomness is drawn from the source's :class:`~privhist.core.random.RandomSource` in the local
engine's order: one 256-bit secret per call that bounds some user (none otherwise), so a seeded
(NOT private) run of a selector gives the same release on both engines; the tests compare them.
The secret is the only thing shipped to the executors, and the priorities are a function of the
pair and the secret, so the result does not depend on how Spark partitions the data.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import check_positive_int
from privhist.core.weighted import WeightedCounts
from privhist.engines.local.weighting import _check_bounds, wanted_keys
from privhist.engines.priorities import PairPriorities
from privhist.engines.spark.columns import arrow_keys, ddl, priority_batches

#: the largest weight scale (as the local engine)
MAX_SCALE = 2**24


class SparkWeightedSource:
    """Distinct (user, key) pairs of a Spark DataFrame (columns ``user``, ``key``; no nulls).

    Args:
        pairs: the DataFrame of records (duplicates and nulls are dropped here).
        rng: the source of the keep priorities' secrets (default: :class:`SecureRandom`).
    """

    def __init__(self, pairs: Any, rng: RandomSource | None = None) -> None:
        from pyspark.sql import functions as F

        #: the distinct (user, key) rows, those with a null user or key included, each with its
        #: number of records ``n`` (cached: the pairs, :meth:`records_histogram` and the facts
        #: about null records are read from it)
        self._tallies = (
            pairs.select("user", "key").groupBy("user", "key").agg(F.count(F.lit(1)).alias("n"))
        ).cache()
        held = F.col("user").isNotNull() & F.col("key").isNotNull()
        #: the distinct pairs held (no nulls), with their numbers of records
        self._held_tallies = self._tallies.filter(held)
        self.pairs = self._held_tallies.select("user", "key")
        self.rng = rng or SecureRandom()
        # per max_keys: the held (user, key) pairs (cached), the users bounded, the pairs held
        self._held: dict[int, tuple[Any, int, int]] = {}

    def close(self) -> None:
        """Release the cached pairs (and the held subsets)."""
        for held, _, _ in self._held.values():
            held.unpersist()
        self._held.clear()
        self._tallies.unpersist()

    @property
    def null_records(self) -> dict[str, int]:
        """Records with a null key, and with a null user, left out (exact input facts, not
        private; as the local source states them)."""
        from pyspark.sql import functions as F

        if not hasattr(self, "_null_records"):
            n = F.col("n")
            row = self._tallies.agg(
                F.sum(F.when(F.col("key").isNull(), n).otherwise(0)).alias("null_keys"),
                F.sum(F.when(F.col("user").isNull(), n).otherwise(0)).alias("null_users"),
            ).first()
            self._null_records = {
                "null_keys": int(row["null_keys"] or 0) if row is not None else 0,
                "null_users": int(row["null_users"] or 0) if row is not None else 0,
            }
        return self._null_records

    # -- the three questions of a weighted selector ----------------------------------------------

    def weighted_sums(
        self, max_keys: int, scale: int, exclude: npt.ArrayLike | None = None
    ) -> WeightedCounts:
        fn = "weighted_sums"
        k = check_positive_int(max_keys, fn, "max_keys")
        s = check_positive_int(scale, fn, "scale")
        if s > MAX_SCALE:
            raise ValidationError("scale", fn, f"at most {MAX_SCALE}", s)
        remaining = self._without(self.pairs, exclude, keep=False)
        kept, stats = self._bound(remaining, k)
        keys, cols = _collect(_sums(kept, k, s), ("w", "units"))
        info: dict[str, Any] = {
            "users": stats["users_before"],
            "users_with_remaining_keys": stats["users"],
            "users_bounded": stats["bounded"],
            "pairs_remaining": stats["pairs"],
            "pairs_kept": int(cols["units"].sum()),
            **self.null_records,
        }
        return WeightedCounts(
            keys=keys, weights=cols["w"], scale=s, max_keys=k, units=cols["units"], info=info
        )

    def held_sums(
        self, max_keys: int, scale: int, exclude: npt.ArrayLike | None = None
    ) -> WeightedCounts:
        """Per-key sums over *held* subsets (see
        :meth:`privhist.core.weighted.WeightedSource.held_sums`): each user's subset of at most
        ``max_keys`` keys is drawn once, at the first call with this ``max_keys`` (the bounding
        of :meth:`weighted_sums`, one secret drawn only if some user is bounded), cached and kept
        until :meth:`close`; ``exclude`` removes keys from it without replacement, and each
        remaining key of a user with ``t`` of them left weighs ``floor(scale / sqrt(t))``."""
        from pyspark.sql import functions as F
        from pyspark.sql.window import Window

        fn = "held_sums"
        k = check_positive_int(max_keys, fn, "max_keys")
        s = check_positive_int(scale, fn, "scale")
        if s > MAX_SCALE:
            raise ValidationError("scale", fn, f"at most {MAX_SCALE}", s)
        if k not in self._held:
            kept, stats = self._bound(self.pairs, k)
            held = kept.select("user", "key").cache()
            self._held[k] = (held, stats["bounded"], stats["kept"])
        held, bounded, pairs_held = self._held[k]
        remaining = self._without(held, exclude, keep=False)
        recounted = remaining.withColumn("t", F.count(F.lit(1)).over(Window.partitionBy("user")))
        keys, cols = _collect(_sums(recounted, k, s), ("w", "units"))
        info: dict[str, Any] = {
            "users": self._users(),
            "users_bounded": bounded,
            "pairs_held": pairs_held,
            "pairs_kept": int(cols["units"].sum()),
            **self.null_records,
        }
        return WeightedCounts(
            keys=keys, weights=cols["w"], scale=s, max_keys=k, units=cols["units"], info=info
        )

    def unit_counts(self, keys: npt.ArrayLike, max_keys: int) -> Counts:
        from pyspark.sql import functions as F

        fn = "unit_counts"
        k, wanted = wanted_keys(keys, max_keys, fn)
        if wanted.size == 0:
            return Counts.from_arrays(
                wanted, np.zeros(0, dtype=np.int64), neighbouring=Neighbouring.user(k, 1)
            )
        inside = self._without(self.pairs, wanted, keep=True)
        kept, _ = self._bound(inside, k)
        held_keys, cols = _collect(
            kept.groupBy("key").agg(F.count(F.lit(1)).alias("units")), ("units",)
        )
        counts = np.zeros(wanted.shape[0], dtype=np.int64)
        if held_keys.size:
            pos = np.searchsorted(wanted, held_keys)
            counts[pos] = cols["units"]
        return Counts.from_arrays(
            wanted, counts, counts, neighbouring=Neighbouring.user(k, 1), function=fn
        )

    def degree_histogram(self, bounds: npt.ArrayLike) -> npt.NDArray[np.int64]:
        from pyspark.sql import functions as F

        b = _check_bounds(bounds, "degree_histogram")
        sizes = (
            self.pairs.groupBy("user")
            .agg(F.count(F.lit(1)).alias("d"))
            .groupBy("d")
            .agg(F.count(F.lit(1)).alias("users"))
            .toArrow()
        )
        degrees = np.asarray(sizes.column("d").to_numpy(), dtype=np.int64)
        users = np.asarray(sizes.column("users").to_numpy(), dtype=np.int64)
        bucket = np.searchsorted(b, degrees, side="left")
        return np.bincount(bucket, weights=users, minlength=b.size + 1).astype(np.int64)

    def records_histogram(self, bounds: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Users per bucket of the most records a user holds on one key (see
        :meth:`privhist.core.weighted.WeightedSource.records_histogram`)."""
        from pyspark.sql import functions as F

        b = _check_bounds(bounds, "records_histogram")
        most = (
            self._held_tallies.groupBy("user")
            .agg(F.max("n").alias("m"))
            .groupBy("m")
            .agg(F.count(F.lit(1)).alias("users"))
            .toArrow()
        )
        m = np.asarray(most.column("m").to_numpy(), dtype=np.int64)
        users = np.asarray(most.column("users").to_numpy(), dtype=np.int64)
        bucket = np.searchsorted(b, m, side="left")
        return np.bincount(bucket, weights=users, minlength=b.size + 1).astype(np.int64)

    # -- steps ---------------------------------------------------------------------------------

    def _without(self, pairs: Any, keys: npt.ArrayLike | None, *, keep: bool) -> Any:
        """``pairs`` restricted to (``keep``) or cleared of the public ``keys``."""
        if keys is None:
            return pairs if not keep else pairs.limit(0)
        arr = np.asarray(keys)
        if arr.size == 0:
            return pairs if not keep else pairs.limit(0)
        from pyspark.sql import functions as F

        key_type = pairs.schema["key"].dataType
        values = [str(v) for v in arr.tolist()] if arr.dtype == object else arr.tolist()
        spark = pairs.sparkSession
        if key_type.simpleString() == "string":
            frame = spark.createDataFrame([(str(v),) for v in values], "key string")
        else:
            ints = [int(v) for v in values if _is_int(v)]
            frame = spark.createDataFrame([(v,) for v in ints], "key long")
        frame = F.broadcast(frame.withColumn("key", F.col("key").cast(key_type)).distinct())
        return pairs.join(frame, on="key", how="left_semi" if keep else "left_anti")

    def _bound(self, pairs: Any, k: int) -> tuple[Any, dict[str, int]]:
        """Each user's pairs with ``t`` (the user's number of pairs) and, for users holding more
        than ``k``, only the ``k`` of smallest priority; plus counts of users, pairs and pairs
        kept (``kept``)."""
        from pyspark.sql import functions as F
        from pyspark.sql.window import Window

        sized = pairs.withColumn("t", F.count(F.lit(1)).over(Window.partitionBy("user"))).cache()
        try:
            row = sized.agg(
                F.countDistinct("user").alias("users"),
                F.count(F.lit(1)).alias("pairs"),
                F.countDistinct(F.when(F.col("t") > k, F.col("user"))).alias("bounded"),
                F.count(F.when(F.col("t") <= k, F.lit(1))).alias("small"),
            ).collect()[0]
            stats = {
                "users": int(row["users"]),
                "pairs": int(row["pairs"]),
                # pairs kept: all of a user's up to k, k of a bounded user's
                "kept": int(row["small"] or 0) + k * int(row["bounded"] or 0),
                "bounded": int(row["bounded"] or 0),
                "users_before": int(self._users()),
            }
            if not stats["bounded"]:
                return sized, stats
            # as the local engine: the secret is drawn only when some user is bounded
            secret = PairPriorities.draw(self.rng).secret
            big = sized.filter(F.col("t") > k).select(
                "user", "key", F.lit(1).cast("long").alias("n")
            )
            ranked = big.mapInArrow(
                priority_batches(secret),
                f"{ddl(big, 'user')}, {ddl(big, 'key')}, n long, priority long",
            )
            order = Window.partitionBy("user").orderBy("priority", "key")
            top = (
                ranked.withColumn("rank", F.row_number().over(order))
                .filter(F.col("rank") <= k)
                .select("user", "key", F.lit(k).cast("long").alias("t"))
            )
            small = sized.filter(F.col("t") <= k).select("user", "key", "t")
            return small.unionByName(top), stats
        finally:
            sized.unpersist(blocking=False)

    def _users(self) -> int:
        if not hasattr(self, "_user_count"):
            self._user_count = int(self.pairs.select("user").distinct().count())
        return self._user_count


def _sums(kept: Any, k: int, s: int) -> Any:
    """Per-key sums of ``isqrt(s**2 // t)`` over pairs with a column ``t`` (each pair's user's
    number of pairs, at most ``k``), with ``units``, the number of pairs (users) per key."""
    from pyspark.sql import functions as F

    table = [0] + [math.isqrt(s * s // t) for t in range(1, k + 1)]
    weights = F.array(*[F.lit(int(w)).cast("long") for w in table])
    return (
        kept.withColumn("w", F.element_at(weights, (F.least(F.col("t"), F.lit(k)) + 1).cast("int")))
        .groupBy("key")
        .agg(F.sum("w").alias("w"), F.count(F.lit(1)).alias("units"))
    )


def _is_int(value: Any) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return True


def _collect(table: Any, columns: tuple[str, ...]) -> tuple[Any, dict[str, npt.NDArray[np.int64]]]:
    """A per-key table on the driver, sorted by key."""
    arrow = table.toArrow()
    keys = arrow_keys(arrow.column("key"))
    order = np.argsort(keys, kind="stable")
    cols = {
        name: np.asarray(arrow.column(name).to_numpy(), dtype=np.int64)[order] for name in columns
    }
    return keys[order], cols
