"""Mutation testing of the privacy-critical modules (outside the normal test run).

Each mutant is one declared rewrite (``operators.py``) of one node of a function an area names
(``areas.py``). It is written into a private copy of ``src/`` and the tests of its module run
against that copy (``pytest -x``, plus the module's doctests); a test failure, an error or a
timeout kills it. Survivors are printed; each must be killed by a new test or listed in
``EQUIVALENT.md`` (beside this script) with the argument why no test can tell it apart.

Usage (from the repository root)::

    python scripts/mutation/run.py --list                 # areas and mutant counts
    python scripts/mutation/run.py --area samplers        # run one area (resumes)
    python scripts/mutation/run.py --area samplers --rerun survived
    python scripts/mutation/run.py --summary              # the table, from stored results
    python scripts/mutation/run.py --show ID              # one mutant's diff

Results are kept per area in ``scripts/mutation/results/`` (not versioned) so that a long area
can be run in pieces: a mutant already decided is not run again unless ``--rerun`` asks.
``--sample N`` runs at most ``N`` mutants per area, a deterministic choice spread over the
operators (the same mutants every time); without it every mutant of the area runs.

Score: ``killed / (mutants - equivalent)``; the goal is at least 95 % in every area.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SRC = REPO / "src"
RESULTS = HERE / "results"
EQUIVALENT = HERE / "EQUIVALENT.md"

sys.path.insert(0, str(HERE))

from areas import AREAS, Area, Target  # noqa: E402
from operators import OPERATORS, Mutant, mutants  # noqa: E402

#: every operator that generated mutants in an area gets at least this many of the sample
MIN_PER_OPERATOR = 2
#: a mutant's tests may use this many times the CPU seconds of the unmutated run, plus a
#: constant (CPU time, not wall time: a loaded machine must not turn a survivor into a
#: "timeout"; a mutant that loops burns CPU and is stopped by the limit)
CPU_FACTOR = 3.0
CPU_EXTRA = 60.0
#: the wall-clock safety net (a mutant waiting on something that does not burn CPU)
WALL_FACTOR = 15.0
WALL_EXTRA = 600.0


def area_mutants(area: Area) -> list[tuple[Mutant, Target]]:
    out = []
    for module, target in area.targets.items():
        source = (SRC / module).read_text(encoding="utf-8")
        ops = target.operators or OPERATORS
        out.extend((m, target) for m in mutants(module, source, target.functions, ops))
    return out


def sample(
    items: list[tuple[Mutant, Target]], n: int | None, seed: str
) -> list[tuple[Mutant, Target]]:
    """At most ``n`` mutants (``n`` None or 0: all), chosen deterministically: each operator gets
    a share proportional to how many mutants it generated (at least :data:`MIN_PER_OPERATOR`),
    drawn uniformly within the operator by a generator seeded with the area's name."""
    if not n or len(items) <= n:
        return items
    rng = random.Random(hashlib.sha256(seed.encode()).digest())
    groups: dict[str, list[tuple[Mutant, Target]]] = {}
    for item in sorted(items, key=lambda it: it[0].id):
        groups.setdefault(item[0].operator, []).append(item)
    quota = {op: min(len(g), MIN_PER_OPERATOR) for op, g in groups.items()}
    rest = n - sum(quota.values())
    total = sum(len(g) - quota[op] for op, g in groups.items())
    shares = {op: rest * (len(g) - quota[op]) / total for op, g in groups.items()} if total else {}
    for op in groups:
        quota[op] += int(shares.get(op, 0))
    # the remainder goes to the largest fractional parts
    left = n - sum(quota.values())
    for op in sorted(groups, key=lambda o: -(shares.get(o, 0) % 1))[:left]:
        quota[op] += 1
    chosen: list[tuple[Mutant, Target]] = []
    for op in sorted(groups):
        g = groups[op]
        rng.shuffle(g)
        chosen.extend(g[: quota[op]])
    return sorted(chosen, key=lambda it: (it[0].module, it[0].line, it[0].id))


