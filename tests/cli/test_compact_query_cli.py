"""``privhist histogram --mechanism compact`` then ``privhist compact-query``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privhist.cli.main import main
from privhist.io.compact import read_compact
from privhist.mechanisms.finite.compact import CompactCounts


def test_histogram_then_query(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "in.csv"
    data.write_text("id\n" + "18446744073709551615\n" * 30 + "5\n")
    out = tmp_path / "rel.json"
    rc = main(
        [
            "histogram",
            str(data),
            "--key",
            "id",
            "--key-type",
            "str",
            "--mechanism",
            "compact",
            "--universe-bits",
            "64",
            "--max-keys",
            "8",
            "--count-bound",
            "100",
            "--epsilon",
            "1",
            "--seed",
            "4",
            "--no-progress",
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    expected = CompactCounts(read_compact(out)).counts(["18446744073709551615", "5", "6"])
    capsys.readouterr()
    assert main(["compact-query", str(out), "18446744073709551615", "5", "6", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == dict(zip(["18446744073709551615", "5", "6"], expected, strict=True))
    assert main(["compact-query", str(out), "5"]) == 0
    assert capsys.readouterr().out == f"5\t{expected[1]}\n"


def test_bad_key_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact-query", str(tmp_path / "nope.json"), "1"]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["compact-query", str(bad), "1"]) == 2
    assert "not a compact histogram" in capsys.readouterr().err
