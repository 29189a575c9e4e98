"""TFFE and MFFE: accounting (the paper's budgets, calibration), exact DP of a whole tiny TFFE run
(adaptive threshold included), unbiased frequencies, the geometric update, the aggregator plug-in
and bad input."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import pytest

from privhist.accounting.profile import check_dp
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.cpbm import probability_numerators
from privhist.federated.cpbm_accounting import compose, cpbm_rdp
from privhist.federated.dht import FederatedQuantile, bin_index
from privhist.federated.ffe import (
    Representations,
    calibrate_mffe,
    calibrate_tffe,
    frequency_phase,
    mffe,
    mffe_rdp,
    range_upper,
    tffe,
    tffe_rdp,
)
from privhist.federated.kashin import OrthogonalFrame
from privhist.federated.ocpbm import error_bound
from privhist.federated.secure_sum import IdealSecureSum
from privhist.federated.user_data import UserCounts, from_records, generate_iid


def test_the_papers_budgets() -> None:
    """Section 5.2: m = 30 (D = 2d), DHT b = 6, m' = 3, n = 1e4: eps = 2.8 (d = 50) and
    4 (d = 100) at delta = 1e-4. Appendix E.1: MFFE m = m' = 15, rounds of N = 1000:
    eps = 7.5 (d = 50) and 10.7 (d = 100) at delta = 1e-5. Ours: 2.76, 4.04, 7.72 and 11.70; the
    last is 9% above the paper's (no N in Appendix E.1 reproduces both 7.5 and 10.7 with D = 2d;
    the rounds of N = 1000 come from its TFFE-versus-MFFE experiment)."""
    assert tffe_rdp(10_000, 0.2, 30, 100, 3, 6).epsilon(1e-4) == pytest.approx(2.8, abs=0.06)
    assert tffe_rdp(10_000, 0.2, 30, 200, 3, 6).epsilon(1e-4) == pytest.approx(4.0, abs=0.06)
    e50 = mffe_rdp([1000] * 100, 0.2, 15, 100, 15).epsilon(1e-5)
    e100 = mffe_rdp([1000] * 100, 0.2, 15, 200, 15).epsilon(1e-5)
    assert e50 == pytest.approx(7.5, rel=0.05)
    assert e100 == pytest.approx(10.7, rel=0.1)
    assert e100 > 10.7  # our accounting is the more conservative one here


@pytest.mark.parametrize(("eps", "n", "dim"), [(2.8, 10_000, 100), (1.0, 50_000, 2048)])
def test_calibrate_tffe_meets_the_target_and_is_maximal(eps: float, n: int, dim: int) -> None:
    c = calibrate_tffe(eps, 1e-4, n, dim)
    got = compose([cpbm_rdp(n, 0.2, c.m_quantile, 63), cpbm_rdp(n, 0.2, c.m, dim)]).epsilon(1e-4)
    assert got <= eps
    assert c.m * dim + c.m_quantile * 63 <= c.total_trials
    # one more coordinate-trial exceeds the target
    assert cpbm_rdp(n, 0.2, c.total_trials + 1, 1).epsilon(1e-4) > eps
    assert c.m >= 1 and c.m_quantile >= 1


def test_calibrate_mffe_and_refusals() -> None:
    c = calibrate_mffe(7.5, 1e-5, 1000, 100)
    assert c.m == c.m_quantile  # share 1 / (D + 1)
    assert mffe_rdp([1000], 0.2, c.m, 100, c.m_quantile).epsilon(1e-5) <= 7.5
    with pytest.raises(ValidationError):
        calibrate_tffe(0.01, 1e-6, 100, 100)  # not even m = 1
    with pytest.raises(ValidationError):
        calibrate_tffe(1.0, 1e-6, 100, 100, quantile_share=1.5)


def _users(values: Iterable[int]) -> UserCounts:
    vals = list(values)
    return UserCounts.from_arrays(list(range(len(vals) + 1)), [0] * len(vals), vals, 1)


def _sum_law(probs: list[Fraction]) -> dict[int, Fraction]:
    dist = {0: Fraction(1)}
    for p in probs:
        new: dict[int, Fraction] = {}
        for s, w in dist.items():
            new[s] = new.get(s, Fraction(0)) + w * (1 - p)
            new[s + 1] = new.get(s + 1, Fraction(0)) + w * p
        dist = new
    return dist


def _tffe_law(frame: OrthogonalFrame, counts: list[int], max_items: int) -> dict[Any, Fraction]:
    """Exact law of (DHT secure sum, frequency secure sum) of TFFE with n = 2, d = D = 1,
    b = 1, m = m' = 1, theta = theta' = 1/4, gamma = 1/2, composed by hand: the threshold of
    phase 2 is the quantile decoded from phase 1's sum."""
    n = len(counts)
    reps = Representations(_users(counts), frame)
    y = reps.array()
    norms = np.linalg.norm(y, axis=1)
    q = FederatedQuantile(range_upper(max_items), 1, 0.25, 1, n)
    h = q.user_vectors(norms)[:, 0]
    first = _sum_law([Fraction(1, 2) + Fraction(1, 4) * int(v) for v in h])
    out: dict[Any, Fraction] = {}
    for s1, w1 in first.items():
        clip = q.quantile(np.array([s1]), 0.5)
        nums = probability_numerators(y, 0.25, clip)[:, 0]
        for s2, w2 in _sum_law([Fraction(int(a), 2**32) for a in nums]).items():
            out[(s1, s2)] = w1 * w2
    return out


