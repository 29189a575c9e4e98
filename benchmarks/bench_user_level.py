"""User-level key selection and counts on real basket/visit data, against the peers and the
published selectors.

Runs, per data set and (epsilon, delta):

* **privhist's default** (``Session.histogram`` with no mechanism and no cap: the user-level
  plan of ``privhist.planning.user_level.choose``, two DP statistics, then vote selection or
  cumulative-sips at a DP cap), keys only and with counts, and its user-level mechanisms by
  name (vote selection, cumulative-sips, DP-SIPS, WGM, Gaussian thresholding, the per-key
  ``stability`` and ``optimal-selection``);
* **the published selectors** as float-noise references (``selector_references.py``: WGM,
  DP-SIPS, policy Laplace, policy Gaussian, policy greedy), each at its best cap of a sweep
  over ``REF_CAPS`` (``--ref-runs`` runs per cap);
* **the peers**: PipelineDP 0.3.1 (post-aggregation thresholding on privacy-id counts, Laplace
  k = 1 and Gaussian k = 10) and OpenDP 0.16 (``make_gaussian_threshold`` on counts bounded here
  to k = 10 keys per user, calibrated with its own privacy map);
* **the per-key ceiling**: the sum over keys of the optimal (epsilon, delta) release probability
  of a key held by its number of users (Desfontaines et al. 2022): no user-level mechanism can
  release more keys in expectation, since a key's release probability, followed from zero
  holders one added user at a time, obeys the per-key constraints.

It prints keys released, top-100 and top-1000 recall (against the true distinct-user counts),
mean absolute error of released counts (against the true distinct-user counts, unbounded), and a
**goals** table: the default keys only against ``min(1.1 x best reference, 0.97 x ceiling)``,
with counts against ``0.9 x`` the best reference and its count MAE against half of PipelineDP's
Gaussian thresholding (k = 10), and top-100 recall where 100 keys are released. Beside the count
goal it prints the **MAE floor** (``count_floor``): a lower bound on the expected count MAE of
the ``0.9 x best reference`` most-held keys for any release that keeps ``k`` of each user's keys
and adds Laplace or Gaussian noise to every count with the whole budget, over ``k`` in 1-40 (no
selection paid). A release that also selects its keys spends less on the counts, so where the
floor is above the goal no release of that kind meets it.

Data (never copied into the repository; a missing file is skipped), under ``--data`` (default
``/work/shared/data``): ``retail.dat`` (FIMI, one basket = one user), ``anonymous-msweb.data``
and its held-out users ``anonymous-msweb.test`` (UCI: ``C`` lines open a user, ``V,area,1``
lines are the areas it visited), and **retail households**: the baskets of ``retail.dat`` merged
five consecutive lines at a time into one user (17,633 users holding 46 keys on average, median
44: the dense data set, users like listening histories rather than single baskets).

Also sweeps the cap (``Delta0`` for the selectors, ``k`` for Gaussian thresholding and
stability) at (1, 1e-8) on every data set (``--sweep``), and plots keys released against the cap
(``--plot PATH``; needs matplotlib).

Usage: ``python benchmarks/bench_user_level.py [--runs 3] [--quick] [--datasets msweb,retail]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

import privhist.mechanisms  # noqa: F401
from privhist import Release, Session
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import SeededRandom
from privhist.engines.local import count
from privhist.engines.local.weighting import LocalWeightedSource
from privhist.mechanisms import OptimalSelection, StabilityHistogram
from privhist.mechanisms.user_level import (
    DPSIPS,
    CumulativeSIPS,
    GaussianThresholdHistogram,
    WeightedGaussianSelection,
)
from privhist.mechanisms.user_level.votes import PairsVoteSource, VoteSelection

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selector_references import REFERENCES, UserSets

BUDGETS = [(1.0, 1e-8), (1.0, 1e-5), (3.0, math.exp(-10))]
CAPS = [1, 2, 5, 10, 20, 50, 100]
#: the caps of the references' sweep (their best is reported)
REF_CAPS = [2, 5, 10, 20, 50, 100, 200]


# -- data ---------------------------------------------------------------------------------------


def load_retail(path: str) -> pl.DataFrame:
    return LocalWeightedSource.from_source(path, format="fimi").pairs


def load_msweb(path: str) -> pl.DataFrame:
    lines = pl.read_csv(
        path, has_header=False, new_columns=["line"], separator="\x01", quote_char=None
    )
    parts = lines.with_columns(f=pl.col("line").str.split(","))
    parts = parts.with_columns(kind=pl.col("f").list.get(0), val=pl.col("f").list.get(1))
    parts = parts.with_columns(user=(pl.col("kind") == "C").cum_sum())
    visits = parts.filter(pl.col("kind") == "V")
    return visits.select("user", pl.col("val").cast(pl.Int64).alias("key")).unique()


def load_households(path: str, size: int = 5) -> pl.DataFrame:
    """``retail.dat`` with ``size`` consecutive baskets merged into one user (the dense set)."""
    pairs = load_retail(path)
    return pairs.with_columns(user=(pl.col("user") - 1) // size).unique()


@dataclass
class Truth:
    pairs: pl.DataFrame
    users: dict[Any, int]  # key -> distinct users
    top100: set[Any]
    top1000: set[Any]
    name: str = ""
    _sets: UserSets | None = None

    @classmethod
    def of(cls, pairs: pl.DataFrame, name: str = "") -> Truth:
        pairs = pairs.select("user", "key").unique()
        per_key = pairs.group_by("key").len().sort(["len", "key"], descending=[True, False])
        keys = per_key["key"].to_list()
        return cls(
            pairs,
            dict(zip(keys, per_key["len"].to_list(), strict=True)),
            set(keys[:100]),
            set(keys[:1000]),
            name,
        )

    def user_sets(self) -> UserSets:
        if self._sets is None:
            self._sets = UserSets.of(self.pairs)
        return self._sets


@dataclass
class Outcome:
    keys: int
    top100: float
    top1000: float
    mae: float  # NaN when no counts
    seconds: float


def score(truth: Truth, keys: list[Any], counts: list[float] | None, seconds: float) -> Outcome:
    s = set(keys)
    mae = math.nan
    if counts is not None and keys:
        true = np.array([truth.users[k] for k in keys], dtype=np.float64)
        mae = float(np.abs(np.asarray(counts, dtype=np.float64) - true).mean())
    return Outcome(
        len(s),
        len(s & truth.top100) / 100,
        len(s & truth.top1000) / 1000,
        mae,
        seconds,
    )


# -- privhist -----------------------------------------------------------------------------------


def ph_counts_mechanism(mech: Any, k: int, with_counts: bool) -> Callable[[Truth, int], Outcome]:
    def run(truth: Truth, seed: int) -> Outcome:
        t = time.perf_counter()
        c = count(
            truth.pairs,
            key="key",
            user="user",
            max_partitions_contributed=k,
            max_contributions_per_partition=1,
            rng=SeededRandom(seed),
            progress=False,
        )
        rel = mech.release(c, SeededRandom(seed + 1))
        vals = rel.values.tolist() if (with_counts and rel.values is not None) else None
        return score(truth, rel.keys.tolist(), vals, time.perf_counter() - t)

    return run


def ph_selector(mech: Any) -> Callable[[Truth, int], Outcome]:
    def run(truth: Truth, seed: int) -> Outcome:
        t = time.perf_counter()
        src = LocalWeightedSource(truth.pairs, SeededRandom(seed))
        rel = mech.release_weighted(src, SeededRandom(seed + 1))
        vals = rel.values.tolist() if rel.values is not None else None
        return score(truth, rel.keys.tolist(), vals, time.perf_counter() - t)

    return run


def _vote_source(truth: Truth, seed: int) -> PairsVoteSource:
    return PairsVoteSource(
        truth.pairs["user"].to_numpy(), truth.pairs["key"].to_numpy(), SeededRandom(seed)
    )


def ph_votes(mech: VoteSelection) -> Callable[[Truth, int], Outcome]:
    def run(truth: Truth, seed: int) -> Outcome:
        t = time.perf_counter()
        rel = mech.release(_vote_source(truth, seed), SeededRandom(seed + 1))
        vals = rel.values.tolist() if rel.values is not None else None
        return score(truth, rel.keys.tolist(), vals, time.perf_counter() - t)

    return run


#: what the default chose in the runs of this process, by (data set label, budget, keys only)
CHOICES: dict[tuple[str, float, float, bool], list[str]] = {}


def ph_default(eps: float, delta: float, keys_only: bool) -> Callable[[Truth, int], Outcome]:
    """privhist's default user-level release: ``Session.histogram`` with no mechanism and no cap
    (the user-level plan, :func:`privhist.planning.user_level.choose`)."""

    def run(truth: Truth, seed: int) -> Outcome:
        t = time.perf_counter()
        rel = Session().histogram(
            truth.pairs,
            key="key",
            user="user",
            epsilon=eps,
            delta=delta,
            keys_only=keys_only,
            seed=seed,
        )
        assert isinstance(rel, Release)
        choice = rel.metadata["choice"]
        label = choice["mechanism"] + (
            f" cap {choice['cap']}" if choice["mechanism"] != "vote-selection" else ""
        )
        CHOICES.setdefault((truth.name, eps, delta, keys_only), []).append(label)
        vals = rel.values.tolist() if rel.values is not None else None
        return score(truth, rel.keys.tolist(), vals, time.perf_counter() - t)

    return run


def reference(
    name: str, eps: float, delta: float, cap: int | None
) -> Callable[[Truth, int], Outcome]:
    """A float-noise reference of a published selector (``selector_references.py``)."""
    fn, capped = REFERENCES[name]

    def run(truth: Truth, seed: int) -> Outcome:
        t = time.perf_counter()
        us = truth.user_sets()
        rng = np.random.default_rng(seed)
        idx = fn(us, eps, delta, cap, rng) if capped else fn(us, eps, delta, rng)
        keys = [us.labels[i] for i in idx.tolist()]
        return score(truth, keys, None, time.perf_counter() - t)

    return run


# -- peers --------------------------------------------------------------------------------------


def pipelinedp(eps: float, delta: float, k: int, gaussian: bool) -> Callable[[Truth, int], Outcome]:
    def run(truth: Truth, seed: int) -> Outcome:
        import pipeline_dp

        t = time.perf_counter()
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        params = pipeline_dp.AggregateParams(
            noise_kind=pipeline_dp.NoiseKind.GAUSSIAN
            if gaussian
            else pipeline_dp.NoiseKind.LAPLACE,
            metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT],
            max_partitions_contributed=k,
            max_contributions_per_partition=1,
            post_aggregation_thresholding=True,
        )
        extractors = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0],
            partition_extractor=lambda r: r[1],
            value_extractor=lambda r: 0,
        )
        rows = list(zip(truth.pairs["user"].to_list(), truth.pairs["key"].to_list(), strict=True))
        result = engine.aggregate(rows, params, extractors)
        accountant.compute_budgets()
        out = list(result)
        keys = [r[0] for r in out]
        vals = [float(r[1].privacy_id_count) for r in out]
        return score(truth, keys, vals, time.perf_counter() - t)

    return run


def _opendp_calibrate(eps: float, delta: float, k: int) -> tuple[float, float]:
    """Smallest scale (and its threshold) whose OpenDP map gives (eps, delta) at (k, sqrt k, 1)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    dom = dp.map_domain(dp.atom_domain(T=dp.i64), dp.atom_domain(T=dp.f64, nan=False))
    met = dp.l02inf_distance(dp.absolute_distance(T=dp.f64))
    d_in = (k, math.sqrt(k), 1.0)

    def threshold_for(scale: float) -> float:
        lo, hi = 1.0, 1.0
        while dp.m.make_gaussian_threshold(dom, met, scale, hi).map(d_in)[1] > delta / 2:
            lo, hi = hi, hi * 2
        for _ in range(40):
            mid = (lo + hi) / 2
            if dp.m.make_gaussian_threshold(dom, met, scale, mid).map(d_in)[1] > delta / 2:
                lo = mid
            else:
                hi = mid
        return hi

    def eps_for(scale: float) -> float:
        m = dp.m.make_gaussian_threshold(dom, met, scale, threshold_for(scale))
        return float(dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(m), delta).map(d_in)[0])

    lo, hi = 0.1, 1.0
    while eps_for(hi) > eps:
        lo, hi = hi, hi * 2
    for _ in range(30):
        mid = (lo + hi) / 2
        if eps_for(mid) > eps:
            lo = mid
        else:
            hi = mid
    return hi, threshold_for(hi)


