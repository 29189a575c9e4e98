"""A count of one reads in the singular in what the commands print ("1 key", not "1 keys"): the
summaries on stderr say it through :func:`privhist.cli.common.counted`."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli_run import run

from privhist.cli.common import counted


def test_counted_takes_the_singular_for_one_only() -> None:
    assert [counted(n, "key") for n in (0, 1, 2)] == ["0 keys", "1 key", "2 keys"]
    assert counted(1, "dummy", "dummies") == "1 dummy"
    assert counted(3, "dummy", "dummies") == "3 dummies"
    assert counted(1, "record was dropped", "records were dropped") == "1 record was dropped"
    assert counted(1234, "record", spec=",") == "1,234 records"


def test_histogram_summary_of_one_key_and_one_null(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "one.csv"
    data.write_text("k\na\n\n")
    argv = ["histogram", str(data), "--key", "k", "--epsilon", "1", "--delta", "1e-6"]
    code, _, err = run(capsys, *argv, "--seed", "1")
    assert code == 0
    assert "1 distinct key, 1 record with a null key was dropped" in err
    assert "1 distinct keys" not in err and "1 records" not in err


def test_sample_summary_of_one_clamped_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "w.csv"
    data.write_text("k,w\nbig,900\n")
    argv = ["sample", str(data), "--key", "k", "--weight", "w", "--tau", "1"]
    argv += ["--epsilon", "1", "--delta", "1e-6", "--max-frequency", "500", "--seed", "1"]
    code, _, err = run(capsys, *argv)
    assert code == 0 and err.startswith("privhist: 1 key released from a sample of 1 ")
    assert "1 key clamped to --max-frequency" in err


def test_heavy_hitters_summary_of_one_client(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "items.csv"
    data.write_text("item\nab\n")
    argv = ["heavy-hitters", str(data), "--key", "item", "--epsilon", "1", "--delta", "1e-6"]
    code, _, err = run(capsys, *argv, "--levels", "2", "--seed", "1")
    assert code == 0 and "not in the output): 1 client, 0 dropped for the alphabet" in err


def test_aggregate_summary_of_one_group_and_one_empty_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "g.csv"
    data.write_text("g,v\nx,1\nx,\n")
    argv = ["aggregate", str(data), "--by", "g", "--metric", "sum(v,0,10)", "--product", "g=x"]
    code, _, err = run(capsys, *argv, "--epsilon", "1", "--seed", "1")
    assert code == 0
    assert "2 records, 1 group released, 1 record whose 'v' is empty" in err


def test_library_messages_word_a_count_of_one_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from privhist.federated.triehh import TrieHH

    for nulls, said in ((1, "1 row with a null key"), (2, "2 rows with a null key")):
        keys = tmp_path / f"nulls{nulls}.csv"
        keys.write_text("k\na\n" + "\n" * nulls + "b\n")
        argv = ["sample", str(keys), "--key", "k", "--epsilon", "1", "--delta", "1e-6"]
        code, _, err = run(capsys, *argv, "--tau", "0.5", "--seed", "1")
        assert code == 2 and err.strip().endswith(f"sample: {said}")
    one = TrieHH(1.0, 1e-8, levels=1).metadata()["guarantee"]["statement"]
    assert one.endswith("composition of 1 level)")
    assert TrieHH(1.0, 1e-8, levels=2).metadata()["guarantee"]["statement"].endswith("2 levels)")
    words = tmp_path / "w.csv"
    words.write_text("x\nabc\n")
    argv = ["quantiles", str(words), "--column", "x", "--range", "0", "1", "--q", "0.5"]
    code, _, err = run(capsys, *argv, "--epsilon", "1", "--delta", "1e-8", "--seed", "1")
    assert code == 2 and "(1 row read, 1 of them empty or not a number)" in err
