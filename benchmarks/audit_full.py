"""The full audit: broken variants at N = 10**6, every registered mechanism, and the peers.

1. The four broken variants of :func:`privhist.audit.variants.broken_variants` (threshold - 3,
   scale x 0.5, floating-point Laplace, data-dependent threshold), each claiming (1, 1e-3)
   ((1, 0) for the float Laplace), audited statistically at N = 10**6 per side: caught or not,
   lower bounds, seconds.
   Then ``threshold - 3`` at (1, 1e-6), where its delta (1.2e-5) is below what 10**6 draws resolve:
   the exact audit against the statistical one.
2. Every registered privhist mechanism (each of its test instances, and ``stability`` at
   (1, 1e-6)): the exact audit, and the statistical audit at N = 10**6 per side (vectorised) or
   at ``--looped`` samples for the mechanisms released once per sample; ``compact`` has no rows
   to sample and gets the exact audit only, ``pure-sparse`` the statistical one only.
3. The peers report (``privhist audit peers``) at ``--peer-samples`` per side, written to
   ``--output`` (markdown and plots), with outputs per second against privhist's vectorised
   sampler in the same run.

Run: ``python benchmarks/audit_full.py [--samples 1000000] [--output DIR]`` (the peers need
``pip install -e '.[bench]'``; a missing peer is skipped with a note). Minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import privhist.mechanisms  # noqa: F401  (registers the built-in mechanisms)
from privhist.audit import MechanismSampler, audit_statistical, broken_variants
from privhist.audit.exact import audit_exact
from privhist.audit.report import peers_report
from privhist.audit.sampling import single_key_pair
from privhist.audit.variants import with_parameters
from privhist.core.errors import UnsupportedError
from privhist.mechanisms import StabilityHistogram, registry


def _broken(samples: int) -> None:
    print(f"\n== broken variants, N = {samples} per side ==")
    for b in broken_variants():
        pairs = None if b.mechanism is not None else [single_key_pair(0, 1), single_key_pair(3, 4)]
        t0 = time.perf_counter()
        r = audit_statistical(
            b.sampler, b.epsilon, b.delta, samples=samples, mechanism=b.mechanism, pairs=pairs
        )
        secs = time.perf_counter() - t0
        print(
            f"{b.name:<26} {'CAUGHT' if r.violation else 'missed':<7} {secs:6.1f} s  "
            f"eps_lb {r.result.epsilon_lower:7.3f}  delta_lb {r.result.delta_lower:.3g}  "
            f"claim ({b.epsilon:g}, {b.delta:g})  pair {r.pair.note}  [{b.why}]"
        )


def _small_delta(samples: int) -> None:
    """threshold - 3 at (1, 1e-6): the exact audit sees delta 1.2e-5; can N draws?"""
    print(f"\n== threshold - 3 at (1, 1e-6): exact vs statistical at N = {samples} ==")
    base = StabilityHistogram(1.0, 1e-6)
    bad = with_parameters(base, threshold=base.threshold - 3)
    ex = audit_exact(bad, profile_points=0)
    print(f"exact        {ex.verdict()}")
    r = audit_statistical(MechanismSampler(bad), 1.0, 1e-6, samples=samples, mechanism=bad)
    print(f"statistical  {r.verdict()}")


def _registered(samples: int, looped: int) -> float:
    print(f"\n== registered mechanisms: exact audit; statistical at N = {samples} (vectorised) ==")
    instances = [
        (n, i, m)
        for n, c in sorted(registry.registry().items())
        for i, m in enumerate(c.test_instances())
    ]
    instances.append(("stability", 99, StabilityHistogram(1.0, 1e-6)))
    best_rate = 0.0
    for name, i, m in instances:
        g = m.guarantee()
        label = f"{name}-{i}" if i != 99 else f"{name} (1, 1e-6)"
        try:
            ex = audit_exact(m, profile_points=0)
            exact = (
                f"exact {'VIOLATION' if ex.violation else 'holds'} (delta {ex.delta_needed:.3g})"
            )
        except UnsupportedError:
            exact = "exact: n/a"
        try:
            sampler = MechanismSampler(m)
        except UnsupportedError:
            print(f"{label:<26} ({g.epsilon:.3g}, {g.delta:.3g})  {exact}  statistical: no rows")
            continue
        n = samples if sampler.vectorised else looped
        t0 = time.perf_counter()
        r = audit_statistical(sampler, g.epsilon, g.delta, samples=n, mechanism=m)
        secs = time.perf_counter() - t0
        rate = 2 * n / r.draw_seconds
        if sampler.vectorised:
            best_rate = max(best_rate, rate)
        print(
            f"{label:<26} ({g.epsilon:.3g}, {g.delta:.3g})  {exact}  statistical "
            f"{'VIOLATION' if r.violation else 'pass'} N={n} eps_lb {r.result.epsilon_lower:.3f} "
            f"delta_lb {r.result.delta_lower:.3g} res {r.result.resolution:.2g}  {secs:5.1f} s  "
            f"{rate:,.0f} outputs/s{'' if sampler.vectorised else ' (one release per sample)'}"
        )
    return best_rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--looped", type=int, default=20_000, help="N for looped mechanisms")
    ap.add_argument("--peer-samples", type=int, default=50_000)
    ap.add_argument("--output", default="/tmp/privhist-audit-peers")
    ap.add_argument(
        "--skip", nargs="*", default=[], choices=["broken", "small-delta", "registered", "peers"]
    )
    args = ap.parse_args()
    if "broken" not in args.skip:
        _broken(args.samples)
    if "small-delta" not in args.skip:
        _small_delta(args.samples)
    rate = math.nan
    if "registered" not in args.skip:
        rate = _registered(args.samples, args.looped)
    if "peers" not in args.skip:
        print(f"\n== peers, N = {args.peer_samples} per side ==")
        t0 = time.perf_counter()
        path, failures = peers_report(Path(args.output), samples=args.peer_samples)
        print(f"report: {path} ({time.perf_counter() - t0:.0f} s)")
        print(path.read_text(encoding="utf-8").split("## Plots")[0])
        if math.isfinite(rate):
            print(f"privhist vectorised sampler: up to {rate:,.0f} outputs/s in this run")
        for f in failures:
            print("peer:", f)


if __name__ == "__main__":
    main()
