"""Plots of plans: the drawing helpers of :mod:`privhist.planning.plot` draw the numbers they are
given, and ``privhist plan NAME --plot FILE`` of the planner plug-ins writes the file, checks its
name before any work, gives the one error every plot gives without matplotlib, and draws the
plan's own numbers."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cli_run import run

PNG = b"\x89PNG\r\n\x1a\n"

_WEIGHTED = (["--epsilon", "1", "--delta", "1e-8", "--max-count", "80"], "selector_curve")

#: each planner: the flags of a small plan, and the module and function doing its work
PLANS: dict[str, tuple[list[str], tuple[str, str]]] = {
    name: (_WEIGHTED[0], ("privhist.planning.user_level", _WEIGHTED[1]))
    for name in ("wgm", "dp-sips", "cumulative-sips")
}
PLANS["bounded-geometric"] = (
    ["--epsilon", "1", "--n", "10", "--true-count", "3"],
    ("privhist.planning.finite", "plan_bounded_geometric"),
)
_CPBM = ["--users", "1000", "--dimension", "10", "--m", "30", "--theta", "0.2", "--delta", "1e-5"]
PLANS["cpbm"] = (_CPBM, ("privhist.federated.cpbm_accounting", "cpbm_rdp"))
PLANS["aggregate"] = (
    ["--epsilon", "1", "--delta", "1e-6", "--metric", "count", "--metric", "mean(x,0,10)"],
    ("privhist.analytics.aggregate", "plan"),
)


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


# -- the planners ------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".png", ".svg"])
@pytest.mark.parametrize("name", sorted(PLANS))
def test_plot_is_written(
    name: str, suffix: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"plan{suffix}"
    flags = PLANS[name][0]
    code, text, err = run(capsys, "plan", name, *flags, "--plot", str(out))
    assert code == 0 and err == f"privhist: plot written to {out}\n"
    assert (code, text) == run(capsys, "plan", name, *flags)[:2]  # printed as without --plot
    head = out.read_bytes()[:500]
    assert head[:8] == PNG if suffix == ".png" else b"<svg" in head


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plot_name_is_checked_before_any_work(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags, (module, function) = PLANS[name]

    def work(*_: object, **__: object) -> Any:
        raise AssertionError(f"{function} ran")

    monkeypatch.setattr(importlib.import_module(module), function, work)
    with pytest.raises(AssertionError, match=f"{function} ran"):  # the planner's work
        run(capsys, "plan", name, *flags)
    out = tmp_path / "plan.jpg"
    code, text, err = run(capsys, "plan", name, *flags, "--plot", str(out))
    assert code == 2 and text == "" and err.count("\n") == 1
    assert f"parameter '--plot' of plan {name} must be a .png, .svg or .pdf file" in err
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plot_without_matplotlib_says_what_to_install(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    pws = ["plan", "pws", "--epsilon", "1", "--delta", "1e-6", "--max-count", "5"]
    code, _, want = run(capsys, *pws, "--plot", str(tmp_path / "pws.png"))
    assert code == 2 and "pip install 'privhist[plot]'" in want
    out = tmp_path / "plan.png"
    code, text, err = run(capsys, "plan", name, *PLANS[name][0], "--plot", str(out))
    assert (code, text, err) == (2, "", want) and not out.exists()


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the planners hand to the helpers of :mod:`privhist.planning.plot`, nothing drawn:
    ``{helper: (positional arguments, keyword arguments)}``."""
    import privhist.planning.plot as plot

    calls: dict[str, Any] = {}
    for helper in ("plot_curves", "plot_bars", "plot_panels"):

        def record(*args: Any, _helper: str = helper, **kwargs: Any) -> Path:
            calls[_helper] = (args, kwargs)
            return Path(args[1])

        monkeypatch.setattr(plot, helper, record)
    return calls


def _plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, "plan", *argv, "--json", "--plot", str(tmp_path / "p.svg"))
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


@pytest.mark.parametrize("name", ["wgm", "dp-sips", "cumulative-sips"])
def test_weighted_plot_is_the_reporting_curve_with_its_levels_marked(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, drawn: dict[str, Any]
) -> None:
    flags = ["--epsilon", "1", "--delta", "1e-8", "--max-count", "150", "--degree", "2"]
    report = _plan(capsys, tmp_path, name, *flags)
    (curves, _), kwargs = drawn["plot_curves"]
    assert curves == [(f"{name}: each holder keeping 2 keys", report["reporting_probability"])]
    assert kwargs["highlight"] == curves[0][0]
    assert [x for _, x in kwargs["marks"]] == [report["users_at_half"], report["users_at_99"]]
    assert "(users_at_half)" in kwargs["marks"][0][0] and report["users_at_99"] <= 150
    assert report["guarantee"] in kwargs["title"] and "up to 20 keys per user" in kwargs["title"]
    # a curve that reaches neither level marks nothing
    report = _plan(capsys, tmp_path, name, "--epsilon", "1", "--delta", "1e-8", "--max-count", "5")
    assert report["users_at_half"] is None and drawn["plot_curves"][1]["marks"] == []


