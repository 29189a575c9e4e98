"""Certified (epsilon, delta) for discrete Gaussian noise with an L2 sensitivity and a threshold.

Every user-level mechanism of this package adds discrete Gaussian noise ``N_Z(0, sigma2)``
(Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy", CKS) to the
integer aggregate of each key present in the data and keeps the keys whose noisy aggregate
reaches an integer threshold ``T``. Its guarantee is certified here by a *proven upper bound*,
never by the continuous analytic-Gaussian formula:

1. **Shared keys (zCDP).** For integer vectors ``x, x'`` the multivariate discrete Gaussian with
   independent coordinates satisfies ``D_alpha(N_Z(x, s2) || N_Z(x', s2)) <= alpha ||x - x'||_2**2
   / (2 s2)`` for every ``alpha > 1`` (CKS, Theorem 14 and its multivariate form, Section 2.3):
   adding it to an aggregate whose L2 sensitivity is ``Delta`` is ``rho``-zCDP with
   ``rho = Delta**2 / (2 s2)``. zCDP composes by adding ``rho`` under adaptive composition (Bun &
   Steinke 2016, Lemma 2.3), and a mixture over the user's own random choices (which keys it
   keeps) stays ``rho``-zCDP by the joint quasi-convexity of ``exp((alpha - 1) D_alpha)``.
2. **zCDP to (epsilon, delta).** A ``rho``-zCDP mechanism is ``(epsilon, delta_z)``-DP with
   ``delta_z = exp((alpha - 1)(alpha rho - epsilon)) (1 - 1/alpha)**(alpha - 1) / alpha`` for
   *every* ``alpha > 1`` (CKS, Proposition 12 of arXiv:2004.00010v4 for Renyi DP, Corollary 13
   for zCDP; the same bound ``dp_accounting``'s RDP accountant uses in ``compute_delta``).
   :func:`~privhist.accounting.zcdp.zcdp_delta` (the accountant's) evaluates it at one
   numerically optimised ``alpha`` in 60-digit arithmetic and rounds up.
3. **Keys only one user holds (threshold).** Call a key of the added user ``u`` *private* in a
   round when no other user kept it in that round (its aggregate without ``u`` is zero, so the
   run without ``u`` never considers it; in particular every key only ``u`` holds). ``u`` keeps
   at most ``t`` keys in a round, each of weight ``w_t``, so at most ``t`` are private. Let ``F``
   be the event that a private key is released in some round, and ``Q_A`` the run on ``D + u``
   in which private keys are never released (their noise is still drawn). Conditionally on the
   other users' choices (the same on both sides; a mixture over them keeps every bound below by
   the joint quasi-convexity of ``exp((alpha - 1) D_alpha)``), ``Q_A`` and the run on ``D`` add
   noise to the same keys and differ by ``u``'s weights on them. Coupling the two runs on
   the same noise, the run on ``D + u`` (law ``P'``) and ``Q_A`` agree outside ``F``, so for
   every output set ``E``: ``P'(E) <= Q_A(E) + Pr[F] <= e^eps P(E) + delta_z(eps) + Pr[F]``.
   Conversely, in ``Q_A`` an event ``E`` about the released keys does not depend on the private
   keys' noise, and given the history of earlier rounds round ``r`` releases none of them with
   probability at least ``1 - p_r``; so ``P'(E) >= Q_A(E and not F) >= (1 - p_F) Q_A(E)`` with
   ``p_F = sum_r p_r``, and ``P(E) <= e^eps' Q_A(E) + delta_z(eps') <= e^eps P'(E) +
   delta_z(eps')`` for ``eps' = eps + ln(1 - p_F)``. Hence the whole mechanism is
   ``(epsilon, delta_z(epsilon + ln(1 - p_F)) + p_F)``-DP for adding or removing one user.
   ``p_r`` is ``max_t 1 - (1 - Pr[Z_r >= T_r - w_t])**t``, the largest chance that one of ``t``
   private keys of weight ``w_t`` crosses ``T_r`` (Gopi et al. 2020, Theorem 5.1, for one
   round).
4. **Discrete tails.** ``Pr[Z >= m]`` is bounded from above rigorously (:func:`tail_upper`):
   ``sum_{j >= m} f(j) <= sum_{m <= j < M} f(j) + f(M) + int_M^inf f`` for the decreasing
   ``f(j) = exp(-j**2 / (2 s2))``, over the normaliser's lower bound ``sqrt(2 pi s2)`` (Poisson
   summation: ``sum_j f(j) = sqrt(2 pi s2) sum_k exp(-2 pi**2 s2 k**2)``, every term positive).

The reading of CKS's conversion chosen here is the expression implemented in ``dp_accounting``
(``compute_delta``: ``log delta = (alpha - 1)(r - epsilon + log(1 - 1/alpha)) - log alpha`` with
``r = alpha rho``). The theorem and proposition numbers of the papers cited in this package were
not checked against the papers themselves (they are not in the project's paper folder).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import lru_cache

import mpmath

from privhist.accounting.zcdp import certified_delta as certified_delta  # re-exported
from privhist.accounting.zcdp import zcdp_delta
from privhist.core.errors import ValidationError
from privhist.noise import rational_at_least

#: digits of the mpmath evaluations
_DPS = 60
#: relative margin added to every upper bound computed in floating point
_MARGIN = mpmath.mpf(10) ** -30
#: above this sigma the tail is bounded analytically instead of summed term by term
_SUM_SIGMA = 256
#: denominator bound of the rational sigma2 (keeps the exact sampler in int64)
SIGMA2_DENOMINATOR = 2**20


def _mp(x: Fraction | float | int) -> mpmath.mpf:
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


@lru_cache(maxsize=256)
def calibrate_rho(epsilon: float, delta_z: float) -> Fraction:
    """The largest ``rho`` on a ``2**-40`` grid with ``zcdp_delta(rho, epsilon) <= delta_z``
    (cached: a plan calibrates several selectors of one budget)."""
    if not 0 < delta_z < 1:
        raise ValidationError("delta", "calibrate_rho", "in (0, 1)", delta_z)
    lo, hi = 0, 1
    scale = 2**40
    while zcdp_delta(Fraction(hi, scale), epsilon) <= delta_z:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if zcdp_delta(Fraction(mid, scale), epsilon) <= delta_z:
            lo = mid
        else:
            hi = mid
    if lo == 0:
        raise ValidationError("delta", "calibrate_rho", "large enough for some noise", delta_z)
    return Fraction(lo, scale)


def sigma2_for(rho: Fraction, sensitivity2: int | Fraction) -> Fraction:
    """``sigma2 >= sensitivity2 / (2 rho)`` (squared L2 sensitivity), rounded up to a rational.

    Adding ``N_Z(0, sigma2)`` to an aggregate with squared L2 sensitivity ``sensitivity2`` is then
    at most ``rho``-zCDP.
    """
    return rational_at_least(Fraction(sensitivity2) / (2 * rho), SIGMA2_DENOMINATOR)


@lru_cache(maxsize=4096)
def tail_upper(sigma2: Fraction, m: int) -> float:
    """A rigorous upper bound on ``Pr[Z >= m]`` for ``Z ~ N_Z(0, sigma2)`` (see item 4 above).

    >>> from privhist.noise import DiscreteGaussian
    >>> exact = float(DiscreteGaussian(1).sf_mp(2))
    >>> exact <= tail_upper(Fraction(1), 2) < exact * (1 + 1e-6)
    True
    """
    if m <= 0:
        return 1.0
    with mpmath.workdps(_DPS):
        s2 = _mp(sigma2)
        s = mpmath.sqrt(s2)
        norm_lo = mpmath.sqrt(2 * mpmath.pi * s2)

        def f(j: int) -> mpmath.mpf:
            return mpmath.exp(-(mpmath.mpf(j) ** 2) / (2 * s2))

        start = m
        total = mpmath.mpf(0)
        if math.sqrt(float(sigma2)) <= _SUM_SIGMA:
            stop = m + math.ceil(4 * math.sqrt(float(sigma2))) + 2
            total = mpmath.fsum(f(j) for j in range(m, stop))
            start = stop
        # f(start) + int_start^inf f = f(start) + s sqrt(pi/2) erfc(start / (s sqrt 2))
        total += f(start) + s * mpmath.sqrt(mpmath.pi / 2) * mpmath.erfc(
            start / (s * mpmath.sqrt(2))
        )
        return min(1.0, float(total / norm_lo * (1 + _MARGIN)) * (1 + 1e-12))


def release_bound(sigma2: Fraction, threshold: int, weights: Sequence[int]) -> float:
    """``max_t 1 - (1 - Pr[Z >= T - w_t])**t`` over ``t = 1..len(weights)``, ``w_t =
    weights[t - 1]``: the largest chance that one of a user's ``t`` private keys is released."""
    worst = 0.0
    for t, w in enumerate(weights, start=1):
        q = tail_upper(sigma2, threshold - w)
        # 1 - (1 - q)**t <= t q; use the exact form, rounded up
        p = -math.expm1(t * math.log1p(-q)) if q < 1 else 1.0
        worst = max(worst, min(1.0, p * (1 + 1e-12), t * q))
    return worst


