"""``plan_bounded_geometric``: the exact distribution of GeoSample, checkable by hand."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from privhist import ValidationError
from privhist.mechanisms.finite import GeoSample
from privhist.planning.finite import plan_bounded_geometric


@pytest.mark.parametrize(
    ("epsilon", "n", "c"), [(1, 1, 0), (1, 3, 1), ("1/10", 40, 0), (0.3, 25, 25)]
)
def test_plan_is_exact_and_self_consistent(epsilon: object, n: int, c: int) -> None:
    plan = plan_bounded_geometric(epsilon, n, c)
    k = plan["parameters"]["K"]
    p, q = 2**k, 2**k + 1
    d = plan["denominator"]
    assert d == q ** (n - 1) * (2 * p + 1)  # the formula printed next to it
    assert plan["denominator_formula"] == f"d = {q}**{n - 1} * {2 * p + 1}"
    scaled = plan["scaled_cdf"]
    assert len(scaled) == n + 1 and scaled[-1] == d
    assert all(isinstance(x, int) for x in scaled)
    assert scaled == sorted(scaled)
    # the closed forms of the module notes, by hand
    for z in range(n):
        if z < c:
            assert scaled[z] == p ** (c - z) * q ** (n - c + z)
        else:
            assert scaled[z] == d - p ** (z - c + 1) * q ** (n - 1 - z + c)
    pmf = [Fraction(x) for x in plan["pmf"]]
    assert all("/" in x for x in plan["pmf"])
    assert sum(pmf) == 1
    assert [sum(pmf[: z + 1]) * d for z in range(n + 1)] == scaled
    g = GeoSample(n, epsilon)
    assert pmf == g.pmf(c)
    assert plan["parameters"]["ratio"] == f"{q}/{p}" == plan["guarantee"]["ratio"]
    assert plan["parameters"]["alpha"] == f"{p}/{q}"
    assert plan["guarantee"]["epsilon"] <= float(Fraction(str(epsilon))) / 2
    assert g.error_bound(plan["accuracy"]["half_width"]) <= Fraction(1, 20)
    json.dumps(plan)  # JSON-friendly (big ints included)


def test_plan_validation() -> None:
    with pytest.raises(ValidationError, match="nearest valid setting is epsilon=1"):
        plan_bounded_geometric(2, 10, 3)
    with pytest.raises(ValidationError, match=r"parameter 'n' .* n = 0"):
        plan_bounded_geometric(1, 0, 0)
    for bad in (-1, 11, 2.0, True):
        with pytest.raises(ValidationError, match="parameter 'true_count'"):
            plan_bounded_geometric(1, 10, bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"parameter 'n' .* at most \d+ at K=5"):
        plan_bounded_geometric(0.1, 100_000, 3)
