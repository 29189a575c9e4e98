"""Gaussian thresholding: discrete Gaussian counts of present keys, kept above a threshold.

The sparse histogram with L2 sensitivity: every key present in the data gets its (user-bounded)
count plus discrete Gaussian noise ``N_Z(0, sigma2)`` (CKS 2020, Algorithm 3, exact), and keys
whose noisy count reaches ``T`` are released with it. This is the Gaussian counterpart of
:mod:`privhist.mechanisms.stability` (Korolova et al. 2009; the "Gaussian thresholding" that
OpenDP calls ``then_gaussian_threshold`` and PipelineDP offers with Gaussian noise), whose noise
grows like ``sqrt(k)`` instead of ``k`` with the number ``k`` of keys a user may hold.

Guarantee (``Neighbouring.user(k, c)``: add or remove one user holding at most ``k`` keys with at
most ``c`` records each; add/remove and replace of records as the special cases ``k = 1`` and
``l0 = 2``). Write ``l0`` for the keys one step touches and ``c`` for the per-key change.

* Keys present in both neighbours move by a vector of L2 norm at most ``c sqrt(l0)``: with
  ``sigma2 >= l0 c**2 / (2 rho)`` their noisy counts are ``rho``-zCDP (CKS, Theorem 14), hence
  ``(epsilon, delta_z)``-DP with ``delta_z`` from CKS Corollary 13
  (:func:`~privhist.mechanisms.user_level._gauss.zcdp_delta`).
* Keys whose count without the added user is zero (only that user holds them after bounding;
  the run without it never considers them) have count at most ``c``; the chance that one of its
  at most ``l0`` such keys is released is ``Pr[F] <= 1 - (1 - Pr[c + Z >= T])**l0``, bounded
  rigorously (:func:`~privhist.mechanisms.user_level._gauss.tail_upper`).
* Together (``_gauss``, item 3): ``(epsilon, delta_z(epsilon + ln(1 - Pr[F])) + Pr[F])``-DP.

Calibration: ``rho`` is the largest with ``delta_z(rho) <= (1 - threshold_share) delta`` (at the
epsilon of item 3); ``T`` is the smallest integer with ``Pr[F] <= threshold_share delta``.
:meth:`GaussianThresholdHistogram.certified_delta` recomputes the sum with the rounded parameters
(at most ``delta``). The guarantee is not the composition of per-key guarantees (the zCDP bound is
joint over the touched keys), so ``per_key_composable`` is False and the contract tests check the
joint distribution of the touched keys exactly."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.accounting.profile import NOT_RELEASED
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.validation import Constraint
from privhist.mechanisms._noise import PREC
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.registry import register
from privhist.mechanisms.stability import thresholded_distribution
from privhist.mechanisms.user_level._gauss import (
    calibrate,
    calibrate_threshold,
    certified_delta,
    release_bound,
    sigma2_for,
)
from privhist.noise import DiscreteGaussian, discrete_gaussian

#: share of delta spent on keys only the added user holds (the threshold); the rest on the noise
DEFAULT_THRESHOLD_SHARE = 0.5


def dg_table(sigma2: Fraction, radius_sigmas: int = 14) -> tuple[dict[int, Any], Any]:
    """High-precision pmf of ``N_Z(0, sigma2)`` on ``|z| <= R`` and a bound on the mass outside."""
    with mpmath.workprec(PREC):
        radius = math.ceil(math.sqrt(float(sigma2)) * radius_sigmas) + 2
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        weights = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-radius, radius + 1)}
        edge = weights[radius]
        ratio = mpmath.exp(-mpmath.mpf(radius) / s2)
        outside = 2 * edge * ratio / (1 - ratio)
        total = mpmath.fsum(weights.values())
        return {k: w / total for k, w in weights.items()}, outside / total


@register
class GaussianThresholdHistogram(Mechanism):
    """Discrete Gaussian counts of present keys, released at or above a threshold.

    >>> from privhist import SeededRandom
    >>> from privhist.core.data import Counts
    >>> m = GaussianThresholdHistogram(1.0, 1e-6, Neighbouring.user(4, 1))
    >>> m.certified_delta() <= 1e-6
    True
    >>> data = Counts.from_arrays(["a", "b"], [1000, 1], neighbouring=Neighbouring.user(4, 1))
    >>> r = m.release(data, SeededRandom(1))
    >>> r.keys.tolist()
    ['a']
    """

    name = "gaussian-threshold"
    summary = (
        "discrete Gaussian counts (L2 sensitivity c sqrt(k)) of present keys above a threshold"
    )
    requires_delta = True
    options = (
        Option(
            "threshold_share",
            float,
            DEFAULT_THRESHOLD_SHARE,
            "share of delta spent on keys one user holds alone",
            constraint=Constraint.real(0, 1, open_low=True, open_high=True),
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float,
        neighbouring: Neighbouring | None = None,
        *,
        threshold_share: float = DEFAULT_THRESHOLD_SHARE,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        fn = self.function_name()
        self.threshold_share: float = self.check_option("threshold_share", threshold_share)
        nb = self.neighbouring
        l0, c = nb.l0_sensitivity, nb.linf_sensitivity
        self.rho, target = calibrate(self.epsilon, self.delta, self.threshold_share)
        self.sigma2 = sigma2_for(self.rho, l0 * c * c)
        if self.sigma2 > 2**40:
            raise ValidationError(
                "epsilon", fn, "large enough for a noise variance <= 2**40", epsilon
            )
        self.threshold = calibrate_threshold(self.sigma2, [c] * l0, target)
        self._dist = DiscreteGaussian(self.sigma2)

    def certified_delta(self) -> float:
        """``delta_z(epsilon + ln(1 - Pr[F])) + Pr[F]`` for the rounded ``sigma2`` and ``T``
        (a proven upper bound on the delta actually achieved)."""
        nb = self.neighbouring
        l0, c = nb.l0_sensitivity, nb.linf_sensitivity
        rho = Fraction(l0 * c * c) / (2 * self.sigma2)
        p_f = release_bound(self.sigma2, self.threshold, [c] * l0)
        return certified_delta(rho, self.epsilon, p_f)

    @property
    def per_key_composable(self) -> bool:
        return self.neighbouring.l0_sensitivity == 1

    def parameters(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "noise": "discrete_gaussian",
            "sigma2": str(self.sigma2),
            "noise_scale_float": math.sqrt(float(self.sigma2)),
            "noise_std": self.noise_std(),
            "rho": float(self.rho),
            "threshold_share": self.threshold_share,
            "certified_delta": self.certified_delta(),
        }

    def noise_std(self) -> float:
        return math.sqrt(float(self._dist.var()))

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        # Pr[i + Z >= T] = sf(T - i), from a float pmf table on |z| <= 40 sigma (planning only)
        radius = math.ceil(40 * math.sqrt(float(self.sigma2))) + 2
        z = np.arange(-radius, radius + 1, dtype=np.int64)
        pmf = np.asarray(self._dist.pmf(z), dtype=np.float64)
        sf = np.cumsum(pmf[::-1])[::-1]  # sf[j] = Pr[Z >= z[j]]
        m = self.threshold - np.arange(max_count + 1, dtype=np.int64)
        idx = np.clip(m + radius, 0, 2 * radius)
        p = np.where(m > radius, 0.0, np.where(m < -radius, 1.0, np.minimum(sf[idx], 1.0)))
        p[0] = 0.0
        return p

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        if count == 0:
            return KeyDistribution({NOT_RELEASED: mpmath.mpf(1)})
        table, tail = dg_table(self.sigma2)
        return thresholded_distribution(table, tail, count, self.threshold)

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        present = counts.counts > 0
        keys, c = counts.keys[present], counts.counts[present]
        noisy = c + discrete_gaussian(self.sigma2, rng, c.shape[0])
        keep = noisy >= self.threshold
        values = noisy[keep]
        w = int(self._dist.interval(self.confidence)[1])
        return keys[keep], {"values": values, "lower": values - w, "upper": values + w}

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        return [
            cls(1.0, 1e-3),
            cls(1.0, 1e-3, Neighbouring.user(2, 1)),
            cls(1.0, 1e-2, Neighbouring.user(2, 2)),
        ]
