"""The federated sample-and-threshold round: sampling law, thresholding, cohorts, diagnostics."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.stats import assert_fits, assert_rejects, chi2_integer

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import SeededRandom
from privhist.federated.population import Population
from privhist.federated.sample_threshold import (
    Aggregator,
    Analyst,
    Client,
    Messages,
    Server,
    Simulation,
    simulate_round,
)
from privhist.mechanisms.sampling.cohort import FixedSizeCohort
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

MECH = SampleAndThreshold(1.0, 1e-3, sampling_rate=0.25)  # p = 1/4 exactly


def test_poisson_messages_are_binomial_per_item() -> None:
    # 20000 items held by 40 clients each: one round gives 20000 independent Binomial(40, 1/4)
    pop = Population.from_counts(np.arange(20000), np.full(20000, 40))
    msgs = Server(MECH).collect(pop, SeededRandom(11))
    assert msgs.dummies == 0 and not msgs.cohort_overflowed
    assert_fits(chi2_integer(msgs.counts, stats.binom(40, 0.25), 0, 40))
    # power: the same counts are rejected as Binomial(40, 0.27) and Binomial(41, 0.25)
    assert_rejects(
        [
            chi2_integer(msgs.counts, stats.binom(40, 0.27), 0, 40),
            chi2_integer(msgs.counts, stats.binom(41, 0.25), 0, 41),
        ]
    )


def test_round_release_law_matches_the_exact_key_distribution() -> None:
    # one item held by 12 clients, 4000 rounds; the mechanism's exact (rational) distribution of
    # "not released" / released count is the one whose DP the contract tests check exactly
    pop = Population.from_counts(["k"] + [f"u{i}" for i in range(4000)], [12] * 4001)
    m = SampleAndThreshold(1.0, 1e-2, sampling_rate=0.25)
    r = simulate_round(pop, m, SeededRandom(5)).release
    tau = m.threshold
    assert 2 <= tau <= 12
    # every item is an independent copy of the same 12-client key
    released = np.zeros(4001, dtype=np.int64)
    idx = np.searchsorted(pop.items, r.keys)
    assert r.values is not None
    released[idx] = r.values
    exact = {k: float(v) for k, v in m.key_distribution(12, 12).probabilities.items()}
    nr = exact.pop(next(k for k in exact if not isinstance(k, int)))
    # NR is coded as 0 (a released count is always >= tau >= 2)
    ks = np.arange(0, 13)
    probs = np.array([nr if k == 0 else exact.get(int(k), 0.0) for k in ks])
    model = stats.rv_discrete(values=(ks, probs / probs.sum()))
    assert_fits(chi2_integer(released, model, 0, 12))
    assert_rejects([chi2_integer(released, stats.binom(12, 0.25), 0, 12)])  # no threshold


def test_no_absent_item_and_threshold_and_estimates() -> None:
    pop = Population.from_counts(["a", "b", "c"], [10**6, 100, 1])
    res = simulate_round(pop, MECH, SeededRandom(2))
    r = res.release
    assert set(r.keys.tolist()) <= {"a", "b", "c"}
    assert r.values is not None and r.estimates is not None
    assert np.all(r.values >= MECH.threshold)
    assert np.allclose(r.estimates, r.values / 0.25)
    assert "a" in r.keys.tolist()  # 10**6 clients: Pr[missed] is astronomically small
    # diagnostics computed independently: mean |estimate - truth| over the three items
    est = {k: e for k, e in zip(r.keys.tolist(), r.estimates.tolist(), strict=True)}
    errs = [abs(est.get(k, 0.0) - c) for k, c in (("a", 10**6), ("b", 100), ("c", 1))]
    d = res.diagnostics
    assert d.mean_absolute_error == pytest.approx(sum(errs) / 3)
    assert d.max_absolute_error == pytest.approx(max(errs))
    assert d.mean_absolute_error_fraction == pytest.approx(sum(errs) / 3 / pop.size)
    assert "diagnostics" not in r.metadata and d.clients == pop.size


def test_billion_clients_cost_distinct_items() -> None:
    pop = Population.zipf(10**9, 2**10, 1.1)
    m = SampleAndThreshold(1.0, 1e-8)
    res = simulate_round(pop, m, SeededRandom(1))
    p = float(m.sampling_rate)
    mean, sd = 10**9 * p, math.sqrt(10**9 * p * (1 - p))
    assert abs(res.diagnostics.participants - mean) < 6 * sd
    assert res.release.keys[0] == 0  # the top item is released


def test_fixed_size_cohort_round() -> None:
    pop = Population.from_counts(np.arange(100), np.full(100, 100))
    cohort = FixedSizeCohort(10**4, MECH.sampling_rate, slack=10)
    res = simulate_round(pop, MECH, SeededRandom(3), cohort=cohort)
    d = res.diagnostics
    assert d.participants + d.dummies == cohort.cohort_size
    g = res.release.metadata["guarantee"]
    assert g["delta"] >= MECH.delta and "cohort" in res.release.metadata


def test_cohort_overflow_keeps_a_uniform_subset() -> None:
    # slack 0: the cohort is ceil(m) and overflows about half of the time; on overflow the
    # participants are a uniform s-subset of all clients, so item 0's count is hypergeometric
    n_a, n_b = 300, 700
    pop = Population.from_counts(["a", "b"], [n_a, n_b])
    cohort = FixedSizeCohort(1000, Fraction(1, 4), slack=1e-9)
    s = cohort.cohort_size
    server = Server(MECH, cohort)
    rng = SeededRandom(9)
    counts = []
    for _ in range(1500):
        msgs = server.collect(pop, rng)
        if msgs.cohort_overflowed:
            assert msgs.participants == s and msgs.dummies == 0
            counts.append(int(msgs.counts[0]))
        else:
            assert msgs.participants + msgs.dummies == s
    assert len(counts) > 400
    model = stats.hypergeom(n_a + n_b, n_a, s)
    assert_fits(chi2_integer(np.array(counts), model, 0, s))
    assert_rejects([chi2_integer(np.array(counts), stats.hypergeom(1000, 330, s), 0, s)])


def test_roles() -> None:
    assert Client("hi").message() == "hi"
    msgs = Messages(np.array(["x", "y"]), np.array([MECH.threshold, 0]), dummies=3)
    r = Aggregator(MECH).release(msgs, SeededRandom(0))
    assert r.keys.tolist() == ["x"]
    a = Analyst(r)
    assert a.top(5) == ["x"] and a.estimate("y") == 0.0
    assert a.estimate("x") == pytest.approx(MECH.threshold / 0.25)


def test_bad_input() -> None:
    pop = Population.from_counts(["a"], [5])
    with pytest.raises(ValidationError, match="parameter 'sampling_rate'"):
        SampleAndThreshold(0.1, 1e-6, sampling_rate=0.5)  # above 1 - e^-0.1: ratio bound fails
    with pytest.raises(ValidationError, match="parameter 'threshold'"):
        SampleAndThreshold(1.0, 1e-6, threshold=0)
    with pytest.raises(ValidationError, match="parameter 'epsilon'"):
        SampleAndThreshold(-1.0, 1e-6)
    with pytest.raises(ValidationError, match="parameter 'mechanism'"):
        Server(SampleAndThreshold(1.0, 1e-3, Neighbouring.user(2, 1)))
    with pytest.raises(ValidationError, match="parameter 'cohort'"):
        Server(MECH, FixedSizeCohort(100, Fraction(1, 5)))
    with pytest.raises(ValidationError, match="parameter 'population'"):
        Server(MECH, FixedSizeCohort(3, Fraction(1, 4))).collect(pop, SeededRandom(0))
    with pytest.raises(ValidationError, match="parameter 'population'"):
        Simulation("not a population", MECH)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'rng'"):
        Simulation(pop, MECH).run(7)  # type: ignore[arg-type]
    with pytest.raises(InputDataError):
        Population.from_counts(["a"], [0])


def test_aggregator_checks_its_cohort() -> None:
    """The aggregator states the cohort's delta: a cohort at another rate (or not a cohort) is
    refused, as the server refuses it."""
    with pytest.raises(ValidationError, match="parameter 'cohort' of Aggregator"):
        Aggregator(MECH, FixedSizeCohort(100, Fraction(1, 5)))
    with pytest.raises(ValidationError, match="parameter 'cohort' of Aggregator"):
        Aggregator(MECH, "cohort")  # type: ignore[arg-type]


def test_cohort_overflow_costs_the_overflow_not_the_sample() -> None:
    """On overflow the server drops S - s uniform sampled clients (about sqrt(m) of them) instead
    of listing all S; the peak memory stays far below 8 bytes per sampled client."""
    import tracemalloc

    n = 4_000_000
    pop = Population.from_counts(["a", "b"], [n // 4, n - n // 4])
    cohort = FixedSizeCohort(n, Fraction(1, 4), slack=1e-9)
    server = Server(MECH, cohort)
    rng = SeededRandom(12)
    for _ in range(40):
        tracemalloc.start()
        try:
            msgs = server.collect(pop, rng)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        if msgs.cohort_overflowed:
            break
    assert msgs.cohort_overflowed and msgs.participants == cohort.cohort_size
    assert peak < 2 * 10**6  # listing the S ~ 10**6 sampled clients would take 8 MB