def test_whole_tffe_run_is_dp_at_the_accounted_epsilon() -> None:
    frame = OrthogonalFrame(1, 1, SeededRandom(0))
    delta = 1e-3
    eps = tffe_rdp(2, 0.25, 1, 1, 1, 1).epsilon(delta)
    values = [1, 2, 3, 5]
    laws = {
        (a, b): _tffe_law(frame, [a, b], max_items=3) for a, b in itertools.product(values, values)
    }
    teeth = False
    for a, a2, other in itertools.product(values, values, values):
        if a < a2:
            p, q = laws[(a, other)], laws[(a2, other)]
            assert check_dp(p, q, eps, delta).holds
            teeth |= not check_dp(p, q, eps / 2, delta).holds
    assert teeth


def test_frequency_phase_is_unbiased_for_the_clipped_mean() -> None:
    rng = SeededRandom(3)
    users = generate_iid(300, 6, rng, items_per_user=20)
    frame = OrthogonalFrame(6, 12, rng)
    reps = Representations(users, frame)
    y = reps.array()
    clip = float(np.quantile(np.linalg.norm(y, axis=1), 0.5))
    target = frame.synthesize(
        (y * np.minimum(1.0, clip / np.linalg.norm(y, axis=1))[:, None]).mean(axis=0)[None]
    )[0]
    runs = np.array(
        [frequency_phase(reps.batches(), frame, 300, 0.2, 4, clip, rng) for _ in range(150)]
    )
    se = runs.std(axis=0) / math.sqrt(runs.shape[0])
    assert (np.abs(runs.mean(axis=0) - target) < 5.5 * se).all()


class _Recording(IdealSecureSum):
    calls: ClassVar[list[tuple[int, int, int]]] = []

    def aggregate(self, shares: Iterable[Any]) -> Any:
        out = super().aggregate(shares)
        _Recording.calls.append((self.modulus, self.dimension, self.contributors))
        return out


def test_tffe_end_to_end_uses_the_aggregator_and_stays_under_the_bound() -> None:
    rng = SeededRandom(8)
    users = generate_iid(3000, 10, rng, items_per_user=30)
    frame = OrthogonalFrame(10, 20, rng)
    _Recording.calls = []
    res = tffe(
        users,
        frame,
        rng,
        m=30,
        m_quantile=3,
        max_items=30,
        aggregator=_Recording,
        clip_rule="quantile",
    )
    assert _Recording.calls == [(3000 * 3 + 1, 63, 3000), (3000 * 30 + 1, 20, 3000)]
    reps = Representations(users, frame)
    norms = reps.norms()
    clip = res.clips[0]
    # the threshold is a bin edge near the gamma* quantile of the norms
    width = range_upper(30) / 64
    assert clip / width == pytest.approx(round(clip / width))
    assert abs(np.mean(norms <= clip) - res.gamma) < 0.2
    err = float(np.linalg.norm(res.estimate - users.mean_vector()))
    assert err <= error_bound(norms, clip, frame.D, 30, 0.2) * 1.5
    assert res.epsilon(1e-4) == tffe_rdp(3000, 0.2, 30, 20, 3, 6).epsilon(1e-4)
    # the private bound's bias part uses bin upper edges: at least the true bias (up to noise)
    true_bias = float(np.maximum(norms - clip, 0).mean())
    assert res.bound_estimate - res.noise_bound >= true_bias - 3 * width
    assert bin_index(norms, range_upper(30), 6).max() < 64


def test_mffe_update_rule_weights_and_parallel_composition() -> None:
    rng = SeededRandom(11)
    users = generate_iid(1000, 8, rng, items_per_user=30)
    frame = OrthogonalFrame(8, 16, rng)
    res = mffe(users, frame, rng, m=10, m_quantile=10, rounds=7, eta=0.7, initial_clip=2.0)
    sizes = res.extra["round_sizes"]
    assert sizes == (143, 143, 143, 143, 143, 143, 142)
    levels = res.extra["levels"]
    assert res.clips[0] == 2.0
    for r in range(6):
        assert res.clips[r + 1] == pytest.approx(
            res.clips[r] * math.exp(-0.7 * (levels[r] - res.gamma)), rel=1e-12
        )
    worst = compose([cpbm_rdp(142, 0.2, 10, 16), cpbm_rdp(142, 0.2, 10, 1)])
    assert res.rdp.rdp == pytest.approx(worst.rdp, rel=1e-12)
    # the levels are estimates of the fraction of each round at or below its threshold
    reps = Representations(users, frame)
    norms = reps.norms()
    start = 0
    for r, size in enumerate(sizes):
        true_level = float(np.mean(norms[start : start + size] <= res.clips[r]))
        sd = 1 / math.sqrt(4 * 10 * size * 0.04)
        assert abs(levels[r] - true_level) < 6 * sd
        start += size


