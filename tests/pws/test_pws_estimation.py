"""Estimators (Section 7) and baselines (Section 8.1) against independent computations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from privhist.mechanisms.sampling.pws import baselines as B
from privhist.mechanisms.sampling.pws import estimators as E
from privhist.mechanisms.sampling.pws.frequencies import integer_token_matrix
from privhist.mechanisms.sampling.pws.schemes import inclusion_probabilities


def _P(eps: float = 0.5, delta: float = 0.01, m: int = 40, tau: float | None = None) -> np.ndarray:
    if tau is None:
        q = np.ones(m + 1)
        q[0] = 0
    else:
        q = inclusion_probabilities(m, "ppswor", tau)
    return np.asarray(integer_token_matrix(q, eps, delta), dtype=float)


def test_unbiased_estimator_is_unbiased_and_takes_negative_values() -> None:
    P = _P()
    a = E.unbiased_estimator(P)
    i = np.arange(P.shape[0])
    np.testing.assert_allclose(P @ a, i, atol=1e-6 * i.max())
    assert (a[1:] < 0).any(), "Section 7.1: the unbiased estimator must go negative"
    st = E.estimator_stats(P, a)
    assert np.abs(st.bias).max() < 1e-6 * i.max()


def test_mle_matches_brute_force_argmax_and_stats_by_enumeration() -> None:
    P = _P(m=25, tau=0.2)
    a = E.mle_estimator(P)
    pi = 1 - P[:, 0]
    for j in range(1, P.shape[0]):
        col = [P[h, j] for h in range(1, P.shape[0])]
        h = 1 + col.index(max(col))
        assert a[j] == pytest.approx(h / pi[h])
    st = E.estimator_stats(P, a)
    for i in (1, 7, 25):  # moments by enumerating the outputs of row i
        outs = [(P[i, j], a[j] if j else 0.0) for j in range(P.shape[0])]
        mean = sum(p * v for p, v in outs)
        var = sum(p * (v - mean) ** 2 for p, v in outs)
        assert st.expectation[i] == pytest.approx(mean)
        assert st.bias[i] == pytest.approx(mean - i)
        assert st.variance[i] == pytest.approx(var, rel=1e-9, abs=1e-9)
        assert st.mse[i] == pytest.approx(var + (mean - i) ** 2, rel=1e-9)


@pytest.mark.parametrize("tau", [None, 0.05])
def test_biased_down_never_overestimates_and_is_nonnegative(tau: float | None) -> None:
    P = _P(tau=tau)
    a = E.biased_down_estimator(P)
    st = E.estimator_stats(P, a)
    assert (a >= 0).all()
    assert (st.bias <= 1e-9).all()
    assert (st.bias < -1e-6).any()


def test_selection_error_sums_per_key_terms() -> None:
    P = _P()
    st = E.estimator_stats(P, E.mle_estimator(P))
    f = np.array([3, 3, 10, 40])
    res = E.selection_error(f, st)
    bias = sum(st.bias[x] for x in f.tolist())
    var = sum(st.variance[x] for x in f.tolist())
    assert res.total == 56
    assert res.nrmse == pytest.approx(math.sqrt(var + bias**2) / 56)


def test_concordance_and_kendall_tau_by_enumeration() -> None:
    P = _P(m=12)
    for i1, i2 in [(1, 2), (3, 9), (5, 12)]:
        want = 0.0
        for j1, j2 in itertools.product(range(13), repeat=2):
            w = P[i1, j1] * P[i2, j2]
            want += w * (1.0 if j2 > j1 else 0.5 if j1 == j2 else 0.0)
        assert E.concordance_probability(P, i1, i2) == pytest.approx(want)
    f = [1, 2, 2, 7, 12]
    pairs = [(a, b) for a, b in itertools.combinations(f, 2) if a != b]
    want_tau = np.mean(
        [2 * E.concordance_probability(P, min(a, b), max(a, b)) - 1 for a, b in pairs]
    )
    assert E.expected_kendall_tau(P, f) == pytest.approx(want_tau)
    # dominance makes every pair at least as likely concordant as not
    assert E.expected_kendall_tau(P, f) > 0


def test_sbh_closed_forms_against_scipy() -> None:
    eps, delta = 0.1, 0.01
    T = B.sbh_threshold(eps, delta)
    assert T == pytest.approx(math.log(100) / 0.1 + 1)
    i = np.array([1, 10, 40, 47, 60, 120])
    lap = [stats.laplace(loc=x, scale=1 / eps) for x in i.tolist()]
    np.testing.assert_allclose(B.sbh_reporting_probability(i, eps, delta), [d.sf(T) for d in lap])
    mom = B.sbh_moments(i, eps, delta)
    for n, d in enumerate(lap):
        hi, pts = T + 3000, [float(i[n])] if i[n] > T else None
        e1 = integrate.quad(lambda x, d=d: x * d.pdf(x), T, hi, points=pts, limit=400)[0]
        e2 = integrate.quad(lambda x, d=d: x * x * d.pdf(x), T, hi, points=pts, limit=400)[0]
        assert mom.expectation[n] == pytest.approx(e1, rel=1e-7)
        assert mom.second_moment[n] == pytest.approx(e2, rel=1e-7)


def test_sampled_sbh_uses_the_closed_forms_as_oracles() -> None:
    eps, delta = 0.1, 0.01
    i = np.array([5, 47, 100])
    full = B.sbh_moments(i, eps, delta)
    T = B.sbh_threshold(eps, delta)
    # tau so large that q(w*) = 1 above T: sampled-SbH is SbH
    s = B.sampled_sbh_moments(i, eps, delta, "priority", 1.0)
    np.testing.assert_allclose(s.reporting, full.reporting, rtol=1e-7)
    np.testing.assert_allclose(s.second_moment, full.second_moment, rtol=1e-7)
    # the bias of the w*/q(w*) estimator does not depend on the sampling rate
    low = B.sampled_sbh_moments(i, eps, delta, "ppswor", 0.01)
    np.testing.assert_allclose(low.expectation, full.expectation)
    # ppswor reporting: E[(1 - e^(-tau w*)); w* >= T] by direct quadrature
    for n, x in enumerate(i.tolist()):
        d = stats.laplace(loc=x, scale=1 / eps)
        want = integrate.quad(
            lambda w, d=d: -math.expm1(-0.01 * w) * d.pdf(w), T, T + 2000, limit=400
        )[0]
        assert low.reporting[n] == pytest.approx(want, rel=1e-6)
    assert (low.variance() > full.variance()).all()
