"""Polynomials over the VDAF fields in the Lagrange basis of the roots of unity.

draft-irtf-cfrg-vdaf-20, Section 6.1.3: a polynomial of degree below ``n`` (a power of two) is
held as its values ``v[i] = p(w**i)`` at the powers of the principal ``n``-th root of unity
``w``. The operations the FLP needs, each batched over leading axes:

* :func:`ntt` / :func:`inv_ntt`: radix-2 Cooley-Tukey transforms between coefficients and
  values (one vectorised butterfly layer per bit of ``n``);
* :func:`double_evaluations`: the ``2n`` values at the ``2n``-th roots from the ``n`` values
  (odd points ``s w**i``, ``s`` a primitive ``2n``-th root: ``ntt`` of the coefficients scaled
  by ``s**j``), interleaved as the draft's ``Lagrange.double_evaluations``;
* :func:`lagrange_weights` / :func:`poly_eval`: evaluation at a point ``t`` that is not a root
  of unity by the barycentric form ``p(t) = (t**n - 1) / n * sum_i v_i w**i / (t - w**i)``
  (the value the draft's ``poly_eval_batched`` computes; Fazio 2025);
* :func:`extend_values`: the values at the remaining ``n``-th roots of the lowest-degree
  polynomial through the first ``m`` given values (the draft's
  ``extend_values_to_power_of_2``). For ``m = n - 1`` it uses that the ``x**(n-1)``
  coefficient ``(1/n) sum_i v_i w**i`` vanishes; otherwise barycentric interpolation on the
  ``m`` points.

The weights are computed in Python integers (``n`` of them, one modular inversion by Montgomery's
batch trick); everything of size (polynomials x points) is NumPy.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TypeVar

import numpy as np

from privhist.core.errors import ValidationError
from privhist.federated.vdaf.field import FIELDS, FieldVec

V = TypeVar("V", bound=FieldVec)


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x`` (``x >= 1``)."""
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def is_power_of_2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


@lru_cache(maxsize=256)
def _bitrev(n: int) -> np.ndarray:
    bits = n.bit_length() - 1
    idx = np.arange(n)
    rev = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev


@lru_cache(maxsize=256)
def _stage_twiddles(name: str, n: int, inverse: bool) -> list[FieldVec]:
    """For each butterfly layer of half-size ``m``: the powers ``w_{2m}**j``, ``j < m``."""
    field = FIELDS[name]
    p = field.MODULUS
    out = []
    m = 1
    while m < n:
        w = field.nth_root(2 * m)
        if inverse:
            w = pow(w, -1, p)
        powers = [1] * m
        for j in range(1, m):
            powers[j] = powers[j - 1] * w % p
        out.append(field.from_ints(powers))
        m *= 2
    return out


