"""User-level selectors and caps at their edges: calibration refusals, the DP cap's inputs and
quantile boundary, cumulative-sips' checks of its source and weights, and every selector's
certified delta and private-key bound as upper bounds of the independently computed values."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from tests.contracts import formulas as F

from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.core.weighted import WeightedCounts
from privhist.mechanisms import registry
from privhist.mechanisms.user_level import _gauss
from privhist.mechanisms.user_level._gauss import (
    calibrate_rho,
    calibrate_threshold,
    release_bound,
    search_threshold,
    tail_upper,
    unit_weights,
)
from privhist.mechanisms.user_level.caps import (
    CAP_CANDIDATES,
    cap_from_histogram,
    dp_degree_cap,
)
from privhist.mechanisms.user_level.cumulative import CumulativeSIPS


def test_calibrate_rho_refuses_deltas_outside_zero_one_and_too_small_ones() -> None:
    for delta in (0.0, 1.0, 1.5, -1e-9):
        with pytest.raises(ValidationError):
            calibrate_rho(1.0, delta)
    with pytest.raises(ValidationError, match="large enough"):
        calibrate_rho(1e-12, 1e-12)  # no rho on the 2**-40 grid is that small
    rho = calibrate_rho(1.0, 1e-6)
    assert (rho * 2**40).denominator == 1 and F.zcdp_delta(rho, 1.0) <= 1e-6


def test_cap_from_histogram_takes_the_first_candidate_reaching_the_quantile() -> None:
    h = [0] * (len(CAP_CANDIDATES) + 1)
    h[0], h[1] = 9, 1
    assert cap_from_histogram(h, 0.9) == CAP_CANDIDATES[0]  # exactly 90 % at the first
    h[0], h[1] = 1, 9
    assert cap_from_histogram(h, 0.9) == CAP_CANDIDATES[1]
    assert cap_from_histogram([0] * len(h), 0.9) == CAP_CANDIDATES[0]
    h = [0] * len(h)
    h[-1] = 5  # all beyond the candidates: the largest
    assert cap_from_histogram(h, 0.5) == CAP_CANDIDATES[-1]


def test_dp_degree_cap_refuses_bad_inputs() -> None:
    good = np.zeros(len(CAP_CANDIDATES) + 1, dtype=np.int64)
    for kwargs in (
        {"rho": Fraction(1, 100), "epsilon": 0.1},
        {},
        {"rho": Fraction(0)},
        {"epsilon": 0.0},
        {"epsilon": -1.0},
    ):
        with pytest.raises(ValidationError):
            dp_degree_cap(good, rng=SeededRandom(1), **kwargs)
    for bad in (good[:-1], good.astype(np.float64), np.zeros((2, len(good)), dtype=np.int64)):
        with pytest.raises(ValidationError):
            dp_degree_cap(bad, epsilon=0.1, rng=SeededRandom(1))
    assert dp_degree_cap(good, epsilon=0.1, rng=SeededRandom(1)).noise == "discrete_laplace"
    assert dp_degree_cap(good, rho=Fraction(1, 100), rng=SeededRandom(1)).noise == (
        "discrete_gaussian"
    )


def test_cumulative_sips_needs_a_weight_for_every_held_key() -> None:
    with pytest.raises(ValidationError) as err:
        CumulativeSIPS(1.0, 1e-6, max_keys=5, scale=2)  # floor(2 / sqrt(5)) = 0
    assert err.value.parameter == "scale"
    sel = CumulativeSIPS(1.0, 1e-6, max_keys=4, scale=2)  # floor(2 / sqrt(4)) = 1 is enough
    assert min(sel.weights) == 1


class _Source:
    """A weighted source scripted round by round (its ``held_sums`` answers in order)."""

    def __init__(self, rounds: list[list[str]]) -> None:
        self.rounds = rounds
        self.calls = 0

    def held_sums(self, max_keys: int, scale: int, exclude: Any = None) -> WeightedCounts:
        keys = self.rounds[min(self.calls, len(self.rounds) - 1)]
        self.calls += 1
        ex = set() if exclude is None else set(np.asarray(exclude).tolist())
        keys = [k for k in keys if k not in ex]
        return WeightedCounts.from_arrays(keys, [scale] * len(keys), scale=scale, max_keys=max_keys)

    weighted_sums = held_sums

    def unit_counts(self, keys: Any, max_keys: int) -> Any:
        raise AssertionError("not asked in these tests")

    def degree_histogram(self, bounds: Any) -> Any:
        raise AssertionError("not asked in these tests")

    def records_histogram(self, bounds: Any) -> Any:
        raise AssertionError("not asked in these tests")


@pytest.mark.parametrize("new", ["zz", "ba", "aa"])
def test_cumulative_sips_refuses_a_key_that_was_not_a_candidate_before(new: str) -> None:
    """Held subsets: every candidate of a round was one in the earlier rounds; a source that
    brings a new key (after, between or before the others) is refused."""
    sel = CumulativeSIPS(1.0, 1e-6, max_keys=2, scale=64, rounds=3, ratio=1.0)
    keys = ["b", "c", "d"]
    with pytest.raises(ValidationError) as err:
        sel.release_weighted(_Source([keys, [*keys, new]]), SeededRandom(1))  # type: ignore[arg-type]
    assert err.value.parameter == "source"
    rel = sel.release_weighted(_Source([keys]), SeededRandom(1))  # type: ignore[arg-type]
    assert set(rel.keys.tolist()) <= set(keys)


# -- certificates are upper bounds of the independent values ----------------------------------


@pytest.mark.parametrize(
    ("eps", "delta", "max_keys", "scale", "counts"),
    [(1.0, 1e-6, 3, 64, False), (0.5, 1e-8, 5, 32, True), (4.0, 1e-5, 2, 128, True)],
)
def test_selector_certificates_bound_the_independent_values(
    eps: float, delta: float, max_keys: int, scale: int, counts: bool
) -> None:
    from tests.contracts.test_noise_spy import _selector_delta, _weights

    for name, cls in registry.weighted_registry().items():
        sel = cls(eps, delta, max_keys=max_keys, scale=scale, counts=counts)
        assert sel.weights == _weights(scale, max_keys)
        mine = _selector_delta(sel, sel.sigma2s, sel.thresholds, sel.count_sigma2, sel.spent_rho)
        got = sel.certified_delta()
        assert got >= mine * (1 - 1e-9), (name, got, mine)
        assert got <= delta
        if getattr(sel, "uses_held_subsets", False):
            assert got <= mine * (1 + 1e-6) + 1e-18, (name, got, mine)
        else:
            p_f = mpmath.fsum(
                max(1 - (1 - F.dg_sf(s, t - w)) ** i for i, w in enumerate(sel.weights, 1))
                for s, t in zip(sel.sigma2s, sel.thresholds, strict=True)
            )
            assert sel.private_key_bound() >= p_f


def test_release_bound_rounds_up_its_own_formula() -> None:
    """``max_t 1 - (1 - q_t)**t`` with ``q_t`` the rigorous tail bounds: the float result stays
    at or above the exact value of that expression (computed here in 60 digits) on many
    inputs, whatever the rounding of ``log1p`` and ``expm1``."""
    rng = np.random.default_rng(4)
    for _ in range(200):
        s2 = Fraction(int(rng.integers(1, 10**6)), int(rng.integers(1, 1000)))
        sigma = math.sqrt(float(s2))
        weights = sorted((int(w) for w in rng.integers(1, 4 * sigma + 3, size=4)), reverse=True)
        t = int(weights[0] + rng.integers(0, int(6 * sigma) + 2))
        got = release_bound(s2, t, weights)
        with mpmath.workdps(60):
            exact = max(
                1 - (1 - mpmath.mpf(tail_upper(s2, t - w))) ** i for i, w in enumerate(weights, 1)
            )
        assert got >= exact, (s2, t, weights, got, exact)


#: thresholds' cases: small and large noise (term sums and the analytic tail), one to 100 keys,
#: targets from 0.4 to 3e-12, and equal weights (Gaussian thresholding's)
THRESHOLD_CASES = [
    (s2, unit_weights(scale, keys), target)
    for scale, s2 in [
        (4, Fraction(1)),
        (4, Fraction(3, 2)),
        (64, Fraction(64 * 64 * 7, 2)),
        (1024, Fraction(1024 * 1024, 3)),
        (1024, Fraction(987_654_321, 1000)),
    ]
    for keys in (1, 3, 20, 100)
    for target in (0.4, 1e-6, 3e-12)
] + [(Fraction(2), [3] * 10, 1e-6), (Fraction(10**6), [5000] * 4, 1e-9)]


@pytest.mark.parametrize("case", THRESHOLD_CASES)
def test_the_threshold_is_the_smallest_the_certified_bound_allows(case: Any) -> None:
    """The search in doubles only guides: the answer meets the certified bound, one less does
    not, and it is the answer of the same search run on the certified bound alone."""
    s2, weights, target = case
    t = calibrate_threshold(s2, weights, target)
    assert release_bound(s2, t, weights) <= target
    assert t == 1 or release_bound(s2, t - 1, weights) > target
    assert t == search_threshold(lambda m: release_bound(s2, m, weights), s2, weights, target)


@pytest.mark.parametrize("far", [None, 40])
def test_a_wrong_guide_moves_the_threshold_to_the_same_answer(
    far: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guide that says every threshold passes (the walk starts at 1) or that only those
    ``far`` above the answer do: the certified bound still brings it to the smallest one."""
    s2, weights, target = Fraction(1024 * 1024, 3), unit_weights(1024, 5), 1e-6
    want = calibrate_threshold(s2, weights, target)
    assert want > 1

    def guide(_s2: Fraction, m: int, _w: Any) -> float:
        return 0.0 if far is None or m >= want + far else 1.0

    monkeypatch.setattr(_gauss, "_release_guess", guide)
    assert calibrate_threshold(s2, weights, target) == want
