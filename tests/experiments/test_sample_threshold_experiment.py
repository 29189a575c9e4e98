"""``privhist experiment sample-threshold``: the ``--quick`` run end to end, its files and
summary (the paper's claims), bad flags, and the heavy hitters on a tiny text."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from privhist.cli.main import main
from privhist.experiments import sample_threshold as st

REPO = Path(__file__).resolve().parents[2]

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO.parent / "shared" / "papers" / "sample-and-threshold-dp-histograms.txt"

# -- the command --------------------------------------------------------------------------------


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, bool]:
    out = tmp_path_factory.mktemp("st") / "out"
    shakespeare = REPO.parent / "shared" / "data" / st.SHAKESPEARE_FILE
    code = main(
        [
            "experiment",
            "sample-threshold",
            "--quick",
            "--seed",
            "3",
            "--output-dir",
            str(out),
            "--shakespeare",
            str(shakespeare),
        ]
    )
    return out, code, shakespeare.is_file()


def test_quick_run_writes_every_file(quick_run: tuple[Path, int, bool]) -> None:
    out, code, _ = quick_run
    assert code == 0
    for name in ("results.csv", "thresholds.csv", "figure1.png", "figure2.png", "summary.md"):
        assert (out / name).is_file(), name
    for png in ("figure1.png", "figure2.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_quick_run_results_are_sane(quick_run: tuple[Path, int, bool]) -> None:
    out, _, has_words = quick_run
    rows = _read(out / "results.csv")
    assert list(rows[0]) == list(st.COLUMNS)
    datasets = {r["dataset"] for r in rows}
    assert datasets == (
        {"binomial", "geometric", "shakespeare"} if has_words else {"binomial", "geometric"}
    )
    assert {int(r["buckets"]) for r in rows} == {2**6, 2**8, 2**10}
    assert {float(r["epsilon"]) for r in rows} == {0.1, 0.5, 1.0}
    assert {"st-paper", "st-exact"} <= {r["mechanism"] for r in rows}
    for r in rows:
        assert 0.0 <= float(r["recall_mean"]) <= 1.0
        assert float(r["mae_mean"]) >= 0.0 and float(r["mae_se"]) >= 0.0
        assert r["reps"] == "2"
        b = int(r["buckets"])
        assert int(r["k"]) == b // 10
        # reporting 0 everywhere errs by mean(count) / n = 1 / B: independent of the code
        assert float(r["zero_mae"]) == pytest.approx(1 / b, rel=1e-12)
        if r["mechanism"].startswith("st-"):
            assert float(r["sampling_rate"]) == pytest.approx(
                (1 - math.exp(-float(r["epsilon"]))) / 6, rel=1e-9
            )
            assert 0.0 <= float(r["released_fraction_mean"]) <= 1.0
            # the mechanism adds no noise: its error is at most reporting 0 plus sampling error,
            # and below the all-zero answer for the synthetic data at this size
            if r["dataset"] != "shakespeare":
                assert float(r["mae_mean"]) < float(r["zero_mae"])
        if r["mechanism"] == "st-paper":
            assert r["threshold"] == "20"


def test_quick_run_error_falls_with_epsilon(quick_run: tuple[Path, int, bool]) -> None:
    out, _, _ = quick_run
    rows = _read(out / "results.csv")
    for mech in ("st-paper", "st-exact"):
        by_eps = {
            e: np.mean(
                [
                    float(r["mae_mean"]) * int(r["buckets"])  # comparable across B
                    for r in rows
                    if r["mechanism"] == mech and float(r["epsilon"]) == e
                ]
            )
            for e in (0.1, 0.5, 1.0)
        }
        assert by_eps[0.1] > by_eps[0.5] > by_eps[1.0], (mech, by_eps)


def test_quick_run_thresholds_and_summary(quick_run: tuple[Path, int, bool]) -> None:
    out, _, _ = quick_run
    th = _read(out / "thresholds.csv")
    assert list(th[0]) == list(st.THRESHOLD_COLUMNS)
    assert [float(r["epsilon"]) for r in th] == [0.1, 0.5, 1.0]
    for r in th:
        assert r["threshold_paper"] == "20"
        assert int(r["threshold_exact"]) <= int(r["threshold_theorem1"]) <= 20
        assert float(r["delta_exact_exact"]) <= 1e-8
    summary = (out / "summary.md").read_text()
    verdicts = re.findall(r"^\*\*(.+?)\.\*\*", summary, flags=re.M)
    assert len(verdicts) >= 8
    allowed = {"agrees", "partly agrees", "disagrees", "not checked"}
    assert {v.split(" (")[0] for v in verdicts} <= allowed
    assert summary.count("\n> ") == len(verdicts)


_MATH = re.compile(r"epsilon|alpha|delta|tau|\d|\(|\)|=|\^")


@pytest.mark.skipif(not PAPER.is_file(), reason="the paper's text is not present")
def test_quoted_claims_are_the_papers_words(quick_run: tuple[Path, int, bool]) -> None:
    """Every run of five or more plain words in a quoted claim appears verbatim in the paper
    (the paper's text renders symbols as LaTeX, so words with symbols split the runs)."""
    paper = " ".join(PAPER.read_text(encoding="utf-8").split())
    out, _, _ = quick_run
    quotes = re.findall(r"^> (.+)$", (out / "summary.md").read_text(), flags=re.M)
    checked = 0
    for q in quotes:
        for piece in q.split("[...]"):
            run: list[str] = []
            for word in [*piece.split(), "="]:
                if _MATH.search(word):
                    if len(run) >= 5:
                        assert " ".join(run) in paper, " ".join(run)
                        checked += 1
                    run = []
                else:
                    run.append(word)
    assert checked >= 10


def test_missing_shakespeare_is_skipped_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(
        [
            "experiment",
            "sample-threshold",
            "--quick",
            "--reps",
            "2",
            "--population",
            "20000",
            "--output-dir",
            str(out),
            "--shakespeare",
            str(tmp_path / "absent.txt.gz"),
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "absent" in err and "skipped" in err
    assert {r["dataset"] for r in _read(out / "results.csv")} == {"binomial", "geometric"}
    assert "Shakespeare skipped" in (out / "summary.md").read_text()


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["--reps", "1"], "parameter 'reps'"),
        (["--population", "5"], "parameter 'population'"),
        (["--seed", "-1"], "parameter 'seed'"),
        (["--workers", "0"], "parameter 'workers'"),
    ],
)
def test_bad_flags_fail_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], match: str
) -> None:
    out = tmp_path / "out"
    code = main(["experiment", "sample-threshold", "--quick", "--output-dir", str(out), *flags])
    assert code == 2
    assert match in capsys.readouterr().err
    assert not out.exists()


