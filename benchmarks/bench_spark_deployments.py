"""Where Spark runs: one seeded release timed on the local engine, a local Spark session, a
two-worker standalone cluster and a Spark Connect server, all on this machine (loopback), in one
run.

    python benchmarks/bench_spark_deployments.py                      # 10^6 records, 3 rounds
    python benchmarks/bench_spark_deployments.py --records 2e6 --rounds 5 --with-200

Data (generated here): a Parquet file of integer ``(user, key)`` records, keys Zipf(1.1) over
10^5 ids, 20 records per user (as benchmarks/bench_spark.py). The release is the default
user-level histogram (``Session.histogram(path, key=, user=, epsilon=1, delta=1e-8)``: the
default mechanism, whose key selection asks the engine round by round) and, in the same process,
a per-key release whose noise is drawn on the executors (``mechanism="stability"``,
``max_partitions=5``). Systems:

* ``local``: the local engine (Polars and NumPy, this process);
* ``spark-local``: a classic ``local[2]`` session in the measured process;
* ``cluster``: a classic session whose master is a standalone cluster of two workers of one core
  each (started here from pyspark's launchers, tests/spark_servers.py);
* ``connect``: a Spark Connect client of a server running ``local[2]`` (started here);
* ``cluster-200`` (``--with-200``): the cluster with Spark's default 200 shuffle partitions
  instead of the 3 per core (6) that the command line sets.

How it is timed (the rules of /PEERS.md, "Timing fairly"): every measurement is a fresh process
that reads the data, builds its session and warms up (one release on 2·10^4 records, untimed),
then waits; the timed section runs both releases. Rounds interleave the systems in a rotated
order; ratios to ``local`` are taken inside each round and their median is printed. CPU seconds
are the measured process tree's (the driver, its JVM and Python workers) plus, for ``cluster``
and ``connect``, the deployment's processes (master, workers, executors; the Connect server and
its Python workers) over the timed section: the work done, which load hardly changes. The load
average before and after each measurement is printed beside it.

Measured: see the table the script prints; the figures quoted in the deployment docs were taken
on a shared 2-core machine and are not final until rerun on an idle one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.spark_servers import (  # noqa: E402 (the repository root is put on the path first)
    Deployment,
    child_env,
    connect_server,
    standalone_cluster,
)

KEYS = 100_000
RECORDS_PER_USER = 20
EPSILON, DELTA = 1.0, 1e-8

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from bench_spark_deployments import tree_cpu
system, data, warm, url, partitions = sys.argv[2:7]
from privhist import Session
spark = None
if system != "local":
    from pyspark.sql import SparkSession
    if system == "connect":
        spark = SparkSession.builder.remote(url).getOrCreate()
    else:
        spark = (SparkSession.builder.master(url).config("spark.ui.enabled", "false")
                 .config("spark.executor.memory", "768m").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)

def run(path):
    engine = "local" if spark is None else "spark"
    session = Session(engine=engine, progress=False)
    a = session.histogram(path, key="key", user="user", epsilon=1.0, delta=1e-8)
    b = session.histogram(path, key="key", user="user", epsilon=1.0, delta=1e-8,
                          mechanism="stability", max_partitions=5)
    return len(a), len(b)

run(warm)
print("ready", flush=True)
sys.stdin.readline()
cpu0, t0 = tree_cpu(os.getpid()), time.perf_counter()
rows = run(data)
wall, cpu = time.perf_counter() - t0, tree_cpu(os.getpid()) - cpu0
print(json.dumps({"wall": wall, "cpu": cpu, "rows": rows}), flush=True)
"""


def tree_cpu(*roots: int) -> float:
    """CPU seconds (user + system) of the processes ``roots`` and all their descendants."""
    tck = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, list[str]]]] = {}
    stats: dict[int, list[str]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    st = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(d)] = st
            children.setdefault(int(st[1]), []).append((int(d), st))
    total, stack = 0.0, list(roots)
    for pid in roots:
        if pid in stats:
            total += sum(int(x) for x in stats[pid][11:15]) / tck
    while stack:
        for pid, st in children.get(stack.pop(), []):
            total += sum(int(x) for x in st[11:15]) / tck
            stack.append(pid)
    return total


