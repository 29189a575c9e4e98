"""The contract every registered mechanism must pass.

A mechanism registered with :func:`privhist.mechanisms.registry.register` provides small
instances (``test_instances``); this module checks each of them:

* the exact per-key privacy profile, both directions, on neighbouring counts (unit count ``u`` vs
  ``u + 1`` with the record count moving by 1..c), with "not released" as an output;
* that releases follow the analysed per-key distribution (reporting frequency and released values,
  goodness of fit at alpha = 1e-6), so the exact check is about what the code samples;
* canonical (sorted) order, no key outside the input (or the public domain), zero data, keys with
  count 0 and metadata;
* validation: invalid values generated from every declared constraint (epsilon, delta,
  confidence and each option) are refused with a ValidationError naming the parameter and the
  class, with a power check on deliberately broken declarations.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats
from tests.constraint_cases import constraint_failures, invalid_values
from tests.stats import ALPHA

import privhist.mechanisms  # noqa: F401  (registers the built-in mechanisms)
from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import NOT_RELEASED, check_dp, product_distribution
from privhist.core.data import Counts
from privhist.core.neighbouring import Relation
from privhist.core.validation import Constraint
from privhist.mechanisms import (
    DenseHistogram,
    GaussianThresholdHistogram,
    OptimalSelection,
    StabilityHistogram,
    registry,
)
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option

INSTANCES = [
    pytest.param(m, id=f"{name}-{i}")
    for name, cls in sorted(registry.registry().items())
    for i, m in enumerate(cls.test_instances())
]
SLACK = 1e-30  # the per-key distributions are computed with 160-bit floats


def test_every_registered_mechanism_has_test_instances() -> None:
    for name, cls in registry.registry().items():
        assert cls.test_instances(), f"{name} registers no test instances"


def _input_for(m: Mechanism, keys: list[Any], counts: list[int]) -> Counts:
    nb = m.neighbouring
    if nb.relation is Relation.USER:
        c = nb.max_contributions_per_partition
        units = [-(-n // c) for n in counts]  # fewest units that can hold n records
        return Counts.from_arrays(keys, counts, units, neighbouring=nb)
    return Counts.from_arrays(keys, counts)


def _check_range(m: Mechanism) -> range:
    rp = m.reporting_probability(2000)
    hit = np.nonzero(rp >= 1.0)[0]
    top = int(hit[0]) + 2 if hit.size else 40
    return range(0, min(top, 60))


def neighbouring_pairs(m: Mechanism) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(units, count) pairs one neighbouring step apart, for one key."""
    c = m.neighbouring.max_contributions_per_partition
    pairs = []
    for u in _check_range(m):
        for n in sorted({c * u, u}):  # extreme record counts for u units
            for j in range(1, c + 1):
                pairs.append(((u, n), (u + 1, n + j)))
    return pairs


PER_KEY = [p for p in INSTANCES if p.values[0].per_key_composable]
JOINT = [p for p in INSTANCES if not p.values[0].per_key_composable]


@pytest.mark.parametrize("mech", PER_KEY)
def test_exact_per_key_privacy_both_directions(mech: Mechanism) -> None:
    kb = mech.key_budget()
    l0 = mech.neighbouring.l0_sensitivity
    g = mech.guarantee()
    # the whole guarantee is the basic composition of l0 per-key guarantees
    assert kb.epsilon * l0 == pytest.approx(g.epsilon) and kb.delta * l0 == pytest.approx(g.delta)
    worst = 0.0
    for (u0, n0), (u1, n1) in neighbouring_pairs(mech):
        p, q = mech.key_distribution(u0, n0), mech.key_distribution(u1, n1)
        res = _check(p, q, kb.epsilon, kb.delta)
        assert res.holds, f"{mech.name}: ({u0},{n0}) vs ({u1},{n1}): {res}"
        worst = max(worst, float(res.worst))
    # the guarantee is used, not wildly loose: the worst pair comes close to delta (or is pure)
    if kb.delta > 0:
        assert worst > kb.delta * 0.05, f"worst delta {worst} far below {kb.delta}"