def opendp_gaussian(eps: float, delta: float, k: int) -> Callable[[Truth, int], Outcome]:
    scale, threshold = _opendp_calibrate(eps, delta, k)

    def run(truth: Truth, seed: int) -> Outcome:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        dom = dp.map_domain(dp.atom_domain(T=dp.i64), dp.atom_domain(T=dp.f64, nan=False))
        met = dp.l02inf_distance(dp.absolute_distance(T=dp.f64))
        t = time.perf_counter()
        c = count(
            truth.pairs,
            key="key",
            user="user",
            max_partitions_contributed=k,
            rng=SeededRandom(seed),
            progress=False,
        )
        m = dp.m.make_gaussian_threshold(dom, met, scale, threshold)
        out = m(dict(zip(c.keys.tolist(), c.counts.astype(float).tolist(), strict=True)))
        return score(truth, list(out), list(out.values()), time.perf_counter() - t)

    return run


# -- the run ------------------------------------------------------------------------------------


def ceiling(truth: Truth, eps: float, delta: float) -> float:
    rp = OptimalSelection(eps, delta, keys_only=True).reporting_probability(
        max(truth.users.values())
    )
    return float(sum(rp[n] for n in truth.users.values()))


# -- the count-error floor ------------------------------------------------------------------


def gaussian_sigma(eps: float, delta: float) -> float:
    """The smallest sigma at which the Gaussian mechanism of L2 sensitivity 1 is
    (eps, delta)-DP: the analytic Gaussian mechanism (Balle and Wang 2018, "Improving the
    Gaussian mechanism", Theorem 8: ``Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s) <= delta``),
    found by bisection to a relative 1e-12."""

    def phi(x: float) -> float:
        return 0.5 * math.erfc(-x / math.sqrt(2.0))

    def excess(s: float) -> float:
        return phi(0.5 / s - eps * s) - math.exp(eps) * phi(-0.5 / s - eps * s) - delta

    lo, hi = 1e-6, 1.0
    while excess(hi) > 0:
        hi *= 2.0
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if excess(mid) <= 0 else (mid, hi)
    return hi


