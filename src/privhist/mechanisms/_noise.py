"""Count noise shared by the central mechanisms: discrete Laplace, conservatively rounded."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise import discrete_laplace, rational_at_least
from privhist.noise.laplace import laplace_threshold

#: bound on the denominator of rational noise scales (keeps the exact sampler in int64)
SCALE_DENOMINATOR = 2**20
#: the largest scale the exact discrete Laplace sampler accepts
MAX_SCALE = 2**40
#: working precision (bits) of the high-precision per-key distributions
PREC = 160


class LaplaceCountNoise:
    """Discrete Laplace noise for counts with L1 sensitivity ``l1`` at ``epsilon``.

    The scale is ``l1 / epsilon`` rounded *up* to a rational with denominator at most 2**20, so
    the noise is never smaller than the guarantee needs: adding it to counts whose L1 distance is
    at most ``l1`` is ``l1 / scale <= epsilon``-DP (the discrete Laplace pmf ratio at distance 1 is
    ``exp(1/scale)``).
    """

    def __init__(self, l1: int, epsilon: float | Fraction, function: str = "histogram") -> None:
        self.l1 = l1
        self.scale: Fraction = rational_at_least(
            Fraction(l1) / Fraction(epsilon), SCALE_DENOMINATOR
        )
        if self.scale > MAX_SCALE:
            raise ValidationError(
                "epsilon",
                function,
                f"large enough that the noise scale {l1}/epsilon is at most 2**40",
                float(epsilon),
            )
        # alpha = exp(-1/scale), for analysis only
        self.alpha = math.exp(-1 / float(self.scale))

    @property
    def effective_epsilon(self) -> float:
        return float(Fraction(self.l1) / self.scale)

    def sample(self, size: int, rng: RandomSource) -> npt.NDArray[np.int64]:
        return discrete_laplace(self.scale, rng, size)

    def above(
        self, counts: npt.NDArray[np.int64], threshold: int, rng: RandomSource
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The indices where ``counts`` plus :meth:`sample` noise reach ``threshold``, and those
        noisy counts; only the noise that can reach it is drawn
        (:func:`~privhist.noise.laplace.laplace_threshold`, the same law)."""
        return laplace_threshold(self.scale, counts, threshold, rng)

    def columns(self, values: npt.NDArray[np.int64], confidence: float) -> dict[str, Any]:
        """Release columns for noisy ``values``: the values and their symmetric interval."""
        w = self.half_width_for_confidence(confidence)
        return {
            "values": values,
            "lower": values - w,
            "upper": values + w,
        }

    def std(self) -> float:
        a = self.alpha
        return math.sqrt(2 * a) / (1 - a)

    def sf(self, k: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """P[Z >= k] elementwise (floats, for planning)."""
        a = self.alpha
        k = np.asarray(k, dtype=np.float64)
        pos = np.power(a, np.maximum(k, 1)) / (1 + a)
        neg = 1 - np.power(a, np.maximum(1 - k, 1)) / (1 + a)
        return np.where(k >= 1, pos, neg)

    def half_width_for_confidence(self, confidence: float) -> int:
        """Smallest a with P[|Z| <= a] >= confidence: P[|Z| > a] = 2 alpha^(a+1) / (1 + alpha)."""
        a = self.alpha
        width = math.log((1 - confidence) * (1 + a) / 2) / math.log(a) - 1
        w = max(0, math.ceil(width - 1e-9))
        while 2 * a ** (w + 1) / (1 + a) > 1 - confidence:
            w += 1
        return w

    def mp_pmf_table(self, radius: int) -> tuple[dict[int, Any], Any]:
        """High-precision pmf on ``[-radius, radius]`` and the mass outside it."""
        with mpmath.workprec(PREC):
            alpha = mpmath.exp(-mpmath.mpf(self.scale.denominator) / self.scale.numerator)
            c = (1 - alpha) / (1 + alpha)
            table = {k: c * alpha ** abs(k) for k in range(-radius, radius + 1)}
            tail = 2 * alpha ** (radius + 1) / (1 + alpha)
        return table, tail

    def radius_for_tail(self, tail: float = 1e-40) -> int:
        """A radius whose outside mass is below ``tail``."""
        return math.ceil(float(self.scale) * math.log(2 / tail)) + 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "noise": "discrete_laplace",
            "noise_scale": str(self.scale),
            "noise_scale_float": float(self.scale),
            "noise_std": self.std(),
        }
