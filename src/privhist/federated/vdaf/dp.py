"""Distributed differential privacy for a Prio3Histogram batch: each aggregator noises its share.

Threat model (docs/federated/vdaf.md): two aggregators, at least one honest; the collector and
the other aggregator may collude. Each aggregator adds to its aggregate share (in the field)
independent exact integer noise calibrated *on its own* to the full ``(epsilon, delta)``, so
the released histogram is ``counts + N_leader + N_helper``. Whoever knows one aggregator's noise
(that aggregator, or a collector it colludes with) still sees ``counts + N_honest``: the
output of the noisy-histogram mechanism with the honest aggregator's noise alone, hence
``(epsilon, delta)``-DP; the collector alone sees that plus independent noise (post-processing).
The price is twice the variance of a trusted curator's noise.

Neighbouring relation: *replace one client's report* (the set of clients taking part is public,
as in secure aggregation: every report comes from an authenticated client, and the count of
accepted reports is released). One client moves one unit from one bucket to another: two
coordinates change by 1 (L1 = 2, L0 = 2, Linf = 1).

* ``laplace``: discrete Laplace with scale ``2 / epsilon`` rounded up (pure DP; the geometric
  mechanism of Ghosh, Roughgarden and Sundararajan 2009, sampled exactly as Canonne, Kamath and
  Steinke 2020, Algorithm 2).
* ``gaussian``: discrete Gaussian (CKS 2020, Algorithm 3) with the ``sigma`` that
  :func:`privhist.mechanisms.dense.calibrate_discrete_gaussian_sigma` calibrates for two
  coordinates changed by one.

The tests check both with the exact hockey-stick divergence, in both directions, on small
neighbouring histograms, for the view with one aggregator's noise known.

Large domains: every bucket is noised (the bucket list is public and the aggregators cannot see
which are empty), so privacy needs no threshold; to keep a sparse output the collector may drop
buckets whose noisy count is below a threshold ``tau`` (post-processing, no privacy cost).
:func:`false_positive_threshold` picks the smallest ``tau`` for which the expected number of
released empty buckets is at most a given bound (a union bound on the two noises' tails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.mechanisms.dense import calibrate_discrete_gaussian_sigma
from privhist.noise import (
    DiscreteGaussian,
    DiscreteLaplace,
    discrete_gaussian,
    discrete_laplace,
    rational_at_least,
)

#: L1 and L0 distance of neighbouring histograms (replace one client's one-hot report)
L1 = 2
L0 = 2
SCALE_DENOMINATOR = 2**20


@dataclass(frozen=True)
class AggregatorNoise:
    """The noise one aggregator adds to each bucket of its aggregate share.

    Args:
        epsilon: > 0.
        delta: In [0, 1); must be > 0 for ``gaussian``.
        kind: ``"laplace"`` or ``"gaussian"``.
    """

    epsilon: float
    delta: float = 0.0
    kind: str = "laplace"

    def __post_init__(self) -> None:
        fn = "AggregatorNoise"
        if not (isinstance(self.epsilon, int | float) and math.isfinite(self.epsilon)):
            raise ValidationError("epsilon", fn, "a finite number > 0", self.epsilon)
        if self.epsilon <= 0:
            raise ValidationError("epsilon", fn, "> 0", self.epsilon)
        if not 0 <= self.delta < 1:
            raise ValidationError("delta", fn, "in [0, 1)", self.delta)
        if self.kind not in ("laplace", "gaussian"):
            raise ValidationError("kind", fn, "'laplace' or 'gaussian'", self.kind)
        if self.kind == "gaussian" and self.delta <= 0:
            raise ValidationError("delta", fn, "> 0 for gaussian noise", self.delta)

    @property
    def scale(self) -> Fraction:
        """The discrete Laplace scale ``L1 / epsilon``, rounded up."""
        return rational_at_least(Fraction(L1) / Fraction(self.epsilon), SCALE_DENOMINATOR)

    @property
    def sigma2(self) -> Fraction:
        """The discrete Gaussian variance parameter."""
        sigma = calibrate_discrete_gaussian_sigma(self.epsilon, self.delta, L0, 1)
        return sigma * sigma

    def sample(self, size: int, rng: RandomSource) -> npt.NDArray[np.int64]:
        """One aggregator's noise for ``size`` buckets."""
        if self.kind == "laplace":
            return discrete_laplace(self.scale, rng, size)
        return discrete_gaussian(self.sigma2, rng, size)

    def distribution(self) -> Any:
        """The per-bucket noise distribution (for analysis)."""
        if self.kind == "laplace":
            return DiscreteLaplace(self.scale)
        return DiscreteGaussian(self.sigma2)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epsilon": self.epsilon,
            "delta": self.delta if self.kind == "gaussian" else 0.0,
            "noise": f"discrete_{self.kind}",
            "neighbouring": "replace one client's report",
            "noise_per_aggregator": True,
        }
        if self.kind == "laplace":
            out["scale"] = str(self.scale)
        else:
            out["sigma2"] = str(self.sigma2)
        return out


def false_positive_threshold(noise: AggregatorNoise, buckets: int, expected: float) -> int:
    """Smallest ``tau >= 1`` with ``buckets * P[N_1 + N_2 >= tau] <= expected``, bounding the
    tail of the sum of the two aggregators' noises by ``2 P[N >= ceil(tau / 2)]``."""
    if not expected > 0:
        raise ValidationError("expected", "false_positive_threshold", "> 0", expected)
    dist = noise.distribution()
    tau = 1
    while buckets * 2 * float(dist.sf_mp(-(-tau // 2))) > expected:
        tau += 1
    return tau
