"""Throughput of the finite-computer counting samplers: GeoSample (Theorem 4.5) and FastSample
(Theorem 4.6), for n = 10**3 and 10**6 and eps = 1 and 0.1.

Each sampler releases one count per entry of a vector of true counts (``n // 2``), with
randomness from ``SecureRandom``. Two modes:

* default — the vectorised path: one 64-bit word per draw (lazy top word of ``u``, exact 64-bit
  floors); FastSample adds an exact gamma coin;
* strict — ``strict=True``: ``u`` drawn in full from ``[1, d]`` and every loop run to its public
  bound (``Õ(n log(1/eps))`` per GeoSample draw, ``Õ((1/eps) log n log(n/gamma))`` per FastSample
  draw). Strict GeoSample at ``n = 10**6`` takes seconds per draw; it is timed on a few draws.

As a reference on the same machine, the library's exact (unbounded) discrete Laplace sampler at
the same scale ``2/eps~`` is timed too, and ratios against it are printed. Set-up (forming ``d``,
the 64-bit table; cached per parameter) is reported separately and excluded from the rates.

Usage::

    python benchmarks/bench_finite.py [--draws 1000000] [--gamma 1e-9] [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np

from privhist.core.random import SecureRandom
from privhist.mechanisms.finite import CountingSampler, FastSample, GeoSample
from privhist.noise import discrete_laplace, rational_at_least


def rate(draws: int, run: Callable[[int], Any], budget: float, repeats: int = 3) -> float:
    """Draws per second: best of ``repeats`` timed calls of ``run(draws)``, fewer draws when a
    single call would exceed ``budget`` seconds."""
    start = time.perf_counter()
    run(1)
    one = time.perf_counter() - start
    size = max(1, min(draws, int(budget / max(one, 1e-9))))
    best = float("inf")
    for _ in range(repeats if size > 1 else 1):
        start = time.perf_counter()
        run(size)
        best = min(best, time.perf_counter() - start)
    return size / best


def laplace_draws(counts: Any, scale: Fraction, n: int, rng: SecureRandom, m: int) -> Any:
    """The unbounded exact discrete Laplace sampler, clamped to [0, n] afterwards."""
    return np.clip(counts[:m] + discrete_laplace(scale, rng, m), 0, n)


def sampler_draws(
    sampler: CountingSampler, counts: Any, rng: SecureRandom, strict: bool, m: int
) -> Any:
    return sampler.sample(counts[:m], rng, strict=strict)


def setup_seconds(sampler: CountingSampler, rng: SecureRandom) -> float:
    start = time.perf_counter()
    sampler.sample(np.array([0]), rng)  # forms d and the table (cached)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1_000_000, help="draws per timed call")
    ap.add_argument("--gamma", type=str, default="1e-9", help="FastSample's mixing probability")
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per strict measurement")
    ap.add_argument("--quick", action="store_true", help="fewer draws (100000)")
    args = ap.parse_args()
    draws = 100_000 if args.quick else args.draws
    rng = SecureRandom()
    print(f"draws per second (SecureRandom), {draws} draws per timed call\n")
    head = (
        f"{'n':>8} {'eps':>5} {'K':>2} {'sampler':<10} {'d bits':>9} {'setup s':>8} "
        f"{'default/s':>12} {'strict/s':>10} {'vs Laplace':>10}"
    )
    print(head)
    print("-" * len(head))
    for n in (10**3, 10**6):
        for eps in (1.0, 0.1):
            geo = GeoSample(n, eps)
            fast = FastSample(n, eps, args.gamma)
            scale = rational_at_least(Fraction(2) / Fraction(geo.epsilon_tilde), 1 << 20)
            counts = np.full(draws, n // 2, dtype=np.int64)
            lap = rate(draws, partial(laplace_draws, counts, scale, n, rng), args.budget)
            for name, sampler in (("GeoSample", geo), ("FastSample", fast)):
                setup = setup_seconds(sampler, rng)
                default = rate(
                    draws, partial(sampler_draws, sampler, counts, rng, False), args.budget
                )
                strict = rate(
                    draws,
                    partial(sampler_draws, sampler, counts, rng, True),
                    args.budget,
                    repeats=1,
                )
                bits = sampler.denominator.bit_length()
                print(
                    f"{n:>8} {eps:>5g} {sampler.k:>2} {name:<10} {bits:>9} {setup:>8.3f} "
                    f"{default:>12,.0f} {strict:>10,.1f} {default / lap:>10.2f}"
                )
            print(f"{'':>8} {'':>5} {'':>2} {'Laplace':<10} {'':>9} {'':>8} {lap:>12,.0f}")
    print(
        "\nd bits: bit length of the common denominator (FastSample: b (n+1) d_t with "
        f"gamma = {args.gamma}); vs Laplace: default rate over the exact discrete Laplace "
        "sampler's at scale 2/eps~."
    )


if __name__ == "__main__":
    main()
