"""``privhist demo``: generate Zipf data, release it with the default mechanism, compare."""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from privhist.cli.common import counted
from privhist.core.data import Counts
from privhist.io.release import Release
from privhist.session import Session

#: the demo generates its records in memory (8 bytes each, and as much again while drawing)
MAX_DEMO_RECORDS = 200_000_000


def zipf_records(records: int, distinct: int, exponent: float, seed: int) -> np.ndarray:
    """``records`` keys drawn i.i.d. with Pr[key = j] proportional to j**-exponent, j=1..distinct.

    This is synthetic *input data*, so it uses NumPy's seeded generator; release noise never does.
    """
    weights = np.arange(1, distinct + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    u = np.random.default_rng(seed).random(records)
    return (np.searchsorted(cdf, u, side="right") + 1).astype(np.int64)


def run_demo(
    *,
    records: int,
    distinct: int,
    exponent: float,
    epsilon: float,
    delta: float,
    top: int,
    data_seed: int,
) -> None:
    t0 = time.perf_counter()
    keys = zipf_records(records, distinct, exponent, data_seed)
    counts = Counts.from_records(keys)  # the true counts, for the comparison only
    release = Session().histogram(
        pl.DataFrame({"key": keys}), key="key", epsilon=epsilon, delta=delta
    )
    assert isinstance(release, Release)
    elapsed = time.perf_counter() - t0
    name = str(release.metadata["mechanism"])

    print(
        f"Generated {counted(records, 'record', spec=',')} with Zipf({exponent}) keys over "
        f"{counted(distinct, 'id', spec=',')} ({counted(len(counts), 'distinct key', spec=',')} "
        "present)."
    )
    print(f"Mechanism: {name} (the default for this request: `privhist plan {name} ...` shows why)")
    parameters = release.metadata.get("parameters", {})
    params = ", ".join(f"{k}={v}" for k, v in parameters.items() if k != "noise_scale")
    print(f"Parameters: {params}")
    print(f"Guarantee: {release.metadata['guarantee']['statement']}")
    print(f"Randomness: {release.metadata['randomness']['source']}")
    print()
    order = np.argsort(-counts.counts, kind="stable")[:top]
    has_ci = release.has_intervals
    header = f"{'key':>10} {'true count':>12} {'released':>10}"
    if has_ci:
        header += f" {'95% interval':>22}"
    print(header)
    for i in order:
        key = counts.keys[i]
        true = int(counts.counts[i])
        j = int(np.searchsorted(release.keys, key))
        if j < len(release) and release.keys[j] == key and release.values is not None:
            row = f"{key!s:>10} {true:>12,} {int(release.values[j]):>10,}"
            if has_ci and release.lower is not None and release.upper is not None:
                row += f"   [{release.lower[j]:>8,.0f}, {release.upper[j]:>8,.0f}]"
        else:
            row = f"{key!s:>10} {true:>12,} {'(withheld)':>10}"
        print(row)
    present = counts.counts > 0
    released_true = counts.counts[np.isin(counts.keys, release.keys)]
    print()
    print(
        f"Released {len(release):,} of {counted(int(present.sum()), 'key', spec=',')}, covering "
        f"{released_true.sum() / counts.counts.sum():.2%} of all records; "
        f"done in {elapsed:.2f} s."
    )
