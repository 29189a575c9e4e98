"""Private weighted sampling: timings of the pws building blocks, printed.

    python benchmarks/bench_pws.py

* key reporting probabilities (Algorithm 3, vectorised) for frequencies 1..10**6, ppswor and q = 1
  (target <= 0.1 s), and 1..10**7;
* the Algorithm 4 matrix up to frequency 2000 (target <= 2 s);
* sanitising a sample of 10**6 keys, keys only and keys with frequencies (target <= 1 s);
* the certified frequency sanitiser with sampling (integer end-to-end matrix, exact check);
* Algorithm 5 (piecewise-constant PDFs and their discretisation) up to frequency 500;
* the exact shift pmf (certified) for a few (epsilon, delta).
Each line shows the best of a few runs and the ratio to the target.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from _harness import best_seconds as best
from _harness import line
from privhist.core.random import SeededRandom
from privhist.mechanisms.sampling.pws import frequencies, keys, max_separation, sanitize, schemes


def main() -> None:
    eps, delta = 0.1, 1e-6
    for m in (10**6, 10**7):
        q = schemes.inclusion_probabilities(m, "ppswor", 1e-3)
        line(
            f"Algorithm 3, ppswor tau=1e-3, frequencies 1..{m:.0e}",
            best(lambda q=q: keys.reporting_probabilities(q, eps, delta)),
            0.1 if m == 10**6 else None,
        )
    q1 = np.ones(10**6 + 1)
    q1[0] = 0
    line(
        "Algorithm 3, q = 1, frequencies 1..1e6",
        best(lambda: keys.reporting_probabilities(q1, eps, delta)),
        0.1,
    )
    q2 = schemes.inclusion_probabilities(2000, "ppswor", 0.01)
    line(
        "Algorithm 4 matrix, frequencies up to 2000",
        best(lambda: frequencies.integer_token_matrix(q2, eps, 1e-3), 2),
        2.0,
    )
    rng = SeededRandom(1)
    n = 10**6
    f = rng.uniform_below(2000, n) + 1
    sample = schemes.WeightedSample(np.arange(n), f, "ppswor", 0.01)
    grid = sample.grid_q(np.arange(2001))
    line(
        "certified frequency sanitiser, m = 2000 (Algorithm 4, exact check, estimators)",
        best(lambda: sanitize.grid_frequency_sanitizer(grid, eps, 1e-3), 1),
    )
    q5 = schemes.inclusion_probabilities(500, "ppswor", 0.01)
    line(
        "Algorithm 5 PDFs + discretisation, frequencies up to 500",
        best(lambda: max_separation.max_separation_pdfs(q5, eps, 1e-3), 1),
    )
    sanitize.sanitize_frequencies(sample, eps, 1e-3, rng)  # builds and caches the table
    line(
        "sanitise 1e6 sampled keys, keys only",
        best(lambda: sanitize.sanitize_keys(sample, eps, 1e-3, rng)),
        1.0,
    )
    line(
        "sanitise 1e6 sampled keys, keys + frequencies (table cached)",
        best(lambda: sanitize.sanitize_frequencies(sample, eps, 1e-3, rng), 1),
        1.0,
    )
    for e, d in [(1.0, 1e-8), (0.1, 1e-8), (0.01, 1e-6)]:
        frequencies.exact_shift_pmf.cache_clear()
        line(
            f"exact shift pmf, certified, eps={e}, delta={d}",
            best(lambda e=e, d=d: frequencies.exact_shift_pmf(Fraction(e), Fraction(d)), 1),
        )


if __name__ == "__main__":
    main()