def equivalents() -> dict[str, str]:
    """``id -> argument`` from EQUIVALENT.md (entries ``- `ID` ...: argument``)."""
    if not EQUIVALENT.exists():
        return {}
    out = {}
    for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^- `([0-9a-f]{10})`\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _load(area: str) -> dict[str, dict[str, object]]:
    path = RESULTS / f"{area}.json"
    if path.exists():
        data: dict[str, dict[str, object]] = json.loads(path.read_text())
        return data
    return {}


def _save(area: str, data: dict[str, dict[str, object]]) -> None:
    RESULTS.mkdir(exist_ok=True)
    tmp = RESULTS / f".{area}.json.tmp"
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(RESULTS / f"{area}.json")


class Sandbox:
    """A private copy of ``src/`` in which one module at a time is replaced by a mutant."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="privhist-mutation-"))
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        # a snapshot of the sources and the tests: editing tests during a run changes nothing
        shutil.copytree(SRC, self.root / "src", ignore=ignore)
        shutil.copytree(REPO / "tests", self.root / "tests", ignore=ignore)
        # pages some tests read (the session's tests check every release method has one)
        if (REPO / "docs").is_dir():
            shutil.copytree(REPO / "docs", self.root / "docs", ignore=ignore)
        shutil.copy2(REPO / "pyproject.toml", self.root / "pyproject.toml")
        self.cache = self.root / "pycache"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.root / "src")
        env["PYTHONPYCACHEPREFIX"] = str(self.cache)
        env["PRIVHIST_MUTATION"] = "1"
        return env

    def _drop_cache(self, module: str) -> None:
        target = self.cache / (self.root / "src" / module).relative_to("/")
        for pyc in target.parent.glob(target.stem + ".*.pyc") if target.parent.exists() else []:
            pyc.unlink()

    def run(
        self,
        module: str,
        source: str | None,
        tests: list[str],
        cpu: float,
        wall: float,
        keyword: str | None = None,
    ) -> tuple[str, float, float, str]:
        """Run ``tests`` with ``module`` replaced by ``source`` (None: unmutated); returns
        ``(status, wall seconds, cpu seconds, detail)`` with status ``survived``, ``killed``,
        ``timeout`` or ``error``. The pytest process gets an ``RLIMIT_CPU`` of ``cpu``
        seconds (its children are measured but not limited)."""
        path = self.root / "src" / module
        original = (SRC / module).read_text(encoding="utf-8")
        self._drop_cache(module)
        path.write_text(source if source is not None else original, encoding="utf-8")
        args = [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "--no-header",
            "-o",
            "addopts=",
            "--doctest-modules",
            "--rootdir",
            str(self.root),
            *(["-k", keyword] if keyword else []),
            *tests,
            str(path),
        ]
        limit = max(1, int(cpu))

        def limit_cpu() -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                args,
                cwd=self.root,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=wall,
                check=False,
                preexec_fn=limit_cpu,
            )
            if proc.returncode == 0:
                status = "survived"
            elif proc.returncode in (4, 5):  # usage error or nothing collected: no verdict
                status = "error"
            elif proc.returncode < 0 and -proc.returncode in (signal.SIGXCPU, signal.SIGKILL):
                status = "timeout"
            else:
                status = "killed"
            detail = _killer(proc.stdout) if status == "killed" else proc.stdout[-2000:]
            if status == "error":
                detail = (proc.stdout + proc.stderr)[-2000:]
            if status == "timeout":
                detail = f"over {limit} CPU seconds"
        except subprocess.TimeoutExpired:
            status, detail = "timeout", f"over {wall:.0f} s of wall time"
        finally:
            path.write_text(original, encoding="utf-8")
            self._drop_cache(module)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return status, time.monotonic() - start, used, detail

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _killer(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith(("FAILED", "ERROR")):
            return line[:300]
    return stdout.strip().splitlines()[-1][:300] if stdout.strip() else ""


def existing(tests: Iterable[str], root: Path) -> list[str]:
    return [t for t in tests if (root / t.split("::")[0]).exists()]


def run_area(
    name: str, n: int | None, rerun: str | None, only: set[str] | None, verify: bool = False
) -> None:
    """Run the area's mutants (resuming). The unmutated tests of each selection run once first
    (their CPU time sets the limit; they must pass); the time is kept in ``baselines.json`` and
    reused unless ``verify``."""
    area = AREAS[name]
    items = sample(area_mutants(area), area.sample if n is None else n, name)
    if only:
        items = [it for it in items if it[0].id in only]
    data = _load(name)
    cached: dict[str, Any] = _load("baselines")
    equiv = equivalents()
    box = Sandbox()
    baseline: dict[tuple[str, ...], float] = {}
    try:
        for i, (m, target) in enumerate(items, 1):
            old = data.get(m.id)
            if old is not None and (rerun is None or old["status"] not in _rerun_set(rerun)):
                continue
            tests = existing(target.tests, box.root)
            key = (*tests, target.keyword or "")
            cache_key = f"{m.module}|{'|'.join(key)}"
            if key not in baseline and cache_key in cached and not verify:
                baseline[key] = cached[cache_key]
            if key not in baseline:
                status, secs, cpu, detail = box.run(
                    m.module, None, tests, 7200, 7200, target.keyword
                )
                if status != "survived":
                    raise SystemExit(f"the unmutated tests of {m.module} fail:\n{detail}")
                baseline[key] = cpu
                cached[cache_key] = cpu
                _save("baselines", cached)
                print(f"[{name}] baseline {m.module}: {secs:.1f} s, {cpu:.1f} CPU s", flush=True)
            cpu_limit = CPU_FACTOR * baseline[key] + CPU_EXTRA
            wall_limit = WALL_FACTOR * baseline[key] + WALL_EXTRA
            status, secs, cpu, detail = box.run(
                m.module, m.source, tests, cpu_limit, wall_limit, target.keyword
            )
            data[m.id] = {
                "status": status,
                "seconds": round(secs, 1),
                "cpu_seconds": round(cpu, 1),
                "detail": detail if status != "survived" else "",
                "module": m.module,
                "function": m.function,
                "operator": m.operator,
                "line": m.line,
                "original": m.original,
                "mutated": m.mutated,
            }
            _save(name, data)
            mark = "EQUIV" if m.id in equiv and status == "survived" else status.upper()
            print(
                f"[{name} {i}/{len(items)}] {mark:8} {m.id} {m.description} "
                f"({secs:.0f} s, {cpu:.0f} CPU s)",
                flush=True,
            )
    finally:
        box.close()


def _n(n: int | None, area: str) -> int:
    return AREAS[area].sample if n is None else n


def _rerun_set(rerun: str) -> set[str]:
    return {"all": {"survived", "killed", "timeout", "error"}}.get(rerun, {rerun})


def summary(n: int | None, areas: list[str]) -> int:
    equiv = equivalents()
    rows = []
    total = [0, 0, 0, 0, 0]
    survivors: list[str] = []
    for name in areas:
        items = sample(area_mutants(AREAS[name]), _n(n, name), name)
        data = _load(name)
        counts = {"killed": 0, "equivalent": 0, "survived": 0, "pending": 0}
        for m, _ in items:
            r = data.get(m.id)
            if r is None or r["status"] == "error":
                counts["pending"] += 1
            elif r["status"] in ("killed", "timeout"):
                counts["killed"] += 1
            elif m.id in equiv:
                counts["equivalent"] += 1
            else:
                counts["survived"] += 1
                survivors.append(f"  {m.id} [{name}] {m.operator}: {m.description}")
        decided = len(items) - counts["equivalent"] - counts["pending"]
        score = counts["killed"] / decided if decided else float("nan")
        rows.append((name, len(items), counts, score))
        for i, k in enumerate(("killed", "equivalent", "survived", "pending")):
            total[i + 1] += counts[k]
        total[0] += len(items)
    head = ("area", "mutants", "killed", "equiv", "surv", "pending", "score")
    print(f"{head[0]:12} " + " ".join(f"{h:>8}" for h in head[1:]))
    for name, count, c, score in rows:
        print(
            f"{name:12} {count:8d} {c['killed']:8d} {c['equivalent']:8d} {c['survived']:8d} "
            f"{c['pending']:8d} {score:8.1%}"
        )
    decided = total[0] - total[2] - total[4]
    all_score = total[1] / decided if decided else float("nan")
    print(
        f"{'total':12} {total[0]:8d} {total[1]:8d} {total[2]:8d} {total[3]:8d} {total[4]:8d} "
        f"{all_score:8.1%}"
    )
    if survivors:
        print("\nsurvivors (kill them with a test, or argue them in EQUIVALENT.md):")
        print("\n".join(survivors))
    stale = set(equiv) - {
        m.id for a in areas for m, _ in sample(area_mutants(AREAS[a]), _n(n, a), a)
    }
    if stale and len(areas) == len(AREAS):
        print(f"\nEQUIVALENT.md lists ids that are no longer generated: {sorted(stale)}")
    return 0 if not survivors and total[4] == 0 else 1


def show(mutant_id: str) -> None:
    for area in AREAS.values():
        for m, target in area_mutants(area):
            if m.id == mutant_id:
                original = (SRC / m.module).read_text(encoding="utf-8")
                diff = difflib.unified_diff(
                    original.splitlines(keepends=True),
                    m.source.splitlines(keepends=True),
                    f"a/src/{m.module}",
                    f"b/src/{m.module}",
                )
                print(f"{m.id} [{area.name}] {m.operator} in {m.function}; tests: {target.tests}")
                sys.stdout.writelines(diff)
                return
    raise SystemExit(f"no mutant {mutant_id}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--area", action="append", choices=sorted(AREAS), help="area(s) to run")
    p.add_argument("--all", action="store_true", help="run every area")
    p.add_argument(
        "--sample", type=int, default=None, help="mutants per area (default: the area's; 0: all)"
    )
    p.add_argument("--rerun", choices=("survived", "killed", "timeout", "error", "all"))
    p.add_argument("--only", nargs="+", help="only these mutant ids")
    p.add_argument(
        "--verify", action="store_true", help="run the unmutated tests again (no cached times)"
    )
    p.add_argument("--list", action="store_true", help="list areas and mutant counts")
    p.add_argument("--list-mutants", action="store_true", help="list the mutants of the areas")
    p.add_argument("--summary", action="store_true", help="print the table from stored results")
    p.add_argument("--show", help="print one mutant as a diff")
    a = p.parse_args(argv)
    names = sorted(AREAS) if a.all or not a.area else a.area
    if a.show:
        show(a.show)
        return 0
    if a.list or a.list_mutants:
        for name in names:
            items = area_mutants(AREAS[name])
            chosen = sample(items, _n(a.sample, name), name)
            ops: dict[str, int] = {}
            for m, _ in chosen:
                ops[m.operator] = ops.get(m.operator, 0) + 1
            print(f"{name:12} {len(items):5d} generated, {len(chosen):4d} chosen  {ops}")
            if a.list_mutants:
                for m, _ in chosen:
                    print(f"    {m.id} {m.operator:11} {m.description}")
        return 0
    if a.summary:
        return summary(a.sample, names)
    if not (a.all or a.area):
        p.error("give --area NAME (repeatable) or --all")
    for name in names:
        run_area(name, a.sample, a.rerun, set(a.only) if a.only else None, a.verify)
    return summary(a.sample, names)


if __name__ == "__main__":
    raise SystemExit(main())
