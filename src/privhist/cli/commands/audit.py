"""``privhist audit``: measure the privacy of a mechanism — ours, a peer's or a user's.

    privhist audit exact MECHANISM --epsilon E --delta D [mechanism options]
        [--threshold T] [--scale B] [--sampling-rate P] [--pair U0:N0/U1:N1 ...] [--json]
        [--plot FILE]
    privhist audit sample (--mechanism NAME | --function MODULE:FUNCTION | --peer PEER)
        --epsilon E --delta D [--samples N] [--pair FIRST/SECOND ...] [--json]
    privhist audit peers [--samples N] [--output DIR]

``exact`` computes the exact privacy profile on enumerated neighbours (both directions);
``sample`` draws ``N`` outputs per side of a searched (or given) neighbouring pair and reports
Clopper-Pearson lower bounds on epsilon and delta; ``peers`` writes the peers report. A violation
prints one line and exits with status 1. ``--threshold``, ``--scale`` and ``--sampling-rate`` run
the mechanism with hand-set parameters while it keeps claiming ``(E, D)``.
A pair is ``key=count,...`` for each side, e.g. ``--pair 'x=1/'`` (one record against none).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from privhist.cli import catalogue
from privhist.core.errors import ValidationError

EXIT_VIOLATION = 1
#: the audit's own flags; a mechanism option of the same name is set by hand, not calibrated
OVERRIDES = ("threshold", "sampling_rate")


def register(sub: Any) -> None:
    p = sub.add_parser("audit", help="measure the privacy of a mechanism (exact or sampled)")
    asub = p.add_subparsers(dest="audit_command", metavar="AUDIT", required=True)

    e = asub.add_parser("exact", help="exact privacy profile of a privhist mechanism")
    e.add_argument("mechanism", choices=catalogue.names())
    _claim(e)
    _mechanism_options(e)
    e.add_argument("--max-count", type=int, help="largest unit count enumerated")
    e.add_argument(
        "--pair",
        action="append",
        metavar="U0:N0/U1:N1",
        help="a chosen one-key pair of (units:records) instead of the enumeration (repeatable)",
    )
    e.add_argument("--plot", metavar="FILE", help="claimed vs exact profile (PNG/SVG/PDF)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(run=_exact)

    s = asub.add_parser("sample", help="statistical (black-box) audit from N draws per side")
    what = s.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--mechanism",
        choices=catalogue.names(),
        help="a privhist mechanism, set by the claim and its [NAME] options; its neighbouring "
        "pairs are searched unless --pair gives them",
    )
    what.add_argument(
        "--function",
        metavar="MODULE:FUNCTION",
        help="f(records) -> output, marked with @privhist.audit.audit_sampler",
    )
    what.add_argument(
        "--peer",
        choices=["opendp", "pipelinedp-count", "pipelinedp-privacy-id-count", "diffprivlib"],
        help="a peer library at its documented calibration for (E, D)",
    )
    _claim(s)
    _mechanism_options(s)
    s.add_argument("--samples", type=int, default=100_000, help="N per side (default 1e5)")
    s.add_argument(
        "--pair",
        action="append",
        metavar="FIRST/SECOND",
        help="neighbouring datasets 'key=count,.../key=count,...' (repeat: candidates)",
    )
    s.add_argument("--pilot", type=int, help="draws per side per candidate pair in the search")
    s.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="probability that the reported lower bounds all hold (default %(default)s)",
    )
    s.add_argument("--seed", type=int, help="reproducible draws (privhist mechanisms only)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(run=_sample)

    r = asub.add_parser(
        "peers", help="audit OpenDP, PipelineDP and diffprivlib; write a markdown report"
    )
    r.add_argument("--samples", type=int, default=50_000, help="N per side (default 5e4)")
    r.add_argument("--output", default="audit-peers", help="report directory")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(run=_peers)


def _claim(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--epsilon",
        type=float,
        required=True,
        help="the epsilon claimed (the mechanism is calibrated to it unless --threshold, "
        "--scale or --sampling-rate set it by hand)",
    )
    p.add_argument("--delta", type=float, default=0.0, help="the delta claimed (default 0)")
    p.add_argument("--max-partitions", type=int, help="max keys per user (user-level)")
    p.add_argument("--max-per-partition", type=int, help="max records per user and key")
    p.add_argument("--threshold", type=int, help="run with this threshold (not recalibrated)")
    p.add_argument("--scale", type=float, help="run with this discrete Laplace scale")
    p.add_argument("--sampling-rate", type=float, help="run with this sampling rate")


def _mechanism_options(p: argparse.ArgumentParser) -> None:
    seen: set[str] = set(OVERRIDES)
    for mech, entry in catalogue.MECHANISMS.items():
        for opt in entry.options:
            if opt.name in seen:
                continue
            seen.add(opt.name)
            kw: dict[str, Any] = (
                {"action": "store_true"}
                if opt.kind is bool
                else {"type": opt.kind, "choices": opt.choices}
            )
            p.add_argument(opt.flag, dest=opt.name, default=None, help=f"[{mech}]", **kw)


def _variant(args: argparse.Namespace, name: str) -> Any:
    import privhist.mechanisms.registry as registry
    from privhist.audit.variants import build_variant
    from privhist.core.neighbouring import Neighbouring

    cls = registry.get(name)
    names = {o.name for o in cls.options} - set(OVERRIDES)
    options = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    k, c = args.max_partitions, args.max_per_partition
    nb = Neighbouring.user(k or 1, c or 1) if k or c else None
    return build_variant(
        name,
        args.epsilon,
        args.delta,
        nb,
        options=options,
        threshold=args.threshold,
        scale=args.scale,
        sampling_rate=args.sampling_rate,
    )


def _exact(args: argparse.Namespace) -> int:
    from privhist.audit.exact import audit_exact, plot_exact
    from privhist.cli.common import check_plot_path

    check_plot_path(args.plot, f"audit exact {args.mechanism}")
    result = audit_exact(
        _variant(args, args.mechanism), max_count=args.max_count, pairs=_unit_pairs(args.pair)
    )
    if args.plot:
        path = plot_exact(result, args.plot)
        print(f"privhist: plot written to {path}", file=sys.stderr)
    _show(result.to_dict(), result.verdict(), args.json)
    return EXIT_VIOLATION if result.violation else 0


def _unit_pairs(specs: list[str] | None) -> Any:
    if not specs:
        return None
    out = []
    for spec in specs:
        try:
            sides = [tuple(int(x) for x in side.split(":")) for side in spec.split("/")]
        except ValueError:
            sides = []
        if len(sides) != 2 or any(len(s) != 2 for s in sides):
            raise ValidationError("--pair", "audit exact", "U0:N0/U1:N1 (integers)", spec)
        out.append((sides[0], sides[1]))
    return out


def _pairs(specs: list[str] | None) -> Any:
    from privhist.audit.sampling import NeighbouringPair

    if not specs:
        return None
    out = []
    for spec in specs:
        sides = spec.split("/")
        if len(sides) != 2:
            raise ValidationError("--pair", "audit sample", "FIRST/SECOND", spec)
        data = []
        for side in sides:
            d: dict[str, int] = {}
            for item in filter(None, (x.strip() for x in side.split(","))):
                key, _, count = item.partition("=")
                if not key or not count.strip().isdigit():
                    raise ValidationError("--pair", "audit sample", "key=count items", item)
                d[key.strip()] = int(count)
            data.append(d)
        out.append(NeighbouringPair(data[0], data[1], spec))
    return out


def _sample(args: argparse.Namespace) -> int:
    from privhist.audit import peers
    from privhist.audit.sampling import CallableSampler, MechanismSampler, load_function
    from privhist.audit.statistical import audit_statistical
    from privhist.core.random import default_source

    pairs = _pairs(args.pair)
    mech = None
    epsilon, delta = args.epsilon, args.delta
    if args.mechanism:
        mech = _variant(args, args.mechanism)
        sampler: Any = MechanismSampler(mech)
        epsilon, delta = mech.guarantee().epsilon, mech.guarantee().delta
    elif args.function:
        sampler = CallableSampler(load_function(args.function), args.function)
    else:
        if args.peer == "opendp":
            peer = peers.opendp_laplace_threshold(
                args.epsilon, args.delta, scale=args.scale, threshold=args.threshold
            )
        elif args.peer == "diffprivlib":
            peer = peers.diffprivlib_histogram(args.epsilon)
        else:
            metric = "count" if args.peer == "pipelinedp-count" else "privacy_id_count"
            peer = peers.pipelinedp_count(args.epsilon, args.delta, metric=metric)
        sampler = CallableSampler(peer.function, peer.name)
        epsilon, delta = peer.epsilon, peer.delta
        pairs = pairs or peer.pairs
    if pairs is None and mech is None:
        pairs = _pairs(["x=1/"])
    with _progress(not args.no_progress) as bar:
        result = audit_statistical(
            sampler,
            epsilon,
            delta,
            samples=args.samples,
            pairs=pairs,
            mechanism=mech,
            pilot=args.pilot,
            confidence=args.confidence,
            rng=default_source(args.seed),
            progress=bar,
        )
    _show(result.to_dict(), result.verdict(), args.json)
    return EXIT_VIOLATION if result.violation else 0


def _peers(args: argparse.Namespace) -> int:
    from privhist.audit.report import peers_report

    with _progress(not args.no_progress) as bar:
        path, failures = peers_report(Path(args.output), samples=args.samples, progress=bar)
    print(f"privhist: peers report written to {path}", file=sys.stderr)
    for line in failures:
        print(line)
    return EXIT_VIOLATION if failures else 0


def _show(report: dict[str, Any], verdict: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, default=str))
    else:
        print(verdict)


class _progress:
    """A progress bar on stderr (Rich), only on a terminal; a no-op otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> Any:
        if not self.enabled:
            return None
        from rich.progress import Progress

        self.bar = Progress(transient=True)
        self.bar.start()
        return self.update

    def update(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=total)
        self.bar.update(self.tasks[stage], completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
