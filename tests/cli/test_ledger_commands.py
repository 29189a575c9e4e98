"""Every releasing command charges ``--dataset`` in the ledger, refuses before reading data when
the budget is short, and never charges seeded (not private) output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli_run import run


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    words = tmp_path / "words.csv"
    words.write_text("word\n" + "hello\n" * 4000 + "hey\n" * 3000 + "hi\n" * 2000)
    times = tmp_path / "times.csv"
    times.write_text("t\n" + "".join(f"{(i * 37) % 1000}\n" for i in range(20000)))
    return {"words": words, "times": times, "ledger": tmp_path / "ledger.sqlite"}


def _spent(capsys: pytest.CaptureFixture[str], ledger: Path) -> dict[str, float]:
    code, out, _ = run(
        capsys, "budget", "show", "--dataset", "d", "--ledger", str(ledger), "--json"
    )
    assert code == 0
    row = json.loads(out)[0]
    return {"epsilon": row["spent"]["epsilon"], "releases": row["releases"]}


def test_release_commands_charge_the_ledger(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    led = str(files["ledger"])
    code, _, err = run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "d",
        "--epsilon",
        "2.5",
        "--delta",
        "1e-6",
        "--ledger",
        led,
    )
    assert code == 0, err
    charge = ["--dataset", "d", "--ledger", led]
    code, out, err = run(
        capsys,
        "heavy-hitters",
        str(files["words"]),
        "--key",
        "word",
        "--one-shot",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        *charge,
    )
    assert code == 0, err
    assert _spent(capsys, files["ledger"]) == {"epsilon": 1.0, "releases": 1}
    common = ["--column", "t", "--range", "0", "1000", "--epsilon", "1", "--delta", "1e-8"]
    code, out, err = run(
        capsys, "range", str(files["times"]), *common, "--query", "0", "500", *charge
    )
    assert code == 0, err
    assert _spent(capsys, files["ledger"]) == {"epsilon": 2.0, "releases": 2}
    # 0.5 is left: a third release of epsilon 1 is refused before any output
    code, out, err = run(capsys, "quantiles", str(files["times"]), *common, "--q", "0.5", *charge)
    assert code == 2 and out == "" and "release refused for dataset 'd'" in err
    assert _spent(capsys, files["ledger"]) == {"epsilon": 2.0, "releases": 2}
    # seeded output is never charged
    code, out, err = run(
        capsys,
        "heavy-hitters",
        str(files["words"]),
        "--key",
        "word",
        "--one-shot",
        "--epsilon",
        "0.1",
        "--delta",
        "1e-8",
        "--seed",
        "1",
        *charge,
    )
    assert code == 2 and "(--seed)" in err and out == ""
    # --ledger alone names no dataset
    code, out, err = run(
        capsys, "quantiles", str(files["times"]), *common, "--q", "0.5", "--ledger", led
    )
    assert code == 2 and "'--dataset'" in err


def test_unknown_dataset_is_refused_before_the_data_is_read(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    led = str(files["ledger"])
    run(capsys, "budget", "init", "--dataset", "d", "--epsilon", "1", "--ledger", led)
    missing = tmp_path / "absent.csv"
    code, _, err = run(
        capsys,
        "heavy-hitters",
        str(missing),
        "--key",
        "word",
        "--epsilon",
        "0.5",
        "--delta",
        "1e-8",
        "--dataset",
        "other",
        "--ledger",
        led,
    )
    assert code == 2 and "other" in err and "absent.csv" not in err


def test_private_sample_is_charged(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    led = str(files["ledger"])
    run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "d",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--ledger",
        led,
    )
    out_file = tmp_path / "s.csv"
    args = [
        "sample",
        str(files["words"]),
        "--key",
        "word",
        "--tau",
        "0.01",
        "--scheme",
        "ppswor",
        "--epsilon",
        "0.75",
        "--delta",
        "1e-6",
        "--keys-only",
        "--no-progress",
        "--dataset",
        "d",
        "--ledger",
        led,
    ]
    code, _, err = run(capsys, *args, "--output", str(out_file))
    assert code == 0, err
    assert _spent(capsys, files["ledger"]) == {"epsilon": 0.75, "releases": 1}
    second = tmp_path / "t.csv"
    code, _, err = run(capsys, *args, "--output", str(second))
    assert code == 2 and "release refused" in err and not second.exists()