def ntt(x: V, inverse: bool = False) -> V:
    """Values at ``w**i`` of the polynomials whose coefficients are on the last axis
    (``inverse``: with ``w**-1``, not scaled by ``1/n``)."""
    n = x.shape[-1]
    if not is_power_of_2(n):
        raise ValidationError("n", "ntt", "a power of two", n)
    field = type(x)
    if x.v.dtype == object:
        return field(_ntt_lazy(x.v[0], field.NAME, n, inverse)[None, ...])
    lead = x.shape[:-1]
    y = x[..., _bitrev(n)]
    m = 1
    for tw in _stage_twiddles(field.NAME, n, inverse):
        blocks = y.reshape(*lead, n // (2 * m), 2, m)
        even = blocks[..., 0, :]
        odd = blocks[..., 1, :] * tw
        y = field.stack([even + odd, even - odd], axis=-2).reshape(*lead, n)
        m *= 2
    return y


def _ntt_lazy(a: np.ndarray, name: str, n: int, inverse: bool) -> np.ndarray:
    """The NTT on an object array of Python ints, reducing only after multiplications: the
    sums and differences of a layer grow by at most ``p`` in absolute value, and Python
    integers do not overflow, so one final ``% p`` gives the canonical values."""
    p = FIELDS[name].MODULUS
    lead = a.shape[:-1]
    y = a[..., _bitrev(n)]
    m = 1
    for tw in _stage_twiddles(name, n, inverse):
        blocks = y.reshape(*lead, n // (2 * m), 2, m)
        even = blocks[..., 0, :]
        odd = blocks[..., 1, :]
        if m > 1:  # the first layer's twiddle is 1
            odd = (odd * tw.v[0]) % p
        out = np.empty_like(blocks)
        np.add(even, odd, out=out[..., 0, :])
        np.subtract(even, odd, out=out[..., 1, :])
        y = out.reshape(*lead, n)
        m *= 2
    return np.asarray(y % p, dtype=object)


def inv_ntt(x: V) -> V:
    """Coefficients of the polynomials whose values at ``w**i`` are on the last axis."""
    n = x.shape[-1]
    return ntt(x, inverse=True) * type(x).inv(n)


@lru_cache(maxsize=256)
def _coset_scale(name: str, n: int) -> FieldVec:
    """``s**j / n`` for ``j < n``: the inverse transform's ``1/n`` and the coset shift."""
    field = FIELDS[name]
    p = field.MODULUS
    s = field.nth_root(2 * n)
    inv_n = field.inv(n)
    powers = [inv_n] * n
    for j in range(1, n):
        powers[j] = powers[j - 1] * s % p
    return field.from_ints(powers)


@lru_cache(maxsize=64)
def _odd_matrix(name: str, n: int) -> FieldVec:
    """The (n, n) matrix mapping values at the ``n``-th roots to values at ``s w**i``."""
    field = FIELDS[name]
    eye = field.from_ints(np.eye(n, dtype=np.int64).astype(object))
    return ntt(ntt(eye, inverse=True) * _coset_scale(name, n))  # row k: image of unit vector k


#: up to this size, the odd-point values are one matrix product (fewer NumPy calls than NTTs)
DENSE_DOUBLING = 16


def double_evaluations(x: V) -> V:
    """The ``2n`` values at the ``2n``-th roots from the ``n`` values on the last axis
    (draft ``Lagrange.double_evaluations``: even points are the inputs, odd points ``s w**i``)."""
    n = x.shape[-1]
    if n <= DENSE_DOUBLING:
        odd = x.dot(_odd_matrix(type(x).NAME, n))  # type: ignore[arg-type]
    else:
        odd = ntt(ntt(x, inverse=True) * _coset_scale(type(x).NAME, n))
    both = type(x).stack([x, odd], axis=-1)  # (..., n, 2)
    return both.reshape(*x.shape[:-1], 2 * n)


def poly_mul(p: V, q: V) -> V:
    """Product of polynomials given by ``n`` values each: ``2n`` values (draft ``poly_mul``)."""
    return double_evaluations(p) * double_evaluations(q)


@lru_cache(maxsize=256)
def _roots_of(name: str, n: int) -> tuple[int, ...]:
    field = FIELDS[name]
    p = field.MODULUS
    w = field.nth_root(n)
    out = [1] * n
    for i in range(1, n):
        out[i] = out[i - 1] * w % p
    return tuple(out)


def _roots(field: type[FieldVec], n: int) -> tuple[int, ...]:
    """The powers ``w**i``, ``i < n``, of the principal ``n``-th root."""
    return _roots_of(field.NAME, n)


@lru_cache(maxsize=256)
def _roots_vec(name: str, n: int, m: int) -> FieldVec:
    return FIELDS[name].from_ints(list(_roots_of(name, n)[:m]))


def _batch_inverse(values: list[int], p: int) -> list[int]:
    prefix = [1] * (len(values) + 1)
    for i, v in enumerate(values):
        prefix[i + 1] = prefix[i] * v % p
    inv = pow(prefix[-1], -1, p)
    out = [0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        out[i] = inv * prefix[i] % p
        inv = inv * values[i] % p
    return out


def is_root_of_unity(field: type[FieldVec], t: int, n: int) -> bool:
    """Whether ``t**n == 1`` (the draft's test-point check)."""
    return pow(t, n, field.MODULUS) == 1


def lagrange_weights(field: type[V], n: int, t: int) -> V:
    """``L_i(t)`` for the Lagrange basis of the ``n``-th roots, ``t`` not a root of unity."""
    p = field.MODULUS
    roots = _roots(field, n)
    tn1 = (pow(t, n, p) - 1) % p
    if tn1 == 0:
        raise ValidationError("t", "lagrange_weights", "not an n-th root of unity", t)
    inv_d = _batch_inverse([(t - r) % p for r in roots], p)
    c = tn1 * field.inv(n) % p
    return field._from_list([c * r % p * d % p for r, d in zip(roots, inv_d, strict=True)], (n,))


def lagrange_weights_many(field: type[V], n: int, ts: list[int]) -> V:
    """``L_i(t)`` for several points (rows) at once, without inversions:
    ``L_i(t) = (-1)**(n-1) / n * w**i * prod_{j != i} (w**j - t)`` (the product form of the
    draft's ``poly_eval_batched``), with the products over ``j < i`` and ``j > i`` accumulated
    column by column for all points together."""
    p = field.MODULUS
    if len(ts) <= 2:  # a few points: Python integers, one inversion each, beat array calls
        rows_w = [lagrange_weights(field, n, t).to_ints() for t in ts]
        return field._from_list([x for r in rows_w for x in r], (len(ts), n))
    roots = np.array(_roots(field, n), dtype=object)
    d = (roots[None, :] - np.array(ts, dtype=object)[:, None]) % p  # (R, n)
    if bool((d == 0).any()):
        raise ValidationError("t", "lagrange_weights", "not an n-th root of unity", ts)
    rows = len(ts)
    pre = np.empty((rows, n), dtype=object)
    suf = np.empty((rows, n), dtype=object)
    acc = np.full(rows, 1, dtype=object)
    for k in range(n):
        pre[:, k] = acc
        acc = (acc * d[:, k]) % p
    acc = np.full(rows, 1, dtype=object)
    for k in range(n - 1, -1, -1):
        suf[:, k] = acc
        acc = (acc * d[:, k]) % p
    c = (-1) ** (n - 1) * field.inv(n) % p
    w = (roots * c) % p
    out = ((pre * suf) % p * w) % p
    return field.from_ints(out) if field.MODULUS < 2**64 else field(out[None, ...])


def poly_eval(values: V, t: int) -> V:
    """Evaluate polynomials given by their values at the ``n``-th roots (last axis) at ``t``."""
    n = values.shape[-1]
    weights = lagrange_weights(type(values), n, t)
    return values.dot(weights.reshape(n, 1)).reshape(*values.shape[:-1])


def extend_values(values: V, n: int) -> V:
    """Values at all ``n``-th roots of the polynomial of degree ``< m`` through the ``m`` given
    values at the first ``m`` powers of the ``n``-th root (1-dimensional input)."""
    field = type(values)
    p = field.MODULUS
    m = values.shape[-1]
    if not is_power_of_2(n) or m > n:
        raise ValidationError("n", "extend_values", f"a power of two >= {m}", n)
    if m == n:
        return values
    roots = _roots(field, n)
    if m == n - 1:
        # the x**(n-1) coefficient (1/n) sum_i v_i w**i of a polynomial of degree <= n-2 is 0,
        # and w**(n-1) = w**-1, so v_{n-1} = -w sum_{i<n-1} v_i w**i
        acc = (values * _roots_vec(field.NAME, n, m)).sum(axis=-1)
        last = -(acc * roots[1])
        return field.concat([values, last.reshape(*values.shape[:-1], 1)], axis=-1)
    # barycentric weights on the m given points
    pts = roots[:m]
    lam = []
    for i, xi in enumerate(pts):
        prod = 1
        for j, xj in enumerate(pts):
            if i != j:
                prod = prod * (xi - xj) % p
        lam.append(prod)
    lam = _batch_inverse(lam, p)
    rows = []
    for x in roots[m:]:
        diffs = [(x - xi) % p for xi in pts]
        ell = 1
        for d in diffs:
            ell = ell * d % p
        inv_d = _batch_inverse(diffs, p)
        rows.append([ell * lam[i] % p * inv_d[i] % p for i in range(m)])
    basis = field.from_ints(np.array(rows, dtype=object))  # (n - m, m)
    extra = (basis * values.reshape(*values.shape[:-1], 1, m)).sum(axis=-1)
    return field.concat([values, extra], axis=-1)