def _tail_guess(sigma2: Fraction, m: int) -> float:
    """:func:`tail_upper`'s expression in double precision: a guide for searches, which the
    certified bound then checks (never a bound itself)."""
    if m <= 0:
        return 1.0
    s2 = float(sigma2)
    s = math.sqrt(s2)
    start, total = m, 0.0
    if s <= _SUM_SIGMA:
        stop = m + math.ceil(4 * s) + 2
        total = math.fsum(math.exp(-(j * j) / (2 * s2)) for j in range(m, stop))
        start = stop
    total += math.exp(-(start * start) / (2 * s2))
    total += s * math.sqrt(math.pi / 2) * math.erfc(start / (s * math.sqrt(2)))
    return min(1.0, total / math.sqrt(2 * math.pi * s2))


def _release_guess(sigma2: Fraction, threshold: int, weights: Sequence[int]) -> float:
    """:func:`release_bound` from :func:`_tail_guess` (a guide, not a bound)."""
    worst = 0.0
    for t, w in enumerate(weights, start=1):
        q = _tail_guess(sigma2, threshold - w)
        worst = max(worst, -math.expm1(t * math.log1p(-q)) if q < 1 else 1.0)
    return worst


def calibrate_threshold(sigma2: Fraction, weights: Sequence[int], target: float) -> int:
    """The smallest integer ``T >= 1`` with :func:`release_bound` ``<= target``.

    :func:`search_threshold` on the double-precision :func:`_release_guess` finds a candidate;
    the certified bound, which decreases in ``T``, then decides: it must hold at the answer and
    fail one below it (or the answer is 1), and the answer moves one step at a time until both
    are true. So the answer is the one the same search on the certified bound alone finds, at
    two or three evaluations of it instead of one per halving.
    """
    if not 0 < target < 1:
        raise ValidationError("delta", "calibrate_threshold", "in (0, 1)", target)
    t = search_threshold(lambda m: _release_guess(sigma2, m, weights), sigma2, weights, target)
    while release_bound(sigma2, t, weights) > target:
        t += 1
    while t > 1 and release_bound(sigma2, t - 1, weights) <= target:
        t -= 1
    return t


