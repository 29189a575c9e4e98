"""``privhist.experiments.pws.exact`` and the figure tables: the exact quantities against
independent computations (the recursion of Algorithm 3 run step by step to the largest frequency,
Laplace integrals by quadrature, Lemma 5.2's closed-form matrix, sums over individual keys)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from pws_reference import algorithm3
from scipy import integrate, stats

from privhist.experiments import pws as ex
from privhist.mechanisms.sampling.pws import baselines, keys

# -- independent references ---------------------------------------------------------------------


def _sbh_phi(i: float, eps: float, delta: float) -> float:
    T = math.log(1 / delta) / eps + 1
    return float(stats.laplace.sf(T, loc=i, scale=1 / eps))


def _laplace_expectation(fn: Callable[[float], float], i: float, eps: float, lo: float) -> float:
    """``E[fn(i + Z); i + Z >= lo]`` for ``Z ~ Lap(1/eps)``, by quadrature on each side of i."""
    b = 1 / eps

    def g(x: float) -> float:
        return float(fn(x)) * math.exp(-abs(x - i) / b) / (2 * b)

    hi = max(lo, i) + 80 * b
    if lo < i:
        return float(
            integrate.quad(g, lo, i, limit=400)[0] + integrate.quad(g, i, hi, limit=400)[0]
        )
    return float(integrate.quad(g, lo, hi, limit=400)[0])


def _ppswor_q(tau: float) -> Callable[[float], float]:
    def q(x: float) -> float:
        return -math.expm1(-tau * x)

    return q


# -- reporting probabilities --------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 0.01), (0.5, 0.1), (1.0, 1e-4)])
def test_pws_no_sampling_matches_algorithm3_run_to_the_end(eps: float, delta: float) -> None:
    # frequencies far past 2L + 2, where pws_reporting uses Lemma 4.2 instead of the recursion
    f = np.array([1, 2, 3, 7, 40, 150, 400, 2000])
    ref = algorithm3([0.0] + [1.0] * 2000, eps, delta)
    got = ex.pws_reporting(f, eps, delta)
    np.testing.assert_allclose(got, [ref[i] for i in f], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("tau", [1.0, 0.05, 0.001])
def test_pws_ppswor_matches_algorithm3_run_to_the_end(tau: float) -> None:
    # Lemma 4.4 past ceil(2L) + 3: compare with the recursion over every frequency to 30000
    eps, delta = 0.5, 0.01
    m = 30000
    q = [0.0] + [-math.expm1(-tau * i) for i in range(1, m + 1)]
    ref = algorithm3(q, eps, delta)
    f = np.array([1, 2, 5, 9, 17, 33, 100, 1000, 29999, 30000])
    np.testing.assert_allclose(
        ex.pws_reporting(f, eps, delta, tau), [ref[i] for i in f], rtol=1e-12, atol=1e-15
    )


def test_expected_fraction_of_a_tiny_zipf_by_brute_force() -> None:
    # Zipf[1] over 6 keys: frequencies 6, 3, 2, 1, 1, 1; Zipf[2] over 5 keys: 25, 6, 2, 1, 1
    eps = 0.1
    for alpha, freqs in ((1.0, [6, 3, 2, 1, 1, 1]), (2.0, [25, 6, 2, 1, 1])):
        assert ex.zipf_frequencies(len(freqs), alpha).tolist() == freqs
        v, c = ex.frequency_histogram(freqs)
        for delta in (1.0, 0.1, 1e-3, 1e-6):
            rows = ex.fraction_rows_by_delta("z", v, c, eps, [delta])
            if delta == 1.0:
                pws = 1.0
                T = 1.0
                sbh = sum(float(stats.laplace.sf(T, loc=w, scale=1 / eps)) for w in freqs)
                sbh /= len(freqs)
            else:
                pi = algorithm3([0.0] + [1.0] * 30, eps, delta)
                pws = sum(pi[w] for w in freqs) / len(freqs)
                sbh = sum(_sbh_phi(w, eps, delta) for w in freqs) / len(freqs)
            assert rows[0]["pws"] == pytest.approx(pws, rel=1e-12)
            assert rows[0]["sbh"] == pytest.approx(sbh, rel=1e-9)
            assert rows[0]["ratio"] == pytest.approx(pws / sbh, rel=1e-9)


def test_fraction_by_tau_by_brute_force() -> None:
    eps, delta = 0.1, 1e-3
    freqs = [25, 6, 2, 1, 1]
    v, c = ex.frequency_histogram(freqs)
    for tau in (1.0, 0.01):
        (row,) = ex.fraction_rows_by_tau("z", v, c, eps, delta, [tau])
        q = [0.0] + [-math.expm1(-tau * i) for i in range(1, 26)]
        pi = algorithm3(q, eps, delta)
        T = math.log(1 / delta) / eps + 1
        sbh = [_laplace_expectation(_ppswor_q(tau), w, eps, T) for w in freqs]
        assert row["non_private"] == pytest.approx(sum(q[w] for w in freqs) / 5, rel=1e-12)
        assert row["pws"] == pytest.approx(sum(pi[w] for w in freqs) / 5, rel=1e-12)
        assert row["sampled_sbh"] == pytest.approx(sum(sbh) / 5, rel=1e-7)


def test_figure1_ratio_is_two_at_frequency_one_and_pws_reaches_one() -> None:
    rows = ex.figure1_rows()
    for eps, delta in ex.FIGURE1_PARAMS:
        rs = [r for r in rows if r["epsilon"] == eps and r["delta"] == delta]
        assert rs[0]["frequency"] == 1
        # pi*_1 = delta (Algorithm 3), phi_1 = 1/2 e^(-eps (T - 1)) = delta / 2
        assert rs[0]["pws"] == pytest.approx(delta, rel=1e-12)
        assert rs[0]["sbh"] == pytest.approx(delta / 2, rel=1e-9)
        assert rs[0]["ratio"] == pytest.approx(2.0, rel=1e-9)
        assert rs[-1]["pws"] == 1.0
        L = keys.threshold_L(eps, delta)
        first_one = next(r["frequency"] for r in rs if r["pws"] == 1.0)
        assert first_one <= math.floor(2 * L) + 2  # Lemma 4.2


def test_figure4_gains_at_tau_one_are_the_papers() -> None:
    # the paper (Figure 4): "at least 230% (alpha = 0.5), 97% (alpha = 1) and 37% (alpha = 2)"
    for alpha, paper in ((0.5, 230), (1.0, 97), (2.0, 37)):
        v, c = ex.frequency_histogram(ex.zipf_frequencies(10**6, alpha))
        (row,) = ex.fraction_rows_by_tau("z", v, c, 0.1, 0.001, [1.0])
        assert math.floor(100 * row["gain"]) == paper


# -- estimation ---------------------------------------------------------------------------------


def test_mle_bias_no_sampling_against_lemma_5_2() -> None:
    # integral L: the Algorithm 4 matrix is the shift of Lemma 5.2, written out here
    eps, L = 0.5, 6
    delta = keys.delta_for_integral_L(eps, L)
    m = 30
    curves = ex.estimation_curves(m, eps, delta, 1.0)

    def pij(i: int, j: int) -> float:
        k = i - j
        if 0 <= k <= L:
            return delta * math.exp(k * eps)
        if L + 1 <= k <= 2 * L:
            return delta * math.exp((2 * L - k) * eps)
        return 0.0

    def pi_star(i: int) -> float:
        return sum(pij(i, j) for j in range(1, i + 1))

    # MLE: token j is most likely from row j + L (the peak of the shift)
    a = {j: (j + L) / pi_star(j + L) for j in range(1, m + 1)}
    for i in range(1, m + 1):
        e_i = sum(pij(i, j) * a[j] for j in range(1, i + 1))
        second = sum(pij(i, j) * a[j] ** 2 for j in range(1, i + 1))
        assert curves.pws_bias[i - 1] == pytest.approx(e_i - i, rel=1e-8, abs=1e-9)
        assert curves.pws_variance[i - 1] == pytest.approx(second - e_i**2, rel=1e-7, abs=1e-9)


def test_estimation_margin_is_enough() -> None:
    # a longer matrix does not change the MLE's bias / variance on frequencies <= m
    for tau in (1.0, 0.01, 1e-4):
        short = ex.estimation_curves(60, 0.5, 2**-20, tau, with_sbh_variance=False)
        long = ex.estimation_curves(160, 0.5, 2**-20, tau, with_sbh_variance=False)
        np.testing.assert_allclose(short.pws_bias, long.pws_bias[:60], rtol=1e-12)
        np.testing.assert_allclose(short.pws_variance, long.pws_variance[:60], rtol=1e-12)


def test_sbh_and_non_private_curves_against_integrals() -> None:
    eps, delta, tau = 0.5, 2**-20, 0.01
    curves = ex.estimation_curves(80, eps, delta, tau)
    T = baselines.sbh_threshold(eps, delta)

    def q(x: float) -> float:
        return min(1.0, tau * x)

    for i in (1, 10, 29, 30, 31, 60, 80):
        e1 = _laplace_expectation(lambda x: x, i, eps, T)
        e2 = _laplace_expectation(lambda x: x * x / q(x), i, eps, T)
        assert curves.sbh_bias[i - 1] == pytest.approx(e1 - i, rel=1e-7)
        assert curves.sbh_variance[i - 1] == pytest.approx(e2 - e1**2, rel=1e-6)
        assert curves.non_private_variance[i - 1] == pytest.approx(i * i * (1 / q(i) - 1))


def test_selection_nrmse_sums_over_individual_keys() -> None:
    curves = ex.estimation_curves(200, 0.5, 2**-20, 0.1)
    keys_f = ex.uniform_grid_frequencies(200, 1000)
    assert keys_f.size == 200_000
    v, c = ex.frequency_histogram(keys_f)
    r = ex.selection_nrmse(v, c, curves)
    s = float(keys_f.sum())
    b = math.fsum(curves.pws_bias[keys_f - 1].tolist())
    var = math.fsum(curves.pws_variance[keys_f - 1].tolist())
    assert r.pws_mle == pytest.approx(math.sqrt(var + b * b) / s, rel=1e-10)
    var_np = math.fsum(curves.non_private_variance[keys_f - 1].tolist())
    assert r.non_private == pytest.approx(math.sqrt(var_np) / s, rel=1e-10)
