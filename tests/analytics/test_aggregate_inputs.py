"""What an aggregation makes of its input columns (``Session.aggregate``, ``privhist
aggregate``): value columns whose type holds no numbers are refused before any record is read
and before the ledger is charged; the records whose value is empty or not a number are counted
per value column, as exact facts beside the other dropped records; and a column the source lacks
is reported under the parameter that names it, in the words of ``aggregate``."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from tests.cli_run import run

from privhist import Budget, Release, Session
from privhist import metrics as m
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import SeededRandom
from privhist.core.requests import Fields, GroupAggregates
from privhist.engines.local import LocalEngine

N = 400


def _frame() -> pl.DataFrame:
    g = np.random.default_rng(5)
    return pl.DataFrame(
        {
            "user": g.integers(0, 100, N),
            "country": g.choice(["de", "fr"], N),
            "device": g.choice(["ios", "web"], N),
            "amount": g.uniform(0, 100, N),
        }
    )


def _spy_reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every request the local engine is asked to answer (each one reads the source)."""
    asked: list[Any] = []
    real = LocalEngine.compute

    def compute(self: Any, source: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(request)
        return real(self, source, request, *args, **kwargs)

    monkeypatch.setattr(LocalEngine, "compute", compute)
    return asked


def _left(s: Session) -> tuple[float, float]:
    left = s.remaining()
    assert left is not None
    return left.epsilon, left.delta


TEXT_SOURCES = [
    "pandas objects",
    "pandas strings",
    "pandas booleans",
    "polars text",
    "polars categories",
    "polars booleans",
    "polars dates",
    "arrow text",
    "parquet text",
]


def _text_sources(tmp_path: Path) -> dict[str, tuple[Any, str]]:
    """Sources whose column ``x`` has a type that holds no numbers, with the type named."""
    frame = _frame()
    words = frame.with_columns(x=pl.col("device"))
    parquet = tmp_path / "orders.parquet"
    words.write_parquet(parquet)
    return {
        "pandas objects": (words.to_pandas(), "String"),
        "pandas strings": (words.to_pandas().astype({"x": "string"}), "string"),
        "pandas booleans": (frame.to_pandas().assign(x=True), "bool"),
        "polars text": (words, "String"),
        "polars categories": (words.with_columns(pl.col("x").cast(pl.Categorical)), "Categ"),
        "polars booleans": (frame.with_columns(x=pl.lit(True)), "Boolean"),
        "polars dates": (frame.with_columns(x=pl.lit(datetime.date(2024, 1, 1))), "Date"),
        "arrow text": (words.to_arrow(), "String"),
        "parquet text": (str(parquet), "String"),
    }


@pytest.mark.parametrize(
    "metric",
    [
        m.sum("x", 0, 10),
        m.mean("x", 0, 10),
        m.variance("x", 0, 10),
        m.quantiles("x", [0.5], 0, 10),
        m.mean("x", "auto", "auto"),
    ],
    ids=["sum", "mean", "variance", "quantiles", "mean with automatic bounds"],
)
@pytest.mark.parametrize("source", TEXT_SOURCES)
def test_a_value_column_of_another_type_is_refused_before_reading_and_charging(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str, metric: Any
) -> None:
    """A sum, mean, variance or quantiles of a column whose type (a table's, a Parquet
    schema's) holds no numbers: a ValidationError naming ``metrics`` and the column's type,
    with no request answered (no record read) and nothing spent, user level and record level,
    and a dry run of a table says so too."""
    data, type_name = _text_sources(tmp_path)[source]
    asked = _spy_reads(monkeypatch)
    with Session.in_memory(Budget(5.0, 1e-5)) as s:
        for user in ("user", None):
            with pytest.raises(ValidationError) as info:
                s.aggregate(
                    data,
                    by="country",
                    user=user,
                    metrics={"v": metric, "n": m.count()},
                    epsilon=1.0,
                    delta=1e-6,
                )
            assert info.value.parameter == "metrics" and info.value.got == "v", str(info.value)
            assert "Session.aggregate" in str(info.value) and type_name in str(info.value)
            assert "'x'" in str(info.value)
        assert asked == [] and _left(s) == (5.0, 1e-5)
    if not isinstance(data, str):  # a dry run opens no file, but it reads a table's schema
        with pytest.raises(ValidationError, match="'x' is of type"):
            Session().aggregate(
                data, by="country", metrics={"v": metric}, epsilon=1, delta=1e-6, dry_run=True
            )


@pytest.mark.parametrize(
    "column",
    [
        pl.Series("x", np.arange(N), dtype=pl.Int32),
        pl.Series("x", np.linspace(0, 9, N), dtype=pl.Float32),
        pl.Series("x", [decimal.Decimal("1.25")] * N, dtype=pl.Decimal(10, 2)),
        pl.Series("x", [None] * N, dtype=pl.Null),
    ],
    ids=["integers", "floats", "decimals", "nulls"],
)
def test_value_columns_of_numbers_are_read_and_charged(column: pl.Series) -> None:
    """The control: integers, floats and decimals (Polars, pandas, Arrow), and a column of
    nulls only (no values, not a type of other values), are released and charged."""
    frame = _frame().with_columns(column)
    for data in (frame, frame.to_pandas(), frame.to_arrow()):
        with Session.in_memory(Budget(5.0, 1e-5)) as s:
            r = s.aggregate(
                data,
                by="country",
                metrics={"v": m.mean("x", 0, 10)},
                partitions=["de", "fr"],
                epsilon=1.0,
            )
            assert isinstance(r, Release) and len(r) == 2
            assert _left(s) == (4.0, 1e-5)
    # a pandas column of Python floats and None holds numbers: Polars reads it as Float64
    xs = [1.5, None] * (N // 2)
    objects = frame.to_pandas().assign(x=pd.Series(xs, dtype=object))
    r = Session().aggregate(
        objects, by="country", metrics={"v": m.sum("x", 0, 10)}, partitions=["de"], epsilon=1
    )
    nones = sum(c == "de" and x is None for c, x in zip(frame["country"], xs, strict=True))
    assert isinstance(r, Release) and r.diagnostics["values_not_numbers"] == {"x": nones}


def _csv(tmp_path: Path) -> tuple[Path, dict[str, int], dict[str, int], int]:
    """A CSV file whose ``amount`` cells are numbers, or empty, or text that is not a finite
    number; with the numbers of records and of numbers per group, and the number of cells that
    are not numbers (all from the construction)."""
    good = ["12.5", " 7 ", "-3", "1e2", "0"]  # " 7 " is a number once its spaces are stripped
    bad = ["", "N/A", "inf", "NaN", "-Infinity", "1e400", "12,5", "seven"]
    lines = ["user,country,amount"]
    records = {"de": 0, "fr": 0}
    numbers = {"de": 0, "fr": 0}
    for i in range(3000):
        country = "de" if i % 3 else "fr"
        cell = bad[i % len(bad)] if i % 10 < 3 else good[i % len(good)]
        lines.append(f'u{i % 1000},{country},"{cell}"')
        records[country] += 1
        numbers[country] += cell in good
    path = tmp_path / "orders.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, records, numbers, sum(records.values()) - sum(numbers.values())


def test_values_that_are_not_numbers_are_left_out_of_their_metrics_only(tmp_path: Path) -> None:
    """What happens to a record whose value is empty or not a finite number (the behaviour the
    count below describes): it still counts as a record of its group (``count``), but not among
    the column's values (the ``n`` of its means and sums, the leaves of its quantiles)."""
    path, records, numbers, _ = _csv(tmp_path)
    spec = m.mean("amount", -10, 100)
    from privhist.analytics.aggregate import Aggregation

    agg = Aggregation({"a": spec}, ("country",), 1.0, 0.0, False, partitions=(("de",), ("fr",)))
    (request,) = agg.requests(Fields("country"))
    assert isinstance(request, GroupAggregates)
    table = LocalEngine().compute(str(path), request, SeededRandom(0))
    assert table.keys.tolist() == ["de", "fr"]
    assert table.records.tolist() == [records["de"], records["fr"]]
    assert table.values["a"]["n"].tolist() == [numbers["de"], numbers["fr"]]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"partitions": ["de", "fr"], "epsilon": 1.0},
        {"epsilon": 1.0, "delta": 1e-6},  # the selection counts the values of 'amount'
        {"epsilon": 1.0, "delta": 1e-6, "noise": "gaussian"},  # optimal selection first
        {"user": "user", "max_partitions": 2, "max_per_partition": 4, "epsilon": 1.0}
        | {"delta": 1e-6},
    ],
    ids=["public groups", "stability selection", "optimal selection", "user level"],
)
def test_values_that_are_not_numbers_are_counted_in_the_diagnostics(
    tmp_path: Path, kwargs: dict[str, Any]
) -> None:
    """``diagnostics["values_not_numbers"]``: per value column, the records of the groups
    aggregated whose value is empty or not a finite number, before contribution bounding; a
    column without such values has 0, and the metrics' values are what they were."""
    path, _, _, bad = _csv(tmp_path)
    frame = pl.read_csv(path, infer_schema=False)
    r = Session().aggregate(
        path,
        by="country",
        metrics={"a": m.mean("amount", -10, 100), "q": m.quantiles("amount", [0.5], -10, 100)},
        seed=2,
        **kwargs,
    )
    assert isinstance(r, Release) and len(r) == 2  # both groups: 2000 and 1000 records
    assert r.diagnostics["values_not_numbers"] == {"amount": bad}
    assert r.diagnostics["records"] == frame.height
    ages = tmp_path / "ages.csv"
    frame.with_columns(age=pl.lit("41")).write_csv(ages)
    r = Session().aggregate(
        ages,
        by="country",
        metrics={"a": m.mean("amount", -10, 100), "age": m.sum("age", 0, 100)},
        seed=2,
        **kwargs,
    )
    assert isinstance(r, Release)
    assert r.diagnostics["values_not_numbers"] == {"age": 0, "amount": bad}
    counts = Session().aggregate(path, by="country", metrics={"n": m.count()}, seed=2, **kwargs)
    assert isinstance(counts, Release) and "values_not_numbers" not in counts.diagnostics


