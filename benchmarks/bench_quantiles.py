"""Accuracy of sample-and-threshold quantiles and range counts: the budget split by certified
PLD composition (the default) against the paper's even split (Lemma 4.1), on the same data.

Bharadwaj & Cormode (AISTATS 2022), Section 4.2: a hierarchical release is ``L`` sample-and-
threshold histograms, one per level; a binary search is ``h`` two-bucket releases per quantile.
The even split gives each release ``epsilon / L``; the default gives each the largest epsilon
whose certified PLD composition stays within ``(epsilon, delta)``
(:func:`privhist.analytics.hierarchy.split_sample_and_threshold`). Both state their guarantee
(printed), and both are within the budget.

Data: values generated here (log-normal, ``--rows`` each of ``--sizes``, in ``[0, 1000)``); and
``adult.data``'s ``age`` in ``[0, 128)`` when ``--data`` holds it (skipped otherwise). For each
size, method and split, ``--runs`` seeded releases (seeds 0..runs-1; the seed only fixes the
randomness for the comparison, it is not a private release) answer the quantiles 0.1, 0.25, 0.5,
0.75, 0.9 and 0.99 and the range counts of ten fixed ranges. Printed per configuration: the
per-release epsilon, the sampling rate and threshold, the guarantee, the mean true rank error
of the quantile answers (``|F(answer) - q|``, ``F`` the empirical distribution), the mean
stated pruning rank error, and the mean relative error of the range counts.

Run: ``python benchmarks/bench_quantiles.py`` (about a minute), ``--quick`` (seconds).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from privhist import Session

LEVELS_Q = [0.1, 0.25, 0.5, 0.75, 0.9, 0.99]


def generated(n: int, seed: int = 30) -> np.ndarray:
    g = np.random.default_rng(seed)
    return np.clip(g.lognormal(4.0, 1.0, n), 0, 999.999)


def adult_ages(data: Path) -> np.ndarray | None:
    path = data / "adult.data"
    if not path.is_file():
        return None
    table = pl.read_csv(path, has_header=False, truncate_ragged_lines=True)
    return table.get_column(table.columns[0]).cast(pl.Float64).drop_nulls().to_numpy()


def ranges(hi: float) -> list[tuple[float, float]]:
    cuts = np.linspace(0, hi, 11)
    return [(float(a), float(b)) for a, b in itertools.pairwise(cuts)]


def one(
    values: np.ndarray, hi: float, method: str, split: str, args: argparse.Namespace
) -> dict[str, Any]:
    df = pl.DataFrame({"x": values})
    x = np.sort(values)
    common = {
        "column": "x",
        "lower": 0,
        "upper": hi,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "levels": args.levels,
        "composition": split,
    }
    rank, pruning, rel = [], [], []
    meta: dict[str, Any] = {}
    for seed in range(args.runs):
        q = Session().quantiles(df, q=LEVELS_Q, method=method, seed=seed, **common)
        meta = q.metadata
        for row in q.to_polars().iter_rows(named=True):
            f = np.searchsorted(x, row["value"], side="left") / x.size
            rank.append(abs(f - row["q"]))
            pruning.append(row["pruning_rank_error"])
        if method == "hierarchical":
            r = Session().range_counts(df, queries=ranges(hi), seed=seed, **common)
            for row in r.to_polars().iter_rows(named=True):
                true = int(((x >= row["from"]) & (x < row["to"])).sum())
                rel.append(abs(row["estimate"] - true) / max(true, 1))
    p = meta["parameters"]
    per = p.get("epsilon_per_level", p.get("epsilon_per_release"))
    g = meta["guarantee"]
    return {
        "per_release": per,
        "rate": p["sampling_rate"],
        "threshold": p["threshold"],
        "guarantee": f"({g['epsilon']:.3g}, {g['delta']:.2g})",
        "rank": statistics.fmean(rank),
        "pruning": statistics.fmean(pruning),
        "range": statistics.fmean(rel) if rel else None,
    }


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="generated sizes")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-8)
    ap.add_argument("--levels", type=int, default=8)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="10^4 values, 2 runs")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.runs = "10000", 2
    sets: list[tuple[str, np.ndarray, float]] = [
        (f"generated n={int(n):,}", generated(int(n)), 1000.0) for n in args.sizes.split(",")
    ]
    ages = None if args.quick else adult_ages(Path(args.data))
    if ages is None and not args.quick:
        print(f"adult.data not under {args.data}: skipped", file=sys.stderr)
    elif ages is not None:
        sets.append((f"adult age n={ages.size:,}", ages, 128.0))
    print(
        f"epsilon {args.epsilon:g}, delta {args.delta:g}, levels/rounds {args.levels}, "
        f"{args.runs} seeded runs each"
    )
    head = (
        f"{'data':<24} {'method':<13} {'split':<6} {'eps/rel':>8} {'rate':>7} {'tau':>4} "
        f"{'guarantee':>16} {'rank err':>9} {'pruning':>8} {'range rel':>9}"
    )
    print(head)
    rows = []
    for name, values, hi in sets:
        for method in ("hierarchical", "binary-search"):
            out = {}
            for split in ("pld", "basic"):
                t = time.perf_counter()
                r = one(values, hi, method, split, args)
                r["seconds"] = time.perf_counter() - t
                out[split] = r
                rng = "-" if r["range"] is None else f"{r['range']:.4f}"
                print(
                    f"{name:<24} {method:<13} {split:<6} {r['per_release']:>8.4f} "
                    f"{r['rate']:>7.4f} {r['threshold']:>4} {r['guarantee']:>16} "
                    f"{r['rank']:>9.4f} {r['pruning']:>8.4f} {rng:>9}"
                )
            ratio = out["basic"]["rank"] / max(out["pld"]["rank"], 1e-12)
            print(f"{'':<24} {method:<13} rank error, even split over PLD split: {ratio:.2f}x")
            rows.append({"data": name, "method": method, **out})
    return rows


if __name__ == "__main__":
    main()
