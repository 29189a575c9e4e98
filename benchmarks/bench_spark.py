"""User-level histograms on Spark: privhist's Spark engine against PipelineDP's
``SparkRDDBackend`` and against privhist's local engine, on the same data and the same
(epsilon, delta, k, c), in one run.

    python benchmarks/bench_spark.py                      # 10^6, 3*10^6, 10^7, one round
    python benchmarks/bench_spark.py --rounds 2 --peer-sizes 1e6 1e7
    python benchmarks/bench_spark.py --sizes 1e5 3e5 1e6 --peer-timeout 600   # a quick run

Data (generated here, never read from the network): Parquet files of integer ``(user, key)``
records; keys Zipf(1.1) over 10^5 ids, every user holds 20 records (5·10^5 users at 10^7). Every
user keeps at most ``k = 5`` keys and ``c = 1`` record per key; (epsilon, delta) = (1, 1e-8).

Systems (the clock runs from "read the file" to "the release is on the driver"):

* ``privhist-spark``: ``Session(engine=SparkEngine(spark)).histogram(path, mechanism="stability",
  ...)``, the engine's defaults: a source of at most ``driver_rows`` (2**22) records is counted
  on the driver (its two columns collected as Arrow, the local engine's count and keyed draw;
  10^6 and 3*10^6 here), a larger one as the next system does (10^7 here); each run reports
  where it counted;
* ``privhist-spark-executors``: the same with ``SparkEngine(spark, driver_rows=0)``: counting,
  bounding with keyed priorities and the Laplace noise and threshold on the executors (the noise
  on the driver for a per-key table of at most ``driver_keys`` keys),
  private randomness (the operating system's CSPRNG). The scaling model is fitted to it;
* ``pipelinedp-spark``: PipelineDP 0.3.1 ``DPEngine`` on ``SparkRDDBackend`` over
  ``spark.read.parquet(path).rdd``, ``Metrics.COUNT``, Laplace noise, its default partition
  selection (truncated geometric; half of epsilon and all of delta for selection, as
  ``/PEERS.md`` notes) -- the same bounds and the same total (epsilon, delta). It is stopped
  after ``--peer-timeout`` seconds; a stopped run gives a lower bound on the ratio;
* ``privhist-local``: ``Session().histogram(path, ...)`` on the local engine (Polars/NumPy);
* ``spark-floor``: not a release but the least any user-level histogram on Spark does: read the
  file, ``repartition("user")`` (each user's records on one executor, which bounding needs) and
  ``groupBy("key").count()`` collected to the driver, in plain Spark SQL. Its CPU bounds that of
  every engine counting on the executors, so ``PipelineDP / spark-floor`` is the largest CPU
  ratio to PipelineDP such an engine could reach at that size, and
  ``privhist-spark-executors / spark-floor`` what privhist adds. Counting on the driver shuffles
  nothing and is not bounded by it.

Scaling model
-------------
On the executors, the Spark engine's release is one counting job and one noise job; with ``n``
records, ``p`` distinct (user, key) pairs, ``u`` users, ``K`` keys and ``P`` shuffle partitions
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
stages 1-2. The benchmark fits ``T0`` and ``c`` by least squares to the CPU seconds of every
privhist-spark-executors run (at least three sizes, measured in the same interleaved rounds so
that they share the machine's load), prints each with its standard error and every size's relative
residual, checks ``T0`` against the fixed-cost goal (``--fixed-goal``, 5 CPU s), and projects
10^10 records on 100 executors of 4 cores as ``T0 + c * 10^10 / 400``, assuming that the
per-record cost stays flat (every stage is linear but for the per-partition sorts, ``log`` of the
partition size) and that the network carries the ``~7 * 10^10`` bytes (70 GB) of shuffle at about
1 GB/s per executor (under a second on 100 executors).
The default engine's runs that counted on the driver (sizes up to ``driver_rows``) get a model of
their own, fitted the same way when they cover at least three sizes, with no projection.

Measuring. Every system runs in its own fresh process through the harness
(``benchmarks/_harness.py``): the Spark session started (5-10 s, paid once per application) and
the imports done in the untimed setup, one untimed warm-up release of a 10^5-record file of the
same kind (JIT and Python workers warmed the same way for every system), then the timed release
from "read the file" to "the release is on the driver". Every size's systems run in the same
``--rounds`` interleaved rounds in rotated order; the tables give the median of within-round
ratios, wall and CPU seconds of the whole process tree (the driver, the Spark JVM and its Python
workers) and the machine's load beside each figure.
PipelineDP is stopped after ``--peer-timeout`` seconds; a stopped run gives a bound on the ratio.
"""

