"""The exact audit: every registered mechanism holds; hand-set broken parameters are flagged."""

from __future__ import annotations

import itertools
import math

import pytest

import privhist.mechanisms  # noqa: F401  (registers the built-in mechanisms)
from privhist.audit.exact import audit_exact, plot_exact
from privhist.audit.variants import build_variant, with_parameters
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.mechanisms import StabilityHistogram, registry
from privhist.mechanisms.base import Mechanism

#: the fast test instance of each mechanism (the first, except where it is the slow user-level one)
FIRST = [
    pytest.param(cls.test_instances()[0], id=name)
    for name, cls in sorted(registry.registry().items())
    if name != "pure-sparse"
]


@pytest.mark.parametrize("mech", FIRST)
def test_every_registered_mechanism_passes_and_is_tight(mech: Mechanism) -> None:
    res = audit_exact(mech, profile_points=5)
    assert not res.violation, res.verdict()
    assert res.epsilon_needed <= mech.guarantee().epsilon * (1 + 1e-6)
    if mech.guarantee().delta > 0:  # the claim is used, not wildly loose (as the contract)
        assert res.delta_needed > 0.05 * mech.guarantee().delta
    # the profile is non-increasing in epsilon
    d = res.profile_deltas
    assert all(x >= y - 1e-300 for x, y in itertools.pairwise(d))


def test_pure_sparse_is_refused_with_a_reason() -> None:
    m = registry.get("pure-sparse").test_instances()[0]
    with pytest.raises(UnsupportedError, match="pure-sparse"):
        audit_exact(m)


def test_threshold_2_on_stability_is_flagged_with_the_closed_form_delta() -> None:
    """stability at (1, 1e-6) has scale 1; with threshold 2 one record is released with
    probability Pr[Z >= 1] = a / (1 + a), a = e^-1 (discrete Laplace), against 0 without it."""
    m = build_variant("stability", 1.0, 1e-6, threshold=2)
    res = audit_exact(m)
    assert res.violation
    a = math.exp(-1)
    assert res.delta_needed == pytest.approx(a / (1 + a), rel=1e-12)
    assert math.isinf(res.epsilon_needed)
    assert "VIOLATION" in res.verdict()


@pytest.mark.parametrize(
    ("name", "eps", "delta", "change"),
    [
        ("stability", 1.0, 1e-3, {"threshold": -3}),
        ("stability", 1.0, 1e-3, {"scale": 0.5}),
        ("stability-geometric", 0.5, 1e-3, {"threshold": -3}),
        ("sample-and-threshold", 1.0, 1e-3, {"threshold": -2}),
        ("sample-and-threshold", 1.0, 1e-3, {"sampling_rate": 3}),
        ("dense", 1.0, 0.0, {"scale": 0.5}),
    ],
)
def test_broken_parameters_are_flagged(
    name: str, eps: float, delta: float, change: dict[str, float]
) -> None:
    ok = build_variant(name, eps, delta)
    before = ok.parameters()
    kw: dict[str, object] = {}
    if "threshold" in change:
        kw["threshold"] = ok.threshold + int(change["threshold"])  # type: ignore[attr-defined]
    if "scale" in change:
        noise = getattr(ok, "noise", None) or ok.laplace  # type: ignore[attr-defined]
        kw["scale"] = noise.scale * change["scale"]
    if "sampling_rate" in change:
        kw["sampling_rate"] = ok.sampling_rate * int(change["sampling_rate"])  # type: ignore[attr-defined]
    bad = with_parameters(ok, **kw)  # type: ignore[arg-type]
    res = audit_exact(bad, profile_points=0)
    assert res.violation, res.verdict()
    # the calibrated mechanism itself is untouched
    assert ok.parameters() == before


def test_parameters_that_do_not_exist_are_refused() -> None:
    m = StabilityHistogram(1.0, 1e-6)
    with pytest.raises(UnsupportedError, match="sampling rate"):
        with_parameters(m, sampling_rate=0.5)
    with pytest.raises(ValidationError, match="parameter 'scale'"):
        with_parameters(m, scale=-1)
    with pytest.raises(UnsupportedError, match="threshold"):
        with_parameters(registry.get("pws")(1.0, 1e-3), threshold=3)


def test_plot_is_written(tmp_path: object) -> None:
    pytest.importorskip("matplotlib")
    from pathlib import Path

    res = audit_exact(build_variant("stability", 1.0, 1e-6, threshold=2), profile_points=6)
    out = plot_exact(res, Path(str(tmp_path)) / "p.png")
    assert out.stat().st_size > 1000


# -- figures over l0 keys are composition bounds, and a delta is at most 1 ---------------------


def _product_delta(mech: Mechanism, a: tuple[int, int], b: tuple[int, int], k: int) -> float:
    """The exact joint delta at the claimed epsilon of ``k`` keys each moved from ``a`` to
    ``b``: a real neighbouring pair (one user adds records to k keys), so a lower bound on what
    the mechanism needs, computed on the product law here (not by the audit)."""
    from privhist.accounting.profile import check_dp, product_distribution

    p, q = mech.key_distribution(*a), mech.key_distribution(*b)
    pk = product_distribution(*[p.probabilities] * k)
    qk = product_distribution(*[q.probabilities] * k)
    tail_p, tail_q = 1 - (1 - p.tail) ** k, 1 - (1 - q.tail) ** k
    res = check_dp(pk, qk, mech.guarantee().epsilon, 1, tail_p=tail_p, tail_q=tail_q)
    return float(res.worst)


def test_the_issue_case_reports_a_delta_of_at_most_one(capsys: pytest.CaptureFixture[str]) -> None:
    # `audit exact dense --max-partitions 3 --max-per-partition 2 --scale 1.0` printed
    # "exact delta 1.779": three times the per-key delta, uncapped and called exact
    import json

    from privhist.cli.main import main

    argv = ["audit", "exact", "dense", "--epsilon", "1", "--max-partitions", "3"]
    assert main([*argv, "--max-per-partition", "2", "--scale", "1.0", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    per_key = report["per_key"]["delta_at_checked_epsilon"]
    assert 1 / 3 < per_key < 1  # three times it would exceed 1
    assert report["composed_bound"] is True
    assert report["delta_at_claimed_epsilon"] == pytest.approx(1 - (1 - per_key) ** 3)
    assert report["delta_at_claimed_epsilon"] <= 1
    assert all(0 <= d <= 1 for d in report["profile"]["delta"])
    assert (
        "is at most" in report["verdict"] and "exact delta at epsilon 1 " not in report["verdict"]
    )


@pytest.mark.parametrize("name", ["dense", "stability"])
def test_the_composed_delta_bounds_the_exact_joint_delta(name: str) -> None:
    mech = build_variant(name, 1.0, 1e-6 if name == "stability" else 0.0, Neighbouring.user(2, 1))
    bad = with_parameters(mech, scale=1.0)
    res = audit_exact(bad, profile_points=0)
    assert res.composed and res.violation
    w = res.worst
    joint = _product_delta(bad, w.first, w.second, 2)
    # the worst pair on both keys really violates the claim, and the bound is above it
    assert bad.guarantee().delta < joint <= res.delta_needed <= 1


def test_one_key_figures_stay_exact() -> None:
    res = audit_exact(build_variant("stability", 1.0, 1e-6, threshold=2), profile_points=0)
    assert not res.composed and res.delta_needed == res.worst.worst
    assert "at most" not in res.verdict() and "exact delta at epsilon 1 is" in res.verdict()