def _check(p: KeyDistribution, q: KeyDistribution, eps: float, delta: float) -> Any:
    return check_dp(
        p.probabilities, q.probabilities, eps, delta, slack=SLACK, tail_p=p.tail, tail_q=q.tail
    )


def _check_joint(p: KeyDistribution, q: KeyDistribution, l0: int, eps: float, delta: float) -> Any:
    """The product over the l0 touched keys, each with the same per-key pair."""
    return check_dp(
        product_distribution(*[p.probabilities] * l0),
        product_distribution(*[q.probabilities] * l0),
        eps,
        delta,
        slack=SLACK,
        tail_p=1 - (1 - p.tail) ** l0,
        tail_q=1 - (1 - q.tail) ** l0,
    )


@pytest.mark.parametrize("mech", JOINT)
def test_exact_joint_privacy(mech: Mechanism) -> None:
    """Mechanisms calibrated on the joint loss: check the product distribution of the l0 keys
    one step touches, each moved by c (the largest shift), against the whole guarantee."""
    l0 = mech.neighbouring.l0_sensitivity
    c = mech.neighbouring.max_contributions_per_partition
    g = mech.guarantee()
    worst = 0.0
    for n in (0, 3):
        p, q = mech.key_distribution(n, n), mech.key_distribution(n + 1, n + c)
        res = _check_joint(p, q, l0, g.epsilon, g.delta)
        assert res.holds, f"{mech.name}: {res}"
        worst = max(worst, float(res.worst))
    # not wildly loose: some pair comes close to delta (for a thresholded mechanism that is the
    # key only the added user holds; counts far below the threshold are rarely released at all)
    assert worst > g.delta * 0.05


#: mechanisms whose release has no rows; their law and encoding are tested in their own files
ROWLESS = {
    "compact": "a compact release is a polynomial, not rows; its law over whole releases and "
    "its per-key order are checked in tests/finite/test_finite_compact.py",
    "pure-sparse": "a joint release over a universe that may name keys absent from the data; "
    "exact joint checks are in tests/finite/test_finite_pure_sparse.py",
    "sparse": "KH'' releases noise-only bins of the universe; its joint law is checked against "
    "KeepHeavy's by enumeration in tests/finite/test_finite_sparse.py",
    "kh-prime": "KH' releases noise-only bins of the universe; its joint law is checked against "
    "KeepHeavy's by enumeration in tests/finite/test_finite_sparse.py",
}

#: constructor arguments for the delta = 0 check of mechanisms whose exact (delta = 0) form is
#: limited to small universes (exact order statistics, Balcer & Vadhan Theorem 6.4)
SMALL_UNIVERSE = {
    "sparse": {"universe_bits": 10, "count_bound": 100},
    "kh-prime": {"universe_bits": 10, "count_bound": 100},
}


def _weaken(mech: Mechanism) -> Mechanism:
    """A copy of ``mech`` made slightly too revealing (a mutation for the power check)."""
    from privhist.mechanisms.finite.compact import CompactHistogram
    from privhist.mechanisms.finite.histograms import BasicHistogram, StabilityGeometricHistogram
    from privhist.mechanisms.finite.sparse import SparseHistogram

    m = copy.copy(mech)
    if isinstance(m, StabilityHistogram):
        m.threshold -= 1
    elif isinstance(m, OptimalSelection):
        nums = m._nums.copy()
        nums[1:-1] += nums[1:-1] // 10**9 + 1  # every probability up by ~1e-9, relative
        m._nums = nums
    elif isinstance(m, registry.get("sample-and-threshold")):
        m.threshold -= 1  # type: ignore[attr-defined]  # the exact threshold is the smallest
    elif isinstance(m, GaussianThresholdHistogram):
        # the threshold set for twice the stated delta (all of it on keys one user holds alone)
        from privhist.mechanisms.user_level._gauss import calibrate_threshold

        c = m.neighbouring.linf_sensitivity
        m.threshold = calibrate_threshold(
            m.sigma2, [c] * m.neighbouring.l0_sensitivity, 2 * m.delta
        )
    elif isinstance(m, DenseHistogram):
        if m.laplace is not None:
            noise = copy.copy(m.laplace)
            noise.scale = noise.scale * Fraction(99, 100)
            m.laplace = noise
        else:
            assert m.sigma2 is not None
            m.sigma2 = m.sigma2 * Fraction(9, 10)
    elif isinstance(m, BasicHistogram):
        # per-record ratio 1 + 2**(2-K) where 1 + 2**-K was calibrated: caught when K >= 2
        assert m.k >= 2
        m.sampler = m.sampler.with_k(m.k - 2)
    elif isinstance(m, StabilityGeometricHistogram):
        m.threshold -= 1
    elif isinstance(m, SparseHistogram):
        assert m.k >= 2
        m.sampler = m.sampler.with_k(m.k - 2)
    elif isinstance(m, CompactHistogram):
        assert m.k >= 2  # as for BasicHistogram: a ratio calibrated for K, drawn with K - 2
        m.sampler = m.sampler.with_k(m.k - 2)
    else:
        pytest.fail(f"no mutation for {type(mech).__name__}: add one to _weaken")
    return m


