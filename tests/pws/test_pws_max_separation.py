"""Algorithm 5 (piecewise-constant PDFs) and its discretisation: realisability, DP between
neighbouring rows in 200-bit arithmetic (both directions, "not reported" included), first-order
stochastic dominance, at most 3m breakpoints, maximum separation (Theorem 5.1, property 3) against
linear programs over a finer token set, and the ordinal optimality of Corollary 6.1."""

from __future__ import annotations

import itertools
from typing import Any

import mpmath
import numpy as np
import pytest
from pws_helpers import hockey, inclusion_vector
from scipy.optimize import linprog

from privhist.mechanisms.sampling.pws import keys as K
from privhist.mechanisms.sampling.pws.frequencies import integer_token_matrix
from privhist.mechanisms.sampling.pws.max_separation import max_separation_pdfs

PREC = 200
TINY = mpmath.mpf(2) ** -150


CASES = [
    ("one", 0.5, 0.01, 24),
    ("one", 0.1, K.delta_for_integral_L(0.1, 5), 20),
    ("ppswor:0.05", 0.5, 0.01, 24),
    ("priority:0.02", 0.3, 0.02, 24),
    ("ppswor:0.5", 1.0, 1e-3, 18),
]


@pytest.mark.parametrize(("kind", "eps", "delta", "m"), CASES)
def test_algorithm5_realisable_private_dominant(
    kind: str, eps: float, delta: float, m: int
) -> None:
    q = inclusion_vector(kind, m)
    with mpmath.workprec(PREC):
        A = max_separation_pdfs(q, eps, delta, precision=PREC)
        P = A.matrix
        e, d = mpmath.exp(eps), mpmath.mpf(delta)
        pi = K.reporting_probabilities(q, eps, delta)
        # at most 3m breakpoints (tokens), each row's PDF lives on (0, i]
        assert P.shape[1] - 1 <= 3 * m
        worst = mpmath.mpf(0)
        for i in range(1, m + 1):
            row = list(P[i])
            assert all(x >= -TINY for x in row)
            x_i, F_i = A.cdfs[i]  # the CDF: 0 at 0, non-decreasing, pi_i at i
            assert x_i[0] == 0 and x_i[-1] == i and all(np.diff(x_i) > 0)
            assert F_i[0] == 0 and all(np.diff(F_i) >= -TINY) and abs(F_i[-1] - pi[i]) < 1e-12
            assert all(p <= TINY for p, hi in zip(row[1:], A.breakpoints, strict=True) if hi > i)
            # realisability (Theorem 5.1, 1): reported mass pi_i <= q_i; rows sum to 1
            assert abs(sum(row[1:]) - pi[i]) < 1e-12 and float(sum(row[1:])) <= q[i] + 1e-15
            assert abs(sum(row) - 1) < TINY
            # the top unit interval (i-1, i] carries min(pi_i, delta)
            top = sum(p for p, hi in zip(row[1:], A.breakpoints, strict=True) if i - 1 < hi <= i)
            assert abs(top - min(mpmath.mpf(pi[i]), d)) < 1e-12
            prev = list(P[i - 1])
            for a, b in ((prev, row), (row, prev)):  # (eps, delta)-DP, both directions
                h = hockey(a, b, e)
                assert h <= d + TINY, (i, float(h))
                worst = max(worst, h)
            # first-order stochastic dominance (token 0 = not reported is the lowest value)
            up_prev = np.cumsum([float(x) for x in prev[::-1]])[::-1]
            up_row = np.cumsum([float(x) for x in row[::-1]])[::-1]
            assert (up_row[1:] >= up_prev[1:] - 1e-13).all()
        assert worst > delta * 0.999  # the constraints are tight, not trivially met


def test_float_and_high_precision_agree() -> None:
    q = inclusion_vector("ppswor:0.05", 25)
    a = max_separation_pdfs(q, 0.3, 1e-3)
    b = max_separation_pdfs(q, 0.3, 1e-3, precision=PREC)
    assert a.matrix.shape == b.matrix.shape
    assert np.abs(a.matrix - b.matrix.astype(float)).max() < 1e-12


def _lp_extreme(prev: np.ndarray[Any, Any], pi_i: float, e: float, d: float, c: Any) -> float:
    """Optimum of ``c . x`` over output laws ``x`` (``x_0 = 1 - pi_i`` not reported, tokens
    1..n) that are (e, d)-DP with ``prev`` in both directions (hockey-stick linearised)."""
    n = prev.shape[0]
    nv = 3 * n
    A, b = [], []
    for o in range(n):
        r = np.zeros(nv)
        r[o], r[n + o] = 1, -1
        A.append(r)
        b.append(e * prev[o])  # x_o - e p_o <= s_o
        r = np.zeros(nv)
        r[o], r[2 * n + o] = -e, -1
        A.append(r)
        b.append(-prev[o])  # p_o - e x_o <= t_o
    for block in (1, 2):
        r = np.zeros(nv)
        r[block * n : (block + 1) * n] = 1
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