def expected_abs_laplace(bias: npt.NDArray[np.float64], scale: float) -> npt.NDArray[np.float64]:
    """``E|b + Z|`` for ``Z`` ~ Laplace(``scale``): ``|b| + scale exp(-|b| / scale)``."""
    a = np.abs(bias)
    return a + scale * np.exp(-a / scale)


def expected_abs_gaussian(bias: npt.NDArray[np.float64], sigma: float) -> npt.NDArray[np.float64]:
    """``E|b + Z|`` for ``Z`` ~ N(0, sigma^2): ``sigma sqrt(2/pi) exp(-b^2 / 2 sigma^2) +
    |b| erf(|b| / (sigma sqrt 2))``."""
    a = np.abs(bias)
    erf = np.vectorize(math.erf)
    return sigma * math.sqrt(2.0 / math.pi) * np.exp(-(a**2) / (2.0 * sigma**2)) + a * erf(
        a / (sigma * math.sqrt(2.0))
    )


@dataclass
class Floor:
    keys: int  # the keys counted: the most-held ones
    laplace: float  # the smallest expected MAE over the caps, Laplace noise
    laplace_cap: int
    gaussian: float  # the same, Gaussian noise
    gaussian_cap: int


def count_floor(
    truth: Truth, eps: float, delta: float, n_keys: int, caps: range = range(1, 41)
) -> Floor:
    """A lower bound on the expected count MAE of any release of the ``n_keys`` most-held keys
    that keeps at most ``k`` of each user's keys among them and adds the same noise to every
    count, with the **whole** budget on the counts (no selection paid for): the smallest over
    ``k`` in ``caps`` of ``E|L_k / n_keys + Z|``.

    ``L_k = sum over users of max(0, d_u - k)`` (``d_u``: the user's keys among the counted
    ones) is the fewest (user, key) pairs a cap of ``k`` drops, whichever pairs a bounding rule
    keeps. The count of key ``j`` falls short by ``b_j >= 0`` with ``sum b_j >= L_k``, and
    ``b -> E|b + Z|`` is convex and grows with ``|b|``, so by Jensen's inequality the mean over
    keys of ``E|-b_j + Z|`` is at least ``E|L_k / n_keys + Z|`` (the losses spread evenly). The
    noise is Laplace of scale ``k / eps`` (pure ``eps``-DP, ``delta`` unused) or Gaussian of L2
    sensitivity ``sqrt(k)`` at ``(eps, delta)`` (:func:`gaussian_sigma`), continuous (the
    discrete Laplace of the same scale has a smaller ``E|Z|`` by under 0.5% from scale 2). A
    release that also selects its keys spends less than ``eps`` on the counts. This bounds
    releases of that kind (every library's here), not every mechanism: one that corrects the
    bounding loss from other DP statistics is outside it.
    """
    ranked = sorted(truth.users, key=lambda key: (-truth.users[key], str(key)))[:n_keys]
    pairs = truth.pairs.filter(pl.col("key").is_in(pl.Series(ranked).implode()))
    degrees = pairs.group_by("user").len()["len"].to_numpy().astype(np.int64)
    sigma1 = gaussian_sigma(eps, delta)
    lap: dict[int, float] = {}
    gau: dict[int, float] = {}
    for k in caps:
        short = np.array([np.maximum(degrees - k, 0).sum() / n_keys], dtype=np.float64)
        lap[k] = float(expected_abs_laplace(short, k / eps)[0])
        gau[k] = float(expected_abs_gaussian(short, sigma1 * math.sqrt(k))[0])
    kl = min(lap, key=lambda k: lap[k])
    kg = min(gau, key=lambda k: gau[k])
    return Floor(n_keys, lap[kl], kl, gau[kg], kg)


