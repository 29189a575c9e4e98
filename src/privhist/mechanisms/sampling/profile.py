"""The exact privacy profile of sample-and-threshold, and its three calibrations.

Setting (Bharadwaj & Cormode, "Sample and Threshold Differential Privacy: Histograms and
applications", AISTATS 2022, Section 3.1). Every privacy unit is kept independently with
probability ``p``; a key held by ``c`` units has sampled count ``Y_c ~ Binomial(c, p)`` and is
released, with ``Y_c``, when ``Y_c >= tau``; otherwise the output is "not released" (``NR``).
Write ``b_c(k) = Pr[Y_c = k]``.

**The exact profile.** For add/remove neighbours one key's unit count moves from ``c`` to
``c - 1`` (``c >= 1``). Let ``P`` be the output distribution of the key at ``c`` and ``Q`` at
``c - 1``; the pair's privacy profile is ``max(H(P || Q), H(Q || P))`` with the hockey-stick
divergence ``H_a(P || Q) = sum_o max(0, P(o) - a Q(o))`` at ``a = e^eps``
(:mod:`privhist.accounting.profile`), and the mechanism's per-key profile is the supremum over
``c``.

*Lemma A (removing a unit is pure).* If ``(1 - p) e^eps >= 1``, i.e. ``p <= 1 - e^-eps``, then
``H(Q || P) = 0``. For a released ``k < c``, ``Q(k) / P(k) = (c - k) / ((1 - p) c) <= 1 / (1 - p)``
(the inverse of the ratio in the paper's Lemma of Section 3.1; ``k = c`` has ``Q(c) = 0``). For
``NR``: couple ``Y_c = Y_(c-1) + B`` with ``B ~ Bernoulli(p)``; if ``Y_(c-1) < tau`` and ``B = 0``
then ``Y_c < tau``, so ``P(NR) >= (1 - p) Q(NR)``. Every ratio ``Q/P`` is at most
``1/(1 - p) <= e^eps``. This is the paper's condition ``e^-eps <= 1 - p_s`` of Theorem 1 and the
reason :func:`check_sampling_rate` refuses larger rates: above it, released counts well below
``c p`` are more likely without the unit than ``e^eps`` times with it.

*Lemma B (adding a unit).* ``P(NR) <= Q(NR)`` (``Y_c`` dominates ``Y_(c-1)``), so ``NR`` adds
nothing to ``H(P || Q)``. For a released ``k``, ``P(k) / Q(k) = (1 - p) c / (c - k)``, which
exceeds ``e^eps`` exactly when ``k > c q`` with ``q = 1 - (1 - p) e^-eps`` (the paper's
equation (4)). Hence, with ``m_c = max(tau, floor(c q) + 1)``, ``B_c = Pr[Y_(c-1) >= m_c]`` and
``Pr[Y_c >= m] = Pr[Y_(c-1) >= m] + p b_(c-1)(m - 1)``::

    delta_c = sum_{k >= m_c} (P(k) - e^eps Q(k)) = p b_(c-1)(m_c - 1) - (e^eps - 1) B_c.   (*)

``delta_c = 0`` for ``c < tau`` and ``delta_tau = p^tau``.

*Lemma C (the search range).* For every ``c``,
``delta_c <= Pr[Y_c >= m_c] <= Pr[Y_c > c q] <= exp(-c D(q || p))`` by the Chernoff-Hoeffding
bound (the paper's equation (5)), which decreases in ``c``. So for any ``C``::

    sup_c delta_c <= max( max_{tau <= c <= C} delta_c , exp(-(C + 1) D(q || p)) ),

with equality to the first term as soon as the tail bound is below it. The maximum sits just
below ``c = tau / q``: up to there the whole released region has ratio above ``e^eps``
(``m_c = tau``) and ``delta_c`` grows with ``c``; beyond it ``m_c`` follows ``c q`` and ``delta_c``
decays like the Chernoff bound (with a sawtooth from the integer part). It is *not* near
``tau / p`` (where a key is released half of the time): there ``delta_c`` is already about
``exp(-(tau/p) D)``. :func:`search_limit` takes ``C`` as the larger of ``2 tau / q`` and the first
count whose tail bound is below 1/16 of the maximum on ``[tau, 2 tau / q]``; the tests compare
with a search over a range many times larger.

*Monotone in tau.* Each ``delta_c`` is a sum of positive terms over ``k >= max(tau, ...)``, so
raising ``tau`` can only lower it: the smallest ``tau`` meeting a target is found by bisection.

*Theorem 1.* The paper bounds ``delta_c`` by ``Pr[Y_c >= m_c]`` (dropping the subtracted
``e^eps Q`` mass) and then by ``exp(-(tau/q) D(q || p))``; (*) keeps both, so the exact ``tau``
is never larger than Theorem 1's. The alpha rule (Section 3.1, Lemma after Theorem 1:
``p = alpha (1 - e^-eps)``, ``delta = exp(-C_alpha tau)``, ``C_alpha = ln(1/alpha) - 1/(1+alpha)``)
loosens Theorem 1 further (``ln((1 + alpha e^-eps)/alpha) >= ln(1/alpha)`` and the limit
``eps -> 0`` of ``eps (1-q)/q``), so its ``tau`` is never smaller than Theorem 1's at the same
``p``. The paper states the Lemma for ``eps <= 1``; its proof shows the bound decreasing in ``eps``,
so it holds for every ``eps`` (we report it whenever ``C_alpha > 0``, i.e. ``alpha < 0.52``).

**Arithmetic.** Searches use float64 (:func:`delta_float`, vectorised with SciPy). The parameters
a mechanism uses are then verified by :func:`certified_delta` in interval arithmetic (mpmath's
``iv`` context, 192 bits, outward rounding) with a rational ``L <= e^eps``: replacing ``e^eps``
by ``L`` (and ``q`` by ``q_L = 1 - (1 - p)/L <= q``) can only increase every
``max(0, P(k) - e^eps Q(k))``, and ``p`` is an exact rational, so the upper end of the interval is
an upper bound on the true ``delta``, rounded up to a float at the end. Rounding never overstates
the guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext

from privhist.core.errors import ValidationError
from privhist.core.validation import float_up
from privhist.mechanisms.sampling import _binom
from privhist.noise import exp_rational_bounds

__all__ = [
    "RATE_BITS",
    "CertifiedDelta",
    "alpha_rate",
    "c_alpha",
    "c_alpha_threshold",
    "certified_delta",
    "check_sampling_rate",
    "chernoff_delta",
    "chernoff_threshold",
    "delta_float",
    "exact_threshold",
    "float_threshold",
    "largest_rate",
    "profile_float",
    "rate_bound",
    "search_limit",
]

#: sampling rates computed by the library are multiples of 2**-RATE_BITS (rounded down)
RATE_BITS = 40
#: the largest count the searches visit (beyond it the Chernoff tail bound is used as is)
MAX_SEARCH = 2_000_000
#: bits of the rational bound on e^eps
_EXP_BITS = 192

_IV = MPIntervalContext()
_IV.prec = 192

F64 = npt.NDArray[np.float64]


# --------------------------------------------------------------------------------------------
# the sampling rate


def exp_lower(epsilon: Fraction) -> Fraction:
    """A rational ``L <= e^epsilon`` (accurate to about ``2**-192``)."""
    return exp_rational_bounds(epsilon, _EXP_BITS)[0]


def rate_bound(epsilon: Fraction) -> Fraction:
    """A rational ``r <= 1 - e^-epsilon`` (the largest rate Lemma A allows, rounded down).

    >>> float(rate_bound(Fraction(1)))  # 1 - 1/e
    0.6321205588285577
    """
    return 1 - 1 / exp_lower(epsilon)


def _as_fraction(value: Any, function: str, name: str, expected: str) -> Fraction:
    if isinstance(value, bool):
        raise ValidationError(name, function, expected, value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(name, function, expected, value)
    try:
        return Fraction(value)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        raise ValidationError(name, function, expected, value) from None


def check_sampling_rate(value: Any, epsilon: Fraction, function: str) -> Fraction:
    """``value`` as an exact Fraction in ``(0, 1 - e^-epsilon]``; a float is read as its exact
    binary value.

    Raises:
        ValidationError: outside the range, with the reason (Lemma A).
    """
    bound = rate_bound(epsilon)
    expected = (
        f"in (0, 1 - e^-epsilon] = (0, {float(bound):.6g}] for the per-key epsilon "
        f"{float(epsilon):.6g}: a released count's probability ratio between neighbours is up "
        "to 1/(1 - sampling_rate), which must not exceed e^epsilon"
    )
    p = _as_fraction(value, function, "sampling_rate", expected)
    if not 0 < p <= bound:
        raise ValidationError("sampling_rate", function, expected, value)
    return p


def alpha_rate(
    alpha: Fraction, epsilon: Fraction, function: str = "sample_and_threshold"
) -> Fraction:
    """The paper's rate ``alpha (1 - e^-epsilon)`` (Section 3.1), rounded down to a multiple of
    ``2**-RATE_BITS`` (never above the real value, so never above the allowed bound).

    >>> alpha_rate(Fraction(1, 6), Fraction(1))  # about 0.10535
    Fraction(115837317431, 1099511627776)
    """
    if not 0 < alpha <= 1:
        raise ValidationError("alpha", function, "in (0, 1]", float(alpha))
    scaled = alpha * rate_bound(epsilon) * (1 << RATE_BITS)
    num = scaled.numerator // scaled.denominator
    if num < 1:
        raise ValidationError(
            "alpha", function, f"large enough that the rate is at least 2**-{RATE_BITS}", alpha
        )
    return Fraction(num, 1 << RATE_BITS)


# --------------------------------------------------------------------------------------------
# Theorem 1 and the alpha rule


def kl_bernoulli(q: float, p: float) -> float:
    """``D(q || p)`` between Bernoulli(q) and Bernoulli(p), in nats."""
    out = 0.0
    if q > 0:
        out += q * math.log(q / p)
    if q < 1:
        out += (1 - q) * math.log((1 - q) / (1 - p))
    return out


def _q(p: float, epsilon: float) -> float:
    """``q = 1 - (1 - p) e^-eps``, the paper's equation (4)."""
    return -math.expm1(math.log1p(-p) - epsilon)


