"""The peers report: OpenDP and PipelineDP audited at their documented settings (markdown, plots).

Every peer mechanism is audited statistically (:mod:`privhist.audit.statistical`) with the peer
called once per sample; where a peer's output law is known in closed form (OpenDP's discrete
Laplace threshold: a key is released iff ``count + Z >= threshold``, ``Z`` discrete Laplace of
the stated scale), the report adds the exact profile of that law, computed by the exact audit on
privhist's stability histogram run with the peer's threshold and scale — labelled as a model of
the peer, checked against the peer's own draws by the statistical audit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privhist.audit import peers as peer_adapters
from privhist.audit.exact import ExactAudit, audit_exact, plot_exact
from privhist.audit.sampling import CallableSampler
from privhist.audit.statistical import StatisticalAudit, audit_statistical
from privhist.audit.variants import with_parameters
from privhist.mechanisms.stability import StabilityHistogram

__all__ = ["opendp_exact_model", "peers_report"]

#: (peer, epsilon, delta, extra settings) audited by the report
SETTINGS: list[tuple[str, float, float, dict[str, Any]]] = [
    ("opendp", 1.0, 1e-6, {}),
    ("opendp", 1.0, 0.1, {"scale": 1.0, "threshold": 2}),
    ("pipelinedp-count", 1.0, 1e-6, {}),
    ("pipelinedp-count", 1.0, 1e-2, {}),
    ("pipelinedp-privacy-id-count", 1.0, 1e-6, {}),
    ("pipelinedp-privacy-id-count", 1.0, 1e-2, {}),
    ("diffprivlib", 1.0, 0.0, {}),
]


def _peer(name: str, epsilon: float, delta: float, extra: dict[str, Any]) -> Any:
    if name == "opendp":
        return peer_adapters.opendp_laplace_threshold(epsilon, delta, **extra)
    if name == "diffprivlib":
        return peer_adapters.diffprivlib_histogram(epsilon)
    metric = "count" if name == "pipelinedp-count" else "privacy_id_count"
    return peer_adapters.pipelinedp_count(epsilon, delta, metric=metric)


def opendp_exact_model(peer: Any) -> ExactAudit:
    """Exact audit of OpenDP's threshold law (module notes) against the claim its map states."""
    s = peer.settings
    base = StabilityHistogram(peer.epsilon, peer.delta)
    model = with_parameters(base, threshold=int(s["threshold"]), scale=float(s["scale"]))
    return audit_exact(model)


def peers_report(
    out: Path,
    *,
    samples: int = 50_000,
    pilot: int = 2_000,
    progress: Callable[[str, int, int], None] | None = None,
    settings: list[tuple[str, float, float, dict[str, Any]]] | None = None,
) -> tuple[Path, list[str]]:
    """Audit the peers, write ``out/peers.md`` and its plots; return the path and one line per
    violation found."""
    out.mkdir(parents=True, exist_ok=True)
    have = peer_adapters.available()
    rows: list[tuple[Any, StatisticalAudit | None, float, str]] = []
    models: list[tuple[Any, ExactAudit]] = []
    failures: list[str] = []
    for name, eps, delta, extra in settings or SETTINGS:
        module = name if name in ("opendp", "diffprivlib") else "pipeline_dp"
        if not have[module]:
            rows.append((None, None, 0.0, f"{name}: not installed, skipped"))
            continue
        peer = _peer(name, eps, delta, extra)
        t0 = time.perf_counter()
        res = audit_statistical(
            CallableSampler(peer.function, peer.name),
            peer.epsilon,
            peer.delta,
            samples=samples,
            pairs=peer.pairs,
            pilot=pilot,
            progress=progress,
        )
        rows.append((peer, res, time.perf_counter() - t0, ""))
        if res.violation:
            failures.append(res.verdict())
        if name == "opendp":
            model = opendp_exact_model(peer)
            models.append((peer, model))
    plots = _plots(out, rows, models)
    text = _markdown(rows, models, plots, samples)
    path = out / "peers.md"
    path.write_text(text, encoding="utf-8")
    return path, failures


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.4g}"


