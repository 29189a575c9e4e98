"""The exact privacy profile of sample-and-threshold and its calibrations.

Checked against independent computations: the hockey-stick divergence of the exact per-key
output distributions (rational arithmetic, :mod:`privhist.accounting.profile`), brute-force
searches over much larger count ranges, and hand computations of the paper's rules.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from privhist import ValidationError
from privhist.accounting.profile import NOT_RELEASED, check_dp, hockey_stick
from privhist.core.budget import Budget
from privhist.mechanisms.sampling import SampleAndThreshold
from privhist.mechanisms.sampling import profile as prof

F = Fraction


def _dist(p: Fraction, tau: int, c: int) -> dict[object, Fraction]:
    """Output distribution of one key held by ``c`` units, written out independently."""
    out: dict[object, Fraction] = {}
    kept = Fraction(0)
    for k in range(tau, c + 1):
        v = math.comb(c, k) * p**k * (1 - p) ** (c - k)
        out[k] = v
        kept += v
    out[NOT_RELEASED] = 1 - kept
    return out


def _brute_sup(p: Fraction, tau: int, eps: float, top: int) -> tuple[float, float, int]:
    """(max H(P_c || P_{c-1}), max H(P_{c-1} || P_c), argmax) over c = 1..top, exactly."""
    best_add, best_remove, at = 0.0, 0.0, 0
    prev = _dist(p, tau, 0)
    for c in range(1, top + 1):
        cur = _dist(p, tau, c)
        add = float(hockey_stick(cur, prev, eps))
        remove = float(hockey_stick(prev, cur, eps))
        if add > best_add:
            best_add, at = add, c
        best_remove = max(best_remove, remove)
        prev = cur
    return best_add, best_remove, at


@pytest.mark.parametrize(
    ("p", "eps", "tau"),
    [(F(1, 4), 1.0, 4), (F(1, 10), 0.5, 3), (F(3, 50), 0.25, 2), (F(1, 2), 2.0, 6)],
)
def test_certified_profile_equals_the_brute_force_supremum(p: F, eps: float, tau: int) -> None:
    # exact hockey-stick divergences up to ~6x the certified search range
    cert = prof.certified_delta(p, tau, F(eps))
    top = 6 * cert.limit
    add, remove, at = _brute_sup(p, tau, eps, top)
    # Lemma A: removing a unit costs no delta at all
    assert remove == 0.0
    # the certified bound is an upper bound, and tight: the restricted search found the sup
    assert cert.upper >= add
    assert cert.upper == pytest.approx(add, rel=1e-12)
    assert cert.at_count == at
    assert cert.tail < cert.value / 8  # the tail bound beyond the range does not matter here
    # and the maximum sits just below tau / q, far below tau / p
    q = 1 - (1 - float(p)) * math.exp(-eps)
    assert at <= tau / q + 1 < tau / float(p)


@pytest.mark.parametrize(
    ("eps", "alpha", "tau"),
    [(0.1, 1 / 6, 11), (0.5, 1 / 6, 11), (1.0, 1 / 6, 11), (1.0, 1.0, 84), (0.1, 0.02, 5)],
)
def test_search_range_holds_the_supremum(eps: float, alpha: float, tau: int) -> None:
    """The float profile over 30 tau/p counts has the same maximum as the restricted search."""
    p = float(prof.alpha_rate(F(alpha), F(eps)))
    limit = prof.search_limit(p, tau, eps)
    wide = prof.profile_float(p, tau, eps, np.arange(tau, math.ceil(30 * tau / p)))
    assert limit < 30 * tau / p
    restricted, at = prof.delta_float(p, tau, eps)
    assert restricted == pytest.approx(float(wide.max()), rel=1e-12)
    assert at == tau + int(np.argmax(wide))
    # the certificate agrees with the float search
    cert = prof.certified_delta(prof.alpha_rate(F(alpha), F(eps)), tau, F(eps))
    assert cert.upper == pytest.approx(restricted, rel=1e-9)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0])
def test_profile_is_non_increasing_in_tau(eps: float) -> None:
    p = float(prof.alpha_rate(F(1, 6), F(eps)))
    deltas = [prof.delta_float(p, t, eps)[0] for t in range(1, 25)]
    assert all(b <= a for a, b in itertools.pairwise(deltas))
    assert deltas[0] == pytest.approx(p, rel=1e-9)  # tau = 1: delta = Pr[one unit sampled]


@pytest.mark.parametrize(
    ("p", "eps", "delta"), [(F(1, 4), 1.0, 1e-3), (F(1, 10), 0.5, 1e-4), (F(1, 20), 0.3, 1e-5)]
)
def test_exact_threshold_is_tight_in_both_directions(p: F, eps: float, delta: float) -> None:
    """At tau the exact check passes; at tau - 1 it fails (rational hockey-stick divergences)."""
    tau, cert = prof.exact_threshold(p, F(eps), F(delta))
    assert cert.value <= F(delta)
    top = 4 * cert.limit

    def worst(t: int) -> float:
        w = 0.0
        prev = _dist(p, t, 0)
        for c in range(1, top + 1):
            cur = _dist(p, t, c)
            res = check_dp(cur, prev, eps, delta)
            w = max(w, float(res.worst))
            prev = cur
        return w

    assert worst(tau) <= delta
    assert worst(tau - 1) > delta


def test_certificate_bounds_the_rational_divergence_near_a_kink() -> None:
    # with p = 1/4 some released outputs have likelihood ratio 3c / (4 (c - k)) = 2 exactly
    # (c = 8, k = 5), so just above eps = ln 2 they sit on the boundary of the loss region; the
    # certificate (computed with a rational L <= e^eps) must still bound the exact divergence
    eps = math.log(2) + 1e-12
    p, tau = F(1, 4), 3
    cert = prof.certified_delta(p, tau, F(eps))
    exact = max(
        float(hockey_stick(_dist(p, tau, c), _dist(p, tau, c - 1), eps)) for c in range(1, 200)
    )
    assert cert.upper >= exact


def test_theorem1_and_c_alpha_rules_by_hand() -> None:
    # C_alpha = ln(1/alpha) - 1/(1 + alpha); alpha = 1/6: ln 6 - 6/7 (the paper's 0.935)
    assert prof.c_alpha(1 / 6) == pytest.approx(1.791759469228055 - 6 / 7, rel=1e-15)
    # the paper's example: delta = 1e-8, alpha = 1/6 -> tau = ceil(18.4207 / 0.93462) = 20
    assert prof.c_alpha_threshold(1 / 6, 1e-8) == 20
    assert prof.c_alpha_threshold(0.6, 1e-8) is None  # C_alpha < 0 above alpha ~ 0.52
    # Theorem 1 at p = 0.1, eps = 1: q = 1 - 0.9/e = 0.66891, and since (1-q)/(1-p) = e^-eps,
    # D(q || p) = q ln(q/p) - eps (1 - q) = 0.94015 (the paper's derivation after Theorem 1);
    # tau >= q ln(1e8) / D = 13.106, so tau = 14
    with mpmath.workdps(50):
        q = 1 - mpmath.mpf("0.9") / mpmath.e
        d = q * mpmath.log(q / mpmath.mpf("0.1")) - (1 - q)
        x = q * mpmath.log(mpmath.mpf(10) ** 8) / d
    assert float(q) == pytest.approx(0.6689085029, rel=1e-9)
    assert float(d) == pytest.approx(0.9401537934, rel=1e-9)
    assert float(x) == pytest.approx(13.1061004, rel=1e-7)
    assert prof.chernoff_threshold(0.1, 1.0, 1e-8) == math.ceil(float(x)) == 14
    assert prof.chernoff_delta(0.1, 1.0, 14) <= 1e-8 < prof.chernoff_delta(0.1, 1.0, 13)


THRESHOLDS = {0.1: (11, 17, 20), 0.5: (11, 15, 20), 1.0: (11, 14, 20)}


@pytest.mark.parametrize("eps", sorted(THRESHOLDS))
def test_exact_threshold_versus_theorem1_recorded_values(eps: float) -> None:
    """delta = 1e-8, alpha = 1/6 (the paper's defaults): exact, Theorem 1, C_alpha."""
    e = F(eps)
    p = prof.alpha_rate(F(1, 6), e)
    exact, _ = prof.exact_threshold(p, e, F(1e-8))
    one = prof.chernoff_threshold(float(p), eps, 1e-8)
    alpha_rule = prof.c_alpha_threshold(1 / 6, 1e-8)
    print(f"eps={eps}: p={float(p):.6f} exact={exact} theorem1={one} C_alpha={alpha_rule}")
    assert (exact, one, alpha_rule) == THRESHOLDS[eps]


@pytest.mark.parametrize("eps", [0.05, 0.1, 0.3, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("delta", [1e-4, 1e-8, 1e-12])
@pytest.mark.parametrize("alpha", [0.05, 1 / 6, 0.4])
def test_exact_never_above_theorem1_never_above_c_alpha(
    eps: float, delta: float, alpha: float
) -> None:
    p = prof.alpha_rate(F(alpha), F(eps))
    exact = prof.float_threshold(float(p), eps, delta)
    one = prof.chernoff_threshold(float(p), eps, delta)
    alpha_rule = prof.c_alpha_threshold(alpha, delta)
    assert exact <= one
    assert alpha_rule is not None and one <= alpha_rule
    # Theorem 1's threshold really meets delta under the exact profile
    assert prof.delta_float(float(p), one, eps)[0] <= delta


def test_largest_rate_for_a_threshold() -> None:
    eps, delta, tau = F(1), F(1, 10**6), 8
    p, cert = prof.largest_rate(tau, eps, delta)
    assert cert.value <= delta
    bigger = p * F(1001, 1000)
    assert prof.certified_delta(bigger, tau, eps).value > delta
    # tau = 1: delta_c is the chance the single unit is sampled, so the rate is delta itself
    p1, _ = prof.largest_rate(1, eps, delta)
    assert p1 <= delta < p1 + F(1, 2**prof.RATE_BITS) + F(1, 10**12)


def test_sampling_rate_bound_and_its_reason() -> None:
    eps = F(1)
    bound = prof.rate_bound(eps)
    with mpmath.workdps(100):
        b = mpmath.mpf(bound.numerator) / bound.denominator
        assert b < 1 - mpmath.exp(-1) < b + mpmath.mpf(2) ** -150
    assert prof.check_sampling_rate(bound, eps, "f") == bound
    assert prof.check_sampling_rate(0.25, eps, "f") == F(1, 4)
    assert prof.check_sampling_rate("1/10", eps, "f") == F(1, 10)
    for bad in (0, -0.1, 0.64, 1, math.nan, "x", True):
        with pytest.raises(ValidationError, match=r"sampling_rate.*1/\(1 - sampling_rate\)"):
            prof.check_sampling_rate(bad, eps, "f")
    # just above the bound: refused
    with pytest.raises(ValidationError, match="sampling_rate"):
        prof.check_sampling_rate(bound + F(1, 2**100), eps, "f")


def test_alpha_rate_rounds_down() -> None:
    for eps in (0.1, 1.0, 3.0):
        p = prof.alpha_rate(F(1, 6), F(eps))
        with mpmath.workdps(100):
            real = (1 - mpmath.exp(-mpmath.mpf(eps))) / 6
            pm = mpmath.mpf(p.numerator) / p.denominator
            assert pm <= real < pm + mpmath.mpf(2) ** -prof.RATE_BITS
        assert p.denominator <= 2**prof.RATE_BITS
    with pytest.raises(ValidationError, match="alpha"):
        prof.alpha_rate(F(0), F(1))
    with pytest.raises(ValidationError, match="alpha"):
        prof.alpha_rate(F(3, 2), F(1))


def test_mechanism_per_key_budget_and_exact_check_at_it() -> None:
    """The mechanism's own distributions pass the exact check at its per-key budget for a
    user-level instance with k = 3 keys, and fail it one threshold lower."""
    from privhist import Neighbouring

    m = SampleAndThreshold(1.5, 3e-4, Neighbouring.user(3, 1))
    kb = m.key_budget()
    assert kb.epsilon == pytest.approx(0.5) and kb.delta == pytest.approx(1e-4)
    assert m.sampling_rate <= prof.rate_bound(F(1, 2))
    worst = 0.0
    for c in range(1, 6 * m.certificate.limit):
        p, q = m.key_distribution(c, c), m.key_distribution(c - 1, c - 1)
        for a, b in ((p, q), (q, p)):
            res = check_dp(a.probabilities, b.probabilities, kb.epsilon, kb.delta)
            assert res.holds
            worst = max(worst, float(res.worst))
    assert worst == pytest.approx(m.certificate.upper, rel=1e-12)


@pytest.mark.parametrize("eps", [F(40), F(160)])
def test_certified_tail_at_a_large_epsilon(eps: F) -> None:
    # q_L is within 2**-192 of 1 here: the tail bound (Lemma C) was computed from 1 - q_L as an
    # interval that reached below 0, and the log of it raised; now it is the Chernoff bound,
    # checked against the same bound in 800-bit arithmetic
    p, tau = F(1, 10), 5
    cert = prof.certified_delta(p, tau, eps)
    one_minus_q = (1 - p) / prof.exp_lower(eps)
    with mpmath.workprec(800):
        q, c = mpmath.mpf(1 - one_minus_q), mpmath.mpf(one_minus_q)
        kl = q * mpmath.log(q / mpmath.mpf(p)) + c * mpmath.log(c / mpmath.mpf(1 - p))
        tail = mpmath.exp(-(cert.limit + 1) * kl)
        assert cert.tail >= F(str(tail)) * (1 - F(1, 10**9))
        assert cert.tail <= F(str(tail)) * (1 + F(1, 10**9))
    assert cert.value >= cert.tail


def test_a_large_epsilon_has_a_guarantee() -> None:
    # the release's privacy event takes the profile at up to 32 times epsilon: from epsilon
    # about 4.2 on, that raised instead of stating the guarantee
    g = SampleAndThreshold(8.0, 1e-6).guarantee()
    assert (g.epsilon, g.delta) == (8.0, 1e-6)


@pytest.mark.parametrize("epsilon", [22.0, 30.0, 100.0])
def test_an_epsilon_whose_grid_overflows_has_a_guarantee(epsilon: float) -> None:
    # above epsilon about 22 the grid's largest points (32 times epsilon) overflow e^eps; they
    # are left out of the pair (a looser envelope of valid points), so the release states its
    # guarantee instead of raising OverflowError
    from privhist.mechanisms.sampling.pair import MAX_PROFILE_EPSILON, profile_points

    m = SampleAndThreshold(epsilon, 1e-6)
    assert m.guarantee() == Budget(epsilon, 1e-6)
    points = profile_points(m.sampling_rate, m.threshold, epsilon)
    assert points and max(e for e, _ in points) <= MAX_PROFILE_EPSILON
    assert any(e == epsilon for e, _ in points)


def test_the_pair_profile_keeps_its_points_up_to_the_cut() -> None:
    """The grid ``epsilon * 2^(j/4)``, ``j = -12 .. 20``, stops above MAX_PROFILE_EPSILON (500,
    where ``e^eps`` is still a finite float): a point exactly at 500 is kept, one at 500.5
    is not."""
    from privhist.mechanisms.sampling.pair import MAX_PROFILE_EPSILON, profile_points

    assert MAX_PROFILE_EPSILON == 500.0 and math.isfinite(math.exp(MAX_PROFILE_EPSILON))
    kept = profile_points(F(1, 10), 5, 125.0)  # j = 8: 125 * 4 = 500
    assert [e for e, _ in kept] == [125.0 * 2.0 ** (j / 4) for j in range(-12, 9)]
    assert kept[-1][0] == 500.0
    cut = profile_points(F(1, 10), 5, 125.125)  # j = 8 would be 500.5
    assert [e for e, _ in cut] == [125.125 * 2.0 ** (j / 4) for j in range(-12, 8)]


def test_the_pair_profile_estimate_is_one_percent_above_the_certified_one() -> None:
    """The profile of calibration searches (``certified=False``) is the float64 one times 1.01:
    at every point 1% above the certified delta, so a candidate the estimate accepts seldom
    fails the certified check."""
    from privhist.mechanisms.sampling.pair import profile_points

    m = SampleAndThreshold(1.0, 1e-6)
    exact = profile_points(m.sampling_rate, m.threshold, 1.0)
    estimate = profile_points(m.sampling_rate, m.threshold, 1.0, certified=False)
    assert [e for e, _ in estimate] == [e for e, _ in exact] and len(exact) == 33
    for (_, d), (_, d_est) in zip(exact, estimate, strict=True):
        assert d_est == pytest.approx(1.01 * d, rel=1e-9)
