"""Exact privacy profiles: closed forms, rounding direction, tails and validation."""

from __future__ import annotations

import itertools
import math
import pickle
from fractions import Fraction as F

import mpmath
import pytest

from privhist.accounting.profile import (
    NOT_RELEASED,
    LogRational,
    check_dp,
    delta_for_epsilon,
    epsilon_for_delta,
    hockey_stick,
    privacy_profile,
    product_distribution,
)
from privhist.core.errors import ValidationError

# randomized response on one bit with P(truth) = 3/4: epsilon = ln 3 exactly
RR_P = {"yes": F(3, 4), "no": F(1, 4)}
RR_Q = {"yes": F(1, 4), "no": F(3, 4)}


def rr_delta(eps: float) -> float:
    """Hand-computed profile of RR_P/RR_Q: max(0, 3/4 - e^eps/4) + max(0, 1/4 - 3 e^eps/4)."""
    e = math.exp(eps)
    return max(0.0, 0.75 - e / 4) + max(0.0, 0.25 - 3 * e / 4)


def discrete_laplace(centre: int, base: F, lo: int, hi: int) -> tuple[dict[int, F], F]:
    """Two-sided geometric pmf (1 - b)/(1 + b) b^|k - c| on [lo, hi], and the mass outside."""
    norm = (1 - base) / (1 + base)
    pmf = {k: norm * base ** abs(k - centre) for k in range(lo, hi + 1)}
    return pmf, 1 - sum(pmf.values())


# -- closed forms ----------------------------------------------------------------------------


def test_randomized_response_profile_matches_hand_formula() -> None:
    for eps in [0.0, 0.1, 0.5, 1.0, 1.09]:
        got = delta_for_epsilon(RR_P, RR_Q, eps)
        assert float(got) == pytest.approx(rr_delta(eps), rel=1e-12, abs=1e-300)
    # at eps = 0 the divergence is the total variation distance
    assert delta_for_epsilon(RR_P, RR_Q, 0) == mpmath.mpf(0.5)


def test_randomized_response_is_exactly_ln3_dp() -> None:
    check = check_dp(RR_P, RR_Q, LogRational(3), 0)
    assert check.holds and bool(check)
    assert check.delta_pq == 0 and check.delta_qp == 0
    # just below ln 3 it is not pure DP, with delta ~ (3 - e^eps)/4
    below = check_dp(RR_P, RR_Q, math.log(3) - 1e-9, 0)
    assert not below.holds
    assert float(below.worst) == pytest.approx(1e-9 * 3 / 4, rel=1e-6)
    # a hair above ln 3 (as a float) it is exactly 0
    assert delta_for_epsilon(RR_P, RR_Q, math.log(3) + 1e-12) == 0


def test_epsilon_for_delta_randomized_response() -> None:
    eps = epsilon_for_delta(RR_P, RR_Q, 0, tolerance=1e-12)
    assert math.log(3) <= eps <= math.log(3) + 1e-11
    # delta(eps) = (3 - e^eps) / 4 = 0.1  =>  eps = ln(2.6)
    eps = epsilon_for_delta(RR_P, RR_Q, 0.1, tolerance=1e-12)
    assert math.log(2.6) - 1e-15 <= eps <= math.log(2.6) + 1e-11
    assert delta_for_epsilon(RR_P, RR_Q, eps) <= 0.1
    assert epsilon_for_delta(RR_P, RR_Q, 0.5) == 0.0  # delta(0) = TV = 1/2


def test_one_sided_output_hand_example() -> None:
    # P = {a: 1/2, b: 1/2}, Q = {a: 1}:
    #   H(P||Q) = max(0, 1/2 - e^eps) + 1/2 = 1/2 for every eps >= 0 (b is impossible under Q);
    #   H(Q||P) = max(0, 1 - e^eps / 2), which is 1/2 at eps = 0 and 0 from eps = ln 2 on.
    p, q = {"a": F(1, 2), "b": F(1, 2)}, {"a": F(1)}
    for eps in [0, 0.3, math.log(2), 2, 50]:
        assert hockey_stick(p, q, eps) == mpmath.mpf(0.5)
    assert float(hockey_stick(q, p, 0.3)) == pytest.approx(1 - math.exp(0.3) / 2, rel=1e-14)
    assert hockey_stick(q, p, LogRational(2)) == 0
    assert privacy_profile(p, q, [0, 1, 10]) == [0.5, 0.5, 0.5]
    # no finite epsilon gets delta below 1/2
    assert epsilon_for_delta(p, q, 0.49) == math.inf
    assert epsilon_for_delta(p, q, 0.5) == 0.0