@pytest.mark.parametrize("mech", INSTANCES)
def test_the_privacy_check_catches_a_slightly_weaker_mechanism(mech: Mechanism) -> None:
    """Power check: the same exact check must fail on a mutated mechanism."""
    weak = _weaken(mech)
    l0 = mech.neighbouring.l0_sensitivity
    c = mech.neighbouring.max_contributions_per_partition
    kb, g = mech.key_budget(), mech.guarantee()
    for (u0, n0), (u1, n1) in neighbouring_pairs(mech):
        p, q = weak.key_distribution(u0, n0), weak.key_distribution(u1, n1)
        if mech.per_key_composable:
            res = _check(p, q, kb.epsilon, kb.delta)
        elif n1 - n0 == c:
            res = _check_joint(p, q, l0, g.epsilon, g.delta)
        else:
            continue
        if not res.holds:
            return
    pytest.fail(f"the exact check did not catch a weakened {mech.name}")


@pytest.mark.parametrize("mech", INSTANCES)
def test_release_follows_the_analysed_distribution(mech: Mechanism) -> None:
    if mech.name in ROWLESS:
        pytest.skip(ROWLESS[mech.name])
    rng = SeededRandom(20261120)
    n_keys = 4000
    rp = mech.reporting_probability(200)
    # counts where the outcome is random: around the 50% point, or small counts for dense
    hit = np.nonzero(rp >= 0.5)[0]
    centre = int(hit[0]) if hit.size else 3
    keys = np.arange(n_keys)
    if mech.needs_domain:  # the same mechanism over a domain as large as the test input
        mech = type(mech)(
            mech.epsilon,
            mech.delta,
            mech.neighbouring,
            domain=keys,
            noise=mech.noise_kind,  # type: ignore[attr-defined, call-arg]
        )
    nonzero = np.nonzero(rp > 0)[0]
    first = int(nonzero[0]) if nonzero.size else 1
    # the delta regime (count 1 and the first count with any chance of release) and the middle
    for count in sorted({1, max(1, first), max(1, centre - 1), centre, centre + 2}):
        dist = mech.key_distribution(*_units_and_count(mech, count))
        data = _input_for(mech, keys.tolist(), [count] * n_keys)
        rel = mech.release(data, rng)
        p_release = 1 - float(dist.probabilities.get(NOT_RELEASED, 0))
        n_out = int(np.isin(rel.keys, keys).sum())
        assert stats.binomtest(n_out, n_keys, min(max(p_release, 0.0), 1.0)).pvalue > ALPHA
        if rel.values is not None and n_out > 50:
            _gof_values(rel.values, dist.probabilities, n_out)


