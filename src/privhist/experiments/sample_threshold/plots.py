"""Figures 1 and 2: the mean absolute error per bucket and the top-k recall against epsilon."""

from __future__ import annotations

import math
from typing import Any

from privhist.experiments import _common
from privhist.experiments.sample_threshold.runner import Results
from privhist.experiments.sample_threshold.settings import MECHANISMS

_STYLE = {
    "st-paper": {"color": "tab:blue", "marker": "o"},
    "st-exact": {"color": "tab:cyan", "marker": "s", "linestyle": "--"},
    "central": {"color": "tab:orange", "marker": "^"},
    "shuffle": {"color": "tab:green", "marker": "v"},
    "hadamard": {"color": "tab:red", "marker": "x"},
}


def plot_figure(results: Results, figure: str) -> Any:
    """Figure 1 (MAE, log scale) or Figure 2 (recall): rows are ``B``, columns datasets."""
    plt = _common.pyplot()
    s = results.settings
    sizes = s.figure1 if figure == "1" else s.figure2
    metric = "mae" if figure == "1" else "recall"
    nrow, ncol = len(sizes), len(results.datasets)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.2 * nrow), squeeze=False)
    letters = "abcdefghijklmnop"
    for i, b in enumerate(sizes):
        for j, d in enumerate(results.datasets):
            ax = axes[i][j]
            cell = _common.rows_where(results.rows, dataset=d, buckets=b)
            for m in MECHANISMS:
                rs = sorted(_common.rows_where(cell, mechanism=m), key=lambda r: r["epsilon"])
                if not rs:
                    continue
                ax.errorbar(
                    [r["epsilon"] for r in rs],
                    [r[f"{metric}_mean"] for r in rs],
                    yerr=[0.0 if math.isnan(r[f"{metric}_se"]) else r[f"{metric}_se"] for r in rs],
                    label=MECHANISMS[m],
                    markersize=4,
                    linewidth=1.2,
                    capsize=2,
                    **_STYLE[m],
                )
            if metric == "mae":
                ax.set_yscale("log")
                if cell:
                    ax.axhline(cell[0]["zero_mae"], color="grey", linewidth=0.8, linestyle=":")
                ax.set_ylabel("mean abs. error / n")
            else:
                ax.set_ylim(-0.03, 1.03)
                ax.set_ylabel(f"top-{max(1, b // 10)} recall")
            ax.set_xlabel("epsilon")
            exp = round(math.log2(b))
            ax.set_title(f"({letters[i * ncol + j]}) {d.capitalize()}, B = 2^{exp}", fontsize=10)
            ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if metric == "mae":
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="grey", linewidth=0.8, linestyle=":"))
        labels.append("report 0 for every bucket")
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8)
    title = "Accuracy" if figure == "1" else "Top-k recall (k = B/10)"
    fig.suptitle(
        f"Figure {figure}: {title}; delta = {s.delta:g}, alpha = 1/6, {s.reps} repetitions",
        fontsize=11,
    )
    # fixed margins: tight_layout costs seconds on log axes
    fig.subplots_adjust(
        left=0.08,
        right=0.98,
        top=1 - 0.8 / (3.2 * nrow),
        bottom=0.55 / (3.2 * nrow) + 0.06,
        hspace=0.45,
        wspace=0.3,
    )
    return fig


# -- the paper's claims next to ours ------------------------------------------------------------
