"""``privhist experiment sample-threshold``: metrics on hand-made inputs, data generators, the
shared-sample path against the mechanism, and the ``--quick`` run end to end."""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from privhist import SeededRandom, ValidationError
from privhist.cli.main import main
from privhist.core.data import Counts
from privhist.experiments import _common
from privhist.experiments import sample_threshold as st
from privhist.mechanisms.sampling import SampleAndThreshold

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO.parent / "shared" / "papers" / "sample-and-threshold-dp-histograms.txt"
GOF_ALPHA = 1e-6


# -- metrics ------------------------------------------------------------------------------------


def test_mean_absolute_error_by_hand() -> None:
    est = [100.0, 0.0, 37.5, 12.0]
    truth = [90, 4, 40, 12]
    n = 1000
    by_hand = (10 + 4 + 2.5 + 0) / 4 / n
    assert st.mean_absolute_error(est, truth, n) == pytest.approx(by_hand, rel=1e-15)


def test_mean_absolute_error_of_zeros_is_one_over_b() -> None:
    truth = np.array([5, 0, 7, 8])
    assert st.mean_absolute_error(np.zeros(4), truth, 20) == pytest.approx(1 / 4)


@pytest.mark.parametrize(
    ("est", "truth", "n"),
    [([1.0], [1, 2], 3), ([], [], 1), ([1.0, 2.0], [1, 2], 0)],
)
def test_mean_absolute_error_rejects_bad_input(est: list[float], truth: list[int], n: int) -> None:
    with pytest.raises(ValidationError, match="of mean_absolute_error must be"):
        st.mean_absolute_error(est, truth, n)


def _recall_brute(
    est: list[float], truth: list[int], k: int, reported: list[bool] | None = None
) -> float:
    """Straight from the definition, with Python sorting and sets."""
    kk = min(k, sum(t > 0 for t in truth))
    cutoff = sorted(truth, reverse=True)[kk - 1]
    heavy = {i for i, t in enumerate(truth) if t >= cutoff}
    cands = [i for i in range(len(est)) if reported is None or reported[i]]
    chosen = sorted(cands, key=lambda i: (-est[i], i))[:kk]
    return len(heavy.intersection(chosen)) / kk


def test_top_k_recall_hand_cases() -> None:
    # true top-2 = {0, 1}; estimated top-2 = {0, 2}
    assert st.top_k_recall([9.0, 0.0, 7.0, 1.0], [10, 8, 6, 1], 2) == 0.5
    # perfect
    assert st.top_k_recall([1.0, 9.0, 8.0], [1, 9, 8], 2) == 1.0
    # a tie at the boundary: either tied bucket is a hit
    assert st.top_k_recall([0.0, 5.0, 6.0, 0.0], [9, 5, 5, 1], 2) == 1.0
    # only one bucket reported, k = 2: the missing one is a miss
    assert st.top_k_recall([9.0, 8.0, 0.0], [9, 8, 1], 2, reported=[True, False, False]) == 0.5
    # only two buckets hold anyone, so k = 3 becomes 2
    assert st.top_k_recall([9.0, 8.0, 7.0, 0.0], [9, 8, 0, 0], 3) == 1.0
    # an unreported bucket with a large estimate is never chosen
    assert st.top_k_recall([99.0, 8.0, 7.0], [1, 8, 7], 2, reported=[False, True, True]) == 1.0


def test_top_k_recall_matches_brute_force_on_random_inputs() -> None:
    rng = SeededRandom(5)
    for trial in range(200):
        b = 2 + trial % 30
        truth = (rng.uniform_below(6, b) * rng.uniform_below(3, b)).tolist()
        if not any(truth):
            truth[0] = 1
        est = (rng.uniform_below(20, b).astype(float) - 4).tolist()
        reported = (rng.uniform_below(3, b) > 0).tolist()
        k = 1 + trial % 7
        assert st.top_k_recall(est, truth, k) == _recall_brute(est, truth, k)
        assert st.top_k_recall(est, truth, k, reported) == _recall_brute(est, truth, k, reported)


@pytest.mark.parametrize(
    ("est", "truth", "k", "match"),
    [
        ([1.0], [1], 0, "parameter 'k'"),
        ([1.0], [0], 1, "parameter 'truth'"),
        ([1.0], [1, 2], 1, "of top_k_recall"),
    ],
)
def test_top_k_recall_rejects_bad_input(
    est: list[float], truth: list[int], k: int, match: str
) -> None:
    with pytest.raises(ValidationError, match=match):
        st.top_k_recall(est, truth, k)


def test_mean_se_against_statistics() -> None:
    xs = [0.3, 1.7, 2.2, 5.0, 4.1]
    mean, se = _common.mean_se(xs)
    assert mean == pytest.approx(statistics.fmean(xs), rel=1e-15)
    assert se == pytest.approx(statistics.stdev(xs) / math.sqrt(len(xs)), rel=1e-14)


