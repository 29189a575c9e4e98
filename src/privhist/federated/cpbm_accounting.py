"""Renyi-DP accounting of the clipped Poisson binomial mechanism (cPBM).

Source: "Bounding Contribution Optimally for Federated Frequency Estimation under User-level
Distributed Differential Privacy" (the paper), Section 3.2, Lemma 2 (proof in Appendix C.2),
Lemma 3 / equation (8) (RDP to (epsilon, delta)), Proposition 4 (two phases, TFFE) and
Appendix D (parallel composition across the rounds of MFFE).

The mechanism. Each of ``n`` users holds a vector ``y`` with ``||y||_2 <= C`` (after clipping),
so every coordinate has ``p[k] = theta / C * y[k] + 1/2`` in ``[1/2 - theta, 1/2 + theta]``, and
sends ``Z[k] ~ Binomial(m, p[k])``. The server sees only ``sum_i Z_i`` (secure sum).

The worst case (Appendix C.2, following Chen, Ozgur and Kairouz 2022, Lemma 3.6). For one
coordinate and one trial (``m = 1``) the output is a sum of ``n`` independent Bernoullis. The
Renyi divergence of the two outputs on neighbouring datasets (one user's ``p`` changed) is at most
the larger of ``D_lambda(A || B)`` and ``D_lambda(B || A)`` where, with ``q = 1/2 + theta``,
``n' = ceil((n - 1) / 2)``::

    A = Bernoulli(1 - q) + Binomial(n', q),        B = Binomial(n' + 1, q).

(Each other user's ``Bernoulli(p)`` is a mixture of ``Bernoulli(1/2 +- theta)``, and the Renyi
moment is jointly convex; of the ``n - 1`` others at least ``n'`` sit at the same extreme and
the rest are dropped by post-processing; by the symmetry ``k -> n' + 1 - k`` that extreme may be
taken as ``q``.) The ``m`` trials are ``m`` independent such sums added together and the ``D``
coordinates are independent, so by composition (and post-processing for the sum over trials)::

    eps(lambda) <= m * D / (lambda - 1) * log max(Pi_1, Pi_2),
    Pi_1 = sum_k B(k) (A(k) / B(k))^lambda,   Pi_2 = sum_k B(k) (B(k) / A(k))^(lambda - 1).

With ``xi_k = log(A(k) / B(k)) = log((1+2 theta)/(1-2 theta) (n'+1-k)/(n'+1)
+ (1-2 theta)/(1+2 theta) k/(n'+1))``, ``Pi_1 = sum_k B(k) e^(lambda xi_k)`` is the paper's
``Pi_1`` exactly and ``Pi_2 = sum_k B(k) e^(-(lambda - 1) xi_k)`` is its ``Pi_2`` with the
``k = n' + 1`` term restored (see below). Both are computed here as
``log1p(sum_k B(k) expm1(.))``, accurate for the tiny values large ``n`` gives.

Differences from the paper's statement (each checked in ``tests/federated``):

1. Lemma 2 multiplies by ``d``, the data dimension. What is randomised is the ``D``-dimensional
   representation ``y``, so the factor must be the number of coordinates sent: ``D`` for the
   Kashin representation, ``2**b - 1`` for the Haar coefficients, 1 for an indicator. This
   module takes that number as ``dimension``.
2. The printed ``Pi_2`` (Appendix C.2) sums ``Bin(k, n', 1/2 - theta) (1/2 + theta)
   (k/(n'-k+1) ...)`` up to ``k = n' + 1``, where ``Bin(n'+1, n', .) = 0`` multiplies a division
   by zero; the true term, ``(1/2 + theta) (1/2 - theta)**n' ((1-2 theta)/(1+2 theta))**lambda``,
   is positive, so the printed ``Pi_2`` is slightly too small. The main-text ``Pi_2`` also drops
   the factor ``(1/2 + theta)`` and uses a different ``mu_k``; the appendix version is the one
   that follows from the derivation. :func:`printed_rdp_bound` reproduces both for comparison.
3. "Asymptotically eps(lambda) = Theta(m d theta^2 / lambda / n)": the order ``lambda`` belongs
   in the numerator (as in Proposition 4).
4. Lemma 3 states ``1 < delta < 0``; it means ``0 < delta < 1``.

Secure-sum modulus. Sums of ``n`` values in ``[0, m]`` take ``n m + 1`` values, so the modulus
must be at least ``n m + 1`` (the paper's ``M = n m`` wraps the all-ones case to 0); see
:func:`privhist.federated.cpbm.secure_sum_modulus`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

# the Renyi curve and its composition live in the accountant; re-exported here
from privhist.accounting._interval import IV as _IVC
from privhist.accounting._interval import exact as _iv_exact
from privhist.accounting._interval import upper as _iv_upper
from privhist.accounting.renyi import DEFAULT_ORDERS as DEFAULT_ORDERS
from privhist.accounting.renyi import RdpCurve as RdpCurve
from privhist.accounting.renyi import certified_rdp_to_dp as certified_rdp_to_dp
from privhist.accounting.renyi import check_orders as _check_orders
from privhist.accounting.renyi import compose as compose
from privhist.accounting.renyi import parallel_compose as parallel_compose
from privhist.accounting.renyi import rdp_to_dp as rdp_to_dp
from privhist.core.errors import ValidationError
from privhist.core.validation import check_delta, check_epsilon, check_positive_int

F64 = npt.NDArray[np.float64]

# interval arithmetic of the certified bounds, in a private context

#: largest theta the mechanism accepts (p stays in [1/4, 3/4])
THETA_MAX = Fraction(1, 4)


def check_theta(theta: Any, function: str, name: str = "theta") -> float:
    """``theta`` as a float in (0, 1/4] (the paper's range, Section 3.2)."""
    expected = "a number in (0, 1/4]"
    if isinstance(theta, bool):
        raise ValidationError(name, function, expected, theta)
    try:
        t = float(theta)
    except (TypeError, ValueError):
        raise ValidationError(name, function, expected, theta) from None
    if not math.isfinite(t) or t <= 0 or t > 0.25:
        raise ValidationError(name, function, expected, theta)
    return t


def worst_case_pair(n: int, theta: float) -> tuple[F64, F64]:
    """The two output distributions whose Renyi divergences bound cPBM (Appendix C.2).

    ``A = Bernoulli(1/2 - theta) + Binomial(n', 1/2 + theta)`` and
    ``B = Binomial(n' + 1, 1/2 + theta)``, ``n' = ceil((n - 1) / 2)``, as float arrays over
    ``k = 0 .. n' + 1``.

    >>> a, b = worst_case_pair(1, 0.25)
    >>> a.round(12).tolist(), b.round(12).tolist()
    ([0.75, 0.25], [0.25, 0.75])
    """
    fn = "worst_case_pair"
    n = check_positive_int(n, fn, "n")
    t = check_theta(theta, fn)
    npr = n // 2  # ceil((n - 1) / 2)
    k = np.arange(npr + 2)
    b = np.exp(_log_binom_pmf(k, npr + 1, 0.5 + t))
    a = np.exp(_xi(k, npr, t)) * b
    return a, b


def _log_binom_pmf(k: npt.NDArray[np.int64], n: int, p: float) -> F64:
    from scipy import special  # here: scipy is slow to import

    out = (
        special.gammaln(n + 1)
        - special.gammaln(k + 1)
        - special.gammaln(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )
    return np.asarray(out, dtype=np.float64)


def _xi(k: npt.NDArray[np.int64], npr: int, theta: float) -> F64:
    """``xi_k = log(A(k) / B(k))`` (Appendix C.2, "First term")."""
    r = (1 + 2 * theta) / (1 - 2 * theta)
    frac = k / (npr + 1)
    return np.asarray(np.log(r * (1 - frac) + frac / r), dtype=np.float64)


def log_pi(n: int, theta: float, order: float) -> tuple[float, float]:
    """``(log Pi_1, log Pi_2)`` of Lemma 2 at Renyi order ``order`` (``m = 1``, one coordinate).

    ``Pi_1 = E_B[e^(order xi)]`` and ``Pi_2 = E_B[e^(-(order - 1) xi)]`` (module notes), computed
    as ``log1p(E_B[expm1(.)])``.

    >>> l1, l2 = log_pi(1, 0.25, 2.0)   # randomized response 3:1
    >>> round(math.exp(l1), 12), round(math.exp(l2), 12)
    (2.333333333333, 2.333333333333)
    """
    fn = "log_pi"
    n = check_positive_int(n, fn, "n")
    t = check_theta(theta, fn)
    lam = _check_orders([order], fn)[0]
    npr = n // 2
    k = np.arange(npr + 2)
    logw = _log_binom_pmf(k, npr + 1, 0.5 + t)
    xi = _xi(k, npr, t)
    return _log_mean_exp(logw, lam * xi), _log_mean_exp(logw, -(lam - 1) * xi)


def _log_mean_exp(logw: F64, a: F64) -> float:
    """``log sum_k e^(logw_k + a_k)`` for weights summing to 1: by log-sum-exp when large, by
    ``log1p(sum_k w_k expm1(a_k))`` when small (no cancellation in ``1 + tiny``)."""
    from scipy import special  # here: scipy is slow to import

    big = float(special.logsumexp(logw + a))
    if big > 0.5:
        return big
    terms = np.where(
        a > 1,
        np.exp(logw + np.minimum(a, 700)) - np.exp(logw),
        np.exp(logw) * np.expm1(np.minimum(a, 1)),
    )
    return math.log1p(max(float(np.sum(terms)), 0.0))


def printed_rdp_bound(n: int, theta: float, order: float, *, version: str = "appendix") -> float:
    """``max(Pi_1, Pi_2)`` exactly as printed in the paper (for comparison only).

    ``version="appendix"`` is Lemma 4 of Appendix C.2 (the ``k = n' + 1`` term of ``Pi_2``
    taken as 0, since ``Bin(n' + 1, n', .) = 0``); ``version="main"`` is Lemma 2 of Section 3.2
    (no ``(1/2 + theta)`` factor and ``mu_k = log((1+2 theta)/(1-2 theta) (n'+1-k)/(n'+1))``).
    Use :func:`cpbm_rdp` for accounting.
    """
    fn = "printed_rdp_bound"
    if version not in ("appendix", "main"):
        raise ValidationError("version", fn, "'appendix' or 'main'", version)
    n = check_positive_int(n, fn, "n")
    t = check_theta(theta, fn)
    lam = _check_orders([order], fn)[0]
    npr = n // 2
    r = (1 + 2 * t) / (1 - 2 * t)
    pi1 = 0.0
    pi2 = 0.0
    for k in range(npr + 2):
        frac = k / (npr + 1)
        xi = math.log(r * (1 - frac) + frac / r)
        pi1 += (
            math.comb(npr + 1, k) * (0.5 + t) ** k * (0.5 - t) ** (npr + 1 - k) * math.exp(lam * xi)
        )
        if k > npr:
            continue  # Bin(n' + 1, n', .) = 0
        bin2 = math.comb(npr, k) * (0.5 - t) ** k * (0.5 + t) ** (npr - k)
        if version == "appendix":
            mu = math.log(r * frac + (1 - frac) / r)
            pi2 += bin2 * (0.5 + t) * (k / (npr - k + 1) * r + 1 / r) * math.exp(-lam * mu)
        else:
            if k == npr + 1:
                continue
            mu = math.log(r * (npr + 1 - k) / (npr + 1))
            pi2 += bin2 * (k / (npr - k + 1) * r + 1 / r) * math.exp(-lam * mu)
    return max(pi1, pi2)


def cpbm_rdp(
    n: int,
    theta: float,
    m: int,
    dimension: int,
    orders: Iterable[float] | None = None,
) -> RdpCurve:
    """Lemma 2: the RDP curve of the secure sum of ``n`` users' cPBM outputs.

    ``eps(lambda) = m * dimension / (lambda - 1) * log max(Pi_1, Pi_2)`` (module notes: the
    factor is the number of coordinates each user sends, not the data dimension).

    Args:
        n: Number of users whose outputs are summed (at least 1).
        theta: cPBM parameter in (0, 1/4].
        m: Binomial trials per coordinate (at least 1).
        dimension: Coordinates sent per user (``D``; ``2**b - 1`` for DHT; 1 for an indicator).
        orders: Renyi orders (> 1); :data:`DEFAULT_ORDERS` if omitted.

    Returns:
        An :class:`RdpCurve` for replace-one-user neighbours.

    >>> curve = cpbm_rdp(10_000, 0.2, 30, 50)
    >>> round(curve.epsilon(1e-4), 2)
    1.8
    """
    fn = "cpbm_rdp"
    n = check_positive_int(n, fn, "n")
    t = check_theta(theta, fn)
    m = check_positive_int(m, fn, "m")
    dim = check_positive_int(dimension, fn, "dimension")
    lams = _check_orders(orders, fn)
    values = []
    for lam in lams:
        l1, l2 = log_pi(n, t, lam)
        values.append(m * dim * max(l1, l2) / (lam - 1))
    return RdpCurve(lams, tuple(values))


def cpbm_epsilon(
    n: int,
    theta: float,
    m: int,
    dimension: int,
    delta: float,
    orders: Iterable[float] | None = None,
) -> float:
    """Epsilon of one cPBM secure sum at ``delta`` (Lemma 2 + equation (8))."""
    return cpbm_rdp(n, theta, m, dimension, orders).epsilon(delta)


def calibrate_m(
    epsilon: float,
    delta: float,
    n: int,
    theta: float,
    dimension: int,
    *,
    orders: Iterable[float] | None = None,
    m_max: int = 1 << 40,
) -> int:
    """The largest ``m`` whose cPBM guarantee meets ``(epsilon, delta)`` (more ``m``, less noise).

    The RDP curve is linear in ``m`` (Lemma 2), so the epsilon of equation (8) is non-decreasing
    in ``m``; the search is by doubling and bisection over integers.

    Raises:
        ValidationError: even ``m = 1`` exceeds the target (the message gives its epsilon).

    >>> m = calibrate_m(2.8, 1e-4, 10_000, 0.2, 50)
    >>> cpbm_epsilon(10_000, 0.2, m, 50, 1e-4) <= 2.8 < cpbm_epsilon(10_000, 0.2, m + 1, 50, 1e-4)
    True
    """
    fn = "calibrate_m"
    eps = check_epsilon(epsilon, fn)
    d = check_delta(delta, fn, positive=True)
    base = cpbm_rdp(n, theta, 1, dimension, orders)

    def eps_of(mm: int) -> float:
        return base.scaled(mm).epsilon(d)

    first = eps_of(1)
    if first > eps:
        raise ValidationError(
            "epsilon", fn, f">= {first:.6g}, the epsilon of m = 1 at these settings", epsilon
        )
    lo, hi = 1, 2
    while hi <= m_max and eps_of(hi) <= eps:
        lo, hi = hi, 2 * hi
    hi = min(hi, m_max + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if eps_of(mid) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def calibrate_theta(
    epsilon: float,
    delta: float,
    n: int,
    m: int,
    dimension: int,
    *,
    orders: Iterable[float] | None = None,
    resolution: int = 1 << 20,
) -> Fraction:
    """The largest ``theta = j / resolution <= 1/4`` whose cPBM guarantee meets the target.

    The worst-case divergence grows with ``theta`` (a larger range of ``p`` contains every
    neighbouring pair of a smaller one), so bisection over ``j`` applies.

    Raises:
        ValidationError: even ``theta = 1 / resolution`` exceeds the target.

    >>> t = calibrate_theta(2.8, 1e-4, 10_000, 30, 50)
    >>> 0.2 < float(t) <= 0.25
    True
    """
    fn = "calibrate_theta"
    eps = check_epsilon(epsilon, fn)
    d = check_delta(delta, fn, positive=True)
    res = check_positive_int(resolution, fn, "resolution", minimum=4)

    def ok(j: int) -> bool:
        return cpbm_rdp(n, j / res, m, dimension, orders).epsilon(d) <= eps

    top = res // 4
    if ok(top):
        return Fraction(top, res)
    if not ok(1):
        raise ValidationError("epsilon", fn, "reachable with theta >= 1/resolution", epsilon)
    lo, hi = 1, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return Fraction(lo, res)


# --------------------------------------------------------------------------------------------
# certified versions: interval arithmetic instead of float64


def _worst_case_enclosures(n: int, theta: float) -> list[tuple[Any, Any]]:
    """Interval enclosures ``(B(k), rho_k)`` of the worst-case pair, ``rho_k = A(k) / B(k)``.

    ``rho_k = r (1 - f) + f / r`` with ``r = (1 + 2 theta) / (1 - 2 theta)``, ``f = k / (n'+1)``
    is an exact rational (module notes); ``B(k) = C(n'+1, k) q^k (1-q)^(n'+1-k)`` is enclosed.
    """
    return list(_enclosures(n // 2, Fraction(theta)))


@functools.lru_cache(maxsize=16)
def _enclosures(npr: int, t: Fraction) -> tuple[tuple[Any, Any], ...]:
    q = Fraction(1, 2) + t
    r = (1 + 2 * t) / (1 - 2 * t)
    odds = _iv_exact(q / (1 - q))
    b = _iv_exact(1 - q) ** (npr + 1)  # B(0); then B(k+1) = B(k) (n'+1-k)/(k+1) q/(1-q)
    out = []
    for k in range(npr + 2):
        f = Fraction(k, npr + 1)
        out.append((b, _iv_exact(r * (1 - f) + f / r)))
        b = b * (npr + 1 - k) / (k + 1) * odds
    return tuple(out)


@functools.lru_cache(maxsize=256)
def certified_log_pi(n: int, theta: float, order: float) -> Fraction:
    """An upper bound on ``log max(Pi_1, Pi_2) / (order - 1)`` (Lemma 2 with ``m = 1`` and one
    coordinate) in interval arithmetic: the certified counterpart of :func:`log_pi`.

    >>> bound = certified_log_pi(1, 0.25, 2.0)     # randomized response 3:1: log(7/3)
    >>> abs(float(bound) - math.log(7 / 3)) < 1e-15
    True
    """
    fn = "certified_log_pi"
    n = check_positive_int(n, fn, "n")
    t = check_theta(theta, fn)
    lam = _iv_exact(Fraction(_check_orders([order], fn)[0]))
    pi1 = _IVC.mpf(0)
    pi2 = _IVC.mpf(0)
    for b, rho in _worst_case_enclosures(n, t):
        log_rho = _IVC.log(rho)
        pi1 += b * _IVC.exp(lam * log_rho)
        pi2 += b * _IVC.exp(-(lam - 1) * log_rho)
    bound = max(_iv_upper(_IVC.log(pi1)), _iv_upper(_IVC.log(pi2)))
    return max(bound / (Fraction(order) - 1), Fraction(0))


def worst_case_account(n: int, theta: float, step: Any = None) -> Any:
    """The certified PLD (:class:`privhist.accounting.certified.CertifiedAccount`) of one cPBM
    coordinate and trial: the pair ``(A, B)`` of Appendix C.2.

    The reduction of Appendix C.2 (mixtures of the extremes by joint convexity; the other users'
    sums dropped as post-processing, which adding independent noise is) holds for every
    f-divergence, the hockey-stick divergence included, so ``(A, B)`` dominates one coordinate
    and one trial in both directions, and the ``m D`` trials and coordinates compose (module
    notes). Losses ``log rho_k`` (under ``A``) and ``-log rho_k`` (under ``B``) and the masses are
    the upper ends of interval enclosures.
    """
    from privhist.accounting.certified import DEFAULT_STEP, CertifiedAccount, CertifiedPLD

    fn = "worst_case_account"
    n = check_positive_int(n, fn, "n")
    t = check_theta(theta, fn)
    h = DEFAULT_STEP if step is None else step
    remove, add = [], []
    for b, rho in _worst_case_enclosures(n, t):
        log_rho = _IVC.log(rho)
        remove.append((_iv_upper(b * rho), _iv_upper(log_rho)))
        add.append((_iv_upper(b), _iv_upper(-log_rho)))
    return CertifiedAccount(CertifiedPLD.from_losses(remove, h), CertifiedPLD.from_losses(add, h))
