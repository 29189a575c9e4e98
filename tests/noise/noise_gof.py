"""Goodness-of-fit helpers for the sampler tests (chi-square with pooled cells, alpha = 1e-6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from privhist.core.random import RandomSource

ALPHA = 1e-6


def chi2_integer(samples: Any, model: Any, lo: int, hi: int, *, max_cells: int = 100) -> float:
    """Chi-square p-value of integer ``samples`` against ``model`` on ``[lo, hi]``.

    ``model`` has ``pmf(array)``, ``cdf(int)`` and ``sf(int)``. Mass below ``lo`` is pooled
    into the first cell and mass above ``hi`` into the last; adjacent integers are merged left
    to right until each cell expects at least ``max(5, n / max_cells)`` samples.
    """
    x = np.asarray(samples).ravel()
    if hi - lo >= 200_000:
        return _chi2_coarse(x, model, lo, hi, max_cells)
    ks = np.arange(lo, hi + 1)
    probs = np.asarray(model.pmf(ks), dtype=np.float64).copy()
    probs[0] += float(model.cdf(lo - 1))
    probs[-1] += float(model.sf(hi + 1))
    observed = np.bincount(np.clip(x, lo, hi) - lo, minlength=ks.size).astype(np.float64)
    return chi2_cells(observed, probs, max_cells=max_cells)


def _chi2_coarse(x: Any, model: Any, lo: int, hi: int, max_cells: int) -> float:
    """Cells of about equal width over [lo, hi], probabilities from cdf differences."""
    edges = np.unique(np.linspace(lo, hi + 1, 4 * max_cells + 1).astype(np.int64))
    cdf = np.array([float(model.cdf(int(e) - 1)) for e in edges])  # P[Z < e]
    probs = np.diff(cdf)
    probs[0] += cdf[0]
    probs[-1] += 1.0 - cdf[-1]
    observed = np.bincount(
        np.searchsorted(edges, np.clip(x, lo, hi), side="right") - 1, minlength=probs.size
    ).astype(np.float64)
    return chi2_cells(observed, probs, max_cells=max_cells)


def chi2_cells(observed: Any, probs: Any, *, max_cells: int = 100) -> float:
    """Chi-square p-value after merging consecutive cells to expected counts >= 5."""
    observed = np.asarray(observed, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    n = observed.sum()
    expected = probs / probs.sum() * n
    target = max(5.0, n / max_cells)
    cut = []
    acc = 0.0
    for i, e in enumerate(expected):
        acc += e
        if acc >= target:
            cut.append(i + 1)
            acc = 0.0
    if not cut or cut[-1] != expected.size:
        if cut:
            cut[-1] = expected.size  # merge the small remainder into the last cell
        else:
            cut = [expected.size]
    if len(cut) == 1:
        # the model puts nearly all its mass in one pooled tail: split at the median instead
        half = int(np.searchsorted(np.cumsum(expected), n / 2)) + 1
        cut = [min(max(half, 1), expected.size - 1), expected.size]
    starts = np.array([0, *cut[:-1]])
    obs_c = np.add.reduceat(observed, starts)
    exp_c = np.add.reduceat(expected, starts)
    assert exp_c.min() >= 5, "not enough samples for a chi-square test"
    assert obs_c.size >= 2, "a single cell cannot be tested"
    return float(stats.chisquare(obs_c, exp_c).pvalue)


def chi2_bernoulli(samples: Any, p: float) -> float:
    """Chi-square p-value of boolean samples against Bernoulli(p)."""
    x = np.asarray(samples).ravel()
    k = int(x.sum())
    return chi2_cells([x.size - k, k], [1 - p, p], max_cells=x.size)


def assert_fits(pvalue: float) -> None:
    assert pvalue >= ALPHA, f"goodness of fit rejected: p = {pvalue:.3g}"


def assert_rejects(pvalues: Sequence[float]) -> None:
    for p in pvalues:
        assert p < ALPHA, f"power check failed: a wrong model was not rejected (p = {p:.3g})"


class ScriptedRandom(RandomSource):
    """Returns the given words in order (then fails): to force rare paths deterministically."""

    def __init__(self, words: Sequence[int]) -> None:
        self.words = [int(w) for w in words]
        self.used = 0

    def uint64(self, n: int) -> Any:
        if self.used + n > len(self.words):
            raise AssertionError(f"asked for more than the {len(self.words)} scripted words")
        out = np.array(self.words[self.used : self.used + n], dtype=np.uint64)
        self.used += n
        return out

    @property
    def description(self) -> str:
        return "scripted words (tests only)"
