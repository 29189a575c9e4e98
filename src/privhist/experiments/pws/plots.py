"""One PNG per figure, drawn from the tables of a run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from privhist.experiments import _common
from privhist.experiments.pws.runner import Results
from privhist.experiments.pws.settings import (
    FIGURE1_PARAMS,
    FIGURE2_EPSILON,
    FIGURE3_TAUS,
    SAMPLED_DELTA,
    SAMPLED_EPSILON,
)


def _layout(fig: Any) -> None:
    """Fixed margins, no minor ticks and plain tick labels on log axes (tight_layout and
    mathtext labels measure and typeset every tick and dominate the run time)."""
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in fig.axes:
        ax.minorticks_off()
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale == "log":
                axis.set_major_formatter(plain)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.9, wspace=0.28, hspace=0.4)


def figures(res: Results, out_dir: Path) -> list[tuple[Path, Any]]:
    """Every figure of a run as ``(path under out_dir, matplotlib figure)``; nothing is written
    here (:func:`~privhist.experiments.pws.cli.write_outputs` saves them)."""
    plt = _common.pyplot()
    figs: list[tuple[Path, Any]] = []

    f1 = res.tables["figure1.csv"]
    fig, axes = plt.subplots(1, len(FIGURE1_PARAMS), figsize=(11, 4))
    for ax, (eps, d) in zip(axes, FIGURE1_PARAMS, strict=True):
        rs = _common.rows_where(f1, epsilon=eps, delta=d)
        x = [r["frequency"] for r in rs]
        ax.plot(x, [r["pws"] for r in rs], label="PWS (Opt)")
        ax.plot(x, [r["sbh"] for r in rs], label="SbH")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"no sampling, eps={eps:g}, delta={d:g}")
        ax.set_xlabel("frequency")
        ax.set_ylabel("reporting probability")
        ax.legend()
    _layout(fig)
    figs.append((out_dir / "figure1.png", fig))

    f2 = res.tables["figure2.csv"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ds in dict.fromkeys(r["dataset"] for r in f2):
        rs = _common.rows_where(f2, dataset=ds)
        x = [r["delta"] for r in rs]
        axes[0].plot(x, [r["ratio"] for r in rs], marker=".", label=ds)
        axes[1].plot(x, [r["pws"] for r in rs], marker=".", label=f"{ds} PWS")
        axes[1].plot(x, [r["sbh"] for r in rs], linestyle="--", label=f"{ds} SbH")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("delta")
        ax.legend()
    axes[0].set_ylabel("PWS / SbH")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("fraction of keys reported")
    fig.suptitle(f"No sampling, eps = {FIGURE2_EPSILON:g}")
    _layout(fig)
    figs.append((out_dir / "figure2.png", fig))

    f3 = res.tables["figure3.csv"]
    fig, axes = plt.subplots(1, len(FIGURE3_TAUS), figsize=(14, 4))
    for ax, t in zip(axes, FIGURE3_TAUS, strict=True):
        rs = _common.rows_where(f3, tau=t)
        x = [r["frequency"] for r in rs]
        ax.plot(x, [r["non_private"] for r in rs], label="non-private q")
        ax.plot(x, [r["pws"] for r in rs], label="PWS (Opt)")
        ax.plot(x, [r["sampled_sbh"] for r in rs], label="sampled-SbH")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"ppswor tau={t:g}, eps={SAMPLED_EPSILON:g}, delta={SAMPLED_DELTA:g}")
        ax.set_xlabel("frequency")
        ax.legend()
    axes[0].set_ylabel("reporting probability")
    _layout(fig)
    figs.append((out_dir / "figure3.png", fig))

    f4 = res.tables["figure4.csv"]
    names = list(dict.fromkeys(r["dataset"] for r in f4))
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(4.5 * (len(names) + 1), 4))
    for ax, ds in zip(axes, names, strict=False):
        rs = _common.rows_where(f4, dataset=ds)
        x = [r["tau"] for r in rs]
        ax.plot(x, [r["non_private"] for r in rs], label="non-private")
        ax.plot(x, [r["pws"] for r in rs], label="PWS (Opt)")
        ax.plot(x, [r["sampled_sbh"] for r in rs], label="sampled-SbH")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{ds}, ppswor")
        ax.set_xlabel("tau")
        ax.legend()
        axes[-1].plot(x, [r["gain"] + 1 for r in rs], marker=".", label=ds)
    axes[0].set_ylabel("fraction of keys reported")
    axes[-1].set_xscale("log")
    axes[-1].set_title("PWS / sampled-SbH")
    axes[-1].set_xlabel("tau")
    axes[-1].legend()
    _layout(fig)
    figs.append((out_dir / "figure4.png", fig))

    eps_list = res.settings.estimation_epsilons
    f5 = res.tables["figure5.csv"]
    nr = res.tables["figure5_nrmse.csv"]
    fig, axes = plt.subplots(2, len(eps_list), figsize=(5 * len(eps_list), 8), squeeze=False)
    for k, eps in enumerate(eps_list):
        ax = axes[0][k]
        sbh_done = False
        for t in res.settings.bias_taus:
            rs = _common.rows_where(f5, epsilon=eps, tau=t)
            x = [r["frequency"] for r in rs]
            ax.plot(x, [r["pws_mle"] for r in rs], label=f"PWS MLE tau={t:g}")
            if not sbh_done:
                ax.plot(x, [r["sbh"] for r in rs], "k--", label="(sampled-)SbH")
                sbh_done = True
        ax.set_xscale("log", base=2)
        ax.set_title(f"normalised bias, eps={eps:g}, delta=2^-20")
        ax.set_xlabel("frequency")
        ax.legend(fontsize=7)
        ax = axes[1][k]
        rs = _common.rows_where(nr, epsilon=eps)
        x = [r["tau"] for r in rs]
        ax.plot(x, [r["non_private"] for r in rs], marker=".", label="non-private")
        ax.plot(x, [r["pws_mle"] for r in rs], marker=".", label="PWS (MLE)")
        ax.plot(x, [r["sampled_sbh"] for r in rs], marker=".", label="sampled-SbH")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"NRMSE, 2e5 keys uniform [1,200], eps={eps:g}")
        ax.set_xlabel("tau (priority)")
        ax.legend(fontsize=7)
    _layout(fig)
    figs.append((out_dir / "figure5.png", fig))

    f6 = res.tables["figure6.csv"]
    vt = res.settings.variance_taus
    fig, axes = plt.subplots(
        len(eps_list), len(vt), figsize=(4.5 * len(vt), 3.5 * len(eps_list)), squeeze=False
    )
    for a, eps in enumerate(eps_list):
        for b, t in enumerate(vt):
            ax = axes[a][b]
            rs = _common.rows_where(f6, epsilon=eps, tau=t)
            x = [r["frequency"] for r in rs]
            if t < 1:
                ax.plot(x, [r["non_private"] for r in rs], label="non-private")
            ax.plot(x, [r["pws_mle"] for r in rs], label="PWS (MLE)")
            ax.plot(x, [r["sampled_sbh"] for r in rs], label="sampled-SbH")
            ax.set_yscale("log")
            ax.set_title(f"Var/i^2, eps={eps:g}, tau={t:g}", fontsize=9)
            ax.set_xlabel("frequency")
            ax.legend(fontsize=7)
    _layout(fig)
    figs.append((out_dir / "figure6.png", fig))

    if "real_data.csv" in res.tables:
        rd = res.tables["real_data.csv"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ds in dict.fromkeys(r["dataset"] for r in rd):
            rs = [r for r in _common.rows_where(rd, dataset=ds) if math.isnan(r["tau"])]
            axes[0].plot([r["delta"] for r in rs], [r["ratio"] for r in rs], marker=".", label=ds)
            rs = [r for r in _common.rows_where(rd, dataset=ds) if not math.isnan(r["tau"])]
            axes[1].plot([r["tau"] for r in rs], [r["ratio"] for r in rs], marker=".", label=ds)
        axes[0].set_xscale("log")
        axes[0].set_xlabel("delta (no sampling, eps=0.1)")
        axes[1].set_xscale("log")
        axes[1].set_xlabel("tau (ppswor, eps=0.1, delta=0.001)")
        for ax in axes:
            ax.set_ylabel("PWS / SbH keys reported")
            ax.legend()
        _layout(fig)
        figs.append((out_dir / "real_data.png", fig))
    return figs
