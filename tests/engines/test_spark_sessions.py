"""Spark where users run it: the engine's session, paths, Parquet destinations and the command
line's session, on whichever deployment the ``spark`` fixture reaches (local classic in the
main run; a Spark Connect server and a standalone cluster in tests/engines/test_spark_deployments
.py, which runs this module again in a child process).

* ``SparkEngine()`` reads with the source DataFrame's session, or for a file the active one, and
  never starts a session; with none active a file is refused with a typed error.
* A path with a URI scheme goes to Spark unchecked (Spark's own message says what is missing);
  a plain path is checked here.
* A Parquet release is written by Spark on the destination's file system and published by one
  rename after the spend; destinations Spark cannot publish to safely are refused before
  anything is read or spent, with the reason.
* ``--spark-remote``/``SPARK_REMOTE``/``--spark-master``/``--spark-conf`` reach the deployment;
  clashes and bad settings are one-line errors; the shuffle is sized to the cluster's cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.conftest import spark_cli_arguments, spark_cores, spark_url
from tests.spark_servers import SRC

from privhist import Session
from privhist.accounting.ledger import Ledger
from privhist.cli.main import main
from privhist.core.budget import Budget
from privhist.core.errors import InputDataError, ValidationError
from privhist.engines.spark import SparkEngine
from privhist.engines.spark.publish import ClientSite
from privhist.engines.spark.sessions import PARTITIONS_PER_CORE, is_connect, size_shuffle
from privhist.session import DryRun

KWARGS: dict[str, Any] = dict(
    key="word", user="user", max_partitions=3, mechanism="stability", epsilon=1, delta=1e-6, seed=4
)


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> tuple[pl.DataFrame, Path]:
    g = np.random.default_rng(34)
    n = 8000
    frame = pl.DataFrame(
        {
            "user": g.integers(0, 900, n),
            "word": [f"w{v}" for v in (g.zipf(1.4, n) % 40).tolist()],
            "spend": g.integers(1, 50, n),
        }
    )
    path = tmp_path_factory.mktemp("sessions") / "records.csv"
    frame.write_csv(path)
    return frame, path


def _no_new_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every session builder fail: the engine must use the sessions that exist."""

    def refuse(self: Any) -> Any:
        raise AssertionError("the engine started a Spark session")

    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)
    try:
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession
    except ImportError:  # the connect extra is not installed
        return
    monkeypatch.setattr(RemoteSparkSession.Builder, "getOrCreate", refuse)


def _ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.init_dataset("d", Budget(10.0, 1e-4))
    return ledger


def _spends(ledger: Ledger) -> int:
    return len(ledger.show("d").spends)