def load() -> float:
    return os.getloadavg()[0]


def make_data(path: Path, records: int, seed: int) -> None:
    import polars as pl

    g = np.random.default_rng(seed)
    users = np.repeat(np.arange(records // RECORDS_PER_USER), RECORDS_PER_USER)
    keys = (g.zipf(1.1, users.shape[0]) - 1) % KEYS
    pl.DataFrame({"user": users, "key": keys}).write_parquet(path)


def measure(
    system: str, data: Path, warm: Path, url: str, partitions: int, deployment: Deployment | None
) -> dict[str, Any]:
    env = child_env()
    argv = [sys.executable, "-c", CHILD, str(Path(__file__).parent), system, str(data), str(warm)]
    argv += [url, str(partitions)]
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=data.parent
    )
    assert proc.stdin is not None and proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise RuntimeError(f"{system} did not start: {line}")
    roots = [p.pid for p in deployment.processes] if deployment is not None else []
    before = (load(), tree_cpu(*roots) if roots else 0.0)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    result = json.loads(proc.stdout.readline())
    after = (load(), tree_cpu(*roots) if roots else 0.0)
    proc.stdin.close()
    proc.wait(timeout=300)
    result["cpu_total"] = result["cpu"] + (after[1] - before[1])
    result["load"] = (before[0], after[0])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=float, default=1e6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--with-200", action="store_true", help="also the cluster at 200")
    args = parser.parse_args()
    records = int(args.records)
    with tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
        root = Path(tmp)
        data, warm = root / "records.parquet", root / "warm.parquet"
        make_data(data, records, 1)
        make_data(warm, 20_000, 2)
        (root / "cluster").mkdir()
        (root / "connect").mkdir()
        print(f"records {records:,}; load before start {load():.1f}; cores {os.cpu_count()}")
        with (
            standalone_cluster(root / "cluster", workers=2, cores=1, memory="1g") as cluster,
            connect_server(root / "connect", master="local[2]") as server,
        ):
            systems: list[tuple[str, str, str, int, Deployment | None]] = [
                ("local", "local", "", 0, None),
                ("spark-local", "spark-local", "local[2]", 6, None),
                ("cluster", "cluster", cluster.url, 6, cluster),
                ("connect", "connect", server.url, 6, server),
            ]
            if args.with_200:
                systems.append(("cluster-200", "cluster", cluster.url, 200, cluster))
            results: dict[str, list[dict[str, Any]]] = {s[0]: [] for s in systems}
            for r in range(args.rounds):
                order = systems[r % len(systems) :] + systems[: r % len(systems)]
                for name, kind, url, partitions, deployment in order:
                    res = measure(kind, data, warm, url, partitions, deployment)
                    results[name].append(res)
                    print(
                        f"round {r + 1} {name:<12} wall {res['wall']:8.2f} s  "
                        f"CPU {res['cpu_total']:8.2f} s  load {res['load'][0]:.1f}-"
                        f"{res['load'][1]:.1f}  rows {res['rows']}",
                        flush=True,
                    )
    print()
    print(f"{'system':<12} {'wall s':>9} {'CPU s':>9} {'wall/local':>11} {'CPU/local':>10}  load")
    for name, runs in results.items():
        wall = statistics.median(x["wall"] for x in runs)
        cpu = statistics.median(x["cpu_total"] for x in runs)
        rw = statistics.median(
            x["wall"] / y["wall"] for x, y in zip(runs, results["local"], strict=True)
        )
        rc = statistics.median(
            x["cpu_total"] / y["cpu_total"] for x, y in zip(runs, results["local"], strict=True)
        )
        loads = ", ".join(f"{a:.0f}-{b:.0f}" for a, b in (x["load"] for x in runs))
        print(f"{name:<12} {wall:9.2f} {cpu:9.2f} {rw:11.2f} {rc:10.2f}  {loads}")


if __name__ == "__main__":
    main()
