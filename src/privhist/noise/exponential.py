"""Exact sampling from the exponential mechanism over integer scores.

The law is ``Pr[t] = n_t exp(-gamma s_t) / W`` over *levels* ``t``: distinct integer scores
``s_0 < s_1 < ...`` (lower is better), each shared by ``n_t >= 1`` candidates, with ``gamma > 0``
rational and ``W`` the normaliser. A candidate is then one of the level's ``n_t``, uniformly.
This is the exponential mechanism of McSherry & Talwar (2007) for the utility ``-s`` with
``gamma = epsilon / (2 Delta)``, ``Delta`` the score's sensitivity.

**Exactness.** The level is drawn by inversion: ``t`` is the first level with ``U < F_t``, ``U``
a uniform real whose 64-bit words are drawn lazily (:class:`~privhist.noise._exact.LazyUniform`)
and ``F_t = sum_{i <= t} w_i / W`` the cumulative law (``w_i = n_i exp(-gamma (s_i - s_0))``).
Each comparison ``U < F_t`` is decided from rigorous integer bounds of ``F_t * 2**prec``
(:func:`_less`: the bounds are tightened and ``U``'s words drawn until they separate):

* ``exp(-gamma d)`` for the needed differences ``d`` comes from
  :func:`~privhist.noise._exact.exp_bounds`, and the weights from products of those bounds in
  increasing order of score, every product rounded outwards, at ``prec + 64`` bits;
* once a weight's upper bound times the candidates left is below ``2**-(prec + 16)`` of the
  total, the remaining weights are bounded by ``[0, that upper bound]`` each (scores increase,
  so weights decrease), which keeps the work proportional to the levels that matter;
* ``F_t = A / (A + R)`` grows with ``A = sum_{i <= t} w_i`` and falls with the rest ``R``:
  ``A_lo / (A_lo + R_hi) <= F_t <= A_hi / (A_hi + R_lo)``.

``F_t`` is irrational for every ``t`` but the last (a ratio of two distinct integer polynomials in
the transcendental ``exp(-gamma)``, Lindemann's theorem), so ``U = F_t`` has probability 0 and
the comparisons terminate with probability 1; the last level needs no comparison. So ``Pr[t] =
F_t - F_{t-1}`` exactly, and the uniform choice within the level is
:meth:`~privhist.core.random.RandomSource.randbelow`.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction
from typing import Any

import numpy as np

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise._exact import WORD_BITS, Bounds, LazyUniform, ceil_div, exp_bounds

#: extra bits carried by the products of weight bounds
GUARD = 64
#: the weights left out are below ``2**-(prec + TAIL)`` of the total
TAIL = 16


@functools.lru_cache(maxsize=1 << 16)
def _exp_step(gamma: Fraction, d: int, w: int) -> tuple[int, int]:
    """:func:`~privhist.noise._exact.exp_bounds` of ``-gamma d`` at ``w`` bits, kept: the draws of
    one release (one per group) share ``gamma`` and mostly the same score differences."""
    return exp_bounds(-gamma * d, w)


class _Weights:
    """Rigorous bounds of the cumulative weights at one precision (see the module notes)."""

    def __init__(self, scores: list[int], counts: list[int], gamma: Fraction, prec: int) -> None:
        w = prec + GUARD
        one = 1 << w
        total_count = sum(counts)
        # the total is at least one weight of 2**w: stop when the rest is below 2**(w - prec - TAIL)
        cutoff = 1 << (GUARD - TAIL)
        lo_cum: list[int] = []
        hi_cum: list[int] = []
        lo_acc = hi_acc = 0
        lo_e, hi_e = one, one  # bounds of exp(-gamma (s_t - s_0)) * 2**w
        steps: dict[int, tuple[int, int]] = {}
        remaining = total_count
        cut = len(scores)
        for t, (s, n) in enumerate(zip(scores, counts, strict=True)):
            if t:
                d = s - scores[t - 1]
                if d not in steps:
                    steps[d] = _exp_step(gamma, d, w)
                a, b = steps[d]
                lo_e = (lo_e * a) >> w
                hi_e = ceil_div(hi_e * b, one)
            if hi_e * remaining < cutoff and t:
                cut = t
                break
            lo_acc += n * lo_e
            hi_acc += n * hi_e
            lo_cum.append(lo_acc)
            hi_cum.append(hi_acc)
            remaining -= n
        self.cut = cut
        self.tail_hi = hi_e  # every weight from the cut on is at most this
        self.lo_cum, self.hi_cum = lo_cum, hi_cum
        self.count_cum = np.cumsum(np.asarray(counts, dtype=object)).tolist()
        self.lo_total = lo_acc
        self.hi_total = hi_acc + (hi_e * remaining if cut < len(scores) else 0)
        self.shift = GUARD

    def cumulative(self, t: int) -> tuple[int, int]:
        """Bounds ``(A_lo, A_hi)`` of the weights of levels ``0..t``."""
        if t < self.cut:
            return self.lo_cum[t], self.hi_cum[t]
        beyond = self.count_cum[t] - self.count_cum[self.cut - 1]
        return self.lo_cum[-1], self.hi_cum[-1] + self.tail_hi * beyond


class ExponentialLevels:
    """The law over levels (module notes) with its exact inversion sampler."""

    def __init__(self, scores: Any, counts: Any, gamma: Fraction) -> None:
        s = [int(x) for x in np.asarray(scores, dtype=np.int64).tolist()]
        n = [int(x) for x in np.asarray(counts, dtype=np.int64).tolist()]
        fn = "exponential_mechanism"
        if not s or len(s) != len(n):
            raise ValidationError("scores", fn, "as many scores as counts, at least one", len(s))
        if any(b <= a for a, b in itertools.pairwise(s)):
            raise ValidationError("scores", fn, "distinct and increasing", s[:5])
        if min(n) < 1:
            raise ValidationError("counts", fn, "at least 1 candidate per level", min(n))
        gamma = Fraction(gamma)
        if gamma <= 0:
            raise ValidationError("gamma", fn, "> 0", gamma)
        self.scores, self.counts, self.gamma = s, n, gamma
        self._cache: dict[int, _Weights] = {}

    def _weights(self, prec: int) -> _Weights:
        if prec not in self._cache:
            self._cache[prec] = _Weights(self.scores, self.counts, self.gamma, prec)
        return self._cache[prec]

    def cdf_bounds(self, t: int, prec: int) -> tuple[int, int]:
        """Integers ``lo <= F_t * 2**prec <= hi``."""
        wt = self._weights(prec)
        a_lo, a_hi = wt.cumulative(t)
        r_lo = wt.lo_total - a_lo
        r_hi = wt.hi_total - a_hi
        r_lo, r_hi = max(r_lo, 0), max(r_hi, 0)
        lo = (a_lo << prec) // (a_lo + r_hi) if a_lo + r_hi else 0
        hi = ceil_div(a_hi << prec, a_hi + r_lo) if a_hi + r_lo else 1 << prec
        return lo, min(hi, 1 << prec)

    def _bounds_of(self, t: int) -> Bounds:
        def bounds(prec: int) -> tuple[int, int]:
            return self.cdf_bounds(t, prec)

        return bounds

    def sample_level(self, rng: RandomSource) -> int:
        """One level, exactly (inversion over the levels, binary search on one uniform)."""
        u = LazyUniform(rng)
        lo, hi = 0, len(self.scores) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if _less(u, self._bounds_of(mid)):
                hi = mid
            else:
                lo = mid + 1
        return lo


def _less(u: LazyUniform, bounds: Bounds) -> bool:
    """Whether ``U < F`` for ``F`` given by rigorous bounds ``lo <= F * 2**prec <= hi``.

    With ``u_j`` the first ``j`` words of ``U`` (``u_j <= U * 2**(64 j) < u_j + 1``): bounds at
    ``prec = 64 j + g`` with ``(u_j + 1) 2**g <= lo`` prove ``U < F``, and ``u_j 2**g >= hi``
    proves ``U >= F``. Otherwise the bounds are tightened (``g`` doubled) until they are narrower
    than ``U``'s interval, and then ``U``'s next word is drawn. Unlike a floor oracle this never
    needs ``F``'s own digits, only to separate ``F`` from ``U`` (a ``F`` within ``2**-prec`` of 1
    is then no harder than any other)."""
    j = 1
    while True:
        bits = WORD_BITS * j
        u_j = u.prefix(j)
        guard = 32
        while True:
            lo, hi = bounds(bits + guard)
            if (u_j + 1) << guard <= lo:
                return True
            if u_j << guard >= hi:
                return False
            if hi - lo < 1 << guard or guard >= 1 << 12:
                break
            guard *= 2
        j += 1


def exponential_blocks(
    scores: Any, sizes: Any, gamma: Fraction, rng: RandomSource
) -> tuple[int, int]:
    """One candidate drawn with probability proportional to ``exp(-gamma s)``, the candidates
    given as blocks: block ``i`` holds ``sizes[i]`` candidates of score ``scores[i]``. Returns
    ``(block, position in the block)``, exactly (module notes): the level by inversion, then one
    of the level's candidates uniformly."""
    s = np.asarray(scores, dtype=np.int64).reshape(-1)
    n = np.asarray(sizes, dtype=np.int64).reshape(-1)
    if s.size == 0 or s.shape != n.shape or (n < 1).any():
        raise ValidationError("sizes", "exponential_blocks", "blocks of at least 1 candidate", n)
    levels, inverse = np.unique(s, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = np.zeros(levels.size, dtype=np.int64)  # integers: no float on the release path
    np.add.at(counts, inverse, n)
    t = ExponentialLevels(levels, counts, gamma).sample_level(rng)
    members = np.flatnonzero(inverse == t)
    r = rng.randbelow(int(counts[t]))
    ends = np.cumsum(n[members])
    k = int(np.searchsorted(ends, r, side="right"))
    return int(members[k]), int(r - (ends[k] - n[members[k]]))


def exponential_mechanism(scores: Any, gamma: Fraction, rng: RandomSource) -> int:
    """The index of one candidate drawn with probability proportional to ``exp(-gamma s)``
    from the integer scores ``s`` of every candidate (module notes), exactly."""
    arr = np.asarray(scores, dtype=np.int64).reshape(-1)
    if arr.size == 0:
        raise ValidationError("scores", "exponential_mechanism", "at least one candidate", 0)
    block, _ = exponential_blocks(arr, np.ones(arr.size, dtype=np.int64), gamma, rng)
    return block


__all__ = ["ExponentialLevels", "exponential_blocks", "exponential_mechanism"]
