"""Aggregations per group (sum, mean, median) through privhist and its peers, on the same data.

Every system releases, per group, the sum, the mean and the median of a bounded numeric column
with the same (epsilon, delta) and the same contribution bounds, and the script prints, per
system and metric: the groups released (and how many of them are real), the relative error of
each released real group (``|released - true| / max(|true|, 1)``, against the exact per-group
value of the unbounded, unclamped data, so clamping and contribution bounding count as error),
its median and its mean over the groups (each averaged over the rounds), and the time.

Data (taken by path, never copied into the repository; a missing file is skipped):

* ``adult.data`` (UCI Adult, no header; the column names of ``adult.names`` with ``-`` written
  ``_``), record level (each row one person), grouped by ``education`` and ``sex`` (32 groups):
  sum of ``hours_per_week`` in [0, 99], mean and median of ``age`` in [17, 90];
* a generated table (``--rows``, default 10**7, written once as Parquet under ``--cache``),
  user level: about 4 rows per user (geometric; 2.5·10**6 users), grouped by ``country``
  (60 values, Zipf(1.3), one per user), ``device`` (4 values, 0.6/0.3/0.08/0.02, a user keeps
  one device for 80% of its rows) and ``tier`` (an integer 1..5, 0.5/0.25/0.15/0.07/0.03, one
  per user): up to 1,200 groups, many of them tiny; sum, mean and median of ``amount`` (an
  integer, rounded log-normal with a median near 24 growing with the tier, about 4% of it above
  100) in [0, 100]; each user contributes to at most ``k = 2`` groups and ``c = 5`` rows per
  group (bounds that keep about 80% of the rows: the error of a sum includes what bounding
  drops).

Modes (``--modes``): each metric alone with the whole budget (``sum``, ``mean``, ``median``), and
all three together (``all``) with each library's own split of the budget; each with private
groups (chosen by the library) and public ones (the true groups given), ``--partitions``.
Budget: epsilon = 1, delta = 1e-6 (``--epsilon``, ``--delta``).

Settings chosen for each system (the traps found running them side by side are noted):

* **privhist**: ``Session().aggregate(table, by=..., metrics={"sum": metrics.sum(col, lo, hi),
  "mean": metrics.mean(col, lo, hi), "median": metrics.quantiles(col, [0.5], lo, hi,
  resolution=1)},
  user=None or "user_id", max_partitions=k, max_per_partition=c, partitions=None or the true
  groups as a DataFrame, epsilon, delta)`` on the Polars table in memory, with the secure random
  source (no seed), its own noise and split (printed from the release's metadata). The median's
  ``resolution=1`` says what OpenDP's candidates say: the values are integers (its candidates
  are then the integers of the range).
* **PipelineDP** (0.3.1): ``DPEngine(NaiveBudgetAccountant(epsilon, delta), LocalBackend())``,
  Laplace noise, ``AggregateParams(min_value=lo, max_value=hi, max_partitions_contributed=k,
  max_contributions_per_partition=c)`` (1 and 1 at record level, with the row number as the
  privacy id), metrics ``SUM``, ``MEAN``, ``PERCENTILE(50)``; the default partition selection
  (truncated geometric) or ``public_partitions=`` the true groups. Its results are lazy:
  ``compute_budgets()`` after the ``aggregate()`` calls, then the results are read. Each value
  column needs its own call (on adult: one for ``hours_per_week``, one for ``age``), and the
  budget is split equally per call, then per mechanism (selection included): its own split.
  Its MEAN is not clamped to [lo, hi]: what it releases is scored as is. Rows are Python tuples
  built in the untimed setup (its local API takes an iterable of records).
* **OpenDP** (0.16.0, its Polars context; it needs ``polars==1.36.1`` and so runs in its own
  virtual environment, ``--opendp-python``, see below): ``dp.Context.compositor(data,
  privacy_unit, privacy_loss=dp.loss_of(epsilon=epsilon, delta=delta), split_evenly_over=1,
  margins=[Margin(by=[], max_length=10**9)])`` (a loose public bound on the rows: it must be
  given, and integer sums do not depend on it) and one query ``group_by(by).agg([...])`` with
  ``dp.len()`` (its private key release requires one) and ``col.dp.sum((lo, hi))``,
  ``col.dp.mean((lo, hi))``, ``col.dp.quantile(0.5, candidates)`` with the candidates every
  integer in [lo, hi] (the data are integers); public groups through ``.with_keys(groups)`` after
  the aggregation (no ``dp.len()`` then). Its noise is integer Laplace with one scale shared by
  every expression of a query (its own split), the sum sensitivity is max(|lo|, |hi|) (no
  shift to the middle of the range), and a mean over a noisy count at or below zero comes out
  inf or NaN silently (counted as ``nonfinite`` and left out of the error). Record level:
  ``dp.unit_of(contributions=1)``. User level: its ``truncate_num_groups`` keeps every user's
  k smallest group keys (``keep="first"``, and its rank predicate keeps k - 1) and
  ``keep="sample"`` fails on that Polars, so the bounds are enforced outside it, in the timed
  section (each user keeps the k groups of smallest random priority, a seeded hash of
  (user, group) under a fresh seed, and c random rows in each), and declared with
  ``dp.unit_of(contributions=[Bound(by=by, per_group=c, num_groups=k)])``.
* **Tumult Analytics** (0.21.0, optional; its own virtual environment with PySpark 3.5,
  ``--tumult-python``): ``Session.from_dataframe(ApproxDPBudget(epsilon, delta), ...,
  AddOneRow())`` at record level, ``AddRowsWithID("user_id")`` with ``MaxGroupsPerID`` and
  ``MaxRowsPerGroupPerID`` on one combined group column at user level (its constraints take one
  column); ``groupby(KeySet)`` and ``.sum(col, lo, hi, mechanism="laplace")``, ``.average(...,
  mechanism="laplace")``, ``.median(col, lo, hi)``, one query per metric (it has no
  multi-aggregate query and no default split: the budget is split equally over the queries);
  private groups come from ``get_groups(by)`` first, which gets half of epsilon and all of delta
  (as PipelineDP's selection does), public ones from ``KeySet.from_dataframe`` of the true
  groups. Its AVERAGE is not clamped either. Spark runs ``local[2]``; the Spark DataFrame is
  built and cached in the untimed setup.

Timing (``benchmarks/_harness.py``): each system in its own fresh process, the data loaded and
a warm-up release on the first 2,000 rows of the same task (untimed) before one timed release,
``--rounds`` interleaved rounds in rotated order, the median of the within-round ratios (wall
and CPU seconds of the process tree), the machine's load beside every figure. Every round is also
one draw of the errors. A system that cannot run (not installed, its environment absent) says
so and gets no ratio.

Many releases (``--releases PEERS [PRIVHIST]``): a few rounds cannot tell two mechanisms of the
same error apart (on adult's 32 groups, the worst of six noisy ratios per metric lands on either
side of 1). After the timed rounds (none with ``--rounds 0``), each system makes that many
releases in one process (privhist as many as the peers unless given: a group's error averaged
over more releases is more often above 0, which moves the median over groups when exact answers
are common, as for medians of integer ages), each group's error is averaged over the releases
that gave it, and privhist's error over each peer's is the ratio of the means (and of the
medians) over the groups both released (two zero errors are a tie, 1), with a 95% interval from
resampling each system's releases. The verdict is "met" at most 1, "level" above 1 with 1 inside
the interval, and "not met" when the whole interval is above 1.

The split: with several metrics, or with private groups, every library splits the budget its
own way, and no split is best for every metric (module notes of
:mod:`privhist.analytics.aggregate`, *The split*). With ``--releases`` privhist also runs at
each peer's split (``privhist@PipelineDP``, ``privhist@OpenDP``; :func:`peer_split`), when it
differs from its own, and the verdicts are given both ways: privhist at its own split against
every peer, and privhist at each peer's split against that peer (equal budget per metric).

Goals (issue 27): on every metric the error is at most the best peer's at equal budget and
bounds (moonshot: 0.8 of it), compared on the groups both released; at 10**7 rows at least 20x
PipelineDP's speed and 5x OpenDP's.

The peers' environments (PipelineDP is in the ``bench`` extra of privhist's own environment)::

    python3 -m venv /work/opendp-venv
    /work/opendp-venv/bin/pip install "opendp[polars]==0.16.0" "polars==1.36.1"
    python3 -m venv /work/tumult-venv        # optional; needs Java 11 or 17
    /work/tumult-venv/bin/pip install "tmlt.analytics==0.21.0" polars pyarrow

Run: ``python benchmarks/bench_aggregate.py`` (the full comparison; PipelineDP takes minutes per
release at 10**7 rows), ``--quick`` (small data, one round, seconds), ``--data DIR`` (default
``../shared/data`` beside the repository, then ``/work/shared/data``), ``--rows N``,
``--datasets adult,synthetic``, ``--modes sum,mean,median,all``, ``--partitions
private,public``, ``--json PATH`` (the accuracy table as JSON), ``--releases 50 200`` (adult,
about 40 minutes with every peer), and the harness's ``--rounds``, ``--wait-quiet``,
``--save``, and ``--exact-medians`` (with ``--rounds 0``: seconds): each group's expected
error of both libraries' medians from the laws of their draws (:func:`noisy_min_law`), each at
its own split, where 40 releases cannot tell a tie from a loss; ``--least-budget`` (with
``--rounds 0``: seconds): the least epsilon privhist needs on each metric of the three-metric
query with public groups to be at most the best peer's error at that peer's own split
(:func:`least_budget`), and their least total. On adult at epsilon 1 it is 1.13 (median 0.40,
sum 0.50, mean 0.23): above the budget, so no split meets the goal on every metric at once.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from _harness import Goal, Measurement, Ratio, Skip, System, compare, options

HERE = Path(__file__).resolve().parent
MODULE = "bench_aggregate"

ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
]
METRICS = ("sum", "mean", "median")
MODES = ("sum", "mean", "median", "all")
PARTITIONS = ("private", "public")
EPSILON, DELTA = 1.0, 1e-6
WARM_ROWS = 2_000
#: the generated table: each user has Geometric(P_ROW) rows (mean 1 / P_ROW)
P_ROW = 0.25
#: a loose public bound on the rows of any group, which OpenDP's context requires
OPENDP_MAX_LENGTH = 10**9
SYSTEMS = ("privhist", "PipelineDP", "OpenDP", "Tumult")
PEER_PYTHONS = {"OpenDP": "/work/opendp-venv/bin/python", "Tumult": "/work/tumult-venv/bin/python"}
PEER_SETUP = {
    "OpenDP": 'pip install "opendp[polars]==0.16.0" "polars==1.36.1" in its own virtual '
    "environment (see the module notes)",
    "Tumult": 'pip install "tmlt.analytics==0.21.0" polars pyarrow in its own virtual '
    "environment (see the module notes)",
}


# -- the data -------------------------------------------------------------------------------


def dataset_spec(name: str, path: str) -> dict[str, Any]:
    """What is released on a dataset: groups, value columns, bounds and contribution bounds."""
    if name == "adult":
        return {
            "dataset": "adult",
            "path": path,
            "by": ["education", "sex"],
            "columns": {"sum": "hours_per_week", "mean": "age", "median": "age"},
            "bounds": {"sum": [0, 99], "mean": [17, 90], "median": [17, 90]},
            "user": None,
            "k": None,
            "c": None,
        }
    if name == "synthetic":
        return {
            "dataset": "synthetic",
            "path": path,
            "by": ["country", "device", "tier"],
            "columns": {"sum": "amount", "mean": "amount", "median": "amount"},
            "bounds": {"sum": [0, 100], "mean": [0, 100], "median": [0, 100]},
            "user": "user_id",
            "k": 2,
            "c": 5,
        }
    raise ValueError(f"unknown dataset {name!r}")


def load(task: dict[str, Any]) -> Any:
    """The task's table as a Polars DataFrame (first ``limit`` rows when set); the code runs on
    Polars 1.36 (OpenDP's environment) as on Polars 2."""
    import polars as pl

    limit = task.get("limit")
    if task["dataset"] == "adult":
        df = pl.read_csv(
            task["path"],
            has_header=False,
            new_columns=ADULT_COLUMNS,
            infer_schema_length=0,  # every column read as text, then typed here
            truncate_ragged_lines=True,
        )
        df = df.with_columns(pl.col(c).str.strip_chars() for c in ADULT_COLUMNS)
        df = df.filter(pl.col("age").is_not_null() & (pl.col("age") != ""))
        df = df.with_columns(pl.col("age", "hours_per_week").cast(pl.Int64))
        df = df.select("education", "sex", "age", "hours_per_week")
        return df.head(limit) if limit else df
    if task["dataset"] == "synthetic":
        cols = ["user_id", "country", "device", "tier", "amount"]
        return pl.read_parquet(task["path"], columns=cols, n_rows=limit)
    raise ValueError(f"unknown dataset {task['dataset']!r}")


def generate_synthetic(path: Path, rows: int, seed: int = 27) -> None:
    """The generated user-level table (see the module notes), written to ``path`` (Parquet)."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    per_user = rng.geometric(P_ROW, size=int(rows * P_ROW * 2) + 10)  # 1/P_ROW a user
    ends = np.cumsum(per_user)
    users = int(np.searchsorted(ends, rows)) + 1
    per_user = per_user[:users]
    per_user[-1] -= int(ends[users - 1]) - rows
    user = np.repeat(np.arange(users, dtype=np.int64), per_user)

    zipf = 1.0 / np.arange(1, 61) ** 1.3
    country_of = rng.choice(60, size=users, p=zipf / zipf.sum())
    tier_of = rng.choice(5, size=users, p=[0.5, 0.25, 0.15, 0.07, 0.03]) + 1
    device_p = [0.6, 0.3, 0.08, 0.02]
    device_of = rng.choice(4, size=users, p=device_p)
    device = np.where(rng.random(rows) < 0.8, device_of[user], rng.choice(4, size=rows, p=device_p))
    tier = tier_of[user]
    amount = np.rint(rng.lognormal(np.log(18.0) + 0.15 * tier, 0.8)).astype(np.int64)

    order = rng.permutation(rows)  # users' rows spread over the file
    countries = np.array([f"C{i:02d}" for i in range(60)])
    devices = np.array(["mobile", "desktop", "tablet", "tv"])
    table = pl.DataFrame(
        {
            "user_id": user[order],
            "country": countries[country_of[user]][order],
            "device": devices[device][order],
            "tier": tier[order],
            "amount": amount[order],
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    table.write_parquet(tmp, compression="zstd")
    tmp.replace(path)


def _norm(value: Any) -> str:
    """One spelling of a group key component across the systems' outputs."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if hasattr(value, "item"):  # NumPy scalars
        return _norm(value.item())
    return str(value)


def _key(values: Iterable[Any]) -> str:
    return "|".join(_norm(v) for v in values)


def truth(task: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The exact per-group values of the unbounded, unclamped data: key -> metric -> value."""
    import polars as pl

    df = load(task)
    by, cols = task["by"], task["columns"]
    agg = df.group_by(by).agg(
        pl.col(cols["sum"]).sum().cast(pl.Float64).alias("sum"),
        pl.col(cols["mean"]).mean().alias("mean"),
        pl.col(cols["median"]).median().alias("median"),
        pl.len().alias("rows"),
    )
    out: dict[str, dict[str, float]] = {}
    for row in agg.iter_rows(named=True):
        out[_key(row[c] for c in by)] = {m: float(row[m]) for m in (*METRICS, "rows")}
    return out


def _groups(df: Any, by: Sequence[str]) -> Any:
    """The true groups of ``df`` (the public partitions), sorted."""
    return df.select(by).unique().sort(by)


def _packed(rows: dict[str, list[list[Any]]], noise: str) -> dict[str, Any]:
    """A release as JSON: per metric, ``[key, value]`` rows."""
    return {"rows": rows, "noise": noise}


def _value(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


# -- the systems (factories: untimed setup, then the timed release) --------------------------


def privhist(task: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """``Session.aggregate`` on the Polars table in memory (see the module notes)."""
    try:
        from privhist import Session
        from privhist import metrics as pm  # noqa: F401  (this privhist has them)
    except ImportError as exc:
        raise Skip("this privhist has no privhist.metrics (Session.aggregate)") from exc
    if not hasattr(Session, "aggregate"):
        raise Skip("this privhist has no Session.aggregate")
    df = load(task)
    by = task["by"]
    metrics = _privhist_metrics(task)
    partitions = _groups(df, by) if task["partitions"] == "public" else None
    bounds_kw: dict[str, Any] = {}
    if task["user"]:
        bounds_kw = {"max_partitions": task["k"], "max_per_partition": task["c"]}

    if task.get("weights"):  # the split of a peer (:func:`peer_split`)
        bounds_kw["weights"] = task["weights"]

    def run() -> dict[str, Any]:
        release = Session().aggregate(
            df,
            by=by,
            metrics=metrics,
            user=task["user"],
            partitions=partitions,
            epsilon=task["epsilon"],
            delta=task["delta"],
            **bounds_kw,
        )
        table = release.to_pandas()
        rows: dict[str, list[list[Any]]] = {}
        keys = [_key(r) for r in table[by].itertuples(index=False, name=None)]
        for name in task["metrics"]:
            column = _privhist_column(list(table.columns), name)
            rows[name] = [[k, _value(v)] for k, v in zip(keys, table[column].tolist(), strict=True)]
        return _packed(rows, _privhist_noise(getattr(release, "metadata", {})))

    return run


def _privhist_metrics(task: dict[str, Any]) -> dict[str, Any]:
    from privhist import metrics as pm

    cols, bounds = task["columns"], task["bounds"]
    builders = {"sum": pm.sum, "mean": pm.mean}
    metrics: dict[str, Any] = {}
    for name in task["metrics"]:
        lo, hi = bounds[name]
        if name == "median":  # the data are integers: OpenDP's candidates are too
            metrics[name] = pm.quantiles(cols[name], [0.5], lo, hi, resolution=1)
        else:
            metrics[name] = builders[name](cols[name], lo, hi)
    return metrics


def _aggregation(task: dict[str, Any]) -> Any:
    """privhist's plan of ``task``'s release (its split, its mechanisms), before any data is
    read; None when this privhist has no aggregations."""
    try:
        from privhist.analytics.aggregate import Aggregation
    except ImportError:
        return None
    k, c = (task["k"], task["c"]) if task["user"] else (1, 1)
    return Aggregation(
        _privhist_metrics(task),
        tuple(task["by"]),
        task["epsilon"],
        task["delta"],
        bool(task["user"]),
        k,
        c,
        (("public",),) if task["partitions"] == "public" else None,
    )


def same_split(task: dict[str, Any], weights: dict[str, float]) -> bool:
    """Whether privhist's own split of ``task`` is ``weights`` (normalised, to 0.1%): then
    running it again at them adds nothing."""
    agg = _aggregation(task)
    if agg is None:
        return False
    own = {name: float(share) for name, share in agg.split().items()}
    total = sum(weights.values())
    given = {name: w / total for name, w in weights.items()}
    return own.keys() == given.keys() and all(abs(own[n] - given[n]) < 1e-3 for n in own)


def _privhist_column(columns: list[str], name: str) -> str:
    """The release's column of metric ``name`` (a quantile's is ``name_<level>``)."""
    if name in columns:
        return name
    for candidate in (f"{name}_0.5", f"{name}_0.50"):
        if candidate in columns:
            return candidate
    raise KeyError(f"no column for metric {name!r} in {columns}")


def _privhist_noise(metadata: dict[str, Any]) -> str:
    """The parts of a release's metadata that say which noise and which split it used."""
    words = ("noise", "split", "mechanism", "selector", "selection", "resolution", "budget")
    picked = {k: v for k, v in metadata.items() if any(w in k.lower() for w in words)}
    for k, v in picked.items():  # nested descriptions (the selector's): their headline only
        if isinstance(v, dict):
            picked[k] = {x: y for x, y in v.items() if any(w in x.lower() for w in words)}
    return json.dumps(picked, default=str, sort_keys=True)


def pipelinedp(task: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """PipelineDP's ``DPEngine`` on its local backend (see the module notes)."""
    try:
        import pipeline_dp
    except ImportError as exc:
        raise Skip("PipelineDP is not installed (pip install -e '.[bench]')") from exc
    df = load(task)
    by, cols, bounds = task["by"], task["columns"], task["bounds"]
    value_cols = sorted({cols[m] for m in task["metrics"]})
    user = task["user"]
    # one Python tuple per record: (privacy id, group key columns..., value columns...)
    id_col = df[user].to_list() if user else list(range(df.height))
    rows = list(
        zip(
            id_col,
            *(df[c].to_list() for c in by),
            *(df[c].to_list() for c in value_cols),
            strict=True,
        )
    )
    nb = len(by)
    public = (
        [tuple(r) for r in _groups(df, by).iter_rows()] if task["partitions"] == "public" else None
    )
    k, c = (task["k"], task["c"]) if user else (1, 1)
    kinds = {
        "sum": pipeline_dp.Metrics.SUM,
        "mean": pipeline_dp.Metrics.MEAN,
        "median": pipeline_dp.Metrics.PERCENTILE(50),
    }
    fields = {"sum": "sum", "mean": "mean", "median": "percentile_50"}
    # one aggregate() call per value column (and bounds), each with its metrics
    calls: dict[tuple[str, int, int], list[str]] = {}
    for name in task["metrics"]:
        lo, hi = bounds[name]
        calls.setdefault((cols[name], lo, hi), []).append(name)

    def run() -> dict[str, Any]:
        accountant = pipeline_dp.NaiveBudgetAccountant(
            total_epsilon=task["epsilon"], total_delta=task["delta"]
        )
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        results = []
        for (column, lo, hi), names in calls.items():
            at = 1 + nb + value_cols.index(column)
            params = pipeline_dp.AggregateParams(
                metrics=[kinds[n] for n in names],
                noise_kind=pipeline_dp.NoiseKind.LAPLACE,
                max_partitions_contributed=k,
                max_contributions_per_partition=c,
                min_value=lo,
                max_value=hi,
            )
            extractors = pipeline_dp.DataExtractors(
                privacy_id_extractor=lambda r: r[0],
                partition_extractor=lambda r: r[1 : 1 + nb],
                value_extractor=lambda r, at=at: r[at],
            )
            result = engine.aggregate(rows, params, extractors, public_partitions=public)
            results.append((names, result))
        accountant.compute_budgets()
        out: dict[str, list[list[Any]]] = {}
        for names, result in results:
            for key, values in result:
                for n in names:
                    out.setdefault(n, []).append([_key(key), _value(getattr(values, fields[n]))])
        for n in task["metrics"]:
            out.setdefault(n, [])
        return _packed(out, _pipelinedp_noise(accountant))

    return run


def peer_split(peer: str, task: dict[str, Any]) -> dict[str, float] | None:
    """The budget split ``peer`` gives ``task``'s metrics, as privhist ``weights`` (each metric's
    epsilon, and with private groups the selection's as ``"groups"``), so that privhist can be
    run at it: a comparison at equal budget per metric (``privhist@peer``). PipelineDP's is read
    off its own accountant (a release of 200 rows: the split does not depend on the data;
    mechanisms ``Sum``, ``MeanCount`` and ``MeanSum``, ``Quantile``, ``PartitionSelection``).
    OpenDP's Polars context (in another environment) gives every noisy aggregate the same noise
    scale relative to its sensitivity, which its summary shows (printed with each run): a sum
    weighs 1, a mean 2 (sum and length), a quantile 2 (its score is not monotone: the same
    scale costs twice the epsilon), and with private groups the length 1. None for a peer
    without a known split."""
    private = task["partitions"] == "private"
    weights: dict[str, float] = {}
    if peer == "PipelineDP":
        try:
            noise = pipelinedp({**task, "limit": 200})()["noise"]
        except Skip:
            return None
        of = {"Sum": "sum", "MeanCount": "mean", "MeanSum": "mean", "Quantile": "median"}
        for part in noise.split("; "):
            name, eps = part.split()[0], float(part.split("eps=")[1].split()[0])
            key = "groups" if name == "PartitionSelection" else of[name]
            weights[key] = weights.get(key, 0.0) + eps
    elif peer == "OpenDP":
        weights = {m: {"sum": 1.0, "mean": 2.0, "median": 2.0}[m] for m in task["metrics"]}
        if private:
            weights["groups"] = 1.0
    else:
        return None
    return weights


def _pipelinedp_noise(accountant: Any) -> str:
    try:
        specs = [m.mechanism_spec for m in accountant._mechanisms]
        return "; ".join(
            f"{s.name} {s.mechanism_type.value} eps={s._eps:.4g} delta={s._delta:.3g}"
            for s in specs
        )
    except Exception as exc:  # a description only: never fail the run for it
        return f"(split not readable: {exc})"


def opendp(task: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """OpenDP's Polars context (runs in OpenDP's own environment; see the module notes)."""
    import warnings

    try:
        import opendp.prelude as dp
        import polars as pl
    except ImportError as exc:
        raise Skip(f"OpenDP's Polars context is not importable here ({exc})") from exc
    warnings.simplefilter("ignore", FutureWarning)  # its note on signed counts
    dp.enable_features("contrib")
    df = load(task)
    by, cols, bounds, user = task["by"], task["columns"], task["bounds"], task["user"]
    keys = _groups(df, by) if task["partitions"] == "public" else None
    exprs = []
    for name in task["metrics"]:
        lo, hi = bounds[name]
        col = pl.col(cols[name])
        if name == "sum":
            exprs.append(col.dp.sum((lo, hi)).alias("sum"))
        elif name == "mean":
            exprs.append(col.dp.mean((lo, hi)).alias("mean"))
        else:
            exprs.append(col.dp.quantile(0.5, list(range(lo, hi + 1))).alias("median"))
    if keys is None:
        exprs.insert(0, dp.len())  # its private key release needs a noisy length
    if user:
        unit = dp.unit_of(
            contributions=[dp.polars.Bound(by=by, per_group=task["c"], num_groups=task["k"])]
        )
    else:
        unit = dp.unit_of(contributions=1)

    def query_of(data: Any) -> Any:
        context = dp.Context.compositor(
            data=data.lazy(),
            privacy_unit=unit,
            privacy_loss=dp.loss_of(epsilon=task["epsilon"], delta=task["delta"]),
            split_evenly_over=1,
            margins=[dp.polars.Margin(by=[], max_length=OPENDP_MAX_LENGTH)],
        )
        query = context.query().group_by(by).agg(exprs)
        return query if keys is None else query.with_keys(keys)

    summary = _opendp_noise(query_of(df))  # untimed: the same plan, resolved once

    def run() -> dict[str, Any]:
        data = _bound_outside(df, user, by, task["k"], task["c"]) if user else df
        out = query_of(data).release().collect()
        rows = {
            n: [[_key(r[c] for c in by), _value(r[n])] for r in out.iter_rows(named=True)]
            for n in task["metrics"]
        }
        return _packed(rows, summary)

    return run


def _bound_outside(df: Any, user: str, by: list[str], k: int, c: int) -> Any:
    """Each user's rows in at most ``k`` groups (those of smallest random priority: a hash of
    (user, group) under a fresh seed) and at most ``c`` random rows in each."""
    import polars as pl

    seed = int.from_bytes(os.urandom(7), "little")
    priority = pl.struct([user, *by]).hash(seed)
    kept = df.filter(priority.rank("dense").over(user) <= k)
    order = pl.int_range(pl.len()).shuffle(seed=seed ^ 0x5DEECE66D)
    return kept.filter(order.over([user, *by]) < c)


def _opendp_noise(query: Any) -> str:
    try:
        s = query.summarize()
        parts = [
            f"{r['column']} {r['aggregate']} {r['distribution']} scale={r['scale']:.4g}"
            + (f" threshold={r['threshold']}" if r.get("threshold") is not None else "")
            for r in s.iter_rows(named=True)
        ]
        return "; ".join(parts)
    except Exception as exc:  # a description only
        return f"(summary not readable: {exc})"


def tumult(task: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """Tumult Analytics on local Spark (runs in its own environment; see the module notes)."""
    try:
        from pyspark.sql import SparkSession
        from tmlt.analytics import (
            AddOneRow,
            AddRowsWithID,
            ApproxDPBudget,
            KeySet,
            MaxGroupsPerID,
            MaxRowsPerGroupPerID,
            QueryBuilder,
        )
        from tmlt.analytics import Session as TSession
    except ImportError as exc:
        raise Skip(f"Tumult Analytics is not importable here ({exc})") from exc
    import polars as pl

    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's workers: this environment's Python
    by, cols, bounds, user = task["by"], task["columns"], task["bounds"], task["user"]
    df = load(task)
    group_col = "_group"
    if user:  # its per-user constraints take one grouping column
        df = df.with_columns(
            pl.concat_str([pl.col(b).cast(pl.Utf8) for b in by], separator="|").alias(group_col)
        )
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="bench-aggregate-spark-"))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.createDataFrame(df.to_pandas()).cache()
    sdf.count()
    public = task["partitions"] == "public"
    keyframe = (
        spark.createDataFrame(_groups(df, by if not user else [*by, group_col]).to_pandas())
        if public
        else None
    )
    names = list(task["metrics"])
    eps, delta = task["epsilon"], task["delta"]
    eps_metrics = eps if public else eps / 2
    share = eps_metrics / len(names)

    def constrained() -> Any:
        q = QueryBuilder("data")
        if user:
            q = q.enforce(MaxGroupsPerID(group_col, task["k"]))
            q = q.enforce(MaxRowsPerGroupPerID(group_col, task["c"]))
        return q

    def run() -> dict[str, Any]:
        protected = AddRowsWithID(user) if user else AddOneRow()
        session = TSession.from_dataframe(
            privacy_budget=ApproxDPBudget(eps, delta),
            source_id="data",
            dataframe=sdf,
            protected_change=protected,
        )
        if public:
            keyset = KeySet.from_dataframe(keyframe)
        else:
            found = session.evaluate(
                constrained().get_groups([*by, group_col] if user else by),
                ApproxDPBudget(eps / 2, delta),
            )
            keyset = KeySet.from_dataframe(found)
        rows: dict[str, list[list[Any]]] = {}
        for name in names:
            lo, hi = bounds[name]
            grouped = constrained().groupby(keyset)
            if name == "sum":
                query = grouped.sum(cols[name], lo, hi, name=name, mechanism="laplace")
            elif name == "mean":
                query = grouped.average(cols[name], lo, hi, name=name, mechanism="laplace")
            else:
                query = grouped.median(cols[name], lo, hi, name=name)
            answer = session.evaluate(query, ApproxDPBudget(share, 0)).toPandas()
            rows[name] = [[_key(r[b] for b in by), _value(r[name])] for _, r in answer.iterrows()]
        split = "get_groups eps/2 + all delta; " if not public else ""
        noise = split + f"one query per metric, eps {share:.4g} each; sum, average: Laplace; "
        return _packed(rows, noise + "median: exponential mechanism")

    return run


def repeated(task: dict[str, Any], factory: str, releases: int) -> Callable[[], dict[str, Any]]:
    """``releases`` releases in a row by the system ``factory`` names (its setup done once):
    the draws that tell a tie from a loss (``--releases``); not a timing."""
    run = globals()[factory](task)

    def many() -> dict[str, Any]:
        return {"releases": [run() for _ in range(releases)]}

    return many


def unavailable(why: str) -> Callable[[], Any]:
    """A system that cannot run here: reported as not run, with the reason."""
    raise Skip(why)


# -- a peer in its own virtual environment ----------------------------------------------------


def _peer_child(spec_json: str) -> None:
    """Run one system in this process (a peer's own Python) with the harness's child: set up,
    warm up, time one release, write the result where the harness reads it."""
    import _harness

    out = os.environ.get("HARNESS_RESULT")
    if not out:
        raise SystemExit("HARNESS_RESULT is not set: this mode is run by the harness")
    _harness._child(spec_json, out)


def _target(
    factory: str, task: dict[str, Any], releases: int | None
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The harness target, its parameters and its warm-up's: one release of ``factory``, or
    ``releases`` of them in a row (:func:`repeated`, warmed by one release)."""
    warm = {"task": {**task, "limit": WARM_ROWS}}
    if releases is None:
        return f"{MODULE}:{factory}", {"task": task}, warm
    params = {"task": task, "factory": factory}
    return (
        f"{MODULE}:repeated",
        {**params, "releases": releases},
        {**warm, "factory": factory, "releases": 1},
    )


def _peer_system(
    name: str, python: str | None, factory: str, task: dict[str, Any], releases: int | None
) -> System:
    if python is None or not Path(python).exists():
        where = python or "(none given)"
        why = f"{name}'s environment {where} is absent: {PEER_SETUP[name]}"
        return System(name, f"{MODULE}:unavailable", {"why": why}, work=task["rows"])
    target, params, warm = _target(factory, task, releases)
    spec = {"target": target, "params": params, "warm": warm}
    command = [python, str(Path(__file__).resolve()), "child", json.dumps(spec)]
    return System(name, command=command, work=task["rows"], timeout=task["timeout"])


def systems_for(
    task: dict[str, Any],
    args: argparse.Namespace,
    releases: dict[str, int] | None = None,
    splits: dict[str, dict[str, float]] | None = None,
) -> list[System]:
    """The systems of one task; with ``releases`` (system -> count), each makes that many
    releases in one process instead of one timed release, and privhist runs again at each
    peer's budget split in ``splits`` (``privhist@peer``, as many releases as privhist)."""

    def count(name: str) -> int | None:
        return None if releases is None else releases[name]

    def local(name: str, factory: str) -> System:
        target, params, warm = _target(factory, task, count(name))
        return System(name, target, params, warm, work=task["rows"], timeout=task["timeout"])

    out = [local("privhist", "privhist")]
    for peer, weights in (splits or {}).items():  # privhist at each peer's split
        if releases is not None:
            target, params, warm = _target(
                "privhist", {**task, "weights": weights}, count("privhist")
            )
            out.append(
                System(
                    f"privhist@{peer}",
                    target,
                    params,
                    warm,
                    work=task["rows"],
                    timeout=task["timeout"],
                )
            )
    if "PipelineDP" in args.systems:
        out.append(local("PipelineDP", "pipelinedp"))
    if "OpenDP" in args.systems:
        out.append(_peer_system("OpenDP", args.opendp_python, "opendp", task, count("OpenDP")))
    if "Tumult" in args.systems:
        out.append(_peer_system("Tumult", args.tumult_python, "tumult", task, count("Tumult")))
    return out


# -- scoring ----------------------------------------------------------------------------------


def score_release(
    result: dict[str, Any],
    metric: str,
    true: dict[str, dict[str, float]],
    bounds: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Released, real and fake groups, values not finite, values outside ``bounds`` (for a
    mean or a quantile, which a clamped release never leaves), and the relative error of each
    released real group with a finite value (key -> error)."""
    rows = result.get("rows", {}).get(metric, [])
    errors: dict[str, float] = {}
    fake = nonfinite = outside = 0
    for key, value in rows:
        if key not in true:
            fake += 1
            continue
        if value is None or not math.isfinite(value):
            nonfinite += 1
            continue
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            outside += 1
        t = true[key][metric]
        errors[key] = abs(value - t) / max(abs(t), 1.0)
    return {
        "released": len(rows),
        "fake": fake,
        "nonfinite": nonfinite,
        "outside": outside,
        "errors": errors,
    }


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def summarise_config(
    config: dict[str, Any],
    measurements: Sequence[Measurement],
    true: dict[str, dict[str, float]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The accuracy rows of one configuration (one per system and metric) and privhist's error
    against each peer on the groups both released (one per peer and metric)."""
    names = list(dict.fromkeys(m.system for m in measurements))
    by_system: dict[str, list[Measurement]] = {n: [] for n in names}
    for m in measurements:
        by_system[m.system].append(m)
    rows, pairs = [], []
    base = {k: config[k] for k in ("dataset", "rows", "partitions", "mode")}
    for metric in config["metrics"]:
        scored: dict[str, dict[int, dict[str, Any]]] = {}
        for name in names:
            done = [m for m in by_system[name] if m.ok and isinstance(m.result, dict)]
            row: dict[str, Any] = {**base, "system": name, "metric": metric, "runs": len(done)}
            if not done:
                bad = next((m for m in by_system[name] if not m.ok), None)
                row["not_run"] = (
                    (bad.skipped or bad.error or "stopped") if bad is not None else "no run"
                )
                rows.append(row)
                continue
            lo_hi = config.get("bounds", {}).get(metric) if metric != "sum" else None
            s = [score_release(m.result, metric, true, lo_hi) for m in done]
            scored[name] = {m.round: x for m, x in zip(done, s, strict=True)}
            meds = [statistics.median(x["errors"].values()) for x in s if x["errors"]]
            means = [statistics.fmean(x["errors"].values()) for x in s if x["errors"]]
            row.update(
                released=_mean([x["released"] for x in s]),
                real=_mean([x["released"] - x["fake"] for x in s]),
                fake=_mean([x["fake"] for x in s]),
                nonfinite=_mean([x["nonfinite"] for x in s]),
                outside=_mean([x["outside"] for x in s]),
                true_groups=len(true),
                median_rel_error=_mean(meds),
                mean_rel_error=_mean(means),
                wall=statistics.median(m.wall for m in done if m.wall is not None),
                cpu=statistics.median(m.cpu for m in done if m.cpu is not None),
                noise=done[0].result.get("noise", ""),
            )
            rows.append(row)
        ours = scored.get("privhist")
        for peer, theirs in scored.items():
            if peer == "privhist" or ours is None:
                continue
            a_meds, b_meds, a_means, b_means, common = [], [], [], [], []
            for r in sorted(set(ours) & set(theirs)):  # round by round
                a, b = ours[r], theirs[r]
                keys = sorted(set(a["errors"]) & set(b["errors"]))
                if not keys:
                    continue
                common.append(len(keys))
                a_meds.append(statistics.median(a["errors"][k] for k in keys))
                b_meds.append(statistics.median(b["errors"][k] for k in keys))
                a_means.append(statistics.fmean(a["errors"][k] for k in keys))
                b_means.append(statistics.fmean(b["errors"][k] for k in keys))
            pairs.append(
                {
                    **base,
                    "metric": metric,
                    "peer": peer,
                    "common_groups": _mean(common),
                    "privhist_median": _mean(a_meds),
                    "peer_median": _mean(b_meds),
                    "privhist_mean": _mean(a_means),
                    "peer_mean": _mean(b_means),
                }
            )
    return rows, pairs


def _per_group(releases: Sequence[dict[str, Any]], keys: Sequence[str]) -> Any:
    """A releases x groups array of relative errors (NaN where a release left a group out)."""
    import numpy as np

    out = np.full((len(releases), len(keys)), np.nan)
    for i, x in enumerate(releases):
        for j, k in enumerate(keys):
            if k in x["errors"]:
                out[i, j] = x["errors"][k]
    return out


def noisy_min_law(scores: Any, scale: float) -> Any:
    """The law of the candidate report-noisy-min picks with exponential noise of ``scale`` on
    ``scores``: permute-and-flip (Ding, Kifer, Saucier, Wang, Xiao & Zhang 2021, arXiv
    2105.07260), the draw of privhist's quantiles with Laplace noise and of OpenDP 0.16's
    (``ExponentialMin`` in its summary). With ``w_c = exp(-(s_c - min s) / scale)``, candidate
    ``r`` wins with probability ``w_r`` times the integral over ``[0, 1]`` of ``prod_{c != r} (1
    - y w_c)`` (substitute ``y = exp(-x)`` in the integral over the winning noise ``x``), a
    polynomial of degree ``m - 1``: Gauss-Legendre quadrature with ``m // 2 + 1`` nodes is
    exact for it. The same integral as ``tests/selection_laws.pf_level_law`` (high precision,
    for the samplers' tests), in floats, fast enough for every group at every split."""
    import numpy as np

    s = np.asarray(scores, dtype=np.float64)
    w = np.exp(-(s - s.min()) / scale)
    m = len(w)
    if m > 4096:
        raise ValueError(f"{m} candidates: the quadrature holds an m x m/2 table")
    nodes, weights = np.polynomial.legendre.leggauss(m // 2 + 1)
    y, g = (nodes + 1) / 2, weights / 2
    logs = np.log1p(-np.outer(y, w))  # y < 1: every factor is positive
    total = logs.sum(axis=1)
    return w * (g[:, None] * np.exp(total[:, None] - logs)).sum(axis=0)


def median_scores(values: Any, candidates: Any) -> Any:
    """``|2 C_<(v) + C_=(v) - n|`` for each candidate ``v``: twice the distance of the middle
    rank to the middle of ``v``'s ranks, the score of both libraries' medians."""
    import numpy as np

    x = np.sort(np.asarray(values))
    c = np.asarray(candidates)
    below = np.searchsorted(x, c, side="left")
    at = np.searchsorted(x, c, side="right") - below
    return np.abs(2 * below + at - len(x)).astype(np.float64)


def median_epsilons(task: dict[str, Any]) -> dict[str, float] | None:
    """The epsilon of one median draw per group: privhist's at its own split (its metric's
    share, :meth:`~privhist.analytics.aggregate.Aggregation._em_epsilon`) and OpenDP's at its
    equal-scale split (:func:`peer_split`; its summary prints the scale ``2 / epsilon``). None
    when privhist does not draw the median by permute-and-flip at record level."""
    if task["user"] or "median" not in task["metrics"]:
        return None
    agg = _aggregation(task)
    if agg is None or agg.noise != "laplace" or agg.quantile_method("median") != "exponential":
        return None
    ours = float(agg._em_epsilon(agg._shares()[0]["median"], 1))
    theirs = peer_split("OpenDP", task)
    assert theirs is not None
    return {"privhist": ours, "OpenDP": task["epsilon"] * theirs["median"] / sum(theirs.values())}


def exact_medians(task: dict[str, Any], true: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    """Each group's expected relative error of privhist's and OpenDP's median, from the laws of
    their draws (:func:`noisy_min_law`, on the values clamped to the bounds, candidates the
    integers between them) at each library's epsilon (:func:`median_epsilons`): no sampling
    noise. With private groups this is the error of a group when released."""
    import numpy as np

    eps = median_epsilons(task)
    if eps is None:
        return None
    errors = {name: median_group_errors(task, true, e) for name, e in eps.items()}
    a, b = np.array(errors["privhist"]), np.array(errors["OpenDP"])
    return {
        "epsilon": eps,
        "groups": len(a),
        "privhist": float(a.mean()),
        "OpenDP": float(b.mean()),
        "ratio": _over(float(a.mean()), float(b.mean())),
        "worse": int(np.sum(a > b * (1 + 1e-9))),
    }


def laplace_sum_abs(a: float, b: float) -> float:
    """``E|X + Y|`` for independent Laplace ``X``, ``Y`` of scales ``a``, ``b``: the density of
    the sum is ``(a e^{-|z|/a} - b e^{-|z|/b}) / (2 (a^2 - b^2))``, and ``int |z| e^{-|z|/s} dz
    = 2 s^2``, so ``(a^3 - b^3) / (a^2 - b^2) = (a^2 + a b + b^2) / (a + b)`` (``1.5 a`` when
    ``a = b``; ``a`` when ``b = 0``)."""
    if a + b == 0:
        return 0.0
    return (a * a + a * b + b * b) / (a + b)


def _mean_errors(
    groups: Any,
    bounds: tuple[float, float],
    z: tuple[Any, Any],
    eps_sum: float,
    eps_count: float,
    centred: bool,
    clamp: bool,
) -> float:
    """The mean over groups of the expected relative error of a mean released as a noisy sum
    over a noisy count (Laplace; ``z`` holds standard Laplace draws, the same for every call, so
    comparisons share their noise): centred (the sum of ``v - m`` over the count, plus the
    middle ``m``, sensitivity ``M`` the half-width) as privhist and PipelineDP release it, or not
    (sensitivity ``max(|lo|, |hi|)``) as OpenDP does; clamped to the bounds or not. A count at
    or below 1 counts as 1."""
    import numpy as np

    lo, hi = bounds
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    sens = half if centred else max(abs(lo), abs(hi))
    out = []
    for n, total, true in groups:
        num = (total - n * mid if centred else total) + z[0] * sens / eps_sum
        est = num / np.maximum(n + z[1] / eps_count, 1.0) + (mid if centred else 0.0)
        if clamp:
            est = np.clip(est, lo, hi)
        out.append(float(np.abs(est - true).mean()) / max(abs(true), 1.0))
    return float(np.mean(out))


def least_budget(
    task: dict[str, Any], true: dict[str, dict[str, float]], draws: int = 20_000, seed: int = 0
) -> dict[str, Any] | None:
    """The least epsilon privhist would need, metric by metric, to be at most the best peer's
    error on each metric of the three-metric query with public groups (record level), each peer
    at its own split (:func:`peer_split`), and the least total over the ways privhist can answer
    them. None for other queries.

    * **median**: the best peer's is OpenDP's, whose draw has privhist's law at equal epsilon
      (:func:`noisy_min_law`); the least epsilon is found by bisection on the exact errors.
    * **sum**: the best peer's is the Laplace sum of sensitivity ``max(|lo|, |hi|)`` at the
      largest epsilon a peer gives it, expected error ``S / eps`` per group. privhist answers
      it the same way (least epsilon: that one), or as a centred sum plus the middle times a
      count (:func:`laplace_sum_abs`), whose two epsilons are searched for the least sum; that
      count then serves the mean too.
    * **mean**: the peers' means (PipelineDP's centred sum over a count at its two shares,
      OpenDP's plain sum over its length) simulated with ``draws`` Laplace draws per group; the
      least total epsilon of privhist's (a centred sum over a count, clamped, best split of a
      grid) found by a scan; with the sum's count already paid, only its centred sum's.
    """
    import numpy as np

    if task["user"] or task["partitions"] != "public" or sorted(task["metrics"]) != sorted(METRICS):
        return None
    eps = task["epsilon"]
    splits = {}
    for peer in ("PipelineDP", "OpenDP"):
        w = peer_split(peer, task)
        if w is not None:
            splits[peer] = {m: eps * x / sum(w.values()) for m, x in w.items()}
    if "OpenDP" not in splits:
        return None
    out: dict[str, Any] = {"peer_epsilons": splits}
    # median: bisection on privhist's exact error against OpenDP's at its epsilon
    target = float(median_group_errors(task, true, splits["OpenDP"]["median"]).mean())
    lo_e, hi_e = 1e-3, eps
    for _ in range(30):
        mid_e = (lo_e + hi_e) / 2
        below = float(median_group_errors(task, true, mid_e).mean()) <= target
        lo_e, hi_e = (lo_e, mid_e) if below else (mid_e, hi_e)
    out["median"] = hi_e
    # sum: the best peer's Laplace sum and privhist's two ways to match it
    lo, hi = task["bounds"]["sum"]
    big, half, mid = max(abs(lo), abs(hi)), (hi - lo) / 2, abs(lo + hi) / 2
    best_sum = max(s["sum"] for s in splits.values())
    err = big / best_sum
    plain = best_sum
    centred = (math.inf, 0.0, 0.0)
    for e_s in np.linspace(0.01, 2 * eps, 400):
        if half / e_s >= err:
            continue
        lo_c, hi_c = 1e-4, 100.0
        for _ in range(60):
            m_c = (lo_c + hi_c) / 2
            lo_c, hi_c = (
                (lo_c, m_c) if laplace_sum_abs(half / e_s, mid / m_c) <= err else (m_c, hi_c)
            )
        centred = min(centred, (e_s + hi_c, float(e_s), hi_c))
    out["sum"] = {"plain": plain, "centred_plus_count": centred[0], "count": centred[2]}
    # mean: simulated errors of the peers and of privhist
    df = load(task)
    import polars as pl

    col, by = task["columns"]["mean"], task["by"]
    mlo, mhi = task["bounds"]["mean"]
    stats = df.group_by(by).agg(
        pl.len().alias("n"), pl.col(col).clip(mlo, mhi).sum().alias("s"), pl.col(col).mean()
    )
    groups = [
        (float(r["n"]), float(r["s"]), true[_key(r[b] for b in by)]["mean"])
        for r in stats.iter_rows(named=True)
    ]
    rng = np.random.default_rng(seed)
    z = (rng.laplace(0, 1, draws), rng.laplace(0, 1, draws))
    peers = {}
    if "PipelineDP" in splits:
        e = splits["PipelineDP"]["mean"] / 2
        peers["PipelineDP"] = _mean_errors(groups, (mlo, mhi), z, e, e, True, False)
    e = splits["OpenDP"]["mean"] / 2
    peers["OpenDP"] = _mean_errors(groups, (mlo, mhi), z, e, e, False, False)
    best_mean = min(peers.values())
    out["mean_peers"] = peers

    def ours(total: float) -> float:
        return min(
            _mean_errors(groups, (mlo, mhi), z, total * f, total * (1 - f), True, True)
            for f in np.linspace(0.3, 0.9, 13)
        )

    grid = np.arange(0.01, 2 * eps + 1e-9, 0.01)
    out["mean"] = next((float(t) for t in grid if ours(t) <= best_mean), math.inf)
    e_c = centred[2]
    out["mean_with_count"] = next(
        (
            float(t)
            for t in grid
            if _mean_errors(groups, (mlo, mhi), z, t, e_c, True, True) <= best_mean
        ),
        math.inf,
    )
    out["total_plain"] = out["median"] + plain + out["mean"]
    out["total_centred"] = out["median"] + centred[0] + out["mean_with_count"]
    out["least_total"] = min(out["total_plain"], out["total_centred"])
    return out


def median_group_errors(task: dict[str, Any], true: dict[str, dict[str, float]], eps: float) -> Any:
    """Each group's exact expected relative error of a median drawn by permute-and-flip at
    ``eps`` (:func:`noisy_min_law`, scale ``2 / eps``: the law of privhist's and of OpenDP's
    draw), on the group's values clamped to the bounds, candidates the integers between them;
    the groups' scores (:func:`median_scores`) are computed once per table."""
    import numpy as np
    import polars as pl

    lo, hi = task["bounds"]["median"]
    by, col = task["by"], task["columns"]["median"]
    key = (task["path"], task["limit"], lo, hi, tuple(by), col)
    if key not in _SCORES:
        candidates = np.arange(lo, hi + 1)
        rows = []
        for group in load(task).group_by(by).agg(pl.col(col).drop_nulls()).iter_rows(named=True):
            k = _key(group[b] for b in by)
            if k in true and len(group[col]):
                values = np.clip(np.asarray(group[col], dtype=np.float64), lo, hi)
                rows.append((median_scores(values, candidates), true[k]["median"]))
        _SCORES[key] = (candidates, rows)
    candidates, rows = _SCORES[key]
    return np.array(
        [
            float((noisy_min_law(s, 2.0 / eps) * np.abs(candidates - t)).sum()) / max(abs(t), 1.0)
            for s, t in rows
        ]
    )


_SCORES: dict[tuple[Any, ...], Any] = {}


def print_least_budget(title: str, least: dict[str, Any], epsilon: float) -> None:
    """The table of :func:`least_budget`."""
    print(f"\n{title}: the least epsilon privhist needs to be at most the best peer on each metric")
    print(f"peers' splits: {least['peer_epsilons']}")
    print(f"peers' mean errors: {least['mean_peers']}")
    s = least["sum"]
    print("| way | median | sum | mean | total |")
    print("|---|---|---|---|---|")
    print(
        f"| plain sum | {least['median']:.3f} | {s['plain']:.3f} | {least['mean']:.3f} | "
        f"{least['total_plain']:.3f} |"
    )
    print(
        f"| centred sum + a count the mean shares | {least['median']:.3f} | "
        f"{s['centred_plus_count']:.3f} (count {s['count']:.3f}) | "
        f"{least['mean_with_count']:.3f} | {least['total_centred']:.3f} |"
    )
    verdict = "more than" if least["least_total"] > epsilon else "within"
    print(f"least total {least['least_total']:.3f}: {verdict} the budget {epsilon:g}")


def _ratios(a: Any, b: Any) -> tuple[float, float]:
    """privhist's error over the peer's from two releases x groups arrays: the ratio of the
    mean over groups of each group's mean error, and of the medians over groups of it."""
    import numpy as np

    ea, eb = np.nanmean(a, axis=0), np.nanmean(b, axis=0)
    ok = np.isfinite(ea) & np.isfinite(eb)
    ea, eb = ea[ok], eb[ok]
    if not eb.size:
        return math.inf, math.inf
    return _over(float(ea.mean()), float(eb.mean())), _over(
        float(np.median(ea)), float(np.median(eb))
    )


def _over(x: float, y: float) -> float:
    """``x / y`` for errors: 1 when both are 0 (both exact: a tie), infinite when only the
    peer's is."""
    if y > 0:
        return x / y
    return 1.0 if x == 0 else math.inf


def summarise_releases(
    config: dict[str, Any],
    measurements: Sequence[Measurement],
    true: dict[str, dict[str, float]],
    boot: int = 1000,
) -> list[dict[str, Any]]:
    """privhist's error over each peer's from many releases of each (``--releases``): each
    group's relative error averaged over the releases that gave it, then the ratio of the means
    over the groups both released and of the medians, with 95% intervals from resampling each
    system's releases (``boot`` times, a fixed seed: the interval is a fact of the data)."""

    import numpy as np

    base = {k: config[k] for k in ("dataset", "rows", "partitions", "mode")}
    done = {
        m.system: m.result["releases"]
        for m in measurements
        if m.ok and isinstance(m.result, dict) and "releases" in m.result
    }
    out = []
    rng = np.random.default_rng(27)
    keys = sorted(true)
    for metric in config["metrics"]:
        lo_hi = config.get("bounds", {}).get(metric) if metric != "sum" else None
        arrays = {
            name: _per_group([score_release(r, metric, true, lo_hi) for r in rs], keys)
            for name, rs in done.items()
        }
        for peer, theirs in arrays.items():
            if peer.startswith("privhist"):
                continue
            # privhist at its own split, and at the peer's when it ran so (privhist@peer)
            for split, mine in (("own", "privhist"), ("peer's", f"privhist@{peer}")):
                ours = arrays.get(mine)
                if ours is not None:
                    out.append(_release_pair(base, metric, peer, split, ours, theirs, rng, boot))
    return out


def _release_pair(
    base: dict[str, Any],
    metric: str,
    peer: str,
    split: str,
    ours: Any,
    theirs: Any,
    rng: Any,
    boot: int,
) -> dict[str, Any]:
    """One privhist / peer comparison of :func:`summarise_releases`."""
    import warnings

    import numpy as np

    with warnings.catch_warnings():  # groups a system never released: NaN, left out
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, med = _ratios(ours, theirs)
        draws = [
            max(
                _ratios(
                    ours[rng.integers(0, len(ours), len(ours))],
                    theirs[rng.integers(0, len(theirs), len(theirs))],
                )
            )
            for _ in range(boot)
        ]
        common = int(
            np.sum(np.isfinite(np.nanmean(ours, axis=0)) & np.isfinite(np.nanmean(theirs, axis=0)))
        )
    return {
        **base,
        "metric": metric,
        "peer": peer,
        "split": split,
        "releases": [len(ours), len(theirs)],
        "common_groups": common,
        "ratio_mean": mean,
        "ratio_median": med,
        "ratio": max(mean, med),
        "interval": [  # "nearest": an infinite ratio (the peer exact) stays one
            float(np.quantile(draws, 0.025, method="nearest")),
            float(np.quantile(draws, 0.975, method="nearest")),
        ],
    }


def print_release_goals(pairs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The error goals from many releases: per configuration and metric, the worst peer's
    ratio (the larger of the mean and median ratios) with its 95% interval. "met" when it is
    at most 1, "level" when it is above 1 but its interval reaches 1 (no loss the releases can
    tell from noise), "not met" when the whole interval is above 1."""
    print(
        "\nerror goals from many releases (issue 27: at most the best peer's, moonshot 0.8 of it;"
        " privhist / peer, each group's error averaged over the releases, then the mean and"
        " median over the groups both released; 95% intervals by resampling the releases):"
    )
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in pairs:  # privhist at its own split, then at each peer's (privhist@peer)
        tag = (p["dataset"], p["rows"], p["partitions"], p["mode"], p["metric"])
        groups.setdefault((*tag, p.get("split", "own")), []).append(p)
    verdicts = []
    for key, ps in groups.items():
        tag, split = key[:-1], key[-1]
        worst = max(ps, key=lambda p: p["ratio"])
        lo, hi = worst["interval"]
        w = worst["ratio"]
        if w <= 0.8:
            verdict = f"met, moonshot too ({w:.2f}x {worst['peer']})"
        elif w <= 1.0:
            verdict = f"met ({w:.2f}x {worst['peer']}; moonshot 0.8 not met)"
        elif lo <= 1.0:
            verdict = f"level ({w:.2f}x {worst['peer']}, interval {lo:.2f}-{hi:.2f} holds 1)"
        else:
            verdict = f"not met ({w:.2f}x {worst['peer']}, interval {lo:.2f}-{hi:.2f})"
        parts = [
            f"{p['peer']} {p['ratio_mean']:.2f}x mean, {p['ratio_median']:.2f}x median "
            f"[{p['interval'][0]:.2f}, {p['interval'][1]:.2f}] "
            f"({p['common_groups']} groups, {p['releases'][0]}/{p['releases'][1]} releases)"
            for p in ps
        ]
        dataset, _, partitions, mode, metric = tag
        at = "" if split == "own" else " at each peer's split"
        print(f"  {dataset} {partitions} {mode} {metric}{at}: {verdict}; " + "; ".join(parts))
        verdicts.append(
            {
                **_tagged(tag),
                "split": split,
                "worst_ratio": w,
                "interval": [lo, hi],
                "verdict": verdict,
            }
        )
    if not groups:
        print("  no comparison (privhist or every peer made no releases)")
    return verdicts


def _tagged(tag: tuple[Any, ...]) -> dict[str, Any]:
    """A verdict's configuration: ``(dataset, rows, partitions, mode, metric)`` by name."""
    return dict(zip(("dataset", "rows", "partitions", "mode", "metric"), tag, strict=True))


def _f(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def print_accuracy(rows: Sequence[dict[str, Any]]) -> None:
    print(
        "\naccuracy (errors relative to the exact per-group value, over the released real groups"
        " with a finite value; each averaged over the rounds; nonfin: values released inf or"
        " NaN; out: means and medians released outside [lo, hi]):"
    )
    head = (
        f"{'dataset':<9} {'rows':>10} {'groups':<7} {'mode':<6} {'system':<10} {'metric':<6} "
        f"{'runs':>4} {'released':>8} {'real':>6} {'fake':>4} {'nonfin':>6} {'out':>5} "
        f"{'true':>5} "
        f"{'med rel err':>11} {'mean rel err':>12} {'wall s':>8} {'CPU s':>8}"
    )
    print(head)
    for r in rows:
        lead = (
            f"{r['dataset']:<9} {r['rows']:>10,} {r['partitions']:<7} {r['mode']:<6} "
            f"{r['system']:<10} {r['metric']:<6} {r['runs']:>4}"
        )
        if "not_run" in r:
            print(f"{lead} not run: {r['not_run']}")
            continue
        print(
            f"{lead} {_f(r['released'], '.1f'):>8} {_f(r['real'], '.1f'):>6} "
            f"{_f(r['fake'], '.1f'):>4} {_f(r['nonfinite'], '.1f'):>6} "
            f"{_f(r['outside'], '.1f'):>5} {r['true_groups']:>5} "
            f"{_f(r['median_rel_error'], '.3e'):>11} {_f(r['mean_rel_error'], '.3e'):>12} "
            f"{_f(r['wall'], '.3f'):>8} {_f(r['cpu'], '.3f'):>8}"
        )
    print("\nnoise and split each system used (from its own release or accountant):")
    seen = set()
    for r in rows:
        if "not_run" in r:
            continue
        tag = (r["dataset"], r["partitions"], r["mode"], r["system"])
        if tag in seen:
            continue
        seen.add(tag)
        print(f"  {r['dataset']} {r['partitions']} {r['mode']} {r['system']}: {r['noise']}")


def print_error_goals(pairs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """privhist's error over each peer's on the groups both released, and the goal verdicts
    (at most the best peer's: the largest of these ratios at most 1; moonshot at most 0.8)."""
    print(
        "\nerror goals (issue 27: at most the best peer's at equal budget and bounds, moonshot "
        "0.8 of it; privhist / peer on the groups both released, median and mean over groups):"
    )
    verdicts = []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in pairs:
        groups.setdefault(
            (p["dataset"], p["rows"], p["partitions"], p["mode"], p["metric"]), []
        ).append(p)
    for tag, ps in groups.items():
        worst: float | None = None
        parts = []
        for p in ps:
            if p["privhist_median"] is None or not p["peer_median"]:
                parts.append(f"{p['peer']}: no common groups")
                continue
            r_med = p["privhist_median"] / p["peer_median"]
            r_mean = p["privhist_mean"] / p["peer_mean"] if p["peer_mean"] else math.inf
            ratio = max(r_med, r_mean)
            worst = ratio if worst is None else max(worst, ratio)
            parts.append(
                f"{p['peer']} {r_med:.2f}x median, {r_mean:.2f}x mean "
                f"({_f(p['common_groups'], '.0f')} groups)"
            )
        if worst is None:
            verdict = "no peer to compare"
        elif worst <= 0.8:
            verdict = f"met, moonshot too ({worst:.2f}x the best peer)"
        elif worst <= 1.0:
            verdict = f"met ({worst:.2f}x the best peer; moonshot 0.8 not met)"
        else:
            verdict = f"not met ({worst:.2f}x the best peer)"
        dataset, _, partitions, mode, metric = tag
        print(f"  {dataset} {partitions} {mode} {metric}: {verdict}; " + "; ".join(parts))
        verdicts.append({**_tagged(tag), "worst_ratio": worst, "verdict": verdict})
    if not groups:
        print("  no comparison (privhist or every peer did not run)")
    return verdicts


# -- the run ----------------------------------------------------------------------------------


def _default_data() -> str:
    beside = HERE.parent.parent / "shared" / "data"
    return str(beside if beside.is_dir() else Path("/work/shared/data"))


def _speed_goals(rows: int, names: set[str]) -> tuple[list[Ratio], list[Goal]]:
    ratios, goals = [], []
    for peer, target in (("PipelineDP", 20.0), ("OpenDP", 5.0), ("Tumult", None)):
        if peer not in names:
            continue
        for metric in ("wall", "cpu"):
            r = Ratio(peer, "privhist", metric)
            ratios.append(r)
            if target is not None:
                what = "wall" if metric == "wall" else "CPU"
                at = "" if rows == 10**7 else f" (measured at {rows:,} rows)"
                goals.append(
                    Goal(
                        f"at 10^7 rows at least {target:g}x {peer}'s speed ({what}){at}",
                        r,
                        at_least=target,
                    )
                )
    return ratios, goals


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--data", default=_default_data(), help="folder holding adult.data")
    ap.add_argument("--rows", type=int, default=10**7, help="rows of the generated table")
    ap.add_argument("--cache", default=None, help="folder of the generated table (a temp dir)")
    ap.add_argument("--datasets", default="adult,synthetic")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--partitions", default=",".join(PARTITIONS))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--epsilon", type=float, default=EPSILON)
    ap.add_argument("--delta", type=float, default=DELTA)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per release")
    ap.add_argument(
        "--opendp-python",
        default=os.environ.get("OPENDP_PYTHON", PEER_PYTHONS["OpenDP"]),
        help="the Python of OpenDP's environment (env OPENDP_PYTHON)",
    )
    ap.add_argument(
        "--tumult-python",
        default=os.environ.get("TUMULT_PYTHON", PEER_PYTHONS["Tumult"]),
        help="the Python of Tumult Analytics' environment (env TUMULT_PYTHON)",
    )
    ap.add_argument("--json", default=None, help="write the accuracy table and goals as JSON")
    ap.add_argument(
        "--quick", action="store_true", help="small data (20,000 generated rows, 5,000 of adult)"
    )
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    ap.add_argument(
        "--releases",
        type=int,
        nargs="+",
        metavar=("PEERS", "PRIVHIST"),
        default=None,
        help="after the timed rounds, each system makes this many releases in one process "
        "(privhist the second number, default the same) for error ratios with 95%% "
        "intervals; --rounds 0 skips the timed rounds",
    )
    ap.add_argument(
        "--exact-medians",
        action="store_true",
        help="print the medians' expected errors from the laws of both libraries' draws, each "
        "at its own split (record level; no sampling noise)",
    )
    ap.add_argument(
        "--least-budget",
        action="store_true",
        help="print the least epsilon privhist needs, metric by metric, to be at most the best "
        "peer's error on each metric of the three-metric query with public groups, each peer "
        "at its own split (record level)",
    )
    ap.add_argument("--wait-quiet", type=float, nargs=2, metavar=("CORES", "SECONDS"))
    ap.add_argument("--save", default=None, help="append every measurement as JSON lines")
    args = ap.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.quick:
        args.rows = 20_000
    args.systems = [s for s in args.systems.split(",") if s]
    if args.releases is not None:
        if len(args.releases) > 2 or min(args.releases) < 2:
            ap.error("--releases takes one or two counts, each at least 2")
        peers = args.releases[0]
        # equal counts by default: a group's error averaged over more releases is more often
        # above 0, which moves the median over groups when exact answers are common
        ours = args.releases[1] if len(args.releases) == 2 else peers
        args.releases = {name: peers for name in SYSTEMS} | {"privhist": ours}
    extra = args.exact_medians or args.least_budget
    if args.rounds < 0 or (args.rounds == 0 and args.releases is None and not extra):
        ap.error("--rounds 0 needs --releases, --exact-medians or --least-budget")
    return args


def configs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (dataset, partitions, mode) to run, with its task; a missing file is skipped."""
    out = []
    cache = Path(args.cache) if args.cache else Path(tempfile.gettempdir()) / "bench-aggregate"
    for name in [d for d in args.datasets.split(",") if d]:
        if name == "adult":
            path = Path(args.data) / "adult.data"
            if not path.exists():
                print(f"adult: {path} is absent; skipped")
                continue
            limit = 5_000 if args.quick else None
        elif name == "synthetic":
            path = cache / f"synthetic-{args.rows}.parquet"
            if not path.exists():
                print(f"generating {args.rows:,} rows into {path} ...", flush=True)
                generate_synthetic(path, args.rows)
            limit = None
        else:
            raise SystemExit(f"unknown dataset {name!r}")
        spec = dataset_spec(name, str(path))
        for partitions in [p for p in args.partitions.split(",") if p]:
            for mode in [m for m in args.modes.split(",") if m]:
                if mode not in MODES or partitions not in PARTITIONS:
                    raise SystemExit(f"unknown mode {mode!r} or partitions {partitions!r}")
                metrics = list(METRICS) if mode == "all" else [mode]
                task = {
                    **spec,
                    "limit": limit,
                    "metrics": metrics,
                    "partitions": partitions,
                    "epsilon": args.epsilon,
                    "delta": args.delta,
                    "timeout": args.timeout,
                }
                out.append({"task": task, "mode": mode})
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    accuracy: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    release_pairs: list[dict[str, Any]] = []
    exact_rows: list[dict[str, Any]] = []
    least_rows: list[dict[str, Any]] = []
    truths: dict[tuple[str, Any], dict[str, dict[str, float]]] = {}
    print(
        f"epsilon = {args.epsilon}, delta = {args.delta}; rounds = {args.rounds}; "
        f"systems: {', '.join(args.systems)}"
    )
    for cfg in configs(args):
        task = cfg["task"]
        tkey = (task["path"], task["limit"])
        if tkey not in truths:
            truths[tkey] = truth(task)
        true = truths[tkey]
        n_rows = int(sum(v["rows"] for v in true.values()))
        task["rows"] = n_rows
        chosen = systems_for(task, args)
        names = {s.name for s in chosen}
        ratios, goals = _speed_goals(n_rows, names)
        if task["dataset"] != "synthetic":
            goals = []  # the speed goals are stated for the generated 10^7 rows
        title = (
            f"{task['dataset']} ({n_rows:,} rows, {len(true)} true groups), "
            f"{task['partitions']} groups, {cfg['mode']}"
            + (
                " (each metric alone, the whole budget)"
                if cfg["mode"] != "all"
                else " (all metrics together, each library's own split)"
            )
        )
        config = {
            "dataset": task["dataset"],
            "rows": n_rows,
            "partitions": task["partitions"],
            "mode": cfg["mode"],
            "metrics": task["metrics"],
            "bounds": task["bounds"],
        }
        if args.rounds:
            ms, _ = compare(chosen, ratios=ratios, goals=goals, title=title, **options(args))
            rows, prs = summarise_config(config, ms, true)
            accuracy.extend(rows)
            pairs.extend(prs)
        if args.exact_medians:
            exact = exact_medians(task, true)
            if exact is None:
                print(f"{title}: no exact medians (user level, or no median drawn by selection)")
            else:
                e = exact["epsilon"]
                print(
                    f"{title}: exact expected relative error of the median over "
                    f"{exact['groups']} groups: privhist {exact['privhist']:.5f} (epsilon "
                    f"{e['privhist']:.4g}), OpenDP {exact['OpenDP']:.5f} (epsilon "
                    f"{e['OpenDP']:.4g}): {exact['ratio']:.3f}x; privhist worse on "
                    f"{exact['worse']} groups"
                )
                exact_rows.append({**config, **exact})
        if args.least_budget:
            least = least_budget(task, true)
            if least is not None:
                print_least_budget(title, least, task["epsilon"])
                least_rows.append({**config, **least})
        if args.releases:
            splits = {}
            if cfg["mode"] == "all" or task["partitions"] == "private":
                for peer in args.systems:
                    split = peer_split(peer, task)
                    if split is not None and not same_split(task, split):
                        splits[peer] = split
                        print(f"{peer}'s split of epsilon (privhist runs at it too): {split}")
            many = systems_for(task, args, args.releases, splits)
            for peer in splits:
                args.releases[f"privhist@{peer}"] = args.releases["privhist"]
            counts = ", ".join(f"{s.name} {args.releases[s.name]}" for s in many)
            ms, _ = compare(
                many,
                rounds=1,
                quiet=options(args)["quiet"],
                save=args.save,
                title=f"{title}: many releases for the errors ({counts}; not a timing)",
            )
            release_pairs.extend(summarise_releases(config, ms, true))
    report: dict[str, Any] = {}
    if args.rounds:
        print_accuracy(accuracy)
        report = {"accuracy": accuracy, "pairs": pairs, "goals": print_error_goals(pairs)}
    if exact_rows:
        report["exact_medians"] = exact_rows
    if least_rows:
        report["least_budget"] = least_rows
    if args.releases:
        report["release_pairs"] = release_pairs
        report["release_goals"] = print_release_goals(release_pairs)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    return report


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        _peer_child(sys.argv[2])
    else:
        main()
