"""The certified PLD composition: upper bounds exact compositions, agrees with dp_accounting."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import pytest

from privhist.accounting.certified import CertifiedAccount, CertifiedPLD
from privhist.accounting.pairs import dominating_pair
from privhist.core.errors import ValidationError

STEP = Fraction(1, 2**12)


def dp_float_error(k: int, points: int) -> float:
    """Allowance for dp_accounting's own float64 arithmetic: it self-composes by raising a
    float64 FFT to the ``k``-th power, so its absolute error on a probability vector is of the
    order ``k log2(points) u`` (taken four times over)."""
    return 4 * k * max(math.log2(points), 1.0) * 2.0**-53


def _exp_bounds(eps: float) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= e^eps <= hi`` (60-digit interval arithmetic)."""
    with mpmath.workdps(60):
        x = mpmath.iv.exp(mpmath.iv.mpf(Fraction(eps).numerator) / Fraction(eps).denominator)
        lo = Fraction(*mpmath.libmp.to_rational(x._mpi_[0]))
        hi = Fraction(*mpmath.libmp.to_rational(x._mpi_[1]))
    return lo, hi


def _binomial_hockey(k: int, a: Fraction, ratio: Fraction, r: Fraction) -> Fraction:
    """Exact ``H_r`` of ``k``-fold products of ``(a, 1-a)`` vs ``(1-a, a)`` (randomized
    response), where the per-coordinate likelihood ratio is ``ratio = a / (1 - a)``: the product
    only depends on ``j``, the number of coordinates at the likely outcome."""
    total = Fraction(0)
    for j in range(k + 1):
        p = math.comb(k, j) * a**j * (1 - a) ** (k - j)
        q = math.comb(k, j) * (1 - a) ** j * a ** (k - j)
        total += max(Fraction(0), p - r * q)
    return total


@pytest.mark.parametrize(("a", "k"), [(Fraction(3, 4), 6), (Fraction(11, 20), 25)])
def test_upper_bounds_exact_randomized_response_composition(a: Fraction, k: int) -> None:
    acc = CertifiedAccount.from_pair({0: a, 1: 1 - a}, {0: 1 - a, 1: a}, STEP).self_compose(k)
    eps0 = math.log(a / (1 - a))
    gaps = []
    for eps in (0.0, 0.3 * k * eps0, 0.5 * k * eps0, 0.8 * k * eps0):
        _, hi = _exp_bounds(eps)
        exact = _binomial_hockey(k, a, a / (1 - a), hi)  # <= the exact delta at eps
        cert = acc.delta_fraction(eps)
        assert cert >= exact
        # power: the pessimistic grid moves each loss up by < STEP, so the bound is at most the
        # exact H_r at r = e^(eps - k STEP) (below 1 when eps < k STEP)
        lo, _ = _exp_bounds(eps - k * float(STEP))
        assert cert <= _binomial_hockey(k, a, a / (1 - a), lo) + Fraction(1, 10**15)
        gaps.append(float(cert - exact))
    assert max(gaps) > 0  # the discretisation shows: the check above is not vacuous


def _discrete_laplace_pair(t: Fraction, window: int) -> tuple[dict[Any, Fraction], ...]:
    """Discrete Laplace ``P(x) ~ t^|x|`` and its shift by one, exactly, with both tails
    beyond ``window`` collapsed into one atom each (the ratio is constant on each tail)."""
    c = (1 - t) / (1 + t)
    p: dict[Any, Fraction] = {x: c * t ** abs(x) for x in range(-window, window + 1)}
    q: dict[Any, Fraction] = {x: c * t ** abs(x - 1) for x in range(-window, window + 1)}
    tail = c * t ** (window + 1) / (1 - t)
    p["left"], q["left"] = tail, tail * t  # x < -window: Q/P = t
    p["right"], q["right"] = tail, tail / t  # x > window: Q/P = 1/t
    assert sum(p.values()) == 1 and sum(q.values()) == 1
    return p, q


