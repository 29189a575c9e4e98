"""Small sources on Spark are counted on the driver (``SparkEngine(driver_rows=...)``): the key and
user columns come to the driver as one Arrow table and the local engine counts them. For a seed
(NOT private) every release equals the one counted on the executors, whichever mechanism reads the
counts (per-key noise on either side, the weighted selectors, vote selection, record level); the
boundary is exact in records (nulls included); a source whose size estimate is above the limit is
not collected; one release reads a small source once, whatever it asks of it; and the bound is
validated."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from privhist import Session
from privhist.core.errors import ValidationError
from privhist.engines.spark import SparkEngine
from privhist.engines.spark.engine import DRIVER_ROWS, ROW_BYTES, _estimated_bytes
from privhist.session import DryRun

N = 6_000


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """6,000 records of 400 users holding up to tens of keys (Zipf over 300 keys), with a null
    key and a null user: as Parquet with integer columns and as CSV with text columns."""
    g = np.random.default_rng(5)
    user = g.integers(0, 400, N).astype(object)
    key = ((g.zipf(1.3, N) - 1) % 300).astype(object)
    key[7], user[11] = None, None
    ints = pl.DataFrame(
        {"user": list(user), "key": list(key)}, schema={"user": pl.Int64, "key": pl.Int64}
    )
    texts = ints.select(
        pl.format("u{}", "user").alias("user"), pl.format("k{}", "key").alias("key")
    )
    root = tmp_path_factory.mktemp("small")
    ints.write_parquet(root / "ints.parquet")
    texts.write_csv(root / "texts.csv")
    return {"int": root / "ints.parquet", "str": root / "texts.csv"}


def _spied(engine: SparkEngine) -> list[bool]:
    """Record, for each request ``engine`` answers, whether it counted on the driver."""
    seen: list[bool] = []
    original = engine._on_driver

    def on_driver(*args: Any) -> Any:
        table = original(*args)
        seen.append(table is not None)
        return table

    engine._on_driver = on_driver  # type: ignore[method-assign]
    return seen


CALLS: dict[str, dict[str, Any]] = {
    "stability (per-key noise)": dict(user="user", mechanism="stability", max_partitions=4),
    "default user level": dict(user="user"),
    "cumulative-sips": dict(user="user", mechanism="cumulative-sips", max_partitions=4),
    "vote selection": dict(user="user", mechanism="vote-selection"),
    "record level": dict(),
}

#: (call, key type, where the noise is drawn): the per-key mechanisms on both sides of the keyed
#: draw, the others once per key type (the planner's default, slow on the executors, once)
CASES = [
    *((name, kt, on) for name in ("stability (per-key noise)", "record level")
      for kt in ("int", "str") for on in ("executors", "driver")),
    *((name, kt, "executors") for name in ("cumulative-sips", "vote selection")
      for kt in ("int", "str")),
    ("default user level", "int", "executors"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "key_type", "noise_on"), CASES)
def test_a_small_source_gives_the_release_counted_on_the_executors(
    spark: Any, sources: dict[str, Path], name: str, key_type: str, noise_on: str
) -> None:
    kwargs = dict(key="key", epsilon=1.0, delta=1e-6, seed=23, key_type=key_type, **CALLS[name])
    path = str(sources[key_type])
    there = SparkEngine(spark, driver_rows=0)
    here = SparkEngine(spark)
    assert here.driver_rows == DRIVER_ROWS
    seen = _spied(here)
    a = Session(engine=there, noise_on=noise_on).histogram(path, **kwargs)
    b = Session(engine=here, noise_on=noise_on).histogram(path, **kwargs)
    assert not isinstance(a, DryRun) and not isinstance(b, DryRun)
    assert seen and all(seen)  # every count of the release ran on the driver
    assert len(a) > 0
    assert a.to_polars().equals(b.to_polars())
    assert a.metadata == b.metadata
    if "counting" in a.diagnostics:  # a keyed draw says where it counted
        assert (a.diagnostics["counting"], b.diagnostics["counting"]) == ("executors", "driver")
        assert a.diagnostics | {"counting": "driver"} == b.diagnostics
    else:
        assert a.diagnostics == b.diagnostics


def test_the_boundary_is_exact_in_records(
    spark: Any, sources: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``driver_rows`` = the records (the null key and null user included) counts on the driver;
    one fewer counts on the executors, to the same release. A Parquet file on this machine is
    counted from its footers, with no Spark job."""
    kwargs = dict(key="key", user="user", mechanism="stability", max_partitions=4, epsilon=1.0,
                  delta=1e-6, seed=3, key_type="int")  # fmt: skip
    path = str(sources["int"])
    frame = spark.read.parquet(f"file://{path}")
    DataFrame = type(frame)  # the session's own class (classic or Connect)
    count = DataFrame.count
    jobs: list[int] = []

    def counted(self: Any) -> int:
        jobs.append(count(self))
        return jobs[-1]

    monkeypatch.setattr(DataFrame, "count", counted)
    releases = []
    for driver_rows, where in ((N, "driver"), (N - 1, "executors"), (0, "executors")):
        engine = SparkEngine(spark, driver_rows=driver_rows)
        seen = _spied(engine)
        release = Session(engine=engine).histogram(path, **kwargs)
        assert not isinstance(release, DryRun)
        assert release.diagnostics["counting"] == where
        assert seen == ([where == "driver"] if driver_rows else [False])
        releases.append(release)
    assert releases[0].to_polars().equals(releases[1].to_polars())
    assert releases[1].to_polars().equals(releases[2].to_polars())
    assert jobs == []  # the footers said how many records
    # a DataFrame of the same records is counted by a job
    engine = SparkEngine(spark, driver_rows=N)
    release = Session(engine=engine).histogram(frame, **kwargs)
    assert not isinstance(release, DryRun) and release.diagnostics["counting"] == "driver"
    assert jobs == [N]
    assert release.to_polars().equals(releases[0].to_polars())


