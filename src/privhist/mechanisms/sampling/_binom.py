"""Vectorised float64 binomial tails and pmf for *analysis* (searches, plans, intervals).

Nothing here is on the privacy path: calibrations found with these floats are re-verified in
interval arithmetic (:func:`privhist.mechanisms.sampling.profile.certified_delta`) before a
mechanism uses them. SciPy (a dependency of ``dp-accounting``) is imported lazily so that
importing :mod:`privhist.mechanisms` stays fast.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

#: scipy's bdtr/bdtrc take ``n`` as a C int; from here on the tails come from the regularised
#: incomplete beta function directly (``Pr[Y > k] = I_p(k + 1, n - k)``)
_BDTR_MAX_N = 1 << 31


def _arrays(k: Any, n: Any) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    kk, nn = np.broadcast_arrays(np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64))
    return kk, nn


def sf(k: Any, n: Any, p: float) -> F64:
    """``Pr[Binomial(n, p) > k]`` elementwise (1 for ``k < 0``, 0 for ``k >= n``)."""
    from scipy import special

    kk, nn = _arrays(k, n)
    out = np.zeros(kk.shape, dtype=np.float64)
    out[kk < 0] = 1.0
    mid = (kk >= 0) & (kk < nn)
    if mid.any():
        out[mid] = special.bdtrc(kk[mid], nn[mid], p)
        big = mid & (nn >= _BDTR_MAX_N)  # bdtrc's n is a C int: NaN from 2**31 on
        if big.any():
            out[big] = special.betainc(kk[big] + 1.0, (nn[big] - kk[big]).astype(np.float64), p)
    return out


def cdf(k: Any, n: Any, p: float) -> F64:
    """``Pr[Binomial(n, p) <= k]`` elementwise (0 for ``k < 0``, 1 for ``k >= n``)."""
    from scipy import special

    kk, nn = _arrays(k, n)
    out = np.ones(kk.shape, dtype=np.float64)
    out[kk < 0] = 0.0
    mid = (kk >= 0) & (kk < nn)
    if mid.any():
        out[mid] = special.bdtr(kk[mid], nn[mid], p)
        big = mid & (nn >= _BDTR_MAX_N)
        if big.any():
            n_k = (nn[big] - kk[big]).astype(np.float64)
            out[big] = special.betainc(n_k, kk[big] + 1.0, 1.0 - p)
    return out


def logpmf(k: Any, n: Any, p: float) -> F64:
    """``log Pr[Binomial(n, p) = k]`` elementwise (``-inf`` outside ``0..n``)."""
    from scipy import special

    kk, nn = _arrays(k, n)
    out = np.full(kk.shape, -np.inf, dtype=np.float64)
    ok = (kk >= 0) & (kk <= nn)
    if ok.any():
        k1, n1 = kk[ok].astype(np.float64), nn[ok].astype(np.float64)
        out[ok] = (
            special.gammaln(n1 + 1)
            - special.gammaln(k1 + 1)
            - special.gammaln(n1 - k1 + 1)
            + special.xlogy(k1, p)
            + special.xlog1py(n1 - k1, -p)
        )
    return out


def pmf(k: Any, n: Any, p: float) -> F64:
    """``Pr[Binomial(n, p) = k]`` elementwise."""
    return np.exp(logpmf(k, n, p))
