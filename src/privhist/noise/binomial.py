"""Exact binomial sampler for rational success probabilities, by binary-digit splitting.

Each binary digit of ``p`` needs Binomial(``m``, 1/2) draws: popcounts of ``m`` random bits for
``m < HALF_CUTOFF`` and, above, rejection sampling in O(1) expected words per draw
(:mod:`privhist.noise._binomial_large`). :func:`binomial_popcount` keeps the all-popcount path
(linear in ``n``) for comparisons.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise import _binomial_direct, _checks
from privhist.noise._binomial_large import binomial_half_large
from privhist.noise._exact import WORD_BITS, LazyUniform, rational_oracle

I64 = npt.NDArray[np.int64]

#: largest number of trials per entry
MAX_TRIALS = 1 << 62
#: random words drawn at once (8 MiB)
_BATCH_WORDS = 1 << 20
_ALL_ONES = np.uint64((1 << 64) - 1)
#: from this many trials on, Binomial(m, 1/2) is drawn by rejection instead of a popcount
HALF_CUTOFF = 1 << 11  # about the break-even with SecureRandom (benchmarks/bench_binomial.py)

#: entries with at most this many undecided trials finish with one uniform per trial
FINISH_TRIALS = 32

HalfSampler = Callable[[I64, RandomSource], I64]


def binomial(
    n: Any, p: Fraction | int, rng: RandomSource, size: _checks.Shape | None = None
) -> npt.NDArray[np.int64]:
    """Exact Binomial(``n_i``, ``p``) samples for rational ``p``.

    Args:
        n: Numbers of trials, an int or an integer array, each in ``[0, 2**62]``.
        p: Success probability, an int or Fraction in ``[0, 1]`` (any denominator).
        rng: Source of randomness.
        size: Output shape; ``None`` means the shape of ``n``. Otherwise ``n`` is broadcast to it.

    Returns:
        int64 array of successes.

    Exactness: trial ``j`` succeeds iff ``U_j < p`` for independent uniform reals
    ``U_j = 0.u1 u2 ...`` (binary). Compare ``U_j`` with ``p = 0.b1 b2 ...`` digit by digit, all
    trials of an entry at once: of the ``m`` trials whose first ``k - 1`` digits equal those of
    ``p``, the number whose ``k``-th digit is 0 is Binomial(``m``, 1/2), independent of the past
    given ``m``. If ``b_k = 1`` those trials have ``U_j < p`` (successes) and the others stay
    undecided; if ``b_k = 0`` the others have ``U_j > p`` (failures) and those stay undecided.
    The digits of ``p`` come from exact integer arithmetic (``r -> 2 r``, digit ``2 r >= den``);
    when the remainder becomes 0 the expansion has ended and the undecided trials have
    ``U_j >= p`` (``U_j = p`` has probability 0): failures. About half of the trials are decided
    at each digit. Each digit draws Binomial(``m``, 1/2) with :func:`binomial_half`: a popcount
    of ``m`` bits below ``HALF_CUTOFF`` trials and exact rejection sampling in O(1) expected
    words above, so an entry costs O(``log n`` + ``HALF_CUTOFF``) words instead of ``n / 32``
    (:func:`binomial_popcount` is the old linear-cost path, same law).

    >>> from privhist.core.random import SeededRandom
    >>> int(binomial(10, 0, SeededRandom(0))), int(binomial(10, 1, SeededRandom(0)))
    (0, 10)
    """
    return _split_digits(n, p, rng, size, "binomial", binomial_half, direct=True)


def binomial_popcount(
    n: Any, p: Fraction | int, rng: RandomSource, size: _checks.Shape | None = None
) -> npt.NDArray[np.int64]:
    """:func:`binomial` with every Binomial(``m``, 1/2) drawn as a popcount (cost linear in ``n``).

    The same exact law as :func:`binomial`; kept for benchmarks and cross-checks.

    >>> from privhist.core.random import SeededRandom
    >>> int(binomial_popcount(10, 1, SeededRandom(0)))
    10
    """
    return _split_digits(n, p, rng, size, "binomial_popcount", binomial_half_popcount)


def _split_digits(
    n: Any,
    p: Fraction | int,
    rng: RandomSource,
    size: Any,
    fn: str,
    half: HalfSampler,
    *,
    direct: bool = False,
) -> I64:
    """Validation and the digit loop of :func:`binomial`, with ``half`` for Bin(m, 1/2); with
    ``direct``, entries whose mode and ``n`` minus the mode are both at least
    :data:`~privhist.noise._binomial_direct.MIN_MODE` are drawn whole by
    :func:`~privhist.noise._binomial_direct.binomial_direct` instead (the same law)."""
    pf = _checks.probability(p, fn, "p")
    trials = _checks.int_array(n, fn, "n", minimum=0, maximum=MAX_TRIALS)
    if size is not None:
        dims = _checks.shape(size, fn)
        try:
            trials = np.broadcast_to(trials, dims)
        except ValueError:
            raise ValidationError(
                "size", fn, f"a shape {trials.shape} broadcasts to", size
            ) from None
    shape = trials.shape
    m = trials.ravel().copy()
    if pf == 0:
        return np.zeros(shape, dtype=np.int64)
    if pf == 1:
        return m.reshape(shape)
    successes = np.zeros(m.shape[0], dtype=np.int64)
    den = pf.denominator
    rem = pf.numerator
    if direct:
        whole = _binomial_direct.eligible(m, pf)
        if whole.any():
            successes[whole] = _binomial_direct.binomial_direct(m[whole], pf, rng)
            m[whole] = 0
    active = np.flatnonzero(m > 0)
    finishing: list[tuple[I64, int]] = []  # (entries, remainder) left to finish_trials
    while active.size:
        if direct:
            few = m[active] <= FINISH_TRIALS
            if few.any():
                finishing.append((active[few], rem))
                active = active[~few]
                if not active.size:
                    break
        rem *= 2
        digit = rem >= den
        if digit:
            rem -= den
        zeros = half(m[active], rng)  # undecided trials whose next digit is 0
        if digit:
            successes[active] += zeros
            m[active] -= zeros
        else:
            m[active] = zeros
        if rem == 0:
            break  # p's expansion ended: the undecided trials fail
        active = active[m[active] > 0]
    if finishing:
        successes += finish_trials(m, finishing, den, rng)
    return successes.reshape(shape)


def finish_trials(m: I64, groups: list[tuple[I64, int]], den: int, rng: RandomSource) -> I64:
    """Successes among the ``m[i]`` undecided trials of each entry ``i`` of ``groups``, one
    uniform per trial.

    Each group ``(entries, rem)`` left the digit loop when its trials agreed with the first
    ``k`` digits of ``p`` and the remainder was ``rem``: a trial's remaining digits
    ``U' = frac(2**k U)`` are uniform on ``[0, 1)``, independent of everything drawn so far,
    and it succeeds iff ``U' < p' = rem / den`` (``U = p`` has probability 0). With the first
    word ``W`` of ``U'`` and ``F = floor(p' 2**64)``: ``W < F`` proves success, ``W > F``
    failure; on ``W == F`` (probability ``2**-64``) the same ``U'`` is continued exactly
    (:class:`~privhist.noise._exact.LazyUniform` against the digits of ``rem / den``).
    """
    out = np.zeros(m.shape[0], dtype=np.int64)
    idx = np.concatenate([g[0] for g in groups])
    floors = np.concatenate(
        [np.full(g[0].shape[0], (g[1] << WORD_BITS) // den, dtype=np.uint64) for g in groups]
    )
    rems = np.concatenate([np.full(g[0].shape[0], gi) for gi, g in enumerate(groups)])
    per = m[idx]
    owner = np.repeat(np.arange(idx.shape[0]), per)
    words = rng.uint64(int(owner.shape[0]))
    thresholds = floors[owner]
    success = words < thresholds
    for t in np.flatnonzero(words == thresholds).tolist():  # ties: continue the same U'
        rem = groups[int(rems[owner[t]])][1]
        success[t] = LazyUniform(rng, int(words[t])).less(rational_oracle(rem, den))
    out[idx] = np.bincount(owner, weights=success, minlength=idx.shape[0]).astype(np.int64)
    return out


def binomial_half(m: I64, rng: RandomSource) -> I64:
    """Binomial(``m_i``, 1/2) for every entry (``0 <= m_i <= 2**62``), exactly.

    Entries with ``m_i < HALF_CUTOFF`` are popcounts (:func:`binomial_half_popcount`), the others
    are drawn by rejection from a geometric-block envelope in O(1) expected random words
    (:func:`~privhist.noise._binomial_large.binomial_half_large`, which holds the proof).

    >>> from privhist.core.random import SeededRandom
    >>> m = np.array([0, 3, 10**6, 2**62], dtype=np.int64)
    >>> x = binomial_half(m, SeededRandom(5))
    >>> bool(x[0] == 0 and 0 <= x[1] <= 3 and abs(x[2] - 500_000) < 5_000)
    True
    >>> bool(abs(int(x[3]) - 2**61) < 10 * 2**30)
    True
    """
    out = np.zeros(m.shape[0], dtype=np.int64)
    large = m >= HALF_CUTOFF
    small = np.flatnonzero(~large & (m > 0))
    if small.size:
        out[small] = binomial_half_popcount(m[small], rng)
    if large.any():
        out[large] = binomial_half_large(m[large], rng)
    return out


def binomial_half_popcount(m: I64, rng: RandomSource) -> I64:
    """Binomial(``m_i``, 1/2) for every entry (``m_i >= 1``): popcounts of ``m_i`` random bits.

    Each entry gets ``ceil(m_i / 64)`` consecutive words, the last masked to ``m_i mod 64``
    bits; ``np.bitwise_count`` and ``np.add.reduceat`` sum the bits per entry. Entries are
    processed in batches of about 2**20 words.
    """
    out = np.zeros(m.shape[0], dtype=np.int64)
    nwords = (m + 63) // 64
    big = np.flatnonzero(nwords > _BATCH_WORDS)
    for i in big.tolist():  # more than 2**26 trials in one entry: loop over batches
        remaining = int(m[i])
        total = 0
        while remaining >= 64:
            k = min(remaining // 64, _BATCH_WORDS)
            total += int(np.bitwise_count(rng.uint64(k)).sum(dtype=np.int64))
            remaining -= 64 * k
        if remaining:
            total += _popcount_bits(rng, remaining)
        out[i] = total
    small = np.flatnonzero(nwords <= _BATCH_WORDS)
    if small.size == 0:
        return out
    cum = np.cumsum(nwords[small])
    start = 0
    while start < small.size:
        before = int(cum[start - 1]) if start else 0
        stop = int(np.searchsorted(cum, before + _BATCH_WORDS, side="right"))
        stop = max(stop, start + 1)
        idx = small[start:stop]
        words_per = nwords[idx]
        ends = np.cumsum(words_per)
        words = rng.uint64(int(ends[-1]))
        last_bits = (m[idx] - 64 * (words_per - 1)).astype(np.uint64)  # in [1, 64]
        words[ends - 1] &= _ALL_ONES >> (np.uint64(64) - last_bits)
        counts = np.bitwise_count(words).astype(np.int64)
        out[idx] = np.add.reduceat(counts, ends - words_per)
        start = stop
    return out


def _popcount_bits(rng: RandomSource, k: int) -> int:
    word = int(rng.uint64(1)[0]) & ((1 << k) - 1)
    return word.bit_count()
