"""Exact privacy checks and sampling tests for the weighted selectors (WGM, DP-SIPS).

The contract every selector registered with ``register_weighted`` must pass:

* exact DP on tiny neighbouring datasets, both directions: the whole output (the set of released
  keys, "key absent" included) is enumerated over every user's choice of kept keys, every round
  and every key's release, in 160-bit arithmetic, for users holding 1-3 keys with shared and
  private keys, with a user holding more keys than the cap, and with a shared key near the
  threshold;
* power: the same check fails for a selector whose thresholds were set for twice the delta;
* releases follow the analysed per-key release probability (binomial test, alpha = 1e-6);
* the certified delta never exceeds the stated delta, and validation fails closed.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections import defaultdict
from typing import Any

import mpmath
import numpy as np
import polars as pl
import pytest
from scipy import stats
from tests.constraint_cases import constraint_failures
from tests.stats import ALPHA

import privhist.mechanisms  # noqa: F401  (registers the built-in mechanisms)
from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import check_dp
from privhist.engines.local.weighting import LocalWeightedSource
from privhist.mechanisms.registry import weighted_registry
from privhist.mechanisms.user_level import DPSIPS, WeightedGaussianSelection, WeightedSelector
from privhist.mechanisms.user_level._gauss import calibrate_threshold

SLACK = 1e-30

#: the selectors that judge each round on its own noise (per-round release probabilities);
#: ``cumulative-sips`` has its own exact law in ``test_user_level_cumulative.py``
INSTANCES = [
    pytest.param(m, id=f"{name}-{i}")
    for name, cls in sorted(weighted_registry().items())
    if not getattr(cls, "uses_held_subsets", False)
    for i, m in enumerate(cls.test_instances())
]


def test_the_weighted_registry_holds_the_selectors() -> None:
    reg = weighted_registry()
    assert reg["wgm"] is WeightedGaussianSelection and reg["dp-sips"] is DPSIPS
    for name, cls in reg.items():
        assert cls.test_instances(), f"{name} registers no test instances"


def _subsets(keys: frozenset[str], cap: int) -> list[tuple[frozenset[str], Any]]:
    """A user's kept subsets with their probabilities (uniform cap-subsets when it holds more)."""
    if len(keys) <= cap:
        return [(keys, mpmath.mpf(1))]
    subs = [frozenset(c) for c in itertools.combinations(sorted(keys), cap)]
    return [(s, mpmath.mpf(1) / len(subs)) for s in subs]


def outcome_distribution(m: WeightedSelector, users: list[frozenset[str]]) -> dict[Any, Any]:
    """Exact law of the released key set of ``m`` on ``users`` (each a set of keys)."""
    states: dict[frozenset[str], Any] = {frozenset(): mpmath.mpf(1)}
    with mpmath.workprec(160):
        for r in range(m.rounds):
            nxt: dict[frozenset[str], Any] = defaultdict(lambda: mpmath.mpf(0))
            for released, p_state in states.items():
                choices = [_subsets(u - released, m.max_keys) for u in users]
                for combo in itertools.product(*choices):
                    p_combo = p_state
                    weights: dict[str, int] = defaultdict(int)
                    for kept, p in combo:
                        p_combo *= p
                        for key in kept:
                            weights[key] += m.weights[len(kept) - 1]
                    keys = sorted(weights)
                    probs = [m.release_probability_mp(r, weights[k]) for k in keys]
                    for mask in itertools.product((False, True), repeat=len(keys)):
                        p_mask = p_combo
                        for bit, q in zip(mask, probs, strict=True):
                            p_mask *= q if bit else 1 - q
                        out = released | {k for k, bit in zip(keys, mask, strict=True) if bit}
                        nxt[frozenset(out)] += p_mask
            states = dict(nxt)
    return states


def _cases(m: WeightedSelector) -> list[tuple[list[frozenset[str]], frozenset[str]]]:
    """(D, u): neighbouring datasets D and D + u, users holding 1-3 keys."""
    f = frozenset
    # enough single-key holders of "h" to put its weight near the first round's threshold
    near = max(1, round(m.thresholds[0] / m.weights[0]) - 1)
    heavy = [f({"h"})] * near
    return [
        ([f({"a"})], f({"p"})),  # one private key
        ([f({"a"})], f({"a", "p"})),  # shared and private
        ([f({"a"}), f({"a", "b"}), f({"b"})], f({"a", "b", "p"})),  # more keys than a cap of 2
        # "c" is kept by the other user in only some draws: then only u's weight carries it
        ([f({"a", "b", "c"})], f({"c", "p"})),
        (heavy, f({"h"})),  # a shared key near the threshold
        (heavy, f({"h", "p", "q"})),
        ([], f({"p", "q"})),  # two private keys, nobody else
    ]


def _worst(m: WeightedSelector) -> float:
    worst = 0.0
    for users, u in _cases(m):
        p = outcome_distribution(m, users)
        q = outcome_distribution(m, [*users, u])
        res = check_dp(p, q, m.epsilon, m.delta, slack=SLACK)
        if not res.holds:
            return math.inf
        worst = max(worst, float(res.worst))
    return worst


@pytest.mark.parametrize("mech", INSTANCES)
def test_exact_privacy_both_directions(mech: WeightedSelector) -> None:
    assert mech.certified_delta() <= mech.delta
    worst = _worst(mech)
    assert worst <= mech.delta
    # the threshold part of the guarantee is used: a private key comes near its delta share
    assert worst > 0.05 * mech.delta