DEFAULT_KEYS = "privhist default, keys only"
DEFAULT_COUNTS = "privhist default, with counts"
PIPELINEDP_GAUSSIAN = "PipelineDP Gaussian k=10"


def mechanisms(
    eps: float, delta: float, peers: bool, all_peer_caps: bool = False, named: bool = True
) -> list[tuple[str, Callable[[Truth, int], Outcome]]]:
    u = Neighbouring.user
    out: list[tuple[str, Callable[[Truth, int], Outcome]]] = [
        (DEFAULT_KEYS, ph_default(eps, delta, True)),
        (DEFAULT_COUNTS, ph_default(eps, delta, False)),
    ]
    if named:
        out += [
            ("privhist vote-selection", ph_votes(VoteSelection(eps, delta))),
            ("privhist vote-selection +counts", ph_votes(VoteSelection(eps, delta, counts=True))),
            ("privhist cumulative-sips D0=20", ph_selector(CumulativeSIPS(eps, delta))),
            (
                "privhist cumulative-sips D0=20 +counts",
                ph_selector(CumulativeSIPS(eps, delta, counts=True)),
            ),
            ("privhist dp-sips D0=20", ph_selector(DPSIPS(eps, delta))),
            ("privhist wgm D0=20", ph_selector(WeightedGaussianSelection(eps, delta))),
            (
                "privhist gaussian-threshold k=10",
                ph_counts_mechanism(GaussianThresholdHistogram(eps, delta, u(10, 1)), 10, True),
            ),
            (
                "privhist optimal-selection keys-only k=1",
                ph_counts_mechanism(
                    OptimalSelection(eps, delta, u(1, 1), keys_only=True), 1, False
                ),
            ),
            (
                "privhist stability k=1",
                ph_counts_mechanism(StabilityHistogram(eps, delta, u(1, 1)), 1, True),
            ),
        ]
    if peers:
        # each peer at its best cap on retail and msweb (Laplace k = 1, Gaussian k = 10;
        # measured with --all-peer-caps); the other caps cost most of the run time (PipelineDP's
        # local backend is pure Python)
        out.append(("PipelineDP Laplace k=1", pipelinedp(eps, delta, 1, False)))
        if all_peer_caps:
            out.append(("PipelineDP Laplace k=10", pipelinedp(eps, delta, 10, False)))
            out.append(("PipelineDP Gaussian k=1", pipelinedp(eps, delta, 1, True)))
        out += [
            (PIPELINEDP_GAUSSIAN, pipelinedp(eps, delta, 10, True)),
            ("OpenDP gaussian_threshold k=10", opendp_gaussian(eps, delta, 10)),
        ]
    return out