def test_values_that_are_not_numbers_add_up_over_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A table read in several passes (each over its own users) counts every pass's records."""
    from privhist.engines.local import aggregate

    path, _, _, bad = _csv(tmp_path)
    monkeypatch.setattr(aggregate, "ROWS_PER_AGGREGATE_PASS", 700)  # 5 passes
    r = Session().aggregate(
        path,
        by="country",
        user="user",
        max_partitions=2,
        max_per_partition=4,
        metrics={"a": m.mean("amount", -10, 100)},
        epsilon=1.0,
        delta=1e-6,
        seed=2,
    )
    assert isinstance(r, Release) and r.diagnostics["passes"] == 5
    assert r.diagnostics["values_not_numbers"] == {"amount": bad}


def test_the_command_reports_values_that_are_not_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``privhist aggregate`` states the number on stderr with the other exact input facts, and
    writes nothing of it to the output; a file whose values are all numbers gets no such line."""
    path, _, _, bad = _csv(tmp_path)
    argv = ["aggregate", str(path), "--by", "country", "--epsilon", "1", "--delta", "1e-6"]
    code, out, err = run(capsys, *argv, "--metric", "avg=mean(amount,-10,100)", "--seed", "1")
    assert code == 0, err
    assert f"{bad} records whose 'amount' is empty or not a number left out" in err
    assert "input (exact, not private, not in the output)" in err
    assert out.splitlines()[0] == "country,avg" and len(out.splitlines()) == 3
    code, out, err = run(capsys, *argv, "--metric", "count", "--metric", "sum(user,0,1)")
    assert code == 0, err
    assert "not a number" in err  # 'user' holds text such as 'u7'
    clean = tmp_path / "clean.csv"
    pl.read_csv(path, infer_schema=False).with_columns(amount=pl.lit("5")).write_csv(clean)
    code, _, err = run(capsys, "aggregate", str(clean), *argv[2:], "--metric", "mean(amount,0,9)")
    assert code == 0, err
    assert "not a number" not in err


def test_columns_the_source_lacks_are_named_by_their_parameter(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A group, user or value column that is not in the file or table, and a file that does not
    exist: the message names ``by``, ``user``, ``metrics`` or ``path`` and ``aggregate`` (never
    a ``key`` of ``count``, which the user did not call), on the command line and in Python."""
    path = tmp_path / "orders.csv"
    _frame().write_csv(path)
    argv = ["--epsilon", "1", "--delta", "1e-6"]
    cases = [
        (["--by", "cuntry", "--metric", "count"], "parameter 'by' (--by) of aggregate", "'cuntry'"),
        (
            ["--by", "country,devce", "--metric", "count"],
            "parameter 'by' (--by) of aggregate",
            "'devce'",
        ),
        (
            ["--by", "country", "--user", "usr", "--metric", "count"],
            "parameter 'user' (--user) of aggregate",
            "'usr'",
        ),
        (
            ["--by", "country", "--metric", "mean(amout,0,1)"],
            "parameter 'metrics' (--metric) of aggregate",
            "'amout'",
        ),
    ]
    for extra, named, got in cases:
        code, _, err = run(capsys, "aggregate", str(path), *extra, *argv)
        assert code != 0
        assert named in err and f"got {got}" in err and "'country'" in err, err
        assert "'key'" not in err and "of count" not in err, err
    code, _, err = run(
        capsys, "aggregate", str(tmp_path / "nope.csv"), "--by", "c", "--metric", "count", *argv
    )
    assert code != 0 and "parameter 'path' of aggregate must be an existing file" in err, err
    for source in (_frame(), _frame().to_pandas(), str(path)):
        for kwargs, param in (
            ({"by": "cuntry"}, "by"),
            ({"by": ["country", "devce"]}, "by"),
            ({"by": "country", "user": "usr"}, "user"),
        ):
            with pytest.raises(InputDataError) as info:
                Session().aggregate(
                    source, metrics={"n": m.count()}, epsilon=1, delta=1e-6, **kwargs
                )
            assert f"parameter '{param}' of aggregate" in str(info.value), str(info.value)
    with pytest.raises(InputDataError, match="parameter 'path' of aggregate"):
        Session().aggregate(
            str(tmp_path / "nope.csv"), by="c", metrics={"n": m.count()}, epsilon=1, delta=1e-6
        )
    nested = _frame().with_columns(pl.concat_list("country", "device").alias("both"))
    with pytest.raises(InputDataError, match="must name columns of scalar values; got 'both'"):
        Session().aggregate(nested, by="both", metrics={"n": m.count()}, epsilon=1, delta=1e-6)


