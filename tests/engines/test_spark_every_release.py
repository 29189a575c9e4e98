"""Spark serves every release that reads records: seeded histograms, heavy hitters, quantiles,
range counts and weighted samples from a Spark DataFrame (Python) and with ``--engine spark``
(command line) equal the local engine's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.conftest import spark_cli_arguments

from privhist import Release, Session
from privhist import metrics as m
from privhist.cli.main import main


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> tuple[pl.DataFrame, Path]:
    g = np.random.default_rng(21)
    n = 30_000
    frame = pl.DataFrame(
        {
            "user": g.integers(0, 3000, n),
            "word": [f"w{v}" for v in (g.zipf(1.4, n) % 50).tolist()],
            "age": [str(v) for v in g.integers(18, 90, n).tolist()],
            "spend": g.integers(1, 50, n),
        }
    )
    path = tmp_path_factory.mktemp("every") / "records.csv"
    frame.write_csv(path)
    return frame, path


_METRICS = {
    "n": m.count(),
    "spend": m.sum("spend", 0, 60),
    "avg": m.mean("spend", 0, 60),
    "var": m.variance("spend", 0, 60),
    "q": m.quantiles("spend", [0.5, 0.9], 0, 60),
}

CALLS: dict[str, Any] = {
    "histogram": lambda s, src: s.histogram(src, key="word", epsilon=1, delta=1e-8, seed=4),
    "user-level histogram": lambda s, src: s.histogram(
        src, key="word", user="user", epsilon=1, delta=1e-6, seed=4
    ),
    "vote selection": lambda s, src: s.histogram(
        src, key="word", user="user", mechanism="vote-selection", epsilon=1, delta=1e-6, seed=4
    ),
    "heavy hitters": lambda s, src: s.heavy_hitters(src, key="word", epsilon=2, delta=1e-6, seed=4),
    "one-shot heavy hitters": lambda s, src: s.heavy_hitters(
        src, key="word", epsilon=1, delta=1e-6, one_shot=True, seed=4
    ),
    "quantiles": lambda s, src: s.quantiles(
        src, column="age", q=[0.1, 0.5, 0.9], lower=0, upper=128, epsilon=1, delta=1e-8, seed=4
    ),
    "binary-search quantiles": lambda s, src: s.quantiles(
        src,
        column="age",
        q=[0.5],
        lower=0,
        upper=128,
        epsilon=1,
        delta=1e-8,
        seed=4,
        method="binary-search",
    ),
    "range counts": lambda s, src: s.range_counts(
        src,
        column="age",
        queries=[(0, 30), (30, 128)],
        lower=0,
        upper=128,
        epsilon=1,
        delta=1e-8,
        seed=4,
    ),
    "weighted sample": lambda s, src: s.weighted_sample(
        src, key="word", epsilon=1, delta=1e-6, tau=2.0, seed=4
    ),
    "aggregate, private groups": lambda s, src: s.aggregate(
        src, by="word", metrics=_METRICS, epsilon=1, delta=1e-6, seed=4
    ),
    "aggregate, users and two columns": lambda s, src: s.aggregate(
        src,
        by=["word", "age"],
        user="user",
        max_partitions=2,
        max_per_partition=2,
        metrics=_METRICS,
        epsilon=3,
        delta=1e-6,
        seed=4,
    ),
    "aggregate, public groups, auto bounds": lambda s, src: s.aggregate(
        src,
        by="word",
        metrics={"s": m.mean("spend", "auto", "auto")},
        partitions=["w1", "w2", "w3", "none"],
        epsilon=1,
        seed=4,
    ),
    "weighted sample of weights": lambda s, src: s.weighted_sample(
        src, key="word", weight="spend", aggregate=True, epsilon=1, delta=1e-6, k=20, seed=4
    ),
}


def _same(a: Release, b: Release) -> None:
    assert a.to_polars().equals(b.to_polars()), (a.to_polars(), b.to_polars())
    assert len(a) > 0


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("noise_on", ["driver", "executors"])
@pytest.mark.parametrize("driver_rows", [0, 2**22], ids=["counted on executors", "on the driver"])
def test_a_spark_dataframe_gives_the_local_release(
    spark: Any, records: tuple[pl.DataFrame, Path], name: str, noise_on: str, driver_rows: int
) -> None:
    from privhist.engines.spark import SparkEngine

    frame, _ = records
    local = CALLS[name](Session(noise_on=noise_on), frame)  # type: ignore[arg-type]
    engine = SparkEngine(spark, driver_rows=driver_rows)
    remote = CALLS[name](
        Session(engine=engine, noise_on=noise_on),  # type: ignore[arg-type]
        spark.createDataFrame(frame.to_arrow()),
    )
    assert isinstance(local, Release) and isinstance(remote, Release)
    _same(local, remote)
    assert remote.diagnostics["engine"] == "spark"
    if name == "histogram" and noise_on == "executors":  # a keyed draw says where it counted
        assert remote.diagnostics["counting"] == ("driver" if driver_rows else "executors")


COMMANDS = {
    "quantiles": [
        "quantiles",
        "--column",
        "age",
        "--range",
        "0",
        "128",
        "--q",
        "0.5",
        "0.9",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--json",
    ],
    "range": [
        "range",
        "--column",
        "age",
        "--range",
        "0",
        "128",
        "--query",
        "0",
        "30",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--json",
    ],
    "heavy-hitters": [
        "heavy-hitters",
        "--key",
        "word",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--top",
        "0",
    ],
    "sample": ["sample", "--key", "word", "--epsilon", "1", "--delta", "1e-6", "--tau", "2"],
    "aggregate": [
        "aggregate",
        "--by",
        "word",
        "--user",
        "user",
        "--max-partitions",
        "2",
        "--metric",
        "count",
        "--metric",
        "total=sum(spend,0,60)",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
    ],
    "histogram": [
        "histogram",
        "--key",
        "word",
        "--user",
        "user",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
    ],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_engine_spark_on_the_command_line_gives_the_local_output(
    spark: Any, records: tuple[pl.DataFrame, Path], command: str, capsys: Any
) -> None:
    _, path = records
    argv = [COMMANDS[command][0], str(path), *COMMANDS[command][1:], "--seed", "7"]
    outputs = []
    for engine in ("local", "spark"):
        where = spark_cli_arguments() if engine == "spark" else []
        code = main([*argv, "--engine", engine, *where, "--noise-on", "driver"])
        out, err = capsys.readouterr()
        assert code == 0, err
        outputs.append(out)
    local, remote = outputs
    if "--json" in argv:
        a, b = json.loads(local), json.loads(remote)
        for doc in (a, b):
            doc.pop("randomness", None)
        assert a == b
    else:
        assert local == remote and len(local.splitlines()) > 2
