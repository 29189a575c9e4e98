"""``privhist.experiments.sample_threshold`` data and runner steps: the synthetic distributions and
their sampler (goodness of fit with power), the word histogram, the calibration, and the shared
sample drawn by the library's own sampling step, against what the mechanism releases."""

from __future__ import annotations

import math
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA as GOF_ALPHA

from privhist import SeededRandom, ValidationError
from privhist.core.data import Counts
from privhist.experiments import sample_threshold as st
from privhist.mechanisms.sampling import SampleAndThreshold
from privhist.mechanisms.sampling.sample_threshold import sample_units

REPO = Path(__file__).resolve().parents[2]


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
        sampled[eligible] = sample_units(truth[eligible], mech.sampling_rate, SeededRandom(seed))
        kept = np.flatnonzero(sampled >= mech.threshold)
        assert release.keys.tolist() == kept.tolist()
        assert release.values is not None
        assert release.values.tolist() == sampled[kept].tolist()


def test_sample_units_goodness_of_fit() -> None:
    # 20000 buckets of 30 clients each at rate 1/5: Binomial(30, 1/5) per bucket
    truth = np.full(20_000, 30, dtype=np.int64)
    s = sample_units(truth, Fraction(1, 5), SeededRandom(3))
    assert s.min() >= 0 and s.max() <= 30
    obs = _binned(np.bincount(s, minlength=31).astype(float))
    assert _chi2_pvalue(obs, _binned(stats.binom.pmf(np.arange(31), 30, 0.2))) > GOF_ALPHA
    # power: a rate 5% too high is rejected
    assert _chi2_pvalue(obs, _binned(stats.binom.pmf(np.arange(31), 30, 0.21))) < GOF_ALPHA


def _binned(cells: np.ndarray) -> np.ndarray:
    """Cells 0..13 and the tail lumped into a 15th (every expected count >= 5)."""
    return np.concatenate([cells[:14], [cells[14:].sum()]])
