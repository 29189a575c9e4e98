"""Lemma 3.1 of Balcer & Vadhan: from approximate to pure differential privacy by mixing.

Algorithm 1, ``M*_{M', D, gamma}``: with probability ``1 - gamma`` release ``M'(x)``, otherwise
release a draw from a fixed distribution ``D`` over the (finite) output space ``R``.

Lemma 3.1. If ``M`` is ``(eps, 0)``-DP and ``Delta(M(x), M'(x)) <= delta`` (total variation) for
every input ``x``, then ``M*`` is ``(eps, 0)``-DP whenever inequality (1) holds::

    delta <= (e^eps - 1) / (e^eps + 1) * gamma / (1 - gamma) * min_{r in R} Pr[D = r].     (1)

Our reading of the proof (pointwise; it is all that pure DP on a finite range needs). Write
``P(r)``, ``P'(r)`` for the output probabilities of ``M``, ``M'`` on ``x`` and ``Q``, ``Q'`` on a
neighbour ``x'``, and ``u = min_r Pr[D = r]``. Total variation ``delta`` bounds every single
difference ``|P'(r) - P(r)|``, so::

    Pr[M*(x) = r] = (1 - gamma) P'(r) + gamma D(r)
                 <= (1 - gamma) (e^eps Q(r) + delta) + gamma D(r)
                 <= (1 - gamma) (e^eps (Q'(r) + delta) + delta) + gamma D(r)
                  = e^eps (1 - gamma) Q'(r) + (1 - gamma)(e^eps + 1) delta + gamma D(r),

and this is at most ``e^eps Pr[M*(x') = r] = e^eps ((1 - gamma) Q'(r) + gamma D(r))`` as soon as
``(1 - gamma)(e^eps + 1) delta <= (e^eps - 1) gamma D(r)``, which (1) gives for every ``r``.

Exactness. When ``e^eps`` is rational (for the bounded geometric noise of this package
``e^(eps~/2) = 1 + 2**-K``), the right-hand side of (1) is rational, so (1) is decided exactly by
:func:`satisfies_inequality_1`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.mechanisms.finite._exact import uniform_array

I64 = npt.NDArray[np.int64]

__all__ = [
    "UniformMixture",
    "mixing_delta_bound",
    "mixture_pmf",
    "satisfies_inequality_1",
    "total_variation",
]


def _check_ratio_gamma(ratio: Fraction, gamma: Fraction, function: str) -> None:
    if ratio < 1:
        raise ValidationError("ratio", function, "e^eps as a rational number >= 1", ratio)
    if not 0 < gamma < 1:
        raise ValidationError("gamma", function, "in (0, 1)", gamma)


def mixing_delta_bound(ratio: Fraction, gamma: Fraction, min_probability: Fraction) -> Fraction:
    """The right-hand side of inequality (1) of Lemma 3.1, exactly.

    Args:
        ratio: ``e^eps`` as a rational number (``M`` is ``(ln ratio, 0)``-DP).
        gamma: The mixing probability of Algorithm 1, in (0, 1).
        min_probability: ``min_r Pr[D = r]`` (``1 / |R|`` for the uniform distribution).

    >>> mixing_delta_bound(Fraction(3, 2), Fraction(1, 10), Fraction(1, 4))
    Fraction(1, 180)
    """
    ratio, gamma, min_probability = Fraction(ratio), Fraction(gamma), Fraction(min_probability)
    _check_ratio_gamma(ratio, gamma, "mixing_delta_bound")
    if not 0 <= min_probability <= 1:
        raise ValidationError("min_probability", "mixing_delta_bound", "in [0, 1]", min_probability)
    return (ratio - 1) / (ratio + 1) * gamma / (1 - gamma) * min_probability


def satisfies_inequality_1(
    delta: Fraction, ratio: Fraction, gamma: Fraction, min_probability: Fraction
) -> bool:
    """Whether ``delta`` satisfies inequality (1) of Lemma 3.1 (exact rational comparison)."""
    return Fraction(delta) <= mixing_delta_bound(ratio, gamma, min_probability)


def total_variation(p: Mapping[Hashable, Any], q: Mapping[Hashable, Any]) -> Fraction:
    """``Delta(P, Q) = 1/2 sum_r |P(r) - Q(r)|`` (Definition 2.5), exactly, for Fractions/ints."""
    keys = set(p) | set(q)
    total = sum(
        (abs(Fraction(p.get(k, 0)) - Fraction(q.get(k, 0))) for k in keys), start=Fraction(0)
    )
    return total / 2


def mixture_pmf(
    approx: Mapping[Hashable, Any], fallback: Mapping[Hashable, Any], gamma: Fraction
) -> dict[Hashable, Fraction]:
    """Output distribution of Algorithm 1: ``(1 - gamma) approx + gamma fallback`` (exact)."""
    gamma = Fraction(gamma)
    if not 0 <= gamma <= 1:
        raise ValidationError("gamma", "mixture_pmf", "in [0, 1]", gamma)
    keys = list(approx) + [k for k in fallback if k not in approx]
    return {
        k: (1 - gamma) * Fraction(approx.get(k, 0)) + gamma * Fraction(fallback.get(k, 0))
        for k in keys
    }


class UniformMixture:
    """Algorithm 1 with ``D = Unif({0, ..., size - 1})`` and a rational ``gamma = a / b``.

    The mixing decision is exact: ``j`` uniform in ``[0, b)`` and the uniform output is taken iff
    ``j < a``. Vectorised: :meth:`apply` replaces each entry of an array of outputs of ``M'`` by an
    independent uniform draw with probability ``gamma`` (one bounded uniform integer per entry for
    the decision; with ``strict=True`` a uniform output is drawn for every entry, used or not, so
    the work does not depend on the decisions).

    >>> m = UniformMixture(Fraction(1, 4), 3)
    >>> m.pmf([Fraction(1), Fraction(0), Fraction(0)])
    [Fraction(5, 6), Fraction(1, 12), Fraction(1, 12)]
    """

    def __init__(self, gamma: Fraction, size: int) -> None:
        gamma = Fraction(gamma)
        if not 0 < gamma < 1 or gamma.denominator >= 1 << 63:
            raise ValidationError(
                "gamma", "UniformMixture", "a rational in (0, 1) with denominator < 2**63", gamma
            )
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size < 1 << 63:
            raise ValidationError("size", "UniformMixture", "an integer in [1, 2**63)", size)
        self.gamma = gamma
        self.size = size

    @property
    def min_probability(self) -> Fraction:
        """``min_r Pr[D = r] = 1 / size``."""
        return Fraction(1, self.size)

    def delta_bound(self, ratio: Fraction) -> Fraction:
        """The largest total-variation distance inequality (1) allows at ``e^eps = ratio``."""
        return mixing_delta_bound(ratio, self.gamma, self.min_probability)

    def pmf(self, approx: Sequence[Fraction]) -> list[Fraction]:
        """Output probabilities of ``M*`` given those of ``M'`` over ``0..size-1``."""
        if len(approx) != self.size:
            raise ValidationError(
                "approx", "UniformMixture.pmf", f"{self.size} entries", len(approx)
            )
        u = self.gamma / self.size
        return [(1 - self.gamma) * Fraction(x) + u for x in approx]

    def decide(self, rng: RandomSource, count: int) -> npt.NDArray[np.bool_]:
        """``count`` independent exact Bernoulli(gamma) decisions (True: release uniform)."""
        a, b = self.gamma.numerator, self.gamma.denominator
        return uniform_array(rng, b, count) < a

    def apply(self, values: I64, rng: RandomSource, *, strict: bool = False) -> I64:
        """Release ``values`` (outputs of ``M'``) through Algorithm 1."""
        values = np.asarray(values, dtype=np.int64)
        mix = self.decide(rng, values.shape[0])
        out = values.copy()
        if strict:
            uniform = self._uniform(rng, values.shape[0])
            out[mix] = uniform[mix]
        elif mix.any():
            out[mix] = self._uniform(rng, int(mix.sum()))
        return out

    def _uniform(self, rng: RandomSource, count: int) -> I64:
        return uniform_array(rng, self.size, count)


