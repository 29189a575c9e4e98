"""``benchmarks/bench_quantiles.py``: its ``--quick`` run compares the two budget splits of
sample-and-threshold quantiles on the same generated data; both stay within the budget, and the
PLD split's per-release epsilon and rank error beat the even split's (seeded runs)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_quantiles as bq  # noqa: E402


def test_quick_run_compares_the_splits(capsys: pytest.CaptureFixture[str]) -> None:
    rows = bq.main(["--quick"])
    out = capsys.readouterr().out
    assert [r["method"] for r in rows] == ["hierarchical", "binary-search"]
    for r in rows:
        pld, basic = r["pld"], r["basic"]
        assert pld["per_release"] > 4 * basic["per_release"]
        for side in (pld, basic):
            eps = float(side["guarantee"].strip("()").split(",")[0])
            assert eps <= 1.0
        assert pld["pruning"] < basic["pruning"] / 3
        assert pld["rank"] < basic["rank"]
    assert out.count("even split over PLD split") == 2


def test_ranges_tile_the_range() -> None:
    cuts = bq.ranges(128.0)
    assert cuts[0][0] == 0 and cuts[-1][1] == 128.0 and len(cuts) == 10
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cuts))
