"""The local engine: :class:`~privhist.engines.base.Engine` on one machine, with Polars.

It reads files (CSV/TSV, Parquet, NDJSON, text, FIMI; see :mod:`privhist.io.readers`) by lazy
scans, and in-memory tables of the Python data ecosystem: Polars ``DataFrame``/``LazyFrame``,
pandas ``DataFrame`` and pyarrow ``Table`` (pandas and pyarrow tables are converted to Polars,
zero-copy where Arrow allows). It answers every request of :mod:`privhist.core.requests`:
key counts with contribution bounding (:func:`privhist.engines.local.counting.count`), users' keys
for the weighted selectors (:class:`~privhist.engines.local.weighting.LocalWeightedSource`), the
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
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource
from privhist.core.requests import (
    ColumnValues,
    Fields,
    KeyCounts,
    KeyedDraw,
    KeyWeights,
    Request,
    UserItems,
    UserKeys,
    Values,
)
from privhist.engines.base import Draw, Engine, Handler
from privhist.engines.keyed_noise import release_keyed, runs_per_key
from privhist.engines.local.counting import count
from privhist.engines.local.progress import status
from privhist.engines.local.weighting import LocalWeightedSource
from privhist.engines.weights import per_key_weights
from privhist.io.readers import resolve_format, scan, select_records
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
    except (TypeError, ValueError, ImportError, pl.exceptions.PolarsError) as exc:
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


def reading_options(fields: Fields) -> dict[str, Any]:
    """The reader options of ``fields`` beyond format and key type (headerless column names,
    the separator), only those given."""
    r = fields.reading
    return {k: v for k, v in (("columns", r.columns), ("separator", r.separator)) if v is not None}


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
        fmt = resolve_format(source, fields.reading.format, function)
        if tabular and fmt not in TABLE_FORMATS:
            raise ValidationError(
                "input_format", function, f"a table format ({', '.join(TABLE_FORMATS)})", fmt
            )
        return scan(
            source,
            format=fmt,
            key=fields.key_column,
            user=user,
            key_type=kt,
            function=function,
            **reading_options(fields),
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
            ColumnValues: self._column_values,
            KeyWeights: self._key_weights,
            UserItems: self._user_items,
            KeyedDraw: self._keyed_draw,
        }

    def supports(self, request: Request) -> bool:
        if isinstance(request, KeyedDraw):
            return runs_per_key(request.mechanism)
        return super().supports(request)

    # -- the requests ----------------------------------------------------------------------

    def _key_counts(
        self, source: Any, request: KeyCounts, rng: RandomSource, progress: bool
    ) -> Counts:
        fields = request.fields
        user = fields.user if fields.user_level else None
        if not is_path(source):
            source = as_polars(source, "count")
        return count(
            source,
            key=fields.key_column,
            user=user,
            format=fields.reading.format,
            key_type=fields.reading.key_type,
            max_partitions_contributed=request.max_partitions if user is not None else None,
            max_contributions_per_partition=request.max_per_partition if user is not None else None,
            rng=rng,
            progress=progress,
            **reading_options(fields),
        )

    def _user_keys(
        self, source: Any, request: UserKeys, rng: RandomSource, progress: bool
    ) -> LocalWeightedSource:
        fields = request.fields
        if not fields.user_level:
            raise ValidationError(
                "user", "histogram", "a user column (weighted selectors are user-level)", None
            )
        if not is_path(source):
            source = as_polars(source, "histogram")
        return LocalWeightedSource.from_source(
            source,
            key=fields.key_column,
            user=fields.user if fields.user is not None else True,
            format=fields.reading.format,
            key_type=fields.reading.key_type,
            rng=rng,
            **reading_options(fields),
        )

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
            extra = records(
                source,
                Fields(key=request.weight, reading=fields.reading),
                "sample",
                key_type="str",
                tabular=True,
            ).select(pl.col("key").str.strip_chars().cast(pl.Float64, strict=False).alias("w"))
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
                format=fields.reading.format,
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
