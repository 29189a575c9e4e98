"""Spark deployments started on loopback for the tests and the benchmarks: a Spark Connect server
and a standalone cluster (one master, several workers), each from pyspark's own launchers
(``bin/spark-submit`` running the server class that ``sbin/start-connect-server.sh`` runs, and
``bin/spark-class`` running the master and worker classes), as child processes of the caller,
listening on 127.0.0.1 only, and stopped by their process ids.

Executors (and the Connect server's executors) run this interpreter with this checkout's
``src`` first on ``PYTHONPATH``, so they import the privhist under test.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a Spark process started here: loopback, this interpreter, this
    checkout's privhist first, no Spark Connect URL inherited."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "MASTER")}
    env["SPARK_HOME"] = str(spark_home())
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


def _die_with_parent() -> None:
    """In the child, before it runs the launcher: on Linux, ask for SIGTERM when the process
    that started it dies (the launcher execs the JVM, which keeps the request), so a killed
    test run leaves no Spark behind."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Deployment:
    """Processes started here and the URL that reaches them (``sc://`` or ``spark://``)."""

    url: str
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "wb")
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()
        self.processes.append(proc)
        return proc

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.processes)

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.logs.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self) -> None:
        """Stop every process started here (its own process group: the launcher script and
        the JVM it started), newest first."""
        for proc in reversed(self.processes):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in reversed(self.processes):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait(what: str, ready: object, deployment: Deployment, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not deployment.alive():
            raise RuntimeError(f"{what} exited\n{deployment.log_tail()}")
        with contextlib.suppress(OSError, ValueError):
            if ready():  # type: ignore[operator]
                return
        time.sleep(0.5)
    raise TimeoutError(f"{what} not ready after {timeout:.0f} s\n{deployment.log_tail()}")


def _listening(port: int) -> bool:
    socket.create_connection(("127.0.0.1", port), timeout=1).close()
    return True


@contextlib.contextmanager
def connect_server(
    logs: Path, master: str = "local[2]", timeout: float = 300, **conf: str
) -> Iterator[Deployment]:
    """A Spark Connect server on ``127.0.0.1`` running on ``master``; yields its deployment
    (``url`` is ``sc://127.0.0.1:PORT``)."""
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executorEnv.PYTHONPATH": str(SRC),
        **conf,
    }
    argv = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS]
    argv += ["--name", "privhist-connect", "--master", master]
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    deployment = Deployment(f"sc://127.0.0.1:{port}", logs)
    try:
        deployment.start("connect", argv, child_env())
        _wait("the Spark Connect server", lambda: _listening(port), deployment, timeout)
        yield deployment
    finally:
        deployment.stop()


@contextlib.contextmanager
def standalone_cluster(
    logs: Path, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 300
) -> Iterator[Deployment]:
    """A standalone cluster on ``127.0.0.1``: one master and ``workers`` workers of ``cores``
    cores each; yields its deployment (``url`` is ``spark://127.0.0.1:PORT``) once every
    worker has registered."""
    port, ui = free_port(), free_port()
    spark_class = str(spark_home() / "bin" / "spark-class")
    deployment = Deployment(f"spark://127.0.0.1:{port}", logs)
    env = child_env(SPARK_NO_DAEMONIZE="1")
    try:
        deployment.start(
            "master",
            [
                spark_class,
                MASTER_CLASS,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env,
        )
        _wait("the Spark master", lambda: _listening(port), deployment, timeout)
        for i in range(workers):
            work = logs / f"worker-{i}"
            work.mkdir(exist_ok=True)
            deployment.start(
                f"worker-{i}",
                [
                    spark_class,
                    WORKER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(work),
                    deployment.url,
                ],
                env,
            )

        def registered() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                state = json.load(r)
            return int(state.get("aliveworkers", 0)) >= workers

        _wait(f"{workers} Spark workers", registered, deployment, timeout)
        yield deployment
    finally:
        deployment.stop()


def connect_dependencies() -> str | None:
    """None if pyspark's Spark Connect client can run here, else what is missing."""
    # what pyspark's "connect" extra installs
    for module in (
        "pandas",
        "pyarrow",
        "grpc",
        "grpc_status",
        "google.rpc.status_pb2",
        "zstandard",
    ):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return f"{module} ({exc})"
    return None
