"""Exact binomial noise: rejection-sampled Binomial(m, 1/2) against the popcount path.

``privhist.noise.binomial`` splits ``p`` into binary digits and draws one Binomial(m, 1/2) per
digit: by popcount of ``m`` random bits (``binomial_popcount``, linear in ``m``) or, from 2048
trials on, by rejection in O(1) expected words (``binomial``). Printed, for the seeded and the
secure source:

1. Binomial(m, 1/2) alone: draws per second and random 64-bit words per draw, for several m;
2. the release workloads: Binomial(10**6, q) for 2**14 buckets (shuffle-model noise) and
   Binomial(6 * 10**4, p) for 2**14 keys, time of each path and the ratio.

The popcount path on 10**6 trials with the secure source takes about a minute for 2**14
buckets, so by default it runs on ``--old-buckets`` buckets and its time for 2**14 is scaled
up linearly (marked ``*``; its cost is exactly linear in the number of buckets); ``--full``
runs it on all of them.

Usage::

    python benchmarks/bench_binomial.py [--buckets 16384] [--old-buckets 1024] [--full]
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Any

import numpy as np

from _harness import best_seconds as timed
from privhist.core.random import RandomSource, SecureRandom, SeededRandom
from privhist.noise.binomial import (
    binomial,
    binomial_half,
    binomial_half_popcount,
    binomial_popcount,
)


class CountingRandom(RandomSource):
    """Counts the 64-bit words drawn from another source."""

    def __init__(self, inner: RandomSource) -> None:
        self.inner = inner
        self.words = 0

    def uint64(self, n: int) -> Any:
        self.words += max(n, 0)
        return self.inner.uint64(n)

    @property
    def description(self) -> str:
        return f"counting({self.inner.description})"


def half_section(rng: RandomSource, name: str, draws: int) -> None:
    print(f"\nBinomial(m, 1/2) x {draws} draws, {name}")
    print(f"{'m':>22} {'rejection draws/s':>18} {'words/draw':>11} {'popcount draws/s':>17}")
    for m in (2048, 4096, 65_536, 10**6, 10**9, 2**62):
        trials = np.full(draws, m, dtype=np.int64)
        counter = CountingRandom(rng)
        binomial_half(trials, counter)
        words = counter.words / draws
        new = draws / timed(lambda t=trials: binomial_half(t, rng), 3)
        if m <= 10**6:
            few = trials[: max(1, draws * 4096 // m)]
            old = f"{few.size / timed(lambda f=few: binomial_half_popcount(f, rng), 2):17,.0f}"
        else:
            old = f"{'(skipped)':>17}"
        print(f"{m:>22} {new:18,.0f} {words:11.2f} {old}")


def workload(
    rng: RandomSource, name: str, n: int, p: Fraction, buckets: int, old_buckets: int
) -> None:
    trials = np.full(buckets, n, dtype=np.int64)
    counter = CountingRandom(rng)
    new = timed(lambda: binomial(trials, p, counter), 1)
    new_words = counter.words / buckets
    few = trials[:old_buckets]
    counter = CountingRandom(rng)
    old = timed(lambda: binomial_popcount(few, p, counter), 1) * buckets / old_buckets
    old_words = counter.words / old_buckets
    mark = "*" if old_buckets < buckets else " "
    print(
        f"{name:<13} Binomial({n}, {p}) x {buckets}: binomial {new:8.3f} s "
        f"({new_words:8.1f} words/bucket)  popcount {old:8.2f} s{mark} "
        f"({old_words:9.0f} words/bucket)  speed-up {old / new:7.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, default=1 << 14)
    parser.add_argument("--old-buckets", type=int, default=1 << 10)
    parser.add_argument("--full", action="store_true", help="run the popcount path on all")
    parser.add_argument("--draws", type=int, default=1 << 14)
    args = parser.parse_args()
    old_buckets = args.buckets if args.full else min(args.old_buckets, args.buckets)
    sources: list[tuple[str, RandomSource]] = [
        ("SeededRandom", SeededRandom(2024)),
        ("SecureRandom", SecureRandom()),
    ]
    for name, rng in sources:
        half_section(rng, name, args.draws)
    print("\nrelease workloads (* = popcount time scaled from --old-buckets buckets)")
    for name, rng in sources:
        workload(rng, name, 10**6, Fraction(1, 3), args.buckets, old_buckets)
        workload(rng, name, 10**6, Fraction(3, 1000), args.buckets, old_buckets)
        workload(rng, name, 6 * 10**4, Fraction(1, 3), args.buckets, old_buckets)


if __name__ == "__main__":
    main()
