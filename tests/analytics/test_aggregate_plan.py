"""``privhist plan aggregate`` (:func:`privhist.analytics.aggregate.plan`) against the release it
plans: the same budget shares under the same names, the error of means that seeded releases
measure, and a budget split the release's metadata states as it happened."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.cli_run import run

from privhist import Release, Session
from privhist import metrics as m
from privhist.analytics.aggregate import Aggregation, plan


@pytest.mark.parametrize(
    ("metrics", "kwargs", "shares"),
    [
        (  # 3 : 1 of the metrics' budget; the selection weighs 1 against the metrics' 4
            {"total": m.sum("x", 0, 100), "q": m.quantiles("x", [0.5], 0, 100)},
            {"weights": {"total": 3, "groups": 1}, "delta": 1e-6},
            {"total": (0.75, 0.6), "q": (0.25, 0.2)},
        ),
        (  # public groups: nothing chooses the groups
            {"n": m.count(), "avg": m.mean("x", 0, 100)},
            {"weights": {"avg": 4}, "partitions": ["a", "b"]},
            {"n": (0.2, 0.2), "avg": (0.8, 0.8)},
        ),
        (  # two automatic bounds take 0.05 each of the metrics' budget first; the selection
            # half of the whole beside the sum (Laplace noise at record level)
            {"s": m.sum("x", "auto", "auto")},
            {"delta": 1e-6, "noise": "laplace"},
            {"s": (0.9, 0.5)},
        ),
    ],
    ids=["weights and groups", "public groups", "automatic bounds"],
)
def test_the_plan_gives_each_metric_the_release_s_budget_share(
    capsys: pytest.CaptureFixture[str],
    metrics: dict[str, Any],
    kwargs: dict[str, Any],
    shares: dict[str, tuple[float, float]],
) -> None:
    """A metric's ``budget_share`` is its share of the metrics' budget in the plan as in the
    release's metadata (``--weight total=3 --weight groups=1``: 0.75 and 0.25, as
    docs/releases/aggregate.md says), and ``share_of_whole_budget`` its share of the whole
    budget (0.6 and 0.2 there: the selection takes 1/5)."""
    parts = kwargs.get("partitions")
    agg = Aggregation(
        metrics,
        ("g",),
        1.0,
        kwargs.get("delta", 0.0),
        False,
        partitions=None if parts is None else tuple((p,) for p in parts),
        noise=kwargs.get("noise", "auto"),
        weights=kwargs.get("weights"),
    )
    planned = plan(agg)["metrics"]
    frame = pl.DataFrame({"g": ["a"] * 600 + ["b"] * 400, "x": np.linspace(0, 100, 1000)})
    release = Session().aggregate(frame, by="g", metrics=metrics, epsilon=1.0, seed=1, **kwargs)
    assert isinstance(release, Release)
    for name, (of_metrics, of_whole) in shares.items():
        assert planned[name]["budget_share"] == pytest.approx(of_metrics, rel=1e-12)
        assert release.metadata["metrics"][name]["budget_share"] == planned[name]["budget_share"]
        assert planned[name]["share_of_whole_budget"] == pytest.approx(of_whole, rel=1e-12)
    argv = ["plan", "aggregate", "--epsilon", "1", "--delta", "1e-6", "--json"]
    argv += ["--metric", "total=sum(x,0,100)", "--metric", "q=quantiles(x,0.5,0,100)"]
    code, out, err = run(capsys, *argv, "--weight", "total=3", "--weight", "groups=1")
    assert code == 0, err
    report = json.loads(out)
    assert report["metrics"]["total"]["budget_share"] == pytest.approx(0.75)
    assert report["metrics"]["total"]["share_of_whole_budget"] == pytest.approx(0.6)
    assert report["selection_share"] == pytest.approx(0.2)
    assert "metrics' budget" in report["shares"]


#: groups per release and records per group of the measured releases, and the seeds drawn
GROUPS, SIZE, SEEDS = 400, 200, 12


def _measured_mean_errors(value: float, **kwargs: Any) -> np.ndarray[Any, Any]:
    """The errors of a mean of ``x`` in ``[0, 100]`` (resolution 1: middle 50, ``M = 50``)
    over :data:`GROUPS` groups of :data:`SIZE` records all of value ``value``, in
    :data:`SEEDS` seeded releases at ``(1, 1e-6)``, private groups at record level."""
    keys = [f"g{i:03d}" for i in range(GROUPS)]
    frame = pl.DataFrame({"g": np.repeat(keys, SIZE), "x": np.full(GROUPS * SIZE, value)})
    errors = []
    for seed in range(SEEDS):
        r = Session().aggregate(
            frame,
            by="g",
            metrics={"avg": m.mean("x", 0, 100, resolution=1)},
            epsilon=1.0,
            delta=1e-6,
            seed=seed,
            **kwargs,
        )
        assert isinstance(r, Release) and len(r) == GROUPS  # every group, far above threshold
        errors.append(np.asarray(r.extra["avg"], dtype=np.float64) - value)
    return np.concatenate(errors)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_plan_predicts_the_error_of_means_that_releases_measure(noise: str) -> None:
    """The planned standard deviation of a mean's error against the root mean square error of
    4,800 group means (400 groups in 12 seeded releases; the groups' noises are independent):
    with Laplace noise the selection's noisy count is the mean's count (the stability
    selection; module notes), with Gaussian noise the mean has its own.

    For a group whose mean is the middle, the count's noise does not move the estimate, and the
    error is the centred sum's noise over ``n`` (``mean_error_std_at_middle``); at 40 units
    from the middle (``a = 0.8 M``, values of 10: 11 error deviations above the lower bound with
    Laplace noise, 3.2 with Gaussian, where the clamp to ``[0, 100]`` changes the root mean
    square by under 0.1%), ``sqrt(middle**2 + 0.64 (bounds**2 - middle**2))`` of the plan's
    two figures. The error is dominated by a discrete Laplace or Gaussian noise
    (kurtosis at most 6), so the squared error's mean over 4,800 draws has a relative standard
    deviation of at most ``sqrt(5 / 4800) = 0.032``, and the root mean square half that: 6%
    is almost four of them, while planning the middle at the bounds' figure (a factor
    ``sqrt(2)`` here with Laplace noise) or leaving out the count's noise at ``0.8 M`` (0.78)
    lies far outside."""
    agg = Aggregation(
        {"avg": m.mean("x", 0, 100, resolution=1)}, ("g",), 1.0, 1e-6, False, noise=noise
    )
    assert (agg.free_column() == "x") == (noise == "laplace")
    planned = plan(agg, [SIZE])["metrics"]["avg"]
    middle = planned["mean_error_std_at_middle"][SIZE]
    bounds = planned["mean_error_std_at_bounds"][SIZE]
    assert bounds > middle * 1.2
    at = math.sqrt(middle**2 + 0.8**2 * (bounds**2 - middle**2))
    for value, predicted in ((50.0, middle), (10.0, at)):
        errors = _measured_mean_errors(value, noise=noise)
        rms = float(np.sqrt(np.mean(errors**2)))
        assert abs(rms / predicted - 1) < 0.06, (value, rms, predicted)


def test_the_budget_split_says_how_each_metric_split_its_share() -> None:
    """The metadata's ``budget_split`` names, per metric, the split that happened: a mean whose
    count is the selection's has none of its own (not "count and centred sum 1:2"); with
    public groups it has one, 1:2; a sum answered from a mean gives it its share."""
    frame = pl.DataFrame({"g": ["a"] * 600 + ["b"] * 400, "x": np.linspace(0, 100, 1000)})
    mean = {"avg": m.mean("x", 0, 100)}

    def split(metrics: dict[str, Any], **kwargs: Any) -> str:
        r = Session().aggregate(frame, by="g", metrics=metrics, epsilon=1.0, seed=1, **kwargs)
        assert isinstance(r, Release)
        return str(r.metadata["budget_split"])

    free = split(mean, delta=1e-6, noise="laplace")
    assert "1:2" not in free and "'avg' has no count of its own" in free
    assert "the selection's noisy count of 'x' is its count" in free
    public = split(mean, partitions=["a", "b"])
    assert "'avg': count and centred sum 1:2" in public and "no count" not in public
    assert "variance" not in public and "sum answered" not in public
    pooled = split({**mean, "s": m.sum("x", 0, 100)}, partitions=["a", "b"])
    assert "'avg': its share and that of 's', count and centred sum 1:1" in pooled
    assert "'s' is answered from the count and centred sum of 'avg'" in pooled
    counts = split({"n": m.count()}, partitions=["a", "b"])
    assert counts == "equal shares of the metrics' budget (1 each)"
