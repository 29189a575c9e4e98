"""Sanitized frequencies: the ``pi_(i,j)`` matrix of Algorithm 4, its closed form (Lemma 5.2),
and the exact integer version used on the release path.

Cohen, Geri, Sarlos & Stemmer, Section 5. Row ``i`` of the matrix is the end-to-end output
distribution of a key of frequency ``i``: ``pi_(i,0) = 1 - pi_i`` (not reported) and
``pi_(i,j)``, ``1 <= j <= i``, the probability it is sampled and reported with token ``j``.

Algorithm 4, vectorised. Within a row the clamped lower bounds telescope: with
``x_j = e^-eps (sum_(h<=j) pi_(i-1,h) - delta) + [e^-eps pi_(i-1,0) - pi_(i,0)]_+`` (non-decreasing
in ``j``) the prefix sums of the lower bounds are ``max(0, x_j)``. The backward pass sets
``pi_(i,j)`` to its upper bound ``U`` while the remaining mass allows, and while it does the suffix
sums are ``V_j = e^eps sum_(h=j)^(i-1) pi_(i-1,h) + delta``; it stops at the largest ``c`` with
``V_c + sum_(h<c) lb_h > pi_i``, which receives the remainder. So each row costs a few array
operations. The function accepts ``dtype=object`` with mpmath numbers for high-precision checks.

Exact release (``q = 1``). Lemma 5.2 says the optimal matrix is a *shift*: ``pi_(i,j) = d_(i-j)``
where ``d_k = pi*_(k+1) - pi*_k``, i.e. the token is ``i - K`` for a random ``K`` with pmf ``d``,
and the key is not reported when ``K >= i``. :func:`exact_shift_pmf` builds ``d`` in integers
over ``2**62`` by Algorithm 3's rule written on the increments (a rational ``r <= e^eps`` in
place of ``e^eps``, every term rounded down) and
:func:`verify_shift_pmf` *certifies* it: for rows ``i`` and ``i + 1`` the outputs are atoms, so
the two hockey-stick divergences are exactly

    d_0 + sum_(k=1..i) [d_k - e^eps d_(k-1)]_+                      (row i+1 against row i)
    sum_(k=1..i) [d_(k-1) - e^eps d_k]_+ + [T_i - e^eps T_(i+1)]_+   (row i against row i+1)

(``T_i = sum_(k>=i) d_k`` the not-reported mass, ``d_k = 0`` past the support), and the check
bounds them by ``delta`` in rational arithmetic with ``r`` in place of ``e^eps`` (which only
enlarges them) for every ``i``. In real arithmetic the shift of Algorithm 3's increments meets
both bounds for every ``(eps, delta)`` (not only integral ``L``): at the switch between the two
constraints ``e^eps d_s >= d_(s-1)`` because the second constraint was slack at ``s - 1``, and in
the second phase ``d_(k-1) = e^eps d_k`` exactly, the not-reported terms telescoping to
``delta``. Rounding costs below ``1e-12`` in reporting probability.

Any delta. The grid is ``2**-62`` while ``delta >= 2**-42`` per key (``delta 2**62 >= 2**20``
units leave room for the slack); below, :func:`exact_shift_grid` uses ``2**-B`` with
``B = 20 + grid_bits(delta)`` (:mod:`privhist.mechanisms._grid`), the same construction and the
same certificate in integers over ``2**B``. The ``pws`` mechanism draws the shift on that grid by
lazy inversion (:class:`~privhist.mechanisms._grid.LazyInversion`). The Algorithm 4 / 5 matrices
for sampled data (:mod:`.sanitize`, :mod:`.max_separation_release`) are on ``2**-62`` while
``delta >= 2**-42`` and on a finer grid below (:mod:`.fine_rows`).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.validation import check_delta, check_epsilon
from privhist.mechanisms._grid import ONE, ONE_BITS, grid_bits
from privhist.mechanisms.sampling.pws.keys import (
    optimal_reporting_closed_form,
    reporting_probabilities,
    reporting_probabilities_mp,
    threshold_L,
)
from privhist.mechanisms.sampling.pws.schemes import check_inclusion
from privhist.noise import exp_rational_bounds

F64 = npt.NDArray[np.float64]
#: refuse exact pmfs longer than this (tiny epsilon / delta)
MAX_SUPPORT = 2_000_000


def integer_token_matrix(
    q: npt.ArrayLike, epsilon: float, delta: float, *, precision: int | None = None
) -> npt.NDArray[Any]:
    """Algorithm 4: the ``(m+1) x (m+1)`` matrix ``P[i, j] = pi_(i,j)`` for ``q = (q_0..q_m)``
    (``P[i, 0]`` is the not-reported probability, ``P[i, j] = 0`` for ``j > i``).

    ``precision`` (bits) switches to mpmath numbers in an object array for exact-ish checks.

    >>> import numpy as np
    >>> q = np.ones(4); q[0] = 0
    >>> P = integer_token_matrix(q, 0.6931471805599453, 0.1)
    >>> [round(float(x), 6) for x in P[3]]
    [0.3, 0.4, 0.2, 0.1]
    """
    fn = "integer_token_matrix"
    eps = check_epsilon(epsilon, fn)
    dl = check_delta(delta, fn, positive=True)
    qa = check_inclusion(q, fn)
    if precision is None:
        pi = reporting_probabilities(qa, eps, dl)
        return _integer_token_matrix(pi, math.exp(eps), math.exp(-eps), dl, np.float64, 0.0)
    with mpmath.workprec(precision):
        pi_mp, e, inv, d = reporting_probabilities_mp(qa, eps, dl)
        return _integer_token_matrix(pi_mp, e, inv, d, object, mpmath.mpf(0))


def _integer_token_matrix(
    pi: Any, e: Any, inv: Any, d: Any, dtype: Any, zero: Any
) -> npt.NDArray[Any]:
    m = pi.shape[0] - 1
    P = np.full((m + 1, m + 1), zero, dtype=dtype)
    P[0, 0] = 1 + zero
    for i in range(1, m + 1):
        prev = P[i - 1, :i]  # indices 0..i-1
        P[i, 0] = 1 - pi[i]
        c0 = inv * prev[0] - P[i, 0]
        c0 = c0 if c0 > 0 else zero
        pre_prev = np.cumsum(prev[1:])  # sum_(h<=j) pi_(i-1,h), j = 1..i-1
        x = inv * (pre_prev - d) + c0
        pre = (
            np.maximum(x, zero)
            if dtype is not object
            else np.array([v if v > 0 else zero for v in x], dtype=object)
        )
        lb = np.empty(i + 1, dtype=dtype)  # lb[j], j = 0..i (lb[0] unused)
        lb[0] = zero
        lb[i] = zero
        if i > 1:
            lb[1] = pre[0]
            lb[2:i] = np.diff(pre)
        pre_full = np.empty(i + 1, dtype=dtype)  # Pre(j) = sum_(h<=j) lb_h, j = 0..i
        pre_full[0] = zero
        pre_full[1:i] = pre
        pre_full[i] = pre[-1] if i > 1 else zero
        # V_j = e^eps sum_(h=j)^(i-1) pi_(i-1,h) + delta, j = 1..i+1 (V_(i+1) = 0)
        suf = np.cumsum(prev[1:][::-1])[::-1] if i > 1 else np.zeros(0, dtype=dtype)
        V = np.empty(i + 2, dtype=dtype)
        V[0] = zero
        V[1:i] = e * suf + d
        V[i] = d
        V[i + 1] = zero
        j_idx = np.arange(1, i + 1)
        cond = (
            np.array([V[j] + pre_full[j - 1] <= pi[i] for j in j_idx])
            if dtype is object
            else (V[1 : i + 1] + pre_full[0:i] <= pi[i])
        )
        bad = np.nonzero(~cond)[0]
        c = int(bad[-1]) + 1 if bad.size else 0
        row = P[i]
        if c < i:
            row[c + 1 : i + 1] = V[c + 1 : i + 1] - V[c + 2 : i + 2]
        if c >= 1:
            row[1:c] = lb[1:c]
            row[c] = lb[c] + pi[i] - V[c + 1] - pre_full[c]
    return P


def closed_form_matrix(epsilon: float, delta: float, max_frequency: int) -> F64:
    """Lemma 5.2 (``q = 1``, integral ``L``): ``pi*_(i,j) = pi*_(i-j+1) - pi*_(i-j)`` for
    ``max(1, i - 2L) <= j <= i`` and 0 below; ``pi*_(i,0) = 1 - pi*_i``."""
    L = threshold_L(epsilon, delta)
    m = max_frequency
    pis = optimal_reporting_closed_form(epsilon, delta, m + 1)
    diff = np.diff(pis)  # d_k = pi*_(k+1) - pi*_k
    P = np.zeros((m + 1, m + 1))
    for i in range(m + 1):
        P[i, 0] = 1 - pis[i]
        for j in range(max(1, i - round(2 * L)), i + 1):
            P[i, j] = diff[i - j]
    return P


# -- exact shift pmf (q = 1) --------------------------------------------------------------------


def _shift_pmf(delta0: int, delta2: int, r: Fraction, one: int = ONE) -> list[int]:
    """``d_0 = delta0``; ``d_k = min(floor(r d_(k-1)), floor((delta2 + (r - 1) T_k) / r))`` where
    ``T_k = one - sum_(h<k) d_h`` (``one = 2**B``, the grid), until ``T`` is used up (the rule of
    Algorithm 3 written on the increments: the first term is ``pi_(k+1) <= e^eps pi_k + delta``,
    the second ``T_k - e^eps T_(k+1) <= delta``)."""
    p, qd = r.numerator, r.denominator
    d = [delta0]
    tail = one - delta0
    while tail > 0:
        a = p * d[-1] // qd
        b = (delta2 * qd + (p - qd) * tail) // p
        nxt = min(a, b, tail)
        if nxt <= 0:
            raise ValidationError("delta", "exact_shift_pmf", "large enough to progress", delta0)
        d.append(nxt)
        tail -= nxt
        if len(d) > MAX_SUPPORT:
            raise ValidationError(
                "epsilon", "exact_shift_pmf", "large enough for a support below 2e6", float(r)
            )
    return d


#: on the 2**-62 grid the shift pmf needs delta >= 2**-SHIFT_MIN_BITS (2**20 units of slack room)
SHIFT_MIN_BITS = 42


def shift_grid_bits(delta: Fraction) -> int:
    """The grid ``2**-B`` of the exact shift pmf for ``delta`` per key: ``B = 62`` while
    ``delta >= 2**-42``, else ``20 + grid_bits(delta)`` (:mod:`privhist.mechanisms._grid`), so
    ``delta 2**B >= 2**20`` grid units always leave room for the rounding slack.

    >>> shift_grid_bits(Fraction(1, 1000)), shift_grid_bits(Fraction(1, 2**50))
    (62, 82)
    """
    if delta >= Fraction(1, 1 << SHIFT_MIN_BITS):
        return ONE_BITS
    return 20 + grid_bits(delta)


def exact_shift_pmf(epsilon: Fraction, delta: Fraction) -> tuple[int, ...]:
    """Integer pmf ``d`` (numerators over ``2**62``, summing to ``2**62``) of the shift ``K``:
    a key of frequency ``i`` is reported with token ``i - K`` when ``K < i``, so its reporting
    probability is ``sum_(k<i) d_k``, Algorithm 3's ``pi_i`` up to rounding. Certified by
    :func:`verify_shift_pmf` for ``(epsilon, delta)`` before it is returned. Needs
    ``delta >= 2**-42``; :func:`exact_shift_grid` takes any delta on a finer grid.

    >>> d = exact_shift_pmf(Fraction(1), Fraction(1, 1000))
    >>> sum(d) == 2**62, d[0] == 2**62 // 1000
    (True, True)
    """
    fn = "exact_shift_pmf"
    if delta < Fraction(1, 1 << SHIFT_MIN_BITS) or delta >= 1:
        raise ValidationError(
            "delta", fn, "in [2**-42, 1) per key (exact_shift_grid takes any)", float(delta)
        )
    return exact_shift_grid(epsilon, delta)[1]


@functools.lru_cache(maxsize=32)
def exact_shift_grid(epsilon: Fraction, delta: Fraction) -> tuple[int, tuple[int, ...]]:
    """``(B, d)``: the integer pmf ``d`` of the shift over ``2**B``, ``B = shift_grid_bits(delta)``
    (62 while ``delta >= 2**-42``, so then ``d`` is :func:`exact_shift_pmf`'s), certified by
    :func:`verify_shift_pmf` on that grid before it is returned.

    Rounding ``d_k`` down costs each ratio ``d_(k-1) / d_k`` at most ``r`` grid units over
    ``e^eps``; the second rule runs with ``delta2 = delta0 - slack`` so these units fit in the
    budget, and the slack is doubled until the certificate holds. On the finer grid every
    rounding is ``2**-B <= delta 2**-20``, so the argument is the one of the ``2**-62`` grid.

    >>> B, d = exact_shift_grid(Fraction(1), Fraction(1, 10**40))
    >>> B, sum(d) == 2**B, float(Fraction(d[0], 2**B))
    (215, True, 1e-40)
    """
    fn = "exact_shift_pmf"
    if not (0 < delta < 1):
        raise ValidationError("delta", fn, "in (0, 1) per key", float(delta))
    bits = shift_grid_bits(delta)
    one = 1 << bits
    r = exp_rational_bounds(epsilon)[0]
    delta0 = int(delta * one)
    slack = 64
    while slack < delta0 // 2:
        d = _shift_pmf(delta0, delta0 - slack, r, one)
        if verify_shift_pmf(d, epsilon, delta, bits):
            return bits, tuple(d)
        slack = max(2 * slack, 4 * (len(d) + 2) * (int(r) + 2))
    raise ValidationError("delta", fn, "a value admitting an exact shift pmf", float(delta))


def verify_shift_pmf(
    d: list[int] | tuple[int, ...], epsilon: Fraction, delta: Fraction, bits: int = ONE_BITS
) -> bool:
    """Certify that the shift mechanism with integer pmf ``d`` (over ``2**bits``) is
    ``(epsilon, delta)``-DP for frequencies moving by one: both divergences of the module notes
    for every pair of rows, in integer arithmetic with a rational ``r <= e^epsilon``."""
    one = 1 << bits
    if any(x < 0 for x in d) or sum(d) != one or not d:
        return False
    r = exp_rational_bounds(epsilon)[0]
    p, qd = r.numerator, r.denominator
    budget = delta * one * qd  # compare sums scaled by qd
    ext = [*d, 0]
    # row i+1 against row i: the worst i includes every k
    up = qd * d[0] + sum(max(0, qd * ext[k] - p * ext[k - 1]) for k in range(1, len(ext)))
    if up > budget:
        return False
    # row i against row i+1, for every i (T_i = mass of K >= i)
    tails = [0] * (len(ext) + 1)
    for k in range(len(ext) - 1, -1, -1):
        tails[k] = tails[k + 1] + ext[k]
    acc = 0
    for i in range(0, len(ext) + 1):
        if i >= 1:
            acc += max(0, qd * ext[i - 1] - p * (ext[i] if i < len(ext) else 0))
        t_i = tails[i] if i < len(tails) else 0
        t_next = tails[i + 1] if i + 1 < len(tails) else 0
        if acc + max(0, qd * t_i - p * t_next) > budget:
            return False
    return True


def shift_matrix(d: list[int] | tuple[int, ...], max_frequency: int) -> list[list[Fraction]]:
    """Rows ``0..m`` of the exact shift mechanism as Fractions: ``[i][0]`` not reported,
    ``[i][j] = d_(i-j) / 2**62``."""
    rows: list[list[Fraction]] = []
    for i in range(max_frequency + 1):
        row = [Fraction(0)] * (max_frequency + 1)
        rep = 0
        for j in range(1, i + 1):
            k = i - j
            if k < len(d):
                row[j] = Fraction(d[k], ONE)
                rep += d[k]
        row[0] = Fraction(ONE - rep, ONE)
        rows.append(row)
    return rows
