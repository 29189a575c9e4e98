"""The local engine: :class:`~privhist.engines.base.Engine` on one machine, with Polars.

It reads files (CSV/TSV, Parquet, NDJSON, text, FIMI; see :mod:`privhist.io.readers`) by lazy
scans, and in-memory tables of the Python data ecosystem: Polars ``DataFrame``/``LazyFrame``,
pandas ``DataFrame`` and pyarrow ``Table`` (pandas and pyarrow tables are converted to Polars,
zero-copy where Arrow allows). It answers every request of :mod:`privhist.core.requests`:
key counts with contribution bounding (:func:`privhist.engines.local.counting.count`), users' keys
for the weighted selectors (:class:`~privhist.engines.local.weighting.LocalWeightedSource`) and
their votes for vote selection, the
values of a column, weights per key, users' item counts, and keyed draws (each key's noise from a
keyed stream, as the Spark engine draws on its executors: :mod:`privhist.engines.keyed_noise`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, MissingInputError, ValidationError
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
    UserItems,
    UserKeys,
    UserVotes,
    ValueRange,
    Values,
)
from privhist.core.weighted import VoteCounts
from privhist.engines.base import Draw, Engine, Handler
from privhist.engines.keyed_noise import release_keyed
from privhist.engines.local.aggregate import (
    aggregate_passes,
    aggregates,
    count_group_codes,
    group_frame,
    group_tallies,
    value_range,
)
from privhist.engines.local.counting import (
    contribution_bounds,
    count,
    count_tallies,
    worker_threads,
)
from privhist.engines.local.progress import status
from privhist.engines.local.weighting import LocalWeightedSource, vote_codes
from privhist.engines.weights import per_key_weights
from privhist.io.readers import FileFormat, resolve_format, scan, scan_columns, select_records
from privhist.io.release import Release


def _is_pandas(source: Any) -> bool:
    return type(source).__module__.startswith("pandas") and type(source).__name__ == "DataFrame"


def _is_arrow(source: Any) -> bool:
    return type(source).__module__.startswith("pyarrow") and type(source).__name__ in (
        "Table",
        "RecordBatch",
    )


def as_polars(source: Any, function: str = "LocalEngine") -> pl.DataFrame | pl.LazyFrame:
    """A pandas or pyarrow table as a Polars table (Polars tables are returned as they are)."""
    if isinstance(source, pl.DataFrame | pl.LazyFrame):
        return source
    try:
        if _is_pandas(source):
            return pl.from_pandas(source)
        if _is_arrow(source):
            frame = pl.from_arrow(source)
            assert isinstance(frame, pl.DataFrame)
            return frame
    except ImportError as exc:  # pandas tables go through pyarrow
        raise ValidationError(
            "source",
            function,
            "a pandas table with pyarrow installed (pip install 'privhist[pandas]')",
            f"{type(source).__name__}: {exc}",
        ) from exc
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        raise ValidationError(
            "source", function, "a table Polars can read", f"{type(source).__name__}: {exc}"
        ) from exc
    raise ValidationError(
        "source",
        function,
        "a file path, or a pandas, Polars or pyarrow table",
        type(source).__name__,
    )


#: the file formats that hold columns (text and FIMI files hold words and baskets)
TABLE_FORMATS = ("csv", "tsv", "parquet", "ndjson")


def file_format(fields: Fields) -> FileFormat | str | None:
    """How ``fields`` say a file is read: its format name, or a :class:`FileFormat` with the
    column names of a headerless file and the separator when either is given."""
    r = fields.reading
    if r.columns is None and r.separator is None:
        return r.format
    return FileFormat(r.format, r.columns, r.separator)


def is_path(source: Any) -> bool:
    return isinstance(source, str | os.PathLike)


def records(
    source: Any,
    fields: Fields,
    function: str,
    *,
    key_type: str | None = None,
    tabular: bool = False,
) -> pl.LazyFrame:
    """The records of ``source`` as a lazy table with columns ``key`` (and ``user``), read as
    ``fields`` say (``key_type`` overrides theirs; ``tabular`` refuses text and FIMI files)."""
    kt = fields.reading.key_type if key_type is None else key_type
    user = fields.user if fields.user_level else None
    if is_path(source):
        fmt = resolve_format(source, file_format(fields), function)
        if tabular and fmt not in TABLE_FORMATS:
            raise ValidationError(
                "input_format", function, f"a table format ({', '.join(TABLE_FORMATS)})", fmt
            )
        return scan(
            source,
            format=FileFormat(fmt, fields.reading.columns, fields.reading.separator),
            key=fields.key_column,
            user=user,
            key_type=kt,
            function=function,
        )
    if isinstance(user, bool):
        raise ValidationError("user", function, "a column name when source is a table", user)
    return select_records(
        as_polars(source, function),
        key=fields.key_column,
        user=user,
        key_type=kt,
        function=function,
        source="the table",
    ).lazy()


def collect(query: pl.LazyFrame, label: str, progress: bool) -> pl.DataFrame:
    """Run ``query``, a Polars or file error becoming one :class:`InputDataError` line."""
    try:
        with status(f"Reading {label}", enabled=progress):
            return query.collect()
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputDataError(f"cannot read {label}: {first}") from exc


class LocalEngine(Engine):
    """Counting on this machine (the default engine).

    Example:
        >>> import polars as pl
        >>> from privhist.core.random import SeededRandom
        >>> from privhist.core.requests import Fields
        >>> c = LocalEngine().count(pl.DataFrame({"k": ["a", "b", "a"]}),
        ...                         KeyCounts(Fields(key="k")), SeededRandom(0))
        >>> c.keys.tolist(), c.counts.tolist()
        (['a', 'b'], [2, 1])
    """

    name = "local"

    def accepts(self, source: Any) -> bool:
        return (
            isinstance(source, str | os.PathLike | pl.DataFrame | pl.LazyFrame)
            or _is_pandas(source)
            or _is_arrow(source)
        )

    def handlers(self) -> Mapping[type[Request], Handler]:
        return {
            KeyCounts: self._key_counts,
            UserKeys: self._user_keys,
            UserVotes: self._user_votes,
            ColumnValues: self._column_values,
            KeyWeights: self._key_weights,
            UserItems: self._user_items,
            KeyedDraw: self._keyed_draw,
            GroupAggregates: self._group_aggregates,
            ValueRange: self._value_range,
        }

    # -- the requests ----------------------------------------------------------------------

    def _columns(self, source: Any, fields: Fields, function: str) -> Any:
        """``read(columns)``: the named columns of ``source`` as a lazy table."""

        def read(columns: list[str]) -> pl.LazyFrame:
            if is_path(source):
                return scan_columns(source, columns, format=file_format(fields), function=function)
            frame = as_polars(source, function).lazy()
            names = frame.collect_schema().names()
            missing = [c for c in columns if c not in names]
            if missing:
                raise InputDataError(
                    f"the columns {', '.join(map(repr, missing))} are not in the table "
                    f"({', '.join(map(repr, names))})"
                )
            return frame.select(columns)

        return read

    def _grouped(self, source: Any, fields: Fields, function: str) -> pl.LazyFrame:
        """A source whose key combines several columns, as a table of ``key`` (and ``user``)."""
        lf, _, _ = group_frame(
            source, fields, (), function, self._columns(source, fields, function)
        )
        return lf

    def _group_aggregates(
        self, source: Any, request: GroupAggregates, rng: RandomSource, progress: bool
    ) -> GroupTable:
        fn = "aggregate"
        columns = sorted({s.column for s in request.values})
        label = self.describe(source)

        def run(q: pl.LazyFrame) -> pl.DataFrame:
            return collect(q, label, progress)

        lf, types, coder = group_frame(
            source, request.fields, columns, fn, self._columns(source, request.fields, fn), run
        )
        # passes over a table in memory run on one thread per core; a file's passes run one
        # after the other, since each pass reads the file (10^8 rows of Parquet: 26 passes two at
        # a time took 66 s and 125 CPU s, 13 in turn 61 s and 98 CPU s)
        threads = 1 if is_path(source) else worker_threads()
        passes = aggregate_passes(lf, run, threads)
        if threads == 1 or passes == 1:
            return aggregates(lf, types, request, rng, run, coder, passes)
        # passes running together read without a display each (one live display at a time)
        with status(f"Aggregating {label} in {passes} passes", enabled=progress):
            return aggregates(
                lf, types, request, rng, lambda q: collect(q, label, False), coder, passes, threads
            )

    def _value_range(
        self, source: Any, request: ValueRange, rng: RandomSource, progress: bool
    ) -> tuple[Any, Any]:
        fn = "aggregate"
        fields = request.fields
        user = [str(fields.user)] if fields.user_level else []
        lf = self._columns(source, fields, fn)([*user, fields.key_column])
        renamed = lf.rename({fields.key_column: "v0", **({user[0]: "user"} if user else {})})
        label = self.describe(source)
        return value_range(renamed, request, lambda q: collect(q, label, progress))

    def _key_counts(
        self, source: Any, request: KeyCounts, rng: RandomSource, progress: bool
    ) -> Counts:
        fields = request.fields
        user = fields.user if fields.user_level else None
        if fields.composite:
            label = self.describe(source)
            read = self._columns(source, fields, "count")
            if user is not None:  # integer users: one integer per record, sorted
                k, c, defaulted = contribution_bounds(
                    True, request.max_partitions, request.max_per_partition, "count"
                )
                with status(f"Counting {label}", enabled=progress):
                    coded = count_group_codes(
                        fields,
                        "count",
                        read,
                        k,
                        c,
                        rng,
                        lambda q: collect(q, label, progress),
                        label,
                    )
                if coded is not None:
                    coded.info["bounds_defaulted"] = defaulted
                    return coded
            # the records reduced to distinct (user, group values) with their numbers before
            # any key text is written: the text is built once per tally, not once per record
            tallies = group_tallies(fields, "count", read)
            return count_tallies(
                tallies,
                user=user is not None,
                max_partitions_contributed=request.max_partitions if user is not None else None,
                max_contributions_per_partition=(
                    request.max_per_partition if user is not None else None
                ),
                rng=rng,
                progress=progress,
                label=label,
            )
        if not is_path(source):
            source = as_polars(source, "count")
        return count(
            source,
            key=fields.key_column,
            user=user,
            format=file_format(fields),
            key_type=fields.reading.key_type,
            max_partitions_contributed=request.max_partitions if user is not None else None,
            max_contributions_per_partition=request.max_per_partition if user is not None else None,
            rng=rng,
            progress=progress,
        )

    def _user_keys(
        self, source: Any, request: UserKeys, rng: RandomSource, progress: bool
    ) -> LocalWeightedSource:
        """The users' distinct keys; inside :meth:`reading` kept for the release's next request
        (the default user-level plan asks for them, then for the votes cast on them)."""
        memo = self._memo(source)
        weighted = self._weighted(source, request, rng)
        if memo is not None:
            memo[request.fields] = weighted
        return weighted

    def _weighted(self, source: Any, request: UserKeys, rng: RandomSource) -> LocalWeightedSource:
        fields = request.fields
        if not fields.user_level:
            raise ValidationError(
                "user", "histogram", "a user column (weighted selectors are user-level)", None
            )
        if fields.composite:
            source = self._grouped(source, fields, "histogram")
            fields = Fields("key", "user")
        if not is_path(source):
            source = as_polars(source, "histogram")
        return LocalWeightedSource.from_source(
            source,
            key=fields.key_column,
            user=fields.user if fields.user is not None else True,
            format=file_format(fields),
            key_type=fields.reading.key_type,
            rng=rng,
        )

    def _user_votes(
        self, source: Any, request: UserVotes, rng: RandomSource, progress: bool
    ) -> VoteCounts:
        """The vote rule run on this machine over the distinct (user, key) pairs (coded by
        :func:`~privhist.engines.local.weighting.vote_codes`, then one pass over the users in voting
        order: :func:`~privhist.mechanisms.user_level.votes.cast_coded_votes`)."""
        from privhist.mechanisms.user_level.votes import cast_coded_votes

        memo = self._memo(source)
        weighted = None if memo is None else memo.get(request.fields)
        if weighted is None:
            weighted = self._user_keys(source, UserKeys(request.fields), rng, progress)
        users, keys, labels = vote_codes(weighted.pairs)
        votes = cast_coded_votes(
            users,
            keys,
            labels,
            cap=request.cap,
            top_cap=request.top_cap,
            rng=rng,
        )
        votes.info.update(weighted.null_records)
        return votes

    def _column_values(
        self, source: Any, request: ColumnValues, rng: RandomSource, progress: bool
    ) -> Values:
        """Every cell read as text and parsed on its own as a float; empty and non-numeric cells
        and NaN dropped (counted)."""
        lf = records(source, request.fields, "quantiles", key_type="str", tabular=True)
        query = lf.select(pl.col("key").str.strip_chars().cast(pl.Float64, strict=False).alias("x"))
        x = collect(query, self.describe(source), progress)["x"].to_numpy().astype(np.float64)
        values = x[~np.isnan(x)]
        facts = {"rows": int(x.shape[0]), "dropped": int(x.shape[0] - values.shape[0])}
        return Values(np.sort(values), facts=facts)

    def _key_weights(
        self, source: Any, request: KeyWeights, rng: RandomSource, progress: bool
    ) -> Values:
        fields = request.fields
        lf = records(source, fields, "sample", key_type="str", tabular=True)
        if request.weight is not None:
            try:
                extra = records(
                    source,
                    Fields(key=request.weight, reading=fields.reading),
                    "sample",
                    key_type="str",
                    tabular=True,
                )
            except MissingInputError as exc:
                # the weight column is read as a key: named as the weight it is (as on Spark)
                if exc.parameter != "key":
                    raise
                raise exc.for_function(exc.function, "weight") from exc
            extra = extra.select(
                pl.col("key").str.strip_chars().cast(pl.Float64, strict=False).alias("w")
            )
            lf = pl.concat([lf, extra], how="horizontal")
        frame = collect(lf, self.describe(source), progress)
        weights = None
        if request.weight is not None:
            weights = frame["w"].fill_null(np.nan).to_numpy().astype(np.float64)
        return per_key_weights(frame["key"].to_numpy(), weights, request, "sample")

    def _user_items(
        self, source: Any, request: UserItems, rng: RandomSource, progress: bool
    ) -> Any:
        from privhist.engines.local.federated_data import read_user_counts, user_counts_from_table

        fields = request.fields
        domain = None if request.domain is None else list(request.domain)
        if is_path(source):
            return read_user_counts(
                source,
                user=fields.user if fields.user is not None else True,
                key=fields.key_column,
                format=file_format(fields),
                top_d=request.top_d,
                domain=domain,
            )
        return user_counts_from_table(
            as_polars(source, "federated-frequency"),
            user=str(fields.user),
            key=fields.key_column,
            top_d=request.top_d,
            domain=domain,
        )

    def _keyed_draw(
        self, source: Any, request: KeyedDraw, rng: RandomSource, progress: bool
    ) -> Draw:
        counts = self._key_counts(source, request.counts, rng, progress)
        mechanism = request.mechanism

        def draw() -> Release:
            release = release_keyed(mechanism, counts, rng)
            release.diagnostics.setdefault("distinct_keys_counted", len(counts))
            release.diagnostics["noise"] = "keyed streams"
            return release

        return draw