def test_pure_dp_example_zero_at_eps_positive_just_below() -> None:
    # truncated-free example with likelihood ratios at most 2 (e^eps = 2)
    p = {0: F(2, 5), 1: F(2, 5), 2: F(1, 5)}
    q = {0: F(1, 5), 1: F(2, 5), 2: F(2, 5)}
    assert delta_for_epsilon(p, q, LogRational(2)) == 0
    assert delta_for_epsilon(p, q, math.log(2) * (1 + 1e-12)) == 0
    below = delta_for_epsilon(p, q, math.log(2) * (1 - 1e-6))
    assert below > 0
    # H(P||Q) just below ln 2 is 2/5 - e^eps/5, tiny but positive
    assert float(below) == pytest.approx((2 - math.exp(math.log(2) * (1 - 1e-6))) / 5, rel=1e-6)


def test_discrete_laplace_with_tails_is_an_upper_bound_close_to_exact() -> None:
    # DLap with base b = 1/2 shifted by 1: a pure (ln 2)-DP pair; the exact profile is known:
    # for eps < ln 2, delta(eps) = P[X <= 0] - e^eps P[X <= -1] with X ~ DLap centred at 0
    # (the outputs where P/Q = 2 are k <= 0).
    b = F(1, 2)
    p, tail_p = discrete_laplace(0, b, -40, 41)
    q, tail_q = discrete_laplace(1, b, -40, 41)
    norm = (1 - b) / (1 + b)
    # P[X <= 0] = norm / (1 - b), P[X <= -1] = norm * b / (1 - b)
    for eps in [0.0, 0.2, 0.5, 0.69]:
        exact = float(norm / (1 - b)) - math.exp(eps) * float(norm * b / (1 - b))
        got = delta_for_epsilon(p, q, eps, tail_p=tail_p, tail_q=tail_q)
        assert float(got) >= exact * (1 - 1e-15)
        assert float(got) - exact <= float(tail_p) + 1e-15
    # at ln 2 only the tail remains
    at = delta_for_epsilon(p, q, LogRational(2), tail_p=tail_p, tail_q=tail_q)
    assert 0 < at <= tail_p
    assert check_dp(p, q, LogRational(2), float(tail_p) * 1.01, tail_p=tail_p, tail_q=tail_q)


def test_tail_is_added_in_its_own_direction_only() -> None:
    p = {0: F(1, 2), 1: F(1, 4)}  # 1/4 unenumerated
    q = {0: F(1, 2), 1: F(1, 2)}
    # H(P||Q) at eps = 0: enumerated terms are 0, tail 1/4 added
    assert hockey_stick(p, q, 0, tail_p=F(1, 4)) == mpmath.mpf(0.25)
    # a forgotten tail is inferred as 1 - sum(P), never ignored
    assert hockey_stick(p, q, 0) == mpmath.mpf(0.25)
    # a looser tail bound is honoured
    assert hockey_stick(p, q, 0, tail_p=F(1, 2)) == mpmath.mpf(0.5)
    # tail_q does not enter H(P||Q)
    assert hockey_stick(p, q, 0, tail_p=F(1, 4), tail_q=F(1, 2)) == mpmath.mpf(0.25)


# -- structural properties ---------------------------------------------------------------------


def test_symmetry_of_the_profile() -> None:
    p = {"x": F(1, 3), "y": F(1, 2), NOT_RELEASED: F(1, 6)}
    q = {"x": F(1, 5), "y": F(1, 5), NOT_RELEASED: F(3, 5)}
    eps = [0, 0.1, 0.4, 1.0, 2.0]
    assert privacy_profile(p, q, eps) == privacy_profile(q, p, eps)
    for e in eps:
        a = check_dp(p, q, e, 0)
        b = check_dp(q, p, e, 0)
        assert (a.delta_pq, a.delta_qp) == (b.delta_qp, b.delta_pq)


def test_profile_is_non_increasing() -> None:
    p, tail_p = discrete_laplace(0, F(2, 3), -30, 32)
    q, tail_q = discrete_laplace(2, F(2, 3), -30, 32)
    grid = [i / 20 for i in range(0, 40)]
    deltas = privacy_profile(p, q, grid, tail_p=tail_p, tail_q=tail_q)
    assert all(a >= b for a, b in itertools.pairwise(deltas))
    assert deltas[0] > deltas[-1]


def test_not_released_is_an_output() -> None:
    # a key with count 1 vs 0 under a thresholded release: absent from the neighbour's output
    p = {NOT_RELEASED: F(9, 10), 1: F(1, 10)}
    q = {NOT_RELEASED: F(1)}
    # outputs impossible under Q carry their full mass: delta = 1/10 for every epsilon
    for d in privacy_profile(p, q, [0.5, 5]):
        assert F(*libmp_to_rational(d)) >= F(1, 10)
        assert d - mpmath.mpf(1) / 10 < mpmath.mpf(2) ** -250
    assert check_dp(p, q, 1.0, 0.1).holds
    assert not check_dp(p, q, 1.0, 0.0999).holds


