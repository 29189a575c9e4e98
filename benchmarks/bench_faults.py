"""Releases killed with SIGKILL, by named step and at random moments: unpaid releases found.

Each trial runs the real ``privhist`` command in a fresh interpreter, in a fresh directory with a
fresh ledger, charging a dataset and writing ``--output``; the process is killed either at a named
step of the release path (:mod:`privhist.core.faults`) or after a random delay drawn uniformly
between half and 1.1 times the time an unkilled release takes (most of the first half is the
interpreter starting, before any data is read). Afterwards the ledger must open, and any file
the run left beside the input (the release, or a hidden temporary file holding it) must have its
spend recorded. A retry without the kill must succeed. Prints, per command: trials, processes
actually killed, runs that finished before the kill, runs that left a release on disk, unpaid
releases (must be 0), ledgers that failed to open (must be 0) and failed retries (must be 0).

Usage: python benchmarks/bench_faults.py [--random 10] [--commands histogram sample heavy-hitters]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import privhist
from privhist.accounting.ledger import Ledger
from privhist.core.budget import Budget
from privhist.core.faults import KILL_ENV, STEPS

SRC = str(Path(privhist.__file__).resolve().parents[1])


def _argv(kind: str, data: Path, ledger: Path, out: Path) -> list[str]:
    charge = ["--ledger", str(ledger), "--dataset", "d", "--no-progress", "--output", str(out)]
    common = ["--epsilon", "0.5", "--delta", "1e-6", *charge]
    if kind == "histogram":
        return ["histogram", str(data), "--key", "key", *common]
    if kind == "sample":
        return ["sample", str(data), "--key", "key", "--tau", "0.5", "--max-frequency", "50",
                *common]  # fmt: skip
    return ["heavy-hitters", str(data), "--key", "key", "--one-shot", *common]


def _setup(root: Path, kind: str) -> tuple[Path, Path, Path]:
    data = root / "data.csv"
    rows = ["user,key"] + [f"u{i},{'abcab'[i % 5]}" for i in range(20_000)]
    data.write_text("\n".join(rows) + "\n")
    ledger = root / "ledger.sqlite"
    Ledger(ledger).init_dataset("d", Budget(4.0, 1e-4))
    out = root / ("out.json" if kind == "sample" else "out.csv")
    return data, ledger, out


def _env(step: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SRC, env.get("PYTHONPATH", "")])
    env.pop(KILL_ENV, None)
    if step is not None:
        env[KILL_ENV] = step
    return env


def _run(argv: list[str], step: str | None, delay: float | None) -> tuple[int, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "privhist", *argv],
        env=_env(step),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if delay is not None:
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    code = proc.wait(timeout=300)
    return code, time.perf_counter() - start


def _trial(kind: str, step: str | None, delay: float | None) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data, ledger, out = _setup(root, kind)
        argv = _argv(kind, data, ledger, out)
        code, _ = _run(argv, step, delay)
        keep = {data.name, ledger.name, f"{ledger.name}-journal"}
        left = [p for p in root.iterdir() if p.name not in keep]
        opened = True
        try:
            spends = len(Ledger(ledger, create=False).show("d").spends)
        except Exception:
            opened, spends = False, 0
        retry, _ = _run(argv, None, None)
        after = len(Ledger(ledger, create=False).show("d").spends) if opened else 0
        return {
            "trials": 1,
            "killed": int(code == -signal.SIGKILL),
            "finished": int(code == 0),
            "on_disk": int(bool(left)),
            "unpaid": int(bool(left) and spends == 0),
            "ledger_errors": int(not opened),
            "failed_retries": int(retry != 0 or after != spends + 1 or not out.exists()),
        }


def _add(total: dict[str, int], one: dict[str, int]) -> None:
    for k, v in one.items():
        total[k] = total.get(k, 0) + v


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--random", type=int, default=10, help="random-moment kills per command")
    parser.add_argument("--commands", nargs="+", default=["histogram", "sample", "heavy-hitters"])
    parser.add_argument("--seed", type=int, default=17, help="seed of the kill moments")
    args = parser.parse_args()
    moments = random.Random(args.seed)
    cols = ["trials", "killed", "finished", "on_disk", "unpaid", "ledger_errors", "failed_retries"]
    print(f"{'command':<15} {'kills':<8} " + " ".join(f"{c:>14}" for c in cols))
    grand: dict[str, int] = {}
    for kind in args.commands:
        named: dict[str, int] = {}
        for step in STEPS:
            _add(named, _trial(kind, step, None))
        with tempfile.TemporaryDirectory() as tmp:  # how long an unkilled release takes
            data, ledger, out = _setup(Path(tmp), kind)
            _, full = _run(_argv(kind, data, ledger, out), None, None)
        timed: dict[str, int] = {}
        for _ in range(args.random):
            _add(timed, _trial(kind, None, moments.uniform(0.5 * full, 1.1 * full)))
        for label, row in (("named", named), ("random", timed)):
            print(f"{kind:<15} {label:<8} " + " ".join(f"{row.get(c, 0):>14}" for c in cols))
            _add(grand, row)
    print(f"{'all':<15} {'':<8} " + " ".join(f"{grand.get(c, 0):>14}" for c in cols))


if __name__ == "__main__":
    main()