def test_bad_input_is_refused_before_any_work() -> None:
    rng = SeededRandom(0)
    users = generate_iid(20, 4, rng, items_per_user=5)
    frame = OrthogonalFrame(4, 8, rng)
    with pytest.raises(ValidationError):
        tffe(users, frame, rng, m=3, m_quantile=1, max_items=5, theta=0.3)
    with pytest.raises(ValidationError):
        tffe(users, frame, rng, m=0, m_quantile=1, max_items=5)
    with pytest.raises(ValidationError):
        tffe(users, frame, rng, m=3, m_quantile=1, max_items=5, gamma=1.2)
    with pytest.raises(ValidationError):
        tffe(users, frame, rng, m=1 << 30, m_quantile=1, max_items=5)  # n m + 1 > 2**32
    with pytest.raises(ValidationError):
        tffe(users, OrthogonalFrame(3, 8, rng), rng, m=3, m_quantile=1, max_items=5)
    with pytest.raises(ValidationError):
        mffe(users, frame, rng, m=3, m_quantile=1, rounds=21)
    with pytest.raises(ValidationError):
        mffe(users, frame, rng, m=3, m_quantile=1, rounds=2, initial_clip=0.0)
    with pytest.raises(InputDataError):
        from_records(np.array([], dtype=np.int64), np.array([], dtype=np.int64))


def _mffe_law(
    frame: OrthogonalFrame, counts: list[int], clip1: float, eta: float, gamma: float
) -> dict[Any, Fraction]:
    """Exact law of the server's whole view of MFFE with two rounds of one user each (d = D =
    1, m = m' = 1, theta = theta' = 1/4): round r's frequency sum and indicator sum, where the
    threshold of round 2 is the geometric update of round 1's decoded level (adaptive)."""
    y = Representations(_users(counts), frame).array()
    norms = np.linalg.norm(y, axis=1)
    quarter, half = Fraction(1, 4), Fraction(1, 2)

    def one_round(i: int, clip: float) -> dict[tuple[int, int], Fraction]:
        p = Fraction(int(probability_numerators(y[i : i + 1], 0.25, clip)[0, 0]), 2**32)
        above = half + quarter * int(norms[i] > clip)
        return {
            (z, s): (p if z else 1 - p) * (above if s else 1 - above)
            for z in (0, 1)
            for s in (0, 1)
        }

    out: dict[Any, Fraction] = {}
    for (z1, s1), w1 in one_round(0, clip1).items():
        level = 1.0 - (s1 - 0.5) / 0.25  # equation (3) with n = m' = 1, C = 1
        clip2 = clip1 * math.exp(-eta * (level - gamma))
        for (z2, s2), w2 in one_round(1, clip2).items():
            out[(z1, s1, z2, s2)] = w1 * w2
    return out


def test_whole_mffe_run_is_dp_at_the_parallel_epsilon() -> None:
    """Appendix D: each user is in one round, so the whole (adaptive) run has the RDP of one
    round (not the sum over rounds). Exact check, both directions, of every neighbouring pair
    (either user replaced, so the change is in round 1, whose output moves round 2's threshold,
    or in round 2); the same check at half the epsilon fails for some pair."""
    frame = OrthogonalFrame(1, 1, SeededRandom(0))
    delta, clip1, eta, gamma = 1e-3, 2.5, 0.7, 0.5
    eps = mffe_rdp([1, 1], 0.25, 1, 1, 1).epsilon(delta)
    sequential = compose([mffe_rdp([1], 0.25, 1, 1, 1)] * 2).epsilon(delta)
    assert eps < sequential
    values = [1, 2, 3, 5]
    laws = {
        (a, b): _mffe_law(frame, [a, b], clip1, eta, gamma)
        for a, b in itertools.product(values, values)
    }
    teeth = False
    for a, a2, other in itertools.product(values, values, values):
        if a < a2:
            for p, q in (
                (laws[(a, other)], laws[(a2, other)]),
                (laws[(other, a)], laws[(other, a2)]),
            ):
                assert check_dp(p, q, eps, delta).holds
                teeth |= not check_dp(p, q, eps / 2, delta).holds
    assert teeth
    # and the protocol reports exactly this curve for two one-user rounds
    users = _users([2, 5])
    res = mffe(
        users,
        frame,
        SeededRandom(1),
        m=1,
        m_quantile=1,
        rounds=2,
        theta=0.25,
        eta=eta,
        initial_clip=clip1,
        gamma=gamma,
    )
    assert res.rdp == mffe_rdp([1, 1], 0.25, 1, 1, 1)