def chernoff_delta(p: float, epsilon: float, tau: int) -> float:
    """Theorem 1's bound ``exp(-(tau/q) D(q || p))`` on delta (float)."""
    q = _q(p, epsilon)
    return math.exp(-(tau / q) * kl_bernoulli(q, p))


def chernoff_threshold(p: float, epsilon: float, delta: float) -> int:
    """Smallest integer ``tau >= 1`` with ``exp(-(tau/q) D(q || p)) <= delta`` (Theorem 1).

    >>> chernoff_threshold(0.1, 1.0, 1e-8)
    14
    """
    q = _q(p, epsilon)
    x = q * math.log(1 / delta) / kl_bernoulli(q, p)
    tau = max(1, math.ceil(x))
    while tau > 1 and chernoff_delta(p, epsilon, tau - 1) <= delta:
        tau -= 1
    while chernoff_delta(p, epsilon, tau) > delta:
        tau += 1
    return tau


def c_alpha(alpha: float) -> float:
    """``C_alpha = ln(1/alpha) - 1/(1 + alpha)`` (Section 3.1).

    >>> round(c_alpha(1 / 6), 3)  # the paper's 0.935
    0.935
    """
    return math.log(1 / alpha) - 1 / (1 + alpha)


def c_alpha_threshold(alpha: float, delta: float) -> int | None:
    """``tau = ceil(ln(1/delta) / C_alpha)`` (None when ``C_alpha <= 0``, alpha above ~0.52).

    >>> c_alpha_threshold(1 / 6, 1e-8)  # the paper's example: tau = 20
    20
    """
    ca = c_alpha(alpha)
    if ca <= 0:
        return None
    return max(1, math.ceil(math.log(1 / delta) / ca))


# --------------------------------------------------------------------------------------------
# the exact profile in float64 (searches)


def profile_float(p: float, tau: int, epsilon: float, counts: Any) -> F64:
    """``delta_c`` of (*) for each unit count ``c`` (float64; 0 for ``c < tau``)."""
    c = np.asarray(counts, dtype=np.int64)
    q = _q(p, epsilon)
    m = np.maximum(tau, np.floor(c * q).astype(np.int64) + 1)
    # p b_{c-1}(m - 1) - (e^eps - 1) Pr[Y_{c-1} >= m]
    h = p * _binom.pmf(m - 1, c - 1, p) - math.expm1(epsilon) * _binom.sf(m - 1, c - 1, p)
    h = np.maximum(h, 0.0)
    h[c < tau] = 0.0
    return h


def _tail(p: float, q: float, count: int) -> float:
    """Lemma C: ``sup_{c > count} delta_c <= exp(-(count + 1) D(q || p))``."""
    return math.exp(-(count + 1) * kl_bernoulli(q, p))


def search_limit(p: float, tau: int, epsilon: float) -> int:
    """The count ``C`` up to which :func:`delta_float` and :func:`certified_delta` search
    (Lemma C): at least ``2 tau / q``, and far enough that the tail bound beyond ``C`` is below
    1/16 of the maximum found on ``[tau, 2 tau / q]`` (capped at ``MAX_SEARCH``)."""
    q = _q(p, epsilon)
    first = min(MAX_SEARCH, max(tau + 1, math.ceil(2 * tau / q)))
    head = float(profile_float(p, tau, epsilon, np.arange(tau, first + 1)).max())
    d = kl_bernoulli(q, p)
    level = max(head, 1e-300) / 16
    need = math.ceil(math.log(1 / level) / d) - 1
    return int(min(MAX_SEARCH, max(first, need)))


def delta_float(p: float, tau: int, epsilon: float) -> tuple[float, int]:
    """``(sup_c delta_c, argmax)`` in float64 over ``[tau, search_limit]``, the tail bound
    beyond included (Lemma C)."""
    limit = search_limit(p, tau, epsilon)
    c = np.arange(tau, limit + 1)
    h = profile_float(p, tau, epsilon, c)
    i = int(np.argmax(h))
    tail = _tail(p, _q(p, epsilon), limit)
    return max(float(h[i]), tail), int(c[i])


# --------------------------------------------------------------------------------------------
# the certified profile (interval arithmetic)


@dataclass(frozen=True)
class CertifiedDelta:
    """A rigorous upper bound on the per-key ``delta(eps)`` of sample-and-threshold.

    ``value`` bounds ``sup_c delta_c``; ``at_count`` is the unit count where the largest
    computed ``delta_c`` was found, ``limit`` the end of the searched range ``[tau, limit]``, and
    ``tail`` the Lemma C bound for counts beyond it (included in ``value``).
    """

    value: Fraction
    at_count: int
    limit: int
    tail: Fraction

    @property
    def upper(self) -> float:
        """``value`` rounded up to a float."""
        return float_up(self.value)


def _iv_frac(x: Fraction) -> Any:
    return _IV.mpf(x.numerator) / x.denominator


def _upper_fraction(x: Any) -> Fraction:
    num, den = libmp.to_rational(x._mpi_[1])
    return Fraction(num, den)


