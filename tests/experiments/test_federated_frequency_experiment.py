"""``privhist experiment federated-frequency --quick``: files, tables beside the paper, checks."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from privhist.experiments import federated_frequency as ff


def test_quick_run_writes_every_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "privhist",
        "experiment",
        "federated-frequency",
        "--quick",
        "--output-dir",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    names = {p.name for p in out.iterdir()}
    assert {
        "table1.csv",
        "table2.csv",
        "table3.csv",
        "table5.csv",
        "figure3.csv",
        "figure3.png",
        "table2.png",
        "summary.md",
    } <= names
    summary = (out / "summary.md").read_text()
    assert "Quick run" in summary and "Foursquare" in summary and "non-privately" in summary
    assert "oracle thresholds C* (Table 1, Figure 3) and Best C* (Tables 2, 3)" in summary
    with open(out / "table2.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["method"] for r in rows} == set(ff.T2_METHODS)
    with open(out / "table3.csv") as fh:
        assert {r["method"] for r in csv.DictReader(fh)} == set(ff.T3_METHODS)
    assert "OcPBM (C1 = 1)" in ff.T3_METHODS
    # TFFE's epsilon is the composed accounting of its two phases
    from privhist.federated.ffe import tffe_rdp

    first = rows[0]
    expected = tffe_rdp(int(first["n"]), 0.2, 30, int(first["D"]), 3, 6).epsilon(1e-4)
    assert float(first["epsilon"]) == pytest.approx(expected)
    with open(out / "figure3.csv") as fh:
        fig = list(csv.DictReader(fh))
    assert all(float(r["true_error"]) <= float(r["bound"]) for r in fig)


def test_msweb_reader(tmp_path: Path) -> None:
    path = tmp_path / "msweb.data"
    path.write_text(
        'A,1000,1,"a","/a"\nC,"1",1\nV,1000,1\nV,1001,1\nC,"2",2\nV,1001,1\nC,"3",3\nV,1002,1\n'
    )
    users = ff.read_msweb(path, 2)
    # areas 1001 (2 visits) and 1000 (1, tie with 1002 broken by id) are kept; user 3 drops out
    assert users.labels.tolist() == [1000, 1001]
    assert users.dense().tolist() == [[1.0, 1.0], [0.0, 1.0]]


def test_bad_output_dir_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    cmd = [
        sys.executable,
        "-m",
        "privhist",
        "experiment",
        "federated-frequency",
        "--quick",
        "--output-dir",
        str(target),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 2 and "output_dir" in done.stderr
    assert target.read_text() == "x"


def test_real_data_default_to_shared_data_beside_the_working_directory(tmp_path: Path) -> None:
    """Like the other experiments, the default ``--data-dir`` is ``../shared/data`` from where
    the command runs (it was one machine's absolute path)."""
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "anonymous-msweb.data").write_text("")
    (tmp_path / "run").mkdir()
    code = "from privhist.experiments.federated_frequency.settings import DATA; print(DATA)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path / "run",
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert Path(done.stdout.strip()) == Path("..") / "shared" / "data"