def fmt(x: float, digits: int = 1) -> str:
    return "-" if math.isnan(x) else f"{x:,.{digits}f}"


@dataclass
class Row:
    keys: float
    top100: float
    top1000: float
    mae: float
    seconds: float

    @classmethod
    def mean(cls, res: list[Outcome]) -> Row:
        maes = [r.mae for r in res if not math.isnan(r.mae)]
        return cls(
            float(np.mean([r.keys for r in res])),
            float(np.mean([r.top100 for r in res])),
            float(np.mean([r.top1000 for r in res])),
            float(np.mean(maes)) if maes else math.nan,
            float(np.mean([r.seconds for r in res])),
        )


def references(
    truth: Truth, eps: float, delta: float, runs: int
) -> dict[str, tuple[Row, int | None]]:
    """Every reference at its best cap of :data:`REF_CAPS` (mean keys over ``runs`` runs)."""
    best: dict[str, tuple[Row, int | None]] = {}
    for name, (_fn, capped) in REFERENCES.items():
        for cap in REF_CAPS if capped else [None]:
            fn = reference(name, eps, delta, cap)
            row = Row.mean([fn(truth, 7919 * i + 3) for i in range(runs)])
            if name not in best or row.keys > best[name][0].keys:
                best[name] = (row, cap)
    return best


