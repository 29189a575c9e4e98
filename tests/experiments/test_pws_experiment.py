"""``privhist experiment pws``: the ``--quick`` run end to end, absent data, bad arguments."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from pws_reference import algorithm3

from privhist.cli.main import main
from privhist.experiments import pws as ex

# -- the command --------------------------------------------------------------------------------


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def test_quick_run_writes_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "baskets.dat").write_text("1 2 3\n2 3\n3\n3 4\n")  # item counts 1, 2, 4, 1
    (data / "words.txt").write_text("the cat and the hat and the bat\n")
    out = tmp_path / "out"
    code = main(
        [
            "experiment",
            "pws",
            "--quick",
            "--output-dir",
            str(out),
            "--retail",
            str(data / "baskets.dat"),
            "--shakespeare",
            str(data / "words.txt"),
        ]
    )
    assert code == 0
    for name, cols in ex.COLUMNS.items():
        header, rows = _read(out / name)
        assert header == list(cols), name
        assert rows, name
    for png in ("figure1", "figure2", "figure3", "figure4", "figure5", "figure6", "real_data"):
        assert (out / f"{png}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (out / "summary.md").read_text()
    assert "230% (alpha = 0.5), 97% (alpha = 1) and 37% (alpha = 2)" in summary
    assert "Quick run" in summary
    # real data: the baskets have 4 items with counts 1, 2, 4, 1
    _, rows = _read(out / "real_data.csv")
    retail = [r for r in rows if r["dataset"] == "retail"]
    assert {r["keys"] for r in retail} == {"4"}
    r0 = next(r for r in retail if r["tau"] == "" and float(r["delta"]) < 1)
    d = float(r0["delta"])
    pi = algorithm3([0.0] + [1.0] * 4, 0.1, d)
    assert float(r0["pws"]) == pytest.approx((2 * pi[1] + pi[2] + pi[4]) / 4, rel=1e-12)
    # Figure 2 at delta = 1: PWS reports every key
    _, f2 = _read(out / "figure2.csv")
    assert all(float(r["pws"]) == 1.0 for r in f2 if float(r["delta"]) == 1.0)
    assert "wrote" in capsys.readouterr().out


def test_absent_data_is_skipped_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # only the data part runs here: the other figures are replaced by nothing
    settings = ex.Settings(
        zipf_keys=10,
        figure2_deltas=(0.1,),
        figure4_taus=(1.0,),
        estimation_epsilons=(),
        bias_taus=(),
        variance_taus=(),
        nrmse_taus=(),
        retail=tmp_path / "no-such.dat",
        shakespeare=tmp_path / "no-such.txt",
        quick=True,
    )
    res = ex.run_experiment(settings)
    assert "real_data.csv" not in res.tables
    assert any("retail data" in n and "absent" in n for n in res.notes)
    assert any("shakespeare data" in n and "absent" in n for n in res.notes)


def test_bad_arguments_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["experiment", "pws", "--quick", "--zipf-keys", "3", "--output-dir", str(out)])
    assert code == 2
    assert "(--zipf-keys) of experiment pws must be an integer in [10, 10**7]" in (
        capsys.readouterr().err
    )
    assert not out.exists()
