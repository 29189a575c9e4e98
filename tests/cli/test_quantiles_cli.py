"""``privhist quantiles`` and ``privhist range`` end to end (in-process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.cli_run import run


@pytest.fixture
def latencies(tmp_path: Path) -> tuple[Path, np.ndarray]:
    values = np.random.default_rng(11).uniform(0, 1000, 100_000)
    path = tmp_path / "times.csv"
    lines = ["latency,host"] + [f"{v:.3f},a" for v in values] + [",b", "oops,c"]
    path.write_text("\n".join(lines) + "\n")
    return path, np.round(values, 3)


BASE = ["--range", "0", "1000", "--epsilon", "1", "--delta", "1e-8", "--seed", "3"]


def test_quantiles_json(capsys: pytest.CaptureFixture[str], latencies: tuple[Path, Any]) -> None:
    path, values = latencies
    code, out, err = run(
        capsys, "quantiles", str(path), "--column", "latency", "--q", "0.5", "0.9", *BASE,
        "--levels", "6", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert [a["q"] for a in doc["quantiles"]] == [0.5, 0.9]
    for a in doc["quantiles"]:
        assert abs(a["value"] - np.quantile(values, a["q"])) < 60
        assert a["bucket_upper"] - a["bucket_lower"] == pytest.approx(1000 / 64)
    g = doc["guarantee"]
    assert g["epsilon"] <= 1 and g["delta"] <= 1e-8
    assert g["composition"]["releases"] == 6
    assert "2 missing or non-numeric values dropped" in err and "not private" in err


def test_quantiles_binary_search_text(
    capsys: pytest.CaptureFixture[str], latencies: tuple[Path, Any]
) -> None:
    path, _ = latencies
    code, out, err = run(
        capsys, "quantiles", str(path), "--column", "latency", "--q", "0.5", *BASE,
        "--method", "binary-search", "--levels", "7",
    )  # fmt: skip
    assert code == 0, err
    assert "guarantee:" in out and "7 sample-and-threshold releases" in out
    assert "binary-search" in err


@pytest.mark.parametrize("command", ["quantiles", "range"])
def test_composition_flag_chooses_the_split(
    capsys: pytest.CaptureFixture[str], latencies: tuple[Path, Any], command: str
) -> None:
    """By default the levels share the budget by certified PLD composition (each takes more
    than epsilon / levels); --composition basic keeps the paper's even split."""
    path, _ = latencies
    asked = ["--q", "0.5"] if command == "quantiles" else ["--query", "0", "500"]
    docs = {}
    for split in ("pld", "basic"):
        code, out, err = run(
            capsys, command, str(path), "--column", "latency", *asked, *BASE, "--levels", "6",
            "--composition", split, "--json",
        )  # fmt: skip
        assert code == 0, err
        docs[split] = json.loads(out)
    for split, doc in docs.items():
        per_level = doc["parameters"]["epsilon_per_level"]
        assert doc["parameters"]["composition"] == split
        assert (per_level > 2 / 6) if split == "pld" else (per_level == pytest.approx(1 / 6))
        g = doc["guarantee"]
        assert g["epsilon"] <= 1 and g["delta"] <= 1e-8
        assert g["composition"]["guarantee"]["rule"] == "pld_certified"
    with pytest.raises(SystemExit):
        run(capsys, command, str(path), "--column", "latency", *asked, *BASE, "--composition", "x")
    assert "--composition: invalid choice: 'x'" in capsys.readouterr().err


def test_range_json(capsys: pytest.CaptureFixture[str], latencies: tuple[Path, Any]) -> None:
    path, values = latencies
    code, out, err = run(
        capsys, "range", str(path), "--column", "latency", *BASE,
        "--query", "0", "250", "--query", "100", "600", "--levels", "4", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["ranges"]) == 2
    for r in doc["ranges"]:
        a, b = r["answered_from"], r["answered_to"]
        truth = int(((values >= a) & (values < b)).sum())
        assert r["lower"] <= truth <= r["upper"]
        assert r["pruning_bound"] <= r["lemma_bound"]
    assert [doc["ranges"][0][k] for k in ("from", "to")] == [0.0, 250.0]


