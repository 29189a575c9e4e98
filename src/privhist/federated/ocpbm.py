"""Optimal clipping for cPBM (OcPBM): Theorem 1's error bound, its minimiser, and the oracle.

Source: the paper (federated frequency estimation under user-level distributed DP), Section 3.3,
Theorem 1 (equation (4)), equation (5), and the proof in Appendix C.3.

Theorem 1. With ``y_i`` the Kashin representation of user ``i`` (``D`` coordinates), the cPBM
estimate ``x_hat = U y_hat`` (Algorithms 1-3) has expected l2 error at most
``sqrt(d) E(C; D)`` where::

    E(C; D) = (1/n) sum_i max(0, ||y_i||_2 - C) + C sqrt(D / (4 m n theta**2)).

The first term bounds the clipping bias, the second the noise (equation (3) summed over ``D``
coordinates). ``E`` is convex and piecewise linear in ``C`` with slope
``-#{i: ||y_i|| > C} / n + s``, ``s = sqrt(D / (4 m n theta**2))``, so (equation (5)) it is
minimised by the ``gamma* = 1 - s`` quantile of the norms: the smallest ``C`` among the norms
with ``#{||y_i|| > C} <= s n``, i.e. the ``ceil(n (1 - s))``-th smallest norm
(:func:`optimal_clip`). The minimiser needs ``0 < s < 1``; otherwise (too few users or trials
for ``D`` coordinates) the bound decreases all the way to ``C = 0`` and no threshold is useful,
which :func:`optimal_quantile` refuses.

On the factor ``sqrt(d)``. Appendix C.3 bounds ``||U v||_2`` by ``sqrt(d) ||v||_2`` with
Cauchy-Schwarz. For a Parseval frame (orthonormal rows, as both frames of
:mod:`privhist.federated.kashin`) the operator norm of ``U`` is 1, so ``||U v|| <= ||v||`` and
the bound holds without the factor: :func:`error_bound` returns ``E(C; D)`` (what Figure 3 plots
against the true error; the last line of Appendix C.3 also drops the factor), and
:func:`printed_error_bound` returns ``sqrt(d) E(C; D)`` as printed in equation (4).

The oracle "Best C*" (Table 2, Table 3). The non-private best threshold in hindsight. Here it is
the grid point minimising the *exact* expected squared error of cPBM
(:func:`expected_squared_error`): with ``s_i(C) = min(1, C / ||y_i||)`` and
``y_bar_C = (1/n) sum_i s_i y_i``,
``E ||x_hat - x_bar||^2 = ||x_bar - U y_bar_C||^2 + sum_k Var(y_hat[k]) ||U e_k||^2`` with
``Var(y_hat[k]) = C^2 / (4 m n theta^2) - (1 / (m n^2)) sum_i (s_i y_i[k])^2`` (the binomial
variance ``m p (1 - p)`` of equation (3) written out; the coordinates are independent). It
includes the Kashin residual (``x_bar`` is the true mean). All grid points are evaluated by two
matrix products. This oracle looks at the data and is not private; it is a comparison point only.

Everything here is analysis on floats (no release path).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.validation import check_positive_int
from privhist.federated.cpbm import check_clip
from privhist.federated.cpbm_accounting import check_theta
from privhist.federated.dht import (
    FederatedQuantile,
    cdf_from_prefix,
    check_bits,
    check_gamma,
    quantile_from_prefix,
    settle_tail,
)
from privhist.federated.kashin import TightFrame

F64 = npt.NDArray[np.float64]


def noise_slope(
    dimension: int, m: int, n: int, theta: float, function: str = "noise_slope"
) -> float:
    """``s = sqrt(D / (4 m n theta**2))``: the noise term of ``E(C; D)`` per unit of ``C``.

    >>> round(noise_slope(100, 30, 10_000, 0.2), 6)
    0.045644
    """
    dim = check_positive_int(dimension, function, "dimension")
    mm = check_positive_int(m, function, "m")
    nn = check_positive_int(n, function, "n")
    t = check_theta(theta, function)
    return math.sqrt(dim / (4.0 * mm * nn * t * t))


def optimal_quantile(dimension: int, m: int, n: int, theta: float) -> float:
    """Equation (5): ``gamma* = 1 - sqrt(D / (4 m n theta**2))``.

    Raises:
        ValidationError: ``gamma*`` is not in (0, 1) (the bound has no positive minimiser).

    >>> round(optimal_quantile(100, 30, 10_000, 0.2), 6)
    0.954356
    """
    fn = "optimal_quantile"
    s = noise_slope(dimension, m, n, theta, fn)
    if not 0 < s < 1:
        raise ValidationError(
            "n",
            fn,
            f"large enough that D / (4 m n theta^2) < 1 (the target quantile 1 - {s:.4g} must "
            "lie in (0, 1))",
            n,
        )
    return 1.0 - s


def check_norms(norms: Any, function: str) -> F64:
    """A non-empty 1-d array of finite norms ``>= 0``."""
    arr = np.asarray(norms, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise InputDataError(f"{function}: norms must be a non-empty 1-d array")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise InputDataError(f"{function}: norms must be finite and >= 0")
    return arr


def error_bound(norms: Any, clip: Any, dimension: int, m: int, theta: float) -> float:
    """``E(C; D)`` of Theorem 1 for the users' representation norms ``||y_i||`` (``n`` = count).

    >>> round(error_bound([1.0, 2.0, 5.0], 2.0, dimension=4, m=1, theta=0.25), 6)  # 1 + 2 s
    5.618802
    """
    fn = "error_bound"
    a = check_norms(norms, fn)
    c = check_clip(clip, fn)
    s = noise_slope(dimension, m, a.size, theta, fn)
    return float(np.maximum(a - c, 0.0).mean() + c * s)


def printed_error_bound(
    norms: Any, clip: Any, d: int, dimension: int, m: int, theta: float
) -> float:
    """Theorem 1's bound, equation (4), as printed: ``sqrt(d) E(C; D)`` (module notes: the
    factor is not needed for a Parseval frame).

    >>> printed_error_bound([1.0, 2.0, 5.0], 2.0, 4, 4, 1, 0.25) == 2 * error_bound(
    ...     [1.0, 2.0, 5.0], 2.0, 4, 1, 0.25)
    True
    """
    dd = check_positive_int(d, "printed_error_bound", "d")
    return math.sqrt(dd) * error_bound(norms, clip, dimension, m, theta)


def quantile_of(norms: Any, gamma: float, function: str = "quantile_of") -> float:
    """The lower ``gamma`` quantile: the ``ceil(n gamma)``-th smallest value (at least the first).

    >>> quantile_of([4.0, 1.0, 3.0, 2.0], 0.5), quantile_of([4.0, 1.0, 3.0, 2.0], 0.51)
    (2.0, 3.0)
    """
    a = check_norms(norms, function)
    g = float(gamma)
    if not 0 < g < 1:
        raise ValidationError("gamma", function, "in (0, 1)", gamma)
    k = max(1, math.ceil(a.size * g - 1e-9))
    return float(np.partition(a, k - 1)[k - 1])


def optimal_clip(norms: Any, dimension: int, m: int, theta: float) -> float:
    """The minimiser of ``E(C; D)`` (equation (5)): the ``gamma*`` quantile of the norms.

    Non-private (it reads the norms): OcPBM with the exact ``C*`` of Table 1. The private
    protocols estimate it with :mod:`privhist.federated.dht`.

    >>> optimal_clip([1.0, 2.0, 3.0, 4.0], dimension=1, m=4, theta=0.25)  # s = 1/2
    2.0
    """
    fn = "optimal_clip"
    a = check_norms(norms, fn)
    gamma = optimal_quantile(dimension, m, a.size, theta)
    c = quantile_of(a, gamma, fn)
    if c <= 0:
        raise InputDataError(f"{fn}: the {gamma:.4g} quantile of the norms is 0")
    return c


def squared_bound(norms: Any, clip: Any, dimension: int, m: int, theta: float) -> float:
    """``E2(C; D) = sqrt(B(C)**2 + s**2 C**2)`` with ``B(C) = (1/n) sum_i max(0, ||y_i|| - C)``.

    The proof of Theorem 1 (Appendix C.3) splits the error into the clipping bias
    ``b = x_bar - U y_bar_C`` (deterministic, ``||b|| <= B(C)``, plus the Kashin residual) and
    the cPBM noise ``U (y_hat - y_bar_C)`` (mean zero, ``E ||.||**2 <= s**2 C**2`` by equation
    (3) over ``D`` coordinates and ``||U|| <= 1``), and adds the two norms. Adding their squares
    instead (the cross term has mean zero) gives
    ``sqrt(E ||x_hat - x_bar||**2) <= E2(C; D) <= E(C; D)``, a tighter bound on the
    root-mean-squared error (and, by Jensen, on the mean error Theorem 1 bounds). Its minimiser
    is not a fixed quantile: where ``s C`` exceeds ``B(C)`` it lies below ``gamma*`` (the
    slope condition is ``#{||y_i|| > C} / n = s**2 C / B(C)`` instead of ``= s``).

    >>> round(squared_bound([1.0, 2.0, 5.0], 2.0, dimension=4, m=1, theta=0.25), 6)
    4.725816
    """
    fn = "squared_bound"
    a = check_norms(norms, fn)
    c = check_clip(clip, fn)
    s = noise_slope(dimension, m, a.size, theta, fn)
    return math.hypot(float(np.maximum(a - c, 0.0).mean()), c * s)


def squared_bound_clip(cdf: Any, upper: float, slope: float, points: int = 4096) -> float:
    """The threshold minimising :func:`squared_bound` for norms known through a histogram.

    Args:
        cdf: The (estimated) fraction of norms at or below each upper bin edge of ``2**b``
            equal bins over ``[0, upper)``, non-decreasing in ``[0, 1]`` (e.g.
            :func:`privhist.federated.dht.cdf_from_prefix` of a DHT release).
        upper: The range ``B``.
        slope: ``s = sqrt(D / (4 m n theta**2))`` (:func:`noise_slope`).
        points: Candidate thresholds ``B k / points``, ``k = 1..points``.

    Each bin's mass is placed at its midpoint (the histogram says no more), which gives
    ``B_hat(C)``; the smallest candidate minimising ``B_hat(C)**2 + s**2 C**2`` is returned.
    Applied to a DP histogram this is post-processing (no privacy cost).

    >>> squared_bound_clip([0.0, 0.5, 1.0, 1.0], upper=4.0, slope=0.1, points=8)
    2.5
    """
    fn = "squared_bound_clip"
    f = np.asarray(cdf, dtype=np.float64)
    if f.ndim != 1 or f.size == 0 or not np.isfinite(f).all():
        raise InputDataError(f"{fn}: cdf must be a non-empty 1-d array of finite levels")
    hi = float(upper)
    if not math.isfinite(hi) or hi <= 0:
        raise ValidationError("upper", fn, "a finite number > 0", upper)
    sl = float(slope)
    if not math.isfinite(sl) or sl <= 0:
        raise ValidationError("slope", fn, "a finite number > 0", slope)
    k = check_positive_int(points, fn, "points")
    mass = np.diff(np.concatenate([[0.0], f]))
    width = hi / f.size
    mid = width * (np.arange(f.size) + 0.5)
    grid = hi * np.arange(1, k + 1) / k
    # B_hat(g) = sum over mid > g of mass (mid - g): suffix sums, O(points + bins) memory
    first = np.searchsorted(mid, grid, side="right")
    tail0 = np.concatenate([np.cumsum(mass[::-1])[::-1], [0.0]])
    tail1 = np.concatenate([np.cumsum((mass * mid)[::-1])[::-1], [0.0]])
    bias = np.maximum(tail1[first] - grid * tail0[first], 0.0)
    return float(grid[int(np.argmin(bias * bias + (sl * grid) ** 2))])


#: :func:`histogram_clip` settles the tail where a level is this many standard deviations from 1
TAIL_SDS = 2.0


def histogram_clip(prefix: Any, quantile: FederatedQuantile, slope: float, gamma: float) -> float:
    """The threshold read from a private DHT release (TFFE's default rule, MFFE's start).

    Steps, all post-processing of the release (no privacy cost):

    1. the decoded prefix counts become a distribution function (:func:`cdf_from_prefix`:
       monotone projection, clipping to ``[0, 1]``);
    2. its tail is settled (:func:`~privhist.federated.dht.settle_tail`): from the first bin
       whose level is within ``TAIL_SDS`` standard deviations of 1
       (:meth:`~privhist.federated.dht.FederatedQuantile.level_sd`, a public number) the
       levels are 1;
    3. the threshold minimising the squared form of Theorem 1's bound over that histogram
       (:func:`squared_bound_clip`) is taken, capped at the ``gamma`` quantile of step 1
       (Algorithm 5, step 3).

    Why step 2. Without it the clipped projection leaves a one-sided deficit below 1 in the
    empty bins above the norms (a few hundredths with ``m' = 3`` and ``n = 10**4``), which the
    bias term ``B(C)`` weighs by the distance to ``C``, up to the range ``B``: the threshold is
    pushed up (on the heterogeneous data of Table 2, ``d = 100``, from about 157, the bound's
    minimiser on the exact norms, to 169 on average over 40 releases). ``TAIL_SDS = 2`` was
    chosen among 1, 2 and 3 by the exact expected error (:func:`expected_squared_error`) at the
    chosen threshold over 40 releases in each of the eight Table 2 rows: the mean ratio to the
    oracle was at most 1.105 with 2 (1.208 without the step), and no row got worse by more than
    0.006. Moving at most ``TAIL_SDS`` standard deviations of mass down to the settling bin can
    under-state ``B(C)``; the cap and the convexity of the criterion bound how far ``C`` moves.

    >>> q = FederatedQuantile(upper=64.0, bits=3, theta=0.25, m=100, n_users=1000)
    >>> prefix = np.array([200, 500, 800, 970, 995, 990, 993, 1000.0])  # empty above bin 5
    >>> histogram_clip(prefix, q, slope=0.1, gamma=0.95)
    23.359375
    >>> squared_bound_clip(cdf_from_prefix(prefix, 1000), 64.0, 0.1)  # without step 2
    24.0625
    """
    fn = "histogram_clip"
    g = check_gamma(gamma, fn)
    n = quantile.n_users
    cap = quantile_from_prefix(prefix, n, g, quantile.upper, quantile.bits)
    cdf = settle_tail(cdf_from_prefix(prefix, n), TAIL_SDS * quantile.level_sd())
    return min(squared_bound_clip(cdf, quantile.upper, slope), cap)


def level_at(prefix: Any, quantile: FederatedQuantile, clip: float) -> float:
    """The estimated fraction of values at or below ``clip`` in a DHT release: the settled
    distribution function of :func:`histogram_clip`, linear within a bin (post-processing).

    >>> q = FederatedQuantile(upper=64.0, bits=3, theta=0.25, m=100, n_users=1000)
    >>> level_at(np.array([200, 500, 800, 970, 995, 990, 993, 1000.0]), q, 12.0)
    0.35
    """
    n = quantile.n_users
    cdf = settle_tail(cdf_from_prefix(prefix, n), TAIL_SDS * quantile.level_sd())
    edges = quantile.bin_width * np.arange(cdf.size + 1)
    return float(np.interp(float(clip), edges, np.concatenate([[0.0], cdf])))


def start_split(m: int, dimension: int, bits: int, share: float) -> tuple[int, int]:
    """MFFE's DHT start: ``(m_s, m_1)``, the first round's DHT and frequency trials, with
    ``m_s (2**b - 1) + m_1 D <= m D`` (:mod:`privhist.federated.ffe`, module notes).

    >>> start_split(15, 100, 6, 0.25)
    (5, 11)
    """
    fn = "start_split"
    mm = check_positive_int(m, fn, "m")
    dim = check_positive_int(dimension, fn, "dimension")
    qdim = (1 << check_bits(bits, fn)) - 1
    sh = float(share)
    if not 0 < sh < 1:
        raise ValidationError("start_share", fn, "a number in (0, 1)", share)
    m_s = math.floor(sh * mm * dim / qdim)
    m_1 = mm - (-(-m_s * qdim // dim))
    if m_s < 1 or m_1 < 1:
        raise ValidationError(
            "start_share",
            fn,
            f"a share of m D = {mm * dim} trials that buys at least one DHT trial over "
            f"{qdim} coordinates and leaves at least one frequency trial",
            share,
        )
    return m_s, m_1


def column_weights(frame: TightFrame) -> F64:
    """``||U e_k||^2`` for every column ``k`` of the frame (``d / D`` each for Hadamard)."""
    cols = frame.synthesize(np.eye(frame.D))
    return np.asarray((cols * cols).sum(axis=1))


def expected_squared_error(
    y: Any,
    x_mean: Any,
    frame: TightFrame,
    clips: Any,
    m: int,
    theta: float,
    weights: F64 | None = None,
) -> F64:
    """Exact ``E ||x_hat - x_bar||^2`` of cPBM for each threshold in ``clips`` (module notes).

    Args:
        y: Kashin representations, shape ``(n, D)``.
        x_mean: The true mean ``x_bar`` (length ``d``).
        frame: The frame ``U`` that decodes.
        clips: Thresholds ``C > 0``.
        m: Trials per coordinate.
        theta: cPBM theta (the quantisation to ``2**-32`` is ignored).
        weights: :func:`column_weights` of ``frame`` (computed if omitted).

    Returns:
        One expected squared error per threshold.
    """
    fn = "expected_squared_error"
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != frame.D:
        raise ValidationError("y", fn, f"an array of shape (n, {frame.D})", arr.shape)
    xm = np.asarray(x_mean, dtype=np.float64)
    if xm.shape != (frame.d,):
        raise ValidationError("x_mean", fn, f"a vector of length {frame.d}", xm.shape)
    cs = np.atleast_1d(np.asarray(clips, dtype=np.float64))
    for c in cs:
        check_clip(c, fn)
    mm = check_positive_int(m, fn, "m")
    t = check_theta(theta, fn)
    n = arr.shape[0]
    w = column_weights(frame) if weights is None else weights
    norms = np.linalg.norm(arr, axis=1)
    safe = np.maximum(norms, np.finfo(np.float64).tiny)
    scale = np.minimum(1.0, cs[:, None] / safe[None, :])  # (g, n)
    y_bar = scale @ arr / n  # (g, D)
    sq = (scale * scale) @ (arr * arr)  # (g, D): sum_i (s_i y_i[k])^2
    var = cs[:, None] ** 2 / (4.0 * mm * n * t * t) - sq / (mm * n * n)
    bias = xm[None, :] - frame.synthesize(y_bar)
    return np.asarray((bias * bias).sum(axis=1) + (np.maximum(var, 0.0) * w).sum(axis=1))


def clip_grid(norms: Any, points: int = 400) -> F64:
    """Candidate thresholds: every ``1/points`` quantile of the norms and a geometric ladder
    below the smallest norm (sorted, positive, distinct)."""
    a = check_norms(norms, "clip_grid")
    pos = a[a > 0]
    if pos.size == 0:
        raise InputDataError("clip_grid: every norm is 0")
    qs = np.quantile(pos, np.linspace(0.0, 1.0, check_positive_int(points, "clip_grid", "points")))
    low = np.geomspace(pos.min() / 64.0, pos.min(), 16)
    return np.unique(np.concatenate([low, qs]))


@dataclass(frozen=True)
class OracleClip:
    """The non-private "Best C*": the threshold and its root expected squared error."""

    clip: float
    rmse: float
    grid: F64
    rmse_grid: F64


def best_clip(
    y: Any,
    x_mean: Any,
    frame: TightFrame,
    m: int,
    theta: float,
    *,
    grid: Any = None,
    batch: int = 64,
) -> OracleClip:
    """Grid search for the threshold with the smallest exact expected squared error.

    Not private (it reads the data): the "Best C*" comparison of Tables 2 and 3.
    """
    arr = np.asarray(y, dtype=np.float64)
    g = clip_grid(np.linalg.norm(arr, axis=1)) if grid is None else np.asarray(grid, dtype=float)
    w = column_weights(frame)
    parts = [
        expected_squared_error(arr, x_mean, frame, g[i : i + batch], m, theta, w)
        for i in range(0, g.size, batch)
    ]
    rmse = np.sqrt(np.concatenate(parts))
    j = int(np.argmin(rmse))
    return OracleClip(float(g[j]), float(rmse[j]), g, rmse)
