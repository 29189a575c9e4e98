"""The federated protocols' public constructors refuse every value outside their declared
constraints, with an error naming the parameter and the class the user called (invalid values
generated from the declarations, as for the mechanisms' options: ``tests/constraint_cases.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.constraint_cases import constraint_failures

from privhist.federated.baselines import CentralGeometric, HadamardResponse, ShuffleBernoulli
from privhist.federated.cpbm import Cpbm
from privhist.federated.triehh import TrieHH

#: a valid construction of each class (small, so each generated case is cheap)
BASELINES: dict[type, dict[str, Any]] = {
    TrieHH: {"epsilon": 4.0, "delta": 1e-6, "levels": 3, "level_epsilon": 1.0, "alphabet": "hi"},
    Cpbm: {"theta": 0.2, "m": 30, "clip": 1.0, "dimension": 4, "n_users": 3},
    CentralGeometric: {"epsilon": 1.0, "delta": 0.0, "domain_size": 8},
    HadamardResponse: {"epsilon": 1.0, "domain_size": 8},
    ShuffleBernoulli: {
        "epsilon": 1.0,
        "delta": 1e-6,
        "n_clients": 10_000,
        "domain_size": 8,
        "calibration": "balcer-cheu",
    },
}
#: structured parameters, checked by type and against each other in the constructor
STRUCTURED = {
    "alphabet": "a non-empty string",
    "terminator": "one character, not in the alphabet",
}


@pytest.mark.parametrize("cls", list(BASELINES), ids=lambda c: c.__name__)
def test_every_parameter_refuses_values_outside_its_declared_constraint(cls: Any) -> None:
    assert constraint_failures(cls, BASELINES[cls], STRUCTURED) == []


class _Unchecked(Cpbm):
    """Its declarations are no longer enforced (a mutation)."""

    @classmethod
    def check_parameter(cls, name: str, value: Any) -> Any:
        return value


def test_the_generated_check_catches_an_unenforced_declaration() -> None:
    # power check: without the declared checks, out-of-range values get through (or fail with
    # errors that are not the one template naming the class)
    failures = constraint_failures(_Unchecked, BASELINES[Cpbm])
    assert any("theta=0.25000000000000006 accepted" in f for f in failures), failures
    assert any("clip=" in f for f in failures), failures


def test_the_simulation_errors_name_the_class_the_user_called() -> None:
    # the Simulation builds a Server and an Aggregator: their checks are reported as its own
    from fractions import Fraction

    from privhist import ValidationError
    from privhist.federated.population import Population
    from privhist.federated.sample_threshold import Aggregator, Server, Simulation
    from privhist.mechanisms.sampling.cohort import FixedSizeCohort
    from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

    pop = Population.from_counts(["a"], [5])
    mech = SampleAndThreshold(1.0, 1e-3, sampling_rate=0.25)
    wrong_rate = FixedSizeCohort(100, Fraction(1, 5))
    for make, fn in (
        (lambda: Simulation(pop, "not a mechanism"), "Simulation"),  # type: ignore[arg-type]
        (lambda: Simulation(pop, mech, wrong_rate), "Simulation"),
        (lambda: Server(mech, wrong_rate), "Server"),
        (lambda: Aggregator(mech, wrong_rate), "Aggregator"),
    ):
        with pytest.raises(ValidationError) as info:
            make()
        assert info.value.function == fn, str(info.value)
