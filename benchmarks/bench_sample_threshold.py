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

Each system runs in its own fresh process through the harness (``benchmarks/_harness.py``):
the mechanism built and the counts made in the untimed setup, one untimed warm-up release on
the same counts, then one timed release; ``--rounds`` interleaved rounds in rotated order;
ratios are the median of the within-round ratios of the peer's time over privhist's, with the
machine's load beside every figure. ``--figures`` also times the full reproduction of Figures 1
and 2 (``privhist experiment sample-threshold``, minutes; target <= 5 minutes on 2 cores), as a
command in its own process. Run: ``python benchmarks/bench_sample_threshold.py``
(``pip install -e '.[bench]'`` for the peers; a missing peer is reported as not run, with no
ratio).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from _harness import Goal, Ratio, Skip, System, add_arguments, compare, options

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


def opendp_threshold() -> int:
    """The smallest threshold whose OpenDP privacy map gives delta <= 1e-8 when one key's count
    changes by one (the map of ``(l0, l1, linf) = (1, 1, 1)``), by bisection."""
    lo, hi = 1, 200
    while lo < hi:
        mid = (lo + hi) // 2
        eps, delta = _opendp_measurement(mid).map((1, 1, 1))
        if eps <= EPSILON and delta <= DELTA:
            hi = mid
        else:
            lo = mid + 1
    return lo


def privhist(n: int) -> Callable[[], int]:
    from privhist import SecureRandom
    from privhist.core.data import Counts
    from privhist.mechanisms.sampling import SampleAndThreshold

    mech = SampleAndThreshold(EPSILON, DELTA)
    counts = Counts.from_arrays(np.arange(BUCKETS), geometric_counts(n))
    rng = SecureRandom()
    return lambda: len(mech.release(counts, rng))


def opendp(n: int) -> Callable[[], int]:
    try:
        import opendp.prelude  # noqa: F401
    except ImportError as exc:
        raise Skip("OpenDP is not installed (pip install -e '.[bench]')") from exc
    meas = _opendp_measurement(opendp_threshold())
    as_dict = {i: int(c) for i, c in enumerate(geometric_counts(n).tolist())}
    return lambda: len(meas(as_dict))


def pipelinedp(n: int) -> Callable[[], int]:
    try:
        from pipeline_dp import dp_computations
        from pipeline_dp.aggregate_params import PartitionSelectionStrategy
        from pipeline_dp.partition_selection import create_partition_selection_strategy
    except ImportError as exc:
        raise Skip("PipelineDP is not installed (pip install -e '.[bench]')") from exc
    counts = geometric_counts(n).tolist()

    def run() -> int:
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

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument(
        "--figures", action="store_true", help="also time the full Figure 1 + 2 reproduction"
    )
    add_arguments(ap, rounds=5)
    args = ap.parse_args()
    from privhist.mechanisms.sampling import SampleAndThreshold

    mech = SampleAndThreshold(EPSILON, DELTA)
    print(
        f"SampleAndThreshold(eps={EPSILON}, delta={DELTA}): p = {float(mech.sampling_rate):.5f}, "
        f"tau = {mech.threshold}; {BUCKETS} keys"
    )
    m = "bench_sample_threshold"
    for n, target in ((10**6, 0.05), (10**9, 1.0)):
        names = {
            "ours": f"privhist n={n:.0e}",
            "odp": f"OpenDP n={n:.0e}",
            "pdp": f"PipelineDP n={n:.0e}",
        }
        systems = [
            System(names["ours"], f"{m}:privhist", {"n": n}, {"n": n}),
            System(names["odp"], f"{m}:opendp", {"n": n}, {"n": n}),
            System(names["pdp"], f"{m}:pipelinedp", {"n": n}, {"n": n}),
        ]
        ratios = [
            Ratio(names["pdp"], names["ours"]),
            Ratio(names["pdp"], names["ours"], "cpu"),
            Ratio(names["odp"], names["ours"]),
            Ratio(names["odp"], names["ours"], "cpu"),
        ]
        goals = [
            Goal(
                f"privhist release at n = {n:.0e} within {target * 1e3:g} ms (wall)",
                system=names["ours"],
                at_most=target,
            ),
            Goal(
                f"PipelineDP / privhist at n = {n:.0e} at least 1 (wall)",
                Ratio(names["pdp"], names["ours"]),
                at_least=1.0,
            ),
        ]
        compare(
            systems,
            ratios=ratios,
            goals=goals,
            title=f"sample-and-threshold release, n = {n:.0e} clients",
            **options(args),
        )
    if args.figures:
        with tempfile.TemporaryDirectory() as out:
            command = [
                sys.executable,
                "-m",
                "privhist",
                "experiment",
                "sample-threshold",
                "--output-dir",
                out,
                "--no-progress",
            ]
            fig = System("Figures 1 + 2 reproduction", command=command)
            compare(
                [fig],
                rounds=1,
                title="Figures 1 + 2 reproduction (10 reps, 2 workers)",
                goals=[Goal("within 300 s (wall)", system=fig.name, at_most=300.0)],
            )


if __name__ == "__main__":
    main()
