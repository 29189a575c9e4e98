"""The Spark engine counts exactly what the local engine counts, and (same seed, NOT private)
gives the same release, whatever the partitioning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

from privhist import Session
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.core.requests import Fields, KeyCounts, Reading
from privhist.engines import Engine, LocalEngine
from privhist.engines.spark import SparkEngine
from privhist.session import DryRun


def _records(seed: int, n: int, users: int, keys: int, text: bool) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    key = g.zipf(1.3, n) % keys
    user = g.integers(0, users, n)
    frame = pd.DataFrame(
        {
            "key": [f"k{x}" for x in key] if text else key,
            "user": [f"u{x}" for x in user] if text else user,
        }
    )
    frame.loc[g.random(n) < 0.02, "key"] = None
    frame.loc[g.random(n) < 0.02, "user"] = None
    if not text:
        frame = frame.astype({"key": "Int64", "user": "Int64"})
    return frame


def _same(a: Counts, b: Counts) -> None:
    assert a.keys.tolist() == b.keys.tolist()
    assert a.counts.tolist() == b.counts.tolist()
    assert (a.units is None) == (b.units is None)
    if a.units is not None and b.units is not None:
        assert a.units.tolist() == b.units.tolist()
    assert a.neighbouring == b.neighbouring
    for name in (
        "records",
        "null_keys",
        "distinct_keys",
        "records_kept",
        "users",
        "users_bounded",
        "null_users",
    ):
        assert a.info.get(name) == b.info.get(name), name


@pytest.mark.parametrize(("text", "k", "c"), [(False, None, None), (False, 2, 1), (True, 3, 4)])
def test_same_counts_as_the_local_engine(spark: Any, text: bool, k: Any, c: Any) -> None:
    frame = _records(7, 4000, 150, 60, text)
    user = None if k is None else "user"
    request = KeyCounts(Fields(key="key", user=user), max_partitions=k, max_per_partition=c)
    local = LocalEngine().count(pl.from_pandas(frame), request, SeededRandom(11))
    sdf = spark.createDataFrame(frame.astype(object).where(frame.notna(), None))
    remote = SparkEngine(spark, driver_rows=0).count(sdf, request, SeededRandom(11))
    _same(local, remote)


def test_independent_of_partitioning(spark: Any) -> None:
    frame = _records(3, 3000, 100, 40, False)
    sdf = spark.createDataFrame(frame.astype(object).where(frame.notna(), None))
    request = KeyCounts(Fields(key="key", user="user"), max_partitions=2)
    one = SparkEngine(spark, driver_rows=0).count(sdf.repartition(1), request, SeededRandom(5))
    seven = SparkEngine(spark, driver_rows=0).count(
        sdf.repartition(7, "key"), request, SeededRandom(5)
    )
    _same(one, seven)


def test_same_release_through_the_session(spark: Any, tmp_path: Path) -> None:
    """Seeded runs: the Spark engine and the local engine give the same release, from a Spark
    DataFrame and from the Parquet file Spark reads itself."""
    frame = _records(9, 6000, 200, 30, True)
    kwargs: dict[str, Any] = dict(
        key="key", user="user", max_partitions=3, epsilon=1, delta=1e-6, seed=21
    )
    # noise drawn on the executors from keyed streams: the local engine draws the same way
    # when asked (noise_on="executors"); with noise_on="driver" Spark draws as the plain local
    # engine
    local = Session(noise_on="executors").histogram(frame, **kwargs)
    sdf = spark.createDataFrame(frame.astype(object).where(frame.notna(), None))
    remote = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(sdf, **kwargs)
    driver = Session(engine=SparkEngine(spark, driver_rows=0), noise_on="driver").histogram(
        sdf, **kwargs
    )
    plain = Session().histogram(frame, **kwargs)
    assert not isinstance(driver, DryRun) and not isinstance(plain, DryRun)
    assert driver.to_polars().equals(plain.to_polars())
    assert not isinstance(local, DryRun) and not isinstance(remote, DryRun)
    assert len(local) > 0
    assert local.to_polars().equals(remote.to_polars())
    path = tmp_path / "records.parquet"
    pl.from_pandas(frame).write_parquet(path)
    from_file = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(path, **kwargs)
    assert not isinstance(from_file, DryRun)
    assert from_file.to_polars().equals(local.to_polars())


def test_engine_protocol_and_refusals(spark: Any, tmp_path: Path) -> None:
    eng = SparkEngine(spark, driver_rows=0)
    assert isinstance(eng, Engine) and eng.accepts(spark.range(3)) and not eng.accepts(3)
    text = tmp_path / "book.txt"
    text.write_text("a b c\n")
    from privhist.core.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="local engine"):
        eng.count(text, KeyCounts(Fields(reading=Reading(format="text"))), SeededRandom(0))


def test_uniform_subsets_on_spark(spark: Any) -> None:
    """One user with four keys keeps k = 1: Spark chooses what the local engine chooses, run by
    run, and the local choice is uniform over 400 seeded runs (chi-square at alpha = 1e-6)."""
    from scipy import stats

    sdf = spark.createDataFrame(pd.DataFrame({"user": [1] * 4, "key": ["a", "b", "c", "d"]}))
    eng = SparkEngine(spark, driver_rows=0)
    request = KeyCounts(Fields(key="key", user="user"), max_partitions=1)
    chosen = [eng.count(sdf, request, SeededRandom(s)).keys[0] for s in range(4)]
    local = [
        LocalEngine().count(pl.from_pandas(sdf.toPandas()), request, SeededRandom(s)).keys[0]
        for s in range(4)
    ]
    assert chosen == local  # the same priorities, run by run
    many = [
        LocalEngine()
        .count(pl.DataFrame({"user": [1] * 4, "key": list("abcd")}), request, SeededRandom(s))
        .keys[0]
        for s in range(400)
    ]
    observed = [many.count(x) for x in "abcd"]
    assert stats.chisquare(observed).pvalue > 1e-6


def test_cli_engine_spark_gives_the_local_release(spark: Any, tmp_path: Path) -> None:
    """``privhist histogram FILE --engine spark`` (the test's Spark session is reused) releases
    for the same seed the rows the local engine draws with keyed noise (the executors' draw),
    from CSV and Parquet."""
    import json

    from privhist.cli.main import main
    from privhist.io.writers import encode_release

    frame = _records(13, 12000, 600, 25, True).dropna()
    for suffix in ("csv", "parquet"):
        src = tmp_path / f"visits.{suffix}"
        if suffix == "csv":
            frame.to_csv(src, index=False)
        else:
            pl.from_pandas(frame).write_parquet(src)
        out = tmp_path / f"spark-{suffix}.json"
        argv = ["histogram", str(src), "--key", "key", "--user", "user", "--max-partitions"]
        argv += ["2", "--epsilon", "1", "--delta", "1e-6", "--seed", "8", "-o", str(out)]
        assert main([*argv, "--engine", "spark", "--no-progress"]) == 0
        remote = json.loads(out.read_text())["rows"]
        local = Session(noise_on="executors").histogram(
            src, key="key", user="user", max_partitions=2, epsilon=1, delta=1e-6, seed=8
        )
        assert not isinstance(local, DryRun)
        expected = json.loads(encode_release(local, "json", function="histogram"))["rows"]
        assert remote == expected and len(remote) > 0


def test_cli_heavy_hitters_engine_spark(spark: Any, tmp_path: Path) -> None:
    """``heavy-hitters --engine spark`` counts the items on Spark and runs the trie (or the
    one-shot histogram) on the driver: the local engine's release for the same seed. A text
    file is refused with the reason."""
    import json

    from privhist.cli.main import main

    g = np.random.default_rng(3)
    items = [f"w{x}" for x in g.zipf(1.3, 6000) % 40]
    src = tmp_path / "items.csv"
    src.write_text("item\n" + "\n".join(items) + "\n")
    for extra in (["--one-shot"], ["--levels", "3", "--alphabet", "w0123456789"]):
        rows = []
        for engine in ("local", "spark"):
            out = tmp_path / f"hh-{engine}.json"
            argv = ["heavy-hitters", str(src), "--key", "item", "--epsilon", "2", "--delta"]
            argv += ["1e-5", "--seed", "4", "-o", str(out), "--no-progress", *extra]
            assert main([*argv, "--engine", engine]) == 0
            rows.append(json.loads(out.read_text())["rows"])
        assert rows[0] == rows[1] and len(rows[0]) > 0
    text = tmp_path / "words.txt"
    text.write_text(" ".join(items) + "\n")
    argv = ["heavy-hitters", str(text), "--text", "--epsilon", "1", "--delta", "1e-5"]
    assert main([*argv, "--one-shot", "--engine", "spark"]) == 2


@pytest.mark.parametrize("driver_rows", [0, 2**22])
def test_text_keys_read_as_integers_as_the_local_engine_reads_them(
    spark: Any, tmp_path: Path, driver_rows: int
) -> None:
    """``key_type="int"`` on text keys: each key is cast on its own, and one that is not an
    optional sign and decimal digits in the Int64 range (``" 7"``, ``"7.0"``, ``"zzz"``) is a
    null key, on the executors and on the driver, from a DataFrame and from a CSV file, as the
    local engine counts it (Spark's own cast fails the whole job on the first such key, or
    trims spaces and truncates decimals)."""
    odd = ["7", "007", "+7", "-3", " 7", "7 ", "7.0", "zzz", "", "1e3", "99999999999999999999"]
    g = np.random.default_rng(4)
    keys = [
        odd[i % len(odd)] if i % 3 == 0 else str(int(v))
        for i, v in enumerate(g.integers(0, 9, 600))
    ]
    frame = pl.DataFrame({"key": keys, "user": [f"u{int(v)}" for v in g.integers(0, 80, 600)]})
    path = tmp_path / "keys.csv"
    frame.write_csv(path)
    request = KeyCounts(
        Fields(key="key", user="user", reading=Reading(key_type="int")), max_partitions=2
    )
    local = LocalEngine().count(frame, request, SeededRandom(3))
    assert local.info["null_keys"] > 0 and -3 in local.keys.tolist()
    engine = SparkEngine(spark, driver_rows=driver_rows)
    _same(local, engine.count(spark.createDataFrame(frame.to_arrow()), request, SeededRandom(3)))
    _same(local, engine.count(str(path), request, SeededRandom(3)))


def test_a_spinner_says_what_spark_is_doing(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``progress`` (the command line's default) each request shows one spinner while Spark
    works, since the command line turns Spark's own progress bar off; counting a small source
    on the driver shows no second one; without ``progress`` none is shown."""
    import privhist.engines.local.counting as counting
    import privhist.engines.local.engine as local_engine
    import privhist.engines.local.progress as progress
    from privhist import metrics as m

    shown: list[tuple[str, bool]] = []
    status = progress.status

    def recorded(message: str, *, enabled: bool = True, **kwargs: Any) -> Any:
        shown.append((message, enabled))
        return status(message, enabled=enabled, **kwargs)

    for module in (progress, counting, local_engine):
        monkeypatch.setattr(module, "status", recorded)
    sdf = spark.createDataFrame(_records(2, 1500, 80, 20, True).dropna())
    kwargs: dict[str, Any] = dict(key="key", user="user", mechanism="stability", max_partitions=2,
                                  epsilon=1, delta=1e-6, seed=1)  # fmt: skip
    for rows in (0, 2**22):
        shown.clear()
        Session(engine=SparkEngine(spark, driver_rows=rows), progress=True).histogram(sdf, **kwargs)
        # the local engine's count on the driver runs with its spinner disabled
        assert [s for s in shown if s[1]] == [("Counting a Spark DataFrame on Spark", True)], rows
    shown.clear()
    Session(engine=SparkEngine(spark), progress=True).aggregate(
        sdf, by=["key"], user="user", metrics={"n": m.count_users()}, epsilon=1, delta=1e-6
    )
    # the groups are chosen (counted), then aggregated
    assert [s for s, enabled in shown if enabled] == [
        "Counting a Spark DataFrame on Spark",
        "Aggregating a Spark DataFrame on Spark",
    ]
    shown.clear()
    Session(engine=SparkEngine(spark)).histogram(sdf, **kwargs)
    assert shown and not any(enabled for _, enabled in shown)


def test_a_table_on_the_other_engine_names_the_engine_that_reads_it(spark: Any) -> None:
    """A Spark DataFrame given to the local engine, or a Polars or pandas table given to the
    Spark engine: the error says which kind of table it got and which engine reads it (both
    classes are called ``DataFrame``)."""
    frame = pl.DataFrame({"key": ["a", "b"], "user": [1, 2]})
    kwargs: dict[str, Any] = dict(key="key", epsilon=1, delta=1e-6)
    with pytest.raises(ValidationError) as info:
        Session().histogram(spark.createDataFrame(frame.to_arrow()), **kwargs)
    assert "got 'pyspark DataFrame'" in str(info.value)
    assert 'Session(engine="spark")' in str(info.value)
    for table, kind in ((frame, "polars"), (frame.to_pandas(), "pandas")):
        with pytest.raises(ValidationError) as info:
            Session(engine=SparkEngine(spark)).histogram(table, **kwargs)
        assert f"got '{kind} DataFrame'" in str(info.value)
        assert "spark.createDataFrame" in str(info.value)
