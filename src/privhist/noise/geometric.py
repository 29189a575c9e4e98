"""Exact geometric sampler: ``P[G >= k] = exp(-x k)`` for rational ``x > 0``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise import _checks
from privhist.noise._tables import TABLE_MAX, geometric_table, invert, truncated_table

I64 = npt.NDArray[np.int64]

#: smallest supported rate ``x`` (largest scale ``1 / x``): samples stay far inside int64
MIN_RATE = Fraction(1, 1 << 40)
#: ``G = (G mod 2**SPLIT_BITS) + 2**SPLIT_BITS * (G >> SPLIT_BITS)`` for small rates
SPLIT_BITS = 12


def geometric(x: Fraction | int, rng: RandomSource, size: _checks.Shape) -> npt.NDArray[np.int64]:
    """Exact geometric samples: failures before the first success, success probability
    ``1 - exp(-x)``, i.e. ``P[G >= k] = exp(-x k)`` for ``k = 0, 1, 2, ...``.

    This is the distribution of ``V`` in Canonne, Kamath & Steinke (2020) (CKS), Algorithm 2
    (there with ``x = 1``, sampled as a loop of Bernoulli(``exp(-1)``) trials, Algorithm 1).

    Args:
        x: Rate, an int or Fraction with ``2**-40 <= x``. For a privacy mechanism round a
            float rate *down* (more noise) with :func:`~privhist.noise.rational_at_most`.
        rng: Source of randomness.
        size: Output shape.

    Returns:
        int64 array.

    Exactness: inversion, ``G = #{k >= 1 : U < exp(-x k)}`` for one uniform ``U``, so
    ``P[G >= k] = P[U < exp(-x k)] = exp(-x k)``. The comparisons use the first 64-bit word of
    ``U`` against exact floors ``floor(exp(-x k) 2**64)`` and are finished exactly on ties
    (probability at most ``(45 / x + 1) 2**-64`` per sample). For ``45 / x > 2**16`` the table
    would be too large, so ``G`` is split as ``L + 4096 H`` with ``L = G mod 4096`` and
    ``H = G // 4096`` *independent* (the pmf ``(1 - a) a**(4096 h + l)``, ``a = exp(-x)``,
    factorises), ``L`` truncated geometric on ``{0..4095}`` (its own exact table) and ``H``
    geometric with rate ``4096 x`` (recursively). Cost: one word per sample per level.

    >>> from privhist.core.random import SeededRandom
    >>> geometric(1, SeededRandom(0), 5).dtype
    dtype('int64')
    """
    fn = "geometric"
    xf = _checks.positive_rational(x, fn, "x")
    if xf < MIN_RATE:
        raise ValidationError("x", fn, ">= 2**-40", x)
    dims = _checks.shape(size, fn)
    return sample_geometric(xf, rng, _checks.count(dims)).reshape(dims)


def table_fits(x: Fraction) -> bool:
    """Whether the single inversion table for rate ``x`` has at most ``TABLE_MAX`` entries."""
    return 45 * x.denominator <= TABLE_MAX * x.numerator


def sample_geometric(x: Fraction, rng: RandomSource, n: int) -> I64:
    """``n`` geometric samples with ``P[G >= k] = exp(-x k)`` (validated ``x``)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if table_fits(x):
        return invert(geometric_table(x), rng, n)
    m = 1 << SPLIT_BITS
    low = invert(truncated_table(x, m), rng, n)
    high = sample_geometric(x * m, rng, n)
    if (high >= np.int64(1 << (62 - SPLIT_BITS))).any():
        raise OverflowError("a geometric sample exceeds the int64 range")
    return low + (high << np.int64(SPLIT_BITS))
