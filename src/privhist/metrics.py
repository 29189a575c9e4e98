"""Metrics of :meth:`privhist.Session.aggregate`: what to compute per group.

Example:
    >>> import polars as pl
    >>> from privhist import Session
    >>> from privhist import metrics as m
    >>> people = pl.DataFrame({"country": ["fr"] * 4000 + ["de"] * 3000,
    ...                        "age": [30, 40, 50, 60] * 1000 + [20, 30, 40] * 1000})
    >>> r = Session().aggregate(people, by=["country"], epsilon=1, delta=1e-6, seed=1,
    ...                         metrics={"n": m.count(), "mean_age": m.mean("age", 0, 100)})
    >>> t = r.to_pandas()
    >>> t["country"].tolist(), bool((abs(t["mean_age"] - [30, 45]) < 3).all())  # true: 30, 45
    (['de', 'fr'], True)

``lower`` and ``upper`` bound every value (values outside are clamped; ``"auto"`` chooses a bound by
a DP quantile of the values, paid inside the same spend); ``resolution`` is the fixed-point unit
(default: :func:`privhist.core.metrics.default_resolution`).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from privhist.core.metrics import Bound, Metric, Product

__all__ = [
    "Metric",
    "Product",
    "count",
    "count_users",
    "mean",
    "product",
    "quantiles",
    "sum",
    "variance",
]


def count() -> Metric:
    """The number of records per group (after contribution bounding), with a confidence
    interval."""
    return Metric("count")


def count_users() -> Metric:
    """The number of distinct users per group (user-level data), with a confidence interval."""
    return Metric("count_users")


def sum(column: str, lower: Bound, upper: Bound, *, resolution: float | None = None) -> Metric:
    """The sum of ``column`` per group, each value clamped to ``[lower, upper]``, with a
    confidence interval."""
    return Metric("sum", column, lower, upper, resolution=resolution)


def mean(column: str, lower: Bound, upper: Bound, *, resolution: float | None = None) -> Metric:
    """The mean of ``column`` per group: a noisy sum of values centred in ``[lower, upper]``
    over a noisy count, clamped to the bounds."""
    return Metric("mean", column, lower, upper, resolution=resolution)


def variance(column: str, lower: Bound, upper: Bound, *, resolution: float | None = None) -> Metric:
    """The (population) variance of ``column`` per group, from noisy sums of centred values and
    of their squares over a noisy count."""
    return Metric("variance", column, lower, upper, resolution=resolution)


def quantiles(
    column: str,
    levels: Sequence[float] | float,
    lower: Bound,
    upper: Bound,
    *,
    resolution: float | None = None,
    method: str = "auto",
) -> Metric:
    """Quantiles of ``column`` per group at ``levels`` over ``[lower, upper]`` (one column per
    level): by a selection over the range, one draw per level (``method="exponential"``:
    permute-and-flip with Laplace noise, the exponential mechanism with Gaussian noise), or all
    levels from one noisy tree of counts (``"tree"``); ``"auto"`` takes the one with the smaller
    predicted rank error (:mod:`privhist.analytics.aggregate`): the exponential mechanism for a
    few levels, the tree for many."""
    qs = (float(levels),) if isinstance(levels, builtins.float | builtins.int) else tuple(levels)
    return Metric("quantiles", column, lower, upper, qs, resolution, method)


def product(values: Mapping[str, Sequence[Any]]) -> Product:
    """Public partitions: every combination of the given values of each group column."""
    return Product({k: tuple(v) for k, v in values.items()})
