"""Start-up time of the ``privhist`` command: ``--help`` and argument errors.

    python benchmarks/bench_startup.py                  # 9 runs of each case
    python benchmarks/bench_startup.py --runs 21
    python benchmarks/bench_startup.py --compare /path/to/other/src   # e.g. an older checkout

Each case is a fresh ``python -m privhist ...`` process (wall time from spawn to exit, output
discarded); the table gives the median and the minimum of ``--runs`` runs, and the median CPU
time (user + system) of the child, which a busy machine inflates less than the wall time. The
same numbers for a bare ``python -c pass`` are measured in the same run, so the margin over the
interpreter's own start-up is printed too: on a loaded machine every process is slower, and
the margin and the ratio show what the command adds. The goal is ``--help`` and argument
errors within 0.3 s.
``--compare SRC`` runs the same cases with ``PYTHONPATH=SRC`` (another copy of the package) and
prints the ratio.

Byte code: an installed package runs from cached ``.pyc`` files, so the children write and reuse
them in a temporary ``PYTHONPYCACHEPREFIX`` (one untimed warm-up run per case), whatever
``PYTHONDONTWRITEBYTECODE`` says in the calling shell; nothing is written into the source tree.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 0.3
CASES: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("privhist --help", ["-m", "privhist", "--help"]),
    ("privhist plan --help", ["-m", "privhist", "plan", "--help"]),
    ("histogram: missing input", ["-m", "privhist", "histogram"]),
    ("plan stability --epsilon x", ["-m", "privhist", "plan", "stability", "--epsilon", "x"]),
    ("quantiles: missing input", ["-m", "privhist", "quantiles"]),
    ("audit exact: bad name", ["-m", "privhist", "audit", "exact", "nosuch"]),
]


def _time(args: list[str], src: str, runs: int, cache: str) -> list[tuple[float, float]]:
    env = dict(os.environ, PYTHONPATH=src, PYTHONPYCACHEPREFIX=os.path.join(cache, str(hash(src))))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        out.append((wall, cpu))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--compare", help="another src directory to time the same cases with")
    a = ap.parse_args()
    srcs = [a.src] + ([a.compare] if a.compare else [])
    print(f"{a.runs} runs per case; median (min) wall seconds; goal <= {GOAL} s")
    header = f"{'case':<30} {'median':>8} {'min':>7} {'over bare':>10} {'cpu':>7}"
    if a.compare:
        header += f" {'compare':>9} {'ratio':>7}"
    print(header)
    base: float | None = None
    cache = tempfile.mkdtemp(prefix="privhist-pyc-")
    for name, args in CASES:
        for s in srcs:
            _time(args, s, 1, cache)  # warm-up: byte code written to the cache
        # interleave the sources run by run so that load changes hit both alike
        times: dict[str, list[tuple[float, float]]] = {s: [] for s in srcs}
        for _ in range(a.runs):
            for s in srcs:
                times[s] += _time(args, s, 1, cache)
        walls = [w for w, _ in times[a.src]]
        med = statistics.median(walls)
        cpu = statistics.median([c for _, c in times[a.src]])
        if base is None:
            base = med
        line = f"{name:<30} {med:8.3f} {min(walls):7.3f} {med - base:+10.3f} {cpu:7.3f}"
        if a.compare:
            other = statistics.median([w for w, _ in times[a.compare]])
            line += f" {other:9.3f} {other / med:7.2f}"
        if name != "python -c pass":
            line += "  met" if med <= GOAL else "  NOT met"
        print(line, flush=True)
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
