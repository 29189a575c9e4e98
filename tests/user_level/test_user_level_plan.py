"""The user-level planner (:func:`privhist.planning.user_level.choose`): what it builds before any
data is read, what it spends, how the default decides, the noise of its statistics, and that it
ranks every applicable mechanism whatever cap is given."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist import SeededRandom, ValidationError
from privhist.accounting.accountant import guarantee_of
from privhist.engines.local.weighting import LocalWeightedSource
from privhist.mechanisms.user_level import DPSIPS, CumulativeSIPS
from privhist.mechanisms.user_level.caps import CAP_CANDIDATES
from privhist.mechanisms.user_level.votes import PairsVoteSource, VoteSelection
from privhist.noise import DiscreteLaplace
from privhist.planning.user_level import (
    CAP_QUANTILE,
    DEFAULT_PLAN_CAPS,
    HISTOGRAM_FRACTION,
    NON_VOTER_SHARE,
    VOTE_COUNT_CAPS,
    choose,
    plan_cap,
    quantile_cap,
    rank_user_level,
)


@pytest.mark.parametrize("keys_only", [True, False])
def test_default_plan_builds_every_candidate_and_spends_the_request(keys_only: bool) -> None:
    eps, delta = 1.0, 1e-8
    plan = choose(eps, delta, keys_only=keys_only)
    assert plan.needs_degree_histogram and plan.fixed is None
    assert plan.histogram_epsilon == pytest.approx(HISTOGRAM_FRACTION * eps)
    sips = plan.candidates["cumulative-sips"]
    assert sorted(sips) == list(DEFAULT_PLAN_CAPS)
    votes = plan.candidates["vote-selection"]
    assert sorted(votes) == ([0] if keys_only else list(VOTE_COUNT_CAPS))
    # the votes are cast once, before the decision: every candidate has the same selection
    selections = {
        (m.cap, m.top_cap, m.epsilon_selection, m.delta_selection) for m in votes.values()
    }
    assert len(selections) == 1
    rest = Fraction(eps) - Fraction(plan.histogram_epsilon)
    for m in [*sips.values(), *votes.values()]:
        assert m.counts is (not keys_only)
        g = m.guarantee()
        assert Fraction(g.epsilon) <= rest and m.certified_delta() <= delta
    # basic composition of the two statistics and the release: the request, never more
    total = guarantee_of(plan.event(), rules=("basic",))
    assert total.epsilon <= eps * (1 + 1e-12) and total.delta <= delta
    assert plan.guarantee().epsilon <= eps and plan.guarantee().delta <= delta
    explained = plan.explain()
    json.dumps(explained)  # what a dry run prints is plain JSON
    spend = explained["spend"]
    parts = [spend["degree_histogram"]["epsilon"], spend["non_voters"]["epsilon"]]
    assert sum(map(Fraction, parts)) + Fraction(spend["release"]["epsilon"]) <= Fraction(eps)
    degrees = [row["degree"] for row in explained["ranking"]]
    assert degrees == sorted(degrees) and len(degrees) >= 3


def test_the_default_plan_builds_one_selector_before_the_data_and_the_chosen_one_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import privhist.planning.user_level as ul

    built: list[tuple[str, int | None]] = []
    real = ul._build

    def counted(name: str, cap: int | None, *args: object) -> object:
        built.append((name, cap))
        return real(name, cap, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ul, "_build", counted)
    plan = choose(1.0, 1e-8, keys_only=True)
    assert [b for b in built if b[0] != "vote-selection"] == [("cumulative-sips", 5)]
    # what the plan states needs no other member: the largest cap bounds the relation
    assert plan.neighbouring.max_partitions_contributed == max(DEFAULT_PLAN_CAPS)
    statement = plan.guarantee()
    assert [b for b in built if b[0] != "vote-selection"] == [("cumulative-sips", 5)]
    built.clear()
    few = plan.decide(_histogram([2] * 9000 + [40] * 1000), 200, SeededRandom(0))
    assert few.reasons["cap"] == 50 and built == [("cumulative-sips", 50)]
    # every member states what the plan stated with the probe alone
    sips = plan.candidates["cumulative-sips"]
    for cap in DEFAULT_PLAN_CAPS:
        g = sips[cap].guarantee()
        assert g.epsilon <= statement.epsilon and g.delta <= statement.delta
        assert sips[cap].max_keys == cap <= plan.neighbouring.max_partitions_contributed
    built.clear()
    plan.decide(_histogram([2] * 10_000), 5000, SeededRandom(0))  # vote selection
    assert built == []


def test_a_selector_family_refuses_a_member_stating_more_than_its_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = choose(1.0, 1e-8, keys_only=True)
    sips = plan.candidates["cumulative-sips"]
    eps, delta = sips.probe.epsilon, sips.probe.delta
    wider = {
        10: CumulativeSIPS(eps, 2 * delta, max_keys=10),
        30: CumulativeSIPS(1.5 * eps, delta, max_keys=30),
    }
    counted = {20: CumulativeSIPS(eps, delta, max_keys=20, counts=True)}
    real = sips._built.get
    monkeypatch.setattr(
        sips._built, "get", lambda n, c: wider.get(c) or counted.get(c) or real(n, c)
    )
    assert sips[5] is sips.probe and sips[50].max_keys == 50
    for cap in (10, 20, 30):
        with pytest.raises(ValidationError, match="statement"):
            sips[cap]
    with pytest.raises(KeyError):
        sips[7]


def _histogram(degrees: list[int]) -> np.ndarray:
    b = np.asarray(CAP_CANDIDATES)
    return np.bincount(np.searchsorted(b, degrees, side="left"), minlength=b.size + 1)


def test_decide_prefers_votes_when_voters_are_plentiful_and_weights_otherwise() -> None:
    plan = choose(1.0, 1e-8, keys_only=True)
    hist = _histogram([2] * 9900 + [40] * 100)  # 0.975 quantile: 2, plan cap 5
    many = plan.decide(hist, 5000, SeededRandom(0))
    assert many.name == "vote-selection" and many.mechanism is plan.candidates["vote-selection"][0]
    few = plan.decide(hist, 200, SeededRandom(0))
    assert few.name == "cumulative-sips"
    noisy = few.reasons["degree_histogram"]["noisy_histogram"]
    assert few.reasons["cap"] == plan_cap(quantile_cap(noisy, CAP_QUANTILE)) == 5
    wide = plan.decide(_histogram([2] * 9000 + [40] * 1000), 200, SeededRandom(0))
    assert wide.reasons["cap"] == 50  # 10 % of users hold 40 keys: above the 0.975 quantile
    assert few.mechanism is plan.candidates["cumulative-sips"][5]
    dense = plan.decide(_histogram([60] * 10_000), 0, SeededRandom(1))
    assert dense.name == "cumulative-sips" and dense.reasons["cap"] == 100
    assert dense.reasons["threshold"] == NON_VOTER_SHARE
    json.dumps(dense.reasons)


@pytest.mark.parametrize(
    "degrees,k_c",
    [
        ([1] * 20_000, 1),
        ([2] * 20_000, 2),
        ([4] * 20_000, 5),
        ([2] * 15_000 + [7] * 5_000, 10),
        ([40] * 20_000, 20),
    ],
)
def test_vote_counts_take_the_histograms_09_quantile_cap_at_most_20(
    degrees: list[int], k_c: int
) -> None:
    plan = choose(1.0, 1e-8)
    d = plan.decide(_histogram(degrees), 20_000, SeededRandom(3))
    assert d.name == "vote-selection" and d.reasons["count_max_keys"] == k_c
    assert d.mechanism is plan.candidates["vote-selection"][k_c]
    assert d.mechanism.count_max_keys == k_c


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-8), (1.0, 1e-5), (3.0, math.exp(-10)), (8.0, 1e-6)])
def test_vote_candidates_share_one_selection_and_stay_within_the_budget(
    eps: float, delta: float
) -> None:
    plan = choose(eps, delta)
    votes = plan.candidates["vote-selection"]
    rest = Fraction(eps) - Fraction(plan.histogram_epsilon)
    kinds = {m.count_noise.kind for m in votes.values()}
    for m in votes.values():
        assert Fraction(m.epsilon_selection) + Fraction(m.epsilon_counts) <= rest
        assert m.certified_delta() <= delta
    shared = {(m.epsilon_selection, m.delta_selection, m.cap, m.top_cap) for m in votes.values()}
    assert len(shared) == 1
    # the delta goes whole to the selection only when no candidate's counts need it
    d_s = next(iter(shared))[1]
    assert (d_s == delta) == (kinds == {"discrete_laplace"})


def test_the_statistics_noise_is_discrete_laplace_at_half_the_histogram_budget() -> None:
    plan = choose(2.0, 1e-6, keys_only=True)
    hist = _histogram([3] * 500)
    n = 4000
    draws = np.array(
        [
            plan.decide(hist, 100, SeededRandom(i)).reasons["noisy_non_voters"] - 100
            for i in range(n)
        ]
    )
    half = Fraction(plan.histogram_epsilon) / 2
    edges = np.arange(-120, 121)

    def probs(scale: Fraction) -> list[float]:
        d = DiscreteLaplace(scale)
        p = [float(d.cdf(int(edges[0]) - 1))] + [float(d.pmf(int(z))) for z in edges]
        return [*p, float(d.sf(int(edges[-1]) + 1))]

    observed = [int((draws < edges[0]).sum())] + [int((draws == z).sum()) for z in edges]
    observed.append(int((draws > edges[-1]).sum()))
    assert_fits(chi2_cells(observed, probs(1 / half)))
    assert_rejects(chi2_cells(observed, probs(Fraction(13, 10) / half)))


def test_a_given_cap_ranks_every_selector_and_picks_one() -> None:
    # the complaint of the issue: keys only with a cap of 50 picked optimal selection
    plan = choose(1.0, 1e-8, keys_only=True, max_partitions=50)
    assert plan.fixed is not None and plan.fixed.name == "cumulative-sips"
    assert plan.fixed.mechanism.max_keys == 50
    names = [r["mechanism_name"] for r in plan.ranking]
    assert {"vote-selection", "cumulative-sips", "dp-sips", "wgm", "optimal-selection"} <= set(
        names
    )
    assert [r["users_at_half"] for r in plan.ranking] == sorted(
        r["users_at_half"] for r in plan.ranking
    )
    # one key per user: votes are optimal selection (same probabilities), and a selector
    assert choose(1.0, 1e-8, keys_only=True, max_partitions=1).fixed.name == "vote-selection"
    with_counts = choose(1.0, 1e-8, max_partitions=10)
    assert with_counts.fixed.name in {"vote-selection", "cumulative-sips", "dp-sips", "wgm"}
    assert {"gaussian-threshold", "stability"} <= {r["mechanism_name"] for r in with_counts.ranking}
    json.dumps(with_counts.explain())


def test_named_mechanisms_and_auto_caps() -> None:
    fixed = choose(1.0, 1e-6, mechanism="dp-sips", max_partitions=7)
    assert isinstance(fixed.fixed.mechanism, DPSIPS) and fixed.fixed.mechanism.max_keys == 7
    votes = choose(1.0, 1e-6, mechanism="vote-selection", keys_only=True)
    assert isinstance(votes.fixed.mechanism, VoteSelection)
    auto = choose(1.0, 1e-6, mechanism="cumulative-sips", max_partitions="auto")
    assert auto.needs_degree_histogram and "vote-selection" not in auto.candidates
    d = auto.decide(_histogram([30] * 20_000), None, SeededRandom(0))
    assert d.name == "cumulative-sips" and isinstance(d.mechanism, CumulativeSIPS)
    assert d.mechanism.max_keys == 30
    with pytest.raises(ValidationError, match="max_partitions"):
        choose(1.0, 1e-6, max_partitions="all")
    with pytest.raises(ValidationError, match="epsilon"):
        choose(-1.0, 1e-6)
    with pytest.raises(ValidationError, match="mechanism"):
        choose(1.0, 1e-6, mechanism="no-such-mechanism", max_partitions=3)


def test_rank_user_level_includes_per_key_mechanisms_with_the_degree_as_cap() -> None:
    rows = rank_user_level(1.0, 1e-8, keys_only=False, degree=5)
    caps = {r["mechanism_name"]: r["cap"] for r in rows}
    assert caps["vote-selection"] is None and caps["gaussian-threshold"] == 5
    assert all(math.isfinite(r["users_at_half"]) for r in rows)


def _pairs(users: list[int], keys: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"user": users, "key": keys})


def test_release_end_to_end_picks_by_the_data() -> None:
    rng = np.random.default_rng(3)
    # sparse: 6,000 users holding 1-2 of 40 keys (popular keys fill up; votes are plentiful)
    users, keys = [], []
    for u in range(6000):
        for k in rng.choice(40, size=int(rng.integers(1, 3)), replace=False, p=None):
            users.append(u)
            keys.append(int(k))
    plan = choose(1.0, 1e-6, keys_only=True)
    pairs = _pairs(users, keys)
    rel = plan.release(
        LocalWeightedSource(pairs, SeededRandom(1)),
        PairsVoteSource(np.array(users), np.array(keys), SeededRandom(2)),
        SeededRandom(3),
    )
    assert rel.metadata["choice"]["mechanism"] == "vote-selection"
    assert len(rel) == 40  # every key has 150-ish holders
    # dense: 800 users holding 60 of 3,000 keys each; every vote is needed
    users, keys = [], []
    for u in range(800):
        for k in rng.choice(3000, size=60, replace=False):
            users.append(u)
            keys.append(int(k))
    pairs = _pairs(users, keys)
    rel = plan.release(
        LocalWeightedSource(pairs, SeededRandom(1)),
        PairsVoteSource(np.array(users), np.array(keys), SeededRandom(2)),
        SeededRandom(3),
    )
    choice = rel.metadata["choice"]
    assert choice["mechanism"] == "cumulative-sips" and choice["cap"] in DEFAULT_PLAN_CAPS
