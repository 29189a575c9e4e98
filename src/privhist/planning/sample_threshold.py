"""Planning sample-and-threshold: the three calibrations side by side, before any data.

:func:`calibration_table` compares, at the paper's rate ``p = alpha (1 - e^-eps)``, the threshold
of the ``C_alpha`` rule and of Theorem 1 (Bharadwaj & Cormode 2022, Section 3.1) with the
smallest threshold the exact privacy profile allows
(:mod:`privhist.mechanisms.sampling.profile`). :func:`plan_sample_and_threshold` adds, for a
population of ``N`` units, the error-minimising ``(p, tau)``, its expected error (the worst
root-mean-squared error over true counts ``0..N``, :mod:`privhist.mechanisms.sampling.accuracy`)
and its reporting probability ``Pr[Binomial(c, p) >= tau]`` for every ``c = 0..N``.

>>> rows = calibration_table([1.0], 1e-8)
>>> rows[0]["c_alpha"], rows[0]["chernoff"], rows[0]["exact"]
(20, 14, 11)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.neighbouring import Neighbouring
from privhist.core.validation import check_delta, check_epsilon, check_positive_int
from privhist.mechanisms.sampling import SampleAndThreshold
from privhist.mechanisms.sampling.accuracy import (
    ExpectedError,
    expected_error,
    reporting_probability,
)
from privhist.mechanisms.sampling.profile import (
    alpha_rate,
    c_alpha_threshold,
    certified_delta,
    chernoff_threshold,
    exact_threshold,
)

__all__ = ["SampleThresholdPlan", "calibration_table", "plan_sample_and_threshold"]

_FN = "plan_sample_and_threshold"


def calibration_table(
    epsilons: Iterable[float], delta: float, alpha: float | Fraction = Fraction(1, 6)
) -> list[dict[str, Any]]:
    """One row per epsilon (add/remove neighbours): the rate ``alpha (1 - e^-eps)`` and the
    thresholds of the ``C_alpha`` rule, Theorem 1 and the exact profile, each with its certified
    exact delta."""
    d = check_delta(delta, "calibration_table", positive=True)
    a = Fraction(alpha)
    rows = []
    for eps in epsilons:
        e = check_epsilon(eps, "calibration_table")
        ef, df = Fraction(e), Fraction(d)
        p = alpha_rate(a, ef, "calibration_table")
        t_alpha = c_alpha_threshold(float(a), d)
        t_one = chernoff_threshold(float(p), e, d)
        t_exact, cert = exact_threshold(p, ef, df, "calibration_table")
        row: dict[str, Any] = {
            "epsilon": e,
            "delta": d,
            "alpha": float(a),
            "sampling_rate": float(p),
            "c_alpha": t_alpha,
            "chernoff": t_one,
            "exact": t_exact,
            "delta_exact": cert.upper,
            "delta_exact_chernoff": certified_delta(p, t_one, ef).upper,
            "delta_exact_c_alpha": (
                None if t_alpha is None else certified_delta(p, t_alpha, ef).upper
            ),
        }
        rows.append(row)
    return rows


@dataclass(frozen=True)
class SampleThresholdPlan:
    """The calibrations of sample-and-threshold for one request and population."""

    epsilon: float
    delta: float
    neighbouring: Neighbouring
    population: int
    #: mechanisms built with each calibration ("exact", "chernoff", "c_alpha", "optimised")
    mechanisms: dict[str, SampleAndThreshold]
    errors: dict[str, ExpectedError]
    #: Pr[released] for true counts 0..population, for the optimised calibration
    reporting_curve: npt.NDArray[np.float64] = field(repr=False)

    @property
    def best(self) -> SampleAndThreshold:
        return self.mechanisms["optimised"]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbouring": self.neighbouring.describe(),
            "population": self.population,
            "calibrations": {},
        }
        for name, m in self.mechanisms.items():
            out["calibrations"][name] = {
                "sampling_rate": float(m.sampling_rate),
                "threshold": m.threshold,
                "delta_exact": m.delta_exact,
                "expected_error": self.errors[name].to_dict(),
            }
        return out


def plan_sample_and_threshold(
    epsilon: float,
    delta: float,
    population: int,
    neighbouring: Neighbouring | None = None,
    *,
    alpha: float | Fraction = Fraction(1, 6),
) -> SampleThresholdPlan:
    """Build the four calibrations (the first three at ``alpha``'s rate) for ``population``
    units, with their expected errors and the optimised reporting curve over ``0..population``.

    >>> plan = plan_sample_and_threshold(1.0, 1e-8, 2000)
    >>> plan.mechanisms["exact"].threshold, plan.reporting_curve.shape
    (11, (2001,))
    >>> e = plan.errors
    >>> e["optimised"].rmse <= min(e["exact"].rmse, e["chernoff"].rmse, e["c_alpha"].rmse)
    True
    """
    n = check_positive_int(population, _FN, "population")
    mechs: dict[str, SampleAndThreshold] = {}
    for rule in ("exact", "chernoff", "c_alpha"):
        mechs[rule] = SampleAndThreshold(
            epsilon, delta, neighbouring, alpha=alpha, calibration=rule, population=n
        )
    mechs["optimised"] = SampleAndThreshold(
        epsilon, delta, neighbouring, calibration="optimised", population=n
    )
    errors = {
        name: expected_error(float(m.sampling_rate), m.threshold, n) for name, m in mechs.items()
    }
    best = mechs["optimised"]
    curve = reporting_probability(float(best.sampling_rate), best.threshold, n)
    return SampleThresholdPlan(
        epsilon=best.epsilon,
        delta=best.delta,
        neighbouring=best.neighbouring,
        population=n,
        mechanisms=mechs,
        errors=errors,
        reporting_curve=curve,
    )
