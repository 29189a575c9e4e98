"""The runner: each table's cells in turn, every estimate by the library's own protocol
(:func:`privhist.federated.ffe.tffe`, :func:`~privhist.federated.ffe.mffe`,
:func:`~privhist.federated.ffe.frequency_phase`, the baselines of
:mod:`privhist.federated.ffe_baselines` and :class:`privhist.federated.dht.FederatedQuantile`),
with timings; no file is touched."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privhist.core.random import SeededRandom
from privhist.experiments import _common
from privhist.experiments.federated_frequency.data import experiment_frame, load
from privhist.experiments.federated_frequency.metrics import l2_error, nearest_level_bins
from privhist.experiments.federated_frequency.settings import (
    FIGURE3_M,
    FIGURE3_POINTS,
    FIGURE3_POINTS_QUICK,
    FIGURE3_RUNS,
    MFFE_DELTA,
    MFFE_M,
    MFFE_M_QUANTILE,
    MFFE_START_SHARE,
    QUANTILE_BITS,
    QUANTILE_LEVELS,
    QUANTILE_M,
    QUANTILE_SCHEMES,
    QUANTILES_T1,
    T2_METHODS,
    T3_METHODS,
    TFFE_BITS,
    TFFE_DELTA,
    TFFE_M,
    TFFE_M_QUANTILE,
    THETA,
    Settings,
)
from privhist.federated import ffe, ffe_baselines, ocpbm
from privhist.federated.dht import FederatedQuantile, bin_index
from privhist.federated.kashin import uniform01


@dataclass
class Results:
    """The rows of every table, in order, and the seconds each took."""

    settings: Settings
    table1: list[dict[str, Any]] = field(default_factory=list)
    table2: list[dict[str, Any]] = field(default_factory=list)
    table3: list[dict[str, Any]] = field(default_factory=list)
    table5: list[dict[str, Any]] = field(default_factory=list)
    figure3: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


#: called once per finished cell with its label
Step = Callable[[str], None]


def _method_rows(cell: dict[str, Any], errs: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per method: the cell's columns, the method, and its mean and std error."""
    return [
        {**cell, "method": key, "mean": float(np.mean(v)), "std": float(np.std(v))}
        for key, v in errs.items()
    ]


def clip_quantile_rows(s: Settings, out: Results, step: Step) -> None:
    """Table 1 (Section 5.1): cPBM's error with the clipping threshold at the exact optimal
    quantile ``C*`` (equation (5)) and at fixed quantiles of ``||y_i||``, on i.i.d. data."""
    for label, n, d, m in s.t1_rows:
        users = load("iid", n, d, s)
        frame = experiment_frame(d, s)
        reps = ffe.Representations(users, frame)
        norms = reps.norms()
        clips = [("C*", ocpbm.optimal_clip(norms, frame.D, m, THETA))]
        clips += [(f"{q:g}", ocpbm.quantile_of(norms, q)) for q in QUANTILES_T1]
        for col, clip in clips:
            errs = []
            for r in range(s.runs):
                rng = SeededRandom(_common.derived_seed(s.seed, "t1", label, col, r))
                est = ffe.frequency_phase(reps.batches(), frame, n, THETA, m, clip, rng)
                errs.append(l2_error(est, users))
            out.table1.append(
                {
                    "row": label,
                    "n": n,
                    "d": d,
                    "D": frame.D,
                    "m": m,
                    "column": col,
                    "clip": clip,
                    "mean": float(np.mean(errs)),
                    "std": float(np.std(errs)),
                }
            )
        step(f"Table 1 {label}")


