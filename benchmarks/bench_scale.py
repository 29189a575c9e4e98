"""How the local engine scales: time and peak memory of counting Parquet files of 10^6 .. 10^9
records, record-level and user-level, each measured in a fresh process.

    python benchmarks/bench_scale.py                    # 10^6 .. 10^9 (user level to 10^8)
    python benchmarks/bench_scale.py --sizes 1e6 1e7    # a quick run
    python benchmarks/bench_scale.py --dir /big/disk    # where the generated files go

The data is generated here (never read from the network): keys are Zipf(1.1) over 10^5 ids; in
the user-level files every user holds 20 records (so 5·10^6 users at 10^8), and each user keeps at
most k = 5 keys and c = 1 record per key. Keys are read as integers (``key_type="int"``, a public
choice). Each measurement runs ``Session.count`` — the engine step of a release, everything but
the (cheap) draw — in a new Python process, which reports its wall time and peak resident memory
(``ru_maxrss``). The table gives both for every size, the growth exponent between successive
sizes (time ~ n^a), and the goals: user-level 10^8 in <= 15 s and <= 3 GB; record-level 10^9 in
<= 60 s and <= 4 GB. Files are generated once per directory and reused.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

KEYS = 100_000
RECORDS_PER_USER = 20
CHUNK = 10_000_000

CHILD = r"""
import json, resource, sys, time
from privhist.core.requests import Fields, KeyCounts, Reading
from privhist.session import Session
path, level = sys.argv[1], sys.argv[2]
req = KeyCounts(
    Fields(key="key", user="user" if level == "user" else None, reading=Reading(key_type="int")),
    max_partitions=5 if level == "user" else None,
    max_per_partition=1 if level == "user" else None,
)
t0 = time.perf_counter()
counts = Session().count(path, req)  # private randomness, as a release draws
seconds = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "rss": rss, "keys": len(counts),
                  "records": counts.info.get("records"), "kept": counts.info.get("records_kept")}))
"""


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


def measure(path: Path, level: str) -> dict[str, float]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), level],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"seconds": math.nan, "rss": math.nan, "error": tail}  # type: ignore[dict-item]
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7, 1e8, 1e9])
    ap.add_argument("--levels", nargs="+", choices=["record", "user"], default=["record", "user"])
    ap.add_argument("--user-max", type=float, default=1e8, help="largest user-level size")
    ap.add_argument("--dir", help="where to keep the generated files (default: a temp dir)")
    args = ap.parse_args()
    folder = Path(args.dir or tempfile.gettempdir()) / "privhist-bench-scale"
    folder.mkdir(parents=True, exist_ok=True)
    goals = {("user", 10**8): (15.0, 3e9), ("record", 10**9): (60.0, 4e9)}
    print(
        f"{'level':<7} {'records':>14} {'seconds':>9} {'peak GB':>8} {'exp(t)':>7} {'goal':>22}",
        flush=True,
    )
    for level in args.levels:
        prev: tuple[int, float] | None = None
        for size in args.sizes:
            n = int(size)
            if level == "user" and n > args.user_max:
                continue
            path = folder / f"{level}-{n}.parquet"
            if not path.exists():
                t0 = time.perf_counter()
                generate(path, n, level)
                print(f"  (generated {path.name} in {time.perf_counter() - t0:.1f} s)", flush=True)
            r = measure(path, level)
            if "error" in r:
                print(f"{level:<7} {n:>14,} failed: {r['error']}", flush=True)
                prev = None
                continue
            exp = ""
            if prev is not None and r["seconds"] > 0 and prev[1] > 0:
                exp = f"{math.log(r['seconds'] / prev[1]) / math.log(n / prev[0]):.2f}"
            goal = ""
            if (level, n) in goals:
                t_goal, m_goal = goals[(level, n)]
                met = r["seconds"] <= t_goal and r["rss"] <= m_goal
                goal = f"<= {t_goal:g} s, {m_goal / 1e9:g} GB: {'met' if met else 'NOT met'}"
            gb = r["rss"] / 1e9
            print(f"{level:<7} {n:>14,} {r['seconds']:>9.2f} {gb:>8.2f} {exp:>7} {goal:>22}")
            prev = (n, r["seconds"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
