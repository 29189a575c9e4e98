"""``privhist simulate sample-and-threshold``."""

from __future__ import annotations

import pytest
from tests.cli_run import run


def test_zipf_round(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "sample-and-threshold",
        "--zipf",
        "200000",
        "--support",
        "64",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--seed",
        "3",
    )
    assert code == 0
    assert "(1, 1e-08)-DP" in out and "threshold      11" in out
    assert "mean absolute error" in out and "NOT private" in out
    assert "clients                    200000" in out


def _cohort_run(capsys: pytest.CaptureFixture[str], path: str, *extra: str) -> tuple[int, str, str]:
    return run(
        capsys,
        "simulate",
        "sample-and-threshold",
        path,
        "--key",
        "item",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--cohort-size",
        "500",
        "--seed",
        "1",
        *extra,
    )


def test_file_round_with_cohort(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.csv"
    f.write_text("item\n" + "a\n" * 3000 + "b\n" * 2000 + "c\n")
    code, out, _ = _cohort_run(capsys, str(f), "--population-bound", "10000")
    assert code == 0
    # the rate is M / (public bound) = 500 / 10000, and the cohort s = ceil(m + 10 sqrt(m))
    assert "sampling_rate  0.05\n" in out
    assert "cohort         724 clients contacted" in out  # 500 + 10 sqrt(500) = 723.6
    assert "\nc " not in out  # one client never reaches the threshold


def test_cohort_rate_never_comes_from_the_data(tmp_path, capsys) -> None:
    """The cohort's rate and population bound are public: two files of different sizes get the
    same parameters, and a file without a public bound is refused before it is read."""
    small, large = tmp_path / "s.csv", tmp_path / "l.csv"
    small.write_text("item\n" + "a\n" * 3000 + "b\n" * 2000)
    large.write_text("item\n" + "a\n" * 3000 + "b\n" * 2001)
    rates = []
    for f in (small, large):
        code, out, _ = _cohort_run(capsys, str(f), "--population-bound", "8000")
        assert code == 0
        lines = out.splitlines()
        rates.append([ln.split(",")[0] for ln in lines if ln.startswith(("sampling_", "cohort"))])
    assert rates[0] == rates[1] == ["sampling_rate  0.0625", "cohort         724 clients contacted"]
    code, out, err = _cohort_run(capsys, str(tmp_path / "missing.csv"))
    assert code == 2 and out == "" and "parameter '--population-bound'" in err
    # a population above its public bound is refused, not silently used
    code, out, err = _cohort_run(capsys, str(large), "--population-bound", "4000")
    assert code == 2 and "parameter 'population'" in err and "4000" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sampling-rate", "0.9"], "parameter 'sampling_rate'"),
        (["--threshold", "0"], "parameter 'threshold'"),
        (["--cohort-size", "10", "--sampling-rate", "0.1"], "parameter '--cohort-size'"),
        (["--cohort-size", "1000"], "parameter '--cohort-size'"),  # the --zipf bound itself
        (["--population-bound", "5000"], "parameter '--population-bound'"),  # no cohort
    ],
)
def test_bad_parameters(capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    code, out, err = run(
        capsys,
        "simulate",
        "sample-and-threshold",
        "--zipf",
        "1000",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        *extra,
    )
    assert code == 2 and message in err and out == ""


def test_bad_inputs(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "simulate", "sample-and-threshold", "--epsilon", "1", "--delta", "1e-6"
    )
    assert code == 2 and "parameter 'INPUT'" in err
    empty = tmp_path / "e.csv"
    empty.write_text("item\n")
    code, _, err = run(
        capsys,
        "simulate",
        "sample-and-threshold",
        str(empty),
        "--key",
        "item",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
    )
    assert code == 2 and "error" in err
    code, _, err = run(
        capsys,
        "simulate",
        "sample-and-threshold",
        "--zipf",
        "100",
        "--epsilon",
        "-1",
        "--delta",
        "1e-6",
    )
    assert code == 2 and "parameter 'epsilon'" in err
