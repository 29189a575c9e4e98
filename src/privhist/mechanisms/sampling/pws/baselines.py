"""Baselines: stability-based histograms (SbH, Algorithm 6) in continuous form, and sampled-SbH.

Cohen, Geri, Sarlos & Stemmer, Section 8.1. SbH adds ``Lap(1/eps)`` to every frequency and reports
the keys whose noisy frequency ``w* = i + Z`` reaches ``T = (1/eps) ln(1/delta) + 1``, with ``w*``
as the estimate. These closed forms (``b = 1/eps``) are for analysis and figures; releases use
the project's exact discrete ``stability`` mechanism.

* reporting probability: ``phi_i = 1/2 e^(-(T - i)/b)`` for ``i <= T``,
  ``1 - 1/2 e^(-(i - T)/b)`` for ``i > T``;
* ``E[w*; w* >= T]`` = ``1/2 e^(-(T-i)/b) (T + b)`` for ``i <= T``,
  ``i - 1/2 e^(-(i-T)/b) (T - b)`` for ``i > T``;
* ``E[w*^2; w* >= T]`` = ``1/2 e^(-(T-i)/b) (T^2 + 2bT + 2b^2)`` for ``i <= T``,
  ``i^2 + 2b^2 - 1/2 e^(-(i-T)/b) (T^2 - 2bT + 2b^2)`` for ``i > T``.

Sampled-SbH sanitises with SbH and then samples with ``q(w*)`` treating ``w*`` as the frequency;
its estimator is ``w* / q(w*)`` (equation 7), so its expectation equals SbH's for every sampling
rate (the bias does not change with ``tau``). Its reporting probability ``E[q(w*); w* >= T]`` and
second moment ``E[w*^2 / q(w*); w* >= T]`` are integrals against the Laplace density, computed by
adaptive quadrature; for threshold ppswor with ``f(i) = i`` the reporting probability also has a
closed form (:func:`sampled_sbh_ppswor_reporting`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from privhist.core.validation import check_delta, check_epsilon
from privhist.mechanisms.sampling.pws.schemes import (
    Scheme,
    check_power,
    check_scheme,
    check_tau,
)

F64 = npt.NDArray[np.float64]


def sbh_threshold(epsilon: float, delta: float) -> float:
    """``T = (1/eps) ln(1/delta) + 1`` (Algorithm 6).

    >>> round(sbh_threshold(0.1, 0.01), 6)
    47.051702
    """
    eps = check_epsilon(epsilon, "sbh_threshold")
    d = check_delta(delta, "sbh_threshold", positive=True)
    return math.log(1 / d) / eps + 1


def sbh_reporting_probability(frequencies: npt.ArrayLike, epsilon: float, delta: float) -> F64:
    """``phi_i = Pr[i + Lap(1/eps) >= T]`` (closed form)."""
    T = sbh_threshold(epsilon, delta)
    i = np.asarray(frequencies, dtype=np.float64)
    z = epsilon * (i - T)
    out: F64 = np.where(z <= 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.abs(z)))
    return np.where(i > 0, out, 0.0)


@dataclass(frozen=True)
class SbHMoments:
    """Per-frequency reporting probability, ``E[w*; w* >= T]`` and ``E[w*^2; w* >= T]``."""

    reporting: F64
    expectation: F64
    second_moment: F64

    def bias(self, frequencies: npt.ArrayLike) -> F64:
        out: F64 = self.expectation - np.asarray(frequencies, dtype=np.float64)
        return out

    def variance(self) -> F64:
        out: F64 = np.maximum(self.second_moment - self.expectation**2, 0.0)
        return out


def sbh_moments(frequencies: npt.ArrayLike, epsilon: float, delta: float) -> SbHMoments:
    """Closed forms of the module notes for the SbH estimate ``w* 1{w* >= T}``."""
    T = sbh_threshold(epsilon, delta)
    b = 1 / epsilon
    i = np.asarray(frequencies, dtype=np.float64)
    low = i <= T
    h = 0.5 * np.exp(-np.abs(i - T) / b)
    rep = np.where(low, h, 1 - h)
    e1 = np.where(low, h * (T + b), i - h * (T - b))
    e2 = np.where(
        low, h * (T**2 + 2 * b * T + 2 * b**2), i**2 + 2 * b**2 - h * (T**2 - 2 * b * T + 2 * b**2)
    )
    zero = i <= 0
    return SbHMoments(np.where(zero, 0.0, rep), np.where(zero, 0.0, e1), np.where(zero, 0.0, e2))


def _q_continuous(x: float, scheme: Scheme, tau: float, power: float) -> float:
    fx = x**power if x > 0 else 0.0
    return -math.expm1(-tau * fx) if scheme == "ppswor" else min(1.0, tau * fx)


def sampled_sbh_moments(
    frequencies: npt.ArrayLike,
    epsilon: float,
    delta: float,
    scheme: Scheme,
    tau: float,
    power: float = 1.0,
) -> SbHMoments:
    """Sampled-SbH: reporting probability ``E[q(w*); w* >= T]``, expectation of the estimator
    ``w*/q(w*)`` (equal to SbH's) and its second moment ``E[w*^2 / q(w*); w* >= T]``."""
    from scipy import integrate  # here: scipy is slow to import

    fn = "sampled_sbh_moments"
    eps = check_epsilon(epsilon, fn)
    scheme, t, p = check_scheme(scheme, fn), check_tau(tau, fn), check_power(power, fn)
    T = sbh_threshold(eps, delta)
    b = 1 / eps
    base = sbh_moments(frequencies, eps, delta)
    i_arr = np.asarray(frequencies, dtype=np.float64)
    rep = np.zeros(i_arr.shape[0])
    e2 = np.zeros(i_arr.shape[0])
    for n, i in enumerate(i_arr.tolist()):
        if i <= 0:
            continue

        def dens(x: float, i: float = i) -> float:
            return 0.5 / b * math.exp(-abs(x - i) / b)

        pts = [i] if i > T else None
        hi = max(T, i) + 60 * b
        rep[n] = integrate.quad(
            lambda x: _q_continuous(x, scheme, t, p) * dens(x), T, hi, points=pts, limit=200
        )[0]
        e2[n] = integrate.quad(
            lambda x: x * x / _q_continuous(x, scheme, t, p) * dens(x),
            T,
            hi,
            points=pts,
            limit=200,
        )[0]
    return SbHMoments(rep, base.expectation, e2)


def sampled_sbh_ppswor_reporting(
    values: npt.ArrayLike, epsilon: float, delta: float, tau: float
) -> F64:
    """Sampled-SbH with threshold ppswor (``f(i) = i``): ``E[q(w*); w* >= T]`` in closed form,
    the reporting probability of :func:`sampled_sbh_moments` without quadrature.

    With ``w* = i + Z``, ``Z ~ Lap(b)``, ``lambda = 1/b = eps`` and ``q(x) = 1 - e^(-tau x)``
    (Section 8.1), the probability is ``phi_i - I_i`` where ``phi_i = Pr[w* >= T]`` and ``I_i =
    E[e^(-tau w*); w* >= T]``: ``I_i = lambda / (2 (lambda + tau)) e^(-tau T - lambda (T - i))``
    for ``i <= T``, and for ``i > T`` ``I_i = lambda / 2 * (e^(-tau i) - e^(lambda (T - i) -
    tau T)) / (lambda - tau) + lambda / (2 (lambda + tau)) e^(-tau i)`` (the first term is
    ``lambda / 2 (i - T) e^(-tau i)`` when ``lambda = tau``): two elementary integrals of the
    Laplace density.

    >>> float(sampled_sbh_ppswor_reporting([10**6], 0.1, 0.001, 1.0)[0])
    1.0
    """
    fn = "sampled_sbh_ppswor_reporting"
    lam = check_epsilon(epsilon, fn)
    t = check_tau(tau, fn)
    T = sbh_threshold(lam, delta)
    i = np.asarray(values, dtype=np.float64)
    phi = sbh_reporting_probability(i, lam, delta)
    low = i <= T
    i_low = lam / (2 * (lam + t)) * np.exp(-t * T - lam * (T - np.minimum(i, T)))
    c = np.minimum(T - i, 0.0)  # <= 0 on the high side
    e_ti = np.exp(-t * i)
    diff = lam - t
    x = diff * c
    if diff == 0:
        first = e_ti * (-c)
    else:
        small = np.abs(x) < 1
        with np.errstate(over="ignore", invalid="ignore"):
            near = e_ti * (-np.expm1(np.where(small, x, 0.0))) / diff
            far = (e_ti - np.exp(lam * c - t * T)) / diff
        first = np.where(small, near, far)
    i_high = lam / 2 * first + lam / (2 * (lam + t)) * e_ti
    out: F64 = np.clip(phi - np.where(low, i_low, i_high), 0.0, 1.0)
    return np.where(i > 0, out, 0.0)
