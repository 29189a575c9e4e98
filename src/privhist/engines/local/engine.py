"""The local engine: :class:`~privhist.engines.base.Engine` on one machine, with Polars.

It reads files (CSV/TSV, Parquet, NDJSON, text, FIMI; see :mod:`privhist.io.readers`) by lazy
scans, and in-memory tables of the Python data ecosystem: Polars ``DataFrame``/``LazyFrame``,
pandas ``DataFrame`` and pyarrow ``Table`` (pandas and pyarrow tables are converted to Polars,
zero-copy where Arrow allows). Counting and contribution bounding are
:func:`privhist.engines.local.counting.count`.
"""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.engines.base import CountRequest
from privhist.engines.local.counting import count


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


class LocalEngine:
    """Counting on this machine (the default engine).

    Example:
        >>> import polars as pl
        >>> from privhist.core.random import SeededRandom
        >>> c = LocalEngine().count(pl.DataFrame({"k": ["a", "b", "a"]}), CountRequest(key="k"),
        ...                         SeededRandom(0))
        >>> c.keys.tolist(), c.counts.tolist()
        (['a', 'b'], [2, 1])
    """

    name = "local"
    #: provides a weighted source (:meth:`weighted_source`) for the weighted selectors
    weighted = True

    def accepts(self, source: Any) -> bool:
        return (
            isinstance(source, str | os.PathLike | pl.DataFrame | pl.LazyFrame)
            or _is_pandas(source)
            or _is_arrow(source)
        )

    def describe(self, source: Any) -> str:
        if isinstance(source, str | os.PathLike):
            return os.fspath(source)
        return f"a {type(source).__module__.split('.')[0]} {type(source).__name__}"

    def weighted_source(self, source: Any, request: CountRequest, rng: RandomSource) -> Any:
        """The distinct (user, key) pairs of ``source`` as a
        :class:`~privhist.core.weighted.WeightedSource` for the weighted selectors (WGM,
        DP-SIPS); users keep their keys with the engine's keyed priorities under ``rng``."""
        from privhist.engines.local.weighting import LocalWeightedSource

        if not request.user_level:
            raise ValidationError(
                "user", "weighted_source", "a user column (weighted selectors are user-level)", None
            )
        if not isinstance(source, str | os.PathLike):
            source = as_polars(source, "weighted_source")
        return LocalWeightedSource.from_source(
            source,
            key=request.key,
            user=request.user if request.user is not None else True,
            format=request.format,
            key_type=request.key_type,
            rng=rng,
        )

    def count(
        self,
        source: Any,
        request: CountRequest,
        rng: RandomSource,
        *,
        progress: bool = False,
    ) -> Counts:
        user = request.user if request.user_level else None
        if not isinstance(source, str | os.PathLike):
            source = as_polars(source, "count")
        return count(
            source,
            key=request.key,
            user=user,
            format=request.format,
            key_type=request.key_type,
            max_partitions_contributed=request.max_partitions if user is not None else None,
            max_contributions_per_partition=request.max_per_partition if user is not None else None,
            rng=rng,
            progress=progress,
        )
