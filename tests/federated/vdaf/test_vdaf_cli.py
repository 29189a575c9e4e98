"""``privhist federated vdaf-check``: one line per file, exit 0 only when every file passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


def _wait_port(path: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode() if proc.stderr else "exited")
        time.sleep(0.1)
    raise AssertionError("the aggregator did not start")


def test_the_roles_as_separate_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vdaf-pki, then the helper and the leader as their own processes, 12 vdaf-client calls
    and vdaf-collect; the release counts 12 reports and every bucket is printed."""
    pki = tmp_path / "pki"
    assert main(["federated", "vdaf-pki", "--out", str(pki), "--clients", "12"]) == 0
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"task_id": "cli", "length": 4, "epsilon": 1.0}))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3] / "src"))
    common = ["--task", str(task), "--pki", str(pki), "--verify-key", str(pki / "verify_key")]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        hp = tmp_path / "helper.port"
        cmd = [sys.executable, "-m", "privhist", "federated", "vdaf-helper", *common]
        procs.append(
            subprocess.Popen([*cmd, "--port-file", str(hp)], env=env, stderr=subprocess.PIPE)
        )
        helper = f"127.0.0.1:{_wait_port(hp, procs[0])}"
        lp = tmp_path / "leader.port"
        cmd = [sys.executable, "-m", "privhist", "federated", "vdaf-leader", *common]
        cmd += ["--helper", helper, "--port-file", str(lp)]
        procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE))
        leader = f"127.0.0.1:{_wait_port(lp, procs[1])}"
        where = ["--task", str(task), "--pki", str(pki), "--leader", leader, "--helper", helper]
        for i in range(12):
            argv = ["federated", "vdaf-client", *where, "--id", str(i), "--bucket", str(i % 4)]
            assert main(argv) == 0
        capsys.readouterr()
        assert main(["federated", "vdaf-collect", *where, "--json"]) == 0
        release = json.loads(capsys.readouterr().out)
        assert release["reports"] == 12 and release["rejected"] == 0
        assert release["buckets"] == [0, 1, 2, 3] and release["private"] is True
        # a second report from client-3 is refused (one report per certificate)
        argv = ["federated", "vdaf-client", *where, "--id", "3", "--bucket", "1"]
        assert main(argv) != 0
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


def test_vdaf_run_reports_rejections(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["federated", "vdaf-run", "--clients", "30", "--invalid", "3", "--seed", "4"]
    assert main([*argv, "--json"]) == 0
    release = json.loads(capsys.readouterr().out)
    assert release["reports"] == 27 and release["rejected"] == 3
    assert release["private"] is False and len(release["counts"]) == 10
