"""Record-level sparse histogram: privhist against OpenDP, PipelineDP and the NumPy floor.

Data: ``--records`` (default 10**7) keys, Zipf(1.1) over ``--distinct`` (default 10**6) ids
1..distinct, generated once here and saved (``.npy`` and a zstd Parquet file with one ``key``
column) in a temporary folder. Every system releases a sparse histogram of the keys with
epsilon = 1, delta = 1e-8 under add/remove-one-record neighbours:

* ``privhist array``: ``StabilityHistogram.release(count_array(keys), SecureRandom())`` on the
  in-memory ``int64`` array (exact discrete Laplace noise, threshold from delta);
* ``privhist Parquet``: the same release from the Parquet file through the local engine
  (``count(path, key="key", key_type="int")``);
* ``numpy bincount``: ``np.bincount(keys)`` on the same array, the floor of any in-memory count;
* ``read + bincount``: reading the key column of the Parquet file with pyarrow and
  ``np.bincount`` on it, the floor of a count from the file;
* ``OpenDP``: ``make_count_by >> then_laplace_threshold`` (scale 1, privhist's threshold) fed the
  keys as a Python list (the list is built in the untimed setup, as its Python API takes it);
* ``PipelineDP``: ``DPEngine`` on the ``LocalBackend`` (COUNT, Laplace noise, one contribution
  per record) on the first ``--pipelinedp-records`` keys (default 10**6), as it runs record by
  record in Python; ratios compare time per record.

Each system runs in its own fresh process through the harness (``benchmarks/_harness.py``):
setup untimed, one untimed warm-up release on the first 10**4 keys (the same for every system;
``--full-warm-up``: on the whole input, as in a process that counts again), then one timed
release; ``--rounds`` (default 9) interleaved rounds in rotated order, the median of the
within-round ratios, the machine's load beside every figure. The goals: in memory at most 1.5x
``numpy.bincount``, at least 100x OpenDP and 1000x PipelineDP; from Parquet at most 2x the read of
the key column plus ``bincount``. The peak resident memory of the timed run is printed too (the
earlier goal: the array path within 3x the input array). Nine rounds by default: on a 2-core
virtual machine a 40 ms ``bincount`` run takes 30 to 60 ms from one fresh process to the next,
and one round's ratio ranged from 1.0x to 4.2x over 21 rounds.

Run: ``python benchmarks/bench_histogram.py`` (``--quick`` for 10**6 records). A peer that is not
installed (``pip install -e '.[bench]'``) is reported as not run, with no ratio.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from _harness import Goal, Ratio, Skip, System, add_arguments, compare, options

EPSILON, DELTA = 1.0, 1e-8
WARM = 10**4


def _keys(path: str) -> np.ndarray:
    return np.load(path)


def numpy_bincount(path: str) -> Callable[[], int]:
    keys = _keys(path)
    return lambda: int(np.bincount(keys).shape[0])


def read_bincount(parquet: str) -> Callable[[], int]:
    import pyarrow.parquet as pq

    def run() -> int:
        keys = pq.read_table(parquet, columns=["key"]).column("key").to_numpy()
        return int(np.bincount(keys).shape[0])

    return run


def privhist_array(path: str) -> Callable[[], int]:
    from privhist import SecureRandom
    from privhist.engines import count_array
    from privhist.mechanisms import StabilityHistogram

    keys = _keys(path)
    mech = StabilityHistogram(EPSILON, DELTA)
    return lambda: len(mech.release(count_array(keys), SecureRandom()))


def privhist_parquet(parquet: str) -> Callable[[], int]:
    from privhist import SecureRandom
    from privhist.engines import count
    from privhist.mechanisms import StabilityHistogram

    mech = StabilityHistogram(EPSILON, DELTA)

    def run() -> int:
        counts = count(parquet, key="key", key_type="int", progress=False)
        return len(mech.release(counts, SecureRandom()))

    return run


def opendp(path: str, threshold: int) -> Callable[[], int]:
    try:
        import opendp.prelude as dp
    except ImportError as exc:
        raise Skip("OpenDP is not installed (pip install -e '.[bench]')") from exc
    dp.enable_features("contrib")
    keys = _keys(path).tolist()
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()
    meas = (
        space
        >> dp.t.then_count_by(TV=int)
        >> dp.m.then_laplace_threshold(scale=1.0, threshold=threshold)
    )
    return lambda: len(meas(keys))


def pipelinedp(path: str, records: int) -> Callable[[], int]:
    try:
        import pipeline_dp
    except ImportError as exc:
        raise Skip("PipelineDP is not installed (pip install -e '.[bench]')") from exc
    rows = list(enumerate(_keys(path)[:records].tolist()))

    def run() -> int:
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        params = pipeline_dp.AggregateParams(
            noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            metrics=[pipeline_dp.Metrics.COUNT],
            max_partitions_contributed=1,
            max_contributions_per_partition=1,
        )
        extractors = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0],
            partition_extractor=lambda r: r[1],
            value_extractor=lambda r: 0,
        )
        result = engine.aggregate(rows, params, extractors)
        accountant.compute_budgets()
        return len(list(result))

    return run


def write_data(folder: Path, records: int, distinct: int) -> dict[str, str]:
    """The keys (``.npy`` and Parquet), and the warm-up's first 10**4 keys, in ``folder``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privhist.cli.demo import zipf_records

    keys = zipf_records(records, distinct, 1.1, seed=1)
    paths = {}
    for name, data in (("full", keys), ("warm", keys[:WARM])):
        npy, parquet = folder / f"{name}.npy", folder / f"{name}.parquet"
        np.save(npy, data)
        pq.write_table(pa.table({"key": data}), parquet, compression="zstd")
        paths[name], paths[name + "_parquet"] = str(npy), str(parquet)
    print(
        f"{records:,} records, Zipf(1.1) keys over {distinct:,} ids ({np.unique(keys).size:,} "
        f"distinct); epsilon = {EPSILON}, delta = {DELTA}"
    )
    return paths


