"""Exact discrete Laplace sampler: ``P[Z = z]`` proportional to ``exp(-|z| / scale)``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise import _checks
from privhist.noise._tables import invert, invert_words, laplace_table
from privhist.noise.geometric import sample_geometric, table_fits

I64 = npt.NDArray[np.int64]

#: largest supported scale (so that samples stay far inside int64)
MAX_SCALE = Fraction(1 << 40)
#: :func:`laplace_threshold` draws a count's noise only when it is near the threshold or the
#: first byte of its uniform is 0
_BYTE = 1 << 56


def discrete_laplace(
    scale: Fraction | int, rng: RandomSource, size: _checks.Shape
) -> npt.NDArray[np.int64]:
    """Exact discrete Laplace samples: ``P[Z = z] = (1 - a) / (1 + a) * a**|z|``, ``a = e**(-1/s)``.

    The distribution of Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for
    Differential Privacy" (CKS), Algorithm 2, with ``scale = t / s``.

    Args:
        scale: An int or Fraction in ``(0, 2**40]``. For a mechanism with sensitivity ``D`` and
            privacy parameter ``epsilon`` (a float), round the scale *up*:
            ``rational_at_least(Fraction(D) / Fraction(epsilon))``.
        rng: Source of randomness.
        size: Output shape.

    Returns:
        int64 array.

    Exactness: with ``x = 1 / scale``, ``P[|Z| >= k] = 2 a**k / (1 + a)`` for ``k >= 1``.
    For ``45 * scale <= 2**16`` the magnitude is drawn by inversion from one uniform ``U``
    against the exact floors of these tails (one 64-bit word; ties finished exactly) and the
    sign by one fair bit: ``P[Z = z] = (T_|z| - T_|z|+1) / 2 = (1 - a) a**|z| / (1 + a)`` for
    ``z != 0`` and ``1 - T_1 = (1 - a) / (1 + a)`` for ``z = 0``. For larger scales it is CKS
    Algorithm 2's final step: ``Y`` geometric with ``P[Y >= k] = a**k`` (CKS obtain it as
    ``floor((U + t V) / s)``; we sample it directly, see :func:`~privhist.noise.geometric`), a
    sign bit ``B``, and rejection of ``(B = 1, Y = 0)``, which gives weight ``(1 - a) a**|z| / 2``
    to every ``z`` — proportional to the target.

    >>> from privhist.core.random import SeededRandom
    >>> z = discrete_laplace(Fraction(10, 3), SeededRandom(0), 1000)
    >>> z.dtype, bool(abs(z.mean()) < 1)
    (dtype('int64'), True)
    """
    fn = "discrete_laplace"
    s = _checks.positive_rational(scale, fn, "scale")
    if s > MAX_SCALE:
        raise ValidationError("scale", fn, "<= 2**40", scale)
    dims = _checks.shape(size, fn)
    return sample_laplace(1 / s, rng, _checks.count(dims)).reshape(dims)


def sample_laplace(x: Fraction, rng: RandomSource, n: int) -> I64:
    """``n`` samples with ``P[Z = z]`` proportional to ``exp(-x |z|)`` (validated ``x``)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if table_fits(x):
        return _signed(invert(laplace_table(x), rng, n), rng)
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:  # each round keeps a fraction (1 - a) / 2 of the samples
        y = sample_geometric(x, rng, todo.size)
        negative = rng.bits(todo.size)
        ok = ~(negative & (y == 0))
        out[todo[ok]] = np.where(negative[ok], -y[ok], y[ok])
        todo = todo[~ok]
    return out


def _signed(magnitude: I64, rng: RandomSource) -> I64:
    """The table sampler's last step: each magnitude times a fair sign (one bit each), in
    place."""
    negative = rng.bits(int(magnitude.shape[0]))
    # times +1 or -1 in place (an int8 factor: several times cheaper than np.where)
    np.multiply(magnitude, 1 - 2 * negative.view(np.int8), out=magnitude)
    return magnitude