def two_round_rows(s: Settings, out: Results, step: Step) -> None:
    """Tables 2 and 6 (Section 5.2, Appendix E): TFFE against the oracle threshold, the median,
    central and local Gaussian baselines at TFFE's epsilon, normalisation and sampling."""
    m, mq, bits, delta = TFFE_M, TFFE_M_QUANTILE, TFFE_BITS, TFFE_DELTA
    for name in s.datasets:
        for d in s.dims:
            users = load(name, s.n, d, s)
            n = users.n_users
            frame = experiment_frame(d, s)
            reps = ffe.Representations(users, frame)
            y = reps.array()
            max_items = int(users.l1_norms().max())
            # like max_items, treated as public (1 on the set-valued msweb and retail data)
            max_count = int(users.counts.max())
            eps = ffe.tffe_rdp(n, THETA, m, frame.D, mq, bits).epsilon(delta)
            oracle = ocpbm.best_clip(y, users.mean_vector(), frame, m, THETA)
            errs: dict[str, list[float]] = {k: [] for k in T2_METHODS}
            for r in range(s.runs):
                rng = SeededRandom(_common.derived_seed(s.seed, "t2", name, d, r))
                common: dict[str, Any] = {
                    "m": m,
                    "m_quantile": mq,
                    "max_items": max_items,
                    "max_count": max_count,
                    "representations": reps,
                }
                errs["OcPBM"].append(
                    l2_error(ffe.tffe(users, frame, rng, **common).estimate, users)
                )
                errs["OcPBM (eq. 5)"].append(
                    l2_error(
                        ffe.tffe(users, frame, rng, clip_rule="quantile", **common).estimate, users
                    )
                )
                errs["C_median"].append(
                    l2_error(ffe.tffe(users, frame, rng, gamma=0.5, **common).estimate, users)
                )
                errs["Best C*"].append(
                    l2_error(
                        ffe.frequency_phase(reps.batches(), frame, n, THETA, m, oracle.clip, rng),
                        users,
                    )
                )
                for model, key in (("central", "CDP"), ("local", "LDP")):
                    res = ffe_baselines.gaussian_ffe(
                        users, rng, epsilon=eps, delta=delta, max_items=max_items, model=model
                    )
                    errs[key].append(l2_error(res.estimate, users))
                errs["Normalize"].append(
                    l2_error(ffe_baselines.normalize_ffe(users, frame, rng, m=m).estimate, users)
                )
                ks = {
                    "Sample(one)": 1,
                    "Sample(0.25)": math.ceil(0.25 * max_items),
                    "Sample(4)": 4,
                    "Sample(16)": 16,
                    "Sample(64)": 64,
                    "Sample(256)": 256,
                }
                for key, k in ks.items():
                    res = ffe_baselines.sample_ffe(users, frame, rng, k=k, m=m)
                    errs[key].append(l2_error(res.estimate, users))
            cell = {"dataset": name, "d": d, "n": n, "D": frame.D, "epsilon": eps, "delta": delta}
            out.table2 += _method_rows(cell, errs)
            step(f"Table 2 {name} d={d}")


