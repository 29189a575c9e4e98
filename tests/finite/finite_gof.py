"""Chi-square goodness of fit against an exact pmf (alpha = 1e-6), for the finite-computer tests.

A model is a mapping ``output -> exact probability`` (Fractions) over a window of outputs; the mass
it leaves out (``1 - sum``) is one extra cell, "elsewhere". Consecutive outputs are merged until
every cell expects at least ``max(5, n / max_cells)`` samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 1e-6


def chi2_pvalue(samples: Any, model: Mapping[int, Fraction], *, max_cells: int = 80) -> float:
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
        # outputs the model gives (almost) no mass: fold into the last cell, a sure rejection
        # if they are frequent
        cells_o[-1] += outside
        cells_e[-1] += rest * n
    assert len(cells_e) >= 2, "a single cell cannot be tested"
    e = np.array(cells_e) * (n / sum(cells_e))
    return float(stats.chisquare(np.array(cells_o), e).pvalue)


def assert_fits(samples: Any, model: Mapping[int, Fraction]) -> None:
    p = chi2_pvalue(samples, model)
    assert p > ALPHA, f"goodness of fit rejected: p = {p:.3g}"


def assert_rejects(samples: Any, model: Mapping[int, Fraction]) -> None:
    """Power check: the same test must reject samples from a different distribution."""
    p = chi2_pvalue(samples, model)
    assert p < ALPHA, f"the test failed to reject a wrong distribution: p = {p:.3g}"