def test_upper_bounds_exact_discrete_laplace_composition() -> None:
    # k-fold discrete Laplace (sensitivity 1, t = e^-eps0) has loss +-eps0 per coordinate with
    # Pr[+eps0] = 1 / (1 + t): the exact delta is a binomial sum, computed independently
    t = Fraction(1, 2)
    k = 8
    p, q = _discrete_laplace_pair(t, 40)
    acc = CertifiedAccount.from_pair(p, q, STEP).self_compose(k)
    a = 1 / (1 + t)
    for eps in (0.5, 2.0, 4.0):
        _, hi = _exp_bounds(eps)
        exact = _binomial_hockey(k, a, 1 / t, hi)
        assert acc.delta_fraction(eps) >= exact
        assert acc.delta_fraction(eps) <= exact + Fraction(1, 100)


def _dp_pld(p: dict[Any, float], q: dict[Any, float], k: int) -> Any:
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_two_probability_mass_functions(
        {x: math.log(v) for x, v in q.items() if v > 0},
        {x: math.log(v) for x, v in p.items() if v > 0},
        pessimistic_estimate=True,
        value_discretization_interval=float(STEP),
        symmetric=False,
    )
    return one.self_compose(k, tail_mass_truncation=0) if k > 1 else one


def _pairs() -> list[tuple[str, dict[Any, float], dict[Any, float], int]]:
    envelope = dominating_pair(
        Fraction(1, 10), [(0.2, 0.05), (0.5, 0.01), (1.0, 1e-3), (2.0, 1e-4), (3.0, 1e-7)]
    )
    rr = ({0: 0.7, 1: 0.3}, {0: 0.3, 1: 0.7})
    # a binomial pair: Bin(n, 0.6) against Bin(n - 1, 0.6) + Bernoulli(0.4) (cPBM-like)
    n = 12
    b1 = {j: math.comb(n, j) * 0.6**j * 0.4 ** (n - j) for j in range(n + 1)}
    b0 = {
        j: sum(
            math.comb(n - 1, i) * 0.6**i * 0.4 ** (n - 1 - i) * (0.4 if j - i == 1 else 0.6)
            for i in (j, j - 1)
            if 0 <= i <= n - 1
        )
        for j in range(n + 1)
    }
    return [
        ("envelope", envelope[0], envelope[1], 6),
        ("randomized response", rr[0], rr[1], 10),
        ("binomial", b1, b0, 40),
    ]


@pytest.mark.parametrize(("name", "p", "q", "k"), _pairs())
def test_never_below_dp_accounting_pessimistic_by_more_than_stated_error(
    name: str, p: dict[Any, float], q: dict[Any, float], k: int
) -> None:
    acc = CertifiedAccount.from_pair(p, q, STEP).self_compose(k)
    ref = _dp_pld(p, q, k)
    rel, absolute = acc.error
    assert rel < 1e-9 and absolute < 1e-300
    for eps in (0.0, 0.1, 0.5, 1.0, 2.0, 4.0):
        cert = acc.delta_for_epsilon(eps)
        dp = float(ref.get_delta_for_epsilon(eps))
        # same pessimistic discretisation: dp_accounting's float value is an estimate of the
        # same number that the certified value bounds from above
        slack = dp_float_error(k, acc.remove.masses.size + acc.add.masses.size)
        assert cert >= dp - (rel * cert + absolute) - slack, (name, eps, cert, dp)
        assert cert <= dp * (1 + 1e-9) + slack, (name, eps, cert, dp)  # and not looser
    for delta in (1e-3, 1e-6):
        e_cert = acc.epsilon_for_delta(delta)
        assert acc.delta_for_epsilon(e_cert) <= delta
        e_dp = float(ref.get_epsilon_for_delta(delta))
        assert e_dp - 1e-6 <= e_cert <= e_dp + float(STEP)