def search_threshold(
    bound: Callable[[int], float], sigma2: Fraction, weights: Sequence[int], target: float
) -> int:
    """The smallest integer ``T >= 1`` with ``bound(T) <= target`` for a ``bound`` that
    decreases in ``T``: galloping from the Gaussian quantile of the largest weight, then
    halving."""
    w_max = max(weights)
    sigma = math.sqrt(float(sigma2))
    guess = w_max + max(1, math.floor(sigma * math.sqrt(2 * math.log(len(weights) / target)) - 2))
    lo = max(1, min(weights) - 1, guess - 2 * math.ceil(sigma) - 4)
    while bound(lo) <= target and lo > 1:
        lo = max(1, lo - 2 * math.ceil(sigma) - 4)
    hi = max(lo + 1, guess)
    while bound(hi) > target:
        hi += 2 * math.ceil(sigma) + 4
    # invariant: bound(lo) > target (or lo == 1), bound(hi) <= target
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bound(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi if bound(lo) > target else lo


def unit_weights(scale: int, max_keys: int) -> list[int]:
    """``w_t = floor(scale / sqrt(t))`` for ``t = 1..max_keys``: the integer weight each of a
    user's ``t`` kept keys receives (``t w_t**2 <= scale**2``: L2 norm at most one unit)."""
    return [math.isqrt(scale * scale // t) for t in range(1, max_keys + 1)]


def calibrate(epsilon: float, delta: float, threshold_share: float) -> tuple[Fraction, float]:
    """``(rho, p_F target)``: ``threshold_share delta`` for the threshold and the rest for the
    noise, at the slightly smaller epsilon item 3 asks for."""
    p_f = delta * threshold_share
    eps_z = epsilon + math.log1p(-p_f) * (1 + 1e-12)
    return calibrate_rho(eps_z, delta * (1 - threshold_share) * (1 - 1e-9)), p_f
