"""Validation shared by the baselines: client items as bucket ids and the public domain size."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.constraints import Constraint
from privhist.core.errors import InputDataError

I64 = npt.NDArray[np.int64]

#: largest supported domain (the Hadamard decoder holds a few int64 arrays of this length)
MAX_DOMAIN = 1 << 26


#: what ``domain_size`` accepts
DOMAIN_SIZE = Constraint.integer(1, MAX_DOMAIN)


def check_items(items: Any, domain_size: int, function: str) -> I64:
    """Client items as a 1-d int64 array of bucket ids in ``[0, domain_size)``.

    Raises:
        InputDataError: The items are not a one-dimensional array of integers in range (the
            message names the first offending position).
    """
    arr = np.asarray(items)
    if arr.ndim != 1:
        raise InputDataError(
            f"items of {function} must be a one-dimensional array of bucket ids; "
            f"got shape {arr.shape}"
        )
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise InputDataError(
            f"items of {function} must be integer bucket ids; got dtype {arr.dtype}"
        )
    bad = (arr < 0) | (arr >= domain_size)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputDataError(
            f"items of {function} must be bucket ids in [0, {domain_size}); "
            f"got {arr[i]} at index {i}"
        )
    return arr.astype(np.int64, copy=False)


def histogram(items: I64, domain_size: int) -> I64:
    """Exact per-bucket counts of validated items."""
    return np.bincount(items, minlength=domain_size).astype(np.int64)