def test_out_of_range_fails_and_clamp_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "v.csv"
    path.write_text("x\n" + "\n".join(["5"] * 50 + ["-2", "12"]) + "\n")
    args = ["--column", "x", "--range", "0", "10", "--epsilon", "1", "--delta", "1e-8"]
    code, out, err = run(capsys, "quantiles", str(path), "--q", "0.5", *args, "--seed", "1")
    assert code == 2 and out == ""
    assert err.startswith("privhist: error: 2 values lie outside") and "--clamp" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "range", str(path), "--query", "0", "5", *args, "--seed", "1")
    assert code == 2 and out == ""
    code, out, err = run(
        capsys, "quantiles", str(path), "--q", "0.5", *args, "--seed", "1", "--clamp"
    )
    assert code == 0 and "2 values outside the range clamped" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--q", "1.5"], "parameter 'q'"),
        (["--q", "-0.5"], "parameter 'q'"),
        (["--q", "0.5", "--levels", "0"], "parameter 'levels'"),
        (["--q", "0.5", "--branching", "1"], "parameter 'branching'"),
        (["--q", "0.5", "--threshold", "0"], "parameter 'threshold'"),
        (["--q", "0.5", "--method", "binary-search", "--branching", "4"], "(--branching)"),
    ],
)
def test_parameters_checked_before_reading(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], message: str
) -> None:
    missing = tmp_path / "absent.csv"  # never read: the parameters fail first
    code, out, err = run(
        capsys, "quantiles", str(missing), "--column", "x", "--range", "0", "1",
        "--epsilon", "1", "--delta", "1e-8", *extra,
    )  # fmt: skip
    assert code == 2 and out == ""
    assert message in err and "absent.csv" not in err


def test_bad_range_queries_and_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("x\n0.5\n0.25\n")
    args = ["--column", "x", "--range", "0", "1", "--epsilon", "1", "--delta", "1e-8"]
    for q in (["0.6", "0.2"], ["-1", "0.5"], ["0", "2"]):
        code, out, err = run(capsys, "range", str(path), "--query", *q, *args)
        assert code == 2 and out == "" and "privhist: error:" in err
    code, out, err = run(
        capsys, "range", str(path), "--query", "0", "1", *args[2:], "--column", "y"
    )
    assert code == 2 and "'y'" in err
    empty = tmp_path / "e.csv"
    empty.write_text("x\n\n")
    code, out, err = run(capsys, "quantiles", str(empty), "--q", "0.5", *args)
    assert code == 2 and "the column holds no numbers" in err and out == ""
    text = tmp_path / "t.txt"
    text.write_text("1 2 3\n")
    code, out, err = run(capsys, "quantiles", str(text), "--q", "0.5", *args)
    assert code == 2 and "table format" in err
    code, out, err = run(
        capsys, "quantiles", str(path), "--q", "0.5", "--column", "x", "--range", "1", "0",
        "--epsilon", "1", "--delta", "1e-8",
    )  # fmt: skip
    assert code == 2 and "parameter 'upper' (--range) of quantiles must be greater than" in err


@pytest.mark.parametrize("command", ["quantiles", "range"])
def test_a_column_of_no_numbers_says_so(
    capsys: pytest.CaptureFixture[str], latencies: tuple[Path, Any], command: str
) -> None:
    # "host" is text: the estimator would have called it an empty population
    path, _ = latencies
    what = ["--q", "0.5"] if command == "quantiles" else ["--query", "0", "10"]
    code, out, err = run(capsys, command, str(path), "--column", "host", *what, *BASE)
    assert code == 2 and out == ""
    assert f"{command}: the column holds no numbers (100002 rows read, 100002 of them" in err


def test_counts_of_one_read_in_the_singular(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "one.csv"
    path.write_text("x\n" + "".join(f"{i % 90}\n" for i in range(2000)) + "oops\n5000\n")
    code, _, err = run(
        capsys, "quantiles", str(path), "--column", "x", "--q", "0.5", *BASE, "--clamp"
    )
    assert code == 0, err
    assert "1 missing or non-numeric value dropped" in err
    assert "1 value outside the range clamped" in err
