"""Exact sampling from the permute-and-flip mechanism over integer scores, many draws at once.

**The mechanism** (McKenna & Sheldon, "Permute-and-Flip: A new mechanism for differentially
private selection", NeurIPS 2020, Algorithm 1): candidates ``r`` with integer scores ``s_r``
(lower is better, best ``s*``) are visited in a uniformly random order, and candidate ``r`` is
output with probability ``p_r = exp(-gamma (s_r - s*))`` when visited (``gamma = epsilon / (2
Delta)``, ``Delta`` the score's sensitivity); the best candidates have ``p = 1``, so the walk
stops. It is ``epsilon``-DP (their Theorem 1) and its expected score gap is never worse than the
exponential mechanism's at the same epsilon (their Theorem 2); it has the law of report-noisy-max
with exponential noise (Ding, Kifer, Wang, Zhang, "The permute-and-flip mechanism is identical to
report-noisy-max with exponential noise", 2021).

**Sampling without visiting every candidate.** Flip every candidate's coin first (independent
Bernoulli(``p_r``)), then take the first *heads* in the random order: the coins do not depend on
the order, so this is the same law, and the first heads of a uniform order is a uniform choice
among the heads. Candidates given as *blocks* of equal score (``sizes[i]`` candidates of
``scores[i]``) need only the number of heads per block, ``H_i ~ Binomial(sizes[i], p_i)``: the
output is block ``i`` with probability ``H_i / sum H``, then a uniform position in the block (the
heads of a block are a uniform subset of it, and a uniform head of them a uniform position).

**Exactness.** ``H_i`` is drawn by :func:`binomial_exp`: the trials ``U_j < p`` of uniform reals
compared with ``p = exp(-x)`` one binary digit at a time, all undecided trials of an entry at once
(about half are decided per digit; the split is an exact Binomial(``m``, 1/2)), as
:func:`privhist.noise.binomial.binomial` does for rational ``p``. The digits of ``exp(-x)`` are
exact: :func:`~privhist.noise._exact.exp_neg_floor` gives ``floor(exp(-x) 2**(64 w))`` for the
``w``-th word; ``exp(-x)`` is irrational for rational ``x > 0`` (Lindemann), so its expansion never
ends and ``U_j = p`` has probability 0. The choices among heads are exact uniform integers
(:meth:`~privhist.core.random.RandomSource.uniform_below`). No floating point touches a draw.
"""

from __future__ import annotations

import bisect
import functools
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise._exact import WORD_BITS, exp_neg_floor
from privhist.noise.binomial import binomial_half

I64 = npt.NDArray[np.int64]

_MASK = (1 << WORD_BITS) - 1
#: beyond this exponent ``exp(-x) < 2**-66``: the first word of its digits is 0
_ZERO_WORD = 46


#: bits of the running products of :func:`_first_words`
_PRODUCT_BITS = 192


def _first_words(gamma: Fraction, gaps: list[int], bits: int = _PRODUCT_BITS) -> list[int]:
    """``[_word(gamma * d, 0) for d in gaps]`` for ascending positive integer ``gaps``, from
    running products instead of one exact evaluation per gap (about 16 microseconds each).

    With ``s = 2**bits``, ``R = floor(exp(-gamma) s)`` (exact) and ``P_0 = s``, the products
    ``P_d = floor(P_(d-1) R / s)`` satisfy ``P_d <= T_d < P_d + 2 d`` for ``T_d = exp(-gamma d) s``:
    ``P_d <= P_(d-1) R / s <= P_(d-1) exp(-gamma) <= T_d`` by induction, and ``P_d > P_(d-1) R / s
    - 1 > P_(d-1) exp(-gamma) - P_(d-1) / s - 1 >= P_(d-1) exp(-gamma) - 2`` while
    ``T_d - P_(d-1) exp(-gamma) = exp(-gamma) (T_(d-1) - P_(d-1))``, so the error grows by less
    than 2 a step. The word ``floor(T_d / 2**(bits - 64))`` is therefore decided when ``P_d`` and
    ``P_d + 2 d`` give the same one; otherwise (about ``d 2**(65 - bits)`` of the time) it is
    evaluated exactly. Gaps beyond ``_ZERO_WORD / gamma`` have word 0, as in :func:`_word`. Sparse
    gaps (the products would take far more steps than there are gaps) are evaluated one by one.
    """
    limit = _ZERO_WORD * gamma.denominator // gamma.numerator  # gamma d <= _ZERO_WORD
    needed = gaps[: bisect.bisect_right(gaps, limit)]
    zeros = [0] * (len(gaps) - len(needed))
    if not needed or needed[-1] > 64 * len(needed) + 4096:
        return [_word(gamma * d, 0) for d in needed] + zeros
    shift = bits - WORD_BITS
    ratio = exp_neg_floor(gamma, bits)
    product, d = 1 << bits, 0
    out: list[int] = []
    for gap in needed:
        while d < gap:
            product = (product * ratio) >> bits
            d += 1
        low, high = product >> shift, (product + 2 * d) >> shift
        out.append(low if low == high else _word(gamma * d, 0))
    return out + zeros