def _units_and_count(m: Mechanism, count: int) -> tuple[int, int]:
    c = m.neighbouring.max_contributions_per_partition
    return -(-count // c), count


def _gof_values(values: np.ndarray[Any, Any], probs: dict[Any, Any], n: int) -> None:
    support = sorted(k for k in probs if k is not NOT_RELEASED and isinstance(k, int))
    p = np.array([float(probs[k]) for k in support])
    p = p / p.sum()
    obs = np.array([(values == k).sum() for k in support], dtype=float)
    exp = p * n
    # pool bins from both ends until each expected count is >= 5
    order = np.argsort(support)
    obs, exp = obs[order], exp[order]
    bins_o, bins_e, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(obs, exp, strict=True):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            bins_o.append(acc_o)
            bins_e.append(acc_e)
            acc_o = acc_e = 0.0
    if bins_e:
        bins_o[-1] += acc_o
        bins_e[-1] += acc_e
    assert sum(bins_o) == n, "released values outside the analysed support"
    if len(bins_e) > 1:
        e = np.array(bins_e) * (n / sum(bins_e))
        assert stats.chisquare(bins_o, e).pvalue > ALPHA


@pytest.mark.parametrize("mech", INSTANCES)
def test_canonical_order_and_no_foreign_keys(mech: Mechanism) -> None:
    if mech.name in ROWLESS:
        pytest.skip(ROWLESS[mech.name])
    rng = SeededRandom(7)
    gen = np.random.default_rng(1)
    keys = [f"k{i:03d}" for i in gen.permutation(300)]
    counts = gen.integers(0, 400, size=300).tolist()
    if mech.needs_domain:
        keys = ["a", "b", "c", "zz"]
        counts = [5, 0, 700, 9]
    rel = mech.release(_input_for(mech, keys, counts), rng)
    out = rel.keys.tolist()
    assert out == sorted(out) and len(set(out)) == len(out)
    allowed = (
        set(getattr(mech, "domain", np.array(keys)).tolist())
        if mech.needs_domain
        else {k for k, c in zip(keys, counts, strict=True) if c > 0}
    )
    assert set(out) <= allowed
    if mech.needs_domain:
        assert out == sorted(allowed)  # dense: every domain key, nothing else
    assert rel.metadata["mechanism"] == mech.name
    assert rel.metadata["guarantee"]["epsilon"] == mech.guarantee().epsilon
    assert rel.metadata["randomness"]["private"] is False
    if rel.values is not None:
        assert rel.values.dtype == np.int64 and len(rel.values) == len(out)


@pytest.mark.parametrize("mech", INSTANCES)
def test_zero_data(mech: Mechanism) -> None:
    if mech.name in ROWLESS:
        pytest.skip(ROWLESS[mech.name])
    empty = _input_for(mech, [], [])
    rel = mech.release(empty, SeededRandom(3))
    if mech.sparse:
        assert len(rel) == 0
    else:
        assert len(rel) == len(mech.domain)  # type: ignore[attr-defined]
    # keys present with count 0 are never released by sparse mechanisms
    zeros = _input_for(mech, ["x", "y"], [0, 0])
    rel0 = mech.release(zeros, SeededRandom(4))
    if mech.sparse:
        assert len(rel0) == 0


# -- declared constraints: invalid values generated for every parameter --------------------------
# (the generator and the check are in tests/constraint_cases.py, shared with the weighted selectors)


def _baseline(name: str) -> dict[str, Any]:
    cls = registry.get(name)
    base = cls.test_instances()[0]
    kwargs: dict[str, Any] = {"epsilon": base.epsilon, "delta": 1e-3 if cls.requires_delta else 0}
    if cls.needs_domain:
        kwargs["domain"] = ["a", "b"]
    kwargs.update(SMALL_UNIVERSE.get(name, {}))
    return kwargs


@pytest.mark.parametrize("name", sorted(registry.registry()))
def test_every_parameter_refuses_values_outside_its_declared_constraint(name: str) -> None:
    cls = registry.get(name)
    assert constraint_failures(cls, _baseline(name)) == []


def test_the_generated_values_are_outside_each_kind_of_constraint() -> None:
    # the generator read by hand for each kind: the ends themselves when open, the next float
    # or integer beyond them when closed
    got = invalid_values(Constraint.real(0, 1, open_low=True))
    floats = [x for x in got if type(x) in (int, float)]
    assert 0 in floats and math.nextafter(1.0, 2.0) in floats and 1.0 not in floats
    got = invalid_values(Constraint.integer(1, 64, optional=True))
    assert {0, 65, 1.5} <= set(x for x in got if isinstance(x, int | float)) and None not in got
    assert "no-such-choice" in invalid_values(Constraint.one_of("a", "b"))
    assert Fraction(2, 3) in invalid_values(Constraint.reciprocal())


class _Unchecked(StabilityHistogram):
    """Declares a constraint on ``share`` but never checks it (a mutation for the power check)."""

    options = (Option("share", float, 0.5, "", constraint=Constraint.real(0, 1, open_low=True)),)

    def __init__(
        self, epsilon: float, delta: float, *, share: float = 0.5, confidence: float = 0.95
    ) -> None:
        super().__init__(epsilon, delta, confidence=confidence)
        self.share = share


class _TooWide(_Unchecked):
    """Checks ``share`` by hand against (0, 2): wider than the declared (0, 1]."""

    def __init__(
        self, epsilon: float, delta: float, *, share: float = 0.5, confidence: float = 0.95
    ) -> None:
        super().__init__(epsilon, delta, share=share, confidence=confidence)
        if isinstance(share, bool) or not isinstance(share, float | int) or not 0 < share < 2:
            raise ValidationError("share", "_TooWide", "in (0, 2)", share)


class _WrongName(_Unchecked):
    """Checks ``share`` exactly, but its message names another parameter."""

    def __init__(
        self, epsilon: float, delta: float, *, share: float = 0.5, confidence: float = 0.95
    ) -> None:
        super().__init__(epsilon, delta, share=share, confidence=confidence)
        Constraint.real(0, 1, open_low=True).check(share, "fraction", "_WrongName")


class _Undeclared(_Unchecked):
    """An option declared without a constraint."""

    options = (Option("share", float, 0.5, ""),)


class _Checked(_Unchecked):
    """The sound version: checks ``share`` through its declaration."""

    def __init__(
        self, epsilon: float, delta: float, *, share: float = 0.5, confidence: float = 0.95
    ) -> None:
        super().__init__(epsilon, delta, share=share, confidence=confidence)
        self.share = self.check_option("share", share)


def test_the_generated_check_catches_a_missing_or_wrong_constraint() -> None:
    # power check: each mutation of a sound mechanism makes the generated check fail
    baseline = {"epsilon": 1.0, "delta": 1e-3}
    assert constraint_failures(_Checked, baseline) == []
    unchecked = constraint_failures(_Unchecked, baseline)
    assert any("share=nan accepted" in f for f in unchecked), unchecked
    assert any(
        "share=1.0000000000000002 accepted" in f for f in constraint_failures(_TooWide, baseline)
    )
    wrong = constraint_failures(_WrongName, baseline)
    assert wrong and all("names 'fraction'" in f for f in wrong), wrong
    assert constraint_failures(_Undeclared, baseline) == [
        "option 'share' of _Undeclared declares no constraint"
    ]


def test_constructor_errors_name_the_class_the_user_called() -> None:
    # also errors raised inside internal helpers (the noise, the selection grid)
    for make, fn in (
        (lambda: StabilityHistogram(-1, 1e-6), "StabilityHistogram"),
        (lambda: StabilityHistogram(1e-300, 1e-6), "StabilityHistogram"),
        (lambda: OptimalSelection(1e-4, 1e-10), "OptimalSelection"),
        (lambda: DenseHistogram(1.0, domain=[1], noise="gaussian"), "DenseHistogram"),
    ):
        with pytest.raises(ValidationError) as info:
            make()
        assert info.value.function == fn and f" of {fn} must be " in str(info.value)


@pytest.mark.parametrize("name", sorted(registry.registry()))
def test_delta_zero_rejected_where_needed(name: str) -> None:
    cls = registry.get(name)
    extra: dict[str, Any] = {"domain": ["a"]} if cls.needs_domain else {}
    extra.update(SMALL_UNIVERSE.get(name, {}))
    if cls.requires_delta:
        with pytest.raises(ValidationError, match="parameter 'delta'"):
            cls(1.0, 0.0, **extra)
    else:
        assert cls(1.0, 0.0, **extra).guarantee().delta == 0


@pytest.mark.parametrize("mech", INSTANCES)
def test_bad_inputs_to_release(mech: Mechanism) -> None:
    with pytest.raises(ValidationError, match="parameter 'counts'"):
        mech.release([1, 2, 3], SeededRandom(1))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'rng'"):
        mech.release(_input_for(mech, ["a"], [1]), 42)  # type: ignore[arg-type]
