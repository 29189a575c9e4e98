"""``privhist plan`` at the largest size each sub-command accepts, and one past it.

    python benchmarks/bench_plan.py                 # every case, 120 s limit each
    python benchmarks/bench_plan.py --only pure     # cases whose name contains "pure"

Every plan sub-command is run in a fresh process at its largest accepted size (it must answer:
exit status 0) and just past it (it must refuse at once: exit status 2 and one line naming the
largest accepted value). The table prints the wall time of both, and the refusal line. The goal
(issue: "plan of every mechanism answers within seconds at any accepted size or refuses the size
with a one-line error naming the largest it accepts") is checked per row: answered, refused in
one line, and the time printed next to ``python -c pass`` measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ONE = ["--epsilon", "1"]
D6 = ["--delta", "1e-6"]
# (name, plan arguments without the size, size flag, largest accepted, one past it)
CASES: list[tuple[str, list[str], str, str, str]] = [
    ("default", [*ONE, *D6], "--max-count", "1000000", "1000001"),
    ("dense", [*ONE], "--max-count", "1000000", "1000001"),
    ("stability", [*ONE, *D6], "--max-count", "1000000", "1000001"),
    ("gaussian-threshold", [*ONE, *D6], "--max-count", "1000000", "1000001"),
    ("optimal-selection", ["--keys-only", *D6], "--epsilon", "2.67e-05", "2.66e-05"),
    (
        "optimal-selection 1e-300",
        ["--keys-only", "--delta", "1e-300"],
        "--epsilon",
        "0.00686",
        "0.00685",
    ),
    ("sample-and-threshold", [*ONE, *D6], "--population", "1000000", "1000001"),
    ("pws", [*ONE, *D6], "--max-count", "1000000", "1000001"),
    ("basic-geometric", [*ONE], "--count-bound", "33554431", "33554432"),
    ("keep-heavy", [*ONE], "--count-bound", "33554431", "33554432"),
    ("stability-geometric", [*ONE, *D6], "--count-bound", "33554431", "33554432"),
    ("pure-sparse", [*ONE], "--count-bound", "33554431", "33554432"),
    ("sparse", [*ONE, *D6], "--count-bound", "33554431", "33554432"),
    ("kh-prime", [*ONE, *D6], "--count-bound", "33554431", "33554432"),
    ("compact", [*ONE, *D6], "--max-keys", "65536", "65537"),
    ("bounded-geometric", [*ONE, "--true-count", "5"], "--n", "2045", "2046"),
    (
        "cpbm",
        ["--dimension", "1000", "--m", "100", "--theta", "0.25", *D6, *ONE],
        "--users",
        "100000",
        "100001",
    ),
    ("wgm", [*ONE, *D6], "--max-partitions", "10000", "10001"),
    ("dp-sips", [*ONE, *D6], "--max-partitions", "10000", "10001"),
]


def _run(args: list[str], src: str, timeout: float) -> tuple[int | None, float, str]:
    env = dict(os.environ, PYTHONPATH=src)
    t0 = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0, ""
    return out.returncode, time.perf_counter() - t0, out.stderr.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", help="run only the cases whose name contains this")
    a = ap.parse_args()
    _, bare, _ = _run(["-c", "pass"], a.src, a.timeout)
    print(f"python -c pass: {bare:.2f} s")
    print(f"{'plan':<26} {'size':<26} {'answer s':>9} {'refuse s':>9}  refusal")
    for name, extra, flag, top, over in CASES:
        if a.only and a.only not in name:
            continue
        cmd = name.split()[0]
        base = ["-m", "privhist", "plan", cmd, *extra, "--json"]
        code, t_ok, err = _run([*base, flag, top], a.src, a.timeout)
        ok = "timeout" if code is None else (f"{t_ok:9.2f}" if code == 0 else f"exit {code}")
        code2, t_no, err2 = _run([*base, flag, over], a.src, a.timeout)
        one_line = code2 == 2 and len(err2.splitlines()) == 1
        refusal = err2 if one_line else f"NOT refused in one line (exit {code2})"
        print(f"{name:<26} {flag + ' ' + top:<26} {ok:>9} {t_no:9.2f}  {refusal[:150]}", flush=True)
        if code not in (0, None):
            print(f"    answer failed: {err[:300]}")


if __name__ == "__main__":
    main()
