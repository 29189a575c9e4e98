"""Exact Bernoulli samplers: rational probabilities and ``exp(-x)`` for rational ``x``.

All of them compare one uniform 64-bit word ``W`` with ``F = floor(p * 2**64)`` and finish the
rare ties ``W == F`` exactly (:mod:`privhist.noise._exact`): ``P[1] = P[U < p] = p`` with no
rounding, at a cost of one word per sample.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.noise import _checks
from privhist.noise._exact import (
    WORD_BITS,
    LazyUniform,
    Oracle,
    capped,
    exp_neg_floor,
    exp_neg_oracle,
    rational_oracle,
)
from privhist.noise._tables import exp_power_floors, geometric_table, invert

Bools = npt.NDArray[np.bool_]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

_INT64_LIMIT = (1 << 63) - 1
#: denominators of ``bernoulli_exp_array`` must stay below this (remainders fit in int64)
MAX_EXP_DENOMINATOR = 1 << 62
_CHUNK_BITS = 12


def compare_word(floor_p: int, oracle: Oracle, rng: RandomSource, n: int) -> Bools:
    """``n`` draws of Bernoulli(``p``) given ``floor(p 2**64)`` and an exact oracle for ``p``.

    ``W < F`` means ``U < p`` and ``W > F`` means ``U > p`` (``U`` the uniform real whose first
    word is ``W``); ties are decided by :class:`~privhist.noise._exact.LazyUniform`.
    """
    f = capped(floor_p)
    words = rng.uint64(n)
    out = words < np.uint64(f)
    for i in np.flatnonzero(words == np.uint64(f)).tolist():  # probability 2**-64 each
        out[i] = LazyUniform(rng, int(words[i])).less(oracle)
    return out


def compare_table(
    table: U64, index: I64, oracle: Callable[[int], Oracle], rng: RandomSource
) -> Bools:
    """Bernoulli(``p_j``) for ``j`` in ``index``, with ``table[j] = floor(p_j 2**64)`` (capped)."""
    words = rng.uint64(index.shape[0])
    floors = table[index]
    out = words < floors
    for i in np.flatnonzero(words == floors).tolist():  # rare ties, decided exactly
        out[i] = LazyUniform(rng, int(words[i])).less(oracle(int(index[i])))
    return out


def bernoulli_rational(
    num: Any, den: Any, rng: RandomSource, size: _checks.Shape | None = None
) -> Bools:
    """Exact Bernoulli(``num / den``) samples.

    Args:
        num: Numerator, ``0 <= num <= den``: a Python int of any size, or an int64 array.
        den: Denominator ``>= 1``: a Python int of any size, or an int64 array (``< 2**63``).
        rng: Source of randomness.
        size: Output shape. ``None``: the broadcast shape of ``num`` and ``den`` (``()`` for
            scalars). With arrays, ``size`` must be broadcast-compatible with them.

    Returns:
        Boolean array, ``True`` with probability ``num / den``.

    Exactness: for scalars, one uniform word ``W`` is compared with
    ``F = floor(num 2**64 / den)`` and ties continue with the next exact 64 binary digits of
    ``num / den`` (integer division), so ``P[True] = P[U < num/den] = num/den``. For arrays,
    ``V`` uniform on ``{0, .., den - 1}`` is drawn by rejection (``RandomSource.uniform_below``)
    and ``P[V < num] = num / den``.

    >>> from privhist.core.random import SeededRandom
    >>> bernoulli_rational(1, 3, SeededRandom(1), size=4).dtype
    dtype('bool')
    """
    fn = "bernoulli_rational"
    if np.ndim(num) == 0 and np.ndim(den) == 0:
        n_int = _scalar_int(num, fn, "num")
        d_int = _scalar_int(den, fn, "den")
        if d_int < 1:
            raise ValidationError("den", fn, "an integer >= 1", den)
        if n_int < 0 or n_int > d_int:
            raise ValidationError("num", fn, f"an integer in [0, den] = [0, {d_int}]", num)
        dims = () if size is None else _checks.shape(size, fn)
        n = _checks.count(dims)
        if n_int == 0 or n_int == d_int:
            return np.full(dims, n_int == d_int, dtype=np.bool_)
        floor_p = (n_int << WORD_BITS) // d_int
        return compare_word(floor_p, rational_oracle(n_int, d_int), rng, n).reshape(dims)
    num_a = _checks.int_array(num, fn, "num", minimum=0, maximum=_INT64_LIMIT)
    den_a = _checks.int_array(den, fn, "den", minimum=1, maximum=_INT64_LIMIT)
    try:
        dims = np.broadcast_shapes(num_a.shape, den_a.shape)
        if size is not None:
            dims = np.broadcast_shapes(dims, _checks.shape(size, fn))
    except ValueError:
        raise ValidationError("size", fn, "broadcast-compatible with num and den", size) from None
    num_b = np.broadcast_to(num_a, dims).ravel()
    den_b = np.broadcast_to(den_a, dims).ravel()
    if (num_b > den_b).any():
        i = int(np.argmax(num_b > den_b))
        raise ValidationError("num", fn, "<= den elementwise", f"{num_b[i]} > {den_b[i]}")
    if num_b.size == 0:
        return np.zeros(dims, dtype=np.bool_)
    uniform = rng.uniform_below(den_b)
    return (uniform < num_b).reshape(dims)


def bernoulli_exp(x: Fraction | int, rng: RandomSource, size: _checks.Shape) -> Bools:
    """Exact Bernoulli(``exp(-x)``) samples for rational ``x >= 0``.

    Same distribution as Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for
    Differential Privacy" (CKS), Algorithm 1, but one random word per sample instead of a
    loop of Bernoulli(``x / k``) trials.

    Args:
        x: The exponent, an int or Fraction ``>= 0``.
        rng: Source of randomness.
        size: Output shape.

    Returns:
        Boolean array, ``True`` with probability ``exp(-x)``.

    Exactness: ``F = floor(exp(-x) 2**64)`` is computed exactly with integer interval
    arithmetic (Taylor series with a rigorous tail bound; the precision is raised until the
    floor is decided). A word ``W < F`` answers 1, ``W > F`` answers 0, and ``W == F``
    (probability ``2**-64``) continues with further exact digits; hence
    ``P[1] = P[U < exp(-x)] = exp(-x)``.

    >>> from privhist.core.random import SeededRandom
    >>> bernoulli_exp(0, SeededRandom(3), 3).tolist()
    [True, True, True]
    """
    fn = "bernoulli_exp"
    xf = _checks.non_negative_rational(x, fn, "x")
    dims = _checks.shape(size, fn)
    if xf == 0:
        return np.ones(dims, dtype=np.bool_)
    out = compare_word(exp_neg_floor(xf), exp_neg_oracle(xf), rng, _checks.count(dims))
    return out.reshape(dims)


def bernoulli_exp_array(numerators: Any, denominator: int, rng: RandomSource) -> Bools:
    """Exact Bernoulli(``exp(-numerators[i] / denominator)``) samples, one per numerator.

    Args:
        numerators: Integers ``>= 0`` (array-like, int64).
        denominator: Common denominator, an integer in ``[1, 2**62)``.
        rng: Source of randomness.

    Returns:
        Boolean array of the shape of ``numerators``.

    Exactness: write ``num = q * den + r`` with ``0 <= r < den`` and the bits of ``r`` in
    12-bit chunks ``v_c``; then ``exp(-num/den) = exp(-q) * prod_c exp(-v_c 2**(12c) / den)``,
    a product of probabilities, so the AND of independent Bernoullis with those probabilities
    has exactly the target probability. ``Bernoulli(exp(-q))`` is ``[G >= q]`` for ``G``
    geometric with ``P[G >= k] = exp(-k)`` (the decomposition of CKS Algorithm 1 for
    ``x > 1``, in one draw); each chunk factor is one word compared with an exact table
    (:func:`compare_table`). A sample is abandoned as soon as one factor fails.
    """
    fn = "bernoulli_exp_array"
    num = _checks.int_array(numerators, fn, "numerators", minimum=0, maximum=_INT64_LIMIT)
    den = _scalar_int(denominator, fn, "denominator")
    if den < 1 or den >= MAX_EXP_DENOMINATOR:
        raise ValidationError("denominator", fn, "an integer in [1, 2**62)", denominator)
    flat = num.ravel()
    q, r = np.divmod(flat, np.int64(den))
    return exp_fraction_parts(q, r, den, rng).reshape(num.shape)


def exp_fraction_parts(q: I64, r: I64, den: int, rng: RandomSource) -> Bools:
    """Bernoulli(``exp(-(q + r / den))``) for int64 arrays ``q >= 0`` and ``0 <= r < den``."""
    alive = np.ones(q.shape[0], dtype=np.bool_)
    idx = np.flatnonzero(q > 0)
    if idx.size:
        g = invert(geometric_table(Fraction(1)), rng, idx.size)
        alive[idx] = g >= q[idx]
    if den == 1:
        return alive
    nbits = (den - 1).bit_length()
    chunk = nbits if nbits <= 16 else _CHUNK_BITS
    mask = (1 << chunk) - 1
    for c in reversed(range((nbits + chunk - 1) // chunk)):
        shift = chunk * c
        digits = (r >> np.int64(shift)) & np.int64(mask)
        idx = np.flatnonzero(alive & (digits > 0))
        if idx.size == 0:
            continue
        step = Fraction(1 << shift, den)
        size = min(mask + 1, (den - 1) // (1 << shift) + 1)
        table = exp_power_floors(step, size)

        def oracle(v: int, step: Fraction = step) -> Oracle:
            return exp_neg_oracle(step * v)

        alive[idx] = compare_table(table, digits[idx], oracle, rng)
    return alive


def _scalar_int(value: Any, function: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValidationError(name, function, "an integer", value)
    return int(value)
