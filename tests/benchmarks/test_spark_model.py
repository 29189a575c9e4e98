"""The Spark benchmark's scaling model: the least-squares fit of CPU seconds against records,
its standard errors and residuals, and the fixed-cost verdict (no Spark is started)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

import bench_spark  # noqa: E402


def test_three_sizes_on_a_line_give_its_intercept_and_slope(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 2 CPU s fixed plus 3 core-microseconds a record, two runs a size, the runs 0.1 s apart
    points = [(n, 2.0 + 3e-6 * n + d) for n in (1e6, 3e6, 1e7) for d in (-0.05, 0.05)]
    bench_spark.fit_model(points, fixed_goal=5.0)
    out = capsys.readouterr().out
    assert "T0 = 2.00 +- " in out and "c = 3.000 +- " in out
    assert "6 runs, 3 sizes" in out
    assert "fixed cost T0 at most 5 CPU s: met" in out


def test_a_fixed_cost_above_the_goal_is_not_met(capsys: pytest.CaptureFixture[str]) -> None:
    points = [(n, 9.0 + 1e-6 * n) for n in (1e5, 1e6, 1e7) for _ in range(2)]
    bench_spark.fit_model(points, fixed_goal=5.0)
    assert "not met (1.80x the bound)" in capsys.readouterr().out


def test_fewer_than_three_sizes_are_not_fitted(capsys: pytest.CaptureFixture[str]) -> None:
    bench_spark.fit_model([(1e6, 3.0), (1e7, 12.0), (1e7, 12.5)], fixed_goal=5.0)
    out = capsys.readouterr().out
    assert "not fitted: 2 size(s)" in out and "T0 =" not in out