def test_a_source_estimated_larger_is_not_collected(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's size estimate gates the driver: a CSV file of wide lines (about 130 bytes each)
    with at most ``driver_rows`` records is counted on the executors, with no count job first and
    no collect, while its file is larger than ``ROW_BYTES * driver_rows`` bytes; with room for
    it, it is counted and then collected."""
    n = 500
    frame = pl.DataFrame({"user": [f"u{i % 50}" for i in range(n)],
                          "key": [f"k{i % 7}" + "x" * 120 for i in range(n)]})  # fmt: skip
    path = tmp_path / "wide.csv"
    frame.write_csv(path)
    size = path.stat().st_size
    assert size > ROW_BYTES * n
    df = spark.read.csv(f"file://{path}", header=True)
    estimate = _estimated_bytes(df.select("key", "user"))
    assert estimate is not None and estimate >= size // 2  # the file's size, from the plan
    collects: list[int] = []
    counts: list[int] = []
    to_arrow, count = type(df).toArrow, type(df).count

    def counted_collect(self: Any) -> Any:
        table = to_arrow(self)
        collects.append(table.num_rows)
        return table

    def counted_count(self: Any) -> int:
        counts.append(count(self))
        return counts[-1]

    kwargs = dict(key="key", user="user", mechanism="stability", max_partitions=2, epsilon=1.0,
                  delta=1e-6, seed=8)  # fmt: skip
    roomy = -(-estimate // ROW_BYTES)  # the least driver_rows admitting the estimate
    for driver_rows, where in ((n, "executors"), (max(roomy, n), "driver")):
        monkeypatch.setattr(type(df), "toArrow", counted_collect)
        monkeypatch.setattr(type(df), "count", counted_count)
        collects.clear()
        counts.clear()
        release = Session(engine=SparkEngine(spark, driver_rows=driver_rows)).histogram(
            str(path), **kwargs
        )
        monkeypatch.undo()
        assert not isinstance(release, DryRun) and release.diagnostics["counting"] == where
        if where == "executors":
            assert counts == []  # not even counted first
            assert all(rows < n for rows in collects)  # only per-key rows came to the driver
        else:
            assert counts == [n] and n in collects  # counted, then the whole source, once


def test_a_failed_collect_counts_on_the_executors(
    spark: Any, sources: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collect Spark refuses (say, above ``spark.driver.maxResultSize``) leaves the source to
    the executors, to the same release."""
    DataFrame = type(spark.range(1))  # the session's own class (classic or Connect)
    kwargs = dict(key="key", user="user", mechanism="stability", max_partitions=4, epsilon=1.0,
                  delta=1e-6, seed=3, key_type="int")  # fmt: skip
    path = str(sources["int"])
    want = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(path, **kwargs)
    to_arrow = DataFrame.toArrow
    refused: list[int] = []

    def refusing(self: Any) -> Any:
        if "user" in self.columns:  # the source's columns, not the per-key table
            refused.append(1)
            raise RuntimeError("Total size of serialized results is bigger than maxResultSize")
        return to_arrow(self)

    monkeypatch.setattr(DataFrame, "toArrow", refusing)
    got = Session(engine=SparkEngine(spark)).histogram(path, **kwargs)
    assert refused == [1]
    assert not isinstance(got, DryRun) and not isinstance(want, DryRun)
    assert got.diagnostics["counting"] == "executors"
    assert got.to_polars().equals(want.to_polars())


def test_one_release_collects_a_small_source_once(
    spark: Any, sources: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default user-level plan asks for the users' keys and for their votes. Inside one
    release (``Engine.reading``) the source is counted and collected once, for both; the next
    release reads it again, to the same seeded table. Power: with ``reading`` keeping nothing,
    the same release collects the source twice."""
    DataFrame = type(spark.range(1))  # the session's own class (classic or Connect)
    to_arrow = DataFrame.toArrow
    collects: list[int] = []

    def counted(self: Any) -> Any:
        if "user" in self.columns:  # the source's columns, not a per-key table
            collects.append(1)
        return to_arrow(self)

    monkeypatch.setattr(DataFrame, "toArrow", counted)
    kwargs = dict(key="key", user="user", epsilon=1.0, delta=1e-6, seed=23, key_type="int")
    path = str(sources["int"])
    engine = SparkEngine(spark)
    reads = _spied(engine)
    first = Session(engine=engine).histogram(path, **kwargs)
    assert reads == [True] and collects == [1]
    assert engine._kept == {}  # nothing kept past the release
    second = Session(engine=engine).histogram(path, **kwargs)
    assert reads == [True, True] and collects == [1, 1]
    assert not isinstance(first, DryRun) and not isinstance(second, DryRun)
    assert len(first) > 0 and first.to_polars().equals(second.to_polars())
    assert first.metadata == second.metadata

    forgetful = SparkEngine(spark)
    forgetful.reading = lambda source: contextlib.nullcontext()  # type: ignore[method-assign]
    collects.clear()
    third = Session(engine=forgetful).histogram(path, **kwargs)
    assert collects == [1, 1]  # the keys and the votes each read the source
    assert not isinstance(third, DryRun) and third.to_polars().equals(first.to_polars())


@pytest.mark.parametrize("bad", [-1, 1.5, True, "many"])
def test_driver_rows_is_validated(bad: Any) -> None:
    with pytest.raises(ValidationError, match="driver_rows"):
        SparkEngine(None, driver_rows=bad)
