"""Sample-and-threshold release speed, against OpenDP and PipelineDP on the same counts.

One release of :class:`privhist.mechanisms.sampling.SampleAndThreshold` (epsilon = 1,
delta = 1e-8, alpha = 1/6: rate 0.105, exact threshold) through the public API
(``release(Counts, SecureRandom())``) on aggregated counts over ``B = 2**14`` keys whose counts are
the expected Geometric(1/sqrt(B)) histogram of ``n`` clients (the data of the paper's Figure 1),
for ``n = 10**6`` (target <= 50 ms) and ``n = 10**9`` (target <= 1 s). The cost is the exact
binomial draw of every key with at least ``tau`` units (a key with fewer is released with
probability exactly 0 and is not drawn: one rejection loop around the mode for the keys whose
mode is at least 256, binary digits of ``p`` for the others), plus the selection-adjusted
intervals of the released keys (one tail evaluation per bound where the normal-approximation
guess or the count after it is the answer, a search otherwise). The goal is a ratio
PipelineDP / privhist of at least 1 at both sizes.

Peers on the same per-key counts, each doing what sample-and-threshold does (choose the keys to
release, release a count for them) at epsilon = 1, delta = 1e-8:

* OpenDP ``make_laplace_threshold`` on the hashmap key -> count (Laplace noise and a threshold,
  the ``l01inf`` metric with one key changed by one);
* PipelineDP's truncated-geometric partition selection (``should_keep`` per key, the optimal
  selection of Desfontaines et al.) at (eps / 2, delta) plus its Laplace count noise
  (``apply_laplace_mechanism``, eps / 2) for the kept keys.

Ratios are the peer's time over privhist's. ``--figures`` also times the full reproduction of
Figures 1 and 2 (``privhist experiment sample-threshold``, minutes; target <= 5 minutes on 2
cores). Run: ``python benchmarks/bench_sample_threshold.py`` (``pip install -e '.[bench]'`` for
the peers; a missing peer is skipped with a note).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from _timing import best_of
from privhist import SecureRandom
from privhist.core.data import Counts
from privhist.mechanisms.sampling import SampleAndThreshold

EPSILON, DELTA = 1.0, 1e-8
BUCKETS = 2**14


def geometric_counts(n: int, buckets: int = BUCKETS) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Expected counts of ``n`` clients drawing Geometric(1/sqrt(B)) buckets (truncated)."""
    p = 1 / math.sqrt(buckets)
    pmf = (1 - p) ** np.arange(buckets) * p
    return np.maximum(np.round(n * pmf / pmf.sum()), 1).astype(np.int64)


def _opendp_measurement(threshold: int) -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.map_domain(dp.atom_domain(T=dp.i64), dp.atom_domain(T=dp.i64))
    metric = dp.l01inf_distance(dp.absolute_distance(T=dp.i64))
    return dp.m.make_laplace_threshold(domain, metric, scale=1.0 / EPSILON, threshold=threshold)


def opendp_release(counts: dict[int, int], threshold: int) -> int | None:
    try:
        meas = _opendp_measurement(threshold)
    except ImportError:
        return None
    return len(meas(counts))


def opendp_threshold() -> int | None:
    """The smallest threshold whose OpenDP privacy map gives delta <= 1e-8 when one key's count
    changes by one (the map of ``(l0, l1, linf) = (1, 1, 1)``), by bisection."""
    try:
        _opendp_measurement(10)
    except ImportError:
        return None
    lo, hi = 1, 200
    while lo < hi:
        mid = (lo + hi) // 2
        eps, delta = _opendp_measurement(mid).map((1, 1, 1))
        if eps <= EPSILON and delta <= DELTA:
            hi = mid
        else:
            lo = mid + 1
    return lo


def pipelinedp_release(counts: list[int]) -> int | None:
    try:
        from pipeline_dp import dp_computations
        from pipeline_dp.aggregate_params import PartitionSelectionStrategy
        from pipeline_dp.partition_selection import create_partition_selection_strategy
    except ImportError:
        return None
    # half the budget for selection, half for the counts (basic composition)
    strategy = create_partition_selection_strategy(
        PartitionSelectionStrategy.TRUNCATED_GEOMETRIC, EPSILON / 2, DELTA, 1
    )
    kept = 0
    for c in counts:
        if strategy.should_keep(c):
            dp_computations.apply_laplace_mechanism(c, EPSILON / 2, 1.0)
            kept += 1
    return kept


def figures_seconds() -> float:
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "privhist",
                "experiment",
                "sample-threshold",
                "--output-dir",
                out,
                "--no-progress",
            ],
            check=True,
        )
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--repeat", type=int, default=5, help="best of this many runs (default 5)")
    ap.add_argument(
        "--figures", action="store_true", help="also time the full Figure 1 + 2 reproduction"
    )
    args = ap.parse_args()

    t0 = time.perf_counter()
    mech = SampleAndThreshold(EPSILON, DELTA)
    t_cal = time.perf_counter() - t0
    print(
        f"SampleAndThreshold(eps={EPSILON}, delta={DELTA}): p = {float(mech.sampling_rate):.5f}, "
        f"tau = {mech.threshold} (exact calibration {t_cal * 1e3:.0f} ms, once per parameters)"
    )
    rng = SecureRandom()
    for n, target in ((10**6, 0.05), (10**9, 1.0)):
        raw = geometric_counts(n)
        counts = Counts.from_arrays(np.arange(BUCKETS), raw)
        t, rel = best_of(lambda c=counts: mech.release(c, rng), args.repeat, collect=True)
        print(
            f"\nn = {int(raw.sum()):.3g} clients over B = {BUCKETS} keys: privhist release "
            f"{t * 1e3:.1f} ms (target {target * 1e3:.0f} ms: "
            f"{'met' if t <= target else 'MISSED'}), {len(rel)} keys released"
        )
        as_dict = {i: int(c) for i, c in enumerate(raw.tolist())}
        thr = opendp_threshold() or 0
        t_o, out_o = best_of(
            lambda d=as_dict, h=thr: opendp_release(d, h), max(1, args.repeat // 2), collect=True
        )
        if out_o is None:
            print("  OpenDP: not installed (pip install -e '.[bench]')")
        else:
            print(
                f"  OpenDP make_laplace_threshold (scale 1, threshold {thr}): {t_o * 1e3:.1f} ms, "
                f"{out_o} keys; ratio OpenDP / privhist = {t_o / t:.2f}"
            )
        as_list = raw.tolist()
        t_p, out_p = best_of(
            lambda c=as_list: pipelinedp_release(c), max(1, args.repeat // 2), collect=True
        )
        if out_p is None:
            print("  PipelineDP: not installed (pip install -e '.[bench]')")
        else:
            print(
                f"  PipelineDP truncated-geometric selection + Laplace counts: {t_p * 1e3:.1f} ms,"
                f" {out_p} keys; ratio PipelineDP / privhist = {t_p / t:.2f}"
            )
    if args.figures:
        secs = figures_seconds()
        print(
            f"\nFigures 1 + 2 reproduction (10 reps, 2 workers): {secs:.1f} s "
            f"(target 300 s: {'met' if secs <= 300 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
