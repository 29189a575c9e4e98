"""Spark where users run it: the Spark equality tests again through a Spark Connect server and on
a two-worker standalone cluster, each started here on loopback (tests/spark_servers.py).

pyspark holds one kind of session per process (its functions switch to Spark Connect on a
process-wide flag, and a classic SparkContext refuses a Connect session beside it), and this
process holds the local classic session of the other Spark tests. So each deployment runs the
same test modules (:data:`MODULES`: every release kind, Python and command line, equal to the
local engine for a seed in either noise mode; the engine contract; sessions, paths and Parquet
destinations) in a child pytest whose ``spark`` fixture reaches the deployment
(``PRIVHIST_TEST_SPARK``, tests/conftest.py). Every test must pass there, none skipped, and every
release kind must be among them. A fresh process then runs the ``privhist`` command, which
reaches the deployment the way a user's does (``--spark-remote`` / ``--spark-master``): its
Parquet release equals the local engine's and the shuffle it sized has 3 partitions per core.

Each deployment runs in the suite a selection that stays cheap (:data:`QUICK`: every release kind
once, with the noise on the executors (the session tests draw on the driver too, and run the
user-level aggregation); the command-line aggregation; the session, path, Parquet and shuffle
tests). ``PRIVHIST_TEST_DEPLOYMENTS=full`` runs the modules whole instead (every release kind in
both noise modes and every aggregation route, every command, the engine contract): about twice as
long, for a change to the Spark engine.

The Spark Connect test needs the ``connect`` extra (``pip install 'privhist[connect]'``); both
need Java. They are slow (a server or a cluster, and a child run of the Spark tests).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.conftest import REPO, SPARK_CORES_VARIABLE, SPARK_URL_VARIABLE
from tests.engines.test_spark_every_release import CALLS, COMMANDS
from tests.spark_servers import (
    Deployment,
    child_env,
    connect_dependencies,
    connect_server,
    standalone_cluster,
)

from privhist import Session
from privhist.engines.spark.sessions import PARTITIONS_PER_CORE
from privhist.session import DryRun

pytestmark = pytest.mark.slow

EVERY = "tests/engines/test_spark_every_release.py"
SESSIONS = "tests/engines/test_spark_sessions.py"

#: the modules each deployment runs again with ``PRIVHIST_TEST_DEPLOYMENTS=full``
MODULES = (EVERY, "tests/engines/test_engine_contract.py", SESSIONS)

#: whether the deployments run :data:`MODULES` whole (else :data:`QUICK`)
FULL = os.environ.get("PRIVHIST_TEST_DEPLOYMENTS", "") == "full"


def _release(noise: str, name: str, counting: str = "counted on executors") -> str:
    return f"test_a_spark_dataframe_gives_the_local_release[{counting}-{noise}-{name}]"


def _command(name: str) -> str:
    return f"test_engine_spark_on_the_command_line_gives_the_local_output[{name}]"


#: aggregations the quick selection leaves to the full one: the user-level route runs in
#: test_aggregations_read_with_the_sessions_there_are, the record-level one with public groups
AGGREGATE_VARIANTS = ("aggregate, private groups", "aggregate, users and two columns")

#: the tests that show every release kind equal to the local engine's
RELEASE_TESTS = (
    {
        *(
            _release(noise, name, counting)
            for noise in ("driver", "executors")
            for name in CALLS
            for counting in ("counted on executors", "on the driver")
        ),
        *(_command(c) for c in COMMANDS),
    }
    if FULL
    else {
        *(_release("executors", name) for name in CALLS if name not in AGGREGATE_VARIANTS),
        _command("aggregate"),
    }
)

#: what each deployment runs in the suite: the release tests above and the session tests
QUICK = (
    *sorted(f"{EVERY}::{name}" for name in RELEASE_TESTS),
    f"{SESSIONS}::test_the_engine_reads_with_the_sessions_there_are",
    f"{SESSIONS}::test_aggregations_read_with_the_sessions_there_are",
    f"{SESSIONS}::test_paths_with_a_scheme_go_to_spark_unchecked",
    f"{SESSIONS}::test_parquet_destinations_are_checked_before_the_spend",
    f"{SESSIONS}::test_the_shuffle_is_sized_to_the_cluster",
    f"{SESSIONS}::test_the_command_line_reaches_the_deployment",
)


@pytest.fixture
def java() -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")


def _child_tests(url: str, cores: int, tmp_path: Path) -> dict[str, str]:
    """Run :data:`MODULES` (or :data:`QUICK`) in a child pytest against ``url`` (a deployment
    of ``cores`` executor cores); the outcome of each test."""
    report = tmp_path / "child.xml"
    argv = [sys.executable, "-m", "pytest", *(MODULES if FULL else QUICK), "-q"]
    argv += ["-p", "no:cacheprovider"]
    argv += ["-o", "addopts=", f"--junitxml={report}", "-W", "ignore"]
    env = child_env(**{SPARK_URL_VARIABLE: url, SPARK_CORES_VARIABLE: str(cores)})
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600, check=False
    )
    (tmp_path / "child.log").write_text(done.stdout + done.stderr)
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[case.get("name", "")] = kinds[0] if kinds else "passed"
    bad = {name: kind for name, kind in outcomes.items() if kind != "passed"}
    assert done.returncode == 0 and not bad, (bad, done.stdout[-8000:])
    return outcomes


#: a fresh process that runs the ``privhist`` command (its arguments) as the console script
#: does, then prints the shuffle partitions of the session the command built
COMMAND_AND_SHUFFLE = """
import sys
from privhist.cli.main import main
code = main(sys.argv[1:])
from pyspark.sql import SparkSession
print(SparkSession.active().conf.get("spark.sql.shuffle.partitions"))
sys.exit(code)
"""


def _fresh_cli_release(
    deployment: Deployment, where: list[str], cores: int, tmp_path: Path
) -> None:
    """A ``privhist histogram --engine spark`` process of its own, with a Parquet output: the
    rows the local engine releases for the seed (noise on the executors); the session it built
    has 3 shuffle partitions per core of the deployment instead of Spark's 200 (on a cluster,
    counted once its executors have registered)."""
    g = np.random.default_rng(9)
    n = 6000
    frame = pl.DataFrame(
        {"user": g.integers(0, 700, n), "word": [f"w{v}" for v in (g.zipf(1.4, n) % 30)]}
    )
    data = tmp_path / "visits.csv"
    frame.write_csv(data)
    out = tmp_path / "release.parquet"
    argv = [sys.executable, "-c", COMMAND_AND_SHUFFLE, "histogram", str(data), "--key", "word"]
    argv += ["--user", "user", "--epsilon", "1", "--delta", "1e-6", "--seed", "5"]
    argv += ["--engine", "spark", *where, "--output", str(out), "--no-progress"]
    done = subprocess.run(
        argv, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:] + deployment.log_tail()
    local = Session(noise_on="executors").histogram(
        frame, key="word", user="user", epsilon=1, delta=1e-6, seed=5
    )
    assert not isinstance(local, DryRun) and len(local) > 0
    assert pl.read_parquet(out / "*.parquet").equals(local.to_polars())
    assert (out / "_privhist.json").is_file()
    assert done.stdout.strip().splitlines()[-1] == str(PARTITIONS_PER_CORE * cores)


def test_the_spark_tests_pass_through_spark_connect(java: Any, tmp_path: Path) -> None:
    missing = connect_dependencies()
    if missing is not None:
        pytest.skip(f"the connect extra is not installed: {missing}")
    logs = tmp_path / "logs"
    logs.mkdir()
    with connect_server(logs, master="local[2]") as server:
        outcomes = _child_tests(server.url, 2, tmp_path)
        assert RELEASE_TESTS <= {name for name, kind in outcomes.items() if kind == "passed"}
        _fresh_cli_release(server, ["--spark-remote", server.url], 2, tmp_path)


def test_the_spark_tests_pass_on_a_two_worker_cluster(java: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with standalone_cluster(logs, workers=2, cores=2, memory="1g") as cluster:
        outcomes = _child_tests(cluster.url, 4, tmp_path)
        assert RELEASE_TESTS <= {name for name, kind in outcomes.items() if kind == "passed"}
        # two executors of 2 cores: 3 x 4 shuffle partitions
        where = ["--spark-master", cluster.url, "--spark-conf", "spark.executor.memory=512m"]
        _fresh_cli_release(cluster, where, 4, tmp_path)
