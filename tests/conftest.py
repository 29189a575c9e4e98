"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

#: where the ``spark`` fixture's session runs: unset, a local classic session; ``sc://HOST:PORT``,
#: a Spark Connect server; ``spark://HOST:PORT``, a standalone cluster (classic session). The
#: deployment tests (tests/engines/test_spark_deployments.py) start a server and run the Spark
#: equality tests again in a child process with this variable set.
SPARK_URL_VARIABLE = "PRIVHIST_TEST_SPARK"
SPARK_CORES_VARIABLE = "PRIVHIST_TEST_SPARK_CORES"

# a Spark started by the tests (its driver, UI and block manager) listens on loopback only
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture
def shared_data() -> Path:
    """The shared real datasets; tests using them skip where the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


def spark_url() -> str | None:
    """The deployment the ``spark`` fixture connects to (None: local classic)."""
    return os.environ.get(SPARK_URL_VARIABLE) or None


def spark_cores() -> int:
    """The executor cores of the ``spark`` fixture's deployment (``PRIVHIST_TEST_SPARK_CORES``;
    2 for ``local[2]`` and by default)."""
    return int(os.environ.get(SPARK_CORES_VARIABLE) or 2)


def spark_cli_arguments() -> list[str]:
    """The ``privhist ... --engine spark`` arguments that reach the ``spark`` fixture's
    deployment."""
    url = spark_url()
    if url is None:
        return []
    if url.startswith("sc://"):
        return ["--spark-remote", url]
    return ["--spark-master", url]


@pytest.fixture(scope="session")
def spark() -> Any:
    """One Spark session for the whole run (skips where pyspark or Java is missing): local
    ``local[2]`` classic, or the deployment named by ``PRIVHIST_TEST_SPARK``.

    Executors start ``PYSPARK_PYTHON``: pointed at this interpreter, so they have its packages,
    and ``PYTHONPATH`` starts with this checkout's ``src``.
    """
    import shutil
    import sys

    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    url = spark_url()
    if url is not None and url.startswith("sc://"):
        remote = SparkSession.builder.remote(url).getOrCreate()
        remote.conf.set("spark.sql.shuffle.partitions", "4")
        yield remote
        remote.stop()
        return
    src = str(REPO / "src")
    session = (
        SparkSession.builder.master(url or "local[2]")
        .appName("privhist-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executorEnv.PYTHONPATH", src)
        .config("spark.executor.memory", "512m")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