def mixing_delta(epsilon: Fraction, beta2: Fraction, n: int, size: int) -> Fraction:
    """Algorithm 8's statistical-distance target (module notes):
    ``(eps/3) beta2 / (1 - beta2) n! / (|X| (n + 1))**n``.

    >>> mixing_delta(Fraction(1), Fraction(1, 2), 1, 4)  # (1/3) * 1 * 1 / 8
    Fraction(1, 24)
    """
    return Fraction(*mixing_delta_parts(epsilon, beta2, n, size))


def mixing_delta_parts(epsilon: Fraction, beta2: Fraction, n: int, size: int) -> tuple[int, int]:
    """:func:`mixing_delta` as an unreduced ``(numerator, denominator)``: both have about
    ``n log2(|X| n)`` bits, and reducing them (a gcd) took minutes at ``n = 10**5``.

    >>> mixing_delta_parts(Fraction(1), Fraction(1, 2), 1, 4)
    (1, 24)
    """
    num = epsilon.numerator * beta2.numerator * math.factorial(n)
    core = 3 * epsilon.denominator * (beta2.denominator - beta2.numerator) * (n + 1) ** n
    if size & (size - 1) == 0:  # |X| = 2**B: a shift instead of a power of a huge number
        return num, core << ((size.bit_length() - 1) * n)
    return num, core * size**n