def _split(row: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each token interval cut in two halves (constant density: half the mass each)."""
    out = np.empty(1 + 2 * (row.shape[0] - 1))
    out[0] = row[0]
    out[1::2] = row[1:] / 2
    out[2::2] = row[1:] / 2
    return out


def _separation_holds(
    P: np.ndarray[Any, Any], bp: np.ndarray[Any, Any], i: int, eps: float, delta: float
) -> bool:
    """Property 3 of Theorem 5.1 for row ``i`` given row ``i - 1``, over every DP law on the
    values ``(0, i]`` (the tokens below ``i``, each cut in halves): a switch index ``c`` with
    minimal prefix sums up to ``c`` and maximal suffix sums from ``c``, checked at the original
    token boundaries up to ``i - 1`` (inside ``(i - 1, i]`` row ``i - 1`` has no mass, so every
    placement of row ``i``'s top mass there is equally far from it; later rows' breakpoints
    that fall there are not constraints of row ``i``)."""
    e = float(np.exp(eps))
    k = 1 + int(np.searchsorted(bp, i, side="right"))  # "not reported" and tokens up to i
    assert abs(P[i, k:]).sum() == 0 and abs(P[i - 1, k:]).sum() == 0
    prev, row = _split(P[i - 1, :k]), _split(P[i, :k])
    pi_i = 1 - row[0]
    n = prev.shape[0]
    at_min, at_max = [], []
    for jp in range(2, n, 2):  # original boundaries: after split tokens 2, 4, ...
        if i - 1 < bp[jp // 2 - 1] < i:
            continue
        pre = np.zeros(n)
        pre[1 : jp + 1] = 1
        suf = np.zeros(n)
        suf[jp + 1 :] = -1
        lo = _lp_extreme(prev, pi_i, e, delta, pre)
        hi = -_lp_extreme(prev, pi_i, e, delta, suf)
        at_min.append(abs(row[1 : jp + 1].sum() - lo) < 1e-7)
        at_max.append(abs(row[jp + 1 :].sum() - hi) < 1e-7)
    k = len(at_min)
    return any(all(at_min[:c]) and all(at_max[c - 1 :] if c else at_max) for c in range(k + 1))


@pytest.mark.parametrize(("kind", "eps", "delta"), [("one", 0.5, 0.02), ("ppswor:0.1", 0.5, 0.02)])
def test_maximum_separation_theorem_5_1(kind: str, eps: float, delta: float) -> None:
    m = 6
    q = inclusion_vector(kind, m)
    A = max_separation_pdfs(q, eps, delta)
    P, bp = A.matrix.astype(float), A.breakpoints.astype(float)
    for i in (2, 4, m):
        assert _separation_holds(P, bp, i, eps, delta), i
    # power: moving a little of row m's top mass down to its lowest token is detected
    bad = P.copy()
    top = 1 + int(np.searchsorted(bp, m, side="left"))
    low = 1 + int(np.nonzero(bad[m, 1:] > 1e-6)[0][0])
    bad[m, top] -= 1e-3
    bad[m, low] += 1e-3
    assert not _separation_holds(bad, bp, m, eps, delta)


def _concordance(P: np.ndarray[Any, Any], i1: int, i2: int) -> float:
    """Pr[token of i2 > token of i1] + 1/2 Pr[equal], by enumerating token pairs."""
    total = 0.0
    for j1, j2 in itertools.product(range(P.shape[1]), repeat=2):
        w = P[i1, j1] * P[i2, j2]
        total += w * (1.0 if j2 > j1 else 0.5 if j1 == j2 else 0.0)
    return total


@pytest.mark.parametrize(("kind", "eps", "delta"), [("ppswor:0.1", 0.5, 0.02), ("one", 0.5, 0.02)])
def test_corollary_6_1_concordance_at_least_algorithm_4(
    kind: str, eps: float, delta: float
) -> None:
    """Algorithm 5 maximises the probability that two keys are concordant (Corollary 6.1): at
    least Algorithm 4's for every pair, and strictly more somewhere, also with q = 1 (Algorithm
    4's integer tokens tie where Algorithm 5's finer values order the pair, and a tie counts
    only 1/2)."""
    m = 10
    q = inclusion_vector(kind, m)
    P5 = max_separation_pdfs(q, eps, delta).matrix.astype(float)
    P4 = np.asarray(integer_token_matrix(q, eps, delta), dtype=float)
    gain = 0.0
    for i1, i2 in itertools.combinations(range(1, m + 1), 2):
        c5, c4 = _concordance(P5, i1, i2), _concordance(P4, i1, i2)
        assert c5 >= c4 - 1e-12, (i1, i2, c5, c4)
        gain = max(gain, c5 - c4)
    assert gain > 1e-4


@pytest.mark.parametrize(("kind", "eps", "delta"), [CASES[0][:3], CASES[4][:3]])
def test_printed_b_condition_breaks_dp(kind: str, eps: float, delta: float) -> None:
    """The module notes' correction, checked: with ``b_i`` placed by ``c_0 + F(b) = delta`` as
    printed, some row's divergence against the previous one exceeds delta (by about
    ``(e^eps - 1) c_0``); with ``e^eps c_0 + F(b) = delta`` every pair meets delta."""
    m = 12
    q = inclusion_vector(kind, m)
    with mpmath.workprec(PREC):
        e, d = mpmath.exp(eps), mpmath.mpf(delta)
        worst = {}
        for printed in (False, True):
            P = max_separation_pdfs(q, eps, delta, precision=PREC, printed_rule=printed).matrix
            worst[printed] = max(
                max(hockey(list(P[i - 1]), list(P[i]), e), hockey(list(P[i]), list(P[i - 1]), e))
                for i in range(1, m + 1)
            )
        assert worst[False] <= d + TINY
        assert worst[True] > d * (1 + 1e-6)
