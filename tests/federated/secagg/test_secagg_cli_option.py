"""``--secure-sum ideal|secagg|secagg+`` on simulate, heavy-hitters and federated-frequency."""

from __future__ import annotations

from pathlib import Path

import pytest

from privhist.cli.main import main


def _out(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    return out


def test_simulate_prints_the_ideal_release(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "sample-and-threshold", "--zipf", "60", "--support", "8"]
    argv += ["--epsilon", "2", "--delta", "0.05", "--sampling-rate", "0.5", "--threshold", "5"]
    argv += ["--seed", "1", "--no-progress"]
    ideal = _out(capsys, argv)
    real = _out(capsys, [*argv, "--secure-sum", "secagg+"])
    assert "released" in ideal and real == ideal


def test_heavy_hitters_prints_the_ideal_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "w.txt"
    f.write_text("ab " * 40 + "ba " * 30 + "a " * 3 + "\n")
    argv = ["heavy-hitters", str(f), "--text", "--epsilon", "6", "--delta", "0.01"]
    # "ab" (40 of 73 clients) is found in about two thirds of the seeds; seed 0 finds it
    argv += ["--levels", "3", "--level-epsilon", "2", "--alphabet", "ab", "--seed", "0"]
    argv += ["--no-progress"]
    ideal = _out(capsys, argv)
    real = _out(capsys, [*argv, "--secure-sum", "secagg+"])
    assert "ab" in ideal and real == ideal


def test_federated_frequency_prints_the_ideal_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "r.csv"
    rows = ["user,key"] + [f"u{i},k{(i * 7) % 5}" for i in range(60)]
    rows += [f"u{i},k{(i * 3) % 5}" for i in range(0, 60, 2)]
    f.write_text("\n".join(rows) + "\n")
    argv = ["federated-frequency", str(f), "--user", "user", "--key", "key"]
    argv += ["--epsilon", "8", "--delta", "1e-3", "--domain-from-data", "--max-items", "3"]
    argv += ["--bits", "3", "--seed", "4", "--json", "--no-progress"]
    ideal = _out(capsys, argv)
    real = _out(capsys, [*argv, "--secure-sum", "secagg+"])
    assert real == ideal


def test_a_round_with_one_participant_fails_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["simulate", "sample-and-threshold", "--zipf", "2", "--support", "2"]
    argv += ["--epsilon", "2", "--delta", "0.05", "--sampling-rate", "0.5", "--threshold", "5"]
    # a seed whose round samples exactly one of the two clients (probability 1/2 per seed)
    argv += ["--seed", "6", "--no-progress", "--secure-sum", "secagg"]
    code = main(argv)
    _, err = capsys.readouterr()
    assert code != 0 and "at least 2 clients" in err and len(err.strip().splitlines()) == 1
