"""``privhist heavy-hitters``."""

from __future__ import annotations

import pytest
from tests.cli_run import run


def trie_argv(words) -> list[str]:
    """The trie run every test starts from: epsilon 4, delta 1e-6, 6 levels at epsilon 1."""
    return [
        "heavy-hitters",
        str(words),
        "--text",
        "--epsilon",
        "4",
        "--delta",
        "1e-6",
        "--levels",
        "6",
        "--level-epsilon",
        "1",
    ]


@pytest.fixture
def words(tmp_path):
    f = tmp_path / "w.txt"
    f.write_text("hello " * 30000 + "hey " * 20000 + "hi " * 20000 + "hiya\n")
    return f


def test_trie_run_prints_items_and_three_compositions(words, tmp_path, capsys) -> None:
    out_file = tmp_path / "hh.csv"
    code, out, _ = run(
        capsys,
        *trie_argv(words),
        "--seed",
        "2",
        "-o",
        str(out_file),
    )
    assert code == 0
    for name in ("basic", "advanced", "pld", "<- used"):
        assert name in out
    rows = out_file.read_text().splitlines()
    assert rows[0].startswith("key,sampled_count,estimate")
    assert [r.split(",")[0] for r in rows[1:]] == ["hello", "hey", "hi"]


def test_one_shot(words, capsys) -> None:
    code, out, _ = run(
        capsys,
        "heavy-hitters",
        str(words),
        "--text",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--one-shot",
        "--seed",
        "1",
    )
    assert code == 0 and "one-shot" in out and "hello" in out and "hiya" not in out


def test_alphabet_errors_and_nothing_written(words, tmp_path, capsys) -> None:
    out_file = tmp_path / "hh.csv"
    code, out, err = run(
        capsys,
        *trie_argv(words),
        "--alphabet",
        "helo",
        "-o",
        str(out_file),
    )
    assert code == 2 and "'y'" in err and not out_file.exists()
    code, out, err = run(
        capsys,
        *trie_argv(words),
        "--alphabet",
        "helo",
        "--drop-unknown",
        "--seed",
        "1",
    )
    # exact input facts go to stderr, marked not private, never beside the release on stdout
    assert code == 0 and "hello" in out and "40001 dropped for the alphabet" in err
    assert "dropped" not in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--levels", "0"], "parameter 'levels'"),
        (["--delta", "0"], "parameter 'delta'"),
        (["--epsilon", "0.1", "--level-epsilon", "1"], "parameter 'level_epsilon'"),
    ],
)
def test_bad_parameters_write_nothing(words, tmp_path, capsys, extra, message) -> None:
    out_file = tmp_path / "hh.csv"
    argv = [
        "heavy-hitters",
        str(words),
        "--text",
        "--epsilon",
        "4",
        "--delta",
        "1e-6",
        "--levels",
        "6",
        "-o",
        str(out_file),
    ]
    code, _, err = run(capsys, *argv, *extra)
    assert code == 2 and message in err and not out_file.exists()


def test_missing_key_and_file(tmp_path, capsys) -> None:
    f = tmp_path / "t.csv"
    f.write_text("w\nhi\n")
    code, _, err = run(capsys, "heavy-hitters", str(f), "--epsilon", "1", "--delta", "1e-8")
    assert code == 2 and "parameter 'key' (--key)" in err
    code, _, err = run(
        capsys,
        "heavy-hitters",
        str(tmp_path / "nope.csv"),
        "--key",
        "w",
        "--epsilon",
        "4",
        "--delta",
        "1e-6",
        "--levels",
        "2",
        "--level-epsilon",
        "1",
    )
    assert code == 2 and "error" in err


@pytest.mark.parametrize(
    ("extra", "flag"),
    [(["--level-epsilon", "0.5"], "--level-epsilon"), (["--levels", "4"], "--levels")],
)
def test_one_shot_refuses_trie_options(words, tmp_path, capsys, extra, flag) -> None:
    """--one-shot releases one histogram: trie options would be silently ignored, so they are
    refused before anything is read or written."""
    out_file = tmp_path / "hh.csv"
    argv = ["heavy-hitters", str(words), "--text", "--epsilon", "1", "--delta", "1e-8"]
    code, out, err = run(capsys, *argv, "--one-shot", *extra, "-o", str(out_file))
    assert code == 2 and out == "" and f"({flag}) of heavy-hitters" in err and not out_file.exists()


def test_the_summary_states_the_guarantee_and_seeded_randomness(words, capsys) -> None:
    code, _, err = run(capsys, *trie_argv(words), "--seed", "2")
    assert code == 0
    (line,) = err.strip().splitlines()
    assert line.startswith("privhist: guarantee (") and "-DP under" in line
    assert "reproducible and NOT private" in line and "clients" in line


def test_a_level_epsilon_above_the_budget_is_one_line(words, capsys) -> None:
    # the profile at 32 times the level epsilon took the log of a negative interval: a traceback
    argv = ["heavy-hitters", str(words), "--text", "--epsilon", "1", "--delta", "1e-6"]
    code, out, err = run(capsys, *argv, "--level-epsilon", "5", "--seed", "1")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert (
        "parameter 'level_epsilon' (--level-epsilon) of heavy-hitters must be small enough" in err
    )
