"""Spark sessions for the Spark engine: the one a release uses, and the one the command line
builds.

The engine never starts Spark by itself. :class:`~privhist.engines.spark.SparkEngine` uses the
session it was given, else the session of the DataFrame it reads, else (for a file path) the
session active in this process (:func:`active_session`); with none it raises a typed error that
says how to make one. Classic sessions (this process is the Spark driver) and Spark Connect
sessions (this process is a client of a Spark Connect server, as on managed clusters) are used
the same way; :func:`is_connect` tells them apart where it matters (writing files).

The ``privhist`` command builds its own session (:func:`build_session`): a classic one for
``--spark-master`` (``local[*]`` by default), a Spark Connect one for ``--spark-remote`` (or the
``SPARK_REMOTE`` environment variable), with each ``--spark-conf KEY=VALUE``. Unless a setting
says otherwise it sizes the shuffle to the cluster: ``spark.sql.shuffle.partitions`` becomes
:data:`PARTITIONS_PER_CORE` times the default parallelism (the executors' cores) instead of
Spark's fixed 200, which on a two-worker cluster made the default user-level release seven times
slower (9:23 against 1:18 with 8 partitions): every shuffle partition is a task with its own
Python worker round trip, and the engine's shuffles carry little data.

A classic session the command line builds is also quiet, and on a local master runs its Python
workers with this interpreter:

* ``spark.ui.showConsoleProgress=false`` (:data:`QUIET_CONFIG`, unless ``--spark-conf`` says
  otherwise): Spark's console progress bar redraws itself on stderr for every stage; piped or
  logged, that is hundreds of lines around privhist's one summary line. (A Spark Connect client
  draws no progress bar unless ``SPARK_CONNECT_PROGRESS_BAR_ENABLED=1``.)
* On a ``local`` master, ``PYSPARK_PYTHON`` (in this process's environment, which PySpark reads
  when it starts its context): the interpreter running privhist (``sys.executable``). PySpark
  otherwise starts ``python3`` from ``PATH`` for its workers, which outside an activated virtual
  environment is another interpreter, without privhist installed, and the first task fails with
  ``No module named ...``. A ``PYSPARK_PYTHON`` already set is kept, and a cluster's workers are
  left to the cluster's configuration.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from privhist.core.errors import UnsupportedError, ValidationError

#: settings of every classic session :func:`build_session` builds (``--spark-conf`` overrides)
QUIET_CONFIG: Final[Mapping[str, str]] = {"spark.ui.showConsoleProgress": "false"}

#: shuffle partitions per core of the cluster when the command line sizes the shuffle
PARTITIONS_PER_CORE: Final[int] = 3

#: Spark's own default of ``spark.sql.shuffle.partitions`` (the value the command line resizes)
SPARK_DEFAULT_SHUFFLE_PARTITIONS: Final[str] = "200"

#: seconds a classic session on a cluster waits for executors before reading its cores
REGISTRATION_WAIT: Final[float] = 30.0

#: the port of a Spark Connect URL that names none
CONNECT_PORT: Final[int] = 15002


def _session_class() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UnsupportedError(
            "the Spark engine needs pyspark: pip install 'privhist[spark]'"
        ) from None
    return SparkSession


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (this process is a client of a server)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def active_session(function: str = "SparkEngine") -> Any:
    """The Spark session active in this process (classic or Spark Connect); never creates one.

    Raises:
        ValidationError: no session is active.
    """
    session_class = _session_class()
    try:
        return session_class.active()
    except Exception:  # PySparkRuntimeError NO_ACTIVE_OR_DEFAULT_SESSION
        raise ValidationError(
            "spark",
            function,
            "a SparkSession, and none is active in this process: create one "
            "(SparkSession.builder.getOrCreate(), or SparkSession.builder.remote(url)"
            ".getOrCreate() for Spark Connect) or pass it (SparkEngine(spark))",
            None,
        ) from None


def parse_conf(items: list[str] | None, function: str) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` items as a mapping (the last of a repeated key wins)."""
    conf: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError("--spark-conf", function, "KEY=VALUE", item)
        conf[key.strip()] = value
    return conf


def check_arguments(*, master: str | None, remote: str | None, function: str) -> None:
    """Refuse what :func:`build_session` would refuse of ``master`` and ``remote`` before it
    runs (no session is built, no server reached): both given, or a ``remote`` that is not a
    Spark Connect URL.

    >>> check_arguments(master="local[2]", remote=None, function="histogram")
    >>> check_arguments(master=None, remote="http://h", function="histogram")
    Traceback (most recent call last):
        ...
    privhist.core.errors.ValidationError: parameter '--spark-remote' of histogram must be a \
Spark Connect URL sc://HOST[:PORT][/;PARAMS]; got 'http://h'
    """
    if master is not None and remote is not None:
        raise ValidationError(
            "--spark-master",
            function,
            "not given with a Spark Connect URL (--spark-remote)",
            master,
        )
    if remote is not None:
        _connect_address(remote, function)