@pytest.mark.parametrize(("n", "count"), [(10, 3), (40, 38)])
def test_bounded_geometric_plot_is_the_distribution_written_out(
    n: int, count: int, capsys: pytest.CaptureFixture[str], tmp_path: Path, drawn: dict[str, Any]
) -> None:
    from fractions import Fraction

    argv = ["bounded-geometric", "--epsilon", "0.5", "--n", str(n), "--true-count", str(count)]
    report = _plan(capsys, tmp_path, *argv)
    (values, _), kwargs = drawn["plot_bars"]
    assert values == [float(Fraction(p)) for p in report["pmf"]] and len(values) == n + 1
    assert kwargs["highlight"] == (f"the true count {count}", count)
    width = report["accuracy"]["half_width"]
    label, low, high = kwargs["band"]
    assert (low, high) == (max(0, count - width), min(n, count + width))
    assert f"within {width} of it" in label and "1/20" in label


@pytest.mark.parametrize(("target", "verdict"), [([], ""), (["--epsilon", "3"], "(target 3: ")])
def test_cpbm_plot_is_the_renyi_curve_with_the_best_order_marked(
    target: list[str],
    verdict: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    drawn: dict[str, Any],
) -> None:
    report = _plan(capsys, tmp_path, "cpbm", *_CPBM, *target)
    (panels, _), kwargs = drawn["plot_panels"]
    (panel,) = panels
    orders, rdp = zip(*report["rdp_curve"], strict=True)
    assert all(0 < e < float("inf") for e in rdp)  # every point can be drawn on log axes
    assert [(label, list(x), list(y)) for label, x, y in panel.series] == [
        ("one secure sum", list(orders), list(rdp))
    ]
    assert (panel.xscale, panel.yscale) == ("log", "log")
    assert [x for _, x in panel.marks] == [report["best_order"]]
    assert f"({report['epsilon']:.4g}, 1e-05)-DP" in panel.title and verdict in panel.title
    assert "1000 users, dimension 10, m 30, theta 0.2" in kwargs["title"]


@pytest.mark.parametrize(
    ("groups", "unit"), [([], "records"), (["--public"], "records"), (["--user-level"], "users")]
)
def test_aggregate_plot_is_each_metrics_error_by_group_size(
    groups: list[str],
    unit: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    drawn: dict[str, Any],
) -> None:
    metrics = ["count", "sum(x,0,10)", "mean(y,0,5)", "variance(z,0,10)", "quantiles(w,0.5,0,99)"]
    argv = ["aggregate", "--epsilon", "1", "--delta", "1e-6", "--sizes", "1000,10,100", *groups]
    report = _plan(capsys, tmp_path, *argv, *(f"--metric={m}" for m in metrics))
    (panels, _), kwargs = drawn["plot_panels"]
    sizes = [10, 100, 1000]
    assert [p.title.split(" ")[0] for p in panels] == list(report["metrics"])
    for panel, entry in zip(panels, report["metrics"].values(), strict=True):
        assert entry["kind"] in panel.title and panel.xlabel == f"group size ({unit})"
        assert (panel.xscale, panel.yscale) == ("log", "log")
        by_size = {k: v for k, v in entry.items() if isinstance(v, dict)}
        want = [(k, sizes, [v[str(n)] for n in sizes]) for k, v in by_size.items()]
        if entry["kind"] == "sum":  # its noise is the same at every size
            assert want == []
            want = [("noise_std", sizes, [entry["noise_std"]] * 3)]
        assert [(list(x), list(y)) for _, x, y in panel.series] == [(x, y) for _, x, y in want]
    labels = [label for p in panels for label, _, _ in p.series]
    assert "mean error std, group mean at a bound" in labels and "rank_error_std" not in labels
    levels = ["released_with_probability_one_half_at", "released_with_probability_0.99_at"]
    assert [x for _, x in kwargs["marks"]] == [report.get(k) for k in levels if k in report]
    assert (kwargs["marks"] == []) == (groups == ["--public"])
