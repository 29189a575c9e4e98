"""Metrics of an aggregation, as values: what :meth:`privhist.session.Session.aggregate` computes
per group (built by the functions of :mod:`privhist.metrics`).

A metric names its kind, its column and its public bounds ``[lower, upper]``, to which every value
is clamped before it is summed (``"auto"``: chosen by a DP quantile of the values inside the same
spend). Values are fixed-point integers at a stated ``resolution`` (a value ``x`` counts as
``round(x / resolution)`` units), so every sum is an exact integer and the noise exact.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from privhist.core.errors import ValidationError

Bound = float | Literal["auto"]

#: the kinds of metric, in the order their columns appear when several are asked for
KINDS = ("count", "count_users", "sum", "mean", "variance", "quantiles")

#: how quantiles may be released
QUANTILE_METHODS = ("auto", "exponential", "tree")

#: the most fixed-point units a range may span (sums of squares stay exact in int64)
MAX_UNITS = 2**20


@dataclass(frozen=True)
class Metric:
    """One metric (see the module notes).

    Attributes:
        kind: one of :data:`KINDS`.
        column: the numeric column (None for ``count`` and ``count_users``).
        lower, upper: the public bounds values are clamped to, or ``"auto"``.
        levels: the quantile levels (``quantiles`` only), each in [0, 1].
        resolution: the fixed-point unit (None: chosen from the bounds, see
            :func:`default_resolution`).
        method: how quantiles are released: ``"auto"``, ``"exponential"`` or ``"tree"``.
    """

    kind: str
    column: str | None = None
    lower: Bound | None = None
    upper: Bound | None = None
    levels: tuple[float, ...] = ()
    resolution: float | None = None
    method: str = "auto"

    def __post_init__(self) -> None:
        fn = f"metrics.{self.kind}"
        if self.kind not in KINDS:
            raise ValidationError("kind", "Metric", f"one of {', '.join(KINDS)}", self.kind)
        if self.kind in ("count", "count_users"):
            return
        if not isinstance(self.column, str) or not self.column:
            raise ValidationError("column", fn, "a column name (a non-empty string)", self.column)
        for name in ("lower", "upper"):
            value = getattr(self, name)
            if not (isinstance(value, str) and value == "auto") and not _real(value):
                raise ValidationError(name, fn, "a finite number or 'auto'", value)
        if _real(self.lower) and _real(self.upper) and not float(self.lower) < float(self.upper):  # type: ignore[arg-type]
            raise ValidationError("upper", fn, f"> lower ({self.lower})", self.upper)
        if self.resolution is not None and (not _real(self.resolution) or self.resolution <= 0):
            raise ValidationError("resolution", fn, "a number > 0", self.resolution)
        if self.kind == "quantiles":
            if not self.levels:
                raise ValidationError("levels", fn, "at least one level in [0, 1]", self.levels)
            for q in self.levels:
                if not _real(q) or not 0 <= q <= 1:
                    raise ValidationError("levels", fn, "levels in [0, 1]", q)
            if self.method not in QUANTILE_METHODS:
                raise ValidationError(
                    "method", fn, f"one of {', '.join(QUANTILE_METHODS)}", self.method
                )
        elif self.levels:
            raise ValidationError("levels", fn, "empty (only quantiles take levels)", self.levels)

    @property
    def auto(self) -> bool:
        """Whether a bound is chosen privately."""
        return self.lower == "auto" or self.upper == "auto"

    def describe(self) -> str:
        if self.column is None:
            return f"{self.kind}()"
        levels = f"{list(self.levels)}, " if self.levels else ""
        return f"{self.kind}({self.column}, {levels}{self.lower}, {self.upper})"


@dataclass(frozen=True)
class Product:
    """Public partitions as the Cartesian product of per-column value lists."""

    values: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.values:
            raise ValidationError("values", "metrics.product", "a mapping column -> values", {})
        for column, vals in self.values.items():
            if not isinstance(column, str) or not column:
                raise ValidationError("values", "metrics.product", "column names", column)
            if isinstance(vals, str) or not isinstance(vals, Sequence) or not vals:
                raise ValidationError(
                    "values", "metrics.product", f"a non-empty list of values for {column!r}", vals
                )
            if len(set(vals)) != len(vals):
                raise ValidationError(
                    "values", "metrics.product", f"distinct values for {column!r}", vals
                )

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.values)

    def rows(self) -> list[tuple[Any, ...]]:
        """Every combination, in the order of the given lists."""
        out: list[tuple[Any, ...]] = [()]
        for vals in self.values.values():
            out = [(*row, v) for row in out for v in vals]
        return out


def default_resolution(lower: float, upper: float, units: int = 2**16) -> float:
    """The fixed-point unit of a range: the smallest of ``1, 2, 5`` times a power of ten that
    makes ``[lower, upper]`` span at most ``units`` (``2**16``) units, so rounding moves a value by
    at most half a unit, less than a ``1 / units`` share of the range (a round number, so values
    with few decimals stay exact). Variances use ``2**10`` units: their squares stay small.

    >>> default_resolution(0, 100), default_resolution(17, 90), default_resolution(0, 1e6)
    (0.002, 0.002, 20.0)
    """
    span = float(upper) - float(lower)
    target = span / units
    exponent = math.floor(math.log10(target)) if target > 0 else -9
    for step in (1.0, 2.0, 5.0, 10.0):
        unit = step * 10.0**exponent
        if span / unit <= units:
            return float(f"{unit:.12g}")
    return float(f"{10.0 ** (exponent + 1):.12g}")


def _real(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )
