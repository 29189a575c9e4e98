"""Frozen distribution objects for analysis: pmf, cdf, sf, ppf and intervals in high precision.

These are *not* used to sample (the samplers are exact and use integers only); they serve
planning (confidence intervals, expected errors) and the statistical tests of the samplers.
Scalar values are computed with mpmath at 128 bits and returned as Python floats (``*_mp``
methods return mpmath numbers). ``pmf`` of an array is evaluated in float64 from the closed form
(relative error about ``1e-13`` times the exponent), fast enough for tens of thousands of bins.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.noise import _checks

F64 = npt.NDArray[np.float64]

_PREC = 128
_ctx = mpmath.MPContext()
_ctx.prec = _PREC
#: above this many terms, tail sums of the discrete Gaussian use float64 (relative error ~1e-13)
_MP_TERMS = 4000


def _mpq(x: Fraction) -> Any:
    return _ctx.mpf(x.numerator) / x.denominator


def _elementwise(fn: Callable[[int], Any], k: Any) -> Any:
    """Apply ``fn`` to an int (returning a float) or to every entry of an integer array."""
    if np.ndim(k) == 0:
        return float(fn(int(k)))
    arr = np.asarray(k)
    return np.array([float(fn(int(v))) for v in arr.ravel()], dtype=np.float64).reshape(arr.shape)


def _positive(value: Any, cls: str, name: str) -> Fraction:
    if isinstance(value, float):
        if not math.isfinite(value) or value <= 0:
            raise ValidationError(name, cls, "a finite number > 0", value)
        return Fraction(value)
    return _checks.positive_rational(value, cls, name)


def _check_level(q: Any, fn: str, name: str) -> float:
    if isinstance(q, bool) or not isinstance(q, int | float | Fraction) or not 0 < q < 1:
        raise ValidationError(name, fn, "a number in (0, 1)", q)
    return float(q)


class DiscreteLaplace:
    """Discrete Laplace with ``P[Z = k] = (1 - a) / (1 + a) * a**|k|``, ``a = exp(-1/scale)``.

    >>> d = DiscreteLaplace(1)
    >>> round(d.pmf(0), 6), round(d.sf(1), 6), d.interval(0.9)
    (0.462117, 0.268941, (-2, 2))
    """

    def __init__(self, scale: Fraction | int | float) -> None:
        self.scale = _positive(scale, "DiscreteLaplace", "scale")
        self._a = _ctx.exp(-1 / _mpq(self.scale))

    def pmf_mp(self, k: int) -> Any:
        a = self._a
        return (1 - a) / (1 + a) * a ** abs(k)

    def sf_mp(self, k: int) -> Any:
        """``P[Z >= k]``: ``a**k / (1 + a)`` for ``k >= 1``, ``1 - P[Z <= k - 1]`` otherwise."""
        a = self._a
        if k >= 1:
            return a**k / (1 + a)
        return 1 - a ** (1 - k) / (1 + a)

    def cdf_mp(self, k: int) -> Any:
        """``P[Z <= k] = P[Z >= -k]`` by symmetry."""
        return self.sf_mp(-k)

    def pmf(self, k: Any) -> Any:
        if np.ndim(k) == 0:
            return float(self.pmf_mp(int(k)))
        arr = np.abs(np.asarray(k, dtype=np.float64))
        log_a = -1 / float(self.scale)
        log_c = float(_ctx.log((1 - self._a) / (1 + self._a)))
        return np.asarray(np.exp(log_c + arr * log_a))

    def cdf(self, k: Any) -> Any:
        return _elementwise(self.cdf_mp, k)

    def sf(self, k: Any) -> Any:
        return _elementwise(self.sf_mp, k)

    def var(self) -> float:
        a = self._a
        return float(2 * a / (1 - a) ** 2)

    def ppf(self, q: float) -> int:
        """The smallest integer ``k`` with ``P[Z <= k] >= q``."""
        return _ppf(self.cdf_mp, _check_level(q, "DiscreteLaplace.ppf", "q"), self._width())

    def interval(self, confidence: float) -> tuple[int, int]:
        """The smallest ``[-a, a]`` with ``P[|Z| <= a] >= confidence``."""
        c = _check_level(confidence, "DiscreteLaplace.interval", "confidence")
        return _interval(lambda a: 2 * self.sf_mp(a + 1), c, self._width())

    def _width(self) -> int:
        return max(1, math.ceil(float(self.scale)))


class DiscreteGaussian:
    """Discrete Gaussian with ``P[Z = k] = exp(-k**2 / (2 sigma2)) / N``.

    The normaliser ``N = sum_k exp(-k**2 / (2 sigma2))`` is a sum truncated at ``K`` with the
    rigorous tail bound ``sum_{k > K} exp(-k**2/(2 s2)) <= (s2 / K) exp(-K**2 / (2 s2))`` (the
    Gaussian Mills-ratio bound on the integral from ``K``), below ``2**-140 N``. For
    ``sigma2 > 2500`` the equivalent dual series of the Poisson summation formula,
    ``N = sqrt(2 pi s2) sum_k exp(-2 pi**2 s2 k**2)``, is used (its terms fall even faster).

    >>> d = DiscreteGaussian(1)
    >>> round(d.pmf(0), 6), d.interval(0.95)
    (0.398942, (-2, 2))
    """

    def __init__(self, sigma2: Fraction | int | float) -> None:
        self.sigma2 = _positive(sigma2, "DiscreteGaussian", "sigma2")
        self._s2 = _mpq(self.sigma2)
        self._sigma = math.sqrt(float(self.sigma2))
        self._norm = self.normaliser_dual() if self.sigma2 > 2500 else self.normaliser_direct()

    def _cutoff(self, start: int) -> int:
        """``K >= start`` with ``(s2 / K) exp(-K**2/(2 s2))`` below ``2**-150`` (sufficient)."""
        k = max(start, 1, math.ceil(self._sigma * math.sqrt(2 * 150 * math.log(2))) + 1)
        while (self._s2 / k) * _ctx.exp(-(_ctx.mpf(k) ** 2) / (2 * self._s2)) > _ctx.mpf(2) ** -150:
            k *= 2
        return k

    def normaliser_direct(self) -> Any:
        k_max = self._cutoff(1)
        ks = range(1, k_max + 1)
        total = 1 + 2 * _ctx.fsum(_ctx.exp(-(_ctx.mpf(k) ** 2) / (2 * self._s2)) for k in ks)
        return total

    def normaliser_dual(self) -> Any:
        pi2 = 2 * _ctx.pi**2 * self._s2
        terms = [_ctx.mpf(1)]
        k = 1
        while True:
            t = _ctx.exp(-pi2 * k * k)
            terms.append(2 * t)
            if t < _ctx.mpf(2) ** -160:
                break
            k += 1
        return _ctx.sqrt(2 * _ctx.pi * self._s2) * _ctx.fsum(terms)

    def pmf_mp(self, k: int) -> Any:
        return _ctx.exp(-(_ctx.mpf(k) ** 2) / (2 * self._s2)) / self._norm

    def _tail_weight(self, k: int) -> Any:
        """``sum_{j >= k} exp(-j**2 / (2 s2))`` for ``k >= 0``."""
        if k == 0:
            return (self._norm + 1) / 2
        end = self._cutoff(k + 1)
        if end - k > _MP_TERMS:
            j = np.arange(k, end + 1, dtype=np.float64)
            s2 = float(self.sigma2)
            return _ctx.mpf(float(np.exp(-(j * j) / (2 * s2)).sum()))
        return _ctx.fsum(self._terms(k, end))

    def _terms(self, k: int, end: int) -> list[Any]:
        """``exp(-j**2 / (2 s2))`` for ``j = k..end``, each from the one before: the ratio of
        neighbours is ``r_j = exp(-(2 j + 1) / (2 s2))`` and ``r_(j+1) = r_j q`` with ``q =
        exp(-1 / s2)``, two products per term where a fresh ``exp`` costs tens of them (each
        product adds a relative rounding error of ``2**-128``: about ``1e-34`` over the
        ``_MP_TERMS`` terms at most summed this way)."""
        two_s2 = 2 * self._s2
        term = _ctx.exp(-(_ctx.mpf(k) ** 2) / two_s2)
        ratio = _ctx.exp(-(2 * _ctx.mpf(k) + 1) / two_s2)
        q = _ctx.exp(-1 / self._s2)
        out = [term]
        for _ in range(k, end):
            term *= ratio
            ratio *= q
            out.append(term)
        return out

    def sf_mp(self, k: int) -> Any:
        """``P[Z >= k]``."""
        if k >= 0:
            return self._tail_weight(k) / self._norm
        return 1 - self._tail_weight(-k + 1) / self._norm

    def cdf_mp(self, k: int) -> Any:
        return self.sf_mp(-k)

    def pmf(self, k: Any) -> Any:
        """The pmf; for arrays, float64 ``exp`` of the exact exponent over the mp normaliser."""
        if np.ndim(k) == 0:
            return float(self.pmf_mp(int(k)))
        arr = np.asarray(k, dtype=np.float64)
        log_norm = float(_ctx.log(self._norm))
        return np.asarray(np.exp(-(arr * arr) / (2 * float(self.sigma2)) - log_norm))

    def cdf(self, k: Any) -> Any:
        return _elementwise(self.cdf_mp, k)

    def sf(self, k: Any) -> Any:
        return _elementwise(self.sf_mp, k)

    def var(self) -> float:
        """``E[Z**2] = 2 sum_{k >= 1} k**2 P[Z = k]`` (slightly below ``sigma2``, CKS Cor. 9)."""
        k_max = self._cutoff(1) + 1
        if k_max > _MP_TERMS:
            j = np.arange(1, k_max + 1, dtype=np.float64)
            total = _ctx.mpf(float((j * j * np.exp(-(j * j) / (2 * float(self.sigma2)))).sum()))
        else:
            total = _ctx.fsum(
                _ctx.mpf(j) ** 2 * _ctx.exp(-(_ctx.mpf(j) ** 2) / (2 * self._s2))
                for j in range(1, k_max + 1)
            )
        return float(2 * total / self._norm)

    def ppf(self, q: float) -> int:
        return _ppf(self.cdf_mp, _check_level(q, "DiscreteGaussian.ppf", "q"), self._width())

    def interval(self, confidence: float) -> tuple[int, int]:
        c = _check_level(confidence, "DiscreteGaussian.interval", "confidence")
        return _interval(lambda a: 2 * self.sf_mp(a + 1), c, self._width())

    def _width(self) -> int:
        return max(1, math.ceil(self._sigma))


class Geometric:
    """Geometric on ``{0, 1, ...}`` with ``P[G >= k] = exp(-x k)``."""

    def __init__(self, x: Fraction | int | float) -> None:
        self.x = _positive(x, "Geometric", "x")
        self._a = _ctx.exp(-_mpq(self.x))

    def pmf_mp(self, k: int) -> Any:
        return (1 - self._a) * self._a**k if k >= 0 else _ctx.mpf(0)

    def sf_mp(self, k: int) -> Any:
        return self._a ** max(k, 0)

    def cdf_mp(self, k: int) -> Any:
        return 1 - self._a ** (k + 1) if k >= 0 else _ctx.mpf(0)

    def pmf(self, k: Any) -> Any:
        if np.ndim(k) == 0:
            return float(self.pmf_mp(int(k)))
        arr = np.asarray(k, dtype=np.float64)
        log_c = float(_ctx.log(1 - self._a))
        out = np.exp(log_c - float(self.x) * np.maximum(arr, 0))
        return np.where(arr >= 0, out, 0.0)

    def cdf(self, k: Any) -> Any:
        return _elementwise(self.cdf_mp, k)

    def sf(self, k: Any) -> Any:
        return _elementwise(self.sf_mp, k)


class Binomial:
    """Binomial(``n``, ``p``) for rational ``p`` (log-gamma pmf, tails summed in mpmath)."""

    def __init__(self, n: int, p: Fraction | int | float) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValidationError("n", "Binomial", "an integer >= 0", n)
        if isinstance(p, float):
            if not 0 <= p <= 1:
                raise ValidationError("p", "Binomial", "in [0, 1]", p)
            p = Fraction(p)
        self.n = n
        self.p = _checks.probability(p, "Binomial", "p")
        self._p = _mpq(self.p)

    def pmf_mp(self, k: int) -> Any:
        n, p = self.n, self._p
        if k < 0 or k > n:
            return _ctx.mpf(0)
        if p == 0 or p == 1:
            return _ctx.mpf(1 if k == (0 if p == 0 else n) else 0)
        log = (
            _ctx.loggamma(n + 1)
            - _ctx.loggamma(k + 1)
            - _ctx.loggamma(n - k + 1)
            + k * _ctx.log(p)
            + (n - k) * _ctx.log(1 - p)
        )
        return _ctx.exp(log)

    def cdf_mp(self, k: int) -> Any:
        """``P[X <= k]``: the lower tail summed outwards from ``k`` (or ``1 - sf(k + 1)``)."""
        if k < 0:
            return _ctx.mpf(0)
        if k >= self.n:
            return _ctx.mpf(1)
        if k >= self.n * self.p:
            return 1 - self.sf_mp(k + 1)
        return self._tail_sum(k, -1)

    def sf_mp(self, k: int) -> Any:
        """``P[X >= k]``: the upper tail summed outwards from ``k`` (or ``1 - cdf(k - 1)``)."""
        if k <= 0:
            return _ctx.mpf(1)
        if k > self.n:
            return _ctx.mpf(0)
        if k <= self.n * self.p:
            return 1 - self.cdf_mp(k - 1)
        return self._tail_sum(k, +1)

    def _tail_sum(self, k: int, step: int) -> Any:
        """``sum pmf(j)`` for ``j = k, k + step, ...`` away from the mean.

        Consecutive ratios ``r_j`` of the pmf decrease away from the mode, so the rest of the
        tail after a term ``t`` is at most ``t r / (1 - r)``: the sum stops once that bound is
        below ``2**-140`` of the total.
        """
        n, p = self.n, self._p
        term = self.pmf_mp(k)
        total = term
        j = k
        eps = _ctx.mpf(2) ** -140
        while 0 < j < n or (j == 0 and step > 0) or (j == n and step < 0):
            if step > 0:
                r = (n - j) * p / ((j + 1) * (1 - p))
            else:
                r = j * (1 - p) / ((n - j + 1) * p)
            if r < 1 and term * r / (1 - r) <= total * eps:
                break
            term *= r
            total += term
            j += step
        return total

    def pmf(self, k: Any) -> Any:
        return _elementwise(self.pmf_mp, k)

    def cdf(self, k: Any) -> Any:
        return _elementwise(self.cdf_mp, k)

    def sf(self, k: Any) -> Any:
        return _elementwise(self.sf_mp, k)


def _ppf(cdf: Callable[[int], Any], q: float, width: int) -> int:
    """Smallest integer ``k`` with ``cdf(k) >= q`` (galloping outwards, then bisection)."""
    lo, hi = -width, width
    while cdf(lo) >= q:
        lo *= 2
    while cdf(hi) < q:
        hi *= 2
    while hi - lo > 1:  # cdf(lo) < q <= cdf(hi)
        mid = (lo + hi) // 2
        if cdf(mid) >= q:
            hi = mid
        else:
            lo = mid
    return hi


def _interval(
    two_sided_tail: Callable[[int], Any], confidence: float, width: int
) -> tuple[int, int]:
    """Smallest ``a >= 0`` with ``two_sided_tail(a) = P[|Z| > a] <= 1 - confidence``."""
    miss = _ctx.mpf(1) - _ctx.mpf(confidence)
    if two_sided_tail(0) <= miss:
        return 0, 0
    lo, hi = 0, width
    while two_sided_tail(hi) > miss:
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # tail(lo) > miss >= tail(hi)
        mid = (lo + hi) // 2
        if two_sided_tail(mid) <= miss:
            hi = mid
        else:
            lo = mid
    return -hi, hi
