"""Adapters that audit our peers' sparse-histogram mechanisms as black boxes.

Each adapter returns a :class:`Peer`: ``f(records) -> {key: value}`` calling the peer once per
sample, the (epsilon, delta) the peer states for its settings, and the pairs worth auditing.
The peers live in the ``bench`` extra; :func:`available` says which are importable and the
adapters raise :class:`~privhist.core.errors.UnsupportedError` otherwise.

* OpenDP (``make_count_by >> then_laplace_threshold``). The documented use: scale ``1/epsilon``
  for one record per key (L1 sensitivity 1), the threshold the smallest integer for which the
  measurement's own privacy map at ``d_in = 1`` gives at most ``delta``. The claim audited is what
  that map states. A key is released when its noisy count is ``>= threshold``.
* PipelineDP (``DPEngine`` with ``NaiveBudgetAccountant`` and ``LocalBackend``): ``COUNT`` with
  the default partition selection (truncated geometric; half of epsilon and all of delta on
  selection), or ``PRIVACY_ID_COUNT`` with ``post_aggregation_thresholding`` (one noisy count and a
  threshold on it); one partition and one contribution per privacy unit, Laplace noise. Each
  record is its own privacy unit. The pairs carry a second key ``y`` with 50 records, so that
  neither side is empty (PipelineDP refuses an empty collection). The claim
  is the total budget given to the accountant.

* diffprivlib (``diffprivlib.tools.histogram``): a dense histogram over a public list of bins
  with truncated geometric noise on each bin (``GeometricTruncated``, lower bound 0), claimed
  ``(epsilon, 0)``-DP for one record added or removed. Keys are mapped to bins of the public
  domain ``("x", "y")``; a fresh ``BudgetAccountant`` per call (the default one keeps every
  spend). diffprivlib is in no extra: its 0.6.6 wheel installs a top-level ``tests`` package
  into site-packages, which shadows this project's ``tests`` and breaks its test suite, and it
  needs scikit-learn below 1.7 (it imports names 1.9 removed). Audit it from a separate
  environment: ``pip install diffprivlib 'scikit-learn<1.7'`` next to privhist.

The settings and traps followed are those in ``PEERS.md`` (shared project notes).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from privhist.audit.sampling import NeighbouringPair, single_key_pair
from privhist.core.errors import UnsupportedError, ValidationError

__all__ = [
    "Peer",
    "available",
    "diffprivlib_histogram",
    "opendp_laplace_threshold",
    "pipelinedp_count",
]


@dataclass
class Peer:
    """A peer mechanism ready for :func:`privhist.audit.statistical.audit_statistical`."""

    name: str
    version: str
    function: Callable[[list[Hashable]], dict[Hashable, float]]
    epsilon: float
    delta: float
    settings: dict[str, Any]
    pairs: list[NeighbouringPair] = field(default_factory=list)
    reproduction: str = ""


def available() -> dict[str, bool]:
    """Which peers are importable here."""
    return {
        "opendp": importlib.util.find_spec("opendp") is not None,
        "pipeline_dp": importlib.util.find_spec("pipeline_dp") is not None,
        "diffprivlib": importlib.util.find_spec("diffprivlib") is not None,
    }


def _version_of(distribution: str) -> str:
    """The installed version of a distribution ("?" when its metadata is missing)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


def _require(module: str) -> Any:
    if not available().get(module, False):
        raise UnsupportedError(
            f"audit: the peer '{module}' is not installed ("
            + (
                "see privhist.audit.peers"
                if module == "diffprivlib"
                else "pip install 'privhist[bench]'"
            )
            + ")"
        )
    return importlib.import_module(module)


def opendp_laplace_threshold(
    epsilon: float,
    delta: float,
    *,
    scale: float | None = None,
    threshold: int | None = None,
) -> Peer:
    """OpenDP's ``make_count_by >> then_laplace_threshold`` at its documented calibration.

    ``scale`` defaults to ``1/epsilon`` and ``threshold`` to the smallest integer whose privacy
    map gives at most ``delta``; given by hand, the claim is what the map states for them.
    """
    fn = "opendp_laplace_threshold"
    _require("opendp")
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValidationError("epsilon", fn, "> 0 with delta in (0, 1)", (epsilon, delta))
    s = float(scale) if scale is not None else 1.0 / float(epsilon)
    space = dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance()
    counts = space >> dp.t.then_count_by()

    def build(t: int) -> Any:
        return counts >> dp.m.then_laplace_threshold(scale=s, threshold=t)

    if threshold is None:
        t = 1
        while build(t).map(1)[1] > delta:
            t += 1
            if t > 10_000:
                raise ValidationError("delta", fn, "reachable with a threshold <= 10000", delta)
    else:
        t = int(threshold)
    meas = build(t)
    eps_map, delta_map = meas.map(1)

    def release(records: list[Hashable]) -> dict[Hashable, float]:
        return {k: float(v) for k, v in meas([str(r) for r in records]).items()}

    pairs = [single_key_pair(0, 1), single_key_pair(t - 1, t), single_key_pair(t, t + 1)]
    repro = (
        "import opendp.prelude as dp; dp.enable_features('contrib')\n"
        "m = (dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance()) "
        f">> dp.t.then_count_by() >> dp.m.then_laplace_threshold(scale={s!r}, threshold={t})\n"
        f"m.map(1)  # ({eps_map:.6g}, {delta_map:.6g})\n"
        "sum(bool(m(['x'])) for _ in range(100_000)) / 100_000  # Pr[key with 1 record released]"
    )
    return Peer(
        name="opendp make_count_by >> then_laplace_threshold",
        version=_version_of("opendp"),
        function=release,
        epsilon=float(eps_map),
        delta=float(delta_map),
        settings={"scale": s, "threshold": t, "map_at_d_in_1": [eps_map, delta_map]},
        pairs=pairs,
        reproduction=repro,
    )


