"""Throughput of privhist's exact samplers, against OpenDP's integer Laplace on the same machine.

Both sides add exact discrete Laplace noise to a vector of integer zeros using the operating
system's CSPRNG (privhist: ``SecureRandom``; OpenDP: its own OS-seeded CSPRNG). OpenDP is timed
in both of its input forms (a list, or an int32 NumPy array) and, being about two orders of
magnitude slower, on a smaller ``n``; ratios compare time per sample. Each system runs in its own
fresh process through the harness (``benchmarks/_harness.py``): the input and the tables (built
once per scale and cached) made in the untimed setup and warm-up, then one timed call;
``--rounds`` interleaved rounds, the median of within-round ratios, the load beside each figure.
The other exact samplers are then timed in this process (privhist alone, best of a few calls).

Usage::

    python benchmarks/bench_samplers.py [--n 1000000] [--quick]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from _harness import Ratio, Skip, System, add_arguments, best_seconds, compare, options
from privhist.core.random import SecureRandom
from privhist.noise import binomial, discrete_gaussian, discrete_laplace, geometric

SCALES = (1, 10, 1000)


def best_rate(n: int, repeats: int, run: Callable[..., Any], *args: Any) -> float:
    """Samples per second of the fastest of ``repeats`` calls ``run(*args)``."""
    return n / best_seconds(lambda: run(*args), repeats)


def privhist_laplace(n: int, scale: int) -> Callable[[], int]:
    data = np.zeros(n, dtype=np.int64)
    rng = SecureRandom()
    discrete_laplace(scale, rng, 1)  # builds and caches the tables for this scale
    return lambda: int((data + discrete_laplace(scale, rng, n)).shape[0])


def opendp_laplace(n: int, scale: int, form: str) -> Callable[[], int]:
    """OpenDP's ``make_laplace`` on an integer vector given as a list or an int32 array."""
    try:
        import opendp.prelude as dp
    except ImportError as exc:
        raise Skip("OpenDP is not installed (pip install -e '.[bench]')") from exc
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=int))
    measurement = dp.m.make_laplace(domain, dp.l1_distance(T=int), scale=scale)
    data: Any = [0] * n if form == "list" else np.zeros(n, dtype=np.int32)
    try:
        measurement(data[:10])
    except (TypeError, ValueError) as exc:  # older OpenDP versions take lists only
        raise Skip(f"this OpenDP does not take a {form}: {exc}") from exc
    return lambda: len(measurement(data))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6, help="samples per timed run")
    parser.add_argument("--quick", action="store_true", help="fewer samples and repeats")
    add_arguments(parser, rounds=3)
    args = parser.parse_args(argv)
    n = 10**5 if args.quick else args.n
    repeats = 2 if args.quick else 3
    # OpenDP is about 100x slower: time it on fewer samples (the ratio is per sample)
    n_peer = min(n, 20_000 if args.quick else 200_000)
    rng = SecureRandom()
    m = "bench_samplers"
    for scale in SCALES:
        ours = f"privhist scale={scale}"
        peers = {form: f"OpenDP {form} scale={scale}" for form in ("list", "int32 array")}
        systems = [System(ours, f"{m}:privhist_laplace", {"n": n, "scale": scale}, work=n)]
        systems += [
            System(name, f"{m}:opendp_laplace", {"n": n_peer, "scale": scale, "form": form},
                   work=n_peer)
            for form, name in peers.items()
        ]  # fmt: skip
        ratios = [Ratio(p, ours, metric) for p in peers.values() for metric in ("wall", "cpu")]
        compare(
            systems,
            ratios=ratios,
            title=f"exact discrete Laplace, scale {scale}, SecureRandom, n = {n:,} "
            f"(OpenDP: n = {n_peer:,})",
            **options(args),
        )

    print("\nother exact samplers (privhist, SecureRandom)")
    trials = np.full(1000, 1000, dtype=np.int64)
    third = Fraction(1, 3)
    others: list[tuple[str, int, Callable[..., Any], tuple[Any, ...]]] = [
        ("geometric x=1/10", n, geometric, (Fraction(1, 10), rng, n)),
        ("discrete_laplace scale=10**6", n, discrete_laplace, (10**6, rng, n)),
        ("discrete_gaussian sigma2=10", n, discrete_gaussian, (10, rng, n)),
        ("discrete_gaussian sigma2=10**6", n, discrete_gaussian, (10**6, rng, n)),
        ("discrete_gaussian sigma2=10**10", n, discrete_gaussian, (10**10, rng, n)),
        ("binomial n=1000 p=1/3 (trials/s)", 10**6, binomial, (trials, third, rng)),
    ]
    for name, count, run, run_args in others:
        run(*run_args)  # tables
        rate = best_rate(count, repeats, run, *run_args)
        print(f"  {name:<34} {rate:>14,.0f} /s")


if __name__ == "__main__":
    main()