from __future__ import annotations

import argparse
import math
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


def privhist_spark(
    path: str, master: str, driver_rows: int | None = None
) -> Callable[[], dict[str, float]]:
    from privhist import Session
    from privhist.engines.spark import SparkEngine

    spark, startup = _spark(master)
    engine = (
        SparkEngine(spark) if driver_rows is None else SparkEngine(spark, driver_rows=driver_rows)
    )

    def run() -> dict[str, float]:
        rel = Session(engine=engine).histogram(
            path, key="key", user="user", key_type="int", mechanism="stability",
            max_partitions=K, max_per_partition=C, epsilon=EPSILON, delta=DELTA,
        )  # fmt: skip
        counting = rel.diagnostics.get("counting")
        return {"released": len(rel), "startup": round(startup, 2), "counting": counting}

    return run


def privhist_spark_executors(path: str, master: str) -> Callable[[], dict[str, float]]:
    return privhist_spark(path, master, driver_rows=0)


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


def spark_floor(path: str, master: str) -> Callable[[], dict[str, float]]:
    spark, startup = _spark(master)

    def run() -> dict[str, float]:
        df = spark.read.parquet(path).select("user", "key").repartition("user")
        rows = df.groupBy("key").count().collect()
        return {"keys": len(rows), "startup": round(startup, 2)}

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
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 3e6, 1e7])
    parser.add_argument(
        "--peer-sizes", nargs="+", type=float, default=None,
        help="sizes at which PipelineDP runs too (default: every size)",
    )  # fmt: skip
    parser.add_argument(
        "--fixed-goal", type=float, default=5.0, help="goal on the fitted fixed CPU seconds"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "privhist-bench")
    parser.add_argument("--peer-timeout", type=float, default=1800.0)
    names = {"privhist-spark": "privhist_spark", "pipelinedp-spark": "pipelinedp_spark",
             "privhist-local": "privhist_local", "spark-floor": "spark_floor",
             "privhist-spark-executors": "privhist_spark_executors"}  # fmt: skip
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
    sizes = sorted({int(x) for x in args.sizes})
    peer_sizes = {int(x) for x in args.peer_sizes} if args.peer_sizes is not None else set(sizes)
    systems: list[System] = []
    ratios: list[Ratio] = []
    goals: list[Goal] = []
    for n in sizes:
        path = file(n)
        for label in args.systems:
            if label == "pipelinedp-spark" and n not in peer_sizes:
                continue
            params: dict[str, Any] = {"path": path}
            warm: dict[str, Any] = {"path": warm_path}
            if label != "privhist-local":  # the Spark systems
                params["master"] = warm["master"] = args.master
            timeout = args.peer_timeout if label == "pipelinedp-spark" else 3 * args.peer_timeout
            name = f"{label} {n:.0e}"
            target = f"bench_spark:{names[label]}"
            systems.append(System(name, target, params, warm, work=n, timeout=timeout))
        spark, peer, local, floor, spread = (f"{x} {n:.0e}" for x in names)
        ratios += [Ratio(spark, local), Ratio(spark, local, "cpu"), Ratio(spread, floor, "cpu")]
        if n in peer_sizes:
            ratios += [Ratio(peer, spark), Ratio(peer, spark, "cpu"), Ratio(peer, spread, "cpu"),
                       Ratio(peer, floor, "cpu")]  # fmt: skip
            goals.append(
                Goal(f"at least 10x PipelineDP's CPU at {n:.0e}", Ratio(peer, spark, "cpu"),
                     at_least=10)
            )  # fmt: skip
            goals.append(
                Goal(f"at least 10x PipelineDP's CPU at {n:.0e}, every source on the executors",
                     Ratio(peer, spread, "cpu"), at_least=10)
            )  # fmt: skip
    # every size in the same rounds: the points of the scaling model share the machine's load
    ms, _ = compare(
        systems, ratios=ratios, goals=goals,
        title=f"user level on Spark, {', '.join(f'{n:,}' for n in sizes)} records",
        **options(args),
    )  # fmt: skip
    fit_model(_cpu_points(ms, sizes, "privhist-spark-executors"), args.fixed_goal)
    # the default engine at the sizes it counted on the driver: a model of its own, to 2**22
    here = _cpu_points(ms, sizes, "privhist-spark", counting="driver")
    if here:
        fit_model(
            here, args.fixed_goal, label="privhist-spark, counted on the driver", project=False
        )
    return 0


