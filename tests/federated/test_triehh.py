"""TrieHH++: the hello/hey/hi scenario, exact DP of one level, the three compositions checked
against independent computations, alphabets and bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist.accounting.profile import NOT_RELEASED, check_dp
from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.population import Population
from privhist.federated.triehh import (
    CERTIFIED_STEP,
    TrieHH,
    _pld,
    compose_levels,
    dominating_pair,
    one_shot_heavy_hitters,
)
from privhist.mechanisms.sampling.profile import certified_delta
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold


@pytest.fixture(scope="module")
def small() -> TrieHH:
    """Large per-level delta so that tau is tiny and brute force is possible."""
    return TrieHH(
        epsilon=3.0, delta=0.2, levels=2, level_epsilon=1.0, level_delta=0.05, alphabet="abc"
    )


def test_hello_hey_hi_found_exactly() -> None:
    pop = Population.from_counts(["hello", "hey", "hi"], [40_000, 30_000, 20_000])
    hh = TrieHH(epsilon=1.0, delta=1e-8, levels=6, alphabet="abcdefghijklmnopqrstuvwxyz")
    res = hh.run(pop, SeededRandom(7))
    assert res.items.tolist() == ["hello", "hey", "hi"]
    # counts on every node: each prefix of the three words, and nothing else
    expected = {w[:i] for w in ("hello$", "hey$", "hi$") for i in range(1, len(w) + 1)}
    assert set(res.nodes) == expected
    p = float(hh.mechanism.sampling_rate)
    for word, n in (("hello", 40_000), ("hey", 30_000), ("hi", 20_000)):
        i = res.items.tolist().index(word)
        assert abs(res.estimates[i] - n) < 6 * math.sqrt(n * (1 - p) / p)
    assert res.metadata["guarantee"]["epsilon"] <= 1.0
    assert res.metadata["guarantee"]["delta"] == 1e-8


def _level_law(items: list[str], p: Fraction, tau: int) -> dict[Any, Fraction]:
    """Brute force over every subset of clients: the released (prefix, count) pairs."""
    law: dict[Any, Fraction] = {}
    n = len(items)
    for mask in itertools.product((0, 1), repeat=n):
        k = sum(mask)
        prob = p**k * (1 - p) ** (n - k)
        counts: dict[str, int] = {}
        for take, it in zip(mask, items, strict=True):
            if take:
                counts[it] = counts.get(it, 0) + 1
        out = tuple(sorted((key, c) for key, c in counts.items() if c >= tau))
        o = out if out else NOT_RELEASED
        law[o] = law.get(o, Fraction(0)) + prob
    return law


def test_one_level_exact_dp_both_directions(small: TrieHH) -> None:
    m = small.mechanism
    p, tau = m.sampling_rate, m.threshold
    assert tau <= 4
    level = small.composition.level
    base = ["ab"] * (tau + 2) + ["ac"] * tau
    for removed in ("ab", "ac"):
        smaller = list(base)
        smaller.remove(removed)
        P = _level_law(base, p, tau)
        Q = _level_law(smaller, p, tau)
        check = check_dp(P, Q, level.epsilon, level.delta)
        assert check.holds, str(check)
    # the claim is not vacuous: at a tenth of the epsilon the same pair needs more delta
    P = _level_law(["ab"] * (tau + 2), p, tau)
    Q = _level_law(["ab"] * (tau + 1), p, tau)
    assert not check_dp(P, Q, level.epsilon / 10, level.delta).holds


def test_run_level_matches_brute_force_law(small: TrieHH) -> None:
    m = small.mechanism
    items = ["ab"] * (m.threshold + 2) + ["ac"] * m.threshold
    law = _level_law([w[:1] for w in items], m.sampling_rate, m.threshold)
    one = TrieHH(
        epsilon=3.0, delta=0.2, levels=1, level_epsilon=1.0, level_delta=0.05, alphabet="abc"
    )
    pop = Population.from_items(items)
    rng = SeededRandom(4)
    outcomes = sorted(law, key=repr)
    seen = {o: 0 for o in outcomes}
    for _ in range(3000):
        res = one.run(pop, rng)
        out = tuple(sorted((k, v[1]) for k, v in res.nodes.items()))
        seen[out if out else NOT_RELEASED] += 1
    observed = np.array([seen[o] for o in outcomes], dtype=float)
    probs = np.array([float(law[o]) for o in outcomes])
    assert_fits(chi2_cells(observed, probs))
    wrong = _level_law([w[:1] for w in items], Fraction(3, 20), m.threshold)
    assert_rejects([chi2_cells(observed, np.array([float(wrong.get(o, 0)) for o in outcomes]))])


def test_basic_and_advanced_composition_by_hand() -> None:
    m = SampleAndThreshold(0.2, 1e-9)
    comp = compose_levels(m, 5, 1e-8)
    eps, d_l = 0.2, m.delta_exact
    assert comp.basic.epsilon == pytest.approx(5 * eps)
    assert comp.level.delta == d_l and 5 * d_l <= 1e-8
    dprime = 1e-8 - 5 * d_l
    adv = math.sqrt(2 * 5 * math.log(1 / dprime)) * eps + 5 * eps * math.expm1(eps)
    assert comp.advanced is not None
    assert comp.advanced.epsilon == pytest.approx(adv, rel=1e-9)
    assert comp.pld is not None and comp.pld_certified is not None
    assert comp.method == "pld_certified"  # the float estimate is reported, never used
    assert comp.guarantee.epsilon == min(
        comp.basic.epsilon, comp.advanced.epsilon, comp.pld_certified.epsilon
    )
    # the certified bound and dp_accounting's estimate (grid 1e-4) are close
    assert abs(comp.pld_certified.epsilon - comp.pld.epsilon) < 0.005


def _thresholded(c: int, p: float, tau: int) -> dict[Any, float]:
    pmf = stats.binom(c, p).pmf(np.arange(c + 1))
    out: dict[Any, float] = {k: float(pmf[k]) for k in range(tau, c + 1)}
    out[NOT_RELEASED] = float(pmf[:tau].sum())
    return out


def _hockey(P: dict[Any, float], Q: dict[Any, float], a: float) -> float:
    return sum(max(0.0, v - a * Q.get(o, 0.0)) for o, v in P.items())


def test_pld_bounds_the_exact_composition_of_every_count_sequence() -> None:
    m = SampleAndThreshold(1.0, 0.02)
    p, tau = m.sampling_rate, m.threshold
    pf = float(p)
    account = _pld(p, tau, 1.0, 2, 1e-4)
    counts = range(tau, tau + 12)
    dists = {c: (_thresholded(c, pf, tau), _thresholded(c - 1, pf, tau)) for c in counts}
    for eps in (0.3, 1.0, 1.6):
        a = math.exp(eps)
        bound = float(account.get_delta_for_epsilon(eps))
        worst = 0.0
        for c1, c2 in itertools.product(counts, repeat=2):
            (p1, q1), (p2, q2) = dists[c1], dists[c2]
            P = {(x, y): u * v for x, u in p1.items() for y, v in p2.items()}
            Q = {(x, y): u * v for x, u in q1.items() for y, v in q2.items()}
            worst = max(worst, _hockey(P, Q, a), _hockey(Q, P, a))
        assert worst <= bound + 1e-12
        assert worst > 0.2 * bound  # and the bound is not far from the truth


def test_single_level_pld_agrees_with_the_certified_profile() -> None:
    m = SampleAndThreshold(0.5, 1e-6)
    account = _pld(m.sampling_rate, m.threshold, 0.5, 1, 1e-5)
    for eps in (0.25, 0.5, 1.0):
        cert = certified_delta(m.sampling_rate, m.threshold, Fraction(eps)).upper
        pld = float(account.get_delta_for_epsilon(eps))
        assert cert <= pld <= 1.5 * cert + 1e-12


def test_dominating_pair_reproduces_its_constraints() -> None:
    p = Fraction(1, 10)
    constraints = [(0.2, 0.05), (0.5, 0.01), (1.0, 1e-3), (2.0, 1e-4)]
    P, Q = dominating_pair(p, constraints)
    assert sum(P.values()) == pytest.approx(1.0, abs=1e-12)
    assert sum(Q.values()) == pytest.approx(1.0, abs=1e-12)
    with mpmath.workdps(30):
        for eps, d in constraints:
            h = _hockey(P, Q, math.exp(eps))
            assert h <= d + 1e-12  # a constraint is never exceeded ...
        # ... and removing the client is pure ln(1/(1-p)) (Lemma A)
        assert _hockey(Q, P, 1 / 0.9) <= 1e-12
        assert _hockey(Q, P, 1 / 0.95) > 0


def test_total_budget_calibration_meets_target_and_beats_basic() -> None:
    hh = TrieHH(epsilon=1.0, delta=1e-8, levels=4)
    assert hh.composition.guarantee.epsilon <= 1.0
    assert hh.level_epsilon > 1.0 / 4  # tighter than basic composition's split
    assert hh.composition.basic.epsilon == pytest.approx(4 * hh.level_epsilon)


def test_one_shot_variant() -> None:
    pop = Population.from_counts(["hello", "hey", "hi", "rare"], [40_000, 30_000, 20_000, 2])
    r = one_shot_heavy_hitters(pop, SampleAndThreshold(1.0, 1e-8), SeededRandom(1))
    assert r.keys.tolist() == ["hello", "hey", "hi"]


def test_alphabet_errors_and_drop_unknown(small: TrieHH) -> None:
    pop = Population.from_counts(["ab", "aXb", "zz"], [50, 5, 5])
    with pytest.raises(ValidationError, match=r"^parameter 'alphabet' of TrieHH.run .*'X'"):
        small.run(pop, SeededRandom(0))
    dropper = TrieHH(
        epsilon=3.0,
        delta=0.2,
        levels=2,
        level_epsilon=1.0,
        level_delta=0.05,
        alphabet="abc",
        drop_unknown=True,
    )
    res = dropper.run(pop, SeededRandom(0))
    assert res.diagnostics["dropped_for_alphabet"] == 10
    assert set(res.nodes) <= {"a", "ab"}
    res = dropper.run(Population.from_counts(["zz"], [5]), SeededRandom(0))
    assert len(res.items) == 0 and res.nodes == {}


def test_bad_parameters() -> None:
    with pytest.raises(ValidationError, match="parameter 'terminator'"):
        TrieHH(1.0, 1e-8, alphabet="ab$", levels=2, level_epsilon=0.5)
    with pytest.raises(ValidationError, match="parameter 'levels'"):
        TrieHH(1.0, 1e-8, levels=0)
    with pytest.raises(ValidationError, match="parameter 'delta'"):
        TrieHH(1.0, 0.0, levels=2)
    with pytest.raises(ValidationError, match="parameter 'epsilon'"):
        TrieHH(-1.0, 1e-8, levels=2)
    with pytest.raises(ValidationError, match="parameter 'alphabet'"):
        TrieHH(1.0, 1e-8, alphabet="", levels=2)
    with pytest.raises(ValidationError, match="parameter 'level_epsilon'"):
        TrieHH(1.0, 1e-8, levels=10, level_epsilon=1.0)  # 10 levels cannot fit in epsilon 1
    with pytest.raises(ValidationError, match="parameter 'items'"):
        TrieHH(3.0, 0.2, levels=2, level_epsilon=1.0, level_delta=0.05).run(
            Population.from_counts([1, 2], [3, 4]), SeededRandom(0)
        )


def _pair_above_envelope(p: Fraction, constraints: list[tuple[float, float]]) -> Any:
    """How far the tradeoff curve of the float pair rises above the exact envelope
    ``max(0, 1 - delta_i - e^eps_i x, (1 - p)(1 - x))`` (60 digits; <= 0 means the pair is a
    valid dominating pair). The curve of a discrete pair rejects atoms in decreasing order of
    ``P*/Q*``; the gap is piecewise linear between the curve's corners and the envelope's kinks,
    so its maximum is at one of them."""
    P, Q = dominating_pair(p, constraints)
    with mpmath.workdps(60):

        def ratio(k: int) -> Any:
            q = Q.get(k, 0.0)
            return mpmath.inf if q == 0 else mpmath.mpf(P.get(k, 0.0)) / mpmath.mpf(q)

        xs, ys = [mpmath.mpf(0)], [mpmath.mpf(1)]
        for k in sorted(set(P) | set(Q), key=ratio, reverse=True):
            xs.append(xs[-1] + mpmath.mpf(Q.get(k, 0.0)))
            ys.append(ys[-1] - mpmath.mpf(P.get(k, 0.0)))
        pm = mpmath.mpf(p.numerator) / p.denominator
        lines = [(1 - mpmath.mpf(d), mpmath.exp(mpmath.mpf(e))) for e, d in constraints]
        lines.append((1 - pm, 1 - pm))

        def envelope(x: Any) -> Any:
            return max([mpmath.mpf(0)] + [b - s * x for b, s in lines])

        def curve(x: Any) -> Any:
            for j in range(len(xs) - 1):
                if xs[j] <= x <= xs[j + 1] and xs[j + 1] > xs[j]:
                    return ys[j] + (ys[j + 1] - ys[j]) * (x - xs[j]) / (xs[j + 1] - xs[j])
            return ys[-1] if x >= xs[-1] else ys[0]

        points = set(xs)
        for i, (b1, s1) in enumerate(lines):
            points.add(b1 / s1)
            for b2, s2 in lines[i + 1 :]:
                if s1 != s2:
                    points.add((b1 - b2) / (s1 - s2))
        return max(curve(x) - envelope(x) for x in points if 0 <= x <= 1)


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-8), (0.7, 1e-10), (3.0, 1e-8)])
def test_float_dominating_pair_lies_below_the_exact_envelope(eps: float, delta: float) -> None:
    """The float64 pair must be *less* private than the certified constraints it encodes,
    including Lemma A's line (1 - p)(1 - x), which is exact and has no certified slack."""
    m = SampleAndThreshold(eps, delta)
    p, tau = m.sampling_rate, m.threshold
    grid = [eps * 2.0 ** (k / 4) for k in range(-12, 21)]
    constraints = [(e, certified_delta(p, tau, Fraction(e)).upper) for e in grid]
    assert _pair_above_envelope(p, constraints) <= 0


def test_composition_event_recomposes_to_the_certified_bound() -> None:
    from privhist.accounting.events import event_from_json, event_to_json

    comp = compose_levels(SampleAndThreshold(0.5, 1e-6), 3, 1e-5)
    event = comp.event()
    assert event.count == 3 and event_from_json(event_to_json(event)) == event
    assert comp.pld_certified is not None
    eps = event.account(CERTIFIED_STEP).epsilon_for_delta(1e-5)
    assert eps == comp.pld_certified.epsilon
