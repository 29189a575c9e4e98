"""Hand-set parameters and deliberately broken variants.

:func:`with_parameters` returns a copy of a mechanism whose calibrated parameters (threshold,
noise scale, sampling rate) are replaced by the values a user actually runs, *keeping the
guarantee it claims*: both audits then test the variant against that claim. Nothing is
recalibrated, so e.g. ``stability`` at (1, 1e-6) with ``threshold=2`` still claims (1, 1e-6) and is
flagged.

:func:`broken_variants` are the self-test of the auditor (issue #14): each one is a mechanism that
violates the guarantee it claims, in a way seen in real code.

* ``threshold-3`` — stability-based histogram (Korolova et al. 2009; Bun, Nissim and Stemmer
  2016) with its threshold 3 below the calibrated one;
* ``scale-x0.5`` — the same with half the discrete Laplace scale (the threshold kept);
* ``float-laplace`` — a dense histogram with textbook floating-point Laplace noise, ``count +
  b s ln(U)`` in doubles (``U`` uniform in (0, 1], ``s`` a fair sign), whose low-order bits reveal
  the count (Mironov 2012, "On significance of the least significant bits for differential
  privacy", CCS 2012);
* ``data-dependent-threshold`` — a stability histogram that lowers its threshold to the largest
  true count when no key would otherwise reach it, so that small data "shows something"; the
  threshold is then a function of the data, and a single record is released with probability
  ``Pr[Z >= 0] = 1/(1 + e^(-1/b))`` against 0 without it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.random import RandomSource
from privhist.mechanisms._noise import LaplaceCountNoise
from privhist.mechanisms.base import Mechanism
from privhist.mechanisms.stability import StabilityHistogram
from privhist.noise import rational_at_least

__all__ = [
    "BrokenVariant",
    "DataDependentThreshold",
    "FloatLaplaceHistogram",
    "broken_variants",
    "with_parameters",
]

IntArray = npt.NDArray[np.int64]


def _noise_with_scale(noise: LaplaceCountNoise, scale: Fraction) -> LaplaceCountNoise:
    new = copy.copy(noise)
    new.scale = scale
    new.alpha = math.exp(-1 / float(scale))
    return new


def with_parameters(
    mechanism: Mechanism,
    *,
    threshold: int | None = None,
    scale: float | Fraction | None = None,
    sampling_rate: float | Fraction | None = None,
) -> Mechanism:
    """A copy of ``mechanism`` run with hand-set parameters, claiming the same guarantee.

    Args:
        mechanism: A constructed privhist mechanism.
        threshold: Release threshold (stability, stability-geometric, sample-and-threshold).
        scale: Discrete Laplace scale of the counts (stability, dense with Laplace noise,
            optimal-selection with counts); the exact rational value of the float.
        sampling_rate: Poisson sampling rate (sample-and-threshold), in (0, 1].

    Raises:
        UnsupportedError: The mechanism has no such parameter.
        ValidationError: A value out of range.
    """
    fn = "audit"
    m = copy.copy(mechanism)
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, int | np.integer):
            raise ValidationError("threshold", fn, "an integer", threshold)
        if not isinstance(getattr(m, "threshold", None), int | np.integer):
            raise UnsupportedError(f"audit: {m.name} has no threshold to set (--threshold)")
        m.threshold = int(threshold)  # type: ignore[attr-defined]
    if scale is not None:
        try:
            s = Fraction(scale)
        except (TypeError, ValueError, OverflowError):
            raise ValidationError("scale", fn, "a finite number > 0", scale) from None
        if s <= 0:
            raise ValidationError("scale", fn, "a finite number > 0", scale)
        s = rational_at_least(s, 2**20)
        if isinstance(getattr(m, "noise", None), LaplaceCountNoise):
            m.noise = _noise_with_scale(m.noise, s)  # type: ignore[attr-defined]
        elif isinstance(getattr(m, "laplace", None), LaplaceCountNoise):
            m.laplace = _noise_with_scale(m.laplace, s)  # type: ignore[attr-defined]
        else:
            raise UnsupportedError(
                f"audit: {m.name} has no discrete Laplace count noise whose scale can be set "
                "(--scale)"
            )
    if sampling_rate is not None:
        if not isinstance(getattr(m, "sampling_rate", None), Fraction):
            raise UnsupportedError(f"audit: {m.name} has no sampling rate to set (--sampling-rate)")
        try:
            p = Fraction(sampling_rate)
        except (TypeError, ValueError, OverflowError):
            raise ValidationError(
                "sampling_rate", fn, "a number in (0, 1]", sampling_rate
            ) from None
        if not 0 < p <= 1:
            raise ValidationError("sampling_rate", fn, "a number in (0, 1]", sampling_rate)
        m.sampling_rate = p  # type: ignore[attr-defined]
    return m


class DataDependentThreshold(StabilityHistogram):
    """Broken on purpose: the threshold falls to the largest true count when no key reaches it.

    Not registered; used only to show that the audit catches a data-dependent threshold.
    """

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        present = counts.counts > 0
        keys, c = counts.keys[present], counts.counts[present]
        t = self.threshold
        # the audit draws n outputs as one release over n copies of the same dataset; the
        # maximum over the copies is the maximum of one copy, so the bug is reproduced exactly
        if c.size and int(c.max()) < t:
            t = int(c.max())  # the bug: a function of the data
        noisy = c + self.noise.sample(c.shape[0], rng)
        keep = noisy >= t
        return keys[keep], self.noise.columns(noisy[keep], self.confidence)


class FloatLaplaceHistogram:
    """Broken on purpose: dense counts plus floating-point Laplace noise (a vectorised sampler).

    ``count + b * s * ln(U)`` with ``U`` a 53-bit uniform in (0, 1] and ``s`` a fair sign: the
    textbook inverse-CDF sampler in doubles. It claims ``(1/b, 0)``-DP, which holds for real
    numbers but not for doubles (Mironov 2012).
    """

    vectorised = True

    def __init__(self, epsilon: float, name: str = "float-laplace") -> None:
        self.epsilon = float(epsilon)
        self.scale = 1.0 / self.epsilon
        self.name = name

    def draw(
        self,
        dataset: Any,
        keys: Sequence[Hashable],
        n: int,
        rng: RandomSource,
        progress: Any = None,
    ) -> IntArray:
        from privhist.audit.sampling import features

        m = len(keys)
        counts = np.array([float(dataset.get(k, 0)) for k in keys])
        words = rng.uint64(2 * n * m)
        u = ((words[: n * m] >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53
        sign = np.where((words[n * m :] & np.uint64(1)) == 1, 1.0, -1.0)
        values = np.tile(counts, n) + self.scale * sign * np.log(u)
        if progress is not None:
            progress(n)
        return features(values, np.ones(n * m, dtype=np.bool_)).reshape(n, 2 * m)


@dataclass(frozen=True)
class BrokenVariant:
    """A mechanism that violates its claim, the claim, and the pair that shows it."""

    name: str
    sampler: Any
    mechanism: Mechanism | None
    epsilon: float
    delta: float
    why: str


def broken_variants(epsilon: float = 1.0, delta: float = 1e-3) -> list[BrokenVariant]:
    """The four broken variants of the module notes, each claiming ``(epsilon, delta)``."""
    from privhist.audit.sampling import MechanismSampler

    base = StabilityHistogram(epsilon, delta)
    t3 = with_parameters(base, threshold=base.threshold - 3)
    half = with_parameters(base, scale=base.noise.scale / 2)
    ddt = DataDependentThreshold(epsilon, delta)
    return [
        BrokenVariant(
            "threshold-3",
            MechanismSampler(t3, name="stability threshold-3"),
            t3,
            epsilon,
            delta,
            f"stability with threshold {base.threshold - 3} instead of {base.threshold}",
        ),
        BrokenVariant(
            "scale-x0.5",
            MechanismSampler(half, name="stability scale-x0.5"),
            half,
            epsilon,
            delta,
            f"stability with noise scale {float(base.noise.scale) / 2:g} instead of "
            f"{float(base.noise.scale):g}",
        ),
        BrokenVariant(
            "float-laplace",
            FloatLaplaceHistogram(epsilon),
            None,
            epsilon,
            0.0,
            "dense counts + inverse-CDF Laplace noise in doubles",
        ),
        BrokenVariant(
            "data-dependent-threshold",
            MechanismSampler(ddt, name="stability data-dependent-threshold"),
            None,
            epsilon,
            delta,
            "stability whose threshold falls to the largest true count",
        ),
    ]


def build_variant(
    name: str,
    epsilon: float,
    delta: float,
    neighbouring: Any = None,
    *,
    options: dict[str, Any] | None = None,
    threshold: int | None = None,
    scale: float | None = None,
    sampling_rate: float | None = None,
) -> Mechanism:
    """The registered mechanism ``name`` calibrated for ``(epsilon, delta)``, then run with the
    hand-set parameters given (see :func:`with_parameters`). A domain-based mechanism gets a
    one-key domain (its parameters do not depend on the domain; the samplers set their own)."""
    from privhist.mechanisms import registry
    from privhist.planning.plan import build

    cls = registry.get(name)
    domain = np.array(["x"]) if cls.needs_domain else None
    mech = build(name, epsilon, delta, neighbouring, domain=domain, **(options or {}))
    return with_parameters(mech, threshold=threshold, scale=scale, sampling_rate=sampling_rate)
