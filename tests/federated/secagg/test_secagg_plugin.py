"""SecAgg / SecAgg+ plugged into TFFE, MFFE, sample-and-threshold rounds and TrieHH++: the same
release as with the ideal secure sum."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from privhist.core.errors import ProtocolAbort, UnsupportedError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated import ffe
from privhist.federated.kashin import OrthogonalFrame
from privhist.federated.population import Population
from privhist.federated.sample_threshold import simulate_round
from privhist.federated.secagg import SecAggregator, aggregator_factory
from privhist.federated.secure_sum import IdealSecureSum, secure_histogram
from privhist.federated.triehh import TrieHH
from privhist.federated.user_data import generate_iid
from privhist.mechanisms.sampling.cohort import FixedSizeCohort
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold


class _Counting:
    """Wraps a factory and records the (modulus, dimension, contributors) of every sum."""

    def __init__(self, name: str) -> None:
        self.inner = aggregator_factory(name, SeededRandom(99))
        self.calls: list[tuple[int, int, int]] = []

    def __call__(self, modulus: int, dimension: int) -> Any:
        agg = self.inner(modulus, dimension)
        outer = self

        class Recorded:
            def aggregate(self, shares: Any) -> Any:
                out = agg.aggregate(shares)
                outer.calls.append((modulus, dimension, int(getattr(agg, "contributors", -1))))
                return out

        return Recorded()


@pytest.mark.parametrize("name", ["secagg", "secagg+"])
def test_tffe_release_is_the_ideal_ones(name: str) -> None:
    users = generate_iid(40, 6, SeededRandom(1), items_per_user=5)
    frame = OrthogonalFrame(6, 8, SeededRandom(2))
    kw: dict[str, Any] = {"m": 4, "m_quantile": 2, "max_items": 5, "bits": 3}
    ideal = ffe.tffe(users, frame, SeededRandom(3), **kw)
    counting = _Counting(name)
    real = ffe.tffe(users, frame, SeededRandom(3), aggregator=counting, **kw)
    assert np.array_equal(real.estimate, ideal.estimate)
    assert real.clips == ideal.clips
    assert [c[2] for c in counting.calls] == [40, 40]  # both phases ran the protocol


def test_mffe_release_is_the_ideal_ones() -> None:
    users = generate_iid(30, 4, SeededRandom(4), items_per_user=5)
    frame = OrthogonalFrame(4, 4, SeededRandom(5))
    kw: dict[str, Any] = {"m": 3, "m_quantile": 3, "rounds": 2, "initial_clip": 2.0}
    ideal = ffe.mffe(users, frame, SeededRandom(6), **kw)
    real = ffe.mffe(users, frame, SeededRandom(6), aggregator=aggregator_factory("secagg+"), **kw)
    assert np.array_equal(real.estimate, ideal.estimate) and real.clips == ideal.clips


@pytest.mark.parametrize("cohort", [False, True])
def test_sample_and_threshold_round_is_the_ideal_ones(cohort: bool) -> None:
    pop = Population.from_counts(["a", "b", "c", "d"], [40, 25, 6, 2])
    mech = SampleAndThreshold(2.0, 0.05, sampling_rate=0.5, threshold=5)
    co = FixedSizeCohort(100, mech.sampling_rate, slack=2.0) if cohort else None
    ideal = simulate_round(pop, mech, SeededRandom(7), cohort=co).release
    counting = _Counting("secagg")
    res = simulate_round(pop, mech, SeededRandom(7), cohort=co, secure_sum=counting)
    real = res.release
    assert real.keys.tolist() == ideal.keys.tolist()
    assert np.array_equal(real.values, ideal.values)
    (modulus, dim, contributors) = counting.calls[0]
    assert dim == 4 and contributors == res.diagnostics.participants + res.diagnostics.dummies
    assert modulus == contributors + 1


def test_triehh_is_the_ideal_ones_and_sums_over_public_candidates() -> None:
    pop = Population.from_counts(["ab", "ba", "bb", "a"], [30, 20, 4, 12])
    hh = TrieHH(epsilon=4.0, delta=1e-4, levels=3, level_epsilon=2.0, alphabet="ab")
    ideal = hh.run(pop, SeededRandom(8))
    counting = _Counting("secagg+")
    real = hh.run(pop, SeededRandom(8), secure_sum=counting)
    assert real.items.tolist() == ideal.items.tolist()
    assert np.array_equal(real.counts, ideal.counts)
    # level 1 sums over a, b and the terminator: 3 public candidates
    assert counting.calls and counting.calls[0][1] == 3


def test_secure_histogram_is_exact_and_bounded() -> None:
    got = secure_histogram(
        [3, 0, 2], aggregator_factory("secagg", SeededRandom(1)), positions=[4, 0, 1], dimension=6
    )
    assert got.tolist() == [0, 2, 0, 0, 3, 0]
    assert secure_histogram([0, 0], aggregator_factory("secagg")).tolist() == [0, 0]
    with pytest.raises(ProtocolAbort):
        secure_histogram([0, 1], aggregator_factory("secagg", SeededRandom(1)))
    with pytest.raises(UnsupportedError):
        secure_histogram([1 << 20], IdealSecureSum, dimension=1 << 10, positions=[0])
    with pytest.raises(ValidationError):
        secure_histogram([1, 2], IdealSecureSum, positions=[0, 5], dimension=3)


def test_factory_names_and_single_client_refusal() -> None:
    assert aggregator_factory("ideal") is IdealSecureSum
    with pytest.raises(ValidationError, match="secure_sum"):
        aggregator_factory("bogus")
    with pytest.raises(ProtocolAbort, match="at least 2"):
        SecAggregator(5, 2, rng=SeededRandom(0)).aggregate([[1, 2]])
