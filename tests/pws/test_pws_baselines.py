"""The closed-form reporting probability of sampled-SbH with threshold ppswor
(``pws.baselines.sampled_sbh_ppswor_reporting``) against quadrature of the Laplace density and
against the library's general ``sampled_sbh_moments``."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import integrate

from privhist.mechanisms.sampling.pws import baselines


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


@pytest.mark.parametrize("tau", [2.0, 0.1, 0.0999999, 0.01, 1e-5])
def test_sampled_sbh_ppswor_closed_form_against_quadrature(tau: float) -> None:
    eps, delta = 0.1, 1e-3  # lambda = 0.1: tau = 0.1 hits the lambda = tau branch
    T = baselines.sbh_threshold(eps, delta)
    f = np.array([1, 10, 50, 69, 70, 71, 90, 200, 1000])
    got = baselines.sampled_sbh_ppswor_reporting(f, eps, delta, tau)
    want = [_laplace_expectation(lambda x: -math.expm1(-tau * x), float(i), eps, T) for i in f]
    np.testing.assert_allclose(got, want, rtol=1e-7)
    lib = baselines.sampled_sbh_moments(f, eps, delta, "ppswor", tau).reporting
    np.testing.assert_allclose(got, lib, rtol=1e-7)
    # the lambda = tau branch exactly
    if tau == 0.1:
        got_eq = baselines.sampled_sbh_ppswor_reporting(f, 0.1, delta, 0.1)
        np.testing.assert_allclose(got_eq, want, rtol=1e-7)


def test_sampled_sbh_ppswor_no_overflow_for_huge_frequencies() -> None:
    got = baselines.sampled_sbh_ppswor_reporting(np.array([10**6, 10**12]), 0.1, 1e-3, 1.0)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, [1.0, 1.0])
