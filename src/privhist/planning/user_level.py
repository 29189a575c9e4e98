"""Reporting curves of the user-level mechanisms, for ``plan``: Pr[release] by users holding a key.

Each function builds nothing from data: it takes a mechanism constructed from (epsilon, delta)
and public bounds and returns, for ``n = 0..max_users``, the probability that a key held by ``n``
users is released. For the weighted selectors this depends on how many keys each holder keeps:
the curve assumes every holder keeps ``degree`` keys (weight ``floor(scale / sqrt(degree))``
each) and that the key's weight does not change between DP-SIPS rounds (in a real run it can
only grow, as holders' other keys are released and removed, so the curve is a lower bound for
DP-SIPS). For Gaussian thresholding on counts, ``n`` users add ``n`` to the count (``c = 1``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.validation import check_positive_int
from privhist.mechanisms.user_level import GaussianThresholdHistogram, WeightedSelector


def selector_curve(
    mechanism: WeightedSelector, max_users: int, *, degree: int = 1
) -> dict[str, Any]:
    """Pr[release] of a key held by ``n`` users, each keeping ``degree`` keys, all rounds.

    >>> from privhist.mechanisms.user_level import WeightedGaussianSelection
    >>> c = selector_curve(WeightedGaussianSelection(1.0, 1e-6), 60)
    >>> bool(c["probability"][0] < 1e-6 < 0.99 < c["probability"][60])
    True
    """
    fn = "selector_curve"
    if not isinstance(mechanism, WeightedSelector):
        raise ValidationError("mechanism", fn, "a WeightedSelector", type(mechanism).__name__)
    n_max = check_positive_int(max_users, fn, "max_users")
    d = check_positive_int(degree, fn, "degree")
    if d > mechanism.max_keys:
        d = mechanism.max_keys  # a holder keeps at most max_keys keys
    w = mechanism.weights[d - 1]
    n = np.arange(n_max + 1, dtype=np.int64)
    p = mechanism.ever_released(n * w)
    return {
        "mechanism": mechanism.name,
        "users": n,
        "probability": p,
        "degree": d,
        "users_at_half": _first(p, 0.5),
        "users_at_99": _first(p, 0.99),
    }


def gaussian_threshold_curve(
    mechanism: GaussianThresholdHistogram, max_users: int
) -> dict[str, Any]:
    """Pr[release] of a key held by ``n`` users (one record each) under Gaussian thresholding."""
    fn = "gaussian_threshold_curve"
    if not isinstance(mechanism, GaussianThresholdHistogram):
        raise ValidationError(
            "mechanism", fn, "a GaussianThresholdHistogram", type(mechanism).__name__
        )
    p = mechanism.reporting_probability(check_positive_int(max_users, fn, "max_users"))
    return {
        "mechanism": mechanism.name,
        "users": np.arange(p.shape[0], dtype=np.int64),
        "probability": p,
        "users_at_half": _first(p, 0.5),
        "users_at_99": _first(p, 0.99),
    }


def _first(p: npt.NDArray[np.float64], level: float) -> int | None:
    hit = np.flatnonzero(p >= level)
    return int(hit[0]) if hit.size else None


def curves_summary(curves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSON-friendly rows (mechanism, users at 50% and 99% release) for a plan report."""
    return [
        {
            "mechanism": c["mechanism"],
            "users_at_half": c["users_at_half"],
            "users_at_99": c["users_at_99"],
            "max_probability": float(np.max(c["probability"]))
            if len(c["probability"])
            else math.nan,
        }
        for c in curves
    ]
