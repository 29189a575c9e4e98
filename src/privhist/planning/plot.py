"""Plots of plans: reporting probability by true count, for one or several mechanisms.

Needs the ``plot`` extra (``pip install 'privhist[plot]'``, i.e. matplotlib).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privhist.core.errors import UnsupportedError
from privhist.mechanisms.base import Mechanism


def plot_reporting_probability(
    mechanisms: Sequence[Mechanism], max_count: int, path: str | Path, *, highlight: str = ""
) -> Path:
    """Write a PNG/SVG/PDF of Pr[released] against true count for each mechanism."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnsupportedError("plotting needs matplotlib: pip install 'privhist[plot]'") from None
    fig: Any
    fig, ax = plt.subplots(figsize=(7, 4))
    for m in mechanisms:
        rp = m.reporting_probability(max_count)
        style: dict[str, Any] = (
            {"linewidth": 2.5} if m.name == highlight else {"linewidth": 1.2, "alpha": 0.8}
        )
        ax.step(range(max_count + 1), rp, where="mid", label=_label(m), **style)
    g = mechanisms[0].guarantee() if mechanisms else None
    title = "Probability that a key is released, by its true count"
    if g is not None:
        title += f"\n{g} under {mechanisms[0].neighbouring.describe()} neighbours"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("true count of the key")
    ax.set_ylabel("Pr[released]")
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
