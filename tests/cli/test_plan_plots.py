"""Plots of plans: the drawing helpers of :mod:`privhist.planning.plot` draw the numbers they are
given, and ``privhist plan NAME --plot FILE`` of the planner plug-ins writes the file, checks its
name before any work, gives the one error every plot gives without matplotlib, and draws the
plan's own numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the helpers of :mod:`privhist.planning.plot` write, kept to be read back."""
    pytest.importorskip("matplotlib")
    import privhist.planning.plot as plot

    kept: list[Any] = []
    save = plot._save

    def keep(fig: Any, path: str | Path) -> Path:
        kept.append(fig)
        return save(fig, path)

    monkeypatch.setattr(plot, "_save", keep)
    return kept


def _legend(ax: Any) -> list[str]:
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


# -- the helpers -------------------------------------------------------------------------------


def test_curves_draw_marks_as_labelled_vertical_lines(figures: list[Any], tmp_path: Path) -> None:
    from privhist.planning.plot import plot_curves

    out = plot_curves(
        [("p", [0.0, 0.25, 0.5, 1.0])],
        tmp_path / "c.png",
        title="t",
        xlabel="x",
        marks=[("half", 2.0), ("all", 3.0)],
    )
    assert out.read_bytes()[:8] == PNG
    (ax,) = figures[0].axes
    curve, *marks = ax.get_lines()
    assert list(curve.get_ydata()) == [0.0, 0.25, 0.5, 1.0]
    assert [list(m.get_xdata()) for m in marks] == [[2.0, 2.0], [3.0, 3.0]]
    assert _legend(ax) == ["p", "half", "all"]


def test_bars_draw_one_bar_per_count(figures: list[Any], tmp_path: Path) -> None:
    from privhist.planning.plot import plot_bars

    values = [0.1, 0.2, 0.4, 0.2, 0.1]
    out = plot_bars(
        values,
        tmp_path / "b.svg",
        title="t",
        xlabel="z",
        ylabel="Pr[z]",
        highlight=("the true count", 2),
        band=("within 1", 1, 3),
    )
    assert b"<svg" in out.read_bytes()[:500]
    (ax,) = figures[0].axes
    (bars,) = ax.containers
    assert [b.get_height() for b in bars] == values
    assert [b.get_x() + b.get_width() / 2 for b in bars] == [0, 1, 2, 3, 4]
    colours = [b.get_facecolor() for b in bars]
    assert colours[2] != colours[0] and len({colours[i] for i in (0, 1, 3, 4)}) == 1
    assert {"the true count", "within 1"} <= set(_legend(ax))
    (band,) = [p for p in ax.patches if p not in bars.patches]
    assert band.get_window_extent().x0 < bars[1].get_window_extent().x0
    assert band.get_window_extent().x1 > bars[3].get_window_extent().x1


def test_panels_draw_each_series_and_label_shared_marks_once(
    figures: list[Any], tmp_path: Path
) -> None:
    from privhist.planning.plot import Panel, plot_panels

    panels = [
        Panel("a", "x", "y", [("one", [1, 10, 100], [3.0, 0.3, 0.03])], xscale="log"),
        Panel("b", "x", "y", [("two", [1, 2], [5.0, 6.0]), ("three", [1, 2], [1.0, 2.0])]),
        Panel("c", "x", "y", [("four", [2.0, 4.0], [1.0, 0.5])], marks=[("own", 3.0)]),
    ]
    out = plot_panels(panels, tmp_path / "p.pdf", title="all", marks=[("shared", 1.5)])
    assert out.read_bytes()[:4] == b"%PDF"
    fig = figures[0]
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 3 and fig.get_suptitle() == "all"
    for ax, panel in zip(shown, panels, strict=True):
        drawn = [
            (line.get_label(), list(line.get_xdata()), list(line.get_ydata()))
            for line in ax.get_lines()
        ]
        assert drawn[: len(panel.series)] == [(lab, list(x), list(y)) for lab, x, y in panel.series]
        assert ax.get_title() == panel.title and ax.get_xscale() == panel.xscale
        assert [list(line.get_xdata()) for line in ax.get_lines()[len(panel.series) :]] == [
            [x, x] for _, x in panel.marks
        ] + [[1.5, 1.5]]
    assert [_legend(ax) for ax in shown] == [
        ["one", "shared"],
        ["two", "three"],
        ["four", "own"],
    ]
