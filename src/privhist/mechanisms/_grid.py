"""The dyadic grid of reporting probabilities and the lazy Bernoulli draw on it, shared by
optimal selection and private weighted sampling.

Grid. Reporting probabilities are rounded *down* to multiples of ``2**-B``. ``B = 62`` while
``delta >= 2**-62`` per key; below that ``B = 62 + ceil(log2(1 / delta))``, so the first
probability of the optimal recursion, ``pi_1 = delta`` (Desfontaines et al. 2022; Cohen, Geri,
Sarlos & Stemmer, Algorithm 3 / Lemma 4.2), keeps 62 significant bits at any delta.

Draw. A Bernoulli(``N / D``) with ``N <= D`` integers of any size is decided by a uniform real
``U = 0.w1 w2 ...`` of independent 64-bit words: ``w1`` is compared with ``floor(N 2**64 / D)``
and only a tie draws the next words, compared with the next exact binary digits of ``N / D``
(:func:`privhist.noise.bernoulli.compare_table`, :class:`privhist.noise._exact.LazyUniform`).
So ``P[True] = N / D`` exactly, at an expected cost of ``1 + 2**-64 + ...`` words per draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from privhist.core.random import RandomSource
from privhist.noise._exact import WORD_BITS, LazyUniform, Oracle, capped, rational_oracle
from privhist.noise.bernoulli import compare_table

#: reporting probabilities are multiples of 2**-ONE_BITS while delta >= 2**-ONE_BITS
ONE_BITS = 62
ONE = 1 << ONE_BITS


def grid_bits(delta: Fraction) -> int:
    """The grid ``2**-B`` of the reporting probabilities for ``delta`` per key (``0 < delta < 1``):
    ``B = 62`` while ``delta >= 2**-62``, else ``62 + ceil(log2(1 / delta))``.

    >>> grid_bits(Fraction(1, 1000)), grid_bits(Fraction(1, 2**70)), grid_bits(Fraction(3, 2**72))
    (62, 132, 133)
    """
    if delta >= Fraction(1, ONE):
        return ONE_BITS
    # smallest L with 2**-L <= delta, i.e. L = ceil(log2(1 / delta))
    q, p = delta.denominator, delta.numerator
    L = (q // p).bit_length() - 1
    if Fraction(1, 1 << L) > delta:
        L += 1
    return ONE_BITS + L


class LazyBernoulliTable:
    """Exact Bernoulli(``nums[j] / dens[j]``) draws for indices ``j`` (module notes).

    ``nums`` and ``dens`` are Python integers of any size, ``0 <= nums[j] <= dens[j]``,
    ``dens[j] >= 1``; ``dens`` may be one integer shared by every entry.

    >>> from privhist.core.random import SeededRandom
    >>> t = LazyBernoulliTable([0, 1, 2**200], 2**200)
    >>> t.draw(np.array([0, 2, 2, 1]), SeededRandom(3)).tolist()
    [False, True, True, False]
    """

    def __init__(self, nums: Sequence[int], dens: Sequence[int] | int) -> None:
        self.nums = [int(x) for x in nums]
        den_list = [int(dens)] * len(self.nums) if isinstance(dens, int) else [int(x) for x in dens]
        if len(den_list) != len(self.nums):
            raise ValueError("LazyBernoulliTable: nums and dens differ in length")
        if any(d < 1 or not 0 <= n <= d for n, d in zip(self.nums, den_list, strict=True)):
            raise ValueError("LazyBernoulliTable: needs 0 <= nums[j] <= dens[j] and dens[j] >= 1")
        self.dens = den_list
        #: first-word thresholds floor(N 2**64 / D), capped to a uint64; ties go to the oracle
        self.first_words = np.array(
            [capped((n << WORD_BITS) // d) for n, d in zip(self.nums, self.dens, strict=True)],
            dtype=np.uint64,
        )

    def oracle(self, j: int) -> Oracle:
        """The exact binary digits of ``nums[j] / dens[j]``."""
        return rational_oracle(self.nums[j], self.dens[j])

    def draw(self, index: npt.NDArray[np.int64], rng: RandomSource) -> npt.NDArray[np.bool_]:
        """One exact Bernoulli(``nums[j] / dens[j]``) per entry ``j`` of ``index``."""
        idx = np.asarray(index, dtype=np.int64)
        if idx.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        out: npt.NDArray[np.bool_] = compare_table(self.first_words, idx, self.oracle, rng)
        return out


class LazyInversion:
    """Exact inversion sampling against thresholds ``t_k = cums[k] / 2**bits`` (non-decreasing
    Python integers ``0 <= cums[k] <= 2**bits``): :meth:`draw` returns, for each of ``n``
    independent uniforms ``U``, the number ``K`` of thresholds with ``t_k <= U``.

    One 64-bit word ``w`` per draw decides every ``k`` with ``floor(t_k 2**64) != w`` (below:
    ``t_k <= U``; above: ``U < t_k``); the thresholds whose first word equals ``w`` (a tie, a
    contiguous run because ``t`` is non-decreasing) are compared with the same
    :class:`~privhist.noise._exact.LazyUniform` against their exact binary digits. So
    ``P[K >= k] = P[U >= t_(k-1)] = 1 - t_(k-1)`` exactly: ``P[K = k] = t_k - t_(k-1)``
    (with ``t_(-1) = 0``).

    >>> from privhist.core.random import SeededRandom
    >>> inv = LazyInversion([2**199, 2**200], 200)  # t = (1/2, 1)
    >>> sorted(set(inv.draw(1000, SeededRandom(2)).tolist()))
    [0, 1]
    """

    def __init__(self, cums: Sequence[int], bits: int) -> None:
        self.cums = [int(x) for x in cums]
        self.bits = bits
        one = 1 << bits
        if any(not 0 <= c <= one for c in self.cums) or any(
            a > b for a, b in zip(self.cums, self.cums[1:], strict=False)
        ):
            raise ValueError("LazyInversion: needs non-decreasing cums in [0, 2**bits]")
        self.first_words = np.array(
            [capped((c << WORD_BITS) >> bits) for c in self.cums], dtype=np.uint64
        )

    def draw(self, n: int, rng: RandomSource) -> npt.NDArray[np.int64]:
        """``K`` for ``n`` independent uniforms (class notes)."""
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        words = rng.uint64(n)
        # thresholds with first word < w are <= U for sure; ties are [lo, hi)
        lo = np.searchsorted(self.first_words, words, side="left").astype(np.int64)
        hi = np.searchsorted(self.first_words, words, side="right").astype(np.int64)
        out = lo.copy()
        den = 1 << self.bits
        for i in np.flatnonzero(hi > lo).tolist():
            u = LazyUniform(rng, int(words[i]))
            k = int(lo[i])
            while k < int(hi[i]) and not u.less(rational_oracle(self.cums[k], den)):
                k += 1  # t_k <= U; the next threshold is no smaller
            out[i] = k
        return out