def systems(
    paths: dict[str, str], records: int, pipelinedp_records: int, full_warm_up: bool = False
) -> list[System]:
    from privhist.mechanisms import StabilityHistogram

    threshold = StabilityHistogram(EPSILON, DELTA).threshold
    m = __name__ if __name__ != "__main__" else "bench_histogram"
    full, warm = paths["full"], paths["warm"]
    pq_full, pq_warm = paths["full_parquet"], paths["warm_parquet"]
    if full_warm_up:  # the warm-up is a whole untimed run (a process that counts again)
        warm, pq_warm = full, pq_full
    n_pdp = min(records, pipelinedp_records)
    return [
        System(
            "numpy bincount", f"{m}:numpy_bincount", {"path": full}, {"path": warm}, work=records
        ),
        System(
            "privhist array", f"{m}:privhist_array", {"path": full}, {"path": warm}, work=records
        ),
        System(
            "read + bincount",
            f"{m}:read_bincount",
            {"parquet": pq_full},
            {"parquet": pq_warm},
            work=records,
        ),
        System(
            "privhist Parquet",
            f"{m}:privhist_parquet",
            {"parquet": pq_full},
            {"parquet": pq_warm},
            work=records,
        ),
        System(
            "OpenDP count_by+laplace_threshold",
            f"{m}:opendp",
            {"path": full, "threshold": threshold},
            {"path": warm, "threshold": threshold},
            work=records,
        ),
        System(
            "PipelineDP LocalBackend",
            f"{m}:pipelinedp",
            {"path": full, "records": n_pdp},
            {"path": warm, "records": n_pdp if full_warm_up else WARM},
            work=n_pdp,
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--records", type=int, default=10**7)
    ap.add_argument("--distinct", type=int, default=10**6)
    ap.add_argument("--pipelinedp-records", type=int, default=10**6)
    ap.add_argument("--no-peers", action="store_true", help="privhist and the NumPy floors only")
    ap.add_argument("--quick", action="store_true", help="10**6 records, 10**5 for PipelineDP")
    ap.add_argument(
        "--full-warm-up",
        action="store_true",
        help="warm every system with one untimed run on the whole input (default: on the first "
        "10**4 keys); the timed run then reuses memory a first run had to fault in",
    )
    add_arguments(ap, rounds=9)
    args = ap.parse_args()
    if args.quick:
        args.records, args.distinct, args.pipelinedp_records = 10**6, 10**5, 10**5
    ours, bincount = "privhist array", "numpy bincount"
    pq_ours, pq_floor = "privhist Parquet", "read + bincount"
    odp, pdp = "OpenDP count_by+laplace_threshold", "PipelineDP LocalBackend"
    with tempfile.TemporaryDirectory(prefix="bench-histogram-") as tmp:
        paths = write_data(Path(tmp), args.records, args.distinct)
        chosen = systems(paths, args.records, args.pipelinedp_records, args.full_warm_up)
        if args.no_peers:
            chosen = [s for s in chosen if s.name not in (odp, pdp)]
        ratios = [
            Ratio(ours, bincount),
            Ratio(ours, bincount, "cpu"),
            Ratio(pq_ours, pq_floor),
            Ratio(pq_ours, pq_floor, "cpu"),
            Ratio(odp, ours),
            Ratio(odp, ours, "cpu"),
            Ratio(pdp, ours),
            Ratio(pdp, ours, "cpu"),
        ]
        names = {x.name for x in chosen}
        ratios = [r for r in ratios if r.num in names and r.den in names]
        goals = [
            Goal(
                "in memory: at most 1.5x numpy.bincount (wall)", Ratio(ours, bincount), at_most=1.5
            ),
            Goal(
                "from Parquet: at most 2x reading the key column + bincount (wall)",
                Ratio(pq_ours, pq_floor),
                at_most=2.0,
            ),
            Goal("in memory: at least 100x OpenDP (wall)", Ratio(odp, ours), at_least=100),
            Goal("in memory: at least 1000x PipelineDP (wall)", Ratio(pdp, ours), at_least=1000),
        ]
        goals = [g for g in goals if g.ratio is None or g.ratio in ratios]
        goals.append(
            Goal(
                "in memory: peak resident growth within 3x the key array",
                system=ours,
                metric="rss_growth",
                at_most=3 * 8 * args.records,
            )
        )
        compare(
            chosen,
            ratios=ratios,
            goals=goals,
            title=f"sparse histogram, {args.records:,} records",
            **options(args),
        )


if __name__ == "__main__":
    main()
