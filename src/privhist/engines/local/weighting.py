"""Per-user weighting for user-level key selection on one machine (Polars/NumPy).

The aggregate behind the weighted selectors of :mod:`privhist.mechanisms.user_level` (WGM,
DP-SIPS): per-user degree -> per-(user, key) weight -> per-key weight sums, all vectorised (one
sort and a few array passes; no per-user Python loop).

For a table of distinct (user, key) pairs, :func:`weighted_sums`

1. drops the pairs whose key is in ``exclude`` (keys released by an earlier round);
2. lets every user holding more than ``max_keys`` (``Delta0``) of the remaining keys keep a
   uniformly random ``max_keys``-subset of them: each pair draws an independent uniform 64-bit
   priority from the :class:`~privhist.core.random.RandomSource` and each user keeps its
   ``max_keys`` smallest (the engine's own contribution bounding,
   :func:`privhist.engines.local.counting.bound_contributions`);
3. gives each of a user's ``t`` kept keys the integer weight ``floor(scale / sqrt(t))``
   (``isqrt(scale**2 // t)``, exact), so the user's weight vector has L2 norm at most ``scale``
   units: Gopi et al. (2020), "Differentially Private Set Union" (the weighted Gaussian), with
   the weights ``1 / sqrt(|S|)`` scaled to integers and rounded down;
4. sums the weights per key.

What one user contributes depends only on its own pairs and fresh randomness, so adding or
removing a user changes the sums by a vector of L2 norm at most ``scale`` (the sensitivity the
mechanisms are calibrated for), on at most ``max_keys`` keys.

:class:`LocalWeightedSource` holds the pairs and a RandomSource and implements
:class:`privhist.core.weighted.WeightedSource`, so multi-round selectors ask it again with the
keys released so far excluded.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import check_positive_int
from privhist.core.weighted import WeightedCounts
from privhist.engines.local.counting import _bound, _collect, _int64, _keys, _sorted_pairs
from privhist.engines.priorities import LazyPriorities
from privhist.io.readers import (
    FileFormat,
    check_key_type,
    default_key_type,
    resolve_format,
    scan,
    select_records,
)

#: the largest weight scale (weights and their sums stay far inside int64)
MAX_SCALE = 2**24


def _integer_columns(records: pl.DataFrame) -> bool:
    return all(records.schema[c].is_integer() for c in ("user", "key"))


def _distinct_pairs(records: pl.DataFrame) -> pl.DataFrame:
    """The distinct (user, key) rows of ``records`` (no nulls), sorted by (user, key): by one
    sort of an integer code per record when both columns are integers, else by Polars."""
    if _integer_columns(records):
        found = _sorted_pairs(records["user"].to_numpy(), records["key"].to_numpy())
        if found is not None:
            users, keys, _ = found
            return pl.DataFrame(
                [
                    pl.Series("user", users).cast(records.schema["user"]),
                    pl.Series("key", keys).cast(records.schema["key"]),
                ]
            )
    return records.unique().sort("user", "key")


def null_records(tallies: pl.DataFrame, n: str) -> dict[str, int]:
    """From distinct (user, key) rows with their numbers of records in column ``n``, the
    records with a null key and those with a null user (as the record-level count states
    them: exact input facts, not private)."""
    records = tallies[n].cast(pl.Int64)
    return {
        "null_keys": int(records.filter(tallies["key"].is_null()).sum()),
        "null_users": int(records.filter(tallies["user"].is_null()).sum()),
    }


def vote_codes(
    pairs: pl.DataFrame,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[Any]]:
    """The ``user`` and ``key`` columns of ``pairs`` (no nulls) coded as
    :func:`~privhist.mechanisms.user_level.votes.cast_coded_votes` takes them: each value's rank
    among the column's distinct values in increasing order, and the distinct keys in that order.

    Text is ranked by Polars, which orders it by its UTF-8 bytes: the order of code points, which
    is how ``np.unique`` orders Python strings, so the codes, and the votes for a seed, are
    :func:`~privhist.mechanisms.user_level.votes.cast_votes`'s, without sorting Python objects
    one comparison at a time (0.8 s for the 8 * 10^5 pairs of the retail households). Other
    columns are coded by ``np.unique``."""

    def coded(column: pl.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
        if column.dtype == pl.String:
            ranks = column.rank("dense").cast(pl.Int64) - 1
            return ranks.to_numpy(), column.unique().sort().to_numpy().astype(object)
        labels, codes = np.unique(column.to_numpy(), return_inverse=True)
        return codes.ravel().astype(np.int64), labels

    users, _ = coded(pairs["user"])
    keys, labels = coded(pairs["key"])
    return users, keys, labels


def _most_records(records: pl.DataFrame) -> npt.NDArray[np.int64]:
    """Per user (in user order), the most records it holds on one key, from ``records`` (one
    row per record, no nulls)."""
    if _integer_columns(records):
        found = _sorted_pairs(records["user"].to_numpy(), records["key"].to_numpy())
        if found is not None:
            users, _, n = found
            return _most_per_user(users, n)
    most = records.group_by("user", "key").len().group_by("user").agg(pl.col("len").max())
    return _int64(most.sort("user")["len"])


def _most_per_user(users: npt.NDArray[np.int64], n: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per user, the largest ``n`` of its pairs (pairs sorted by user)."""
    if users.shape[0] == 0:
        return n
    new_user = np.empty(users.shape[0], dtype=np.bool_)
    new_user[0] = True
    np.not_equal(users[1:], users[:-1], out=new_user[1:])
    return np.maximum.reduceat(n, np.flatnonzero(new_user)).astype(np.int64)


