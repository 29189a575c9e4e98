"""Public key domains shared by the dense mechanisms."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import ValidationError


def check_domain(domain: npt.ArrayLike | None, function: str) -> npt.NDArray[Any]:
    """The public domain as a sorted array of unique keys (validated)."""
    if domain is None:
        raise ValidationError("domain", function, "a public list of keys", None)
    dom = np.asarray(domain)
    if dom.ndim != 1 or dom.shape[0] == 0:
        raise ValidationError(
            "domain", function, "a non-empty one-dimensional list of keys", domain
        )
    return np.unique(dom)


def counts_on_domain(
    domain: npt.NDArray[Any], counts: Counts, function: str
) -> tuple[npt.NDArray[np.int64], int]:
    """The data's counts aligned with the sorted ``domain`` (0 where a key is absent) and the
    number of data keys outside the domain (a non-private diagnostic: those keys are dropped)."""
    try:
        pos = np.searchsorted(domain, counts.keys)
    except TypeError:
        raise ValidationError(
            "domain", function, "keys of the same type as the data", domain.dtype
        ) from None
    pos_c = np.minimum(pos, domain.shape[0] - 1)
    inside = (pos < domain.shape[0]) & (domain[pos_c] == counts.keys)
    true = np.zeros(domain.shape[0], dtype=np.int64)
    true[pos_c[inside]] = counts.counts[inside]
    return true, int((~inside).sum())
