"""Sanitized frequencies with maximum separation: Algorithm 5 (piecewise-constant PDFs) and its
discretisation.

Cohen, Geri, Sarlos & Stemmer, Section 5, Algorithm 5 and Theorem 5.1. A key of frequency ``i``
is not reported with probability ``f_i(0) = 1 - pi_i`` (``pi_i`` of Algorithm 3) and otherwise
gets a sanitized value in ``(0, i]`` with a piecewise-constant density ``f_i``:

* ``f_i`` puts mass ``min(pi_i, delta)`` uniformly on ``(i - 1, i]``;
* a lower envelope ``f_L`` on ``(0, i - 1]``: 0 on ``(0, b_i]`` and ``e^-eps f_(i-1)`` above,
  where ``b_i`` solves ``e^eps c_0 + int_0^b f_(i-1) = delta`` with
  ``c_0 = [e^-eps f_(i-1)(0) - f_i(0)]_+`` (``f_L = 0`` when no solution exists);
* the switch point ``c_i`` solves ``int_0^c f_L + e^eps int_c^(i-1) f_(i-1) = pi_i - min(pi_i,
  delta)``, and ``f_i = f_L`` on ``(0, c_i]``, ``f_i = e^eps f_(i-1)`` on ``(c_i, i - 1]``.

Note on the printed algorithm: its condition for ``b_i`` reads ``c_0 + int_0^b f_(i-1) = delta``.
The set ``{not reported} U (0, z]`` gives the constraint
``f_(i-1)(0) + F_(i-1)(z) <= e^eps (f_i(0) + F_i(z)) + delta``, i.e. the lower envelope
``F_i(z) >= e^-eps (F_(i-1)(z) + e^eps c_0 - delta)`` (the same term ``[e^-eps pi_(i-1,0) -
pi_(i,0)]_+`` that Algorithm 4 adds to its lower bounds), so ``b_i`` must solve
``e^eps c_0 + F_(i-1)(b) = delta``; with the printed ``c_0`` the divergence of row ``i - 1``
against row ``i`` is ``delta + (e^eps - 1) c_0`` whenever ``c_0 > 0``. The algorithm's own remark
(``max{0, e^-eps f_(i-1)(0) - f_i(0)} <= delta`` "from DP") is the weaker form of
``e^eps c_0 <= delta``, which is Algorithm 3's third constraint.

Representation. Row ``i`` is its cumulative distribution on ``(0, i]``: breakpoints
``0 = x_0 < ... < x_K = i`` and ``F_i(x_k)`` (linear in between, i.e. constant density). Row ``i``
has the breakpoints of row ``i - 1`` plus at most ``b_i``, ``c_i`` and ``i``, so frequencies up to
``m`` use at most ``3 m`` breakpoints. The discretisation takes the union of all breakpoints: token
``j`` is the interval ``(x_(j-1), x_j]`` and ``pi_(i,j) = F_i(x_j) - F_i(x_(j-1))``. Since every
density is constant on every token interval, the hockey-stick divergences, the stochastic
dominance and the separation of the discrete rows are those of the continuous ``f_i``.

The computation is generic over the number type: float64 arrays, or (``precision`` in bits)
mpmath numbers in object arrays for the high-precision checks of the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.validation import check_delta, check_epsilon
from privhist.mechanisms.sampling.pws.keys import (
    reporting_probabilities,
    reporting_probabilities_mp,
)
from privhist.mechanisms.sampling.pws.schemes import check_inclusion

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MaxSeparationPdfs:
    """The PDFs of Algorithm 5 for frequencies ``0..m`` and their discretisation.

    ``cdfs[i] = (x, F)``: breakpoints and the cumulative reported mass of row ``i`` on ``(0, i]``
    (``F[-1] = pi_i``); ``switch[i] = c_i`` and ``cut[i] = b_i`` (NaN when ``f_L = 0``).
    ``breakpoints`` are the sorted token boundaries ``x_1 < ... < x_K`` and ``matrix`` the
    ``(m + 1) x (K + 1)`` discretisation: column 0 "not reported", column ``j`` the interval
    ``(x_(j-1), x_j]``.
    """

    pi: npt.NDArray[Any]
    cdfs: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]]
    switch: list[Any]
    cut: list[Any]
    breakpoints: npt.NDArray[Any]
    matrix: npt.NDArray[Any]

    def density(self, i: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """Row ``i`` as ``(edges, densities)``: density ``densities[k]`` on
        ``(edges[k], edges[k+1]]``."""
        x, F = self.cdfs[i]
        width = np.diff(x)
        mass = np.diff(F)
        dens = np.array([m / w if w > 0 else m * 0 for m, w in zip(mass, width, strict=True)])
        return x, dens


def _interp(z: npt.NDArray[Any], x: npt.NDArray[Any], F: npt.NDArray[Any], zero: Any) -> Any:
    """Piecewise-linear ``F`` (breakpoints ``x``) at ``z``, constant beyond ``x[-1]``."""
    out = np.empty(z.shape[0], dtype=F.dtype)
    k = np.searchsorted(x, z, side="right") - 1
    for n in range(z.shape[0]):
        kk = int(k[n])
        if kk >= x.shape[0] - 1:
            out[n] = F[-1]
        elif kk < 0:
            out[n] = zero
        else:
            w = x[kk + 1] - x[kk]
            out[n] = F[kk] if w == 0 else F[kk] + (F[kk + 1] - F[kk]) * ((z[n] - x[kk]) / w)
    return out


def _interp_vec(z: npt.NDArray[Any], x: npt.NDArray[Any], F: npt.NDArray[Any]) -> Any:
    if F.dtype == object:
        return _interp(z, x, F, F[0] * 0)
    return np.interp(z.astype(np.float64), x.astype(np.float64), F.astype(np.float64))


def _solve_increasing(x: Any, F: Any, target: Any) -> Any:
    """Leftmost ``z`` with ``F(z) = target`` for non-decreasing piecewise-linear ``F``
    (``F[0] <= target <= F[-1]``)."""
    k = int(np.searchsorted(F, target, side="left"))
    if k == 0:
        return x[0]
    if k >= x.shape[0]:
        return x[-1]
    return x[k - 1] + (target - F[k - 1]) * (x[k] - x[k - 1]) / (F[k] - F[k - 1])


def _solve_decreasing(x: Any, G: Any, target: Any) -> Any:
    """Leftmost ``z`` with ``G(z) = target`` for non-increasing piecewise-linear ``G``
    (``G[0] >= target >= G[-1]``)."""
    below = np.nonzero(np.array([g <= target for g in G], dtype=bool))[0]
    k = int(below[0]) if below.size else x.shape[0] - 1
    if k == 0:
        return x[0]
    return x[k - 1] + (G[k - 1] - target) * (x[k] - x[k - 1]) / (G[k - 1] - G[k])


def max_separation_pdfs(
    q: npt.ArrayLike,
    epsilon: float,
    delta: float,
    *,
    precision: int | None = None,
    printed_rule: bool = False,
) -> MaxSeparationPdfs:
    """Algorithm 5 for ``q = (q_0 = 0, q_1, ..., q_m)`` (see the module notes).

    ``printed_rule=True`` places ``b_i`` by the condition as printed (``c_0 + F(b) = delta``),
    which is not DP; it exists only so the tests can show that.

    >>> import numpy as np
    >>> q = np.ones(4); q[0] = 0
    >>> A = max_separation_pdfs(q, 0.6931471805599453, 0.1)
    >>> [round(float(v), 6) for v in A.matrix[:, 0]]  # not reported: 1 - pi_i
    [1.0, 0.9, 0.7, 0.3]
    >>> bool(abs(A.matrix[3, 1:].sum() - 0.7) < 1e-12), A.breakpoints.shape[0] <= 3 * 3
    (True, True)
    """
    fn = "max_separation_pdfs"
    eps = check_epsilon(epsilon, fn)
    dl = check_delta(delta, fn, positive=True)
    qa = check_inclusion(q, fn)
    m = qa.shape[0] - 1
    if precision is None:
        pi: Any = reporting_probabilities(qa, eps, dl)
        return _run(pi, math.exp(eps), math.exp(-eps), dl, 0.0, np.float64, m, printed_rule)
    with mpmath.workprec(precision):
        pi_mp, e, inv, d = reporting_probabilities_mp(qa, eps, dl)
        return _run(pi_mp, e, inv, d, mpmath.mpf(0), object, m, printed_rule)


def _run(
    pi: Any, e: Any, inv: Any, d: Any, zero: Any, dtype: Any, m: int, printed: bool
) -> MaxSeparationPdfs:
    one = zero + 1
    cdfs: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]] = [
        (np.array([zero], dtype=dtype), np.array([zero], dtype=dtype))
    ]
    switch: list[Any] = [zero]
    cut: list[Any] = [math.nan]
    for i in range(1, m + 1):
        x, F = cdfs[-1]
        prev_out = one - pi[i - 1]  # f_(i-1)(0)
        out = one - pi[i]  # f_i(0)
        c0 = inv * prev_out - out
        c0 = c0 if c0 > 0 else zero
        a = c0 if printed else e * c0  # <= delta (Algorithm 3's third constraint)
        a = a if a < d else d  # clamp rounding above it
        mass = F[-1]  # pi_(i-1)
        top = pi[i] if pi[i] < d else d
        target = pi[i] - top
        pts = list(x)
        b: Any = math.nan
        if a + mass > d:
            b = _solve_increasing(x, F, d - a)
            pts.append(b)
        xs = np.array(sorted(set(pts)), dtype=dtype)
        Fp = _interp_vec(xs, x, F)
        excess = Fp - (d - a)
        FL = np.where(excess > 0, excess, zero) * inv
        G = FL + (mass - Fp) * e
        c = _solve_decreasing(xs, G, target)
        xs = np.array(sorted({*xs.tolist(), c}), dtype=dtype)
        Fp = _interp_vec(xs, x, F)
        excess = Fp - (d - a)
        FL = np.where(excess > 0, excess, zero) * inv
        Fc = _interp_vec(np.array([c], dtype=dtype), x, F)[0]
        exc_c = Fc - (d - a)
        FLc = inv * (exc_c if exc_c > 0 else zero)
        Fi = np.where(xs <= c, FL, (Fp - Fc) * e + FLc)
        if i == 1:  # (0, 0] is empty: row 1 is the unit interval alone
            xs, Fi = np.array([zero], dtype=dtype), np.array([zero], dtype=dtype)
        xs = np.append(xs, zero + i).astype(dtype)
        Fi = np.append(Fi, pi[i]).astype(dtype)
        cdfs.append((xs, Fi))
        switch.append(c)
        cut.append(b)
    allx = sorted({v for x, _ in cdfs for v in x.tolist()} - {zero})
    bp = np.array(allx, dtype=dtype)
    grid = np.concatenate((np.array([zero], dtype=dtype), bp))
    P = np.full((m + 1, bp.shape[0] + 1), zero, dtype=dtype)
    for i, (x, F) in enumerate(cdfs):
        P[i, 0] = one - pi[i]
        if i == 0:
            continue
        Fg = _interp_vec(grid, x, F)
        P[i, 1:] = np.diff(Fg)
    return MaxSeparationPdfs(np.asarray(pi), cdfs, switch, cut, bp, P)
