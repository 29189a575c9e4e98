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

from collections.abc import Sequence

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
    if not 0 <= secret < PRIME:
        raise ValidationError("secret", "shamir.split", "an integer in [0, PRIME)", secret)
    if threshold < 1 or threshold > len(xs):
        raise ValidationError("threshold", "shamir.split", f"in [1, {len(xs)}]", threshold)
    if len(set(xs)) != len(xs) or any(not 0 < x < PRIME for x in xs):
        raise ValidationError("xs", "shamir.split", "distinct points in [1, PRIME)", list(xs))
    coeffs = [secret] + [rng.randbelow(PRIME) for _ in range(threshold - 1)]
    out = []
    for x in xs:
        acc = 0
        for c in reversed(coeffs):
            acc = (acc * x + c) % PRIME
        out.append(acc)
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
    return _interpolate_at(pts, 0)


def _interpolate_at(pts: Sequence[tuple[int, int]], at: int) -> int:
    """The value at ``at`` of the polynomial of degree ``len(pts) - 1`` through ``pts``."""
    value = 0
    for i, (xi, yi) in enumerate(pts):
        num, den = 1, 1
        for j, (xj, _) in enumerate(pts):
            if i != j:
                num = num * (xj - at) % PRIME
                den = den * (xj - xi) % PRIME
        value = (value + yi * num * pow(den, -1, PRIME)) % PRIME
    return value
