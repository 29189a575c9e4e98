"""The statistical audit: the samplers draw what the mechanisms analyse, broken variants are
caught, every registered mechanism passes a quick audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

import privhist.mechanisms  # noqa: F401  (registers the built-in mechanisms)
from privhist import SeededRandom
from privhist.accounting.profile import NOT_RELEASED
from privhist.audit import (
    CallableSampler,
    MechanismSampler,
    audit_statistical,
    broken_variants,
    candidate_pairs,
)
from privhist.audit.sampling import NOT_RELEASED_CODE, PER_KEY_INDEPENDENT, single_key_pair
from privhist.audit.variants import BrokenVariant, build_variant
from privhist.core.data import Counts
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.io.release import Release
from privhist.mechanisms import StabilityHistogram, registry
from privhist.mechanisms.base import Mechanism

#: quick audits in the suite run at a high confidence: a correct mechanism is flagged with
#: probability at most 1e-4 per audit, the gross broken variants below are still caught
CONFIDENCE = 1 - 1e-4


@pytest.mark.parametrize("broken", broken_variants(), ids=lambda b: b.name)
def test_broken_variants_are_caught(broken: BrokenVariant) -> None:
    b = broken
    pairs = None
    if b.mechanism is None:
        pairs = [single_key_pair(0, 1), single_key_pair(3, 4)]
    res = audit_statistical(
        b.sampler,
        b.epsilon,
        b.delta,
        samples=100_000,
        mechanism=b.mechanism,
        pairs=pairs,
        confidence=CONFIDENCE,
        rng=SeededRandom(1401),
    )
    assert res.violation, res.verdict()
    assert res.verdict().startswith("VIOLATION")


QUICK = [
    pytest.param(m, id=f"{name}-{i}")
    for name, cls in sorted(registry.registry().items())
    if name in PER_KEY_INDEPENDENT
    for i, m in enumerate(cls.test_instances())
]


@pytest.mark.parametrize("mech", QUICK)
def test_every_registered_mechanism_passes_a_quick_audit(mech: Mechanism) -> None:
    g = mech.guarantee()
    res = audit_statistical(
        MechanismSampler(mech),
        g.epsilon,
        g.delta,
        samples=20_000,
        pilot=2_000,
        mechanism=mech,
        confidence=CONFIDENCE,
        rng=SeededRandom(14),
    )
    assert not res.violation, res.verdict()


@pytest.mark.parametrize("name", ["keep-heavy", "pure-sparse"])
def test_mechanisms_released_once_per_sample_pass(name: str) -> None:
    mech = registry.get(name).test_instances()[0]
    sampler = MechanismSampler(mech)
    assert not sampler.vectorised
    g = mech.guarantee()
    res = audit_statistical(
        sampler,
        g.epsilon,
        g.delta,
        samples=600,
        pilot=60,
        mechanism=mech,
        confidence=CONFIDENCE,
        rng=SeededRandom(3),
    )
    assert not res.violation, res.verdict()
    # the pair's keys are really released (a key outside the mechanism's domain would be
    # "absent" on both sides and pass for the wrong reason); pure-sparse releases a single key
    # rarely (about 3 in 1000 at its count bound), so its statistical audit has little power:
    # its exact joint checks are in tests/finite/test_finite_pure_sparse.py
    if name == "keep-heavy":
        pair = res.pair
        rows = sampler.draw(pair.second, pair.keys, 50, SeededRandom(4))
        assert (rows[:, 0::2] != NOT_RELEASED_CODE).any()
    else:
        assert {p["pair"] for p in res.pilot} >= {"x: 11 vs 12 records"}


def test_compact_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="compact"):
        MechanismSampler(registry.get("compact").test_instances()[0])


@pytest.mark.parametrize(
    "mech",
    [StabilityHistogram(1.0, 1e-3), registry.get("sample-and-threshold").test_instances()[2]],
    ids=["stability", "sample-and-threshold-user"],
)
def test_vectorised_draws_follow_the_analysed_law(mech: Mechanism) -> None:
    """Each key of the batched release has the law of ``key_distribution`` (chi-square at
    alpha = 1e-6 over the pooled outcomes, "not released" included)."""
    c = mech.neighbouring.max_contributions_per_partition
    count = int(np.nonzero(mech.reporting_probability(400) >= 0.3)[0][0])
    units = -(-count // c)
    n = 100_000
    rows = MechanismSampler(mech).draw({"x": count}, ["x"], n, SeededRandom(9))
    law = mech.key_distribution(units, count).probabilities
    other = mech.key_distribution(-(-(count + c) // c), count + c).probabilities
    support = [NOT_RELEASED, *sorted({*law, *other} - {NOT_RELEASED})]
    codes = [NOT_RELEASED_CODE if k is NOT_RELEASED else k for k in support]
    obs = np.array([(rows[:, 0] == code).sum() for code in codes], dtype=float)
    assert obs.sum() == n, "outputs outside the analysed support"
    assert _gof(obs, np.array([float(law.get(k, 0)) for k in support])) > ALPHA
    # power: the same test rejects the law of the neighbouring count
    assert _gof(obs, np.array([float(other.get(k, 0)) for k in support])) < ALPHA


def _gof(obs: np.ndarray, p: np.ndarray) -> float:
    """Chi-square p-value, bins with expected count < 5 pooled into one."""
    n = obs.sum()
    keep = p * n >= 5
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(p[keep], max(1 - p[keep].sum(), 0.0)) * n
    if e[-1] < 5:
        o, e = o[:-1], e[:-1]
        o[-1] += obs[~keep].sum()
    return float(stats.chisquare(o, e * (o.sum() / e.sum())).pvalue)


def test_candidate_pairs_cover_the_delta_regime_and_the_threshold() -> None:
    m = StabilityHistogram(1.0, 1e-6)
    notes = [p.note for p in candidate_pairs(m)]
    assert notes[0] == "x: 0 vs 1 records"
    t = m.threshold
    assert f"x: {t - 1} vs {t} records" in notes or f"x: {t} vs {t + 1} records" in notes
    user = build_variant("stability", 1.0, 1e-3, Neighbouring.user(3, 2))
    first = candidate_pairs(user)[1]
    assert len(first.second) == 3  # a user touching all of its 3 keys


def _noisy_counts(records: list[object]) -> dict[object, float]:
    # a user's function: exact counts, no noise (not private at all)
    out: dict[object, float] = {}
    for r in records:
        out[r] = out.get(r, 0) + 1
    return out


def test_a_user_function_without_noise_is_caught() -> None:
    res = audit_statistical(
        CallableSampler(_noisy_counts), 1.0, 1e-6, samples=300, pairs=[single_key_pair(2, 3)]
    )
    assert res.violation and math.isinf(res.result.epsilon_lower) is False
    assert res.result.delta_lower > 0.9
    assert not res.vectorised


def test_callable_outputs_may_be_releases_or_key_lists() -> None:
    def as_list(records: list[object]) -> list[object]:
        return sorted(set(records))

    def as_release(records: list[object]) -> Release:
        return StabilityHistogram(1.0, 1e-3).release(
            Counts.from_arrays(["x"], [len(records)]),
            SeededRandom(len(records)),
        )

    res = audit_statistical(
        CallableSampler(as_list), 1.0, 0.0, samples=50, pairs=[single_key_pair(0, 1)]
    )
    assert res.violation
    rows = CallableSampler(as_release).draw({"x": 40}, ["x"], 3, SeededRandom(1))
    assert (rows[:, 0] != NOT_RELEASED_CODE).all()


def test_bad_outputs_and_arguments_fail_closed() -> None:
    with pytest.raises(ValidationError, match="parameter 'output'"):
        CallableSampler(lambda r: 42).draw({"x": 1}, ["x"], 1, SeededRandom(1))
    with pytest.raises(ValidationError, match="parameter 'samples'"):
        audit_statistical(
            CallableSampler(_noisy_counts), 1.0, 0.0, samples=3, pairs=[single_key_pair(0, 1)]
        )
    with pytest.raises(ValidationError, match="parameter 'pairs'"):
        audit_statistical(CallableSampler(_noisy_counts), 1.0, 0.0, samples=30)
