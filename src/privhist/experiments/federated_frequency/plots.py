"""Figure 3 and the bars of Table 2, drawn from the tables of a run."""

from __future__ import annotations

from typing import Any

from privhist.experiments import _common
from privhist.experiments.federated_frequency.runner import Results


def figure3(res: Results) -> Any:
    """Theorem 1's bound and the true error against the threshold ``C`` (log scale)."""
    plt = _common.pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    c = [r["clip"] for r in res.figure3]
    ax.plot(c, [r["bound"] for r in res.figure3], "o-", color="tab:blue", label="bound E(C; D)")
    ax.plot(c, [r["true_error"] for r in res.figure3], "s-", color="tab:red", label="true error")
    ax.axvline(res.figure3[0]["c_star"], color="grey", ls=":", label="C*")
    ax.set_xscale("log")
    ax.set_xlabel("clipping threshold C")
    ax.set_ylabel("l2 error")
    ax.legend()
    fig.tight_layout()
    return fig


def table2(res: Results) -> Any:
    """One bar chart per (dataset, d): each method's mean error and standard deviation."""
    plt = _common.pyplot()
    groups = list(dict.fromkeys((r["dataset"], r["d"]) for r in res.table2))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 3.6), squeeze=False)
    for ax, (name, d) in zip(axes[0], groups, strict=True):
        cells = [r for r in res.table2 if (r["dataset"], r["d"]) == (name, d)]
        ax.bar(
            range(len(cells)),
            [r["mean"] for r in cells],
            yerr=[r["std"] for r in cells],
            color="tab:blue",
        )
        ax.set_xticks(range(len(cells)))
        ax.set_xticklabels([r["method"] for r in cells], rotation=90, fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{name}, d={d}", fontsize=9)
    axes[0][0].set_ylabel("l2 error")
    fig.tight_layout()
    return fig
