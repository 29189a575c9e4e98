"""The count columns every user-level selector releases, and what they state.

A selector's optional second release adds discrete Gaussian noise to the number of users counted
on each released key (each user counted on a uniformly random subset of at most ``k_c`` of the
released keys it holds). The columns are post-processed the same way for every selector: a
released key is held by at least one user (keys absent from the input are never released), so
its count is clipped to at least 1, and the interval's ends with it. There is no ``estimate``
column: the count is the estimate. The metadata says what the count is and what the interval
covers (:func:`count_statement`): the counted users, which are all the holders when none of them
holds more than ``k_c`` released keys.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.noise import DiscreteGaussian


def clipped_count_columns(
    noisy: npt.NDArray[np.int64], sigma2: Fraction, confidence: float
) -> dict[str, Any]:
    """``values`` (noisy counts clipped to at least 1), ``lower`` and ``upper`` (``noisy -+ w``,
    ``w`` the exact discrete Gaussian ``confidence`` quantile, clipped the same way).

    >>> cols = clipped_count_columns(np.array([-9, 0, 50]), Fraction(4), 0.95)
    >>> cols["values"].tolist(), cols["lower"].tolist(), cols["upper"].tolist()
    ([1, 1, 50], [1, 1, 46], [1, 4, 54])
    """
    w = int(DiscreteGaussian(sigma2).interval(confidence)[1])
    return {
        "values": np.maximum(noisy, 1),
        "lower": np.maximum(noisy - w, 1),
        "upper": np.maximum(noisy + w, 1),
    }


def count_statement(count_max_keys: int, confidence: float) -> dict[str, Any]:
    """What the count columns of a user-level selector estimate and what the interval covers
    (the release's ``metadata["counts"]``)."""
    return {
        "count": (
            "noisy number of users holding the key, each user counted on at most "
            f"{count_max_keys} released keys (a uniformly random subset of the released keys "
            "it holds), clipped to at least 1"
        ),
        "interval": (
            f"lower..upper covers that counted number with probability at least {confidence} "
            "(exact discrete Gaussian quantiles); it covers the number of users holding the key "
            f"when none of them holds more than {count_max_keys} released keys, and otherwise "
            "the true number can exceed upper"
        ),
        "count_max_keys": count_max_keys,
    }