def certified_delta(
    p: Fraction, tau: int, epsilon: Fraction, limit: int | None = None
) -> CertifiedDelta:
    """Rigorous upper bound on ``sup_c delta_c`` at ``epsilon`` (per key, add/remove).

    Runs (*) for ``c = tau .. limit`` with the recurrences (all factors exact rationals)::

        A_c = B_c + p b_(c-1)(m_c - 1)
        if m_(c+1) = m_c:      B_(c+1) = A_c,
                               b_c(m - 1) = b_(c-1)(m - 1) (1 - p) c / (c - m + 1)
        if m_(c+1) = m_c + 1:  B_(c+1) = A_c - b_c(m_c),
                               b_c(m) = b_(c-1)(m - 1) p c / m

    starting from ``b_(tau-1)(tau-1) = p^(tau-1)``, ``B_tau = 0``, in interval arithmetic with
    ``L <= e^eps`` (see the module notes), and adds Lemma C's tail bound beyond ``limit``.

    >>> d = certified_delta(Fraction(1, 10), 10, Fraction(1))  # Theorem 1 needs tau = 14
    >>> d.upper < 1e-8 < certified_delta(Fraction(1, 10), 9, Fraction(1)).upper
    True
    >>> d.at_count, d.limit  # the maximum sits just below tau / q = 14.95
    (14, 30)
    """
    if tau < 1:
        raise ValidationError("threshold", "certified_delta", "an integer >= 1", tau)
    ell = exp_lower(epsilon)
    q_l = 1 - (1 - p) / ell
    if not p < q_l < 1:
        raise ValidationError("sampling_rate", "certified_delta", "below 1 - e^-epsilon", float(p))
    if limit is None:
        limit = search_limit(float(p), tau, float(epsilon))
    limit = max(limit, tau)
    qn, qd = q_l.numerator, q_l.denominator
    pr = _iv_frac(p)
    pr_c = _iv_frac(1 - p)
    lm1 = _iv_frac(ell - 1)
    beta = pr ** (tau - 1)  # b_(c-1)(m_c - 1) at c = tau
    b_tail = _IV.mpf(0)  # B_c = Pr[Y_(c-1) >= m_c]
    m = tau
    best = libmp.fzero  # raw upper end of the largest delta_c so far
    at = tau
    for c in range(tau, limit + 1):
        pb = pr * beta
        hb = (pb - lm1 * b_tail)._mpi_[1]
        if libmp.mpf_gt(hb, best):
            best, at = hb, c
        if c == limit:
            break
        a_tail = b_tail + pb
        m_next = max(tau, ((c + 1) * qn) // qd + 1)
        if m_next == m:
            b_tail = a_tail
            beta = beta * pr_c * c / (c - m + 1)
        else:
            term = beta * pr * c / m
            b_tail = a_tail - term
            beta = term
            m = m_next
    # Lemma C beyond the limit, with q_L (its Chernoff bound holds for every q' in (p, q])
    qi = _iv_frac(q_l)
    # 1 - q_L from its exact rational (1 - p) / L: at a large epsilon q_L is within 2**-192 of
    # 1, and the interval 1 - qi would reach below 0 (the log of a negative number)
    qi_c = _iv_frac((1 - p) / ell)
    kl = qi * _IV.log(qi / pr) + qi_c * _IV.log(qi_c / pr_c)
    kl_low = _IV.mpf(mpmath.mp.make_mpf(kl._mpi_[0]))  # lower end: a smaller D, a larger bound
    tail = _upper_fraction(_IV.exp(-(limit + 1) * kl_low))
    num, den = libmp.to_rational(best)
    value = max(Fraction(num, den), tail, Fraction(0))
    return CertifiedDelta(value=value, at_count=at, limit=limit, tail=tail)


# --------------------------------------------------------------------------------------------
# calibration


def exact_threshold(
    p: Fraction, epsilon: Fraction, delta: Fraction, function: str = "sample_and_threshold"
) -> tuple[int, CertifiedDelta]:
    """The smallest ``tau`` whose certified per-key delta at ``epsilon`` is at most ``delta``.

    Bisection in float64 between 1 and Theorem 1's ``tau`` (the profile is monotone in
    ``tau``), then certification of the result and of ``tau - 1``.

    >>> exact_threshold(Fraction(1, 10), Fraction(1), Fraction(1, 10**8))[0]
    10
    """
    pf, ef, df = float(p), float(epsilon), float(delta)
    tau = float_threshold(pf, ef, df, function)
    cert = certified_delta(p, tau, epsilon)
    while cert.value > delta:
        tau += 1
        cert = certified_delta(p, tau, epsilon)
    # the float search agrees with the certificate to ~1e-12 relative; look below only when the
    # float value there is not clearly above the target
    while tau > 1 and delta_float(pf, tau - 1, ef)[0] <= df * (1 + 1e-6):
        below = certified_delta(p, tau - 1, epsilon)
        if below.value > delta:
            break
        tau, cert = tau - 1, below
    return tau, cert


def float_threshold(
    p: float, epsilon: float, delta: float, function: str = "sample_and_threshold"
) -> int:
    """The smallest ``tau`` with float64 ``delta_float <= delta`` (bisection below Theorem 1's
    ``tau``; uncertified — :func:`exact_threshold` certifies)."""
    hi = chernoff_threshold(p, epsilon, delta)
    while delta_float(p, hi, epsilon)[0] > delta:
        hi *= 2
        if hi > MAX_SEARCH:
            raise ValidationError("delta", function, "reachable by a threshold", delta)
    lo = 0  # every tau >= 1; 0 stands for "infeasible"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if delta_float(p, mid, epsilon)[0] <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def largest_rate(
    tau: int, epsilon: Fraction, delta: Fraction, function: str = "sample_and_threshold"
) -> tuple[Fraction, CertifiedDelta]:
    """The largest rate on the ``2**-RATE_BITS`` grid (by float64 bisection, assuming delta grows
    with the rate) whose certified per-key delta for threshold ``tau`` is at most ``delta``.

    The certificate is what matters for privacy; the bisection only aims at the largest rate.
    """
    ef, df = float(epsilon), float(delta)
    one = 1 << RATE_BITS
    bound = rate_bound(epsilon) * one
    top = bound.numerator // bound.denominator
    if delta_float(top / one, tau, ef)[0] <= df:
        num = top
    else:
        lo, hi = 0, top  # lo feasible (rate 0), hi infeasible
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if delta_float(mid / one, tau, ef)[0] <= df:
                lo = mid
            else:
                hi = mid
        num = lo
    while num >= 1:
        p = Fraction(num, one)
        cert = certified_delta(p, tau, epsilon)
        if cert.value <= delta:
            return p, cert
        num -= max(1, num >> 12)
    raise ValidationError(
        "threshold",
        function,
        f"large enough that some sampling rate >= 2**-{RATE_BITS} meets delta {df:.3g}",
        tau,
    )
