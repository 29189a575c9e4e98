"""Estimators from sanitized samples and their exact per-frequency quality.

Cohen, Geri, Sarlos & Stemmer, Sections 6-7. A key of frequency ``i`` is reported with token ``j``
with probability ``P[i, j] = pi_(i,j)`` (``P[i, 0]``: not reported); an estimator is a vector
``a = (a_0 = 0, a_1, ..., a_m)`` and the estimate of ``sum_x L(x) g(w_x)`` is
``sum over reported (x, j) of L(x) a_j`` (equation 8).

* :func:`mle_estimator` — equation (9): ``a_j = g(i) / pi_i`` for ``i = argmax_h pi_(h,j)``;
* :func:`unbiased_estimator` — the unique solution of ``sum_(j<=i) pi_(i,j) a_j = g(i)`` (a lower
  triangular system); it takes negative values (Section 7.1);
* :func:`biased_down_estimator` — ``a_j = min over i with pi_(i,j) > 0 of g(i) / pi_i``: every
  ``E_i = sum_j pi_(i,j) a_j <= sum_j pi_(i,j) g(i) / pi_i = g(i)``, so it never over-estimates
  in expectation, and it is non-negative;
* :func:`estimator_stats` — ``E_i``, ``Bias_i = E_i - g(i)``,
  ``MSE_i = pi_(i,0) g(i)^2 + sum_j pi_(i,j) (a_j - g(i))^2``, ``Var_i = MSE_i - Bias_i^2``;
* :func:`selection_error` — bias, variance and NRMSE of the sum over a selection;
* :func:`concordance_probability`, :func:`expected_kendall_tau` — ordinal statistics (Section 6;
  equal tokens count as concordant with probability 1/2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError

F64 = npt.NDArray[np.float64]
GFunction = Callable[[F64], F64]


def _g_values(m: int, g: GFunction | None) -> F64:
    i = np.arange(m + 1, dtype=np.float64)
    out = i.copy() if g is None else np.asarray(g(i), dtype=np.float64)
    out[0] = 0.0
    return out


def _matrix(P: Any, fn: str) -> F64:
    arr = np.asarray(P, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
        raise ValidationError("P", fn, "a square (m+1) x (m+1) matrix with m >= 1", arr.shape)
    return arr


def _rows(P: Any, fn: str) -> F64:
    """An ``(m+1) x (K+1)`` matrix with ``m >= 1``: rows are frequencies, columns tokens (column
    0 "not reported"); Algorithm 5's discretisation has ``K <= 3m`` tokens, not ``m``."""
    arr = np.asarray(P, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 2:
        raise ValidationError("P", fn, "an (m+1) x (K+1) matrix with m, K >= 1", arr.shape)
    return arr


def mle_estimator(P: Any, g: GFunction | None = None) -> F64:
    """Equation (9): ``a_j = g(i) / pi_i`` with ``i = argmax_(h >= 1) pi_(h,j)`` (first maximum).
    ``P`` may have more token columns than rows (Algorithm 5); ``a`` has one entry per column.

    >>> import numpy as np
    >>> P = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.3, 0.6]])
    >>> mle_estimator(P).tolist()
    [0.0, 2.0, 2.2222222222222223]
    """
    Pm = _rows(P, "mle_estimator")
    m = Pm.shape[0] - 1
    gv = _g_values(m, g)
    pi = 1 - Pm[:, 0]
    best = 1 + np.argmax(Pm[1:, :], axis=0)  # row index per column
    out: F64 = np.zeros(Pm.shape[1])
    ok = pi[best] > 0
    out[ok] = gv[best[ok]] / pi[best[ok]]
    out[0] = 0.0
    return out


def unbiased_estimator(P: Any, g: GFunction | None = None) -> F64:
    """The unique ``a`` with ``sum_(j=1..i) pi_(i,j) a_j = g(i)`` for every ``i`` (triangular
    solve); defined when every ``pi_(i,i) > 0``.

    >>> import numpy as np
    >>> P = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.3, 0.6]])
    >>> [round(x, 6) for x in unbiased_estimator(P).tolist()]
    [0.0, 2.0, 2.333333]
    """
    from scipy.linalg import solve_triangular  # here: scipy is slow to import

    Pm = _matrix(P, "unbiased_estimator")
    m = Pm.shape[0] - 1
    A = Pm[1:, 1:]
    if (np.diag(A) <= 0).any():
        raise ValidationError("P", "unbiased_estimator", "pi_(i,i) > 0 for every i", np.diag(A))
    a = solve_triangular(A, _g_values(m, g)[1:], lower=True)
    return np.concatenate(([0.0], a))


def biased_down_estimator(P: Any, g: GFunction | None = None) -> F64:
    """``a_j = min over i with pi_(i,j) > 0 of g(i) / pi_i`` (never above ``g(i)`` in expectation).

    >>> import numpy as np
    >>> P = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.3, 0.6]])
    >>> biased_down_estimator(P).tolist()
    [0.0, 2.0, 2.2222222222222223]
    """
    Pm = _matrix(P, "biased_down_estimator")
    m = Pm.shape[0] - 1
    gv = _g_values(m, g)
    pi = 1 - Pm[:, 0]
    ratio = np.full(m + 1, np.inf)
    ratio[1:] = np.divide(gv[1:], pi[1:], out=np.full(m, np.inf), where=pi[1:] > 0)
    cand = np.where(Pm[1:, :] > 0, ratio[1:, None], np.inf)
    out: F64 = cand.min(axis=0)
    out[~np.isfinite(out)] = 0.0
    out[0] = 0.0
    return out


@dataclass(frozen=True)
class EstimatorStats:
    """Exact per-frequency quality of an estimator ``a`` (index = true frequency ``i``)."""

    expectation: F64
    bias: F64
    variance: F64
    mse: F64

    def normalised_bias(self) -> F64:
        """``Bias_i / i`` (Figure 5, top); index 0 is 0."""
        i = np.arange(self.bias.shape[0], dtype=np.float64)
        out: F64 = np.divide(self.bias, i, out=np.zeros_like(self.bias), where=i > 0)
        return out

    def normalised_variance(self) -> F64:
        """``Var_i / i^2`` (Figure 6); index 0 is 0."""
        i = np.arange(self.variance.shape[0], dtype=np.float64)
        out: F64 = np.divide(self.variance, i**2, out=np.zeros_like(self.variance), where=i > 0)
        return out


def estimator_stats(P: Any, a: npt.ArrayLike, g: GFunction | None = None) -> EstimatorStats:
    """``E_i``, ``Bias_i``, ``Var_i`` and ``MSE_i`` of Section 7.1 for every ``i`` (``a`` has
    one entry per token column of ``P``)."""
    Pm = _rows(P, "estimator_stats")
    av = np.asarray(a, dtype=np.float64)
    m = Pm.shape[0] - 1
    if av.shape != (Pm.shape[1],):
        raise ValidationError("a", "estimator_stats", f"a vector of length {Pm.shape[1]}", av.shape)
    gv = _g_values(m, g)
    av = av.copy()
    av[0] = 0.0
    E = Pm @ av
    mse = ((av[None, :] - gv[:, None]) ** 2 * Pm).sum(axis=1)
    bias = E - gv
    return EstimatorStats(E, bias, np.maximum(mse - bias**2, 0.0), mse)


@dataclass(frozen=True)
class SelectionError:
    """Error of the estimated sum over a selection of keys (Section 7.1)."""

    total: float
    bias: float
    variance: float
    mse: float
    nrmse: float


def selection_error(frequencies: npt.ArrayLike, stats: EstimatorStats) -> SelectionError:
    """Bias, variance, MSE and NRMSE (``sqrt(MSE) / s``) of ``sum_x g(w_x)`` over the keys with
    the given frequencies, with ``g(i) = i`` for the normalisation (``s = sum of frequencies``)."""
    f = np.asarray(frequencies, dtype=np.int64)
    m = stats.bias.shape[0] - 1
    if f.size == 0 or (f < 1).any() or (f > m).any():
        raise ValidationError("frequencies", "selection_error", f"integers in [1, {m}]", f)
    s = float(f.sum())
    bias = float(stats.bias[f].sum())
    var = float(stats.variance[f].sum())
    mse = var + bias**2
    return SelectionError(s, bias, var, mse, float(np.sqrt(mse) / s))


def concordance_probability(P: Any, i1: int, i2: int) -> float:
    """Probability that keys of frequencies ``i1 < i2`` get tokens in the same order (not
    reported = token 0; equal tokens count 1/2)."""
    Pm = _matrix(P, "concordance_probability")
    if not 0 <= i1 < i2 < Pm.shape[0]:
        raise ValidationError("i2", "concordance_probability", "0 <= i1 < i2 <= m", (i1, i2))
    p, q = Pm[i1], Pm[i2]
    greater = 1 - np.cumsum(q)  # Pr[token2 > j]
    return float((p * (greater + 0.5 * q)).sum())


def expected_kendall_tau(P: Any, frequencies: npt.ArrayLike) -> float:
    """Expected Kendall tau between true frequencies and tokens over the pairs of keys with
    distinct frequencies: mean over such pairs of ``2 Pr[concordant] - 1``."""
    Pm = _matrix(P, "expected_kendall_tau")
    f = np.asarray(frequencies, dtype=np.int64)
    vals, counts = np.unique(f, return_counts=True)
    if vals.size < 2:
        raise ValidationError("frequencies", "expected_kendall_tau", "two distinct values", f)
    # C[a, b] = Pr[token_a < token_b] + 1/2 Pr[equal] for rows a < b
    rows = Pm[vals]
    cdf = np.cumsum(rows, axis=1)
    # Pr[t_b > t_a] = sum_j p_a(j) (1 - cdf_b(j)); Pr[t_b = t_a] = sum_j p_a(j) p_b(j)
    greater = rows @ (1 - cdf).T
    equal = rows @ rows.T
    conc = greater + 0.5 * equal
    num, den = 0.0, 0.0
    for x in range(vals.size):
        w = counts[x] * counts[x + 1 :]
        num += float((w * (2 * conc[x, x + 1 :] - 1)).sum())
        den += float(w.sum())
    return num / den