def test_not_released_sentinel() -> None:
    assert repr(NOT_RELEASED) == "NOT_RELEASED"
    assert str(NOT_RELEASED) == "NOT_RELEASED"
    assert pickle.loads(pickle.dumps(NOT_RELEASED)) is NOT_RELEASED
    assert hash(NOT_RELEASED) == hash(NOT_RELEASED)
    assert NOT_RELEASED != "NOT_RELEASED"


def test_result_is_rounded_upwards() -> None:
    # 1/3 is not a binary fraction: the mpf returned is >= 1/3
    p, q = {"a": F(1, 3), "b": F(2, 3)}, {"b": F(1)}
    got = hockey_stick(p, q, 1)
    assert F(*libmp_to_rational(got)) >= F(1, 3)
    assert F(*libmp_to_rational(got)) - F(1, 3) < F(1, 2**250)


def libmp_to_rational(x: mpmath.mpf) -> tuple[int, int]:
    from mpmath import libmp

    return libmp.to_rational(x._mpf_)


def test_irrational_exponential_uses_a_lower_bound() -> None:
    # P(a) = e * Q(a) up to 2**-300: at eps = 1 the true divergence is ~0, and the bound computed
    # with a lower bound on e must not be below the true value (it is a tiny positive number)
    e_hi = F(*libmp_to_rational(mpmath.mpf(mpmath.e)))  # correctly rounded e, 53 bits
    qa = F(1, 4)
    p = {"a": e_hi * qa, "b": 1 - e_hi * qa}
    q = {"a": qa, "b": 1 - qa}
    got = hockey_stick(p, q, 1)
    true_value = max(0, e_hi * qa - mpmath.e * qa)  # ~ (e_hi - e) / 4
    assert got >= true_value


def test_float_and_mpf_probabilities_are_accepted() -> None:
    p = {"a": 0.75, "b": 0.25}
    q = {"a": mpmath.mpf(0.25), "b": mpmath.mpf(0.75)}
    assert float(delta_for_epsilon(p, q, 0.5)) == pytest.approx(rr_delta(0.5), rel=1e-14)


def test_product_profile_equals_marginal_profile() -> None:
    # key 1 differs (RR), key 2 is identical in both worlds
    other = {NOT_RELEASED: F(1, 3), 5: F(1, 6), 6: F(1, 2)}
    p = product_distribution(RR_P, other)
    q = product_distribution(RR_Q, other)
    assert sum(p.values()) == 1 and len(p) == 6
    grid = [0, 0.3, 0.7, 1.0, LogRational(3)]
    assert privacy_profile(p, q, grid) == privacy_profile(RR_P, RR_Q, grid)


# -- validation --------------------------------------------------------------------------------


def test_negative_probability_rejected() -> None:
    with pytest.raises(ValidationError, match=r"parameter 'p\['a'\]' of hockey_stick must be"):
        hockey_stick({"a": F(-1, 2), "b": F(1)}, RR_Q, 1)


def test_masses_above_one_rejected() -> None:
    with pytest.raises(ValidationError, match="parameter 'q' of delta_for_epsilon"):
        delta_for_epsilon(RR_P, {"a": 0.6, "b": 0.6}, 1)
    # within tolerance is fine (float rounding)
    delta_for_epsilon(RR_P, {"a": 0.5 + 1e-12, "b": 0.5}, 1)


def test_negative_epsilon_rejected() -> None:
    with pytest.raises(ValidationError, match=r"parameter 'epsilon' of privacy_profile .*got -1"):
        privacy_profile(RR_P, RR_Q, [0.5, -1])
    with pytest.raises(ValidationError, match="epsilon"):
        hockey_stick(RR_P, RR_Q, float("nan"))


def test_other_bad_inputs_rejected() -> None:
    with pytest.raises(ValidationError, match="mapping"):
        hockey_stick([0.5, 0.5], RR_Q, 1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="tail_p"):
        hockey_stick(RR_P, RR_Q, 1, tail_p=-0.1)
    with pytest.raises(ValidationError, match="'p\\['a'\\]'"):
        hockey_stick({"a": True}, RR_Q, 1)
    with pytest.raises(ValidationError, match="'p\\['a'\\]'"):
        hockey_stick({"a": float("inf")}, RR_Q, 1)
    with pytest.raises(ValidationError, match="delta"):
        check_dp(RR_P, RR_Q, 1, 1.5)
    with pytest.raises(ValidationError, match="slack"):
        check_dp(RR_P, RR_Q, 1, 0, slack=-1)
    with pytest.raises(ValidationError, match="delta"):
        epsilon_for_delta(RR_P, RR_Q, -0.1)
    with pytest.raises(ValidationError, match="base"):
        LogRational(F(1, 2))
