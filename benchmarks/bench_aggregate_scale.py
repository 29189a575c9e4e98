"""Aggregations per group on large Parquet files through the local engine: time, CPU and peak
memory of ``Session.aggregate`` beside a user-level histogram of the same file, each measured in
a fresh process.

    python benchmarks/bench_aggregate_scale.py                  # 10^7 and 10^8 rows
    python benchmarks/bench_aggregate_scale.py --sizes 1e6      # a quick run
    python benchmarks/bench_aggregate_scale.py --dir /big/disk  # where the generated files go

The data is ``bench_aggregate.py``'s generated user-level table (user id, country, device,
tier, amount), written to Parquet once per size and folder and reused. Both systems read the
file, not a table in memory, with the same contribution bounds (each user at most k = 2 groups
and c = 5 records per group) and budget (1, 10^-6):

* ``aggregate``: the sum and mean of ``amount`` in [0, 100] and its median (resolution 1) per
  (country, device, tier), the groups chosen privately;
* ``histogram``: ``Session.histogram`` of the users per country, the engine's user-level count
  of one column.

Through the harness (``benchmarks/_harness.py``): imports and the Session untimed, one untimed
warm-up release on a 10^6-row file, then the timed release; wall and CPU seconds, the kernel's
share, the timed run's peak resident memory and the machine's load are printed. Goal (issue 27):
10^8 rows aggregated in at most the memory the histogram of the same file takes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from _harness import System, add_arguments, compare, options

BY = ["country", "device", "tier"]
BOUNDS = {"max_partitions": 2, "max_per_partition": 5}
EPSILON, DELTA = 1.0, 1e-6


def aggregate(path: str) -> Callable[[], dict[str, object]]:
    from privhist import Session
    from privhist import metrics as m

    metrics = {
        "sum": m.sum("amount", 0, 100),
        "mean": m.mean("amount", 0, 100),
        "median": m.quantiles("amount", [0.5], 0, 100, resolution=1),
    }

    def run() -> dict[str, object]:
        release = Session().aggregate(
            path,
            by=BY,
            metrics=metrics,
            user="user_id",
            epsilon=EPSILON,
            delta=DELTA,
            **BOUNDS,
        )
        facts = release.diagnostics
        return {"groups": len(release), "passes": facts.get("passes", 1)}

    return run


def histogram(path: str) -> Callable[[], dict[str, object]]:
    from privhist import Session

    def run() -> dict[str, object]:
        release = Session().histogram(
            path, key="country", user="user_id", epsilon=EPSILON, delta=DELTA, **BOUNDS
        )
        return {"keys": len(release)}

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e7, 1e8])
    ap.add_argument("--warm", type=float, default=1e6, help="rows of the warm-up file")
    ap.add_argument("--dir", help="where to keep the generated files (default: a temp dir)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run stops")
    add_arguments(ap, rounds=1)
    args = ap.parse_args()
    from bench_aggregate import generate_synthetic

    folder = Path(args.dir or tempfile.gettempdir()) / "privhist-bench-aggregate-scale"

    def file(n: int) -> str:
        path = folder / f"synthetic-{n}.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            generate_synthetic(path, n)
            print(f"  (generated {path.name} in {time.perf_counter() - t0:.1f} s)", flush=True)
        return str(path)

    warm = {"path": file(int(args.warm))}
    systems: list[System] = []
    for size in args.sizes:
        n = int(size)
        params = {"path": file(n)}
        for name, target in (("aggregate", "aggregate"), ("histogram", "histogram")):
            systems.append(
                System(
                    f"{name} {n:.0e}",
                    f"bench_aggregate_scale:{target}",
                    params,
                    warm,
                    work=n,
                    timeout=args.timeout,
                )
            )
    ms, _ = compare(
        systems, title="local engine, aggregates and a histogram of Parquet files", **options(args)
    )
    print("\nmemory (median peak resident of the timed runs):")
    for size in args.sizes:
        n = int(size)
        peaks = {}
        for name in ("aggregate", "histogram"):
            got = [m.rss for m in ms if m.system == f"{name} {n:.0e}" and m.ok and m.rss]
            peaks[name] = float(np.median(got)) if got else None
        a, h = peaks["aggregate"], peaks["histogram"]
        if a is None or h is None:
            print(f"  {n:.0e}: not measured (a run failed or was skipped)")
            continue
        line = f"  {n:.0e}: aggregate {a / 2**30:.2f} GiB, histogram {h / 2**30:.2f} GiB"
        line += f" ({a / h:.2f}x)"
        if n == 10**8:
            verdict = "met" if a <= h else f"not met ({a / h:.2f}x)"
            line += f"; goal at 10^8, at most the histogram's memory: {verdict}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
