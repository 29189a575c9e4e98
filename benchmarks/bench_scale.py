"""How the local engine scales: time, CPU and peak memory of counting Parquet files of 10^6 ..
10^9 records, record-level and user-level, each measured in a fresh process.

    python benchmarks/bench_scale.py                    # 10^6 .. 10^9 (user level too)
    python benchmarks/bench_scale.py --sizes 1e6 1e7    # a quick run
    python benchmarks/bench_scale.py --dir /big/disk    # where the generated files go

The data is generated here (never read from the network): keys are Zipf(1.1) over 10^5 ids; in
the user-level files every user holds 20 records (so 5·10^6 users at 10^8), and each user keeps at
most k = 5 keys and c = 1 record per key. Keys are read as integers (``key_type="int"``, a public
choice). Each measurement runs ``Session.count`` — the engine step of a release, everything but
the (cheap) draw — through the harness (``benchmarks/_harness.py``): a fresh process per run,
imports and the Session made untimed, one untimed warm-up count of the 10^6-record file of the
same level, then the timed count; the harness reports wall and CPU seconds (with the kernel's
share), the peak resident memory of the timed run and the machine's load. The table gives
them for every size and the growth exponent between successive sizes (time ~ n^a); the goals:
user-level 10^8 in <= 10 s and <= 3 GB on 2 cores; 10^9 in <= 120 s and <= 4 GB (by streaming
passes); record-level 10^9 in <= 60 s and <= 4 GB. Files are generated once per directory and
reused.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from _harness import Goal, System, add_arguments, compare, options

KEYS = 100_000
RECORDS_PER_USER = 20
CHUNK = 10_000_000


def session_count(path: str, level: str) -> Callable[[], dict[str, object]]:
    """``Session().count`` of one file, with private randomness as a release draws."""
    from privhist.core.requests import Fields, KeyCounts, Reading
    from privhist.session import Session

    user = level == "user"
    request = KeyCounts(
        Fields(key="key", user="user" if user else None, reading=Reading(key_type="int")),
        max_partitions=5 if user else None,
        max_per_partition=1 if user else None,
    )

    def run() -> dict[str, object]:
        counts = Session().count(path, request)
        return {"keys": len(counts), "kept": counts.info.get("records_kept")}

    return run


def _zipf_cdf() -> np.ndarray:
    w = np.arange(1, KEYS + 1, dtype=np.float64) ** -1.1
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


def generate(path: Path, n: int, level: str) -> None:
    """Write ``n`` records to ``path`` in row groups of at most 10^7 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cdf = _zipf_cdf()
    rng = np.random.default_rng(2026)
    tmp = path.with_suffix(".partial")
    names = ["user", "key"] if level == "user" else ["key"]
    schema = pa.schema([(c, pa.int64()) for c in names])
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        done = 0
        while done < n:
            m = min(CHUNK, n - done)
            keys = np.searchsorted(cdf, rng.random(m), side="right").astype(np.int64) + 1
            cols = [pa.array(keys)]
            if level == "user":
                rows = np.arange(done, done + m, dtype=np.int64)
                cols.insert(0, pa.array(rows // RECORDS_PER_USER))
            writer.write_table(pa.Table.from_arrays(cols, schema=schema))
            done += m
    tmp.rename(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7, 1e8, 1e9])
    ap.add_argument("--levels", nargs="+", choices=["record", "user"], default=["record", "user"])
    ap.add_argument("--user-max", type=float, default=1e9, help="largest user-level size")
    ap.add_argument("--dir", help="where to keep the generated files (default: a temp dir)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run stops")
    add_arguments(ap, rounds=1)
    args = ap.parse_args()
    folder = Path(args.dir or tempfile.gettempdir()) / "privhist-bench-scale"
    folder.mkdir(parents=True, exist_ok=True)
    limits = {
        ("user", 10**8): (10.0, 3e9),
        ("user", 10**9): (120.0, 4e9),
        ("record", 10**9): (60.0, 4e9),
    }

    def file(level: str, n: int) -> str:
        path = folder / f"{level}-{n}.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            generate(path, n, level)
            print(f"  (generated {path.name} in {time.perf_counter() - t0:.1f} s)", flush=True)
        return str(path)

    systems: list[System] = []
    goals: list[Goal] = []
    for level in args.levels:
        warm = {"path": file(level, 10**6), "level": level}
        for size in args.sizes:
            n = int(size)
            if level == "user" and n > args.user_max:
                continue
            name = f"{level}-level {n:.0e}"
            params = {"path": file(level, n), "level": level}
            systems.append(
                System(
                    name, "bench_scale:session_count", params, warm, work=n, timeout=args.timeout
                )
            )
            if (level, n) in limits:
                seconds, peak = limits[(level, n)]
                goals.append(
                    Goal(f"{name} within {seconds:g} s (wall)", system=name, at_most=seconds)
                )
                goals.append(
                    Goal(
                        f"{name} within {peak / 1e9:g} GB", system=name, metric="rss", at_most=peak
                    )
                )
    ms, _ = compare(
        systems, goals=goals, title="local engine, Session.count of Parquet files", **options(args)
    )
    print("\ngrowth exponent of the median wall time between successive sizes (time ~ n^a):")
    for level in args.levels:
        prev: tuple[int, float] | None = None
        for s in systems:
            if not s.name.startswith(level):
                continue
            walls = [m.wall for m in ms if m.system == s.name and m.ok and not m.stopped]
            if not walls:
                prev = None
                continue
            t = float(np.median(walls))
            if prev is not None and t > 0 and prev[1] > 0:
                a = math.log(t / prev[1]) / math.log(s.work / prev[0])
                print(f"  {level}-level {prev[0]:.0e} -> {s.work:.0e}: {a:.2f}")
            prev = (int(s.work), t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