def build_session(
    *,
    master: str | None = None,
    remote: str | None = None,
    conf: Mapping[str, str] | None = None,
    function: str = "privhist",
) -> Any:
    """A Spark session for the command line: Spark Connect at ``remote``, else classic at
    ``master`` (``local[*]`` by default), with the settings ``conf``; the shuffle sized to the
    cluster (:func:`size_shuffle`) unless ``conf`` sets ``spark.sql.shuffle.partitions``. A
    classic session is quiet and, on a local master, runs its workers with this interpreter
    (module notes).

    An existing session of the same kind in this process is reused (Spark allows one classic
    session per process). Settings a Spark Connect session cannot take (everything but runtime
    SQL settings, which are set where the server starts) are refused, not dropped.

    Raises:
        ValidationError: both ``master`` and ``remote``, or a setting a Connect session refused.
        ConnectionError: the Spark Connect server does not answer.
    """
    check_arguments(master=master, remote=remote, function=function)
    conf = dict(conf or {})
    session_class = _session_class()
    builder = session_class.builder
    if remote is not None:
        _reachable(remote, function)
        builder = builder.remote(remote)
        settings = conf
    else:
        master = master or "local[*]"
        builder = builder.master(master).appName("privhist")
        settings = {**QUIET_CONFIG, **conf}
        if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
            os.environ["PYSPARK_PYTHON"] = sys.executable
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if remote is not None:
        for key, value in conf.items():
            if spark.conf.get(key, None) != value:
                raise ValidationError(
                    "--spark-conf",
                    function,
                    "a runtime SQL setting with Spark Connect (others are set where the server "
                    "starts)",
                    f"{key}={value}",
                )
    if "spark.sql.shuffle.partitions" not in conf:
        size_shuffle(spark)
    return spark


def size_shuffle(spark: Any) -> int | None:
    """Set ``spark.sql.shuffle.partitions`` to :data:`PARTITIONS_PER_CORE` times the default
    parallelism when it is Spark's default (200); return the new value (None: left as it was).

    The default parallelism is the cores of the executors registered when the session starts
    (a classic session on a cluster waits for them first: :func:`default_parallelism`); a Spark
    Connect session reads it from the partitions of a small range (one short job). With dynamic
    allocation, executors come and go: set the value yourself."""
    if spark.conf.get("spark.sql.shuffle.partitions") != SPARK_DEFAULT_SHUFFLE_PARTITIONS:
        return None
    partitions = PARTITIONS_PER_CORE * max(1, default_parallelism(spark))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return partitions


def default_parallelism(spark: Any, wait: float = REGISTRATION_WAIT) -> int:
    """Spark's default parallelism (the executors' cores unless ``spark.default.parallelism``
    says otherwise), for classic and Spark Connect sessions.

    A classic session on a cluster counts only the executors registered so far (and 2 while
    none has), so it first waits, at most ``wait`` seconds, until some have registered and
    their number has held for a second (not with dynamic allocation, where executors start
    only for work)."""
    if not is_connect(spark):
        context = spark.sparkContext
        dynamic = context.getConf().get("spark.dynamicAllocation.enabled", "false")
        if not str(context.master).startswith("local") and dynamic.lower() != "true":
            _await_executors(context, wait)
        return int(context.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    from pyspark.sql import functions as F

    # a range is split into the default parallelism's number of partitions
    ids = spark.range(0, 1 << 16).withColumn("p", F.spark_partition_id())
    return int(ids.agg(F.max("p")).first()[0]) + 1


def _await_executors(context: Any, wait: float) -> None:
    """Return once executors have registered with ``context`` and their number has held for a
    second, or after ``wait`` seconds."""
    registered = context._jsc.sc().getExecutorMemoryStatus  # the driver and the executors
    deadline = time.monotonic() + wait
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        executors = int(registered().size()) - 1
        if executors != last:
            last, since = executors, time.monotonic()
        elif executors > 0 and time.monotonic() - since >= 1.0:
            return
        time.sleep(0.2)


def _reachable(remote: str, function: str) -> None:
    """Refuse at once a Spark Connect URL whose server does not accept connections (the Connect
    client would otherwise retry for minutes)."""
    host, port = _connect_address(remote, function)
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as exc:
        raise ConnectionError(
            f"cannot reach the Spark Connect server at {host}:{port}: {exc.strerror or exc}"
        ) from None


def _connect_address(remote: str, function: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL, or the error naming ``--spark-remote``."""
    parts = urlsplit(remote)
    if parts.scheme != "sc" or not parts.hostname:
        raise ValidationError(
            "--spark-remote", function, "a Spark Connect URL sc://HOST[:PORT][/;PARAMS]", remote
        )
    try:
        port = parts.port or CONNECT_PORT
    except ValueError:
        raise ValidationError(
            "--spark-remote", function, "a Spark Connect URL sc://HOST[:PORT][/;PARAMS]", remote
        ) from None
    return parts.hostname, port