def table(
    name: str,
    truth: Truth,
    eps: float,
    delta: float,
    runs: int,
    peers: bool,
    all_peer_caps: bool = False,
    ref_runs: int = 2,
    named: bool = True,
) -> dict[str, Any]:
    """One data set at one budget: prints the table, returns the figures the goals need."""
    ceil = ceiling(truth, eps, delta)
    print(f"\n### {name}, (epsilon, delta) = ({eps:g}, {delta:.3g}), mean of {runs} runs")
    print(
        f"users {truth.pairs['user'].n_unique():,}, keys {len(truth.users):,}, "
        f"(user, key) pairs {truth.pairs.height:,}; per-key ceiling {ceil:,.1f} keys"
    )
    print("| mechanism | keys | top-100 recall | top-1000 recall | MAE of counts | s/run |")
    print("|---|---|---|---|---|---|")
    rows: dict[str, Row] = {}
    for label, fn in mechanisms(eps, delta, peers, all_peer_caps, named):
        r = Row.mean([fn(truth, 1000 * i + 17) for i in range(runs)])
        rows[label] = r
        print(
            f"| {label} | {fmt(r.keys)} | {r.top100:.3f} | {r.top1000:.3f} | "
            f"{fmt(r.mae, 2)} | {r.seconds:.2f} |",
            flush=True,
        )
    refs = references(truth, eps, delta, ref_runs) if ref_runs > 0 else {}
    for ref, (r, cap) in refs.items():
        where = "" if cap is None else f" (best cap {cap})"
        print(
            f"| reference: {ref}{where} | {fmt(r.keys)} | {r.top100:.3f} | {r.top1000:.3f} | - "
            f"| {r.seconds:.2f} |",
            flush=True,
        )
    for keys_only in (True, False):
        seen = CHOICES.get((truth.name, eps, delta, keys_only), [])
        if seen:
            tally = {c: seen.count(c) for c in sorted(set(seen))}
            what = "keys only" if keys_only else "with counts"
            print(f"default ({what}) chose: {tally}")
    return {"ceiling": ceil, "rows": rows, "refs": refs, "truth": truth}