def test_the_engine_reads_with_the_sessions_there_are(
    spark: Any,
    records: tuple[pl.DataFrame, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Session(engine="spark")`` (no session given) on a DataFrame, a plain path and a
    ``file:`` URI, in either noise mode, with a Parquet output: the local engine's release,
    and no session builder is called."""
    frame, path = records
    _no_new_sessions(monkeypatch)
    df = spark.createDataFrame(frame.to_arrow())
    # (a file's users are text, a table's integers: each compares with the same source, local)
    cases = [
        (df, frame, "executors"),
        (str(path), path, "driver"),
        (f"file:{path}", path, "executors"),
    ]
    for i, (source, same, noise_on) in enumerate(cases):
        local = Session(noise_on=noise_on).histogram(same, **KWARGS)
        assert not isinstance(local, DryRun) and len(local) > 0
        out = tmp_path / f"{noise_on}-{i}.parquet"
        remote = Session(engine="spark", noise_on=noise_on).histogram(source, output=out, **KWARGS)
        assert not isinstance(remote, DryRun)
        assert remote.to_polars().equals(local.to_polars()), (noise_on, source)
        assert pl.read_parquet(out / "*.parquet").equals(local.to_polars())
        meta = json.loads((out / "_privhist.json").read_text())
        assert meta["integrity"]["rows"] == len(local)


def test_aggregations_read_with_the_sessions_there_are(
    spark: Any,
    records: tuple[pl.DataFrame, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Session(engine="spark").aggregate`` (no session given) on a DataFrame and a ``file:``
    URI, with bounds found inside the spend (the value range) and a Parquet output: the local
    engine's release, and no session builder is called."""
    from privhist import metrics as m

    frame, path = records
    _no_new_sessions(monkeypatch)
    df = spark.createDataFrame(frame.to_arrow())
    metrics = {"n": m.count(), "avg": m.mean("spend", "auto", "auto")}
    kwargs: dict[str, Any] = dict(
        by="word", user="user", max_partitions=2, metrics=metrics, epsilon=2, delta=1e-6, seed=4
    )
    for i, (source, same) in enumerate([(df, frame), (f"file:{path}", path)]):
        local = Session().aggregate(same, **kwargs)
        assert not isinstance(local, DryRun) and len(local) > 0
        out = tmp_path / f"aggregate-{i}.parquet"
        remote = Session(engine="spark").aggregate(source, output=out, **kwargs)
        assert not isinstance(remote, DryRun) and remote.diagnostics["engine"] == "spark"
        assert remote.to_polars().equals(local.to_polars()), source
        assert pl.read_parquet(out / "*.parquet").equals(local.to_polars())


def test_with_no_session_a_file_is_refused_and_none_started(
    records: tuple[pl.DataFrame, Path],
) -> None:
    """A fresh process with no Spark session: a file on the Spark engine is a typed error that
    says how to make a session, and no Spark was started."""
    _, path = records
    script = (
        "import sys\n"
        "from privhist import Session\n"
        "from privhist.core.errors import ValidationError\n"
        "try:\n"
        f"    Session(engine='spark').histogram({str(path)!r}, key='word', epsilon=1,\n"
        "                                      delta=1e-6, seed=1)\n"
        "except ValidationError as exc:\n"
        "    print(exc)\n"
        "from pyspark import SparkContext\n"
        "print('started' if SparkContext._active_spark_context is not None else 'none')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "MASTER")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message, started = done.stdout.strip().splitlines()
    assert message.startswith("parameter 'spark' of Session.histogram must be a SparkSession")
    assert "SparkSession.builder" in message and "SparkEngine(spark)" in message
    assert started == "none"


def test_paths_with_a_scheme_go_to_spark_unchecked(spark: Any, tmp_path: Path) -> None:
    """A missing ``file:`` URI is reported by Spark (its own words), a missing plain path by
    the local check; a file system Spark does not have is Spark's error too."""
    session = Session(engine=SparkEngine(spark))
    missing = tmp_path / "missing.csv"
    with pytest.raises(InputDataError, match="no such file"):
        session.histogram(str(missing), key="word", epsilon=1, delta=1e-6)
    with pytest.raises(InputDataError) as info:
        session.histogram(f"file:{missing}", key="word", epsilon=1, delta=1e-6)
    assert "no such file" not in str(info.value)
    assert "PATH_NOT_FOUND" in str(info.value) or "does not exist" in str(info.value)
    with pytest.raises(InputDataError, match="s3a"):
        session.histogram("s3a://privhist-test/none.csv", key="word", epsilon=1, delta=1e-6)


def test_parquet_destinations_are_checked_before_the_spend(
    spark: Any, records: tuple[pl.DataFrame, Path], tmp_path: Path
) -> None:
    """An existing destination, a file system without atomic rename (classic) or beyond this
    process's reach (Spark Connect), a URI for a release this process writes itself: refused
    with the reason, before anything is spent; a ``file:`` URI destination is published."""
    _, path = records
    ledger = _ledger(tmp_path)
    session = Session(ledger, "d", engine=SparkEngine(spark))
    kwargs: dict[str, Any] = dict(key="word", user="user", epsilon=1, delta=1e-6)
    out = tmp_path / "r.parquet"
    release = session.histogram(str(path), output=f"file:{out}", **kwargs)
    assert not isinstance(release, DryRun) and _spends(ledger) == 1
    assert pl.read_parquet(out / "*.parquet").equals(release.to_polars())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    with pytest.raises(ValidationError, match="does not exist yet"):
        session.histogram(str(path), output=f"file:{out}", **kwargs)
    expected = "Spark Connect" if is_connect(spark) else "atomic directory rename.*s3a"
    with pytest.raises(ValidationError, match=expected):
        session.histogram(str(path), output="s3a://privhist-test/r.parquet", **kwargs)
    with pytest.raises(ValidationError, match="a plain path"):
        session.histogram(str(path), output=f"file:{tmp_path}/r.csv", **kwargs)
    with pytest.raises(ValidationError, match="a plain path"):
        session.histogram(
            str(path),
            key="word",
            epsilon=1.0,
            mechanism="compact",
            options={"max_keys": 4},
            output=f"file:{tmp_path}/c.parquet",
        )
    assert _spends(ledger) == 1


def test_a_probe_that_cannot_see_sparks_files_refuses(tmp_path: Path) -> None:
    """The probe's refusal: a Spark whose writes land where this process cannot see them (here
    nowhere) leaves the destination refused, with nothing left behind."""

    class Nowhere:
        """Every call and attribute is itself: ``createDataFrame(...).write.text(path)`` runs
        and writes nothing."""

        def __getattr__(self, name: str) -> Any:
            return self

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self

    site = ClientSite(Nowhere(), str(tmp_path / "r.parquet"), f"file:{tmp_path}/r.parquet",
                      tmp_path / "r.parquet")  # fmt: skip
    with pytest.raises(ValidationError, match=r"share.*not visible here"):
        site.check()
    assert list(tmp_path.iterdir()) == []


def test_the_shuffle_is_sized_to_the_cluster(spark: Any) -> None:
    """Spark's default of 200 shuffle partitions becomes 3 per core of the deployment; a value
    someone set is kept."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    sized = PARTITIONS_PER_CORE * spark_cores()
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "200")
        assert size_shuffle(spark) == sized
        assert spark.conf.get("spark.sql.shuffle.partitions") == str(sized)
        spark.conf.set("spark.sql.shuffle.partitions", "9")
        assert size_shuffle(spark) is None
        assert spark.conf.get("spark.sql.shuffle.partitions") == "9"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_the_command_line_reaches_the_deployment(
    spark: Any,
    records: tuple[pl.DataFrame, Path],
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--spark-remote``/``--spark-master`` (or ``SPARK_REMOTE``) and ``--spark-conf`` give the
    local release; clashes and bad settings are one-line errors before anything runs."""
    _, path = records
    argv = ["histogram", str(path), "--key", "word", "--user", "user", "--epsilon", "1"]
    argv += ["--delta", "1e-6", "--seed", "4", "--no-progress"]
    assert main([*argv, "--noise-on", "executors"]) == 0
    local = capsys.readouterr().out
    where = [*spark_cli_arguments(), "--spark-conf", "spark.sql.shuffle.partitions=4"]
    assert main([*argv, "--engine", "spark", *where]) == 0
    assert capsys.readouterr().out == local and len(local.splitlines()) > 2
    url = spark_url()
    if url is not None and url.startswith("sc://"):
        # SPARK_REMOTE alone reaches the server; a setting Connect cannot take is refused
        monkeypatch.setenv("SPARK_REMOTE", url)
        assert main([*argv, "--engine", "spark"]) == 0
        assert capsys.readouterr().out == local
        assert main([*argv, "--engine", "spark", "--spark-conf", "spark.executor.cores=3"]) == 2
        assert "runtime SQL setting" in capsys.readouterr().err
    bad = [
        (["--engine", "spark", "--spark-conf", "no-equals-sign"], "KEY=VALUE"),
        (["--spark-remote", "sc://127.0.0.1:1"], "given with --engine spark"),
        (["--spark-conf", "a=b"], "given with --engine spark"),
        (["--engine", "spark", "--spark-remote", "http://x"], "Spark Connect URL"),
        (
            ["--engine", "spark", "--spark-master", "local[1]", "--spark-remote", "sc://h"],
            "not given with a Spark Connect URL",
        ),
    ]
    for extra, message in bad:
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:1")
    assert main([*argv, "--engine", "spark", "--spark-master", "local[1]"]) == 2
    assert "SPARK_REMOTE" in capsys.readouterr().err


def test_the_command_line_starts_spark_only_to_read(
    spark: Any,
    records: tuple[pl.DataFrame, Path],
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--engine spark`` starts its session when the release reads the data, saying so while
    it starts: a dry run, a parameter refused and a release the budget refuses answer without
    it (starting Spark costs seconds and a page of Spark's own log lines), and a release starts
    it once."""
    import privhist.engines.local.progress as progress
    import privhist.engines.spark.sessions as sessions

    built: list[dict[str, Any]] = []
    shown: list[tuple[str, bool]] = []
    status = progress.status

    def build_session(**kwargs: Any) -> Any:
        built.append(kwargs)
        return spark

    def recorded(message: str, *, enabled: bool = True, **kwargs: Any) -> Any:
        shown.append((message, enabled))
        return status(message, enabled=enabled, **kwargs)

    monkeypatch.setattr(sessions, "build_session", build_session)
    monkeypatch.setattr(progress, "status", recorded)
    _, path = records
    ledger = _ledger(tmp_path)
    argv = ["histogram", str(path), "--key", "word", "--user", "user", "--delta", "1e-6"]
    argv += ["--engine", "spark", "--spark-master", "local[1]"]
    assert main([*argv, "--epsilon", "1", "--dry-run"]) == 0
    assert "cost" in capsys.readouterr().out
    assert main([*argv, "--epsilon", "-1"]) == 2
    assert "--epsilon" in capsys.readouterr().err
    spend = ["--ledger", str(tmp_path / "ledger.sqlite"), "--dataset", "d"]
    assert main([*argv, "--epsilon", "11", *spend]) == 2
    assert "refused" in capsys.readouterr().err and _spends(ledger) == 0
    assert built == [] and shown == []
    assert main([*argv, "--epsilon", "1", *spend]) == 0
    assert _spends(ledger) == 1 and len(built) == 1
    assert built[0]["master"] == "local[1]" and built[0]["remote"] is None
    assert ("Starting Spark (local[1])", True) in shown


def test_a_destination_on_a_fuse_mount_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FUSE mount (object storage behind a directory tree: Databricks /Volumes, s3fs) renames
    file by file: refused, naming the mount's type, before any session is asked."""
    import privhist.engines.spark.publish as publish

    here = os.path.realpath(tmp_path)
    table = tmp_path / "mounts"
    table.write_text(f"/dev/sda1 / ext4 rw 0 0\nlake {here} fuse.gcsfuse rw 0 0\n")
    monkeypatch.setattr(publish, "MOUNTS", str(table))
    with pytest.raises(ValidationError, match=r"FUSE mount \(fuse\.gcsfuse\)"):
        publish.site_of(None, tmp_path / "r.parquet")
    with pytest.raises(ValidationError, match="FUSE"):
        publish.site_of(None, f"file:{tmp_path}/sub/r.parquet")
    table.write_text(f"/dev/sda1 / ext4 rw 0 0\nlake {here}-other fuse rw 0 0\n")
    assert publish.mount_type(tmp_path / "r.parquet") == "ext4"