def test_output_dir_that_is_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "file"
    target.write_text("keep")
    code = main(["experiment", "sample-threshold", "--quick", "--output-dir", str(target)])
    assert code == 2
    assert "parameter 'output_dir'" in capsys.readouterr().err
    assert target.read_text() == "keep"


def test_heavy_hitters_find_the_three_common_words() -> None:
    # the scenario: every client holds hello, hey or hi; two rare words must not appear
    words = st.Words(
        ("hello", "hey", "hi", "zebra", "quartz"),
        np.array([30_000, 30_000, 30_000, 2, 1], dtype=np.int64),
        np.zeros(5, dtype=np.uint64),
    )
    rows = st.heavy_hitter_recall(
        words, st.Settings(reps=2), epsilon=4.0, levels=6, top=(3, 5), level_epsilon=0.6
    )
    assert [list(r) for r in rows] == [list(st.HH_COLUMNS)] * len(rows)
    by = {(r["method"], r["k"]): r for r in rows}
    assert set(by) == {("triehh++", 3), ("triehh++", 5), ("one-shot", 3), ("one-shot", 5)}
    for method in ("triehh++", "one-shot"):
        assert by[method, 3]["recall_mean"] == 1.0
        assert by[method, 3]["items_found_mean"] == 3.0
        assert by[method, 5]["recall_mean"] == pytest.approx(3 / 5)
    assert by["triehh++", 3]["guarantee_epsilon"] <= 4.0
