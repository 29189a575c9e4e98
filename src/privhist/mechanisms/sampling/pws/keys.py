"""Sanitized keys: the optimal reporting probabilities of Algorithm 3 and their structure.

Cohen, Geri, Sarlos & Stemmer, Section 4. For non-decreasing inclusion probabilities
``q = (q_0 = 0, q_1, q_2, ...)`` the end-to-end reporting probabilities (Algorithm 3)

    pi_0 = 0,  pi_i = min{ q_i, e^eps pi_(i-1) + delta, 1 + e^-eps (pi_(i-1) + delta - 1) }

are each the largest any (eps, delta)-DP sanitiser of the sample allows (Lemma 4.1), and a
sampled key of frequency ``i`` is kept with probability ``p_i = pi_i / q_i``.

Vectorisation. Where ``pi_(i-1) = q_(i-1)`` the next value is a function of ``q`` alone, so it is
computed for all ``i`` at once; the recursion runs step by step only inside the stretches where
``pi_i < q_i``, and Lemma 4.3 bounds their total length by ``2 L + 1`` (``L`` of equation 3).

Closed form for ``q = 1`` (Lemma 4.2, extended to non-integral ``L``): the first constraint is the
minimum exactly while ``pi_(i-1) <= (1 - delta) / (e^eps + 1)``, i.e. for ``i <= floor(L) + 1``,
giving ``pi_i = delta (e^(eps i) - 1) / (e^eps - 1)``; after that ``u_i = 1 - pi_i`` follows
``u_i = e^-eps (u_(i-1) - delta)``, whose fixed point is ``u* = -delta / (e^eps - 1)``, so
``u_i = u* + e^(-eps (i - s)) (u_s - u*)`` with ``s = floor(L) + 1`` until ``pi_i`` reaches 1. For
integral ``L`` this is equation (4).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.validation import check_delta, check_epsilon
from privhist.mechanisms._grid import ONE, ONE_BITS, grid_bits
from privhist.mechanisms.optimal_selection import optimal_reporting_grid
from privhist.mechanisms.sampling.pws.schemes import check_inclusion
from privhist.noise import exp_rational_bounds

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def _params(epsilon: float, delta: float, fn: str) -> tuple[float, float]:
    eps = check_epsilon(epsilon, fn)
    d = check_delta(delta, fn, positive=True)
    return eps, d


def threshold_L(epsilon: float, delta: float) -> float:
    """``L(eps, delta) = (1/eps) ln((e^eps - 1 + 2 delta) / (delta (e^eps + 1)))`` (equation 3).

    >>> round(threshold_L(0.1, 0.01), 4)
    17.827
    """
    eps, d = _params(epsilon, delta, "threshold_L")
    # a difference of logarithms: the quotient overflows a double for delta near 1e-308
    return (math.log(math.expm1(eps) + 2 * d) - math.log(d) - math.log1p(math.exp(eps))) / eps


def delta_for_integral_L(epsilon: float, L: int) -> float:
    """The ``delta`` that makes ``L(eps, delta)`` equal to the integer ``L`` (for tests of
    equation 4 and Lemma 5.2): ``delta = (e^eps - 1) / (e^(eps L) (e^eps + 1) - 2)``."""
    eps = check_epsilon(epsilon, "delta_for_integral_L")
    return math.expm1(eps) / (math.exp(eps * L) * (math.exp(eps) + 1) - 2)


def optimal_reporting_closed_form(epsilon: float, delta: float, max_frequency: int) -> F64:
    """``pi*_i`` for ``q = 1`` from the closed form (Lemma 4.2; any real ``L``), ``i = 0..m``.

    >>> [round(float(x), 4) for x in optimal_reporting_closed_form(0.6931471805599453, 0.1, 6)]
    [0.0, 0.1, 0.3, 0.7, 0.9, 1.0, 1.0]
    """
    eps, d = _params(epsilon, delta, "optimal_reporting_closed_form")
    i = np.arange(max_frequency + 1, dtype=np.float64)
    e = math.exp(eps)
    s = math.floor(threshold_L(eps, d)) + 1  # last index of the first phase
    first = d * np.expm1(eps * np.minimum(i, s)) / (e - 1)
    u_star = -d / (e - 1)
    u_s = 1 - d * math.expm1(eps * s) / (e - 1)
    second = 1 - (u_star + np.exp(-eps * np.maximum(i - s, 0)) * (u_s - u_star))
    out: F64 = np.minimum(1.0, np.where(i <= s, first, second))
    return out


def reporting_probabilities(q: npt.ArrayLike, epsilon: float, delta: float) -> F64:
    """Algorithm 3: ``pi = (pi_0, ..., pi_m)`` for ``q = (q_0, ..., q_m)``, vectorised.

    >>> import numpy as np
    >>> q = np.ones(7); q[0] = 0
    >>> [round(float(x), 4) for x in reporting_probabilities(q, 0.6931471805599453, 0.1)]
    [0.0, 0.1, 0.3, 0.7, 0.9, 1.0, 1.0]
    """
    fn = "reporting_probabilities"
    eps, d = _params(epsilon, delta, fn)
    qa = check_inclusion(q, fn)
    e, inv = math.exp(eps), math.exp(-eps)
    m = qa.shape[0] - 1
    # candidate pi_i assuming pi_(i-1) = q_(i-1)
    cand = np.empty(m + 1)
    cand[0] = 0.0
    cand[1:] = np.minimum(qa[1:], np.minimum(e * qa[:-1] + d, 1 + inv * (qa[:-1] + d - 1)))
    pi = cand.copy()
    short = np.nonzero(cand < qa)[0]  # where pi falls below q (if the previous was at q)
    pos = 0  # pi[0..pos] are final
    k = 0
    while k < short.shape[0]:
        i = int(short[k])
        if i <= pos:
            k += 1
            continue
        # pi[pos+1 .. i-1] equal q (cand == q there); pi[i] = cand[i] < q_i: step the recursion
        prev = float(cand[i])
        pi[i] = prev
        j = i + 1
        while j <= m:
            v = min(float(qa[j]), e * prev + d, 1 + inv * (prev + d - 1))
            pi[j] = v
            if v >= qa[j]:
                break
            prev = v
            j += 1
        pos = j
        k += 1
    return pi


def reporting_probabilities_iterative(q: npt.ArrayLike, epsilon: float, delta: float) -> F64:
    """Algorithm 3 step by step (the reference the vectorised version is tested against)."""
    eps, d = _params(epsilon, delta, "reporting_probabilities_iterative")
    qa = check_inclusion(q, "reporting_probabilities_iterative")
    e, inv = math.exp(eps), math.exp(-eps)
    pi = np.zeros(qa.shape[0])
    for i in range(1, qa.shape[0]):
        pi[i] = min(qa[i], e * pi[i - 1] + d, 1 + inv * (pi[i - 1] + d - 1))
    return pi


def reporting_probabilities_mp(
    qa: npt.NDArray[np.float64], epsilon: float, delta: float
) -> tuple[npt.NDArray[np.object_], Any, Any, Any]:
    """Algorithm 3 step by step in mpmath numbers at the current working precision (call it
    inside ``mpmath.workprec``): ``(pi, e^eps, e^-eps, delta)``, ``pi`` an object array of
    ``mpf``. ``qa``, ``epsilon`` and ``delta`` must already be checked; the high-precision paths
    of Algorithms 4 and 5 start from it.

    >>> import mpmath, numpy as np
    >>> with mpmath.workprec(80):
    ...     pi, e, inv, d = reporting_probabilities_mp(np.array([0.0, 1, 1]), math.log(2), 0.1)
    ...     [mpmath.nstr(x, 6) for x in pi]
    ['0.0', '0.1', '0.3']
    """
    e, inv, d = mpmath.exp(epsilon), mpmath.exp(-epsilon), mpmath.mpf(delta)
    pis = [mpmath.mpf(0)]
    for i in range(1, qa.shape[0]):
        prev = pis[-1]
        pis.append(min(mpmath.mpf(float(qa[i])), e * prev + d, 1 + inv * (prev + d - 1)))
    return np.array(pis, dtype=object), e, inv, d


def keep_probabilities(q: npt.ArrayLike, epsilon: float, delta: float) -> F64:
    """``p_i = pi_i / q_i`` (0 where ``q_i = 0``): the probability that the key sanitiser keeps
    a sampled key of frequency ``i`` (Algorithm 2, sanitized keys)."""
    qa = np.asarray(q, dtype=np.float64)
    pi = reporting_probabilities(qa, epsilon, delta)
    out: F64 = np.divide(pi, qa, out=np.zeros_like(pi), where=qa > 0)
    return np.minimum(out, 1.0)


def exact_reporting_numerators(epsilon: float, delta: float, q: npt.ArrayLike | None = None) -> I64:
    """Algorithm 3 on the ``2**-62`` grid, exactly: numerators ``N_i`` with ``pi_i = N_i/2**62``.

    ``q is None`` means ``q = 1`` (then this is the cached sequence of
    :func:`privhist.mechanisms.optimal_selection.optimal_reporting_numerators`, up to the first 1).
    Otherwise ``q_i`` is rounded *down* to the grid (``Q_i = floor(q_i 2**62)``, so
    ``pi_i <= q_i``) and each step takes ``floor`` of ``min{Q_i, r N_(i-1) + delta 2**62,
    2**62 - (2**62 - N_(i-1) - delta 2**62) / r}`` with a rational ``r <= e^eps``: both DP
    constraints between ``i - 1`` and ``i`` then hold exactly for the grid values (the argument
    of :mod:`privhist.mechanisms.optimal_selection`). The exact step runs only where a float
    pre-check with a relative margin of ``1e-9`` cannot show that ``N_i = Q_i``.

    The ``2**-62`` grid needs ``delta >= 2**-62``; :func:`exact_reporting_grid` takes any delta.
    """
    bits, nums = exact_reporting_grid(epsilon, delta, q)
    if bits != ONE_BITS:
        raise ValidationError(
            "delta",
            "exact_reporting_numerators",
            ">= 2**-62 per key on the 2**-62 grid (exact_reporting_grid takes any delta)",
            delta,
        )
    out: I64 = nums.astype(np.int64)
    return out


def exact_reporting_grid(
    epsilon: float, delta: float, q: npt.ArrayLike | None = None
) -> tuple[int, npt.NDArray[Any]]:
    """``(B, N)``: Algorithm 3 exactly on the grid ``2**-B`` of :func:`~privhist.mechanisms._grid.
    grid_bits` (``B = 62`` while ``delta >= 2**-62``), ``pi_i = N_i / 2**B``; ``q`` as in
    :func:`exact_reporting_numerators`. ``N`` is int64 for ``B = 62``, Python ints otherwise.

    >>> B, N = exact_reporting_grid(1.0, 1e-30)
    >>> B, float(N[1]) / 2**B, int(N[-1]) == 2**B
    (162, 1e-30, True)
    """
    fn = "exact_reporting_grid"
    eps, d = _params(epsilon, delta, fn)
    if q is None:
        bits, nums = optimal_reporting_grid(Fraction(eps), Fraction(d))
        return bits, np.array(nums, dtype=np.int64 if bits == ONE_BITS else object)
    qa = check_inclusion(q, fn)
    Q = np.minimum(np.floor(qa * float(ONE)), float(ONE)).astype(np.int64)
    return grid_reporting_table(eps, d, Q)


def grid_reporting_numerators(epsilon: float, delta: float, Q: npt.ArrayLike) -> I64:
    """Algorithm 3 exactly on the ``2**-62`` grid for integer inclusion numerators
    ``Q = (Q_0 = 0, Q_1, ...)`` (``q_i = Q_i / 2**62``, non-decreasing): ``N_i`` with
    ``N_i <= Q_i`` and, with a rational ``r <= e^eps``, ``N_i <= r N_(i-1) + delta 2**62`` and
    ``2**62 - N_(i-1) <= r (2**62 - N_i) + delta 2**62`` exactly; ``N`` is non-decreasing, so the
    two reverse constraints hold as well. Steps where a float pre-check (relative margin
    ``1e-9``) shows ``N_i = Q_i``, or where ``Q_i = Q_(i-1) = N_(i-1)``, are skipped in bulk.
    Needs ``delta >= 2**-62``; :func:`grid_reporting_table` takes any delta.

    >>> N = grid_reporting_numerators(1.0, 0.25, [0, 2**62, 2**62])
    >>> bool(N[1] == 2**60), round(int(N[2]) / 2**62, 6)  # 1 - 0.5 / e
    (True, 0.81606)
    """
    fn = "grid_reporting_numerators"
    eps, d = _params(epsilon, delta, fn)
    if Fraction(d) < Fraction(1, ONE):
        raise ValidationError(
            "delta", fn, ">= 2**-62 (about 2.2e-19; grid_reporting_table takes any delta)", d
        )
    nums = grid_reporting_table(eps, d, Q, fn=fn)[1]
    out: I64 = nums.astype(np.int64)
    return out


def grid_reporting_table(
    epsilon: float, delta: float, Q: npt.ArrayLike, *, fn: str = "grid_reporting_table"
) -> tuple[int, npt.NDArray[Any]]:
    """``(B, N)``: Algorithm 3 exactly on the grid ``2**-B`` (``B = grid_bits(delta)``, so
    ``B = 62`` while ``delta >= 2**-62`` and ``62 + ceil(log2(1 / delta))`` below) for integer
    inclusion numerators ``Q`` over ``2**62`` (as in :func:`grid_reporting_numerators`):
    ``pi_i = N_i / 2**B`` with ``N_i <= Q_i 2**(B - 62)``, ``N_i <= r N_(i-1) + delta 2**B`` and
    ``2**B - N_(i-1) <= r (2**B - N_i) + delta 2**B`` exactly, ``r <= e^eps`` rational.
    Rounding down to the finer grid keeps both constraints for the same reason as on ``2**-62``
    (:mod:`privhist.mechanisms.optimal_selection`); ``delta 2**B >= 2**62`` keeps the first step
    away from zero. ``N`` is int64 for ``B = 62``, an object array of Python ints otherwise.

    >>> B, N = grid_reporting_table(1.0, 1e-100, [0, 2**61, 2**62])
    >>> B, float(N[1]) / 2**B
    (395, 1e-100)
    """
    eps, d = _params(epsilon, delta, fn)
    eps_f, d_f = Fraction(eps), Fraction(d)
    Qa = np.asarray(Q)
    if (
        Qa.ndim != 1
        or Qa.shape[0] < 2
        or Qa.dtype.kind not in "iu"
        or int(Qa[0]) != 0
        or (Qa < 0).any()
        or (Qa > ONE).any()
        or (np.diff(Qa) < 0).any()
    ):
        raise ValidationError(
            "Q", fn, "non-decreasing integers in [0, 2**62] with Q_0 = 0", f"shape {Qa.shape}"
        )
    bits = grid_bits(d_f)
    shift = bits - ONE_BITS
    one = 1 << bits
    Qi = [int(x) << shift for x in Qa.tolist()]
    r = exp_rational_bounds(eps_f)[0]
    inv_r = 1 / r
    d_one = d_f * one
    # float pre-check in units of 1 (scaling by a power of two is exact); below 1e-290 delta
    # could be subnormal, so only the equality test clears steps there
    e, inv = float(r), float(inv_r)
    Qf = Qa.astype(np.float64) / float(ONE)
    clear = np.zeros(Qf.shape[0], dtype=bool)
    if d >= 1e-290:
        clear[1:] = (Qf[1:] <= (e * Qf[:-1] + d) * (1 - 1e-9)) & (
            Qf[1:] <= (1 - inv * (1 - Qf[:-1] - d)) * (1 - 1e-9)
        )
    clear[1:] |= Qa[1:] == Qa[:-1]
    hard = np.nonzero(~clear)[0]
    m = Qa.shape[0] - 1
    nums = Qa.astype(np.int64).copy() if shift == 0 else np.array(Qi, dtype=object)
    prev, i = 0, 1
    while i <= m:
        if clear[i] and prev == Qi[i - 1]:
            # N = Q up to the next position the pre-check cannot clear
            k = int(np.searchsorted(hard, i))
            nxt = int(hard[k]) if k < hard.shape[0] else m + 1
            prev, i = Qi[nxt - 1], nxt
            continue
        best = min(Fraction(Qi[i]), r * prev + d_one, one - inv_r * (one - prev - d_one))
        prev = int(best)
        nums[i] = prev
        i += 1
    return bits, nums
