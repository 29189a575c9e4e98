"""User-level histograms on Spark: privhist's Spark engine against PipelineDP's
``SparkRDDBackend`` and against privhist's local engine, on the same data and the same
(epsilon, delta, k, c), in one run.

    python benchmarks/bench_spark.py                         # 10^7 records
    python benchmarks/bench_spark.py --sizes 1e7 1e8         # both sizes of the issue
    python benchmarks/bench_spark.py --sizes 1e6 --peer-timeout 600 --master local[2]

Data (generated here, never read from the network): Parquet files of integer ``(user, key)``
records; keys Zipf(1.1) over 10^5 ids, every user holds 20 records (5·10^5 users at 10^7). Every
user keeps at most ``k = 5`` keys and ``c = 1`` record per key; (epsilon, delta) = (1, 1e-8).

Systems (the clock runs from "read the file" to "the release is on the driver"):

* ``privhist-spark``: ``Session(engine=SparkEngine(spark)).histogram(path, mechanism="stability",
  ...)``: counting, bounding with keyed priorities and the Laplace noise and threshold on the
  executors, private randomness (the operating system's CSPRNG);
* ``pipelinedp-spark``: PipelineDP 0.3.1 ``DPEngine`` on ``SparkRDDBackend`` over
  ``spark.read.parquet(path).rdd``, ``Metrics.COUNT``, Laplace noise, its default partition
  selection (truncated geometric; half of epsilon and all of delta for selection, as
  ``/PEERS.md`` notes) -- the same bounds and the same total (epsilon, delta). It is stopped
  after ``--peer-timeout`` seconds; a stopped run gives a lower bound on the ratio;
* ``privhist-local``: ``Session().histogram(path, ...)`` on the local engine (Polars/NumPy).

Scaling model
-------------
The Spark engine's release is one counting job and one noise job; with ``n`` records, ``p``
distinct (user, key) pairs, ``u`` users, ``K`` keys and ``P`` shuffle partitions
(``K << p <= n``):

1. scan and shuffle by user (``repartition(user)``): the records, two longs each, are written
   once to the shuffle -- measured 7.1 bytes a record after compression (10^6 records: 7.1 MB;
   Spark's stage metrics) -- ``a1 * n``;
2. per partition, one ``mapInArrow`` pass (:mod:`privhist.engines.spark.bounding`): the Arrow
   transfer to Python, the null accounting, one sort of a packed (user, key) code per record, the
   keyed AES priorities of bounded users' pairs (about 0.02 microseconds a pair), one sort of
   (user, priority) words, and per-key sums: ``a2 * n log(n / P)``, in practice linear;
3. ``groupBy(key)`` of the partitions' rows (at most ``K`` per partition, plus one row of facts):
   ``~K * P`` rows, about 10 bytes each in the shuffle (1 MB at 10^6 records, 8 partitions),
   independent of ``n``;
4. noise: the per-key table (``K`` rows, cached) grouped into 64 noise blocks,
   ``applyInArrow``, one exact sampler call per block; the released rows (at most ``K``) come
   back to the driver (or Spark writes them as a Parquet dataset).

So the shuffle volume is about 7 bytes per record plus ``~10 * K * P`` bytes, and the time is
``T(n) ~ T0 + c * n / W`` on ``W`` executor cores, where ``c`` is the CPU cost per record of
stages 1-2. The benchmark prints ``c`` from the CPU seconds (``per-record CPU``; from two sizes,
the fixed part removed) and projects 10^10 records on 100 executors of 4 cores as
``T0 + c * 10^10 / 400``, assuming that the per-record cost stays flat (every stage is linear but
for the per-partition sorts, ``log`` of the partition size) and that the network carries the
``~7 * 10^10`` bytes (70 GB) of shuffle at about 1 GB/s per executor (under a second on 100
executors).

Measuring. Every system runs in its own fresh process through the harness
(``benchmarks/_harness.py``): the Spark session started (5-10 s, paid once per application) and
the imports done in the untimed setup, one untimed warm-up release of a 10^5-record file of the
same kind (JIT and Python workers warmed the same way for every system), then the timed release
from "read the file" to "the release is on the driver". ``--rounds`` interleaved rounds in
rotated order, the median of within-round ratios, wall and CPU seconds of the whole process tree
(the driver, the Spark JVM and its Python workers), the machine's load beside each figure.
PipelineDP is stopped after ``--peer-timeout`` seconds; a stopped run gives a bound on the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from _harness import Goal, Ratio, Skip, System, add_arguments, compare, options

KEYS = 100_000
RECORDS_PER_USER = 20
CHUNK = 5_000_000
EPSILON, DELTA, K, C = 1.0, 1e-8, 5, 1


_STARTUP: list[float] = []


def _spark(master: str) -> tuple[Any, float]:
    """The Spark session of this process (started once) and its first start-up's seconds."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    t0 = time.perf_counter()
    spark = (
        SparkSession.builder.master(master)
        .appName("bench_spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if not _STARTUP:
        _STARTUP.append(time.perf_counter() - t0)
    return spark, _STARTUP[0]


def privhist_spark(path: str, master: str) -> Callable[[], dict[str, float]]:
    from privhist import Session
    from privhist.engines.spark import SparkEngine

    spark, startup = _spark(master)

    def run() -> dict[str, float]:
        rel = Session(engine=SparkEngine(spark)).histogram(
            path, key="key", user="user", key_type="int", mechanism="stability",
            max_partitions=K, max_per_partition=C, epsilon=EPSILON, delta=DELTA,
        )  # fmt: skip
        return {"released": len(rel), "startup": round(startup, 2)}

    return run


def pipelinedp_spark(path: str, master: str) -> Callable[[], dict[str, float]]:
    try:
        import pipeline_dp
    except ImportError as exc:
        raise Skip("PipelineDP is not installed (pip install -e '.[bench]')") from exc
    spark, startup = _spark(master)

    def run() -> dict[str, float]:
        rdd = spark.read.parquet(path).select("user", "key").rdd.map(tuple)
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.SparkRDDBackend(spark.sparkContext))
        params = pipeline_dp.AggregateParams(
            metrics=[pipeline_dp.Metrics.COUNT], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            max_partitions_contributed=K, max_contributions_per_partition=C,
        )  # fmt: skip
        extract = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0],
            partition_extractor=lambda r: r[1],
            value_extractor=lambda r: 0,
        )
        result = engine.aggregate(rdd, params, extract)
        accountant.compute_budgets()
        return {"released": len(result.collect()), "startup": round(startup, 2)}

    return run


