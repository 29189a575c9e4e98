"""Accuracy of sample-and-threshold: reporting probabilities, estimation error, confidence
intervals, and the error-minimising choice of ``(p, tau)``.

All of it is float64 analysis of public parameters (no data); nothing here changes a guarantee.

**Estimate and error.** A key held by ``c`` units has sampled count ``Y ~ Binomial(c, p)``; the
estimate is ``Y / p`` when ``Y >= tau`` and 0 when the key is not released (the Horvitz-Thompson
estimate with suppression; Section 3.3 of Bharadwaj & Cormode 2022 bounds the same two error
sources). Its mean squared error has a closed form: with ``E[Y 1{Y >= t}] = c p Pr[Y' >= t - 1]``
(``Y' ~ Binomial(c - 1, p)``) and ``E[Y (Y - 1) 1{Y >= t}] = c (c - 1) p^2 Pr[Y'' >= t - 2]``
(``Y'' ~ Binomial(c - 2, p)``), and ``F1 = Pr[Y' <= tau - 2]``, ``F2 = Pr[Y'' <= tau - 3]``::

    MSE(c) = c (1 - p) / p + 2 c^2 F1 - c (c - 1) F2 - c F1 / p,

which is ``c (1 - p)/p`` (pure sampling variance) for ``tau <= 1`` and ``c^2`` when the key can
never be released. The *expected error* of a calibration for a population of ``N`` units is the
worst root-mean-squared error over true counts ``0..N``, ``max_c sqrt(MSE(c))``: below about
``tau / p`` the suppression bias dominates, above it the sampling error ``sqrt(c (1-p)/p)``, so
large ``N`` favours large ``p`` and small ``N`` a smaller ``tau / p``.

**Confidence intervals.** For a released key, ``lower``/``upper`` bound the true number of units
``c`` with an exact interval that accounts for the selection ``Y >= tau``: it inverts the
conditional law of ``Y`` given ``Y >= tau`` (Clopper-Pearson style, equal tails)::

    lower(y) = min{ c >= y : Pr_c[Y >= y | Y >= tau] > a/2 },
    upper(y) = max{ c : Pr_c[Y <= y | Y >= tau] > a/2 },       a = 1 - confidence.

The binomial family has a monotone likelihood ratio in ``c`` (``b_(c+1)(k) / b_c(k) =
(c+1)(1-p)/(c+1-k)`` grows with ``k``), which truncation to ``Y >= tau`` keeps, so both
conditional tails are monotone in ``c``; the two one-sided tests each reject a true ``c`` with
probability at most ``a/2``, hence ``Pr_c[lower <= c <= upper | released] >= confidence`` for
every ``c`` — the coverage holds *conditionally on release*, where an interval ignoring the
threshold would be too low for keys near ``tau / p``. The tails are float64; where the
denominator underflows (``Pr_c[Y >= tau] < 1e-300``) both conditional tails are taken as 1,
which only widens the interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.mechanisms.sampling import _binom
from privhist.mechanisms.sampling.profile import (
    RATE_BITS,
    CertifiedDelta,
    alpha_rate,
    certified_delta,
    exact_threshold,
    float_threshold,
    largest_rate,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


def reporting_probability(p: float, tau: int, max_count: int) -> F64:
    """``Pr[Binomial(c, p) >= tau]`` for ``c = 0..max_count``.

    >>> [round(float(x), 4) for x in reporting_probability(0.5, 2, 3)]
    [0.0, 0.0, 0.25, 0.5]
    """
    c = np.arange(max_count + 1, dtype=np.int64)
    return _binom.sf(tau - 1, c, p)


def mse(p: float, tau: int, counts: Any) -> F64:
    """Mean squared error of the estimate (0 when not released) for each true count.

    >>> [round(float(x), 6) for x in mse(0.5, 1, [0, 1, 4])]  # tau = 1: c (1 - p) / p
    [0.0, 1.0, 4.0]
    """
    c = np.asarray(counts, dtype=np.int64)
    cf = c.astype(np.float64)
    f1 = _binom.cdf(tau - 2, c - 1, p)
    f2 = _binom.cdf(tau - 3, c - 2, p)
    f1 = np.where(c >= 1, f1, 0.0)
    f2 = np.where(c >= 2, f2, 0.0)
    out = cf * (1 - p) / p + 2 * cf**2 * f1 - cf * (cf - 1) * f2 - cf * f1 / p
    return np.maximum(out, 0.0)


@dataclass(frozen=True)
class ExpectedError:
    """Worst root-mean-squared error over true counts ``0..population``."""

    rmse: float
    at_count: int
    population: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": "max over true counts 0..N of the root-mean-squared error of count / p "
            "(0 when not released)",
            "rmse": self.rmse,
            "at_count": self.at_count,
            "relative_to_population": self.rmse / self.population,
            "population": self.population,
        }


def expected_error(p: float, tau: int, population: int) -> ExpectedError:
    """The worst RMSE over counts ``0..population``: every count up to where suppression is
    negligible (``Pr[Y < tau] < ~1e-15``), then a geometric grid up to ``population`` (beyond
    that point ``MSE(c)`` is ``c (1-p)/p`` up to a negligible term, increasing in ``c``).

    >>> e = expected_error(0.5, 1, 100)
    >>> e.at_count, round(e.rmse, 6)
    (100, 10.0)
    """
    dense_end = min(population, math.ceil((tau + 12 * math.sqrt(tau + 1) + 60) / p))
    grid = np.arange(dense_end + 1, dtype=np.int64)
    if population > dense_end:
        extra = np.unique(np.geomspace(dense_end + 1, population, 64).astype(np.int64))
        grid = np.concatenate([grid, extra, [population]])
    err = mse(p, tau, grid)
    i = int(np.argmax(err))
    return ExpectedError(float(math.sqrt(err[i])), int(grid[i]), population)


# --------------------------------------------------------------------------------------------
# confidence intervals


def _selection_probability(n: I64, p: float, tau: int) -> F64:
    """``Pr_n[Y >= tau]``, taken as 1 where the Chernoff bound
    ``Pr_n[Y <= tau - 1] <= exp(-n D((tau - 1) / n || p))`` (``tau - 1 < n p``) is below
    ``e**-60`` (the float tail would be within a few units of the last place of 1 anyway): most
    released keys are far above the threshold and skip one incomplete-beta evaluation."""
    t = tau - 1
    out = np.ones(n.shape, dtype=np.float64)
    nf = np.maximum(n, 1).astype(np.float64)
    x = t / nf
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(x > 0, x * np.log(np.maximum(x, 1e-300) / p), 0.0) + (1 - x) * np.log(
            (1 - x) / (1 - p)
        )
    far = (x < p) & (nf * kl > 60.0)
    near = np.flatnonzero(~far)
    if near.size:
        out[near] = _binom.sf(t, n[near], p)
    return out


def _level(den: F64, tail: F64, upper: bool) -> F64:
    """``G = Pr[Y >= y | Y >= tau]`` (``tail = Pr[Y >= y]``) or, with ``upper``,
    ``H = Pr[Y <= y | Y >= tau]`` (``tail = Pr[Y > y]``), from ``den = Pr[Y >= tau]``; taken as 1
    where the denominator underflows."""
    ok = den > 1e-300
    safe = np.where(ok, den, 1.0)
    num = np.maximum(den - tail, 0.0) if upper else tail
    return np.where(ok, np.minimum(num / safe, 1.0), 1.0)


def _lower_tail_ok(y: I64, n: I64, p: float, tau: int, half: float) -> npt.NDArray[np.bool_]:
    """``G_n(y) = Pr_n[Y >= y | Y >= tau] > half`` (``G`` taken as 1 where the denominator
    underflows), with the two tails ``G`` needs."""
    den = _selection_probability(n, p, tau)
    return np.asarray(_level(den, _binom.sf(y - 1, n, p), False) > half)


def _upper_tail_low(y: I64, n: I64, p: float, tau: int, half: float) -> npt.NDArray[np.bool_]:
    """``H_n(y) = Pr_n[Y <= y | Y >= tau] <= half`` (``H`` taken as 1 where the denominator
    underflows), with the two tails ``H`` needs."""
    den = _selection_probability(n, p, tau)
    return np.asarray(_level(den, _binom.sf(y, n, p), True) <= half)


#: a neighbour's level derived from the guess's tails decides only when it is farther from
#: ``half`` than this times ``p`` times the pmf terms used (log-gamma loses relative accuracy
#: in the pmf as ``n`` grows), plus the absolute part
_DERIVED_REL = 1e-3
_DERIVED_ABS = 1e-12
#: above this ``n`` the neighbours are not derived (the search evaluates them): beyond about
#: 5e7 scipy's own tails and the derived ones disagree at the last unit now and then
_DERIVED_MAX_N = 10**7


def _settle_at_guess(
    y: I64, g: I64, floor: I64, p: float, tau: int, half: float, upper: bool
) -> tuple[I64, I64]:
    """The answer of :func:`_first_true` where it is ``g`` or ``g + 1``, from the tails at ``g``
    alone (``-1`` where not settled).

    The predicate at ``g`` is evaluated as in :func:`_lower_tail_ok` / :func:`_upper_tail_low`.
    Its neighbours come from the one-trial identity ``Pr_(n+1)[Y >= k] = Pr_n[Y >= k] +
    p Pr_n[Y = k - 1]`` applied to both tails (the pmf by log-gamma), and decide only where the
    derived level is farther from ``half`` than its error allowance; elsewhere the search
    evaluates them. So the answer is the one the definitions give, as for the search. Also
    returns a better guess for the search where not settled: one Newton step on the level,
    whose slope in ``n`` is about ``p Pr_n[Y = k] / Pr_n[Y >= tau]``.
    """
    k = y if upper else y - 1  # the tail is Pr[Y > k]
    den = _selection_probability(g, p, tau)
    tail = _binom.sf(k, g, p)
    level = _level(den, tail, upper)
    pred = level <= half if upper else level > half
    out = np.full(g.shape, -1, dtype=np.int64)
    usable = g <= _DERIVED_MAX_N
    # below: g - 1 (only where g > floor), above: g + 1
    below_m = np.maximum(g - 1, 0)
    step_tail = p * _binom.pmf(k, below_m, p)
    step_den = p * _binom.pmf(tau - 1, below_m, p)
    den_b = den - step_den
    lev_b = _level(den_b, tail - step_tail, upper)
    err_b = (_DERIVED_REL * (step_tail + step_den) + _DERIVED_ABS) / np.maximum(den_b, 1e-300)
    sure_b = usable & (den_b > 1e-290) & (np.abs(lev_b - half) > err_b)
    pred_b = lev_b <= half if upper else lev_b > half
    at_g = pred & ((g == floor) | (sure_b & ~pred_b))
    out[at_g] = g[at_g]
    step_tail = p * _binom.pmf(k, g, p)
    step_den = p * _binom.pmf(tau - 1, g, p)
    den_a = den + step_den
    lev_a = _level(den_a, tail + step_tail, upper)
    err_a = (_DERIVED_REL * (step_tail + step_den) + _DERIVED_ABS) / np.maximum(den_a, 1e-300)
    sure_a = usable & (den > 1e-290) & (np.abs(lev_a - half) > err_a)
    pred_a = lev_a <= half if upper else lev_a > half
    next_up = ~pred & sure_a & pred_a
    out[next_up] = g[next_up] + 1
    slope = step_tail / np.maximum(den, 1e-300)
    gap = (level - half) if upper else (half - level)
    with np.errstate(divide="ignore", invalid="ignore"):
        move = np.where(slope > 0, gap / slope, 0.0)
    move = np.clip(np.nan_to_num(move), -1e12, 1e12)
    better = np.maximum(g + np.ceil(move).astype(np.int64), floor)
    return out, better


def _first_true_settled(
    pred: Callable[[I64, I64], Bools],
    settle: Callable[[I64], tuple[I64, I64]],
    floor: I64,
    guess: I64,
) -> I64:
    """:func:`_first_true`, first trying ``settle`` (answers ``g`` or ``g + 1`` from one
    evaluation at the guess ``g``, ``-1`` elsewhere, and a better guess); the rest are searched
    from the better guess (the answer does not depend on the guess)."""
    out, better = settle(np.maximum(guess, floor))
    rest = np.flatnonzero(out < 0)
    if rest.size:
        out[rest] = _first_true(lambda i, n: pred(rest[i], n), floor[rest], better[rest])
    return out


def _first_true(pred: Callable[[I64, I64], Bools], floor: I64, guess: I64) -> I64:
    """The smallest ``n >= floor[i]`` with ``pred`` true, for a predicate that is false then
    true in ``n`` (monotone), searched from ``guess[i]``.

    ``pred(idx, n)`` evaluates entries ``idx`` at ``n``. From the guess, steps of 1, 2, 4, ...
    go down while the predicate holds (or to the floor) and up while it fails, which brackets
    the answer between a false and a true point; bisection then closes the bracket. The answer
    is the same as for any other search of the same predicate; only the number of evaluations
    (about ``2 log2 |guess - answer| + 2``) depends on the guess.
    """
    size = floor.shape[0]
    g = np.maximum(guess, floor)
    at_g = pred(np.arange(size), g)
    # bracket: f = a point where pred is false (or floor - 1), t = a point where it is true
    f = np.where(at_g, floor - 1, g)
    t = np.where(at_g, g, -1)
    # going down from a true guess
    down = np.flatnonzero(at_g & (g > floor))
    step = np.ones(down.size, dtype=np.int64)
    while down.size:
        probe = np.maximum(t[down] - step, floor[down])
        res = pred(down, probe)
        t[down[res]] = probe[res]
        f[down[~res]] = probe[~res]
        go = res & (probe > floor[down])
        down, step = down[go], step[go] * 2
    # going up from a false guess
    up = np.flatnonzero(~at_g)
    step = np.ones(up.size, dtype=np.int64)
    while up.size:
        probe = f[up] + step
        res = pred(up, probe)
        t[up[res]] = probe[res]
        f[up[~res]] = probe[~res]
        up, step = up[~res], step[~res] * 2
        if up.size and int(step.max()) > 1 << 61:  # the predicate holds far below int64's end
            raise ArithmeticError(
                "selection_adjusted_interval: the upward search did not close below 2**62"
            )
    # bisection: pred(f) false (or f = floor - 1), pred(t) true
    active = np.flatnonzero(t - f > 1)
    while active.size:
        mid = (f[active] + t[active]) // 2
        res = pred(active, mid)
        t[active[res]] = mid[res]
        f[active[~res]] = mid[~res]
        active = active[t[active] - f[active] > 1]
    return t


def _normal_guess(y: I64, p: float, shift: float, z: float) -> I64:
    """The ``n`` at which ``y + shift`` is the Cornish-Fisher quantile
    ``n p + z sqrt(n p q) + (z**2 - 1)(q - p) / 6`` of Binomial(``n``, ``p``): a starting point
    for :func:`_first_true`, not part of any result."""
    q = 1.0 - p
    target = y.astype(np.float64) + shift - (z * z - 1.0) * (q - p) / 6.0
    b = z * math.sqrt(p * q)
    s = (-b + np.sqrt(np.maximum(b * b + 4.0 * p * np.maximum(target, 0.0), 0.0))) / (2.0 * p)
    return np.floor(s * s).astype(np.int64)


def selection_adjusted_interval(
    values: Any, p: float, tau: int, confidence: float
) -> tuple[I64, I64]:
    """Selection-adjusted exact interval for the true unit count of each released key (see the
    module notes). Computed once per distinct value, by a search from a normal-approximation
    guess (:func:`_first_true`): the bounds are those of the definitions, whatever the guess.
    Where the answer is the guess or the next count, one evaluation of the tails at the guess
    settles it (:func:`_settle_at_guess`); the others are searched. The ``NEAR_VALUES`` values
    just above ``tau``, whose searches are the long ones, come from a table searched once per
    ``(p, tau, confidence)``.

    >>> lo, hi = selection_adjusted_interval([100], 0.1, 10, 0.95)
    >>> int(lo[0]) < 1000 < int(hi[0])
    True
    """
    vals = np.asarray(values, dtype=np.int64)
    if vals.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    uniq, inverse = np.unique(vals, return_inverse=True)
    lower, upper = np.zeros_like(uniq), np.zeros_like(uniq)
    near = (uniq >= tau) & (uniq < tau + NEAR_VALUES)
    if near.any():  # the values just above tau: searched once per (p, tau, confidence)
        lo_near, hi_near = _near_threshold(p, tau, confidence)
        lower[near], upper[near] = lo_near[uniq[near] - tau], hi_near[uniq[near] - tau]
    rest = np.flatnonzero(~near)
    if rest.size:
        lower[rest], upper[rest] = _search_interval(uniq[rest], p, tau, confidence)
    return lower[inverse], upper[inverse]


#: values ``tau .. tau + NEAR_VALUES - 1`` get their intervals from a table built once per
#: ``(p, tau, confidence)``: near the threshold the normal guess ignores the selection and the
#: search takes a dozen rounds, the same ones at every release
NEAR_VALUES = 128


@lru_cache(maxsize=64)
def _near_threshold(p: float, tau: int, confidence: float) -> tuple[I64, I64]:
    lo, hi = _search_interval(np.arange(tau, tau + NEAR_VALUES, dtype=np.int64), p, tau, confidence)
    lo.flags.writeable = False
    hi.flags.writeable = False
    return lo, hi


def _search_interval(uniq: I64, p: float, tau: int, confidence: float) -> tuple[I64, I64]:
    """:func:`selection_adjusted_interval` for distinct values, by the searches."""
    half = (1 - confidence) / 2
    z = float(statistics.NormalDist().inv_cdf(1 - half))

    # lower: the smallest n >= y with G_n(y) > half (G non-decreasing in n)
    lower = _first_true_settled(
        lambda i, n: _lower_tail_ok(uniq[i], n, p, tau, half),
        lambda g: _settle_at_guess(uniq, g, uniq, p, tau, half, upper=False),
        uniq,
        _normal_guess(uniq, p, -0.5, z),
    )
    # upper: the largest n with H_n(y) > half (H non-increasing in n; H_y(y) = 1), i.e. one
    # below the smallest n >= y with H_n(y) <= half
    upper = (
        _first_true_settled(
            lambda i, n: _upper_tail_low(uniq[i], n, p, tau, half),
            lambda g: _settle_at_guess(uniq, g, uniq, p, tau, half, upper=True),
            uniq,
            _normal_guess(uniq, p, 0.5, -z),
        )
        - 1
    )
    return lower, upper


# --------------------------------------------------------------------------------------------
# the error-minimising calibration


@dataclass(frozen=True)
class Optimised:
    """The ``(p, tau)`` minimising :func:`expected_error` for a population, and its certificate."""

    sampling_rate: Fraction
    threshold: int
    certificate: CertifiedDelta
    error: ExpectedError
    candidates: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "sampling_rate": float(self.sampling_rate),
            "threshold": self.threshold,
            "delta_exact_per_key": self.certificate.upper,
            "expected_error": self.error.to_dict(),
            "candidates_evaluated": self.candidates,
        }


def _alpha_grid(lo: float, hi: float, n: int) -> list[Fraction]:
    return [Fraction(float(a)).limit_denominator(1 << 30) for a in np.geomspace(lo, hi, n)]


def optimise(
    epsilon: Fraction,
    delta: Fraction,
    population: int,
    *,
    sampling_rate: Fraction | None = None,
    threshold: int | None = None,
    function: str = "sample_and_threshold",
) -> Optimised:
    """Choose ``(p, tau)`` for per-key ``(epsilon, delta)`` minimising the expected error for
    ``population`` units.

    Free rate: ``p = alpha (1 - e^-eps)`` over a geometric grid of ``alpha`` in
    ``[2**-10, 1]`` (25 points and the paper's 1/6, then 15 between the best point's
    neighbours), each with its exact
    smallest ``tau`` (float64 search); the winner's ``tau`` is then certified
    (:func:`~privhist.mechanisms.sampling.profile.exact_threshold`). A fixed rate leaves only the
    exact ``tau`` (the error grows with ``tau``). A fixed threshold searches rates up to the
    largest certified one for it. The grid search is a heuristic for the optimum; the privacy of
    the result never depends on it.
    """
    ef, df = float(epsilon), float(delta)
    if sampling_rate is not None and threshold is not None:
        raise ValidationError(
            "calibration", function, "given at most one of sampling_rate and threshold", "both"
        )
    if sampling_rate is not None:
        tau, cert = exact_threshold(sampling_rate, epsilon, delta, function)
        err = expected_error(float(sampling_rate), tau, population)
        return Optimised(sampling_rate, tau, cert, err, 1)
    if threshold is not None:
        p_max, cert_max = largest_rate(threshold, epsilon, delta, function)
        one = 1 << RATE_BITS
        best: tuple[float, Fraction] | None = None
        for g in np.geomspace(2.0**-10, 1.0, 31):
            num = int(p_max * one * Fraction(float(g)))
            if num < 1:
                continue
            p = Fraction(num, one)
            e = expected_error(float(p), threshold, population).rmse
            if best is None or e < best[0]:
                best = (e, p)
        assert best is not None
        p = best[1]
        cert = cert_max if p == p_max else certified_delta(p, threshold, epsilon)
        if cert.value > delta:  # the rate grid is below a certified rate; check anyway
            p, cert = p_max, cert_max
        err = expected_error(float(p), threshold, population)
        return Optimised(p, threshold, cert, err, 31)

    def score(alpha: Fraction) -> tuple[float, Fraction, int]:
        p = alpha_rate(alpha, epsilon, function)
        tau = float_threshold(float(p), ef, df, function)
        return expected_error(float(p), tau, population).rmse, p, tau

    grid = sorted({*_alpha_grid(2.0**-10, 1.0, 25), Fraction(1, 6)})
    scores = [score(a) for a in grid]
    i = min(range(len(grid)), key=lambda j: scores[j][0])
    lo_a = grid[max(i - 1, 0)]
    hi_a = grid[min(i + 1, len(grid) - 1)]
    fine = _alpha_grid(float(lo_a), float(hi_a), 15)
    scores += [score(a) for a in fine]
    _, p, _ = min(scores, key=lambda s: s[0])
    tau, cert = exact_threshold(p, epsilon, delta, function)
    return Optimised(p, tau, cert, expected_error(float(p), tau, population), len(scores))