# -- data ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [4, 16, 64])
def test_bucket_distributions_closed_forms(b: int) -> None:
    binom = [math.comb(b, i) for i in range(b)]
    total = sum(binom)
    assert st.bucket_distribution("binomial", b) == pytest.approx(
        [x / total for x in binom], rel=1e-12
    )
    p = 1 / math.sqrt(b)
    geo = [(1 - p) ** i * p for i in range(b)]
    assert st.bucket_distribution("geometric", b) == pytest.approx(
        [x / sum(geo) for x in geo], rel=1e-12
    )
    with pytest.raises(ValidationError, match="parameter 'dataset'"):
        st.bucket_distribution("uniform", b)


def _chi2_pvalue(counts: np.ndarray, pmf: np.ndarray) -> float:
    expected = pmf * counts.sum()
    return float(stats.chisquare(counts, expected).pvalue)


def test_sample_histogram_goodness_of_fit_and_power() -> None:
    pmf = st.bucket_distribution("geometric", 16)
    counts = st.sample_histogram(pmf, 200_000, SeededRandom(11))
    assert counts.sum() == 200_000
    assert _chi2_pvalue(counts, pmf) > GOF_ALPHA
    # power: the same draws are far from a slightly different geometric distribution
    wrong = np.array([(1 - 0.27) ** i * 0.27 for i in range(16)])
    assert _chi2_pvalue(counts, wrong / wrong.sum()) < GOF_ALPHA


def test_words_histogram_and_hash(tmp_path: Path) -> None:
    text = "The cat and THE dog.\nthe end, o'er and o'er\n"
    path = tmp_path / "t.txt"
    path.write_text(text)
    words = st.read_words(path)
    by_hand = Counter(re.findall(r"[a-z0-9']*[a-z0-9][a-z0-9']*", text.lower()))
    assert dict(zip(words.words, words.counts.tolist(), strict=True)) == dict(by_hand)
    assert words.tokens == sum(by_hand.values())
    for b in (2, 8):
        hist = words.histogram(b)
        expect = np.zeros(b, dtype=np.int64)
        for w, c in by_hand.items():
            expect[st.word_hash(w) % b] += c
        assert hist.tolist() == expect.tolist()


# -- calibration and the shared sample ----------------------------------------------------------


def test_calibration_against_the_papers_rule() -> None:
    c_alpha = math.log(6) - 1 / (1 + 1 / 6)  # Section 3.1: C_alpha = ln(1/alpha) - 1/(1+alpha)
    assert round(c_alpha, 3) == 0.935
    assert math.ceil(math.log(1e8) / c_alpha) == st.PAPER_THRESHOLD
    for eps in (0.1, 1.0):
        cal = st.calibrate(eps)
        assert float(cal.sampling_rate) == pytest.approx((1 - math.exp(-eps)) / 6, rel=1e-9)
        assert cal.threshold_paper == 20
        assert 1 <= cal.threshold_exact <= cal.threshold_paper
        assert cal.delta_exact <= 1e-8 and cal.delta_paper <= 1e-8


def test_shared_sample_path_draws_what_the_mechanism_releases() -> None:
    mech = SampleAndThreshold(0.5, 1e-6, sampling_rate=Fraction(1, 4))
    truth = np.array([0, 3, 50, 0, 200, 41, 7, 1000], dtype=np.int64)
    counts = Counts.from_arrays(np.arange(truth.size), truth)
    # the mechanism draws only keys with at least tau units (the others are released with
    # probability 0); the experiment samples every bucket, so compare on those keys
    eligible = truth >= mech.threshold
    assert eligible.sum() < np.count_nonzero(truth)  # some present keys are below tau
    for seed in range(5):
        release = mech.release(counts, SeededRandom(seed))
        sampled = np.zeros_like(truth)
        sampled[eligible] = st.poisson_sample(
            truth[eligible], mech.sampling_rate, SeededRandom(seed)
        )
        kept = np.flatnonzero(sampled >= mech.threshold)
        assert release.keys.tolist() == kept.tolist()
        assert release.values is not None
        assert release.values.tolist() == sampled[kept].tolist()


def test_poisson_sample_goodness_of_fit() -> None:
    # 20000 buckets of 30 clients each at rate 1/5: Binomial(30, 1/5) per bucket
    truth = np.full(20_000, 30, dtype=np.int64)
    s = st.poisson_sample(truth, Fraction(1, 5), SeededRandom(3))
    assert s.min() >= 0 and s.max() <= 30
    obs = _binned(np.bincount(s, minlength=31).astype(float))
    assert _chi2_pvalue(obs, _binned(stats.binom.pmf(np.arange(31), 30, 0.2))) > GOF_ALPHA
    # power: a rate 5% too high is rejected
    assert _chi2_pvalue(obs, _binned(stats.binom.pmf(np.arange(31), 30, 0.21))) < GOF_ALPHA


def _binned(cells: np.ndarray) -> np.ndarray:
    """Cells 0..13 and the tail lumped into a 15th (every expected count >= 5)."""
    return np.concatenate([cells[:14], [cells[14:].sum()]])


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