def pipelinedp_count(epsilon: float, delta: float, *, metric: str = "count") -> Peer:
    """PipelineDP's ``COUNT`` (default partition selection) or thresholded ``PRIVACY_ID_COUNT``."""
    fn = "pipelinedp_count"
    pdp = _require("pipeline_dp")
    if metric not in ("count", "privacy_id_count"):
        raise ValidationError("metric", fn, "count or privacy_id_count", metric)
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValidationError("epsilon", fn, "> 0 with delta in (0, 1)", (epsilon, delta))
    post = metric == "privacy_id_count"
    m = pdp.Metrics.PRIVACY_ID_COUNT if post else pdp.Metrics.COUNT
    params = pdp.AggregateParams(
        metrics=[m],
        noise_kind=pdp.NoiseKind.LAPLACE,
        max_partitions_contributed=1,
        max_contributions_per_partition=1,
        post_aggregation_thresholding=post,
    )
    extractors = pdp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=lambda r: r[1],
        value_extractor=lambda r: 0,
    )

    def release(records: list[Hashable]) -> dict[Hashable, float]:
        if not records:  # PipelineDP refuses an empty collection; it has no partition to release
            return {}
        acct = pdp.NaiveBudgetAccountant(total_epsilon=epsilon, total_delta=delta)
        engine = pdp.DPEngine(acct, pdp.LocalBackend())
        out = engine.aggregate(list(enumerate(records)), params, extractors)
        acct.compute_budgets()
        return {k: float(v[0]) for k, v in out}

    version = _version_of("pipeline-dp")
    name = "pipeline_dp " + ("PRIVACY_ID_COUNT, post-aggregation threshold" if post else "COUNT")
    repro = (
        "import pipeline_dp as pdp\n"
        f"acct = pdp.NaiveBudgetAccountant(total_epsilon={epsilon!r}, total_delta={delta!r})\n"
        "engine = pdp.DPEngine(acct, pdp.LocalBackend())\n"
        f"params = pdp.AggregateParams(metrics=[pdp.Metrics.{m.name}], "
        "noise_kind=pdp.NoiseKind.LAPLACE, max_partitions_contributed=1, "
        f"max_contributions_per_partition=1, post_aggregation_thresholding={post})\n"
        "# aggregate [(0, 'x')] vs [] and compare the release frequency of 'x'"
    )
    return Peer(
        name=name,
        version=version,
        function=release,
        epsilon=float(epsilon),
        delta=float(delta),
        settings={"metric": metric, "noise": "laplace", "max_partitions": 1, "max_per_key": 1},
        pairs=[
            NeighbouringPair({"y": 50}, {"y": 50, "x": n + 1}, f"x: {n} vs {n + 1} records, y: 50")
            if n == 0
            else NeighbouringPair({"y": 50, "x": n}, {"y": 50, "x": n + 1}, f"x: {n} vs {n + 1}")
            for n in (0, 1, 5)
        ],
        reproduction=repro,
    )


def diffprivlib_histogram(epsilon: float, domain: tuple[str, ...] = ("x", "y")) -> Peer:
    """diffprivlib's ``histogram`` over the public ``domain`` (module notes)."""
    fn = "diffprivlib_histogram"
    _require("diffprivlib")
    import numpy as np
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.tools import histogram

    if not epsilon > 0:
        raise ValidationError("epsilon", fn, "> 0", epsilon)
    index = {k: i for i, k in enumerate(domain)}
    bins = len(domain)

    def release(records: list[Hashable]) -> dict[Hashable, float]:
        sample = np.array([index[r] for r in records if r in index], dtype=np.float64)
        hist, _ = histogram(
            sample, epsilon=epsilon, bins=bins, range=(0, bins), accountant=BudgetAccountant()
        )
        return {k: float(hist[i]) for k, i in index.items()}

    version = _version_of("diffprivlib")
    repro = (
        "from diffprivlib.tools import histogram\n"
        f"histogram([0.0], epsilon={epsilon!r}, bins={bins}, range=(0, {bins}))  # vs []"
    )
    return Peer(
        name="diffprivlib tools.histogram",
        version=version,
        function=release,
        epsilon=float(epsilon),
        delta=0.0,
        settings={"bins": bins, "noise": "truncated geometric", "domain": list(domain)},
        pairs=[
            NeighbouringPair({"y": 5}, {"y": 5, "x": 1}, "x: 0 vs 1 records, y: 5"),
            NeighbouringPair({"y": 5, "x": 3}, {"y": 5, "x": 4}, "x: 3 vs 4 records, y: 5"),
        ],
        reproduction=repro,
    )
