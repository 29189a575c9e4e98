"""The one-pass Spark count and Spark's own Parquet releases.

* The per-partition bounding (:mod:`privhist.engines.spark.bounding`) keeps, for each user, the
  ``k`` pairs of smallest (priority, key), checked against a brute-force reference, on both its
  integer and its general path.
* A seeded release in which no user is bounded reads the same words as the local engine (the
  tentatively drawn priority secret is taken back).
* A Parquet release on Spark is a dataset written by Spark, staged beside the destination and
  renamed only after the spend commits; a failing job spends nothing and publishes nothing; a
  failing write after the commit publishes nothing; a killed release publishes nothing unpaid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import privhist
from privhist import Session
from privhist.accounting.ledger import Ledger
from privhist.core.budget import Budget
from privhist.core.errors import ValidationError
from privhist.engines.priorities import PairPriorities
from privhist.engines.spark import SparkEngine
from privhist.engines.spark.bounding import FACTS, bound_table
from privhist.session import DryRun


def _brute_force(users: list[Any], keys: list[Any], f: PairPriorities, k: int, c: int) -> dict:
    """Per key: (sum of min(n, c) over kept pairs, kept pairs), by loops over each user."""
    pairs: dict[Any, dict[Any, int]] = {}
    for u, key in zip(users, keys, strict=True):
        if u is None or key is None:
            continue
        pairs.setdefault(u, {})
        pairs[u][key] = pairs[u].get(key, 0) + 1
    out: dict[Any, list[int]] = {}
    for u, held in pairs.items():
        ks = sorted(held)
        for key in ks:
            out.setdefault(key, [0, 0])
        if len(ks) > k:
            prio = f(
                np.array([u] * len(ks)),
                np.array(ks, dtype=object if isinstance(ks[0], str) else np.int64),
            )
            ks = [key for _, key in sorted(zip(prio.tolist(), ks, strict=True))][:k]
        for key in ks:
            out[key][0] += min(held[key], c)
            out[key][1] += 1
    return out


@pytest.mark.parametrize("text", [False, True])
def test_partition_bounding_keeps_the_k_smallest_priorities(text: bool) -> None:
    g = np.random.default_rng(4)
    n = 3000
    users = g.integers(0, 120, n).tolist()
    keys = (g.zipf(1.3, n) % 90).tolist()
    users[5] = None
    keys[7] = None
    keys[9] = None
    users[9] = None
    if text:
        users = [None if u is None else f"u{u}" for u in users]
        keys = [None if x is None else f"k{x}" for x in keys]
    f = PairPriorities(bytes(range(32)))
    expected = _brute_force(users, keys, f, 3, 2)
    table = pa.table({"key": keys, "user": users})
    paths = [False, True] if not text else [False]
    for key_is_int in paths:  # the integer path and the general (Polars) path
        src = (
            table
            if not key_is_int
            else table.cast(pa.schema([("key", pa.int64()), ("user", pa.int64())]))
        )
        out = pl.from_arrow(bound_table(src, f, 3, 2, key_is_int))
        facts = out.filter(pl.col("key").is_null()).row(0, named=True)
        assert [facts[name] for name in FACTS] == [
            n,
            2,
            2,
            len({u for u, x in zip(users, keys, strict=True) if u is not None and x is not None}),
            facts["users_bounded"],
        ]
        assert facts["users_bounded"] > 50
        rows = out.filter(pl.col("key").is_not_null())
        got = {
            (str(r["key"]) if text else r["key"]): [r["count"], r["units"]]
            for r in rows.iter_rows(named=True)
        }
        if not text and not key_is_int:
            got = {int(key): v for key, v in got.items()}
        assert got == expected


def test_seeded_release_with_no_user_bounded_equals_the_local_one(spark: Any) -> None:
    """Every user holds at most k keys: the local engine draws no priority secret, so Spark
    takes back the one it drew before counting, and the noise reads the same words."""
    g = np.random.default_rng(8)
    frame = pl.DataFrame({"user": g.integers(0, 3000, 6000), "key": g.integers(0, 4, 6000)})
    kwargs: dict[str, Any] = dict(
        key="key", user="user", max_partitions=4, epsilon=1, delta=1e-6, seed=12
    )
    local = Session(noise_on="executors").histogram(frame, **kwargs)
    remote = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(
        spark.createDataFrame(frame.to_pandas()), **kwargs
    )
    assert not isinstance(local, DryRun) and not isinstance(remote, DryRun)
    assert remote.diagnostics["users_bounded"] == 0 and len(local) > 0
    assert local.to_polars().equals(remote.to_polars())


def _data(tmp_path: Path) -> Path:
    g = np.random.default_rng(2)
    path = tmp_path / "visits.parquet"
    pl.DataFrame(
        {"user": g.integers(0, 800, 20000), "key": [f"k{x}" for x in g.zipf(1.3, 20000) % 60]}
    ).write_parquet(path)
    return path


def _ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.init_dataset("d", Budget(5.0, 1e-4))
    return ledger


def _spends(ledger: Ledger) -> int:
    return len(ledger.show("d").spends)


def _hidden(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))


def test_parquet_release_is_a_dataset_written_by_spark(spark: Any, tmp_path: Path) -> None:
    data = _data(tmp_path)
    ledger = _ledger(tmp_path)
    session = Session(ledger, "d", engine=SparkEngine(spark, driver_rows=0))
    out = tmp_path / "release.parquet"
    kwargs: dict[str, Any] = dict(
        key="key",
        user="user",
        mechanism="stability",
        max_partitions=3,
        epsilon=1,
        delta=1e-6,
        output=out,
    )
    release = session.histogram(data, **kwargs)
    assert not isinstance(release, DryRun) and release.diagnostics["noise"] == "driver (keyed)"
    assert out.is_dir() and (out / "_privhist.json").is_file() and _spends(ledger) == 1
    written = pl.read_parquet(out / "*.parquet")
    assert len(written) > 0 and written.equals(release.to_polars())  # rows, order, columns
    meta = json.loads((out / "_privhist.json").read_text())
    assert meta["integrity"]["rows"] == len(release)
    assert meta["mechanism"] == release.metadata["mechanism"]
    assert _hidden(tmp_path) == []
    # an existing destination is refused before anything is spent: a dataset (before the
    # data is read), a file (Spark cannot rename a dataset over it)
    with pytest.raises(ValidationError, match="not a directory"):
        session.histogram(data, **kwargs)
    taken = tmp_path / "taken.parquet"
    taken.write_bytes(b"x")
    with pytest.raises(ValidationError, match="does not exist yet"):
        session.histogram(data, **{**kwargs, "output": taken})
    assert _spends(ledger) == 1 and taken.read_bytes() == b"x"
    # a mechanism drawn on the driver: the same dataset layout, the release's own order
    ints = tmp_path / "ints.parquet"
    g = np.random.default_rng(6)
    pl.DataFrame({"key": g.zipf(1.5, 4000) % 50}).write_parquet(ints)  # its universe: integers
    out2 = tmp_path / "sparse.parquet"
    kw2: dict[str, Any] = dict(key="key", epsilon=1.0, seed=3, mechanism="pure-sparse")
    driver = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(ints, output=out2, **kw2)
    assert not isinstance(driver, DryRun) and driver.diagnostics["noise"] == "driver"
    assert pl.read_parquet(out2 / "*.parquet").equals(driver.to_polars())
    # a weighted selector (drawn by the session on the driver): written by Spark as well
    out3 = tmp_path / "wgm.parquet"
    kw3: dict[str, Any] = dict(key="key", user="user", epsilon=1.0, delta=1e-6, seed=5)
    wgm = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(
        data, mechanism="wgm", output=out3, **kw3
    )
    assert not isinstance(wgm, DryRun) and len(wgm) > 0
    assert (out3 / "_privhist.json").is_file()
    assert pl.read_parquet(out3 / "*.parquet").equals(wgm.to_polars())


def test_compact_release_on_spark_stays_one_readable_file(spark: Any, tmp_path: Path) -> None:
    """A release that is not rows (``compact``: a polynomial in the metadata) keeps the driver's
    single Parquet file, which ``read_compact`` reads back."""
    from privhist.io.compact import read_compact
    from privhist.mechanisms.finite.compact import CompactCounts

    ints = tmp_path / "ints.parquet"
    pl.DataFrame({"key": [1, 5, 5, 99] * 50}).write_parquet(ints)
    out = tmp_path / "compact.parquet"
    release = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(
        ints,
        key="key",
        epsilon=1.0,
        seed=3,
        mechanism="compact",
        options={"max_keys": 4},
        output=out,
    )
    assert not isinstance(release, DryRun) and out.is_file()

    drawn = CompactCounts.from_release(release).counts([1, 5, 99, 7])
    assert CompactCounts(read_compact(out)).counts([1, 5, 99, 7]) == drawn


@pytest.mark.parametrize("where", ["executors", "driver", "counted on the driver"])
def test_failing_noise_charges_and_publishes_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The noise job fails on the executors, the keyed draw of a small table on the driver, or
    the draw of a small source counted on the driver: no spend, no file, nothing hidden left."""
    import privhist.engines.keyed_noise as keyed_noise
    import privhist.engines.spark.noise as noise

    def failing(*args: Any, **kwargs: Any) -> Any:
        def boom(group: Any, table: Any) -> Any:
            raise RuntimeError("executor lost")

        return boom

    def failing_draw(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("executor lost")

    data = _data(tmp_path)
    ledger = _ledger(tmp_path)
    if where == "executors":
        monkeypatch.setattr(noise, "_block_function", failing)
        engine = SparkEngine(spark, driver_keys=0, driver_rows=0)
    elif where == "driver":
        monkeypatch.setattr(keyed_noise, "release_keyed", failing_draw)
        engine = SparkEngine(spark, driver_rows=0)
    else:  # a small source: counted and drawn by the local engine on the driver
        import privhist.engines.local.engine as local_engine

        monkeypatch.setattr(local_engine, "release_keyed", failing_draw)
        engine = SparkEngine(spark)
    out = tmp_path / "release.parquet"
    with pytest.raises(Exception, match="executor lost"):
        Session(ledger, "d", engine=engine).histogram(
            data, key="key", epsilon=1, delta=1e-6, output=out
        )
    assert _spends(ledger) == 0 and not out.exists() and _hidden(tmp_path) == []


def test_failing_write_after_the_commit_publishes_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename fails (the destination appeared meanwhile): the staged dataset is removed,
    the error names the destination, and the spend, committed before anything was written,
    stays (the budget errs on the side of privacy)."""
    import privhist.engines.spark.publish as publish

    data = _data(tmp_path)
    ledger = _ledger(tmp_path)
    out = tmp_path / "release.parquet"

    def squat(step: str) -> None:
        if step == "staged":
            out.mkdir()
            (out / "other").write_text("x")

    monkeypatch.setattr(publish, "checkpoint", squat)
    with pytest.raises(OSError, match=r"cannot write .*release\.parquet"):
        Session(ledger, "d", engine=SparkEngine(spark, driver_rows=0)).histogram(
            data, key="key", epsilon=1, delta=1e-6, output=out
        )
    assert _spends(ledger) == 1
    assert sorted(p.name for p in out.iterdir()) == ["other"] and _hidden(tmp_path) == []


@pytest.mark.parametrize(("step", "spends"), [("drawn", 0), ("staged", 1)])
def test_killed_spark_release_publishes_nothing_unpaid(
    tmp_path: Path, step: str, spends: int
) -> None:
    """``histogram --engine spark -o out.parquet`` SIGKILLed after the executors drew (inside
    the transaction: no spend, nothing on disk) or once Spark has staged the dataset (after the
    commit: the spend is recorded, nothing is published). The ledger opens cleanly. (A separate
    process with its own local Spark session; tests/hardening/test_kill.py covers every step of
    the shared release path.)"""
    data = tmp_path / "data.csv"
    data.write_text("user,key\n" + "".join(f"u{i},{'abc'[i % 7 % 3]}\n" for i in range(600)))
    ledger = tmp_path / "ledger.sqlite"
    Ledger(ledger).init_dataset("d", Budget(2.0, 1e-5))
    out = tmp_path / "out.parquet"
    argv = [sys.executable, "-m", "privhist", "histogram", str(data), "--key", "key",
            "--epsilon", "0.5", "--delta", "1e-6", "--engine", "spark", "--spark-master",
            "local[1]", "--output", str(out), "--ledger", str(ledger), "--dataset", "d",
            "--no-progress"]  # fmt: skip
    env = {**os.environ, "PRIVHIST_FAULT_KILL_AT": step, "PYSPARK_PYTHON": sys.executable}
    src = str(Path(privhist.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    done = subprocess.run(argv, env=env, capture_output=True, timeout=300, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    assert not out.exists()
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("ledger"))
    if spends:
        # at most the hidden staged dataset, whose spend is recorded
        assert [x for x in left if not x.startswith(".out.parquet.")] == ["data.csv"]
    else:
        assert left == ["data.csv"]
    assert len(Ledger(ledger, create=False).show("d").spends) == spends
