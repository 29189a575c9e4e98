"""The benchmark timing harness: rotated rounds, within-round ratios and their bounds, goal
verdicts, and measurements taken in fresh processes (CPU of the process tree, the timed run's
peak memory, skipped and stopped systems). No timing is asserted beyond what a busy machine
cannot change (CPU time spent spinning, memory touched)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

import _harness as h  # noqa: E402


def _m(system: str, rnd: int, wall: float, **kw: object) -> h.Measurement:
    return h.Measurement(system, rnd, wall=wall, cpu=wall / 2, **kw)  # type: ignore[arg-type]


def test_rounds_rotate_the_order() -> None:
    a, b, c = (h.System(x, "m:f") for x in "abc")
    orders = [[s.name for s in r] for r in h.rotations([a, b, c], 4)]
    assert orders == [list("abc"), list("bca"), list("cab"), list("abc")]


def test_ratio_is_the_median_of_within_round_ratios_per_unit_of_work() -> None:
    ms = [
        _m("peer", 0, 10.0),
        _m("ours", 0, 1.0),
        _m("peer", 1, 30.0),  # a slow round for both: the within-round ratio is unchanged
        _m("ours", 1, 3.0),
        _m("peer", 2, 8.0),
        _m("ours", 2, 2.0),
    ]
    res = h.ratio(ms, h.Ratio("peer", "ours"), {"peer": 1.0, "ours": 1.0})
    assert res.rounds == [10.0, 10.0, 4.0] and res.median == 10.0 and res.bound is None
    # the peer did a tenth of the work: its time per unit is ten times larger
    res = h.ratio(ms, h.Ratio("peer", "ours", "cpu"), {"peer": 0.1, "ours": 1.0})
    assert res.median == pytest.approx(100.0)
    # the median of pooled times would differ: 10 / 2 = 5, not the within-round 10
    assert res.median != 5.0


def test_ratio_skips_rounds_missing_a_side_and_marks_stopped_runs_as_bounds() -> None:
    ms = [
        _m("peer", 0, 100.0, stopped=True),
        _m("ours", 0, 1.0),
        h.Measurement("peer", 1, error="exit 1"),
        _m("ours", 1, 1.0),
    ]
    res = h.ratio(ms, h.Ratio("peer", "ours"), {})
    assert res.rounds == [100.0] and res.bound == ">="
    flipped = h.ratio(ms, h.Ratio("ours", "peer"), {})
    assert flipped.bound == "<="
    goal = h.Goal("fast", h.Ratio("peer", "ours"), at_least=1000)
    assert h._verdict(res.median, goal, res.bound).startswith("undetermined")
    goal = h.Goal("fast", h.Ratio("peer", "ours"), at_least=10)
    assert h._verdict(res.median, goal, res.bound).startswith("met")


def test_a_skipped_system_gives_no_ratio() -> None:
    ms = [h.Measurement("peer", 0, skipped="not installed"), _m("ours", 0, 1.0)]
    res = h.ratio(ms, h.Ratio("peer", "ours"), {})
    assert res.median is None and res.missing is not None and "not installed" in res.missing
    assert h.ratio([_m("ours", 0, 1.0)], h.Ratio("peer", "ours"), {}).median is None


def test_verdicts_state_the_distance() -> None:
    at_least = h.Goal("g", h.Ratio("a", "b"), at_least=100)
    assert h._verdict(150.0, at_least) == "met (150.0x)"
    assert h._verdict(55.0, at_least) == "not met (55.0x; 1.82x short of 100.0x)"
    at_most = h.Goal("g", h.Ratio("a", "b"), at_most=1.5)
    assert h._verdict(1.2, at_most) == "met (1.20x)"
    assert h._verdict(2.2, at_most) == "not met (2.20x; 1.47x the bound 1.50x)"
    seconds = h.Goal("g", system="a", metric="wall", at_most=10)
    assert h._verdict(19.3, seconds, unit="s") == "not met (19.3 s; 1.93x the bound 10 s)"
    memory = h.Goal("g", system="a", metric="rss", at_most=3e9)
    assert h._verdict(2.87e9, memory, unit="B") == "met (2.87 GB)"


@pytest.fixture
def name(monkeypatch: pytest.MonkeyPatch) -> str:
    """The module of the test systems, importable in the children."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    return "harness_systems"


def test_fresh_process_measurements(name: str) -> None:
    spin = h.measure(h.System("spin", f"{name}:spin", {"seconds": 0.2}, warm={"seconds": 0.01}))
    assert spin.ok and spin.result == {"spun": 0.2}
    assert spin.cpu is not None and 0.19 <= spin.cpu < 1.0
    child = h.measure(h.System("child", f"{name}:spin_child", {"seconds": 0.2}))
    assert child.ok and child.cpu is not None and child.cpu >= 0.19
    big = h.measure(h.System("hold", f"{name}:hold", {"megabytes": 200}))
    assert big.ok and big.rss is not None and big.rss_base is not None
    assert big.rss - big.rss_base >= 190 * 2**20
    skipped = h.measure(h.System("peer", f"{name}:absent"))
    assert skipped.skipped == "the peer is not installed here" and not skipped.ok
    stopped = h.measure(h.System("slow", f"{name}:sleep", {"seconds": 30.0}, timeout=3.0))
    assert stopped.stopped and stopped.wall is not None and stopped.wall < 10
    assert stopped.cpu is not None and stopped.cpu < 1.0  # asleep: its timed run used no CPU
    failed = h.measure(h.System("bad", f"{name}:no_such_factory"))
    assert failed.error is not None and "no_such_factory" in failed.error
    for m in (spin, skipped, stopped):
        assert m.load_before >= 0 and m.others_cores >= 0


def test_commands_are_timed_whole() -> None:
    code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"
    m = h.measure(h.System("cmd", command=[sys.executable, "-c", code]))
    assert m.ok and m.cpu is not None and m.cpu >= 0.19 and m.wall is not None


def test_a_stopped_run_counts_from_its_timed_start_and_includes_grandchildren(name: str) -> None:
    # the spinning grandchild is never waited for: its CPU is read from the tree before the kill
    m = h.measure(h.System("tree", f"{name}:spin_grandchild", {"seconds": 0.6}, timeout=8.0))
    assert m.stopped and m.error is None and m.cpu is not None and m.cpu >= 0.55
    assert m.wall is not None and m.wall < 8.0 + 1.0
    setup = h.measure(h.System("setup", f"{name}:slow_setup", {"seconds": 30.0}, timeout=1.0))
    assert setup.stopped and setup.wall is None and setup.cpu is None
    assert setup.error is not None and "before its timed run" in setup.error
