"""How many releases fit a total budget: basic composition against the Renyi filter.

Each release is (0.5, 1e-8)-DP: a Gaussian of sensitivity 1 whose sigma is the smallest meeting
(0.5, 1e-8) exactly (the analytic Gaussian, Balle and Wang 2018, Theorem 8; found by bisection),
or a Laplace of scale 2 (pure 0.5-DP). The total is (2, 1e-6). "Before" is basic composition
(the ledger's basic regime: epsilons and deltas add); "after" is the Renyi regime of
:mod:`privhist.accounting.filters` (pure releases by basic composition of pure epsilons, or the
Renyi filter at one of 16 orders with delta split among them). Releases are requested one at a
time until the filter refuses one.

Usage::

    python benchmarks/bench_ledger_filters.py
"""

from __future__ import annotations

import math

from scipy import stats

from privhist.accounting.composition import GaussianEvent, LaplaceEvent, PrivacyEvent
from privhist.accounting.filters import basic_admits, renyi_admission
from privhist.core.budget import Budget

PER = Budget(0.5, 1e-8)
TOTAL = Budget(2.0, 1e-6)


def analytic_gaussian_delta(sigma: float, eps: float) -> float:
    """Balle and Wang 2018, Theorem 8, sensitivity 1."""
    a, b = 1 / (2 * sigma), eps * sigma
    return float(stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b))


def gaussian_sigma(eps: float, delta: float) -> float:
    lo, hi = 0.1, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if analytic_gaussian_delta(mid, eps) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def count_basic() -> int:
    spent: list[Budget] = []
    while basic_admits(spent, PER, TOTAL):
        spent.append(PER)
    return len(spent)


def count_renyi(event: PrivacyEvent) -> tuple[int, str]:
    spent: list[PrivacyEvent] = []
    last = "-"
    while True:
        a = renyi_admission(spent, event, TOTAL)
        if not a.admitted:
            return len(spent), last
        spent.append(event)
        last = str(a.rule)


def main() -> None:
    sigma = gaussian_sigma(PER.epsilon, PER.delta)
    print(f"per release {PER}, total {TOTAL}; Gaussian sigma {sigma:.6g}, Laplace scale 2")
    before = count_basic()
    g, g_rule = count_renyi(GaussianEvent(sigma))
    lap, l_rule = count_renyi(LaplaceEvent(2.0))
    print(f"{'release':<10} {'before (basic)':>15} {'after (filter)':>15}  last rule")
    print(f"{'Gaussian':<10} {before:>15} {g:>15}  {g_rule}")
    print(f"{'Laplace':<10} {before:>15} {lap:>15}  {l_rule}")


if __name__ == "__main__":
    main()