def _cpu_points(
    ms: list[Any], sizes: list[int], system: str, counting: str | None = None
) -> list[tuple[float, float]]:
    """``(n, CPU s)`` of every complete run of ``system`` (those that counted where ``counting``
    says, when given)."""
    return [
        (float(n), float(x.cpu))
        for n in sizes
        for x in ms
        if x.system == f"{system} {n:.0e}"
        and x.ok
        and not x.stopped
        and x.cpu is not None
        and (
            counting is None
            or (isinstance(x.result, dict) and x.result.get("counting") == counting)
        )
    ]


def fit_model(
    points: list[tuple[float, float]],
    fixed_goal: float,
    label: str = "privhist-spark-executors",
    project: bool = True,
) -> None:
    """Least-squares ``cpu = T0 + c * n`` over every measured ``(n, cpu)`` of ``label`` (by
    default privhist-spark-executors, the distributed path at every size; CPU seconds of the
    driver, the JVM and its Python workers: the work itself, which a loaded machine stretches in
    wall time but hardly changes), with the standard errors of ``T0`` and ``c``, each size's
    relative residual, and (``project``) the 10^10-record projection on 400 cores."""
    sizes = sorted({n for n, _ in points})
    print(f"\nscaling model, {label} CPU seconds = T0 + c * n (least squares, every run):")
    if len(sizes) < 3:
        print(f"  not fitted: {len(sizes)} size(s) measured; the model needs at least three")
        return
    n = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    design = np.column_stack([np.ones_like(n), n])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    t0, c = float(coef[0]), float(coef[1])
    dof = len(y) - 2
    resid = y - design @ coef
    s2 = float(resid @ resid) / dof if dof > 0 else math.nan
    cov = s2 * np.linalg.inv(design.T @ design)
    se0, sec = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    print(f"  T0 = {t0:.2f} +- {se0:.2f} CPU s, c = {c * 1e6:.3f} +- {sec * 1e6:.3f} "
          f"core-microseconds a record (+- one standard error; {len(y)} runs, "
          f"{len(sizes)} sizes)")  # fmt: skip
    for size in sizes:
        got = float(np.median(y[n == size]))
        model = t0 + c * size
        print(f"  n = {size:.0e}: measured {got:.2f} CPU s (median), model {model:.2f} "
              f"({(got - model) / model:+.1%})")  # fmt: skip
    worst = max(abs(float(r)) / max(float(v), 1e-9) for r, v in zip(resid, y, strict=True))
    print(f"  largest relative residual of a run: {worst:.1%}")
    verdict = "met" if t0 <= fixed_goal else f"not met ({t0 / fixed_goal:.2f}x the bound)"
    print(f"  goal: fixed cost T0 at most {fixed_goal:g} CPU s: {verdict}")
    if not project:
        return
    print(f"  projected 10^10 records on 400 cores: {t0 + c * 1e10 / 400:.0f} s (CPU-bound, "
          "flat per-record cost, shuffle over the network not included)")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
