"""What every quantile method returns, and the checks of its inputs: answers with their
resolution and plug-in rank errors (:class:`QuantileAnswer`, :class:`QuantileResult`), the levels
and values a run accepts. Shared by :mod:`privhist.analytics.quantiles` and
:mod:`privhist.analytics.quantiles_cohort`."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.analytics.hierarchy import Hierarchy
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import check_probability


def check_levels(qs: Any, function: str) -> list[float]:
    """Quantile levels as floats, each in [0, 1], at least one."""
    if isinstance(qs, numbers.Real) and not isinstance(qs, bool):
        qs = [qs]
    try:
        items = list(qs)
    except TypeError:
        raise ValidationError("q", function, "quantile levels in [0, 1]", qs) from None
    if not items:
        raise ValidationError("q", function, "at least one quantile level in [0, 1]", "[]")
    return [check_probability(q, function, "q") for q in items]


@dataclass(frozen=True)
class QuantileAnswer:
    """One quantile: ``value`` with ``lower <= value``, ``value - lower`` the resolution (a
    leaf, or the last search interval); rank errors are plug-in fractions (module notes)."""

    q: float
    value: float
    lower: float
    upper: float
    pruning_rank_error: float
    sampling_rank_error: float
    withheld: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "q": self.q,
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "pruning_rank_error": self.pruning_rank_error,
            "sampling_rank_error": self.sampling_rank_error,
            "withheld": self.withheld,
        }


@dataclass(frozen=True)
class QuantileResult:
    """Answers, the public metadata (method, parameters, guarantee with both compositions) and
    exact input facts (``diagnostics``: NOT private, not part of the release)."""

    answers: list[QuantileAnswer]
    metadata: dict[str, Any]
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "quantiles": [a.to_dict() for a in self.answers],
            **self.metadata,
        }


def sampling_error(confidence: float, sampled: float) -> float:
    if sampled <= 0:
        return 1.0
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return min(1.0, z * 0.5 / math.sqrt(sampled))


def run_inputs(
    budgeted: int,
    geometry: Hierarchy,
    values: npt.ArrayLike,
    qs: Any,
    rng: RandomSource | None,
    clamp: bool,
    fn: str,
) -> tuple[list[float], RandomSource, npt.NDArray[np.float64], dict[str, Any]]:
    """The checked inputs of a binary-search run: exactly ``budgeted`` levels, a
    :class:`RandomSource` (secure by default) and the values with their input facts."""
    levels = check_levels(qs, fn)
    if len(levels) != budgeted:
        raise ValidationError("q", fn, f"{budgeted} quantile level(s), as budgeted", len(levels))
    if rng is None:
        rng = SecureRandom()
    if not isinstance(rng, RandomSource):
        raise ValidationError("rng", fn, "a RandomSource", type(rng).__name__)
    x, facts = checked_values(geometry, values, clamp, fn)
    return levels, rng, x, facts


def checked_values(
    geometry: Hierarchy, values: npt.ArrayLike, clamp: bool, fn: str
) -> tuple[npt.NDArray[np.float64], dict[str, Any]]:
    mapped = geometry.map_values(values, clamp=clamp, function=fn)
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.shape[0] == 0:
        raise InputDataError(f"{fn} needs at least one value; got an empty population")
    if clamp:
        x = np.clip(x, geometry.lo, geometry.hi)
    facts = {
        "values": int(x.shape[0]),
        "clamped": mapped.clamped,
        "dropped_missing": mapped.dropped,
    }
    return x, facts
