"""The errors the tables report."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from privhist.experiments.federated_frequency.settings import F64
from privhist.federated.user_data import UserCounts


def l2_error(estimate: F64, users: UserCounts) -> float:
    """``||x_hat - x_bar||_2``: the distance of an estimate from the users' mean count vector."""
    return float(np.linalg.norm(estimate - users.mean_vector()))


def nearest_level_bins(prefix: npt.ArrayLike, n: int, levels: Sequence[float]) -> list[int]:
    """For each level ``gamma``, the bin ``v = 1..2**b`` whose prefix fraction ``c[1:v] / n`` is
    nearest ``gamma`` (the smallest on ties): Algorithm 5, step 3, on the prefix counts as
    decoded.

    Table 5 compares the histograms themselves, so the rule runs on the raw decoded prefix; a
    release (:func:`privhist.federated.dht.quantile_from_prefix`) first projects it onto a
    distribution function, post-processing that would hide the schemes' differences.

    >>> nearest_level_bins(np.array([1.0, 5.0, 9.0, 10.0]), 10, [0.5, 0.9])
    [2, 3]
    """
    p = np.asarray(prefix, dtype=np.float64)
    return [int(np.argmin(np.abs(p / n - g))) + 1 for g in levels]
