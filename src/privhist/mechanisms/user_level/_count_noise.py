"""The noise of a user-level selector's count release: discrete Gaussian or discrete Laplace
(:mod:`~privhist.mechanisms.user_level._counts` states both guarantees), and the choice between
them by expected absolute error."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.mechanisms.user_level._counts import clipped
from privhist.mechanisms.user_level.cumulative import gaussian_profile_upper
from privhist.noise import (
    DiscreteGaussian,
    DiscreteLaplace,
    discrete_gaussian,
    discrete_laplace,
    rational_at_least,
)

#: the noises a count release may use (``"auto"``: the smaller expected absolute error)
COUNT_NOISES = ("auto", "gaussian", "laplace")
#: denominators of the rational noise parameters (variance, scale)
_DENOMINATOR = 2**20


@lru_cache(maxsize=1024)
def count_sigma2(epsilon: float, delta: float, k_c: int) -> Fraction:
    """The smallest ``sigma2 >= 1`` (rational, denominator at most ``2**20``; bisection) with
    ``delta_G(epsilon - 2 k_c / sigma2; sqrt(k_c / sigma2)) <= delta`` (module notes; cached:
    the user-level plan's vote candidates ask it the same twice)."""

    def ok(s2: Fraction) -> bool:
        return gaussian_profile_upper(epsilon, k_c / s2, 2 * k_c / s2) <= delta

    lo, hi = Fraction(1), Fraction(2)
    if ok(lo):
        return lo
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > 2**60:
            raise ValidationError("epsilon", "count_sigma2", "large enough for counts", epsilon)
    for _ in range(60):
        mid = rational_at_least((lo + hi) / 2, _DENOMINATOR)
        if mid >= hi or mid <= lo:
            break
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class CountNoise:
    """The noise of a count release at ``(epsilon, delta)`` for users counted on at most ``k``
    released keys (module notes): ``kind`` ``"discrete_gaussian"`` (``sigma2``, certified
    ``delta``) or ``"discrete_laplace"`` (``scale``, ``delta`` 0).

    >>> CountNoise.of(0.25, 5e-9, 6).kind, CountNoise.of(0.25, 5e-9, 6).scale
    ('discrete_laplace', Fraction(24, 1))
    >>> CountNoise.of(3.0, 1e-5, 50).kind
    'discrete_gaussian'
    """

    kind: str
    k: int
    epsilon: float
    sigma2: Fraction | None = None
    scale: Fraction | None = None
    delta: float = 0.0

    @classmethod
    def of(cls, epsilon: float, delta: float, k: int, noise: str = "auto") -> CountNoise:
        """The ``noise`` (:data:`COUNT_NOISES`) for ``(epsilon, delta)`` and ``k``; ``"auto"``
        the one of smaller :meth:`expected_abs` (the Laplace noise when ``delta`` is 0)."""
        fn = "CountNoise"
        if noise not in COUNT_NOISES:
            raise ValidationError("count_noise", fn, f"one of {COUNT_NOISES}", noise)
        if noise == "gaussian" and not delta > 0:
            raise ValidationError("delta", fn, "> 0 for Gaussian counts", delta)
        scale = rational_at_least(Fraction(k) / Fraction(epsilon), _DENOMINATOR)
        laplace = cls("discrete_laplace", k, epsilon, scale=scale)
        if noise == "laplace" or not delta > 0:
            return laplace
        s2 = count_sigma2(epsilon, delta, k)
        gauss = cls(
            "discrete_gaussian",
            k,
            epsilon,
            sigma2=s2,
            delta=gaussian_profile_upper(epsilon, k / s2, 2 * k / s2),
        )
        if noise == "gaussian":
            return gauss
        return laplace if laplace.expected_abs() <= gauss.expected_abs() else gauss

    @property
    def name(self) -> str:
        """``"discrete Gaussian"`` or ``"discrete Laplace"``."""
        return "discrete Gaussian" if self.sigma2 is not None else "discrete Laplace"

    def _law(self) -> Any:
        return (
            DiscreteGaussian(self.sigma2)
            if self.sigma2 is not None
            else DiscreteLaplace(
                self.scale  # type: ignore[arg-type]
            )
        )

    def std(self) -> float:
        """The noise's standard deviation (floats, for planning)."""
        if self.sigma2 is not None:
            return math.sqrt(float(self.sigma2))
        a = math.exp(-1 / float(self.scale))  # type: ignore[arg-type]
        return math.sqrt(2 * a) / (1 - a)

    def expected_abs(self, shift: float = 0.0) -> float:
        """``E|shift + Z|`` for the noise ``Z`` (floats, for planning: the expected absolute
        error of a count whose bounding lost ``shift`` users)."""
        width = int(40 * self.std()) + 2
        z = np.arange(-width, width + 1, dtype=np.float64)
        if self.sigma2 is not None:
            w = np.exp(-(z * z) / (2 * float(self.sigma2)))
        else:
            w = np.exp(-np.abs(z) / float(self.scale))  # type: ignore[arg-type]
        return float((np.abs(shift + z) * w).sum() / w.sum())

    def draw(self, size: int, rng: RandomSource) -> npt.NDArray[np.int64]:
        """``size`` independent noise values (exact samplers)."""
        if self.sigma2 is not None:
            return discrete_gaussian(self.sigma2, rng, size)
        return discrete_laplace(self.scale, rng, size)  # type: ignore[arg-type]

    def columns(self, noisy: npt.NDArray[np.int64], confidence: float) -> dict[str, Any]:
        """The clipped count columns (``values``, ``lower``, ``upper``; module notes) with the
        exact ``confidence`` quantile of this noise."""
        return clipped(noisy, int(self._law().interval(confidence)[1]))

    def parameters(self) -> dict[str, Any]:
        """JSON-friendly: the noise, its parameter and standard deviation."""
        out: dict[str, Any] = {"count_noise": self.kind, "count_noise_std": self.std()}
        if self.sigma2 is not None:
            out["count_sigma2"] = str(self.sigma2)
        else:
            out["count_scale"] = str(self.scale)
        return out