def laplace_threshold(
    scale: Fraction | int, counts: npt.ArrayLike, threshold: int, rng: RandomSource
) -> tuple[I64, I64]:
    """Counts plus independent discrete Laplace noise, kept where they reach ``threshold``: the
    indices ``i`` (ascending) with ``counts[i] + Z_i >= threshold``, and those noisy counts.

    The law is that of ``v = counts + discrete_laplace(scale, rng, n)``,
    ``i = flatnonzero(v >= threshold)``, ``(i, v[i])``. Most counts of a sparse histogram are
    far below the threshold, and their noise is not drawn.

    Args:
        scale: as for :func:`discrete_laplace`.
        counts: one-dimensional integer array.
        threshold: an int.
        rng: Source of randomness.

    Returns:
        ``(indices, noisy counts)``, both int64.

    Exactness: the table sampler draws ``Z = S M``, ``M = #{k >= 1 : U < T_k}`` with
    ``T_k = P[|Z| >= k]`` and ``S`` a fair sign (see :func:`discrete_laplace`). Let ``t`` be the
    smallest ``k >= 1`` whose floor ``F_k = floor(T_k 2**64)`` is below ``2**56`` (``F_k = 0``
    beyond the table). A count with ``threshold - count >= t`` reaches the threshold only if
    ``M >= t``, so only if ``U < T_t``, so only if the first word of ``U`` is at most
    ``F_t < 2**56``: only if the first byte of ``U`` is 0. So each such count draws that byte,
    and only those whose byte is 0 draw the 56 further bits of the word, the rest of ``U`` on
    ties (:func:`~privhist.noise._tables.invert_words`) and the sign; the bits of ``U`` are fair
    and independent in whatever order they are drawn, so each count's ``(U, S)`` has its law,
    and those whose byte is not 0 certainly stay below. Counts closer to the threshold are drawn
    in full. The kept pairs have exactly the law of the full draw, at a byte a count (plus the
    counts near the threshold) instead of about 1.2 bytes, a sign bit and a table lookup for
    every count. Scales whose table does not fit (above 1456) draw every count in full.

    >>> from privhist.core.random import SeededRandom
    >>> i, v = laplace_threshold(1, np.array([50, 0, 60]), 20, SeededRandom(0))
    >>> i.tolist()
    [0, 2]
    """
    fn = "laplace_threshold"
    s = _checks.positive_rational(scale, fn, "scale")
    if s > MAX_SCALE:
        raise ValidationError("scale", fn, "<= 2**40", scale)
    c = np.asarray(counts)
    if c.ndim != 1 or (c.size and c.dtype.kind not in "iu"):
        raise ValidationError(
            "counts", fn, "a one-dimensional integer array", f"{c.dtype} {c.shape}"
        )
    c = c.astype(np.int64, copy=False)
    thr = int(threshold)
    x = 1 / s
    n = int(c.shape[0])
    if not table_fits(x):
        v = c + sample_laplace(x, rng, n)
        hit = np.flatnonzero(v >= thr)
        return hit, v[hit]
    table = laplace_table(x)
    asc = table.ascending  # [0, F_K, ..., F_1]
    pos = int(np.searchsorted(asc, np.uint64(_BYTE), side="left")) - 1
    far = thr - (table.size + 1 - pos)  # counts <= far need noise >= t; pos 0 stands for k > K
    near = np.flatnonzero(c > far)
    v_near = c[near] + sample_laplace(x, rng, int(near.shape[0]))
    hit_near = v_near >= thr
    if near.shape[0] == n:
        return near[hit_near], v_near[hit_near]
    first = rng.uint64((n + 7) // 8).view(np.uint8)[:n]
    cand = np.flatnonzero(first == 0)
    cand = cand[c[cand] <= far]
    words = rng.uint64(int(cand.shape[0])) >> np.uint64(8)
    v_far = c[cand] + _signed(invert_words(table, words, rng), rng)
    hit_far = v_far >= thr
    idx = np.concatenate([near[hit_near], cand[hit_far]])
    v = np.concatenate([v_near[hit_near], v_far[hit_far]])
    order = np.argsort(idx, kind="stable")
    return idx[order], v[order]
