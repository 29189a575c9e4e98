"""Plots of plans: reporting probability by true count, for one or several mechanisms
(:func:`plot_reporting_probability`), or for any curves of probabilities by count
(:func:`plot_curves`, e.g. a weighted sample's plan); a distribution over counts as bars
(:func:`plot_bars`); and numbers against numbers, in one panel or several (:func:`plot_panels`,
e.g. an accounting curve by order or errors by group size).

Needs the ``plot`` extra (``pip install 'privhist[plot]'``, i.e. matplotlib).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
    marks: Sequence[tuple[str, float]] = (),
) -> Path:
    """Write a PNG/SVG/PDF of probabilities by count: one step curve per ``(label, values)``,
    ``values[c]`` at count ``c``; the curve labelled ``highlight`` is drawn thicker, and each
    ``(label, x)`` of ``marks`` is a dashed vertical line at ``x``."""
    plt = _pyplot()
    fig: Any
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in curves:
        style: dict[str, Any] = (
            {"linewidth": 2.5} if label == highlight else {"linewidth": 1.2, "alpha": 0.8}
        )
        ax.step(range(len(values)), values, where="mid", label=label, **style)
    _marks(ax, marks)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def plot_bars(
    values: Sequence[float],
    path: str | Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    highlight: tuple[str, int] | None = None,
    band: tuple[str, float, float] | None = None,
) -> Path:
    """Write a PNG/SVG/PDF of one bar per count, ``values[c]`` at count ``c`` (e.g. a
    distribution); the bar at the count of ``highlight = (label, c)`` is drawn in another colour
    and ``band = (label, low, high)`` shades the counts ``low..high``."""
    plt = _pyplot()
    fig: Any
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(range(len(values)), values, width=0.8, color="tab:blue", label=ylabel)
    if highlight is not None:
        label, at = highlight
        bars[at].set_color("tab:orange")
        bars[at].set_label(label)
    if band is not None:
        label, low, high = band
        ax.axvspan(low - 0.5, high + 0.5, color="tab:gray", alpha=0.15, label=label)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


@dataclass(frozen=True)
class Panel:
    """One panel of :func:`plot_panels`: each ``(label, xs, ys)`` of ``series`` is a line with
    a marker at every point; each ``(label, x)`` of ``marks`` a dashed vertical line at ``x``.

    ``xscale``/``yscale`` are matplotlib's (``"linear"``, ``"log"``); on a log axis give only
    positive numbers."""

    title: str
    xlabel: str
    ylabel: str
    series: Sequence[tuple[str, Sequence[float], Sequence[float]]]
    marks: Sequence[tuple[str, float]] = ()
    xscale: str = "linear"
    yscale: str = "linear"


def plot_panels(
    panels: Sequence[Panel],
    path: str | Path,
    *,
    title: str,
    marks: Sequence[tuple[str, float]] = (),
) -> Path:
    """Write a PNG/SVG/PDF of the ``panels``, two to a row, under one ``title``; each
    ``(label, x)`` of ``marks`` is a dashed vertical line at ``x`` in every panel, labelled in
    the first panel's legend only."""
    plt = _pyplot()
    cols = 1 if len(panels) == 1 else 2
    rows = max(1, -(-len(panels) // cols))
    fig: Any
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols + 2, 1.0 + 3.2 * rows), squeeze=False)
    for i, (ax, panel) in enumerate(zip(axes.flat, panels, strict=False)):
        for label, xs, ys in panel.series:
            ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.2, label=label)
        _marks(ax, panel.marks)
        shared = marks if i == 0 else [(f"_{label}", x) for label, x in marks]  # "_": no legend
        _marks(ax, shared, first=len(panel.marks))
        ax.set_xscale(panel.xscale)
        ax.set_yscale(panel.yscale)
        ax.set_title(panel.title, fontsize=9)
        ax.set_xlabel(panel.xlabel, fontsize=8)
        ax.set_ylabel(panel.ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def _pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only backend, or the one error every plot gives
    without the ``plot`` extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnsupportedError("plotting needs matplotlib: pip install 'privhist[plot]'") from None
    return plt


def _marks(ax: Any, marks: Sequence[tuple[str, float]], first: int = 0) -> None:
    """A dashed vertical line, in its own colour and labelled, at each ``(label, x)``; the
    colours start at the ``first``-th of the mark colours."""
    for i, (label, x) in enumerate(marks, start=first):
        ax.axvline(x, color=f"C{(i + 3) % 10}", linestyle="--", linewidth=1, label=label)


def _save(fig: Any, path: str | Path) -> Path:
    """Lay ``fig`` out, write it to ``path`` (its format by the suffix) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _label(m: Mechanism) -> str:
    std = m.noise_std()
    extra = "keys only" if std != std else f"noise std {std:.3g}"  # NaN: no counts
    return f"{m.name} ({extra})"