def multi_round_rows(s: Settings, out: Results, step: Step) -> None:
    """Table 3 (Appendix E.1): MFFE in rounds of ``round_users`` users, against one fixed oracle
    threshold over the same rounds, ``C_small`` and ``C_median``."""
    m, mq, delta = MFFE_M, MFFE_M_QUANTILE, MFFE_DELTA
    for name in s.datasets:
        for d in s.dims:
            users = load(name, s.n_mffe, d, s)
            n = users.n_users
            rounds = max(1, n // s.round_users)
            frame = experiment_frame(d, s)
            reps = ffe.Representations(users, frame)
            oracle = ocpbm.best_clip(reps.array(), users.mean_vector(), frame, m, THETA)
            sizes = ffe.round_sizes(n, rounds)
            # as in Table 2: treated as public (they fix the range of OcPBM's DHT start)
            max_items = int(users.l1_norms().max())
            max_count = int(users.counts.max())
            eps = ffe.mffe_rdp(sizes, THETA, m, frame.D, mq).epsilon(delta)
            errs: dict[str, list[float]] = {k: [] for k in T3_METHODS}
            for r in range(s.runs):
                rng = SeededRandom(_common.derived_seed(s.seed, "t3", name, d, r))
                # MFFE takes rounds of consecutive users: a fresh random order per run
                order = np.argsort(uniform01(rng, n), kind="stable")
                shuffled = users.subset(order)
                errs["OcPBM"].append(
                    l2_error(
                        ffe.mffe(
                            shuffled,
                            frame,
                            rng,
                            m=m,
                            m_quantile=mq,
                            rounds=rounds,
                            start="dht",
                            start_share=MFFE_START_SHARE,
                            max_items=max_items,
                            max_count=max_count,
                        ).estimate,
                        users,
                    )
                )
                g_small = ffe_baselines.small_quantile(frame.D, m, min(sizes), THETA)
                errs["C_small"].append(
                    l2_error(
                        ffe.mffe(
                            shuffled, frame, rng, m=m, m_quantile=mq, rounds=rounds, gamma=g_small
                        ).estimate,
                        users,
                    )
                )
                errs["C_median"].append(
                    l2_error(
                        ffe.mffe(
                            shuffled, frame, rng, m=m, m_quantile=mq, rounds=rounds, gamma=0.5
                        ).estimate,
                        users,
                    )
                )
                res = ffe_baselines.fixed_clip_rounds(
                    shuffled, frame, rng, m=m, rounds=rounds, clip=oracle.clip
                )
                errs["Best C*"].append(l2_error(res.estimate, users))
                # MFFE from the paper's start, C_1 = 1
                errs["OcPBM (C1 = 1)"].append(
                    l2_error(
                        ffe.mffe(shuffled, frame, rng, m=m, m_quantile=mq, rounds=rounds).estimate,
                        users,
                    )
                )
            cell = {"dataset": name, "d": d, "n": n, "rounds": rounds, "D": frame.D}
            cell |= {"epsilon": eps, "delta": delta}
            out.table3 += _method_rows(cell, errs)
            step(f"Table 3 {name} d={d}")


def quantile_bin_rows(s: Settings, out: Results, step: Step) -> None:
    """Table 5 (Appendix E): the average distance, in bins, between the quantile bins read from
    the DHT, flat and hierarchical histograms and those of the un-noised histogram, over the
    levels 0.80 ... 0.99 (``d = 100``; ``--quick``: its ``d``)."""
    d = 100 if not s.quick else s.dims[0]
    bits = QUANTILE_BITS
    for name in s.datasets:
        users = load(name, s.n, d, s)
        n = users.n_users
        frame = experiment_frame(d, s)
        norms = ffe.Representations(users, frame).norms()
        upper = ffe.range_upper(int(users.l1_norms().max()))
        truth_prefix = np.cumsum(np.bincount(bin_index(norms, upper, bits), minlength=1 << bits))
        true_bins = nearest_level_bins(truth_prefix, n, QUANTILE_LEVELS)
        for scheme in QUANTILE_SCHEMES:
            q = FederatedQuantile(upper, bits, THETA, QUANTILE_M, n, scheme)
            errors = []
            for r in range(s.runs):
                rng = SeededRandom(_common.derived_seed(s.seed, "t5", name, scheme, r))
                est = nearest_level_bins(
                    q.prefix(q.encode(norms, rng).sum(axis=0)), n, QUANTILE_LEVELS
                )
                errors.append(float(np.mean(np.abs(np.subtract(est, true_bins)))))
            out.table5.append(
                {
                    "dataset": name,
                    "d": d,
                    "n": n,
                    "scheme": scheme,
                    "bin_error": float(np.mean(errors)),
                    "std": float(np.std(errors)),
                }
            )
        step(f"Table 5 {name}")


def bound_against_error_rows(s: Settings, out: Results, step: Step) -> None:
    """Figure 3: Theorem 1's bound ``E(C; D)`` and the mean true error of cPBM as the threshold
    ``C`` runs from ``C*/4`` to ``3 C*`` (i.i.d. data)."""
    n, d, m = s.n, s.dims[0], FIGURE3_M
    users = load("iid", n, d, s)
    frame = experiment_frame(d, s)
    reps = ffe.Representations(users, frame)
    norms = reps.norms()
    c_star = ocpbm.optimal_clip(norms, frame.D, m, THETA)
    points = FIGURE3_POINTS if not s.quick else FIGURE3_POINTS_QUICK
    for c in np.geomspace(c_star / 4, c_star * 3, points):
        errs = []
        for r in range(FIGURE3_RUNS):
            rng = SeededRandom(_common.derived_seed(s.seed, "f3", float(c), r))
            est = ffe.frequency_phase(reps.batches(), frame, n, THETA, m, float(c), rng)
            errs.append(l2_error(est, users))
        out.figure3.append(
            {
                "clip": float(c),
                "bound": ocpbm.error_bound(norms, c, frame.D, m, THETA),
                "true_error": float(np.mean(errs)),
                "c_star": c_star,
            }
        )
    step("Figure 3")


#: each table's key (as ``--tables`` names it), its label in the timings and its rows
PARTS: tuple[tuple[str, str, Callable[[Settings, Results, Step], None]], ...] = (
    ("1", "table 1", clip_quantile_rows),
    ("2", "table 2", two_round_rows),
    ("3", "table 3", multi_round_rows),
    ("5", "table 5", quantile_bin_rows),
    ("f3", "figure 3", bound_against_error_rows),
)


def steps(s: Settings) -> int:
    """How many cells a run computes (the length of its progress bar)."""
    count = 0
    count += len(s.t1_rows) if "1" in s.tables else 0
    count += len(s.datasets) * len(s.dims) * (("2" in s.tables) + ("3" in s.tables))
    count += len(s.datasets) if "5" in s.tables else 0
    count += 1 if "f3" in s.tables else 0
    return count


def run_experiment(s: Settings, tick: _common.Tick | None = None) -> Results:
    """Every table named in ``s.tables``, in the paper's order."""
    res = Results(s)
    total = steps(s)
    done = 0

    def step(label: str) -> None:
        nonlocal done
        done += 1
        if tick is not None:
            tick(done, total, label)

    for key, label, rows in PARTS:
        if key in s.tables:
            start = time.perf_counter()
            rows(s, res, step)
            res.seconds[label] = time.perf_counter() - start
    return res