@pytest.fixture
def spark_session(spark: Any) -> Any:
    from privhist.engines.spark import SparkEngine

    return Session(engine=SparkEngine(spark, driver_rows=0))


def test_spark_refuses_a_text_value_column_and_counts_values_that_are_not_numbers(
    spark: Any, spark_session: Session, tmp_path: Path
) -> None:
    """On Spark: a DataFrame's text value column is refused before reading (its schema says
    so); a CSV file's cells that are not numbers are counted on the executors, as the local
    engine counts them."""
    frame = _frame()
    words = spark.createDataFrame(frame.with_columns(x=pl.col("device")).to_arrow())
    with pytest.raises(ValidationError, match="'x' is of type string"):
        spark_session.aggregate(
            words, by="country", metrics={"v": m.mean("x", 0, 1)}, epsilon=1, delta=1e-6
        )
    with pytest.raises(InputDataError, match="parameter 'by' of aggregate"):
        spark_session.aggregate(words, by="cuntry", metrics={"n": m.count()}, epsilon=1, delta=1e-6)
    path, _, _, bad = _csv(tmp_path)
    for kwargs in ({"partitions": ["de", "fr"]}, {"delta": 1e-6, "user": "user"}):
        r = spark_session.aggregate(
            str(path),
            by="country",
            metrics={"a": m.mean("amount", -10, 100)},
            epsilon=1.0,
            seed=2,
            **kwargs,
        )
        assert isinstance(r, Release) and r.diagnostics["engine"] == "spark"
        assert r.diagnostics["values_not_numbers"] == {"amount": bad}
    # a file is read where it lives, so its columns are found missing by the engine's own step,
    # and the error is restated for the method: its groups, not the count's key
    for kwargs in ({"partitions": ["de", "fr"]}, {"delta": 1e-6}):
        with pytest.raises(InputDataError, match=r"^parameter 'by' of aggregate must be one of"):
            spark_session.aggregate(
                str(path), by="cuntry", metrics={"n": m.count()}, epsilon=1.0, **kwargs
            )
