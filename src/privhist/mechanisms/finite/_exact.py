"""Exact integer helpers shared by the finite-computer samplers.

Nothing here uses floating point. Uniform integers come from a
:class:`~privhist.core.random.RandomSource` and are exact (rejection, never modulo reduction):
they play the role of the oracle of Balcer & Vadhan, Section 2.3, "given ``d`` returns a uniformly
random integer between 1 and ``d``". Rejection is the only loop here whose number of iterations is
not fixed; each attempt succeeds with probability above 1/2, as in the paper's model where the
oracle is one step.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource

#: bounds below this use RandomSource.uniform_below (vectorised, exact)
_SMALL = 1 << 63
#: bounds up to this many bits use RandomSource.randbelow; larger ones are assembled from words
#: with int.from_bytes (randbelow concatenates words one by one, quadratic in the word count)
_RANDBELOW_BITS = 4096


def ceil_log2(numerator: int, denominator: int = 1) -> int:
    """The smallest integer ``K >= 0`` with ``2**K >= numerator / denominator``.

    Exact for positive integers: ``2**K >= a/b`` iff ``2**K >= ceil(a/b)``, and the smallest such
    ``K`` is the bit length of ``ceil(a/b) - 1``.

    >>> [ceil_log2(a) for a in (1, 2, 3, 4, 5)]
    [0, 1, 2, 2, 3]
    >>> ceil_log2(20, 1)  # epsilon = 0.1 gives K = ceil(log2(2 / 0.1)) = 5
    5
    """
    if numerator < 1 or denominator < 1:
        raise ValueError("ceil_log2 needs positive integers")
    return max(0, (-(-numerator // denominator) - 1).bit_length())


def fraction_str(x: Fraction) -> str:
    """``"a/b"`` (always with a denominator, also for integers)."""
    return f"{x.numerator}/{x.denominator}"


def random_bits(rng: RandomSource, nbits: int) -> int:
    """A uniform integer in ``[0, 2**nbits)``: ``ceil(nbits / 64)`` words, first word most
    significant, surplus low bits dropped (the word order of ``RandomSource.randbelow``)."""
    if nbits <= 0:
        return 0
    nwords = (nbits + 63) // 64
    words = rng.uint64(nwords)
    value = int.from_bytes(words.astype(">u8").tobytes(), "big")
    return value >> (nwords * 64 - nbits)


def uniform_int(rng: RandomSource, bound: int) -> int:
    """One exact uniform integer in ``[0, bound)`` for an int ``bound >= 1`` of any size."""
    if bound < 1:
        raise ValidationError("bound", "uniform_int", "an integer >= 1", bound)
    if bound < _SMALL:
        return int(rng.uniform_below(bound)[0])
    nbits = (bound - 1).bit_length()
    if nbits <= _RANDBELOW_BITS:
        return rng.randbelow(bound)
    while True:  # acceptance probability bound / 2**nbits > 1/2
        value = random_bits(rng, nbits)
        if value < bound:
            return value


def uniform_array(rng: RandomSource, bound: int, size: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``size`` exact uniform integers in ``[0, bound)`` for ``1 <= bound < 2**63``."""
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    return rng.uniform_below(bound, size)


def floor_scaled(
    value: int, numerator: int, denominator: int, shift: int, spare: int = 128
) -> tuple[int, int]:
    """``floor(value * numerator / (denominator * 2**shift))`` for a huge ``value`` and a small
    fraction ``numerator / denominator`` in ``[0, 1]``, without multiplying the huge number.

    With ``value = h 2**e + l`` (``e = shift - spare``, ``0 <= l < 2**e``) the quantity is
    ``h num / (den 2**spare) + l num / (den 2**shift)`` and the second term lies in
    ``[0, 2**-spare)``. So the floor is ``floor(h num / (den 2**spare))`` unless the fractional
    part of that is within ``2**-spare`` of 1; only then is the exact product formed. Returns the
    floor and 1 if the exact path was needed (for tests), else 0.
    """
    if shift <= spare:
        return (value * numerator) // (denominator << shift), 1
    head = value >> (shift - spare)
    den = denominator << spare
    q, r = divmod(head * numerator, den)
    # value lies in [q + r/den, q + r/den + 2**-spare): the floor is q when r/den + 2**-spare <= 1
    if (den - r) << spare >= den:
        return q, 0
    return (value * numerator) // (denominator << shift), 1
