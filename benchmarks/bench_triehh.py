"""TrieHH++ on the Shakespeare tokens: calibration time, run time and recall of the true top words.

Usage: python benchmarks/bench_triehh.py [PATH] [--epsilon 1] [--delta 1e-8] [--levels 10]
Prints numbers; asserts nothing. Skips with a message when the data file is absent.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "shakespeare_pg100.txt.gz"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", nargs="?", default=str(DEFAULT))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-8)
    ap.add_argument("--levels", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    if not Path(args.path).exists():
        print(f"skipped: {args.path} not found")
        return 0

    from privhist.core.random import SeededRandom
    from privhist.engines.local.federated_data import read_population
    from privhist.federated.triehh import TrieHH, one_shot_heavy_hitters
    from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

    t0 = time.perf_counter()
    pop = read_population(args.path, format="text")
    t_read = time.perf_counter() - t0
    order = sorted(range(len(pop)), key=lambda i: -int(pop.counts[i]))
    t0 = time.perf_counter()
    hh = TrieHH(args.epsilon, args.delta, levels=args.levels)
    t_cal = time.perf_counter() - t0
    c = hh.composition
    print(f"clients {pop.size}, distinct words {len(pop)}; read {t_read:.2f} s")
    print(
        f"calibration {t_cal:.2f} s: per level eps {c.level.epsilon:.4g}, p "
        f"{float(c.sampling_rate):.4g}, tau {c.threshold}"
    )
    for name, b in (("basic", c.basic), ("advanced", c.advanced), ("pld", c.pld)):
        print(f"  {name:<9} {'n/a' if b is None else f'({b.epsilon:.4g}, {b.delta:.3g})'}")
    ks = (10, 50, 100, 500)
    runs, recalls = [], {k: [] for k in ks}
    shot = {k: [] for k in ks}
    one = SampleAndThreshold(args.epsilon, args.delta)
    for seed in range(args.seeds):
        t0 = time.perf_counter()
        res = hh.run(pop, SeededRandom(seed))
        runs.append(time.perf_counter() - t0)
        found = set(res.items.tolist())
        r1 = set(one_shot_heavy_hitters(pop, one, SeededRandom(seed)).keys.tolist())
        for k in ks:
            top = {pop.items[i] for i in order[:k]}
            recalls[k].append(len(top & found) / k)
            shot[k].append(len(top & r1) / k)
    print(
        f"run time per TrieHH++ run: mean {sum(runs) / len(runs):.3f} s, max {max(runs):.3f} s "
        f"(target <= 10 s); with calibration {t_cal + max(runs):.2f} s"
    )
    print(f"items found per run (last run): {len(found)}")
    for k in ks:
        mean = sum(recalls[k]) / len(recalls[k])
        m1 = sum(shot[k]) / len(shot[k])
        print(
            f"recall of the true top {k:>4}: TrieHH++ {mean:.3f}   one-shot (eps {args.epsilon:g}) "
            f"{m1:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
