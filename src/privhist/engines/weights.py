"""Weights per key: the answer of :class:`~privhist.core.requests.KeyWeights`, shared by every
engine so that all of them accept and refuse the same inputs.

A key's weight is its number of records, or the value of the weight column for it: a positive
integer frequency (:func:`privhist.mechanisms.sampling.pws.schemes.check_frequencies`); a key
repeated in aggregated input is refused unless the request asks to aggregate (then its weights
are summed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.requests import KeyWeights, Values
from privhist.core.text import counted
from privhist.mechanisms.sampling.pws.schemes import aggregated


def per_key_weights(
    keys: npt.NDArray[Any],
    weights: npt.NDArray[np.float64] | None,
    request: KeyWeights,
    function: str,
) -> Values:
    """Sorted distinct keys (text) with their weights (int64), from one key per record (None for
    a null key) and, with a weight column, one weight per record (NaN where the cell is empty
    or not a number, which is refused); exact input facts in ``facts`` (rows read)."""
    rows = int(keys.shape[0])
    k = np.asarray(keys, dtype=object)
    nulls = int(sum(v is None for v in k.tolist())) if rows else 0
    if nulls:
        raise InputDataError(f"{function}: {counted(nulls, 'row')} with a null key")
    k = k.astype(str)
    if weights is None:
        uniq, cnt = np.unique(k, return_counts=True)
        return Values(cnt.astype(np.int64), keys=uniq.astype(object), facts={"rows": rows})
    w = np.asarray(weights, dtype=np.float64)
    if np.isnan(w).any():
        raise ValidationError(
            "weight", function, "a column of positive integer frequencies", request.weight
        )
    kk, f = aggregated(k, w, function, aggregate=request.aggregate, name="weight")
    return Values(
        np.asarray(f, dtype=np.int64), keys=np.asarray(kk).astype(object), facts={"rows": rows}
    )