def privhist_local(path: str) -> Callable[[], dict[str, float]]:
    from privhist import Session

    def run() -> dict[str, float]:
        rel = Session(progress=False).histogram(
            path, key="key", user="user", key_type="int", mechanism="stability",
            max_partitions=K, max_per_partition=C, epsilon=EPSILON, delta=DELTA,
        )  # fmt: skip
        return {"released": len(rel)}

    return run


def generate(path: Path, n: int) -> None:
    """``n`` integer records, 20 per user, Zipf(1.1) keys over 10^5 ids (row groups of 5·10^6)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    w = np.arange(1, KEYS + 1, dtype=np.float64) ** -1.1
    cdf = np.cumsum(w) / w.sum()
    g = np.random.default_rng(n)
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, pa.schema([("user", pa.int64()), ("key", pa.int64())])) as out:
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            user = (start + np.arange(m, dtype=np.int64)) // RECORDS_PER_USER
            key = np.searchsorted(cdf, g.random(m)).astype(np.int64)
            out.write_table(pa.table({"user": user, "key": key}))
    tmp.rename(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e7])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "privhist-bench")
    parser.add_argument("--peer-timeout", type=float, default=1800.0)
    names = {"privhist-spark": "privhist_spark", "pipelinedp-spark": "pipelinedp_spark",
             "privhist-local": "privhist_local"}  # fmt: skip
    parser.add_argument(
        "--systems", nargs="+", default=list(names), choices=list(names), metavar="SYSTEM"
    )
    add_arguments(parser, rounds=1)
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"master {args.master}; (epsilon, delta, k, c) = ({EPSILON}, {DELTA}, {K}, {C})")

    def file(n: int) -> str:
        path = args.dir / f"spark-user-{n}.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            generate(path, n)
            print(f"generated {n:,} records in {time.perf_counter() - t0:.1f} s")
        return str(path)

    warm_path = file(10**5)
    cpu_by_size: dict[int, float] = {}
    for size in args.sizes:
        n = int(size)
        path = file(n)
        systems = []
        for label in args.systems:
            params: dict[str, Any] = {"path": path}
            warm: dict[str, Any] = {"path": warm_path}
            if label != "privhist-local":
                params["master"] = warm["master"] = args.master
            timeout = args.peer_timeout if label == "pipelinedp-spark" else 3 * args.peer_timeout
            name = f"{label} {n:.0e}"
            target = f"bench_spark:{names[label]}"
            systems.append(System(name, target, params, warm, work=n, timeout=timeout))
        spark, peer, local = (f"{x} {n:.0e}" for x in names)
        ratios = [
            Ratio(peer, spark), Ratio(peer, spark, "cpu"),
            Ratio(spark, local), Ratio(spark, local, "cpu"),
        ]  # fmt: skip
        goals = [Goal(f"at least 10x PipelineDP's CPU at {n:.0e}", Ratio(peer, spark, "cpu"),
                      at_least=10)]  # fmt: skip
        ms, _ = compare(
            systems, ratios=ratios, goals=goals, title=f"user level on Spark, {n:,} records",
            **options(args),
        )  # fmt: skip
        cpus = [x.cpu for x in ms if x.system == spark and x.ok and x.cpu is not None]
        if cpus:
            cpu_by_size[n] = float(np.median(cpus))
    used = sorted(cpu_by_size.items())
    if used:
        # CPU seconds of the driver, the JVM and the Python workers: the work itself, which a
        # loaded machine stretches in wall time but hardly changes
        if len(used) >= 2:
            (n0, c0_), (n1, c1_) = used[0], used[-1]
            cpu_record = (c1_ - c0_) / (n1 - n0)
            cpu_fixed = max(0.0, c0_ - cpu_record * n0)
        else:
            n1, c1_ = used[-1]
            cpu_record, cpu_fixed = c1_ / n1, 0.0
        print(f"\nper-record CPU {cpu_record * 1e6:.3f} core-microseconds, fixed "
              f"{cpu_fixed:.1f} CPU s (from the smallest and largest size); projected 10^10 "
              f"records on 400 cores: {cpu_fixed + cpu_record * 1e10 / 400:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
