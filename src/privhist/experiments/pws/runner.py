"""The runner: every figure's table computed in turn, with timings (no file is touched)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privhist.experiments.pws.data import frequency_histogram, read_key_counts, zipf_frequencies
from privhist.experiments.pws.exact import (
    closed_form_from,
    estimation_curves,
    expected_fraction,
    pws_reporting,
    sbh_reporting,
    selection_nrmse,
)
from privhist.experiments.pws.settings import (
    ESTIMATION_DELTA,
    ESTIMATION_SPAN,
    FIGURE1_PARAMS,
    FIGURE2_ALPHAS,
    FIGURE2_EPSILON,
    FIGURE3_TAUS,
    FIGURE4_ALPHAS,
    I64,
    SAMPLED_DELTA,
    SAMPLED_EPSILON,
    UNIFORM_COPIES,
    UNIFORM_MAX,
    Settings,
)
from privhist.mechanisms.sampling.pws import baselines, schemes
from privhist.mechanisms.sampling.pws.baselines import sampled_sbh_ppswor_reporting


@dataclass
class Results:
    """Rows of every CSV, in order, plus notes and timings."""

    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)
    #: Figure 4's gain at the largest and smallest tau for other Zipf support sizes
    sensitivity: list[dict[str, Any]] = field(default_factory=list)


Progress = Callable[[int, int, str], None]


def figure1_rows() -> list[dict[str, Any]]:
    """Reporting probability by frequency, no sampling (Figure 1)."""
    rows: list[dict[str, Any]] = []
    for eps, d in FIGURE1_PARAMS:
        top = math.ceil(2 * math.log(1 / d) / eps) + closed_form_from(
            eps, d
        )  # past both full-reporting points
        f = np.arange(1, top + 1, dtype=np.int64)
        pws = pws_reporting(f, eps, d)
        sbh = sbh_reporting(f, eps, d)
        for i, p, s in zip(f.tolist(), pws.tolist(), sbh.tolist(), strict=True):
            rows.append(
                {"epsilon": eps, "delta": d, "frequency": i, "pws": p, "sbh": s, "ratio": p / s}
            )
    return rows


def fraction_rows_by_delta(
    dataset: str, values: I64, counts: I64, epsilon: float, deltas: Sequence[float]
) -> list[dict[str, Any]]:
    """Expected fraction of keys reported, PWS and SbH, no sampling, for each ``delta``
    (Figure 2; ``delta = 1`` is the no-privacy end point, where PWS reports every key)."""
    rows: list[dict[str, Any]] = []
    for d in deltas:
        pws = 1.0 if d == 1.0 else expected_fraction(counts, pws_reporting(values, epsilon, d))
        sbh = expected_fraction(counts, sbh_reporting(values, epsilon, d))
        rows.append(
            {
                "dataset": dataset,
                "epsilon": epsilon,
                "delta": d,
                "pws": pws,
                "sbh": sbh,
                "ratio": pws / sbh,
            }
        )
    return rows


def fraction_rows_by_tau(
    dataset: str, values: I64, counts: I64, epsilon: float, delta: float, taus: Sequence[float]
) -> list[dict[str, Any]]:
    """Expected fraction of keys reported with threshold ppswor, PWS, sampled-SbH and the
    non-private sample, for each ``tau`` (Figure 4)."""
    rows: list[dict[str, Any]] = []
    for t in taus:
        npr = expected_fraction(counts, schemes.inclusion_probability(values, "ppswor", t))
        pws = expected_fraction(counts, pws_reporting(values, epsilon, delta, t))
        sbh = expected_fraction(counts, sampled_sbh_ppswor_reporting(values, epsilon, delta, t))
        rows.append(
            {
                "dataset": dataset,
                "epsilon": epsilon,
                "delta": delta,
                "tau": t,
                "non_private": npr,
                "pws": pws,
                "sampled_sbh": sbh,
                "gain": pws / sbh - 1,
            }
        )
    return rows


def figure3_rows() -> list[dict[str, Any]]:
    """Reporting probability by frequency with ppswor sampling (Figure 3)."""
    eps, d = SAMPLED_EPSILON, SAMPLED_DELTA
    top = 2 * math.ceil(baselines.sbh_threshold(eps, d))
    f = np.arange(1, top + 1, dtype=np.int64)
    rows: list[dict[str, Any]] = []
    for t in FIGURE3_TAUS:
        q = schemes.inclusion_probability(f, "ppswor", t)
        pws = pws_reporting(f, eps, d, t)
        sbh = sampled_sbh_ppswor_reporting(f, eps, d, t)
        for i, a, b, c in zip(f.tolist(), q.tolist(), pws.tolist(), sbh.tolist(), strict=True):
            rows.append(
                {
                    "epsilon": eps,
                    "delta": d,
                    "tau": t,
                    "frequency": i,
                    "non_private": a,
                    "pws": b,
                    "sampled_sbh": c,
                }
            )
    return rows


def _zipf_name(alpha: float) -> str:
    return f"Zipf[{alpha:g}]"


def run_experiment(settings: Settings, progress: Progress | None = None) -> Results:
    """Compute every table (no file is touched)."""
    res = Results(settings=settings)
    t_all = time.perf_counter()
    steps: list[tuple[str, Callable[[], None]]] = []

    def timed(name: str, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        fn()
        res.timings[name] = time.perf_counter() - t0

    zipf: dict[float, tuple[I64, I64]] = {}

    def zipf_hist(alpha: float) -> tuple[I64, I64]:
        if alpha not in zipf:
            zipf[alpha] = frequency_histogram(zipf_frequencies(settings.zipf_keys, alpha))
        return zipf[alpha]

    def fig1() -> None:
        res.tables["figure1.csv"] = figure1_rows()

    def fig2() -> None:
        rows: list[dict[str, Any]] = []
        for a in FIGURE2_ALPHAS:
            v, c = zipf_hist(a)
            rows += fraction_rows_by_delta(
                _zipf_name(a), v, c, FIGURE2_EPSILON, settings.figure2_deltas
            )
        res.tables["figure2.csv"] = rows

    def fig3() -> None:
        res.tables["figure3.csv"] = figure3_rows()

    def fig4() -> None:
        rows: list[dict[str, Any]] = []
        for a in FIGURE4_ALPHAS:
            v, c = zipf_hist(a)
            rows += fraction_rows_by_tau(
                _zipf_name(a), v, c, SAMPLED_EPSILON, SAMPLED_DELTA, settings.figure4_taus
            )
        res.tables["figure4.csv"] = rows
        taus = (max(settings.figure4_taus), min(settings.figure4_taus))
        for n in sorted({10**4, 10**5, settings.zipf_keys}):
            for a in FIGURE4_ALPHAS:
                v, c = frequency_histogram(zipf_frequencies(n, a))
                g = fraction_rows_by_tau("", v, c, SAMPLED_EPSILON, SAMPLED_DELTA, taus)
                res.sensitivity.append(
                    {"n": n, "alpha": a, "gain_max_tau": g[0]["gain"], "gain_min_tau": g[1]["gain"]}
                )

    def fig56() -> None:
        bias_rows: list[dict[str, Any]] = []
        var_rows: list[dict[str, Any]] = []
        nrmse_rows: list[dict[str, Any]] = []
        copies = UNIFORM_COPIES
        values = np.arange(1, UNIFORM_MAX + 1, dtype=np.int64)
        counts = np.full(UNIFORM_MAX, copies, dtype=np.int64)
        d = ESTIMATION_DELTA
        for eps in settings.estimation_epsilons:
            span = math.ceil(ESTIMATION_SPAN * baselines.sbh_threshold(eps, d))
            taus = sorted(
                set(settings.bias_taus) | set(settings.variance_taus) | set(settings.nrmse_taus),
                reverse=True,
            )
            for t in taus:
                need = span if (t in settings.bias_taus or t in settings.variance_taus) else 0
                m = max(need, UNIFORM_MAX)
                curves = estimation_curves(m, eps, d, t)
                f = curves.frequencies.tolist()
                if t in settings.bias_taus:
                    nb = curves.pws_bias / curves.frequencies
                    sb = curves.sbh_bias / curves.frequencies
                    for i, x, y in zip(f[:span], nb.tolist(), sb.tolist(), strict=False):
                        bias_rows.append(
                            {
                                "epsilon": eps,
                                "delta": d,
                                "tau": t,
                                "frequency": i,
                                "pws_mle": x,
                                "sbh": y,
                            }
                        )
                if t in settings.variance_taus:
                    f2 = curves.frequencies.astype(np.float64) ** 2
                    cols = (
                        curves.non_private_variance / f2,
                        curves.pws_variance / f2,
                        curves.sbh_variance / f2,
                    )
                    for k, i in enumerate(f[:span]):
                        var_rows.append(
                            {
                                "epsilon": eps,
                                "delta": d,
                                "tau": t,
                                "frequency": i,
                                "non_private": float(cols[0][k]),
                                "pws_mle": float(cols[1][k]),
                                "sampled_sbh": float(cols[2][k]),
                            }
                        )
                if t in settings.nrmse_taus:
                    r = selection_nrmse(values, counts, curves)
                    nrmse_rows.append(
                        {
                            "epsilon": eps,
                            "delta": d,
                            "tau": t,
                            "non_private": r.non_private,
                            "pws_mle": r.pws_mle,
                            "sampled_sbh": r.sampled_sbh,
                        }
                    )
        res.tables["figure5.csv"] = bias_rows
        res.tables["figure5_nrmse.csv"] = nrmse_rows
        res.tables["figure6.csv"] = var_rows

    def real() -> None:
        rows: list[dict[str, Any]] = []
        for name, path, fmt in (
            ("retail", settings.retail, "fimi"),
            ("shakespeare", settings.shakespeare, "text"),
        ):
            if path is None:
                continue
            if not Path(path).is_file():
                res.notes.append(f"{name} data {path} is absent: skipped")
                continue
            v, c = frequency_histogram(read_key_counts(path, fmt))
            n = int(c.sum())
            for r in fraction_rows_by_delta(name, v, c, FIGURE2_EPSILON, settings.figure2_deltas):
                rows.append(
                    {
                        **r,
                        "keys": n,
                        "tau": math.nan,
                        "non_private": 1.0,
                        "sbh": r["sbh"],
                    }
                )
            for r in fraction_rows_by_tau(
                name, v, c, SAMPLED_EPSILON, SAMPLED_DELTA, settings.figure4_taus
            ):
                rows.append(
                    {
                        "dataset": name,
                        "keys": n,
                        "epsilon": r["epsilon"],
                        "delta": r["delta"],
                        "tau": r["tau"],
                        "non_private": r["non_private"],
                        "pws": r["pws"],
                        "sbh": r["sampled_sbh"],
                        "ratio": r["pws"] / r["sampled_sbh"],
                    }
                )
        if rows:
            res.tables["real_data.csv"] = rows

    steps = [
        ("figure 1", fig1),
        ("figure 2", fig2),
        ("figure 3", fig3),
        ("figure 4", fig4),
        ("figures 5-6", fig56),
        ("real data", real),
    ]
    for k, (name, fn) in enumerate(steps):
        if progress is not None:
            progress(k, len(steps), name)
        timed(name, fn)
    if progress is not None:
        progress(len(steps), len(steps), "done")
    res.timings["total"] = time.perf_counter() - t_all
    return res
