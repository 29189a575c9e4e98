"""One timing harness for every benchmark that compares systems (imported as ``_harness``).

A speed ratio holds only if both sides did the same work under the same conditions, so:

* **a fresh process per measurement.** Every system runs in its own new Python process (or its
  own command), so no system inherits another's heap, caches, JIT state or page-cache luck
  beyond what the machine shares anyway;
* **warmed the same way.** In that process the system is set up (imports, data loaded: untimed),
  run once untimed on its warm-up parameters when it has them (every system of a comparison is
  given the same kind of warm-up), the garbage collector runs, and then one run is timed;
* **interleaved rounds.** Round ``r`` runs every system once, in an order rotated by ``r``
  (A B C, B C A, C A B, ...), so a change of machine load hits every system alike;
* **the median of within-round ratios.** A ratio is formed inside each round (both sides measured
  minutes apart at most) and the median over rounds is printed with every round's value;
* **the load beside every figure.** Each measurement records the 1-minute load average before and
  after it, the cores that other processes used during it (the machine's busy time from
  ``/proc/stat`` minus this benchmark's own CPU) and how many other processes used more than a
  tenth of a core; the tables print them next to the times, so a figure taken on a busy machine
  says so.

Each measurement reports the wall time and the CPU seconds (user + system) of the timed section
for the whole process tree (the process, its finished children and its live descendants, e.g. a
Spark JVM and its Python workers) and the peak resident memory of the timed run (``VmHWM``,
reset before it through ``/proc/self/clear_refs``; for commands the polled peak of the tree's
resident memory). The polled peak of the whole tree over the process's life (setup included;
sampled every 50 ms for a second, then every 250 ms, so a shorter peak can be missed) is kept
too (``tree_rss``, the "tree MiB" column): it counts what the Python process's own figure does
not, e.g. a Spark JVM.
CPU seconds are the steadier figure on a loaded machine; wall time is what a user waits.

A system whose factory raises :class:`Skip` (a peer that is not installed, a dataset that is
absent) is reported as not run, and no ratio involving it is printed.

Usage from a benchmark script::

    from _harness import Goal, Ratio, System, add_arguments, compare

    def numpy_bincount(path: str) -> Callable[[], int]:  # a factory: untimed setup ...
        keys = np.load(path)
        return lambda: int(np.count_nonzero(np.bincount(keys)))  # ... and the timed run

    systems = [System("bincount", "bench_x:numpy_bincount", {"path": p}, warm={"path": small})]
    compare(systems, rounds=3, ratios=[...], goals=[...])

For timing privhist's own building blocks alone (no other system, no ratio), :func:`best_of`,
:func:`best_seconds` and :func:`line` time calls inside the script's process.

The factory is named ``module:function`` and is imported in the child from the benchmarks
directory (so the script's own module works, its ``main`` guarded by ``__name__``). A
``command`` system runs an external command instead (e.g. a peer in its own virtual
environment); the whole command is timed unless it writes a JSON object with ``wall``, ``cpu``
(and optionally ``rss``, ``result``) to the path in the environment variable
``HARNESS_RESULT``, which then replaces the outside measurement for its timed section.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
CLOCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

#: a process that used more than this share of one core during a measurement counts as busy
BUSY_SHARE = 0.1


class Skip(Exception):
    """Raised by a factory when its system cannot run here (the reason is printed)."""


@dataclass(frozen=True)
class System:
    """One system of a comparison.

    Attributes:
        name: the label printed in the tables.
        target: ``"module:function"``, a factory called with ``params`` in the child (untimed)
            that returns the zero-argument callable to time; its return value (JSON-able, or
            shown with ``str``) is printed as the result.
        params: keyword arguments of the factory (JSON-able).
        warm: keyword arguments of an untimed warm-up run (the factory is called with them and
            its callable run once) before the timed run; None for no warm-up.
        command: instead of ``target``, a command to run as a whole (see the module notes).
        work: units of work done by one timed run (e.g. records); ratios compare time per unit.
        timeout: seconds before the process is stopped; a stopped run gives a bound on ratios.
    """

    name: str
    target: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    warm: Mapping[str, Any] | None = None
    command: Sequence[str] | None = None
    work: float = 1.0
    timeout: float | None = None


@dataclass
class Measurement:
    """One timed run of one system in a fresh process, and the machine's state around it."""

    system: str
    round: int
    wall: float | None = None
    cpu: float | None = None
    cpu_sys: float | None = None  # the part of ``cpu`` spent in the kernel
    rss: float | None = None  # bytes, peak during the timed run
    tree_rss: float | None = None  # bytes, polled peak of the whole tree, setup included
    rss_base: float | None = None  # bytes, resident just before it (imports, data)
    result: Any = None
    skipped: str | None = None
    error: str | None = None
    stopped: bool = False  # stopped at its timeout: ``wall`` and ``cpu`` are lower bounds
    load_before: float = math.nan
    load_after: float = math.nan
    others_cores: float = math.nan  # average cores other processes used during the process
    others_busy: int = 0  # other processes that used more than BUSY_SHARE of a core

    @property
    def ok(self) -> bool:
        return self.wall is not None and self.skipped is None and self.error is None

    def value(self, metric: str) -> float | None:
        """``wall``, ``cpu``, ``rss`` or ``rss_growth`` (the timed run's peak over its start)."""
        if metric == "rss_growth":
            if self.rss is None or self.rss_base is None:
                return None
            return self.rss - self.rss_base
        v = getattr(self, metric)
        return None if v is None else float(v)


