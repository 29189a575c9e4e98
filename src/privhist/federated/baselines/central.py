"""Central baseline: the sampled clients' histogram plus discrete Laplace (geometric) noise.

Bharadwaj & Cormode (AISTATS 2022), Section 5, compare sample-and-threshold with "central
differential privacy, via Laplace noise addition" applied "to the sampled set of clients" at the
same (epsilon, delta). We add *discrete* Laplace noise, the geometric mechanism of Ghosh,
Roughgarden & Sundararajan (2009), drawn exactly (Canonne, Kamath & Steinke 2020, Algorithm 2;
:func:`privhist.noise.discrete_laplace`), to every bucket of the public domain ``[0, B)``.

**Guarantee.** One neighbouring step changes the count vector by at most ``l1`` in L1 norm
(1 for add/remove one client, 2 for replacing one client's item). The noise scale is
``l1 / eps_noise`` rounded *up* to a rational (denominator <= 2**20), and the discrete Laplace
pmf ratio at distance ``d`` is ``exp(d / scale)``, so the noisy histogram is
``(l1 / scale, 0)``-DP with ``l1 / scale <= eps_noise``: pure DP, hence (eps, delta)-DP for every
delta. The delta of the budget is not used: for this mechanism the exact profile
``delta(eps') = (1 - a e^eps') / (1 + a)`` (``a = exp(-1 / scale)``) only allows a scale smaller by
a relative ``O(delta)``, which does not change any error.

**Sampling.** By default (``amplify=False``), as in the paper's experiments, the noise is
calibrated to (eps, delta) *with respect to the sampled clients*: ``eps_noise = eps`` and no credit
is taken for the sampling. With ``amplify=True`` (add/remove neighbours only) the noise is
calibrated so that the whole procedure "Poisson-sample clients at rate ``q``, then add noise" is
eps-DP with respect to the *population*: privacy amplification by Poisson subsampling (Balle,
Barthe & Gaboardi 2018, "Privacy amplification by subsampling", Theorem 8 for the add/remove
relation: ``eps_pop = ln(1 + q (e^eps_noise - 1))``) gives
``eps_noise = ln(1 + (e^eps - 1) / q)``, rounded down. :meth:`CentralGeometric.population_guarantee`
reports the population-level guarantee in either case.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import RandomSource
from privhist.core.validation import delta_constraint
from privhist.federated.baselines._items import (
    DOMAIN_SIZE,
    check_items,
    histogram,
)
from privhist.mechanisms._noise import LaplaceCountNoise

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

_NAME = "CentralGeometric"
#: relative margin by which the amplified noise epsilon is lowered (float rounding of log/exp)
_AMPLIFY_MARGIN = 1e-12


class CentralGeometric(Declared):
    """Discrete Laplace noise on every bucket of the sampled clients' histogram.

    Args:
        epsilon: Privacy parameter, > 0.
        delta: In [0, 1); validated and recorded, not needed (the mechanism is pure DP).
        domain_size: Number of buckets ``B`` (public), in ``[1, 2**26]``.
        sampling_rate: Rate ``q`` in (0, 1] at which the clients were Poisson-sampled from the
            population (public); used by :meth:`population_guarantee` and by ``amplify``.
        neighbouring: Add/remove one client (default) or replace one client's item.
        amplify: Calibrate the noise to the population through amplification by sampling
            (module notes) instead of to the sample.

    >>> from privhist.core.random import SeededRandom
    >>> m = CentralGeometric(1.0, 1e-8, 4)
    >>> m.noise_scale, m.guarantee()
    (Fraction(1, 1), Budget(epsilon=1.0, delta=0.0))
    >>> m.estimate(np.array([0, 0, 3]), SeededRandom(1)).shape
    (4,)
    """

    declared: ClassVar[dict[str, Constraint]] = {
        "epsilon": Constraint.real(0, open_low=True),
        "delta": delta_constraint(),
        "domain_size": DOMAIN_SIZE,
        "sampling_rate": Constraint.real(0, 1, open_low=True),
        "amplify": Constraint.flag(),
    }

    def __init__(
        self,
        epsilon: float,
        delta: float,
        domain_size: int,
        sampling_rate: float = 1.0,
        *,
        neighbouring: Neighbouring | None = None,
        amplify: bool = False,
    ) -> None:
        self.epsilon: float = self.check_parameter("epsilon", epsilon)
        self.delta: float = self.check_parameter("delta", delta)
        self.domain_size: int = self.check_parameter("domain_size", domain_size)
        self.sampling_rate: float = self.check_parameter("sampling_rate", sampling_rate)
        self.neighbouring = neighbouring if neighbouring is not None else Neighbouring.add_remove()
        if not isinstance(self.neighbouring, Neighbouring):
            raise ValidationError("neighbouring", _NAME, "a Neighbouring", neighbouring)
        self.amplify: bool = self.check_parameter("amplify", amplify)
        if self.amplify and self.neighbouring.relation is not Relation.ADD_REMOVE:
            raise ValidationError(
                "amplify",
                _NAME,
                "False unless neighbouring is add/remove (Poisson amplification is for add/remove)",
                amplify,
            )
        if self.amplify:
            raw = math.log1p(math.expm1(self.epsilon) / self.sampling_rate)
            noise_eps = raw * (1 - _AMPLIFY_MARGIN)
        else:
            noise_eps = self.epsilon
        self._noise = LaplaceCountNoise(self.neighbouring.l1_sensitivity, noise_eps, _NAME)

    @property
    def noise_scale(self) -> Fraction:
        """The discrete Laplace scale ``s`` (``P[Z = z]`` proportional to ``exp(-|z| / s)``)."""
        return self._noise.scale

    @property
    def noise_epsilon(self) -> float:
        """``l1 / scale``: the pure-DP epsilon of the noisy histogram of the sample."""
        return self._noise.effective_epsilon

    def guarantee(self) -> Budget:
        """The guarantee the mechanism is built for: the accountant's guarantee of
        :meth:`event`.

        With ``amplify=False`` it holds with respect to the sampled clients (and a fortiori the
        population); with ``amplify=True`` with respect to the population, the sampling at rate
        ``sampling_rate`` being part of the mechanism.
        """
        return guarantee_of(self.event())

    def event(self) -> ApproxDPEvent:
        """The release as a privacy event: the pure epsilon of :meth:`guarantee` (the noise's
        own, or its amplification by the sampling), for the accountant and a ledger."""
        if self.amplify:
            return ApproxDPEvent.from_budget(self.population_guarantee())
        return ApproxDPEvent(self.noise_epsilon, 0.0)

    def population_guarantee(self) -> Budget:
        """``(ln(1 + q (e^eps_noise - 1)), 0)``: the guarantee of sampling at rate ``q`` followed
        by this mechanism, for add/remove neighbours (Balle, Barthe & Gaboardi 2018, Theorem 8).
        For replace neighbours the sample-level guarantee is returned (no amplification used)."""
        if self.neighbouring.relation is not Relation.ADD_REMOVE:
            return Budget(self.noise_epsilon, 0.0)
        q = self.sampling_rate
        return Budget(math.log1p(q * math.expm1(self.noise_epsilon)), 0.0)

    def noisy_counts(self, counts: Any, rng: RandomSource) -> I64:
        """``counts + Z`` with ``Z`` i.i.d. discrete Laplace(``noise_scale``), one per bucket.

        Args:
            counts: Exact per-bucket counts of the sampled clients, ``domain_size`` integers >= 0.
            rng: Source of randomness.
        """
        arr = np.asarray(counts)
        if arr.shape != (self.domain_size,) or arr.dtype.kind not in "iu" or (arr < 0).any():
            raise ValidationError(
                "counts",
                "CentralGeometric.noisy_counts",
                f"{self.domain_size} non-negative integers",
                f"shape {arr.shape}, dtype {arr.dtype}",
            )
        return arr.astype(np.int64) + self._noise.sample(self.domain_size, rng)

    def estimate(self, items: Any, rng: RandomSource) -> F64:
        """Unbiased estimates of the per-bucket counts among the clients holding ``items``.

        The noise has mean 0, so the noisy counts themselves are unbiased.
        """
        x = check_items(items, self.domain_size, "CentralGeometric.estimate")
        return self.noisy_counts(histogram(x, self.domain_size), rng).astype(np.float64)

    def noise_std(self) -> float:
        """Standard deviation of the noise on one bucket: ``sqrt(2 a) / (1 - a)``."""
        return self._noise.std()

    def parameters(self) -> dict[str, Any]:
        """Public parameters for reports and experiment tables."""
        return {
            "mechanism": "central-geometric",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "domain_size": self.domain_size,
            "sampling_rate": self.sampling_rate,
            "amplify": self.amplify,
            "neighbouring": self.neighbouring.relation.value,
            "noise_scale": str(self.noise_scale),
            "noise_epsilon": self.noise_epsilon,
        }
