"""Exact reporting probabilities (Figures 1-4) and estimator moments (Figures 5-6): the
library's Algorithms 3, 4 and 6 evaluated per frequency, with no simulation (Section 8)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from privhist.core.errors import PrivhistError
from privhist.core.validation import check_delta, check_epsilon
from privhist.experiments.pws.settings import F64, I64
from privhist.mechanisms.sampling.pws import baselines, estimators, frequencies, keys, schemes

# -- reporting probabilities --------------------------------------------------------------------


def closed_form_from(epsilon: float, delta: float) -> int:
    """The frequency ``ceil(2L) + 3`` past which Lemmas 4.2 / 4.4 fix ``pi_i`` (``1``, resp.
    ``q_i``), so Algorithm 3 need not run further.

    >>> closed_form_from(0.1, 0.01)
    39
    """
    return max(math.ceil(2 * keys.threshold_L(epsilon, delta)) + 3, 2)


def pws_reporting(
    values: npt.ArrayLike, epsilon: float, delta: float, tau: float | None = None
) -> F64:
    """PWS end-to-end reporting probability ``pi_i`` for each frequency in ``values``.

    ``tau is None``: no sampling (``q = 1``, the private histogram of Figures 1-2); otherwise
    threshold ppswor with ``f(i) = i`` (Figures 3-4). Algorithm 3 runs up to
    ``min(max(values), ceil(2L) + 3)``; beyond, ``pi_i = q_i`` (Lemmas 4.2 and 4.4), which is
    checked: Algorithm 3 must have reached ``q`` at the last step it ran.

    >>> pws_reporting([1, 2, 10**9], 0.6931471805599453, 0.1).round(4).tolist()
    [0.1, 0.3, 1.0]
    """
    fn = "pws_reporting"
    eps = check_epsilon(epsilon, fn)
    d = check_delta(delta, fn, positive=True)
    v = schemes.check_frequencies(values, fn, "values")
    if v.size == 0:
        return np.zeros(0)
    top = int(min(int(v.max()), closed_form_from(eps, d)))
    if tau is None:
        q = np.ones(top + 1)
        q[0] = 0.0
        qv = np.ones(v.shape[0])
    else:
        q = schemes.inclusion_probabilities(top, "ppswor", tau)
        qv = schemes.inclusion_probability(v, "ppswor", tau)
    pi = keys.reporting_probabilities(q, eps, d)
    if top < int(v.max()) and pi[top] != q[top]:  # pragma: no cover - Lemma 4.4
        raise PrivhistError(f"Algorithm 3 did not reach q by frequency {top} (Lemma 4.4)")
    out: F64 = np.where(v <= top, pi[np.minimum(v, top)], qv)
    return out


def sbh_reporting(values: npt.ArrayLike, epsilon: float, delta: float) -> F64:
    """SbH reporting probability ``phi_i = Pr[i + Lap(1/eps) >= T]`` (Algorithm 6), with the
    no-privacy end point ``delta = 1`` (``T = 1``) allowed for Figure 2.

    For ``delta < 1`` this is the library's
    :func:`~privhist.mechanisms.sampling.pws.baselines.sbh_reporting_probability`; the library
    refuses ``delta = 1`` (no guarantee), so that end point evaluates the same closed form at
    ``T = 1`` here.

    >>> sbh_reporting([1, 2], 0.1, 1.0).round(6).tolist()
    [0.5, 0.547581]
    """
    fn = "sbh_reporting"
    eps = check_epsilon(epsilon, fn)
    if delta == 1.0:
        i = np.asarray(values, dtype=np.float64)
        z = eps * (i - 1.0)
        out: F64 = np.where(z <= 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.abs(z)))
        return out
    return baselines.sbh_reporting_probability(values, eps, delta)


def expected_fraction(counts: npt.ArrayLike, probabilities: npt.ArrayLike) -> float:
    """Expected fraction of keys reported: ``sum_v counts_v p_v / sum_v counts_v``.

    >>> expected_fraction([1, 3], [1.0, 0.0])
    0.25
    """
    c = np.asarray(counts, dtype=np.float64)
    p = np.asarray(probabilities, dtype=np.float64)
    return float((c * p).sum() / c.sum())


# -- estimation (Figures 5-6) -------------------------------------------------------------------


@dataclass(frozen=True)
class EstimationCurves:
    """Per-frequency bias and variance of the three estimators at one ``(eps, delta, tau)``
    (priority sampling); index ``i - 1`` is frequency ``i``, ``i = 1..m``."""

    epsilon: float
    delta: float
    tau: float
    pws_bias: F64
    pws_variance: F64
    sbh_bias: F64
    sbh_variance: F64
    non_private_variance: F64

    @property
    def frequencies(self) -> I64:
        return np.arange(1, self.pws_bias.shape[0] + 1, dtype=np.int64)


def estimation_margin(epsilon: float, delta: float) -> int:
    """Rows of the Algorithm 4 matrix kept past the largest frequency of interest: the MLE of
    token ``j`` looks for the row ``h`` maximising ``pi_(h,j)``, which lies ``~L`` rows below
    ``j``, so the matrix runs ``ceil(4L) + 10`` rows further."""
    return math.ceil(4 * max(keys.threshold_L(epsilon, delta), 0.0)) + 10


def estimation_curves(
    max_frequency: int, epsilon: float, delta: float, tau: float, *, with_sbh_variance: bool = True
) -> EstimationCurves:
    """Exact bias and variance per frequency for PWS with the MLE (equation 9 on the Algorithm 4
    matrix), sampled-SbH with estimator (7), and the non-private sample, under priority
    sampling with threshold ``tau`` (``tau = 1``: no sampling for frequencies >= 1)."""
    m = int(max_frequency)
    M = m + estimation_margin(epsilon, delta)
    q = schemes.inclusion_probabilities(M, "priority", tau)
    P = frequencies.integer_token_matrix(q, epsilon, delta)
    a = estimators.mle_estimator(P)
    best = 1 + np.argmax(P[1:, 1 : m + 1], axis=0)
    if int(best.max()) >= M:  # pragma: no cover - margin too small
        raise PrivhistError(f"the MLE of tokens <= {m} needs rows past {M}")
    st = estimators.estimator_stats(P, a)
    f = np.arange(1, m + 1)
    sbh = baselines.sbh_moments(f, epsilon, delta)
    if with_sbh_variance:
        ss = baselines.sampled_sbh_moments(f, epsilon, delta, "priority", tau)
        sbh_var = ss.variance()
    else:
        sbh_var = np.full(m, np.nan)
    qf = q[1 : m + 1]
    npv = f.astype(np.float64) ** 2 * (1 / qf - 1)
    return EstimationCurves(
        epsilon,
        delta,
        tau,
        st.bias[1 : m + 1].copy(),
        st.variance[1 : m + 1].copy(),
        sbh.bias(f),
        sbh_var,
        npv,
    )


@dataclass(frozen=True)
class NRMSE:
    """NRMSE of the estimated sum over the Figure 5 selection at one ``(eps, delta, tau)``."""

    epsilon: float
    delta: float
    tau: float
    non_private: float
    pws_mle: float
    sampled_sbh: float


def selection_nrmse(values: I64, counts: I64, curves: EstimationCurves) -> NRMSE:
    """``sqrt(Var + Bias^2) / s`` of the sum over keys with ``counts[k]`` keys of frequency
    ``values[k]`` (Section 7.1: biases add, variances add)."""
    s = float((values * counts).sum())
    idx = values - 1
    c = counts.astype(np.float64)

    def nrmse(bias: F64 | None, var: F64) -> float:
        b = 0.0 if bias is None else float((c * bias[idx]).sum())
        v = float((c * var[idx]).sum())
        return math.sqrt(v + b * b) / s

    return NRMSE(
        curves.epsilon,
        curves.delta,
        curves.tau,
        nrmse(None, curves.non_private_variance),
        nrmse(curves.pws_bias, curves.pws_variance),
        nrmse(curves.sbh_bias, curves.sbh_variance),
    )
