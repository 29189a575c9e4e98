"""The selection-adjusted intervals of sample-and-threshold against their definitions.

``selection_adjusted_interval`` searches from a normal-approximation guess; these tests check that
its bounds are the ones the definitions give (module notes of
:mod:`privhist.mechanisms.sampling.accuracy`), by a linear scan of scipy's binomial tails over every
candidate count, and at the boundaries for counts far too large to scan.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privhist.mechanisms.sampling import accuracy


def _scan(y: int, p: float, tau: int, half: float) -> tuple[int, int]:
    """Lower and upper bounds by scanning every n from y (scipy tails, no shortcuts)."""
    n = np.arange(y, int(4 * (y + 30) / p) + 200)
    den = stats.binom.sf(tau - 1, n, p)
    g = np.minimum(stats.binom.sf(y - 1, n, p) / den, 1.0)
    h = np.minimum(np.maximum(den - stats.binom.sf(y, n, p), 0.0) / den, 1.0)
    lower = int(n[np.argmax(g > half)])
    assert (h <= half).any(), "scan range too short"
    upper = int(n[np.argmax(h <= half)]) - 1
    return lower, upper


@pytest.mark.parametrize(
    ("p", "tau", "confidence"),
    [(0.105, 11, 0.95), (0.5, 3, 0.9), (0.02, 25, 0.99), (0.3, 1, 0.95)],
)
def test_bounds_equal_a_linear_scan(p: float, tau: int, confidence: float) -> None:
    ys = [*range(tau, tau + 40), tau + 97, tau + 250]
    lo, hi = accuracy.selection_adjusted_interval(ys, p, tau, confidence)
    half = (1 - confidence) / 2
    for y, a, b in zip(ys, lo.tolist(), hi.tolist(), strict=True):
        assert (a, b) == _scan(y, p, tau, half), y


def test_bounds_of_large_counts_meet_the_definition_at_both_sides() -> None:
    p, tau, half = 0.105, 11, 0.025
    ys = [12, 3_000, 81_234, 822_000, 5_000_001]
    lo, hi = accuracy.selection_adjusted_interval(ys, p, tau, 0.95)
    for y, a, b in zip(ys, lo.tolist(), hi.tolist(), strict=True):
        den = stats.binom.sf(tau - 1, [a - 1, a, b, b + 1], p)
        g = stats.binom.sf(y - 1, [a - 1, a], p) / den[:2]
        h = 1 - stats.binom.sf(y, [b, b + 1], p) / den[2:]
        assert g[1] > half and (a == y or g[0] <= half)
        assert h[0] > half >= h[1]


def test_repeated_and_unsorted_values_map_back() -> None:
    lo, hi = accuracy.selection_adjusted_interval([40, 12, 40, 500], 0.1, 10, 0.95)
    lo1, hi1 = accuracy.selection_adjusted_interval([12, 40, 500], 0.1, 10, 0.95)
    assert lo.tolist() == [lo1[1], lo1[0], lo1[1], lo1[2]]
    assert hi.tolist() == [hi1[1], hi1[0], hi1[1], hi1[2]]


def test_settling_at_the_guess_changes_no_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # the one-evaluation shortcut at the guess gives the bounds of the full search, here over
    # thousands of values and several (p, tau, confidence), including n beyond the shortcut's
    # range; the shortcut settles most of those within its range (else this checks nothing)
    rng = np.random.default_rng(4)
    settled = []
    real = accuracy._settle_at_guess

    def counting(*args: object, **kwargs: object) -> object:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        settled.append((int(np.sum(out[0] >= 0)), out[0].size))
        return out

    for p, tau, confidence in [(0.10535, 11, 0.95), (0.02, 25, 0.99), (0.9, 5, 0.8)]:
        top = int(0.9e7 * p)  # n up to about 1e7, the shortcut's range
        ys = np.unique(np.concatenate([np.arange(tau, tau + 200), rng.integers(tau, top, 1500)]))
        ys = np.concatenate([ys, rng.integers(2 * top, 5 * top, 50)])  # and beyond it
        monkeypatch.setattr(accuracy, "_settle_at_guess", counting)
        accuracy._near_threshold.cache_clear()  # the table of values near tau too
        fast = accuracy.selection_adjusted_interval(ys, p, tau, confidence)
        monkeypatch.setattr(
            accuracy, "_settle_at_guess", lambda y, g, *a, **k: (np.full_like(g, -1), g)
        )
        accuracy._near_threshold.cache_clear()
        full = accuracy.selection_adjusted_interval(ys, p, tau, confidence)
        accuracy._near_threshold.cache_clear()
        assert (fast[0] == full[0]).all() and (fast[1] == full[1]).all(), (p, tau)
    assert sum(a for a, _ in settled) > 0.8 * sum(b for _, b in settled)


def test_values_near_the_threshold_come_from_the_searched_table() -> None:
    # the table is the search's result for tau .. tau + NEAR_VALUES - 1, whatever else is asked
    p, tau = 0.105, 11
    accuracy._near_threshold.cache_clear()
    ys = np.arange(tau, tau + accuracy.NEAR_VALUES + 5)
    together = accuracy.selection_adjusted_interval(ys, p, tau, 0.95)
    for y in (tau, tau + 1, tau + accuracy.NEAR_VALUES - 1, tau + accuracy.NEAR_VALUES):
        i = int(y - tau)
        assert (together[0][i], together[1][i]) == _scan(int(y), p, tau, 0.025), y


def test_counts_beyond_two_to_the_31_get_intervals() -> None:
    # scipy's bdtr/bdtrc return NaN once n reaches 2**31 (a C int); the tails there come from
    # the incomplete beta function, so keys with billions of units still get their intervals
    p, tau = 0.10535, 11
    ys = [10**8, 3 * 10**8, 10**9, 10**12]
    lo, hi = accuracy.selection_adjusted_interval(ys, p, tau, 0.95)
    for y, a, b in zip(ys, lo.tolist(), hi.tolist(), strict=True):
        sd = (y * (1 - p)) ** 0.5 / p
        assert a < y / p < b and b - a < 5 * sd, y
        # the definitions at both ends, by the incomplete beta function directly
        g = stats.beta.cdf(p, y, np.array([a - 1, a]) - y + 1)  # Pr_n[Y >= y] at n = a - 1, a
        assert g[1] > 0.025 >= g[0]