def test_finite_mass_infinite_loss_and_composition_of_different_pairs() -> None:
    # P has an atom Q lacks: that mass is an infinite loss and always counts in delta
    a = CertifiedPLD.from_pmfs({0: 0.5, 1: 0.5}, {0: 1.0}, STEP)
    assert a.infinity == Fraction(1, 2)
    assert a.delta(50.0) >= Fraction(1, 2)
    b = CertifiedPLD.from_pmfs({0: 0.75, 1: 0.25}, {0: 0.25, 1: 0.75}, STEP)
    ab = a.compose(b)
    # exact: Pr[some infinite loss] = 1/2, and the rest at the delta of b at eps - ln 2
    assert ab.delta(100.0) >= Fraction(1, 2)
    assert ab.delta(100.0) < Fraction(1, 2) + Fraction(1, 10**12)


def test_truncation_only_moves_mass_upwards() -> None:
    pmf = {j: 2.0**-j for j in range(1, 60)}
    pmf[60] = 2.0**-59
    flat = {j: 1 / 60 for j in range(1, 61)}
    full = CertifiedPLD.from_pmfs(pmf, flat, STEP)
    cut = full.truncated(1e-6)
    assert cut.masses.size < full.masses.size
    for eps in (0.0, 1.0, 3.0, 10.0, 30.0):
        assert cut.delta(eps) >= full.delta(eps)
        assert cut.delta(eps) <= full.delta(eps) + Fraction(1, 10**6)


def test_bad_input_names_the_parameter() -> None:
    with pytest.raises(ValidationError, match="'step'"):
        CertifiedPLD.from_pmfs({0: 1.0}, {0: 1.0}, 0)
    with pytest.raises(ValidationError, match="'upper'"):
        CertifiedPLD.from_pmfs({0: -1.0}, {0: 1.0}, STEP)
    acc = CertifiedAccount.from_pair({0: 1.0}, {0: 1.0}, STEP)
    with pytest.raises(ValidationError, match="'epsilon'"):
        acc.delta_for_epsilon(-1.0)
    with pytest.raises(ValidationError, match="'times'"):
        acc.self_compose(0)
    assert acc.epsilon_for_delta(1e-9) == 0.0  # identical distributions: (0, 0)


def _exact_discretised_delta(p: dict[Any, float], q: dict[Any, float], k: int, eps: float) -> Any:
    """The delta of the k-fold pessimistically discretised loss law, computed independently:
    losses in 50-digit arithmetic, convolution in exact rationals, the final sum in 50 digits."""
    with mpmath.workdps(50):
        law: dict[int, Fraction] = {}
        inf = Fraction(0)
        for x, v in p.items():
            if v == 0:
                continue
            if q.get(x, 0) == 0:
                inf += Fraction(v)
                continue
            i = int(mpmath.ceil((mpmath.log(Fraction(v)) - mpmath.log(Fraction(q[x]))) / STEP))
            law[i] = law.get(i, Fraction(0)) + Fraction(v)
        total, total_inf = {0: Fraction(1)}, Fraction(0)
        finite = sum(law.values(), Fraction(0))
        for _ in range(k):
            nxt: dict[int, Fraction] = {}
            for i, a in total.items():
                for j, b in law.items():
                    nxt[i + j] = nxt.get(i + j, Fraction(0)) + a * b
            total_inf = total_inf * (finite + inf) + sum(total.values(), Fraction(0)) * inf
            total = nxt
        h = mpmath.mpf(STEP.numerator) / STEP.denominator
        out = mpmath.mpf(total_inf.numerator) / total_inf.denominator
        for i, m in total.items():
            if i * STEP > Fraction(eps):
                out += mpmath.mpf(m.numerator) / m.denominator * (1 - mpmath.exp(eps - i * h))
        return out


def test_stated_error_against_exact_rational_convolution() -> None:
    _, b1, b0, _ = _pairs()[2]
    k = 3
    pld = CertifiedPLD.from_pmfs(b1, b0, STEP).self_compose(k)
    rel, absolute = pld.error
    for eps in (0.0, 0.5, 1.0, 1.5):
        exact = _exact_discretised_delta(b1, b0, k, eps)
        cert = pld.delta(eps)
        with mpmath.workdps(50):
            c = mpmath.mpf(cert.numerator) / cert.denominator
            assert c >= exact * (1 - mpmath.mpf(10) ** -40)
            assert c <= exact * (1 + rel) + absolute + mpmath.mpf(10) ** -40