# -- the machine's state ------------------------------------------------------------------


def _stat_fields(pid: int | str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _processes() -> dict[int, tuple[int, float]]:
    """Every process: pid -> (parent pid, CPU seconds so far)."""
    out: dict[int, tuple[int, float]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for d in names:
        if d.isdigit():
            st = _stat_fields(d)
            if st is not None:
                out[int(d)] = (int(st[1]), (int(st[11]) + int(st[12])) / CLOCK)
    return out


def _descendants(root: int, table: Mapping[int, tuple[int, float]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen, stack = set(), [root]
    while stack:
        for pid in children.get(stack.pop(), []):
            if pid not in seen:
                seen.add(pid)
                stack.append(pid)
    return seen


def _machine_busy_seconds() -> float:
    """CPU seconds every core has spent busy since boot (``/proc/stat``, idle and iowait
    excluded): processes that come and go between two reads are included."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            parts = fh.readline().split()[1:]
    except OSError:
        return math.nan
    ticks = [int(x) for x in parts]
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]  # user nice system idle iowait irq softirq steal
    return busy / CLOCK


def tree_times(root: int | None = None) -> tuple[float, float]:
    """(user, system) CPU seconds of a live process tree: ``root`` (this process when None),
    the children it has waited for, and its live descendants."""
    if root is None:
        total, system = _own_times()
        root = os.getpid()
    else:
        st = _stat_fields(root)
        system = 0.0 if st is None else (int(st[12]) + int(st[14])) / CLOCK
        total = system + (0.0 if st is None else (int(st[11]) + int(st[13])) / CLOCK)
    d, d_sys = _descendant_times(root)
    return total + d - system - d_sys, system + d_sys


def _own_times() -> tuple[float, float]:
    """(total, system) CPU seconds of this process and the children it has waited for.

    The total of this process comes from ``time.process_time``, which is exact: ``getrusage``
    splits it into user and system time by tick sampling and can put 10 ms on one side of a
    short run (a 40 ms ``bincount`` read 57 CPU ms). The system part keeps the rusage split."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time()
    system = min(own.ru_stime, total) + kids.ru_stime
    return total + kids.ru_utime + kids.ru_stime, system


def _descendant_times(root: int) -> tuple[float, float]:
    """(total, system) CPU seconds of the live descendants of ``root`` (``/proc``, in ticks)."""
    total = system = 0.0
    for pid in _descendants(root, _processes()):
        st = _stat_fields(pid)
        if st is not None:  # its own time and that of the children it has waited for
            sys_part = (int(st[12]) + int(st[14])) / CLOCK
            total += (int(st[11]) + int(st[13])) / CLOCK + sys_part
            system += sys_part
    return total, system


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds (user + system) of a live process tree (see :func:`tree_times`)."""
    return sum(tree_times(root))


def _tree_rss(pids: Iterable[int]) -> float:
    """Resident bytes of the processes ``pids`` now."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


def _status_bytes(field_name: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) * 1024.0
    except OSError:
        pass
    return None


@dataclass
class _Window:
    """Other processes' CPU over a span of time (two snapshots)."""

    start: float
    busy: float
    table: dict[int, tuple[int, float]]
    load: float

    @classmethod
    def open(cls) -> _Window:
        return cls(time.perf_counter(), _machine_busy_seconds(), _processes(), os.getloadavg()[0])

    def close(self, own_cpu: float, own_pids: set[int]) -> tuple[float, int, float]:
        """(average cores used by others, others that were busy, load now) since ``open``;
        ``own_cpu`` is the CPU this benchmark's processes used in the window."""
        wall = max(time.perf_counter() - self.start, 1e-9)
        others = max(0.0, _machine_busy_seconds() - self.busy - own_cpu) / wall
        now = _processes()
        busy = 0
        for pid, (_, cpu) in now.items():
            if pid in own_pids or pid not in self.table:
                continue
            if cpu - self.table[pid][1] > BUSY_SHARE * wall:
                busy += 1
        return others, busy, os.getloadavg()[0]


def machine_state(seconds: float = 1.0) -> str:
    """A line describing the machine now: cores, load averages, and what other processes used
    over ``seconds``."""
    w = _Window.open()
    time.sleep(seconds)
    mine = _descendants(os.getpid(), _processes()) | {os.getpid()}
    others, busy, _ = w.close(0.0, mine)
    la = os.getloadavg()
    return (
        f"machine: {os.cpu_count()} cores, load averages {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}; "
        f"other processes used {others:.2f} cores over {seconds:g} s ({busy} busy)"
    )


def wait_for_quiet(max_cores: float, max_wait: float, probe: float = 2.0) -> str:
    """Wait (at most ``max_wait`` seconds) until other processes use at most ``max_cores``
    cores over a ``probe``-second window; returns what was seen."""
    deadline = time.monotonic() + max_wait
    while True:
        w = _Window.open()
        time.sleep(probe)
        others, busy, _ = w.close(0.0, {os.getpid()})
        if others <= max_cores:
            return f"quiet: others {others:.2f} cores"
        if time.monotonic() >= deadline:
            return f"still busy after {max_wait:g} s: others {others:.2f} cores ({busy} busy)"


# -- one measurement ----------------------------------------------------------------------


def _child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(HERE)] + ([str(SRC)] if SRC.is_dir() else [])
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra or {})
    return env


def measure(system: System, round_: int = 0) -> Measurement:
    """Run ``system`` once in a fresh process and measure it (see the module notes)."""
    m = Measurement(system.name, round_)
    with tempfile.TemporaryDirectory(prefix="harness-") as tmp:
        out = Path(tmp) / "result.json"
        log = Path(tmp) / "stderr.txt"
        if system.command is not None:
            argv = list(system.command)
        elif system.target is not None:
            spec = {"target": system.target, "params": dict(system.params), "warm": system.warm}
            argv = [sys.executable, str(HERE / "_harness.py"), "child", json.dumps(spec), str(out)]
        else:
            raise ValueError(f"system {system.name!r} has neither a target nor a command")
        env = _child_env({"HARNESS_RESULT": str(out)})
        window = _Window.open()
        m.load_before = window.load
        kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child, once waited for
        own0 = tree_cpu()
        t0 = time.perf_counter()
        with open(log, "wb") as err, open(os.devnull, "wb") as null:
            proc = subprocess.Popen(argv, stdout=null, stderr=err, env=env, start_new_session=True)
            peak = 0.0
            pids: set[int] = {proc.pid}
            stop_user = stop_sys = stop_at = 0.0
            while proc.poll() is None:
                elapsed = time.perf_counter() - t0
                if system.timeout is not None and elapsed > system.timeout:
                    m.stopped = True
                    # the tree's CPU just before the kill: grandchildren (a JVM, workers) are
                    # never waited for by this process, so its rusage would miss them
                    stop_user, stop_sys = tree_times(proc.pid)
                    stop_at = time.time()
                    _stop(proc)
                    break
                # one scan of /proc per poll (a few ms), every 50 ms at first and every 250 ms
                # after a second, so the polling takes about 1 % of a core from the system
                tree = {proc.pid} | _descendants(proc.pid, _processes())
                pids |= tree
                peak = max(peak, _tree_rss(tree))
                time.sleep(0.05 if elapsed < 1.0 else 0.25)
            proc.wait()
        outer_wall = time.perf_counter() - t0
        kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        outer_cpu = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
        outer_sys = kids1.ru_stime - kids0.ru_stime
        own_cpu = max(0.0, tree_cpu() - own0)  # this process, the child and what it waited for
        others, busy, m.load_after = window.close(own_cpu, pids | {os.getpid()})
        m.tree_rss = peak or None
        m.others_cores, m.others_busy = others, busy
        reported: dict[str, Any] = {}
        if out.exists() and out.stat().st_size:
            try:
                reported = json.loads(out.read_text())
            except json.JSONDecodeError as exc:
                m.error = f"unreadable result: {exc}"
        if m.stopped:
            m.rss = peak or None
            m.error = None
            start = _started(out)
            if system.command is not None:  # timed whole: from its start to the kill
                m.wall = outer_wall
                m.cpu = max(outer_cpu, stop_user + stop_sys)
                m.cpu_sys = max(outer_sys, stop_sys)
            elif start is not None:  # from the start of the timed run to the kill
                m.wall = max(0.0, stop_at - start["at"])
                m.cpu = max(0.0, stop_user + stop_sys - start["cpu"])
                m.cpu_sys = max(0.0, stop_sys - start["sys"])
            else:
                m.error = "stopped before its timed run began (setup or warm-up)"
        elif "skipped" in reported:
            m.skipped = str(reported["skipped"])
        elif proc.returncode != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            m.error = f"exit {proc.returncode}: " + " | ".join(tail)
        elif m.error is None:
            m.wall = float(reported.get("wall", outer_wall))
            m.cpu = float(reported.get("cpu", outer_cpu))
            sys_part = reported.get("cpu_sys", None if "cpu" in reported else outer_sys)
            m.cpu_sys = float(sys_part) if sys_part is not None else None
            rss = reported.get("rss")
            m.rss = float(rss) if rss is not None else (peak or None)
            base = reported.get("rss_base")
            m.rss_base = float(base) if base is not None else None
            m.result = reported.get("result")
    return m


def _started(out: Path) -> dict[str, float] | None:
    """When the child's timed run began (epoch seconds) and its tree's CPU then, if it did."""
    path = Path(str(out) + ".start")
    try:
        start = json.loads(path.read_text())
        return {k: float(start[k]) for k in ("at", "cpu", "sys")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the process group the child leads (it was started in a new session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _child(spec_json: str, out_path: str) -> None:
    """In the fresh process: set up, warm up, time one run, write the result."""
    spec = json.loads(spec_json)
    module, _, name = spec["target"].partition(":")
    out = Path(out_path)
    try:
        factory = getattr(importlib.import_module(module), name)
        if spec.get("warm") is not None:
            factory(**spec["warm"])()
        run = factory(**spec["params"])
    except Skip as exc:
        out.write_text(json.dumps({"skipped": str(exc)}))
        return
    gc.collect()
    try:  # reset the peak-resident counter so VmHWM is the timed run's peak
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        resettable = True
    except OSError:
        resettable = False
    base = _status_bytes("VmRSS")
    me = os.getpid()
    # the scans of /proc for descendants stay outside the readings of this process's own time
    d0, ds0 = _descendant_times(me)
    c0, s0 = _own_times()
    # where a run stopped at its timeout is measured from
    Path(out_path + ".start").write_text(
        json.dumps({"at": time.time(), "cpu": c0 + d0, "sys": s0 + ds0})
    )
    t0 = time.perf_counter()
    result = run()
    wall = time.perf_counter() - t0
    c1, s1 = _own_times()
    d1, ds1 = _descendant_times(me)
    cpu, cpu_sys = (c1 - c0) + (d1 - d0), (s1 - s0) + (ds1 - ds0)
    peak = _status_bytes("VmHWM")
    if not resettable:
        peak = None  # the whole process's peak would include the setup's
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        result = str(result)
    out.write_text(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "cpu_sys": cpu_sys,
                "rss": peak,
                "rss_base": base,
                "result": result,
            }
        )
    )


# -- rounds, ratios, goals ----------------------------------------------------------------


@dataclass(frozen=True)
class Ratio:
    """``num``'s time per unit of work over ``den``'s, formed inside each round.

    With ``num`` the peer and ``den`` privhist it says how many times faster privhist is; with
    ``num`` privhist and ``den`` a floor such as ``numpy.bincount`` how many times slower."""

    num: str
    den: str
    metric: str = "wall"  # "wall" or "cpu"

    @property
    def label(self) -> str:
        return f"{self.num} / {self.den} ({'CPU' if self.metric == 'cpu' else 'wall'})"


@dataclass(frozen=True)
class RatioResult:
    ratio: Ratio
    rounds: list[float]
    median: float | None
    bound: str | None  # None (exact), ">=" (a stopped numerator) or "<=" (a stopped denominator)
    missing: str | None  # why no ratio was formed


@dataclass(frozen=True)
class Goal:
    """A goal on a ratio's median (``ratio``) or on one system's median figure (``system`` and
    ``metric``: ``wall``, ``cpu`` in seconds, ``rss`` or ``rss_growth`` in bytes): ``at_least``
    or ``at_most``."""

    text: str
    ratio: Ratio | None = None
    system: str | None = None
    metric: str = "wall"
    at_least: float | None = None
    at_most: float | None = None


def rotations(systems: Sequence[System], rounds: int) -> list[list[System]]:
    """The order of every round: the systems rotated by the round's index."""
    n = len(systems)
    return [[systems[(r + i) % n] for i in range(n)] for r in range(rounds)]


def run_rounds(
    systems: Sequence[System],
    rounds: int,
    *,
    quiet: tuple[float, float] | None = None,
    echo: bool = True,
) -> list[Measurement]:
    """Every system once per round, in rotated order, each in a fresh process. A system
    skipped once is not run again. ``quiet = (cores, seconds)`` waits before each measurement
    until other processes use at most ``cores`` (at most ``seconds``)."""
    out: list[Measurement] = []
    skipped: dict[str, str] = {}
    for r, order in enumerate(rotations(systems, rounds)):
        for system in order:
            if system.name in skipped:
                continue
            if quiet is not None:
                wait_for_quiet(*quiet)
            m = measure(system, r)
            if m.skipped is not None:
                skipped[system.name] = m.skipped
            out.append(m)
            if echo:
                print(_row(m), flush=True)
    return out


def ratio(measurements: Sequence[Measurement], r: Ratio, work: Mapping[str, float]) -> RatioResult:
    """The within-round ratios of ``r`` and their median (rounds missing a side are left out)."""
    by_round: dict[int, dict[str, Measurement]] = {}
    for m in measurements:
        by_round.setdefault(m.round, {})[m.system] = m
    for name in (r.num, r.den):
        if not any(name in ms for ms in by_round.values()):
            return RatioResult(r, [], None, None, f"{name} was not measured")
        skipped = [ms[name].skipped for ms in by_round.values() if name in ms]
        if any(skipped):
            return RatioResult(r, [], None, None, f"{name} did not run: {skipped[0]}")
    values: list[float] = []
    stopped_num = stopped_den = False
    for ms in by_round.values():
        a, b = ms.get(r.num), ms.get(r.den)
        if a is None or b is None or a.error or b.error:
            continue
        va, vb = a.value(r.metric), b.value(r.metric)
        if va is None or vb is None or vb <= 0:
            continue
        stopped_num |= a.stopped
        stopped_den |= b.stopped
        values.append((va / work.get(r.num, 1.0)) / (vb / work.get(r.den, 1.0)))
    if not values:
        return RatioResult(r, [], None, None, "no round measured both")
    if stopped_num and stopped_den:
        return RatioResult(r, values, None, None, "both sides were stopped")
    bound = ">=" if stopped_num else "<=" if stopped_den else None
    return RatioResult(r, values, statistics.median(values), bound, None)


def _verdict(value: float | None, goal: Goal, bound: str | None = None, unit: str = "x") -> str:
    if value is None:
        return "not measured"
    shown = _fmt(value, unit)
    if goal.at_least is not None:
        target = goal.at_least
        if value >= target and bound != "<=":
            return f"met ({bound or ''}{shown})"
        if bound == ">=":
            return f"undetermined (a lower bound, {shown}, below {_fmt(target, unit)})"
        return f"not met ({shown}; {target / value:.2f}x short of {_fmt(target, unit)})"
    assert goal.at_most is not None
    target = goal.at_most
    if value <= target and bound != ">=":
        return f"met ({bound or ''}{shown})"
    if bound == "<=":
        return f"undetermined (an upper bound, {shown}, above {_fmt(target, unit)})"
    return f"not met ({shown}; {value / target:.2f}x the bound {_fmt(target, unit)})"


def _fmt(value: float, unit: str) -> str:
    if unit == "B":
        return f"{value / 1e9:.2f} GB"
    if unit == "s":
        return f"{value:.3g} s"
    return f"{value:.2f}x" if value < 10 else f"{value:,.1f}x" if value < 1000 else f"{value:,.0f}x"


def _row(m: Measurement) -> str:
    load = f"{m.load_before:4.2f}-{m.load_after:4.2f}"
    others = f"{m.others_cores:4.2f}/{m.others_busy}"
    if m.skipped is not None:
        body = f"not run: {m.skipped}"
    elif m.error is not None:
        body = f"failed: {m.error}"
    else:
        assert m.wall is not None
        mark = ">" if m.stopped else " "
        rss = f"{m.rss / 2**20:9.0f}" if m.rss else f"{'n/a':>9}"
        cpu = f"{m.cpu:9.3f}" if m.cpu is not None else f"{'n/a':>9}"
        res = "stopped" if m.stopped else _short(m.result)
        body = f"{mark}{m.wall:9.3f} {cpu} {rss}  {res}"
    return f"{m.round:>5}  {m.system:<34} {load:>11}  {others:>6}  {body}"


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


HEADER = (
    f"{'round':>5}  {'system':<34} {'load1':>11}  {'others':>6}  {'wall s':>10} {'CPU s':>9} "
    f"{'peak MiB':>9}  result"
)
LEGEND = (
    "load1: 1-minute load average before-after; others: cores other processes used during the "
    "run / how many used > 0.1 core; sys: the share of the CPU time spent in the kernel; a '>' "
    "marks a run stopped at its timeout"
)


def summarise(
    systems: Sequence[System],
    measurements: Sequence[Measurement],
    ratios: Iterable[Ratio] = (),
    goals: Iterable[Goal] = (),
) -> list[RatioResult]:
    """Print the median figures of each system, the ratios and the goals."""
    work = {s.name: s.work for s in systems}
    print(
        f"\n{'system':<34} {'runs':>4} {'work':>14} {'wall s':>9} {'CPU s':>9} {'sys':>6} "
        f"{'peak MiB':>9} {'tree MiB':>9}"
        f" {'work/s':>14}  {'load1':>11} {'others':>6}"
    )
    for s in systems:
        ms = [m for m in measurements if m.system == s.name]
        done = [m for m in ms if m.ok]
        if not done:
            why = next((m.skipped or m.error for m in ms if m.skipped or m.error), "no run")
            print(f"{s.name:<34} not run: {why}")
            continue
        wall = statistics.median(m.wall for m in done if m.wall is not None)
        cpus = [m.cpu for m in done if m.cpu is not None]
        rsss = [m.rss for m in done if m.rss]
        cpu = f"{statistics.median(cpus):9.3f}" if cpus else f"{'n/a':>9}"
        shares = [m.cpu_sys / m.cpu for m in done if m.cpu and m.cpu_sys is not None]
        sys_share = f"{statistics.median(shares):6.0%}" if shares else f"{'n/a':>6}"
        rss = f"{statistics.median(rsss) / 2**20:9.0f}" if rsss else f"{'n/a':>9}"
        trees = [m.tree_rss for m in done if m.tree_rss]
        tree = f"{max(trees) / 2**20:9.0f}" if trees else f"{'n/a':>9}"
        load = f"{min(m.load_before for m in done):.2f}-{max(m.load_after for m in done):.2f}"
        others = f"{max(m.others_cores for m in done):.2f}"
        stop = ">" if any(m.stopped for m in done) else ""
        rate = f"{s.work / wall:>14,.0f}" if s.work != 1 else f"{'':>14}"
        amount = f"{s.work:>14,.0f}" if s.work != 1 else f"{'':>14}"
        print(
            f"{s.name:<34} {len(done):>4} {amount} {stop}{wall:9.3f} {cpu} {sys_share} {rss} "
            f"{tree} {rate}  {load:>11} {others:>6}"
        )
    results = [ratio(measurements, r, work) for r in ratios]
    if results:
        print("\nratios (time per unit of work; median of the within-round ratios):")
    for res in results:
        if res.median is None:
            print(f"  {res.ratio.label}: no ratio ({res.missing})")
            continue
        each = ", ".join(_fmt(v, "x") for v in res.rounds)
        print(f"  {res.ratio.label}: {res.bound or ''}{_fmt(res.median, 'x')}  (rounds: {each})")
    goals = list(goals)
    if goals:
        print("\ngoals:")
    for g in goals:
        if g.ratio is not None:
            found = next((x for x in results if x.ratio == g.ratio), None)
            res = found if found is not None else ratio(measurements, g.ratio, work)
            verdict = (
                f"no ratio ({res.missing})"
                if res.median is None
                else _verdict(res.median, g, res.bound)
            )
        else:
            assert g.system is not None
            done = [m for m in measurements if m.system == g.system and m.ok]
            vals = [v for m in done if (v := m.value(g.metric)) is not None]
            value = statistics.median(vals) if vals else None
            unit = "B" if g.metric.startswith("rss") else "s"
            bound = ">=" if any(m.stopped for m in done) else None
            verdict = _verdict(value, g, bound, unit)
        print(f"  {g.text}: {verdict}")
    return results


def compare(
    systems: Sequence[System],
    *,
    rounds: int,
    ratios: Iterable[Ratio] = (),
    goals: Iterable[Goal] = (),
    quiet: tuple[float, float] | None = None,
    save: str | os.PathLike[str] | None = None,
    title: str | None = None,
) -> tuple[list[Measurement], list[RatioResult]]:
    """Run the rounds, print every measurement, then the medians, ratios and goals."""
    if title:
        print(f"\n## {title}")
    print(machine_state(), flush=True)
    print(LEGEND)
    print(HEADER, flush=True)
    ms = run_rounds(systems, rounds, quiet=quiet)
    results = summarise(systems, ms, ratios, goals)
    if save is not None:
        with open(save, "a", encoding="utf-8") as fh:
            for m in ms:
                fh.write(json.dumps({"title": title, **asdict(m)}) + "\n")
    sys.stdout.flush()
    return ms, results


def add_arguments(parser: argparse.ArgumentParser, rounds: int = 3) -> None:
    """The harness's command-line options: ``--rounds``, ``--wait-quiet`` and ``--save``."""
    parser.add_argument("--rounds", type=int, default=rounds, help=f"default {rounds}")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        nargs=2,
        metavar=("CORES", "SECONDS"),
        default=None,
        help="before each run, wait until other processes use at most CORES cores "
        "(at most SECONDS)",
    )
    parser.add_argument("--save", default=None, help="append every measurement as JSON lines")


def options(args: argparse.Namespace) -> dict[str, Any]:
    """``compare`` keyword arguments from parsed :func:`add_arguments` options."""
    quiet = tuple(args.wait_quiet) if args.wait_quiet else None
    return {"rounds": args.rounds, "quiet": quiet, "save": args.save}


# -- in-process timings of one system ------------------------------------------------------
# For a script timing privhist's own building blocks (no other system, no ratio between
# systems): the fastest of a few calls in this process. Ratios between systems go through
# ``compare``.


def best_of(
    run: Callable[[], Any], repeats: int = 3, *, collect: bool = False
) -> tuple[float, Any]:
    """Best wall time (``time.perf_counter``) of ``repeats`` calls of ``run``, and the last
    result; with ``collect`` the garbage collector runs before each call (outside the timing)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        if collect:
            gc.collect()
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, out


def best_seconds(run: Callable[[], Any], repeats: int = 3) -> float:
    """Best wall time of ``repeats`` calls of ``run``."""
    return best_of(run, repeats)[0]


def line(
    name: str,
    seconds: float,
    target: float | None = None,
    *,
    digits: int = 4,
    ratio_digits: int = 2,
) -> None:
    """Print ``name`` and ``seconds`` (``digits`` decimals) and, when there is a ``target``, the
    ratio to it (``ratio_digits`` decimals)."""
    ratio = f"  ({seconds / target:.{ratio_digits}f} of the {target:g} s target)" if target else ""
    print(f"{name:<62} {seconds:8.{digits}f} s{ratio}")


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "child":
    sys.path.insert(0, str(HERE))
    import _harness  # the same module object the benchmark scripts import (for ``Skip``)

    _harness._child(sys.argv[2], sys.argv[3])