def _weaken(m: WeightedSelector) -> WeightedSelector:
    """Thresholds set so that a private key may be released with probability 2 delta."""
    weak = copy.copy(m)
    weak.thresholds = [
        calibrate_threshold(s2, m.weights, 2 * m.delta / m.rounds) for s2 in m.sigma2s
    ]
    assert weak.thresholds != m.thresholds
    return weak


@pytest.mark.parametrize("mech", INSTANCES)
def test_the_exact_check_catches_thresholds_set_for_twice_the_delta(
    mech: WeightedSelector,
) -> None:
    assert _worst(_weaken(mech)) == math.inf


def _source(counts: list[int], seed: int) -> LocalWeightedSource:
    """Key i held by counts[i] users who hold nothing else (weight counts[i] * scale)."""
    users, keys = [], []
    uid = 0
    for i, n in enumerate(counts):
        users.extend(range(uid, uid + n))
        keys.extend([i] * n)
        uid += n
    return LocalWeightedSource(pl.DataFrame({"user": users, "key": keys}), SeededRandom(seed))


@pytest.mark.parametrize("mech", INSTANCES)
def test_release_frequency_follows_the_analysed_probability(mech: WeightedSelector) -> None:
    n_keys = 3000
    # the number of single-key holders whose release probability is closest to 1/2
    top = mech.thresholds[0] // mech.scale + 3
    total = [
        1 - math.prod(1 - mech.release_probability(r, n * mech.scale) for r in range(mech.rounds))
        for n in range(0, top)
    ]
    n_half = int(np.argmin(np.abs(np.array(total) - 0.5)))
    for n in sorted({max(1, n_half - 2), n_half, n_half + 1}):
        rel = mech.release_weighted(_source([n] * n_keys, n), SeededRandom(1000 + n))
        k = len(rel)
        assert stats.binomtest(k, n_keys, total[n]).pvalue > ALPHA, (n, k, total[n])
    # power: the same test rejects the probability of a neighbouring count
    rel = mech.release_weighted(_source([n_half] * n_keys, 5), SeededRandom(5))
    assert stats.binomtest(len(rel), n_keys, total[n_half + 2]).pvalue < ALPHA


def test_counts_are_the_bounded_counts_plus_discrete_gaussian_noise() -> None:
    m = WeightedGaussianSelection(2.0, 1e-3, counts=True, count_max_keys=2, max_keys=4)
    assert m.count_sigma2 is not None and m.certified_delta() <= m.delta
    n = 400
    rel = m.release_weighted(_source([n] * 3000, 1), SeededRandom(2))
    assert rel.values is not None and rel.lower is not None and rel.upper is not None
    noise = rel.values - n  # every user holds one key: the bounded count is n
    from privhist.noise import DiscreteGaussian

    dist = DiscreteGaussian(m.count_sigma2)
    lo, hi = dist.interval(0.999)
    edges = np.arange(lo, hi + 2)
    obs = np.array(
        [(noise == z).sum() for z in edges[:-1]] + [(noise < lo).sum() + (noise > hi).sum()]
    )
    exp = np.array([dist.pmf(int(z)) for z in edges[:-1]] + [0.0])
    exp[-1] = 1 - exp[:-1].sum()
    keep = exp * len(noise) >= 5
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(exp[keep], exp[~keep].sum()) * len(noise)
    assert stats.chisquare(o, e * o.sum() / e.sum()).pvalue > ALPHA
    assert abs(float(noise.mean())) < 5 * math.sqrt(float(dist.var()) / len(noise))
    w = int(rel.upper[0] - rel.values[0])
    coverage = float(dist.cdf(w)) - float(dist.cdf(-w - 1))  # Pr[|Z| <= w]
    assert coverage >= 0.95 and float(dist.cdf(w - 1)) - float(dist.cdf(-w)) < 0.95
    inside = int(((rel.lower <= n) & (n <= rel.upper)).sum())
    assert stats.binomtest(inside, len(noise), coverage).pvalue > ALPHA


@pytest.mark.parametrize("cls", [c for _, c in sorted(weighted_registry().items())])
def test_every_parameter_refuses_values_outside_its_declared_constraint(
    cls: type[WeightedSelector],
) -> None:
    # generated from the declared constraints (tests/constraint_cases.py), as for the mechanisms;
    # spent_rho must also stay below the zCDP budget (relational, checked below)
    baseline = {"epsilon": 1.0, "delta": 1e-6, "max_keys": 2, "scale": 4}
    assert constraint_failures(cls, baseline) == []
    with pytest.raises(ValidationError, match=f"parameter 'spent_rho' of {cls.__name__}"):
        cls(1.0, 1e-6, spent_rho=1000)


def test_release_refuses_what_is_not_a_source() -> None:
    with pytest.raises(ValidationError, match="parameter 'source'"):
        WeightedGaussianSelection(1.0, 1e-6).release_weighted([1, 2], SeededRandom(1))  # type: ignore[arg-type]
    src = _source([3], 1)
    with pytest.raises(ValidationError, match="parameter 'rng'"):
        WeightedGaussianSelection(1.0, 1e-6).release_weighted(src, 7)  # type: ignore[arg-type]


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-8), (1.0, 1e-5), (3.0, math.exp(-10))])
def test_default_selectors_certify_the_stated_delta(eps: float, delta: float) -> None:
    for cls in (WeightedGaussianSelection, DPSIPS):
        m = cls(eps, delta)
        assert m.certified_delta() <= delta
        # released keys are never duplicated across rounds and come sorted
    rel = DPSIPS(eps, delta).release_weighted(_source([200, 150, 100, 2], 3), SeededRandom(4))
    assert rel.keys.tolist() == sorted(set(rel.keys.tolist()))
    assert rel.metadata["randomness"]["private"] is False
