"""``privhist.experiments.sample_threshold.metrics``: the mean absolute error and the top-k recall
on hand-made inputs and against brute force; ``_common.mean_se`` against the standard library."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from privhist import SeededRandom, ValidationError
from privhist.experiments import _common
from privhist.experiments import sample_threshold as st

REPO = Path(__file__).resolve().parents[2]


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
