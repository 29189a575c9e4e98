"""Dense noisy histogram over a public key domain.

Every key of the public domain is released with its count plus independent noise; keys of the data
outside the domain are dropped (and counted in the non-private diagnostics). Two noises:

* ``laplace`` (default, pure DP, delta may be 0): discrete Laplace with scale ``k c / eps``
  rounded up to a rational; the L1 distance between neighbouring count vectors is at most
  ``k c`` (``k`` keys touched, each by at most ``c``), and the discrete Laplace density ratio at
  distance ``d`` is ``exp(d / scale)`` — the geometric mechanism of Ghosh, Roughgarden &
  Sundararajan (2009), sampled exactly with Canonne, Kamath & Steinke (2020), Algorithm 2.
* ``gaussian`` (needs delta > 0): discrete Gaussian with variance ``sigma**2`` (CKS 2020,
  Algorithm 3). One neighbouring step changes at most ``k`` coordinates by at most ``c``; the
  coordinates are independent, so the privacy loss is the composition of ``k`` one-dimensional
  discrete Gaussian losses at sensitivity ``c``. ``sigma`` is the smallest value on a 2**-8 grid
  whose PLD (``dp_accounting``, pessimistic discretisation) gives ``delta(eps) <= delta``, with a
  margin of 1e-20 for the mass beyond dp_accounting's truncation of the discrete Gaussian.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.budget import Budget
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.validation import float_down
from privhist.mechanisms._domain import check_domain, counts_on_domain
from privhist.mechanisms._noise import PREC, LaplaceCountNoise
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.registry import register
from privhist.noise import DiscreteGaussian, discrete_gaussian

if TYPE_CHECKING:
    from privhist.accounting.composition import PrivacyEvent

GAUSSIAN_MARGIN = 1e-20


def calibrate_discrete_gaussian_sigma(epsilon: float, delta: float, k: int, c: int) -> Fraction:
    """Smallest sigma (multiple of 2**-8) with delta(eps) <= delta for ``k`` coordinates changed
    by at most ``c`` (the accountant's PLD of the discrete Gaussian event,
    :func:`privhist.accounting.composition.pld_compose`)."""
    from privhist.accounting.composition import DiscreteGaussianEvent, pld_compose

    def delta_at(sigma: float) -> float:
        return pld_compose(DiscreteGaussianEvent(sigma, c, k)).delta_for_epsilon(epsilon)

    target = delta - GAUSSIAN_MARGIN
    if target <= 0:
        raise ValidationError("delta", "dense", f"> {GAUSSIAN_MARGIN} for gaussian noise", delta)
    lo, hi = 2.0**-8, max(1.0, c * math.sqrt(k) * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)
    while delta_at(hi) > target:
        lo, hi = hi, hi * 2
    # bisection on the 2**-8 grid
    a, b = int(lo * 256), math.ceil(hi * 256)
    while b - a > 1:
        mid = (a + b) // 2
        if delta_at(mid / 256) > target:
            a = mid
        else:
            b = mid
    return Fraction(b, 256)


@register
class DenseHistogram(Mechanism):
    """Noisy counts for every key of a public domain.

    >>> from privhist import SeededRandom
    >>> from privhist.core.data import Counts
    >>> m = DenseHistogram(1.0, domain=["a", "b", "c"])
    >>> r = m.release(Counts.from_arrays(["a", "z"], [10, 3]), SeededRandom(0))
    >>> r.keys.tolist(), r.diagnostics["keys_outside_domain"]
    (['a', 'b', 'c'], 1)
    """

    name = "dense"
    summary = "noisy count for every key of a public domain (pure DP with Laplace noise)"
    sparse = False
    needs_domain = True
    options = (Option("noise", str, "laplace", "noise distribution", ("laplace", "gaussian")),)

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        domain: npt.ArrayLike | None = None,
        noise: str = "laplace",
        confidence: float = 0.95,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        fn = self.function_name()
        self.domain = check_domain(domain, fn)
        self.noise_kind: str = self.check_option("noise", noise)
        nb = self.neighbouring
        self.laplace: LaplaceCountNoise | None = None
        self.sigma2: Fraction | None = None
        if self.noise_kind == "laplace":
            self.laplace = LaplaceCountNoise(nb.l1_sensitivity, self.epsilon, fn)
            self.delta_spent = 0.0  # pure DP: a requested delta is not spent
        else:
            if self.delta <= 0:
                raise ValidationError("delta", fn, "> 0 for gaussian noise", self.delta)
            sigma = calibrate_discrete_gaussian_sigma(
                self.epsilon, self.delta, nb.l0_sensitivity, nb.linf_sensitivity
            )
            self.sigma2 = sigma * sigma

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"domain_size": int(self.domain.shape[0])}
        if self.laplace is not None:
            out.update(self.laplace.to_dict())
        else:
            assert self.sigma2 is not None
            out.update(
                {
                    "noise": "discrete_gaussian",
                    "sigma2": str(self.sigma2),
                    "noise_scale_float": math.sqrt(float(self.sigma2)),
                    "noise_std": self.noise_std(),
                }
            )
        return out

    def event(self) -> PrivacyEvent:
        """Laplace noise: its calibrated pure point ``(epsilon, 0)`` (the rational scale makes
        ``l1 / scale <= epsilon`` exact, which a float scale in a noise event cannot keep; the
        accountant treats discrete Laplace noise as pure DP in every default rule anyway).
        Gaussian noise: the discrete Gaussian on each of the ``l0`` keys a neighbour changes (by
        ``c`` each), so the accountant can use its Renyi curve and PLD (the calibrated sigma is
        a float; otherwise it is rounded towards less noise).

        >>> DenseHistogram(0.5, domain=[1, 2]).event()
        ApproxDPEvent(epsilon=0.5, delta=0.0, count=1)
        """
        from privhist.accounting.composition import DiscreteGaussianEvent

        nb = self.neighbouring
        if self.laplace is not None:
            return super().event()
        assert self.sigma2 is not None
        sigma = math.sqrt(float(self.sigma2))
        if Fraction(sigma) ** 2 != self.sigma2:  # the calibrated grid's sigma is a float: exact
            sigma = float_down(Fraction(sigma) * (1 - Fraction(1, 2**50)))
        return DiscreteGaussianEvent(sigma, nb.linf_sensitivity, nb.l0_sensitivity)

    def accounting_rules(self) -> tuple[str, ...] | None:
        """Gaussian noise was calibrated by the PLD of its event
        (:func:`calibrate_discrete_gaussian_sigma`), so the accountant's ``pld`` rule (the same
        composition) is among the rules; its Renyi bound alone is looser."""
        if self.laplace is not None:
            return None
        from privhist.accounting.accountant import DEFAULT_RULES

        return (*DEFAULT_RULES, "pld")

    def key_budget(self) -> Budget:
        """:meth:`guarantee` over the ``l0`` keys (per-key composable noise only: Laplace, or
        Gaussian with ``l0 = 1``, where the accountant's PLD epsilon is the one checked)."""
        l0 = self.neighbouring.l0_sensitivity
        g = self.guarantee()
        return Budget(g.epsilon / l0, g.delta / l0)

    @property
    def per_key_composable(self) -> bool:
        # Gaussian noise is calibrated on the joint (PLD-composed) loss of the l0 keys
        return self.laplace is not None or self.neighbouring.l0_sensitivity == 1

    def noise_std(self) -> float:
        if self.laplace is not None:
            return self.laplace.std()
        assert self.sigma2 is not None
        return math.sqrt(float(DiscreteGaussian(self.sigma2).var()))

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        return np.ones(max_count + 1, dtype=np.float64)

    def _table(self) -> tuple[dict[int, Any], Any]:
        if self.laplace is not None:
            return self.laplace.mp_pmf_table(self.laplace.radius_for_tail())
        assert self.sigma2 is not None
        sigma2 = self.sigma2
        with mpmath.workprec(PREC):
            radius = math.ceil(math.sqrt(float(sigma2)) * 14) + 2
            s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
            weights = {
                k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-radius, radius + 1)
            }
            # normaliser: enumerated part plus a geometric bound on the outside (ratio of
            # consecutive weights beyond radius is below exp(-radius / sigma2))
            edge = weights[radius]
            ratio = mpmath.exp(-mpmath.mpf(radius) / s2)
            outside = 2 * edge * ratio / (1 - ratio)
            total = sum(weights.values())
            table = {k: w / total for k, w in weights.items()}
            return table, outside / total

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        table, tail = self._table()
        return KeyDistribution({count + z: p for z, p in table.items()}, tail)

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        dom = self.domain
        true, outside = counts_on_domain(dom, counts, self.function_name())
        n = dom.shape[0]
        if self.laplace is not None:
            values = true + self.laplace.sample(n, rng)
            w = self.laplace.half_width_for_confidence(self.confidence)
        else:
            assert self.sigma2 is not None
            values = true + discrete_gaussian(self.sigma2, rng, n)
            w = int(DiscreteGaussian(self.sigma2).interval(self.confidence)[1])
        return dom, {
            "values": values,
            "lower": values - w,
            "upper": values + w,
            "info": {"keys_outside_domain": outside},
        }

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        dom = ["a", "b", "c"]
        return [
            cls(1.0, domain=dom),
            cls(0.5, 0.0, Neighbouring.user(2, 2), domain=dom),
            cls(1.0, 1e-3, domain=dom, noise="gaussian"),
            cls(1.0, 1e-3, Neighbouring.user(2, 1), domain=dom, noise="gaussian"),
        ]