def _markdown(
    rows: list[tuple[Any, StatisticalAudit | None, float, str]],
    models: list[tuple[Any, ExactAudit]],
    plots: list[str],
    samples: int,
) -> str:
    lines = [
        "# Peers audit",
        "",
        f"Statistical audit (`privhist audit peers`): N = {samples} outputs per side of the pair "
        "chosen by a pilot search, each peer called once per output; Clopper-Pearson lower "
        "bounds at 95% confidence (union bound over the events and feature maps). A violation "
        "is a lower bound above the claim; *resolution* is the smallest delta these N can tell "
        "from 0.",
        "",
        "| peer | version | settings | claim (eps, delta) | pair | eps lower | delta lower "
        "| resolution | verdict | outputs/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for peer, res, _secs, note in rows:
        if res is None:
            lines.append(f"| {note} | | | | | | | | | |")
            continue
        settings = ", ".join(f"{k}={v}" for k, v in peer.settings.items() if k != "map_at_d_in_1")
        verdict = "**VIOLATION**" if res.violation else "no violation found"
        rate = 2 * res.samples / res.draw_seconds if res.draw_seconds else math.inf
        lines.append(
            f"| {peer.name} | {peer.version} | {settings} | ({peer.epsilon:g}, "
            f"{peer.delta:.3g}) | {res.pair.note} | {_fmt(res.result.epsilon_lower)} | "
            f"{res.result.delta_lower:.3g} | {res.result.resolution:.2g} | {verdict} | "
            f"{rate:.0f} |"
        )
    if models:
        lines += [
            "",
            "## OpenDP's threshold law, exactly",
            "",
            "A key of OpenDP's `then_laplace_threshold` is released iff `count + Z >= threshold` "
            "with `Z` discrete Laplace of the stated scale. The exact audit of that law "
            "(privhist's stability histogram run with OpenDP's threshold and scale, claiming what "
            "OpenDP's map states):",
            "",
        ]
        for peer, model in models:
            lines.append(
                f"- threshold {peer.settings['threshold']}, scale "
                f"{peer.settings['scale']}: {model.verdict()}"
            )
    bad = [(p, r) for p, r, _, _ in rows if r is not None and r.violation]
    if bad:
        lines += ["", "## Violations and their reproduction", ""]
        for peer, res in bad:
            lines += [f"### {peer.name}, claim ({peer.epsilon:g}, {peer.delta:.3g})", ""]
            lines.append(res.verdict())
            lines.append("")
            for e in res.result.events[:2]:
                lines.append(
                    f"- event `{e.description}` ({e.direction}): {e.count_first} of "
                    f"{res.result.estimation_samples} on one side, {e.count_second} on the other"
                )
            lines += ["", "```python", peer.reproduction, "```", ""]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def _plots(
    out: Path,
    rows: list[tuple[Any, StatisticalAudit | None, float, str]],
    models: list[tuple[Any, ExactAudit]],
) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names: list[str] = []
    done = [(p, r) for p, r, _, _ in rows if r is not None]
    if done:
        fig: Any
        fig, ax = plt.subplots(figsize=(8, 0.6 * len(done) + 1.5))
        labels = [f"{p.name}\n({p.epsilon:g}, {p.delta:.2g})" for p, _ in done]
        claim = [max(r.delta, 1e-12) for _, r in done]
        lower = [max(r.result.delta_lower, 1e-12) for _, r in done]
        res = [r.result.resolution for _, r in done]
        y = range(len(done))
        ax.scatter(claim, y, marker="|", s=300, color="black", label="claimed delta")
        ax.scatter(lower, y, marker="o", color="red", label="delta lower bound (95%)")
        ax.scatter(res, y, marker="x", color="grey", label="resolution at N")
        ax.set_xscale("log")
        ax.set_yticks(list(y), labels, fontsize=7)
        ax.set_xlabel("delta at the claimed epsilon (0 drawn at 1e-12)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "peers_delta.png")
        plt.close(fig)
        names.append("peers_delta.png")
    for i, (_peer, model) in enumerate(models):
        name = f"opendp_exact_{i}.png"
        plot_exact(model, out / name)
        names.append(name)
    return names
