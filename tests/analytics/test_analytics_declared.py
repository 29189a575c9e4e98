"""The analytics classes' public parameters refuse every value outside their declared
constraints, with an error naming the parameter and the class the user called (invalid values
generated from the declarations, as for the mechanisms' options: ``tests/constraint_cases.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.constraint_cases import constraint_failures

from privhist.analytics.hierarchy import Hierarchy
from privhist.analytics.quantiles import BinarySearchQuantiles
from privhist.analytics.quantiles_cohort import FixedCohortQuantiles
from privhist.analytics.range_query import HierarchicalHistogram
from privhist.core.constraints import Declared

#: a valid construction of each class (small, so each generated case is cheap)
BASELINES: dict[type[Declared], dict[str, Any]] = {
    Hierarchy: {"lo": 0.0, "hi": 1.0, "branching": 2, "levels": 3},
    BinarySearchQuantiles: {"epsilon": 1.0, "delta": 1e-6, "steps": 4},
    FixedCohortQuantiles: {
        "epsilon": 1.0,
        "delta": 1e-6,
        "clients": 5_000,
        "cohort_size": 500,
        "steps": 5,
    },
    HierarchicalHistogram: {"epsilon": 1.0, "delta": 1e-6, "levels": 3},
}


@pytest.mark.parametrize("cls", list(BASELINES), ids=lambda c: c.__name__)
def test_every_parameter_refuses_values_outside_its_declared_constraint(cls: Any) -> None:
    assert constraint_failures(cls, BASELINES[cls]) == []


class _Unchecked(BinarySearchQuantiles):
    """Its declarations are no longer enforced (a mutation)."""

    @classmethod
    def check_parameter(cls, name: str, value: Any) -> Any:
        return value


class _Unnamed:
    """Builds a HierarchicalHistogram inside, without naming itself in the errors (a mutation)."""

    @classmethod
    def constraints(cls) -> dict[str, Any]:
        return HierarchicalHistogram.constraints()

    def __init__(self, epsilon: float, delta: float, **kwargs: Any) -> None:
        self.inner = HierarchicalHistogram(epsilon, delta, **kwargs)


class _Undeclared(BinarySearchQuantiles):
    """A parameter without a declaration (a mutation)."""

    def __init__(self, epsilon: float, delta: float, *, spare: int = 1, **kwargs: Any) -> None:
        super().__init__(epsilon, delta, **kwargs)


def test_the_generated_check_catches_unenforced_unnamed_and_undeclared_parameters() -> None:
    # power check: each mutation of a sound class makes the generated check fail
    unchecked = constraint_failures(_Unchecked, BASELINES[BinarySearchQuantiles])
    assert any("quantiles=1.5 accepted" in f for f in unchecked), unchecked
    unnamed = constraint_failures(_Unnamed, BASELINES[HierarchicalHistogram])
    assert unnamed and all("of HierarchicalHistogram" in f for f in unnamed), unnamed
    undeclared = constraint_failures(_Undeclared, BASELINES[BinarySearchQuantiles])
    assert undeclared == ["_Undeclared: parameter 'spare' declares no constraint"], undeclared