def _exclude(pairs: pl.DataFrame, exclude: npt.ArrayLike | None) -> pl.DataFrame:
    if exclude is None:
        return pairs
    ex = np.asarray(exclude)
    if ex.size == 0:
        return pairs
    series = pl.Series("x", ex.tolist() if ex.dtype == object else ex)
    if pairs.schema["key"] != series.dtype:
        series = series.cast(pairs.schema["key"], strict=False)
    return pairs.filter(~pl.col("key").is_in(series.implode()))


def _kept_degrees(kept: pl.DataFrame) -> npt.NDArray[np.int64]:
    """For kept pairs sorted by (user, key): each row's user's number of kept keys."""
    m = kept.height
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    boundary = (kept["user"] != kept["user"].shift(1)).fill_null(True).to_numpy()
    starts = np.flatnonzero(boundary)
    sizes = np.diff(np.append(starts, m)).astype(np.int64)
    return np.repeat(sizes, sizes)


def _sums(kept: pl.DataFrame, k: int, s: int, info: dict[str, Any]) -> WeightedCounts:
    """Per-key sums of ``floor(s / sqrt(t))`` over kept pairs sorted by (user, key), ``t`` the
    user's number of kept pairs, with ``units`` (users keeping each key) and ``info``."""
    degrees = _kept_degrees(kept)
    table = np.zeros(k + 1, dtype=np.int64)
    for t in range(1, k + 1):
        table[t] = math.isqrt(s * s // t)
    frame = kept.select("key").with_columns(w=pl.Series(table[degrees], dtype=pl.Int64))
    agg = frame.group_by("key").agg(pl.col("w").sum(), pl.len().alias("units")).sort("key")
    return WeightedCounts(
        keys=_keys(agg["key"]),
        weights=_int64(agg["w"]),
        scale=s,
        max_keys=k,
        units=_int64(agg["units"]),
        info=info,
    )


def weighted_sums(
    pairs: pl.DataFrame,
    max_keys: int,
    scale: int,
    rng: RandomSource,
    exclude: npt.ArrayLike | None = None,
) -> WeightedCounts:
    """Per-key sums of ``floor(scale / sqrt(t))`` over the users keeping each key.

    Args:
        pairs: distinct (user, key) pairs, columns ``user`` and ``key`` (no nulls).
        max_keys: ``Delta0``, the most keys one user keeps.
        scale: weights are in units of ``1 / scale`` (at most ``2**24``).
        rng: the source of the keep priorities (drawn only for users holding more than
            ``max_keys`` remaining keys).
        exclude: keys removed from every user before bounding (None: none).

    Returns:
        WeightedCounts with ``units`` the number of users keeping each key.

    Example:
        >>> from privhist.core.random import SeededRandom
        >>> pairs = pl.DataFrame({"user": [1, 1, 2, 3, 3, 3], "key": [1, 2, 1, 1, 2, 3]})
        >>> w = weighted_sums(pairs, 3, 100, SeededRandom(0))
        >>> w.keys.tolist(), w.weights.tolist(), w.units.tolist()
        ([1, 2, 3], [227, 127, 57], [3, 2, 1])
    """
    fn = "weighted_sums"
    k = check_positive_int(max_keys, fn, "max_keys")
    s = check_positive_int(scale, fn, "scale")
    if s > MAX_SCALE:
        raise ValidationError("scale", fn, f"at most {MAX_SCALE}", s)
    if not isinstance(pairs, pl.DataFrame) or not {"user", "key"} <= set(pairs.columns):
        raise ValidationError("pairs", fn, "a Polars DataFrame with columns user, key", pairs)
    users_before = pairs["user"].n_unique() if pairs.height else 0
    remaining = _exclude(pairs.select("user", "key"), exclude)
    kept, users, users_bounded = _bound(
        remaining.with_columns(n=pl.lit(1)), k, 1, LazyPriorities(rng)
    )
    info: dict[str, Any] = {
        "users": users_before,
        "users_with_remaining_keys": users,
        "users_bounded": users_bounded,
        "pairs_remaining": remaining.height,
        "pairs_kept": kept.height,
    }
    return _sums(kept, k, s, info)


def wanted_keys(keys: npt.ArrayLike, max_keys: int, fn: str) -> tuple[int, npt.NDArray[Any]]:
    """The checked cap ``k`` and the distinct, sorted keys asked for by a unit count (shared
    by the local and the Spark weighted sources)."""
    k = check_positive_int(max_keys, fn, "max_keys")
    wanted = np.asarray(keys)
    if wanted.ndim != 1:
        raise ValidationError("keys", fn, "a one-dimensional array", f"shape {wanted.shape}")
    return k, (np.unique(wanted) if wanted.size else wanted)


def unit_counts(
    pairs: pl.DataFrame, keys: npt.ArrayLike, max_keys: int, rng: RandomSource
) -> Counts:
    """Distinct users per key of ``keys``, each user keeping a uniformly random subset of at most
    ``max_keys`` of its keys among ``keys`` (user-level ``Counts``, zero for keys nobody holds).

    Example:
        >>> from privhist.core.random import SeededRandom
        >>> pairs = pl.DataFrame({"user": [1, 1, 2, 3], "key": [1, 2, 1, 9]})
        >>> c = unit_counts(pairs, np.array([1, 2, 5]), 2, SeededRandom(0))
        >>> c.keys.tolist(), c.counts.tolist()
        ([1, 2, 5], [2, 1, 0])
    """
    fn = "unit_counts"
    k, wanted = wanted_keys(keys, max_keys, fn)
    if wanted.size == 0:
        return Counts.from_arrays(
            wanted, np.zeros(0, dtype=np.int64), neighbouring=Neighbouring.user(k, 1)
        )
    series = pl.Series("x", wanted.tolist() if wanted.dtype == object else wanted)
    cast = pairs.schema["key"] != series.dtype
    if cast:
        # a key of another type is the pairs' key it casts to and back from unchanged (integer
        # 2 is the text "2"; 1.5 is no integer key, though Polars casts it to 1)
        as_key = series.cast(pairs.schema["key"], strict=False)
        same = (as_key.cast(series.dtype, strict=False) == series).fill_null(False)
        series = pl.select(pl.when(same).then(as_key)).to_series()
    inside = pairs.select("user", "key").filter(pl.col("key").is_in(series.implode()))
    kept, _, _ = _bound(inside.with_columns(n=pl.lit(1)), k, 1, LazyPriorities(rng))
    agg = kept.group_by("key").agg(pl.len().alias("units"))
    held = _int64(agg["units"])
    counts = np.zeros(wanted.shape[0], dtype=np.int64)
    if cast:
        # the cast keys need not sort as the keys asked for: look each one up
        where = {key: i for i, key in enumerate(series.to_list()) if key is not None}
        counts[[where[key] for key in agg["key"].to_list()]] = held
    elif agg.height:
        held_keys = _keys(agg["key"])
        order = np.argsort(held_keys, kind="stable")
        pos = np.searchsorted(wanted, held_keys[order])
        counts[pos] = held[order]
    return Counts.from_arrays(
        wanted, counts, counts, neighbouring=Neighbouring.user(k, 1), function=fn
    )


class LocalWeightedSource:
    """Distinct (user, key) pairs held in memory: the local :class:`WeightedSource`.

    Example:
        >>> from privhist.core.random import SeededRandom
        >>> src = LocalWeightedSource(pl.DataFrame({"user": [1, 1, 2], "key": ["a", "b", "a"]}),
        ...                           SeededRandom(0))
        >>> src.weighted_sums(2, 10, exclude=["b"]).weights.tolist()
        [20]
    """

    def __init__(
        self, pairs: pl.DataFrame, rng: RandomSource | None = None, *, distinct: bool = False
    ) -> None:
        fn = "LocalWeightedSource"
        if not isinstance(pairs, pl.DataFrame) or not {"user", "key"} <= set(pairs.columns):
            raise ValidationError("pairs", fn, "a Polars DataFrame with columns user, key", pairs)
        records = pairs.select("user", "key").drop_nulls()
        # distinct: the rows are already distinct and sorted by (user, key) (from_source)
        self.pairs = records if distinct else _distinct_pairs(records)
        # the records themselves (no copy), for :attr:`max_records` when it is asked for
        self._records: pl.DataFrame | None = records
        self._max_records: npt.NDArray[np.int64] | None = None
        self.rng = rng or SecureRandom()
        self.null_pairs = pairs.height - pairs.select("user", "key").drop_nulls().height
        #: records read with a null key, and with a null user, left out as the record-level
        #: count leaves them out (set by :meth:`from_source`; exact input facts, not private)
        self.null_records = {"null_keys": 0, "null_users": 0}
        #: per max_keys: the held (user, key) pairs, the users bounded, the users
        self._held: dict[int, tuple[pl.DataFrame, int, int]] = {}

    @classmethod
    def from_source(
        cls,
        source: str | os.PathLike[str] | pl.DataFrame | pl.LazyFrame,
        *,
        key: str = "key",
        user: str | bool = True,
        format: str | FileFormat | None = None,
        key_type: str | None = None,
        rng: RandomSource | None = None,
    ) -> LocalWeightedSource:
        """Read distinct (user, key) pairs from a file (any format :func:`privhist.io.scan`
        reads; a FIMI or text line is one user) or a Polars table."""
        fn = "LocalWeightedSource"
        check_key_type(key_type, fn)
        if isinstance(source, pl.LazyFrame | pl.DataFrame):
            if isinstance(user, bool):
                raise ValidationError("user", fn, "a column name when source is a table", user)
            lf = select_records(
                source, key=key, user=user, key_type=key_type, function=fn, source="the table"
            )
            label = "table"
        elif isinstance(source, str | os.PathLike):
            fmt = resolve_format(source, format, fn)
            kt = key_type if key_type is not None else default_key_type(fmt)
            lf = scan(
                source, format=_with_name(format, fmt), key=key, user=user, key_type=kt, function=fn
            )
            label = os.fspath(source)
        else:
            raise ValidationError(
                "source", fn, "a file path or a Polars DataFrame/LazyFrame", type(source).__name__
            )
        try:
            schema = lf.collect_schema()
            integer_ids = schema["user"].is_integer() and schema["key"].is_integer()
        except (pl.exceptions.PolarsError, OSError):
            integer_ids = False  # the read below reports the problem
        if integer_ids:
            # integer ids: the records themselves, deduplicated by one sort of a code each
            records = _collect(lf.select("user", "key"), label)
            held = records.drop_nulls()
            found = _sorted_pairs(held["user"].to_numpy(), held["key"].to_numpy())
            if found is not None:
                users, keys, n = found
                pairs = pl.DataFrame(
                    [
                        pl.Series("user", users).cast(held.schema["user"]),
                        pl.Series("key", keys).cast(held.schema["key"]),
                    ]
                )
                out = cls(pairs, rng, distinct=True)
                out.null_records = {
                    "null_keys": records["key"].null_count(),
                    "null_users": records["user"].null_count(),
                }
                out.null_pairs = records.height - held.height
                if out.null_pairs:
                    nulls = records.filter(pl.col("user").is_null() | pl.col("key").is_null())
                    out.null_pairs = nulls.unique().height
                out._max_records = _most_per_user(users, n)
                out._records = None
                return out
            grouped = records.group_by("user", "key").len()
        else:
            grouped = _collect(lf.group_by("user", "key").len(), label)
        out = cls(grouped.select("user", "key"), rng)
        out.null_records = null_records(grouped, "len")
        # null users or keys are no one's records: left out, as __init__ leaves out their pairs
        held = grouped.drop_nulls(["user", "key"])
        most = held.group_by("user").agg(pl.col("len").max())
        out._max_records = _int64(most["len"])
        out._records = None
        return out

    @property
    def max_records(self) -> npt.NDArray[np.int64]:
        """Per user, the most records it holds on one key (computed when first asked for; the
        input of the DP cap ``c``, :meth:`records_histogram`)."""
        if self._max_records is None:
            assert self._records is not None
            self._max_records = _most_records(self._records)
            self._records = None
        return self._max_records

    def weighted_sums(
        self, max_keys: int, scale: int, exclude: npt.ArrayLike | None = None
    ) -> WeightedCounts:
        out = weighted_sums(self.pairs, max_keys, scale, self.rng, exclude)
        out.info.update(self.null_records)
        return out

    def held_sums(
        self, max_keys: int, scale: int, exclude: npt.ArrayLike | None = None
    ) -> WeightedCounts:
        """Per-key sums over *held* subsets (see
        :meth:`privhist.core.weighted.WeightedSource.held_sums`): each user's subset of at most
        ``max_keys`` keys is drawn once, at the first call with this ``max_keys`` (uniform, by
        independent priorities, as :func:`weighted_sums` draws them), and kept for the life of
        the source; ``exclude`` removes keys from it without replacement.

        Example:
            >>> from privhist.core.random import SeededRandom
            >>> frame = pl.DataFrame({"user": [1, 1, 1, 2], "key": ["a", "b", "c", "a"]})
            >>> src = LocalWeightedSource(frame, SeededRandom(0))
            >>> first = src.held_sums(2, 100)
            >>> first.keys.tolist(), first.weights.tolist()  # user 1 holds b and c
            (['a', 'b', 'c'], [100, 70, 70])
            >>> later = src.held_sums(2, 100, exclude=["b"])  # user 1: c alone, "a" not taken up
            >>> later.keys.tolist(), later.weights.tolist()
            (['a', 'c'], [100, 100])
        """
        fn = "held_sums"
        k = check_positive_int(max_keys, fn, "max_keys")
        s = check_positive_int(scale, fn, "scale")
        if s > MAX_SCALE:
            raise ValidationError("scale", fn, f"at most {MAX_SCALE}", s)
        if k not in self._held:
            kept, users, bounded = _bound(
                self.pairs.with_columns(n=pl.lit(1)), k, 1, LazyPriorities(self.rng)
            )
            self._held[k] = (kept.select("user", "key").sort("user", "key"), bounded, users)
        held, bounded, users = self._held[k]
        remaining = _exclude(held, exclude)
        info: dict[str, Any] = {
            "users": users,
            "users_bounded": bounded,
            "pairs_held": held.height,
            "pairs_kept": remaining.height,
            **self.null_records,
        }
        return _sums(remaining, k, s, info)

    def unit_counts(self, keys: npt.ArrayLike, max_keys: int) -> Counts:
        return unit_counts(self.pairs, keys, max_keys, self.rng)

    def degree_histogram(self, bounds: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Users per bucket of distinct-key counts (see
        :meth:`privhist.core.weighted.WeightedSource.degree_histogram`)."""
        b = _check_bounds(bounds, "degree_histogram")
        degrees = _int64(self.pairs.group_by("user").len()["len"])
        return _bucketed(degrees, b)

    def records_histogram(self, bounds: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Users per bucket of the most records a user holds on one key: bucket ``i`` counts
        the users with ``bounds[i - 1] < m <= bounds[i]`` (the last bucket: above every bound).

        Each user falls in exactly one bucket, so adding or removing a user changes one count
        by one (L1 and L2 sensitivity 1): the input of the DP cap ``c`` of
        :func:`privhist.mechanisms.user_level.caps.dp_record_cap`.

        Example:
            >>> frame = pl.DataFrame({"user": [1, 1, 1, 2, 3, 3], "key": [5, 5, 6, 5, 5, 5]})
            >>> LocalWeightedSource(frame).records_histogram([1, 2, 3]).tolist()
            [1, 2, 0, 0]
        """
        b = _check_bounds(bounds, "records_histogram")
        return _bucketed(self.max_records, b)


def _check_bounds(bounds: npt.ArrayLike, function: str) -> npt.NDArray[np.int64]:
    b = np.asarray(bounds, dtype=np.int64)
    if b.ndim != 1 or b.size == 0 or (np.diff(b) <= 0).any() or int(b[0]) < 1:
        raise ValidationError("bounds", function, "increasing positive integers", bounds)
    return b


def _bucketed(values: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    bucket = np.searchsorted(b, values, side="left")
    return np.bincount(bucket, minlength=b.size + 1).astype(np.int64)


def _with_name(given: str | FileFormat | None, name: str) -> FileFormat:
    """The file layout given (column names, separator) under its resolved format ``name``."""
    if isinstance(given, FileFormat):
        return FileFormat(name, given.columns, given.separator)
    return FileFormat(name)
