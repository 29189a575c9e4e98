"""Client-encode and server-decode time of the three sample-and-threshold baselines, and their
calibrations at the paper's experiment sizes.

For ``n = 10**6`` clients (items uniform over the domain) and ``B = 2**10``, ``2**14`` buckets,
at ``eps = 1``, ``delta = 1e-8``, with randomness from ``SecureRandom``:

* central geometric: "encode" is the exact histogram (``np.bincount``), "decode" the discrete
  Laplace noise on every bucket;
* Hadamard response: encode = every client's report (vectorised), decode = histogram of the
  reports + fast Walsh-Hadamard transform;
* shuffle Bernoulli: encode = histogram + ``Binomial(n, q)`` noise per bucket (the shuffled
  message counts, drawn exactly), decode = subtracting ``n q``. Calibration time is printed
  separately (it is cached per ``(n, eps, delta)``).

Then the calibration table: for ``eps`` in {0.1, 0.5, 1} and the paper's sample size
``m = 10**6 (1 - e^-eps) / 6`` (sampling rate ``alpha (1 - e^-eps)``, ``alpha = 1/6``), the noise
standard deviation per bucket of each baseline, the shuffle noise probability of the exact and of
Balcer & Cheu's calibration and the exact per-bucket delta of each.

Usage::

    python benchmarks/bench_baselines.py [--n 1000000] [--quick] [--seeded]

The shuffle baseline's cost is the exact binomial sampler, linear in ``n`` per bucket (about
``2 n B`` random bits): with ``os.urandom`` it is bound by the operating system's generator.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from _harness import best_of as best
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource, SecureRandom, SeededRandom
from privhist.federated.baselines import CentralGeometric, HadamardResponse, ShuffleBernoulli
from privhist.federated.baselines._items import histogram


def timings(n: int, repeats: int, rng: RandomSource) -> None:
    eps, delta = 1.0, 1e-8
    print(f"n = {n} clients, eps = {eps}, delta = {delta}; best of {repeats}, seconds")
    print(f"randomness: {rng.description}")
    print(f"{'baseline':<20}{'B':>7}{'setup':>9}{'encode':>9}{'decode':>9}{'MAE/n':>11}")
    for log_b in (10, 14):
        one_domain(n, 1 << log_b, repeats, eps, delta, rng)


def one_domain(
    n: int, domain: int, repeats: int, eps: float, delta: float, rng: RandomSource
) -> None:
    """Time the three baselines on ``n`` uniform items over ``domain`` buckets."""
    items = rng.uniform_below(domain, n)
    true = histogram(items, domain)

    t = time.perf_counter()
    central = CentralGeometric(eps, delta, domain)
    setup = time.perf_counter() - t
    enc, counts = best(lambda: histogram(items, domain), repeats)
    dec, noisy = best(lambda: central.noisy_counts(counts, rng), repeats)
    mae = float(np.abs(noisy - true).mean()) / n
    print(f"{'central-geometric':<20}{domain:>7}{setup:>9.3f}{enc:>9.3f}{dec:>9.3f}{mae:>11.2e}")

    t = time.perf_counter()
    hr = HadamardResponse(eps, domain)
    setup = time.perf_counter() - t
    enc, reports = best(lambda: hr.encode(items, rng), repeats)
    dec, est = best(lambda: hr.decode(reports), repeats)
    mae = float(np.abs(est - true).mean()) / n
    print(f"{'hadamard-response':<20}{domain:>7}{setup:>9.3f}{enc:>9.3f}{dec:>9.3f}{mae:>11.2e}")

    t = time.perf_counter()
    sh = ShuffleBernoulli(eps, delta, n, domain)
    setup = time.perf_counter() - t
    enc, shuffled = best(lambda: sh.shuffled_counts(items, rng), max(1, repeats // 3))
    dec, est = best(lambda: sh.decode(shuffled), repeats)
    mae = float(np.abs(est - true).mean()) / n
    print(f"{'shuffle-bernoulli':<20}{domain:>7}{setup:>9.3f}{enc:>9.3f}{dec:>9.3f}{mae:>11.2e}")


def calibration_table(population: int) -> None:
    delta = 1e-8
    print()
    print(
        f"calibrations at the paper's sample sizes (population {population}, alpha = 1/6, "
        "delta = 1e-8)"
    )
    print(
        f"{'eps':>5}{'m':>8}{'lap std':>9}{'HR std/sqrt(m)':>15}{'q exact':>11}{'std':>7}"
        f"{'delta_exact':>13}{'q B-C':>10}{'std':>7}{'delta_exact':>13}"
    )
    for eps in (0.1, 0.5, 1.0):
        m = round(population * (1 - math.exp(-eps)) / 6)
        lap = CentralGeometric(eps, delta, 16).noise_std()
        hr = HadamardResponse(eps, 16)
        hr_std = float(hr.scale)  # per-bucket std is about scale * sqrt(m)
        exact = ShuffleBernoulli(eps, delta, m, 16)
        row = (
            f"{eps:>5}{m:>8}{lap:>9.2f}{hr_std:>15.2f}{float(exact.noise_probability):>11.3g}"
            f"{math.sqrt(exact.noise_variance()):>7.1f}{exact.delta_exact:>13.3g}"
        )
        try:
            bc = ShuffleBernoulli(eps, delta, m, 16, calibration="balcer-cheu")
            row += (
                f"{float(bc.noise_probability):>10.3g}{math.sqrt(bc.noise_variance()):>7.1f}"
                f"{bc.delta_exact:>13.3g}"
            )
        except ValidationError:
            need = math.ceil(100 * math.log(2 / delta) / eps**2)
            row += f"   (Balcer-Cheu needs n >= {need})"
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6, help="clients (default 10**6)")
    parser.add_argument("--quick", action="store_true", help="n = 10**5, one repeat")
    parser.add_argument(
        "--seeded", action="store_true", help="SeededRandom(0) (as in experiments), not os.urandom"
    )
    args = parser.parse_args()
    n = 10**5 if args.quick else args.n
    rng: RandomSource = SeededRandom(0) if args.seeded else SecureRandom()
    timings(n, 1 if args.quick else 3, rng)
    calibration_table(10**6)


if __name__ == "__main__":
    main()
