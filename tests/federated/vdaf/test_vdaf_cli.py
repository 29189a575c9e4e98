"""``privhist federated vdaf-check``: one line per file, exit 0 only when every file passes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from privhist.cli.main import main
from privhist.federated.vdaf.prio3 import prio3_histogram
from privhist.federated.vdaf.vectors import generate_vector


def _write(tmp_path: Path, name: str, data: dict[str, object]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def _histogram_vector() -> dict[str, object]:
    params = {"shares": 2, "length": 6, "chunk_length": 2}
    # our own outputs: this exercises the command, not agreement with the draft (see
    # test_vdaf_vectors.py for that)
    return generate_vector(prio3_histogram(2, 6, 2), params, [0, 5, 5])


def test_passing_files_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path, "Prio3Histogram_9.json", _histogram_vector())
    assert main(["federated", "vdaf-check", a, a]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all(x.startswith("PASS Prio3Histogram_9.json") for x in lines)


def test_a_wrong_value_or_an_accepted_bad_report_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _histogram_vector()
    wrong = json.loads(json.dumps(good))
    wrong["agg_result"] = [2, 0, 0, 0, 0, 1]  # truth: [1, 0, 0, 0, 0, 2]
    flipped = json.loads(json.dumps(good))
    flipped["operations"][3]["success"] = False  # verifier_shares_to_message "must fail"
    files = [
        _write(tmp_path, "Prio3Histogram_0.json", good),
        _write(tmp_path, "Prio3Histogram_1.json", wrong),
        _write(tmp_path, "Prio3Histogram_2.json", flipped),
        _write(tmp_path, "Poplar1_0.json", good),
    ]
    assert main(["federated", "vdaf-check", *files]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert [x.split()[0] for x in out] == ["PASS", "FAIL", "FAIL", "FAIL"]
    assert "unshard" in out[1] and "expects it to fail" in out[2]


VECTORS = os.environ.get("PRIVHIST_VDAF_VECTORS")


@pytest.mark.skipif(
    not VECTORS or not Path(VECTORS).is_dir(),
    reason="PRIVHIST_VDAF_VECTORS does not name the draft's test_vec/vdaf folder",
)
def test_the_drafts_files(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in Path(VECTORS or "").glob("Prio3*.json"))
    assert main(["federated", "vdaf-check", *files]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == len(files) and all(x.startswith("PASS") for x in out)
    assert sum("bad report rejected" in x for x in out) == 8
