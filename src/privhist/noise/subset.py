"""Exact uniform subsets of ``0..n-1``, by distinct values of independent uniform draws."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from privhist.core.random import RandomSource

I64 = npt.NDArray[np.int64]


def uniform_subset(n: int, k: int, rng: RandomSource) -> I64:
    """A uniformly random ``k``-subset of ``0..n-1``, sorted (exact).

    The first ``k`` distinct values of a sequence of independent uniform draws form a uniform
    ``k``-subset (the sequence's law is invariant under relabelling); for ``k > n / 2`` the
    complement of a uniform ``(n - k)``-subset is used.
    """
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k >= n:
        return np.arange(n, dtype=np.int64)
    if 2 * k > n:
        out: I64 = np.setdiff1d(np.arange(n, dtype=np.int64), uniform_subset(n, n - k, rng))
        return out
    chosen = np.zeros(0, dtype=np.int64)
    while chosen.shape[0] < k:
        need = k - chosen.shape[0]
        fresh = rng.uniform_below(n, size=need + need // 2 + 16)
        seq = np.concatenate([chosen, fresh])
        _, first = np.unique(seq, return_index=True)
        chosen = seq[np.sort(first)][:k]
    return np.sort(chosen)