@functools.lru_cache(maxsize=1 << 16)
def _word(x: Fraction, w: int) -> int:
    """Word ``w`` (0 first) of the binary digits of ``exp(-x)``, ``x > 0`` rational: bits
    ``64 w + 1 .. 64 (w + 1)`` after the point."""
    if w == 0 and x > _ZERO_WORD:
        return 0
    return exp_neg_floor(x, WORD_BITS * (w + 1)) & _MASK


def binomial_exp(n: Any, gaps: Any, gamma: Fraction, rng: RandomSource) -> I64:
    """Exact Binomial(``n_i``, ``exp(-gamma gaps_i)``) for every entry (module notes): ``n`` and
    ``gaps`` integer arrays of one length (``0 <= n_i <= 2**62``, ``gaps_i >= 0``), ``gamma > 0``
    rational.

    >>> from privhist.core.random import SeededRandom
    >>> binomial_exp([5, 0, 7], [0, 1, 10**6], Fraction(1), SeededRandom(1)).tolist()
    [5, 0, 0]
    """
    fn = "binomial_exp"
    trials = np.asarray(n, dtype=np.int64).reshape(-1)
    g = np.asarray(gaps, dtype=np.int64).reshape(-1)
    gamma = Fraction(gamma)
    if g.shape != trials.shape:
        raise ValidationError("gaps", fn, f"{trials.shape[0]} gaps", g.shape[0])
    if trials.size and (int(trials.min()) < 0 or int(g.min()) < 0):
        raise ValidationError("n", fn, "trials and gaps >= 0", (int(trials.min()), int(g.min())))
    if gamma <= 0:
        raise ValidationError("gamma", fn, "> 0", gamma)
    successes = np.where(g == 0, trials, 0)  # p = 1
    m = np.where(g == 0, 0, trials)
    active = np.flatnonzero(m > 0)
    distinct, which = np.unique(g[active], return_inverse=True)
    which = which.reshape(-1)
    w = 0
    while active.size:
        if w == 0:
            table = np.asarray(_first_words(gamma, distinct.tolist()), dtype=np.uint64)
        else:
            table = np.asarray([_word(gamma * int(d), w) for d in distinct.tolist()], np.uint64)
        words = table[which]
        for k in range(WORD_BITS - 1, -1, -1):
            digit = ((words >> np.uint64(k)) & np.uint64(1)).astype(bool)
            zeros = binomial_half(m[active], rng)  # undecided trials whose next digit is 0
            # digit 1: those trials are below p (successes), the others still agree with p;
            # digit 0: the others are above p (failures), those still agree with p
            successes[active] += np.where(digit, zeros, 0)
            m[active] = np.where(digit, m[active] - zeros, zeros)
            keep = m[active] > 0
            if not keep.all():
                active, words, which = active[keep], words[keep], which[keep]
                if not active.size:
                    break
        w += 1
    return successes


def permute_and_flip_blocks(
    owner: Any, scores: Any, sizes: Any, gamma: Fraction, rng: RandomSource
) -> tuple[I64, I64]:
    """One permute-and-flip draw per group over its candidates given as blocks (module notes):
    block ``i`` belongs to group ``owner[i]`` (non-decreasing, groups ``0 .. G - 1`` each with at
    least one block) and holds ``sizes[i] >= 1`` candidates of integer score ``scores[i]`` (lower
    is better). Returns, per group, the block drawn and the position in it.

    >>> from privhist.core.random import SeededRandom
    >>> rng = SeededRandom(2)
    >>> block, pos = permute_and_flip_blocks([0, 0, 1], [3, 0, 9], [2, 1, 4], Fraction(50), rng)
    >>> block.tolist(), bool(0 <= pos[1] < 4)
    ([1, 2], True)
    """
    fn = "permute_and_flip_blocks"
    own = np.asarray(owner, dtype=np.int64).reshape(-1)
    s = np.asarray(scores, dtype=np.int64).reshape(-1)
    n = np.asarray(sizes, dtype=np.int64).reshape(-1)
    gamma = Fraction(gamma)
    if gamma <= 0:
        raise ValidationError("gamma", fn, "> 0", gamma)
    if not (own.shape == s.shape == n.shape) or own.size == 0:
        raise ValidationError("sizes", fn, "one owner, score and size per block", n.shape)
    if (n < 1).any():
        raise ValidationError("sizes", fn, "blocks of at least 1 candidate", int(n.min()))
    if own[0] != 0 or (np.diff(own) < 0).any() or (np.diff(own) > 1).any():
        raise ValidationError("owner", fn, "groups 0, 1, ... in order, none empty", own[:5])
    n_groups = int(own[-1]) + 1
    best = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, own, s)
    heads = binomial_exp(n, s - best[own], gamma, rng)
    cum = np.cumsum(heads)
    ends = np.cumsum(np.bincount(own, minlength=n_groups))
    total = cum[ends - 1] - np.concatenate([[0], cum[ends[:-1] - 1]])  # heads per group, >= 1
    before = cum[ends - 1] - total
    r = rng.uniform_below(total)
    block = np.searchsorted(cum, before + r, side="right").astype(np.int64)
    position = rng.uniform_below(n[block])
    return block, position


__all__ = ["binomial_exp", "permute_and_flip_blocks"]
