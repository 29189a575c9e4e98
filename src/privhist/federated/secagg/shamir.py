"""Shamir ``t``-out-of-``n`` secret sharing over the prime field ``GF(2**256 + 297)``.

Shamir (1979); used by Bonawitz et al. (CCS 2017), Section 4 ("Secret sharing"), to share each
client's self-mask seed ``b_u`` and secret key ``s_u^SK`` so that any ``t`` survivors can
reconstruct a dropped client's key or a surviving client's seed, while any ``t - 1`` shares are
independent of the secret (they are ``t - 1`` values of a uniformly random polynomial of degree
``t - 1`` whose constant term is the secret).

The field is the smallest prime above ``2**256``, so every 32-byte secret is a field element.
Share ``i`` is the polynomial's value at ``x = i`` (``x >= 1``; clients use ``id + 1``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import RandomSource

#: the field's prime: the smallest prime above 2**256 (tests check it)
PRIME = (1 << 256) + 297
#: bytes of a serialised share value
SHARE_BYTES = 33


def split(secret: int, threshold: int, xs: Sequence[int], rng: RandomSource) -> list[int]:
    """Shares ``f(x)`` for ``x`` in ``xs`` of a uniform degree-``threshold - 1`` polynomial with
    ``f(0) = secret``.

    >>> from privhist.core.random import SeededRandom
    >>> shares = split(42, 2, [1, 2, 3], SeededRandom(0))
    >>> reconstruct([(1, shares[0]), (3, shares[2])], 2)
    42
    """
    return split_many([secret], threshold, xs, rng)[0]


def split_many(
    secrets: Sequence[int], threshold: int, xs: Sequence[int], rng: RandomSource
) -> list[list[int]]:
    """:func:`split` of each secret in turn (the same coefficients drawn in the same order, so
    the same shares), the polynomials evaluated together.

    Each point is one pass of Horner's rule on one Python integer holding every polynomial in
    its own lane of ``L`` bits: the coefficients are below ``2**257`` and the points below
    ``2**bits``, so an unreduced lane stays below ``2**257 * t * 2**(bits (t - 1))``, which
    ``L`` exceeds; no lane carries into the next, and each is reduced once at the end.

    >>> from privhist.core.random import SeededRandom
    >>> a = split_many([5, 9], 3, [1, 2, 3, 4], SeededRandom(4))
    >>> rng = SeededRandom(4)
    >>> a == [split(5, 3, [1, 2, 3, 4], rng), split(9, 3, [1, 2, 3, 4], rng)]
    True
    """
    if any(not 0 <= v < PRIME for v in secrets):
        raise ValidationError("secret", "shamir.split", "an integer in [0, PRIME)", secrets)
    if threshold < 1 or threshold > len(xs):
        raise ValidationError("threshold", "shamir.split", f"in [1, {len(xs)}]", threshold)
    if len(set(xs)) != len(xs) or any(not 0 < x < PRIME for x in xs):
        raise ValidationError("xs", "shamir.split", "distinct points in [1, PRIME)", list(xs))
    polys = [[v, *field_elements(rng, threshold - 1)] for v in secrets]
    bits = max(xs).bit_length()
    lane = 258 + bits * (threshold - 1) + threshold.bit_length()
    packed = [sum(p[j] << (lane * i) for i, p in enumerate(polys)) for j in range(threshold)]
    packed.reverse()
    low = (1 << lane) - 1
    out: list[list[int]] = [[] for _ in polys]
    for x in xs:  # Horner's rule, unreduced, every polynomial at once
        acc = 0
        for c in packed:
            acc = acc * x + c
        for row in out:
            row.append((acc & low) % PRIME)
            acc >>= lane
    return out


_WORDS = 5  # 320 bits per candidate, of which the low 257 are kept
_LOW = (1 << 257) - 1


def field_elements(rng: RandomSource, count: int) -> list[int]:
    """``count`` independent exact uniform elements of the field: 257-bit candidates from
    ``rng`` kept when below ``PRIME`` (each is kept with probability ``PRIME / 2**257 > 1/2``).

    >>> from privhist.core.random import SeededRandom
    >>> vals = field_elements(SeededRandom(0), 3)
    >>> len(vals) == 3 and all(0 <= v < PRIME for v in vals)
    True
    """
    out: list[int] = []
    while len(out) < count:
        need = count - len(out)
        raw = rng.uint64(_WORDS * (2 * need + 2)).tobytes()
        step = 8 * _WORDS
        for i in range(0, len(raw), step):
            value = int.from_bytes(raw[i : i + step], "little") & _LOW
            if value < PRIME:
                out.append(value)
                if len(out) == count:
                    break
    return out


def reconstruct(points: Sequence[tuple[int, int]], threshold: int) -> int:
    """``f(0)`` by Lagrange interpolation from the first ``threshold`` of ``points``.

    Raises :class:`ProtocolError` when fewer than ``threshold`` distinct points are given or a
    value lies outside the field.
    """
    pts = list(points)[:threshold]
    xs = [x for x, _ in pts]
    if len(pts) < threshold or len(set(xs)) != len(xs):
        raise ProtocolError(
            f"shamir.reconstruct: needs {threshold} distinct shares; got {len(set(xs))}"
        )
    if any(not 0 < x < PRIME or not 0 <= y < PRIME for x, y in pts):
        raise ProtocolError("shamir.reconstruct: a share lies outside the field")
    weights = Weights(xs)
    return weights.at_zero([y for _, y in pts])


def _denominators(xs: list[int]) -> list[int]:
    """``D_i = x_i prod_{j != i} (x_i - x_j) mod PRIME`` (:class:`Weights`).

    Points below ``2**20`` (client ids plus one): the matrix of differences, with ``x_i`` on
    its diagonal, is multiplied out in int64 blocks of ``c`` factors (``|factor| < 2**b``, so a
    block's product stays below ``2**(c b) <= 2**62``), and only the blocks' products are
    multiplied as Python integers.
    """
    m = len(xs)
    bits = max(xs).bit_length()
    if bits > 20 or m < 4:
        return [x * math.prod([x - z for z in xs if z != x]) % PRIME for x in xs]
    x = np.array(xs, dtype=np.int64)
    diff = x[:, None] - x[None, :]
    np.fill_diagonal(diff, x)
    c = 62 // bits
    pad = -m % c
    if pad:
        diff = np.concatenate([diff, np.ones((m, pad), dtype=np.int64)], axis=1)
    blocks = diff.reshape(m, -1, c).prod(axis=2)
    return [math.prod(row) % PRIME for row in blocks.tolist()]


class Weights:
    """Interpolation weights of a fixed set of distinct points ``x_1 .. x_m`` (small positive
    integers: client ids plus one).

    With ``D_i = x_i prod_{j != i} (x_i - x_j)`` and ``u_i = 1 / D_i`` (one inversion for all,
    Montgomery's batch trick):

    * the interpolant's value at 0 is ``f(0) = (-1)^(m-1) (prod_j x_j) sum_i y_i u_i``
      (Lagrange's formula, ``lambda_i = prod_{j != i} x_j / (x_j - x_i)``);
    * the values ``y`` lie on one polynomial of degree ``< t`` iff
      ``sum_i y_i x_i u_i g(x_i) = 0`` for every ``g`` of degree ``<= m - t - 1`` (the dual of
      the Reed-Solomon code: ``sum_i F(x_i) / prod_{j != i}(x_i - x_j)`` is the coefficient of
      ``x^(m-1)`` of the interpolant of ``F``, zero when ``deg F <= m - 2``). One check with
      ``g(x) = (x - a)^(m-t-1)`` at a random ``a`` misses an inconsistent ``y`` with probability
      at most ``(m - t - 1) / PRIME`` (the check is a non-zero polynomial in ``a`` of that degree).
    """

    def __init__(self, xs: Sequence[int]) -> None:
        m = len(xs)
        if m < 1 or len(set(xs)) != m or any(not 0 < x < PRIME for x in xs):
            raise ProtocolError("shamir: interpolation needs distinct points in [1, PRIME)")
        self.xs = list(xs)
        dens = _denominators(self.xs)
        prefix = [0] * m
        acc = 1
        for i, den in enumerate(dens):
            prefix[i] = acc
            acc = acc * den % PRIME
        inv = pow(acc, -1, PRIME)
        us = [0] * m
        for i in range(m - 1, -1, -1):
            us[i] = inv * prefix[i] % PRIME
            inv = inv * dens[i] % PRIME
        self.us = us
        scale = math.prod(xs) % PRIME
        self.scale = scale if m % 2 else (PRIME - scale) % PRIME

    def at_zero(self, ys: Sequence[int]) -> int:
        """``f(0)`` of the interpolant of degree ``< m`` through ``(x_i, y_i)``."""
        acc = sum(y * u for y, u in zip(ys, self.us, strict=True)) % PRIME
        return acc * self.scale % PRIME

    def consistent(self, ys: Sequence[int], threshold: int, challenge: int) -> bool:
        """Whether ``ys`` lie on one polynomial of degree ``< threshold`` (class notes; the
        ``challenge`` ``a`` must be drawn after the values are fixed)."""
        m = len(self.xs)
        if m <= threshold:
            return True
        e = m - threshold - 1
        acc = 0
        for x, y, u in zip(self.xs, ys, self.us, strict=True):
            acc += y * u % PRIME * (x * pow(x - challenge, e, PRIME))
        return acc % PRIME == 0
