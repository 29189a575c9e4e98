"""Sanitized frequencies: Algorithm 4 (realisability, DP between neighbouring rows in 200-bit
arithmetic, stochastic dominance, maximum separation against a linear program), Lemma 5.2, and
the certified exact shift pmf of the release path (exact hockey-stick checks, power check)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from pws_helpers import hockey, inclusion_vector
from scipy.optimize import linprog

from privhist.accounting.profile import NOT_RELEASED, check_dp
from privhist.mechanisms.optimal_selection import ONE, optimal_reporting_numerators
from privhist.mechanisms.sampling.pws import frequencies as F
from privhist.mechanisms.sampling.pws import keys as K

PREC = 200


CASES = [
    ("one", 0.5, 0.01, 30),
    ("one", 0.1, K.delta_for_integral_L(0.1, 6), 30),
    ("ppswor:0.05", 0.5, 0.01, 30),
    ("priority:0.02", 0.3, 0.02, 30),
    ("ppswor:0.5", 1.0, 1e-3, 25),
]


@pytest.mark.parametrize(("kind", "eps", "delta", "m"), CASES)
def test_algorithm4_realisable_private_dominant(
    kind: str, eps: float, delta: float, m: int
) -> None:
    q = inclusion_vector(kind, m)
    with mpmath.workprec(PREC):
        P = F.integer_token_matrix(q, eps, delta, precision=PREC)
        e, d = mpmath.exp(eps), mpmath.mpf(delta)
        pi = K.reporting_probabilities(q, eps, delta)
        worst = mpmath.mpf(0)
        for i in range(1, m + 1):
            row = list(P[i])
            assert all(x >= -(mpmath.mpf(2) ** -150) for x in row)
            assert all(x == 0 for x in row[i + 1 :])  # tokens j <= i
            # realisability: rows sum to pi_i <= q_i (and to 1 with "not reported")
            assert abs(sum(row[1:]) - pi[i]) < 1e-12 and float(sum(row[1:])) <= q[i] + 1e-15
            assert abs(sum(row) - 1) < mpmath.mpf(2) ** -150
            prev = list(P[i - 1])
            for a, b in ((prev, row), (row, prev)):  # both directions, all sets of outputs
                h = hockey(a, b, e)
                assert h <= d + mpmath.mpf(2) ** -150, (i, float(h))
                worst = max(worst, h)
            # first-order stochastic dominance: Pr[token >= h] non-decreasing in i
            up_prev = np.cumsum([float(x) for x in prev[::-1]])[::-1]
            up_row = np.cumsum([float(x) for x in row[::-1]])[::-1]
            assert (up_row[1:] >= up_prev[1:] - 1e-13).all()
        assert worst > delta * 0.5  # the constraints are used, not trivially met


def test_algorithm4_high_precision_and_float_agree() -> None:
    q = inclusion_vector("ppswor:0.05", 40)
    a = F.integer_token_matrix(q, 0.3, 1e-3)
    b = F.integer_token_matrix(q, 0.3, 1e-3, precision=PREC).astype(float)
    assert np.abs(a - b).max() < 1e-12


@pytest.mark.parametrize("L", [2, 5, 12])
def test_lemma_5_2_closed_form(L: int) -> None:
    eps = 0.2
    delta = K.delta_for_integral_L(eps, L)
    m = 4 * L + 6
    P = F.integer_token_matrix(inclusion_vector("one", m), eps, delta)
    C = F.closed_form_matrix(eps, delta, m)
    assert np.abs(P - C).max() < 1e-12
    # the second form of Lemma 5.2: delta e^((i-j) eps) near the diagonal, written out
    i = m
    for j in range(i - L, i + 1):
        assert P[i, j] == pytest.approx(delta * np.exp((i - j) * eps), rel=1e-9)


def _lp_extreme(
    prev: np.ndarray[Any, Any], i: int, pi_i: float, e: float, d: float, c: Any
) -> float:
    """Optimum of ``c . x`` over rows x (tokens 0..i, x_0 = 1 - pi_i) that are (e, d)-DP with
    ``prev`` in both directions (hockey-stick linearised with slack variables)."""
    n = i + 1
    p = np.zeros(n)
    p[: prev.shape[0]] = prev
    # variables: x (n), s (n) for x - e p <= s, t (n) for p - e x <= t
    nv = 3 * n
    A, b = [], []
    for o in range(n):
        r = np.zeros(nv)
        r[o], r[n + o] = 1, -1
        A.append(r)
        b.append(e * p[o])  # x_o - s_o <= e p_o
        r = np.zeros(nv)
        r[o], r[2 * n + o] = -e, -1
        A.append(r)
        b.append(-p[o])  # p_o - e x_o <= t_o
    r = np.zeros(nv)
    r[n : 2 * n] = 1
    A.append(r)
    b.append(d)
    r = np.zeros(nv)
    r[2 * n :] = 1
    A.append(r)
    b.append(d)
    Aeq = np.zeros((2, nv))
    Aeq[0, 0] = 1
    Aeq[1, 1:n] = 1
    obj = np.zeros(nv)
    obj[:n] = c
    res = linprog(obj, A_ub=A, b_ub=b, A_eq=Aeq, b_eq=[1 - pi_i, pi_i], bounds=[(0, None)] * nv)
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize(("kind", "eps", "delta"), [("one", 0.5, 0.01), ("ppswor:0.1", 0.5, 0.02)])
def test_maximum_separation_theorem_5_1(kind: str, eps: float, delta: float) -> None:
    """Property 3 for Algorithm 4 (tokens j <= i): given row i-1, the prefix sums of row i are
    as small, or the suffix sums as large, as any DP row allows (checked by linear programs)."""
    m = 14
    q = inclusion_vector(kind, m)
    P = F.integer_token_matrix(q, eps, delta)
    pi = K.reporting_probabilities(q, eps, delta)
    e = float(np.exp(eps))
    for i in range(2, m + 1):
        row = P[i, : i + 1]
        hits = 0
        for jp in range(1, i + 1):
            pre = np.zeros(i + 1)
            pre[1 : jp + 1] = 1  # sum_(j=1..jp) x_j
            suf = np.zeros(i + 1)
            suf[jp:] = -1  # -sum_(j=jp..i) x_j
            lo = _lp_extreme(P[i - 1, :i], i, pi[i], e, delta, pre)
            hi = -_lp_extreme(P[i - 1, :i], i, pi[i], e, delta, suf)
            at_min = abs(row[1 : jp + 1].sum() - lo) < 1e-7
            at_max = abs(row[jp:].sum() - hi) < 1e-7
            assert at_min or at_max, (i, jp)
            hits += at_min and at_max
        # the switch point c_i: both hold there
        assert hits >= 1


# -- exact shift pmf ----------------------------------------------------------------------------

EXACT = [(1.0, 1e-3), (0.6931471805599453, 0.1), (0.3, 0.05), (0.5, 0.3), (2.0, 1e-6)]


def _rows(d: tuple[int, ...], i: int) -> dict[Any, Fraction]:
    out: dict[Any, Fraction] = {}
    rep = 0
    for j in range(max(1, i - len(d) + 1), i + 1):
        out[j] = Fraction(d[i - j], ONE)
        rep += d[i - j]
    out[NOT_RELEASED] = Fraction(ONE - rep, ONE)
    return out


@pytest.mark.parametrize(("eps", "delta"), EXACT)
def test_exact_shift_is_dp_by_exact_hockey_stick(eps: float, delta: float) -> None:
    d = F.exact_shift_pmf(Fraction(eps), Fraction(delta))
    assert sum(d) == ONE and min(d) > 0
    worst = 0.0
    for i in range(0, len(d) + 3):
        res = check_dp(_rows(d, i), _rows(d, i + 1), eps, delta)
        assert res.holds, (i, res)
        worst = max(worst, float(res.worst))
    assert worst > delta * 0.99


@pytest.mark.parametrize(("eps", "delta"), EXACT[:3])
def test_exact_shift_power_check(eps: float, delta: float) -> None:
    """The same exact check rejects the pmf with one unit of mass moved to d_0, and the
    certificate rejects it too."""
    d = list(F.exact_shift_pmf(Fraction(eps), Fraction(delta)))
    bad = [d[0] + (ONE // 10**9), *d[1:]]
    bad[-1] -= ONE // 10**9
    assert not F.verify_shift_pmf(bad, Fraction(eps), Fraction(delta))
    assert not all(
        check_dp(_rows(tuple(bad), i), _rows(tuple(bad), i + 1), eps, delta).holds
        for i in range(len(bad) + 2)
    )


@pytest.mark.parametrize(("eps", "delta"), [*EXACT, (0.01, 1e-6), (0.1, 1e-8)])
def test_exact_shift_reports_like_algorithm_3(eps: float, delta: float) -> None:
    d = F.exact_shift_pmf(Fraction(eps), Fraction(delta))
    cum = np.concatenate(([0], np.cumsum(np.array(d, dtype=object)))).astype(float) / ONE
    opt = np.array(optimal_reporting_numerators(Fraction(eps), Fraction(delta)), dtype=float) / ONE
    n = max(cum.shape[0], opt.shape[0])
    cum = np.concatenate((cum, np.ones(n - cum.shape[0])))
    opt = np.concatenate((opt, np.ones(n - opt.shape[0])))
    assert (cum <= opt + 1e-15).all()  # never above the optimum
    assert np.abs(cum - opt).max() < 1e-9  # and within rounding of it


def test_exact_shift_is_lemma_5_2_for_integral_L() -> None:
    eps = 0.25
    delta = K.delta_for_integral_L(eps, 7)
    d = F.exact_shift_pmf(Fraction(eps), Fraction(delta))
    m = 40
    rows = F.shift_matrix(d, m)
    C = F.closed_form_matrix(eps, delta, m)
    got = np.array([[float(x) for x in r] for r in rows])
    assert np.abs(got - C).max() < 1e-12


def test_exact_shift_refuses_tiny_or_huge_delta() -> None:
    from privhist import ValidationError

    with pytest.raises(ValidationError, match="delta"):
        F.exact_shift_pmf(Fraction(1), Fraction(1, 2**50))
    with pytest.raises(ValidationError, match="delta"):
        F.exact_shift_pmf(Fraction(1), Fraction(1))