def goals(results: dict[tuple[str, float, float], dict[str, Any]]) -> None:
    """The goals of the user-level default, per data set and budget (module notes)."""
    print("\n### goals at default flags")
    print(
        "| data set | budget | keys only | goal | with counts | goal | MAE | goal (PipelineDP/2) "
        "| MAE floor | top-100 recall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    floors: list[str] = []
    for (name, eps, delta), res in results.items():
        rows, refs = res["rows"], res["refs"]
        best_ref = max((r.keys for r, _ in refs.values()), default=math.nan)
        goal_keys = min(1.1 * best_ref, 0.97 * res["ceiling"])
        k, c = rows[DEFAULT_KEYS], rows[DEFAULT_COUNTS]
        pdp = rows.get(PIPELINEDP_GAUSSIAN)
        goal_mae = pdp.mae / 2 if pdp is not None else math.nan

        def mark(ok: bool) -> str:
            return "met" if ok else "NOT met"

        # each release whose keys number at least 100
        recalls = [r.top100 for r in (k, c) if r.keys >= 100]
        recall = min(recalls) if recalls else math.nan
        floor = math.nan
        if not math.isnan(best_ref) and "truth" in res:
            n = min(math.ceil(0.9 * best_ref), len(res["truth"].users))
            f = count_floor(res["truth"], eps, delta, n)
            floor = min(f.laplace, f.gaussian)
            floors.append(
                f"| {name} | ({eps:g}, {delta:.3g}) | {f.keys} | {f.laplace:.2f} "
                f"(k={f.laplace_cap}) | {f.gaussian:.2f} (k={f.gaussian_cap}) | "
                f"{fmt(goal_mae, 2)} |"
            )
        print(
            f"| {name} | ({eps:g}, {delta:.3g}) | {fmt(k.keys)} | {fmt(goal_keys)} "
            f"{mark(k.keys >= goal_keys)} | {fmt(c.keys)} | {fmt(0.9 * best_ref)} "
            f"{mark(c.keys >= 0.9 * best_ref)} | {fmt(c.mae, 2)} | {fmt(goal_mae, 2)} "
            f"{mark(c.mae <= goal_mae) if not math.isnan(goal_mae) else ''} | {fmt(floor, 2)} | "
            f"{fmt(recall, 3)}{'' if math.isnan(recall) else ' ' + mark(recall >= 0.98)} |",
            flush=True,
        )
    if floors:
        print(
            "\nMAE floor: a lower bound on the expected count MAE of the most-held keys, as "
            "many as the goal with counts asks (0.9 x the best reference), for any release "
            "that keeps k keys per user and noises every count alike with the whole budget "
            "(no selection paid), best k of 1-40 (`count_floor`)"
        )
        print("| data set | budget | keys | Laplace | Gaussian | goal |")
        print("|---|---|---|---|---|---|")
        for line in floors:
            print(line)


def sweep(name: str, truth: Truth, runs: int) -> dict[str, list[float]]:
    eps, delta = BUDGETS[0]
    curves: dict[str, list[float]] = {
        "wgm": [],
        "dp-sips": [],
        "cumulative-sips": [],
        "gaussian-threshold": [],
        "stability": [],
    }
    for cap in CAPS:
        for label, fn in (
            ("wgm", ph_selector(WeightedGaussianSelection(eps, delta, max_keys=cap))),
            ("dp-sips", ph_selector(DPSIPS(eps, delta, max_keys=cap))),
            ("cumulative-sips", ph_selector(CumulativeSIPS(eps, delta, max_keys=cap))),
            (
                "gaussian-threshold",
                ph_counts_mechanism(
                    GaussianThresholdHistogram(eps, delta, Neighbouring.user(cap, 1)), cap, False
                ),
            ),
            (
                "stability",
                ph_counts_mechanism(
                    StabilityHistogram(eps, delta, Neighbouring.user(cap, 1)), cap, False
                ),
            ),
        ):
            curves[label].append(float(np.mean([fn(truth, 77 * i + 5).keys for i in range(runs)])))
    print(f"\n### {name}: keys released against the cap at (1, 1e-8), mean of {runs} runs")
    print("| cap | " + " | ".join(curves) + " |")
    print("|---|" + "---|" * len(curves))
    for i, cap in enumerate(CAPS):
        print(f"| {cap} | " + " | ".join(f"{curves[m][i]:,.0f}" for m in curves) + " |")
    return curves


def _synthetic(records: int) -> pl.DataFrame:
    """``records`` synthetic user-level records (10 per user, keys skewed)."""
    rng = SeededRandom(7)
    n_users = max(1, records // 10)
    u = rng.uniform_below(n_users, records)
    # keys: the square of a uniform draw over 10**5 buckets (a skewed, heavy-headed law)
    k = rng.uniform_below(1000, records) * rng.uniform_below(100, records) // 10
    return pl.DataFrame({"user": u, "key": k})


def step(records: int, name: str) -> Callable[[], int]:
    """One throughput step (a harness factory): the data (and, for the releases, the distinct
    pairs already held) made untimed; the callable runs the step."""
    frame = _synthetic(records)
    if name == "count":
        return lambda: len(
            count(frame, key="key", user="user", max_partitions_contributed=10,
                  rng=SeededRandom(7), progress=False)
        )  # fmt: skip
    if name == "weighted":
        return lambda: len(LocalWeightedSource(frame, SeededRandom(7)).weighted_sums(20, 1024))
    src = LocalWeightedSource(frame, SeededRandom(7))
    mech = DPSIPS(1.0, 1e-8) if name == "dp-sips" else CumulativeSIPS(1.0, 1e-8)
    return lambda: len(mech.release_weighted(src, SeededRandom(8)))


def throughput(records: int, rounds: int) -> None:
    """Seconds to aggregate ``records`` synthetic user-level records (10 per user, keys skewed):
    today's user-level histogram (engine ``count`` with k = 10) against the weighted aggregate
    (distinct pairs, degrees, kept subsets, weights, per-key sums) and the selectors' releases
    once the pairs are held, each step in its own fresh process (benchmarks/_harness.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _harness import System, compare

    # engine count with k = 10 (today's user-level histogram); distinct pairs and one
    # weighted_sums (Delta0 = 20); DP-SIPS (3 rounds) and cumulative-sips (6 rounds, the
    # default) releases with the pairs already held
    steps = {
        "count": "engine count k=10",
        "weighted": "pairs + weighted_sums D0=20",
        "dp-sips": "DP-SIPS release (pairs held)",
        "cumulative": "cumulative-sips (pairs held)",
    }
    systems = [
        System(label, "bench_user_level:step", {"records": records, "name": name},
               {"records": 10**4, "name": name}, work=records)
        for name, label in steps.items()
    ]  # fmt: skip
    compare(systems, rounds=rounds, title=f"throughput, {records:,} user-level records")


LOADERS: dict[str, tuple[str, str, Callable[[str], pl.DataFrame]]] = {
    "retail": ("retail.dat", "retail.dat", load_retail),
    "msweb": ("anonymous-msweb.data", "anonymous-msweb.data", load_msweb),
    "msweb.test": ("anonymous-msweb.test", "anonymous-msweb.test", load_msweb),
    "households": ("retail households (5 baskets)", "retail.dat", load_households),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ref-runs", type=int, default=2, help="runs per cap of the references")
    ap.add_argument("--sweep-runs", type=int, default=2)
    ap.add_argument(
        "--datasets", default=",".join(LOADERS), help=f"comma-separated, of {', '.join(LOADERS)}"
    )
    ap.add_argument("--budgets", default="all", help="'all' or indices into BUDGETS, e.g. 0,2")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-named", action="store_true", help="only the default and the peers")
    ap.add_argument(
        "--all-peer-caps",
        action="store_true",
        help="also PipelineDP Laplace k=10 and Gaussian k=1 (slow; never better than k=1 / k=10)",
    )
    ap.add_argument("--quick", action="store_true", help="one budget, 2 runs, no sweep")
    ap.add_argument("--sweep", action="store_true", help="also the cap sweep (and plot)")
    ap.add_argument("--sweep-only", action="store_true", help="only the cap sweep (and plot)")
    ap.add_argument(
        "--throughput", type=int, default=0, help="only time N synthetic records (e.g. 10**7)"
    )
    ap.add_argument("--rounds", type=int, default=1, help="rounds of the throughput timing")
    ap.add_argument("--plot", default=None, help="PNG path for keys released against the cap")
    args = ap.parse_args()
    if args.throughput:
        throughput(args.throughput, args.rounds)
        return
    datasets = []
    for key in args.datasets.split(","):
        if key not in LOADERS:
            ap.error(f"unknown data set {key!r}; choose from {', '.join(LOADERS)}")
        name, file, loader = LOADERS[key]
        path = os.path.join(args.data, file)
        if not os.path.exists(path):
            print(f"skipping {name}: {path} not found", file=sys.stderr)
            continue
        datasets.append((name, Truth.of(loader(path), name)))
    budgets = (
        BUDGETS[:1]
        if args.quick
        else BUDGETS
        if args.budgets == "all"
        else [BUDGETS[int(i)] for i in args.budgets.split(",")]
    )
    runs = 2 if args.quick else args.runs
    print(f"load average at start: {os.getloadavg()}")
    results: dict[tuple[str, float, float], dict[str, Any]] = {}
    for eps, delta in [] if args.sweep_only else budgets:
        for name, truth in datasets:
            results[(name, eps, delta)] = table(
                name,
                truth,
                eps,
                delta,
                runs,
                not args.no_peers,
                args.all_peer_caps,
                args.ref_runs,
                not args.no_named,
            )
    if results:
        goals(results)
    print(f"load average at end: {os.getloadavg()}")
    if args.quick or not (args.sweep or args.sweep_only):
        return
    curves = {name: sweep(name, truth, args.sweep_runs) for name, truth in datasets}
    if args.plot and curves:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(curves), figsize=(6 * len(curves), 4))
        for ax, (name, cur) in zip(np.atleast_1d(axes), curves.items(), strict=True):
            for label, ys in cur.items():
                ax.plot(CAPS, ys, marker="o", label=label)
            ax.set_xscale("log")
            ax.set_xlabel("cap (Delta0 for selectors, k for gaussian-threshold and stability)")
            ax.set_ylabel("keys released")
            ax.set_title(f"{name}, (1, 1e-8)")
            ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"\nplot written to {args.plot}")


if __name__ == "__main__":
    main()
