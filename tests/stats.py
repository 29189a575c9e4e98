"""Goodness-of-fit tests for the sampler and mechanism tests: one significance level and one
chi-square with pooled cells.

Every law test rejects at :data:`ALPHA` = 1e-6 and comes with a power check: the same test must
reject samples (or a model) that are wrong by a little. The helpers:

* :func:`chi2_cells`: observed counts per cell against cell probabilities; consecutive cells
  are merged left to right until each expects at least ``max(5, n / max_cells)`` samples
  (``max_cells=None``: at least 5).
* :func:`chi2_integer`: integer samples against a model with ``pmf``, ``cdf`` and ``sf``
  (tails pooled into the end cells).
* :func:`chi2_bernoulli`: boolean samples against Bernoulli(p).
* :func:`chi2_exact`: integer samples against an exact pmf (``output -> Fraction``) over a
  window, the mass outside the window one extra cell.
* :func:`assert_fits` and :func:`assert_rejects` turn p-values into verdicts at :data:`ALPHA`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import stats

#: the significance level of every goodness-of-fit test
ALPHA = 1e-6


def chi2_cells(observed: Any, probs: Any, *, max_cells: int | None = 100) -> float:
    """Chi-square p-value after merging consecutive cells to expected counts of at least
    ``max(5, n / max_cells)`` (5 when ``max_cells`` is None); a remainder joins the last cell."""
    observed = np.asarray(observed, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    n = observed.sum()
    expected = probs / probs.sum() * n
    target = 5.0 if max_cells is None else max(5.0, n / max_cells)
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


def chi2_bernoulli(samples: Any, p: float) -> float:
    """Chi-square p-value of boolean samples against Bernoulli(p)."""
    x = np.asarray(samples).ravel()
    k = int(x.sum())
    return chi2_cells([x.size - k, k], [1 - p, p], max_cells=x.size)


def chi2_exact(samples: Any, model: Mapping[int, Fraction], *, max_cells: int = 80) -> float:
    """Chi-square p-value of integer ``samples`` against an exact pmf over a window of outputs.

    ``model`` maps each output of the window to its exact probability; the mass it leaves out
    (``1 - sum``) is one extra cell, "elsewhere". Consecutive outputs are merged until every
    cell expects at least ``max(5, n / max_cells)`` samples; samples outside the window where
    the model leaves (almost) no mass fold into the last cell, a sure rejection if frequent.
    """
    x = np.asarray(samples, dtype=np.int64).ravel()
    n = x.size
    support = sorted(model)
    probs = [float(model[k]) for k in support]
    rest = float(1 - sum(model.values(), start=Fraction(0)))
    lo, hi = support[0], support[-1]
    inside = (x >= lo) & (x <= hi)
    counts = np.bincount(x[inside] - lo, minlength=hi - lo + 1)
    observed = [float(counts[k - lo]) for k in support]
    target = max(5.0, n / max_cells)
    cells_o: list[float] = []
    cells_e: list[float] = []
    acc_o = acc_e = 0.0
    for o, p in zip(observed, probs, strict=True):
        acc_o += o
        acc_e += p * n
        if acc_e >= target:
            cells_o.append(acc_o)
            cells_e.append(acc_e)
            acc_o = acc_e = 0.0
    if cells_e:
        cells_o[-1] += acc_o
        cells_e[-1] += acc_e
    else:
        cells_o, cells_e = [acc_o], [acc_e]
    outside = float(n - inside.sum())
    if rest * n >= 5:
        cells_o.append(outside)
        cells_e.append(rest * n)
    elif outside > 0:
        cells_o[-1] += outside
        cells_e[-1] += rest * n
    assert len(cells_e) >= 2, "a single cell cannot be tested"
    e = np.array(cells_e) * (n / sum(cells_e))
    return float(stats.chisquare(np.array(cells_o), e).pvalue)


def assert_fits(pvalue: float) -> None:
    """The law test accepts: ``pvalue >= ALPHA``."""
    assert pvalue >= ALPHA, f"goodness of fit rejected: p = {pvalue:.3g}"


def assert_rejects(pvalues: float | Sequence[float]) -> None:
    """The power check: the test rejects every wrong model (``p < ALPHA``)."""
    for p in [pvalues] if isinstance(pvalues, float | int) else pvalues:
        assert p < ALPHA, f"power check failed: a wrong model was not rejected (p = {p:.3g})"
