"""zCDP with a threshold failure probability: the accountant's rule for the weighted Gaussian
selectors (:mod:`privhist.mechanisms.user_level.selectors`).

A :class:`~privhist.accounting.events.ZcdpThresholdEvent` says: ``rho``-zCDP, except that with
probability at most ``failure`` a key only the added user holds is released (the proof is item 3
of :mod:`privhist.mechanisms.user_level._gauss`). Such a mechanism is
``(epsilon, delta_z(epsilon + ln(1 - failure)) + failure)``-DP (:func:`certified_delta`), with
``delta_z`` the zCDP conversion of Canonne, Kamath and Steinke 2020 (Corollary 13;
:func:`zcdp_delta`).

*Composition.* Runs on the same users, each chosen after seeing the earlier outputs but with its
parameters fixed in advance, compose to ``(sum rho_i, sum failure_i)``: the zCDP parts add under
adaptive composition (Bun and Steinke 2016, Lemma 2.3), and the argument of item 3 is made round
by round given the history, so it covers the rounds of several releases as it covers the rounds
of one (the failure bounds add by the union bound, and the reverse direction's factor is
``prod (1 - failure_i) >= 1 - sum failure_i``). Pure zCDP parts (Gaussian and discrete Gaussian
noise, :class:`~privhist.accounting.events.ZcdpEvent`) join with failure 0.
:func:`zcdp_threshold_parts` sums an event's parts, :func:`threshold_delta` gives its delta at an
epsilon and :func:`threshold_epsilon` the smallest epsilon at a delta (the accountant's
``zcdp_threshold`` rule).

Not offered: a Renyi filter over such events. Its proof (:mod:`privhist.accounting.filters`)
needs a Renyi curve for every release, and the failure term is not a Renyi divergence bound;
stopping adaptively on a mixture of both needs an argument not written here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import mpmath

__all__ = ["certified_delta", "threshold_epsilon", "with_threshold_failure", "zcdp_delta"]

#: digits of the mpmath evaluations
_DPS = 60
#: relative margin added to every upper bound computed in floating point
_MARGIN = mpmath.mpf(10) ** -30


def _mp(x: Fraction | float | int) -> mpmath.mpf:
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


def zcdp_delta(rho: Fraction | float, epsilon: float) -> float:
    """An upper bound on ``delta(epsilon)`` for a ``rho``-zCDP mechanism (CKS Corollary 13).

    >>> round(zcdp_delta(0.5, 1.0), 4) < 0.5
    True
    """
    r = float(rho)
    if r <= 0:
        return 0.0

    def log_delta(a: float) -> float:
        return (a - 1) * (a * r - epsilon + math.log1p(-1 / a)) - math.log(a)

    # unimodal in log(alpha - 1): golden-section search in floats, then one exact-ish evaluation
    lo, hi = math.log(1e-6), math.log(1e7)
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = log_delta(1 + math.exp(a)), log_delta(1 + math.exp(b))
    for _ in range(200):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = log_delta(1 + math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = log_delta(1 + math.exp(b))
    alpha = Fraction(1 + math.exp((lo + hi) / 2))
    with mpmath.workdps(_DPS):
        al, rr, ee = _mp(alpha), _mp(Fraction(rho)), _mp(Fraction(epsilon))
        val = mpmath.exp((al - 1) * (al * rr - ee + mpmath.log(1 - 1 / al)) - mpmath.log(al))
        # a bound below the smallest float must not become 0 (which would claim pure DP)
        return min(1.0, max(float(val * (1 + _MARGIN)) * (1 + 1e-12), math.ulp(0.0)))


def with_threshold_failure(
    noise_delta: Callable[[float], float], epsilon: float, p_f: float
) -> float:
    """``noise_delta(epsilon + ln(1 - p_F)) + p_F``, rounded up (item 3): the delta of noise
    whose profile is ``noise_delta`` and a threshold that releases a key only the added user
    holds with probability at most ``p_F``."""
    if p_f >= 1:
        return 1.0
    eps_z = epsilon + math.log1p(-p_f) * (1 + 1e-12)
    return min(1.0, noise_delta(eps_z) + p_f * (1 + 1e-12))


def certified_delta(rho: Fraction | float, epsilon: float, p_f: float) -> float:
    """``delta_z(epsilon + ln(1 - p_F)) + p_F`` (item 3): a proven bound on the delta achieved by
    noise of zCDP parameter ``rho`` and a threshold that releases a private key with probability
    at most ``p_F``. (Corollary 13 holds at ``epsilon = 0`` too; below 0 the bound is 1.)"""
    return with_threshold_failure(lambda e: 1.0 if e < 0 else zcdp_delta(rho, e), epsilon, p_f)


def threshold_epsilon(rho: Fraction | float, failure: float, delta: float) -> float:
    """The smallest epsilon (to a relative ``2**-40``, rounded up) with
    ``certified_delta(rho, epsilon, failure) <= delta``; ``math.inf`` when none.

    >>> eps = threshold_epsilon(Fraction(1, 100), 1e-9, 1e-6)
    >>> certified_delta(Fraction(1, 100), eps, 1e-9) <= 1e-6
    True
    """
    if failure >= delta:
        return math.inf
    hi = 1.0
    while certified_delta(rho, hi, failure) > delta:
        hi *= 2
        if hi > 1e6:
            return math.inf
    lo = 0.0
    while hi - lo > hi * 2**-40:
        mid = (lo + hi) / 2
        if certified_delta(rho, mid, failure) <= delta:
            hi = mid
        else:
            lo = mid
    return hi
