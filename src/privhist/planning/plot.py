"""Plots of plans: reporting probability by true count, for one or several mechanisms
(:func:`plot_reporting_probability`), or for any curves of probabilities by count
(:func:`plot_curves`, e.g. a weighted sample's plan).

Needs the ``plot`` extra (``pip install 'privhist[plot]'``, i.e. matplotlib).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import UnsupportedError
from privhist.mechanisms.base import Mechanism


def plot_reporting_probability(
    mechanisms: Sequence[Mechanism], max_count: int, path: str | Path, *, highlight: str = ""
) -> Path:
    """Write a PNG/SVG/PDF of Pr[released] against true count for each mechanism."""
    title = "Probability that a key is released, by its true count"
    g = mechanisms[0].guarantee() if mechanisms else None
    if g is not None:
        title += f"\n{g} under {mechanisms[0].neighbouring.describe()} neighbours"
    labels = {m.name: _label(m) for m in mechanisms}
    curves = [(labels[m.name], m.reporting_probability(max_count)) for m in mechanisms]
    return plot_curves(
        curves,
        path,
        title=title,
        xlabel="true count of the key",
        highlight=labels.get(highlight, ""),
    )


def plot_curves(
    curves: Sequence[tuple[str, Sequence[float] | npt.NDArray[np.float64]]],
    path: str | Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str = "Pr[released]",
    highlight: str = "",
) -> Path:
    """Write a PNG/SVG/PDF of probabilities by count: one step curve per ``(label, values)``,
    ``values[c]`` at count ``c``; the curve labelled ``highlight`` is drawn thicker."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnsupportedError("plotting needs matplotlib: pip install 'privhist[plot]'") from None
    fig: Any
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in curves:
        style: dict[str, Any] = (
            {"linewidth": 2.5} if label == highlight else {"linewidth": 1.2, "alpha": 0.8}
        )
        ax.step(range(len(values)), values, where="mid", label=label, **style)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _label(m: Mechanism) -> str:
    std = m.noise_std()
    extra = "keys only" if std != std else f"noise std {std:.3g}"  # NaN: no counts
    return f"{m.name} ({extra})"
