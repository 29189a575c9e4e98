"""The per-key law of a sample-and-threshold release, now that keys below tau are not drawn.

A key held by ``u`` units is released with value ``k`` with probability
``Pr[Binomial(u, p) = k]`` for ``k >= tau`` and withheld otherwise; keys with ``u < tau`` are
withheld with certainty and their binomial is no longer drawn. Chi-square at alpha = 1e-6 over
one release of many keys per unit count, with a power check against a rate 4% off.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist import SeededRandom
from privhist.core.data import Counts
from privhist.mechanisms.sampling import SampleAndThreshold

COPIES = 20_000


def _release_by_units(
    units: list[int], seed: int
) -> tuple[SampleAndThreshold, dict[int, np.ndarray]]:
    mech = SampleAndThreshold(1.0, 1e-8)
    u = np.repeat(np.asarray(units, dtype=np.int64), COPIES)
    rel = mech.release(Counts.from_arrays(np.arange(u.size), u), SeededRandom(seed))
    assert rel.values is not None
    value = np.full(u.size, -1, dtype=np.int64)  # -1: withheld
    value[np.asarray(rel.keys, dtype=np.int64)] = rel.values
    return mech, {c: value[u == c] for c in units}


def _pvalue(x: np.ndarray, u: int, p: float, tau: int) -> float:
    ks = np.arange(tau, u + 1)
    probs = np.concatenate([[stats.binom.cdf(tau - 1, u, p)], stats.binom.pmf(ks, u, p)])
    observed = np.concatenate([[np.sum(x < 0)], np.bincount(x[x >= 0] - tau, minlength=ks.size)])
    return chi2_cells(observed, probs)


def test_release_law_per_unit_count() -> None:
    units = [3, 10, 11, 60, 100, 200, 5000]
    mech, by_units = _release_by_units(units, seed=21)
    p, tau = float(mech.sampling_rate), mech.threshold
    assert tau == 11
    for c in units:
        x = by_units[c]
        if c < tau:
            assert (x < 0).all()  # probability exactly 0
            continue
        assert ((x < 0) | (x >= tau)).all()
        if c >= 60:  # at 11 units the release probability (about p**11) is too small to test
            assert_fits(_pvalue(x, c, p, tau))
    # power: the same samples against a rate 4% off are rejected where the law is informative
    assert_rejects([_pvalue(by_units[c], c, p * 1.04, tau) for c in (200, 5000)])
