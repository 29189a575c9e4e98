"""Confidence intervals for the client count of each TrieHH++ node.

Bharadwaj & Cormode 2022, Section 4.1 (TrieHH++): a node ``v`` released at level ``l`` carries
its sampled count ``X``, where ``X ~ Binomial(N, p)`` for the ``N`` clients whose terminated
string starts with ``v`` (every one of them is eligible at level ``l``, since ``v``'s parent is
in the trie), and the node is released only when ``X >= tau``. The paper's estimate is ``X / p``;
Section 3's accuracy bounds are for the unthresholded count. Here each released node gets an
interval ``[lower, upper]`` for ``N`` with coverage at least ``confidence`` *given that the node
was released*, which is what a reader of the output sees.

**Construction (selective Clopper-Pearson).** Given release, ``X`` has the truncated law
``Pr_N[X = x | X >= tau] = b_N(x) / S_N(tau)`` on ``x >= tau`` (``b_N`` the binomial pmf,
``S_N(t) = Pr_N[X >= t]``). The binomial family has a monotone likelihood ratio in ``x`` for
the parameter ``N`` (``b_(N+1)(x) / b_N(x) = (1 - p)(N + 1) / (N + 1 - x)`` increases in
``x``), and truncation to ``x >= tau`` keeps it, so the truncated law is stochastically
increasing in ``N`` (Lehmann & Romano, "Testing Statistical Hypotheses", Lemma 3.4.2). Inverting
the two one-sided tests at level ``a = (1 - confidence) / 2`` each::

    lower(x) = min { N >= x : Pr_N[X >= x | X >= tau] > a }
    upper(x) = max { N      : Pr_N[X <= x | X >= tau] > a }

gives, for every true ``N`` with ``Pr_N[X >= tau] > 0``, ``Pr_N[lower(X) <= N <= upper(X) |
X >= tau] >= 1 - 2a`` (the standard test-inversion argument: ``N < lower(X)`` only on an upper
tail of conditional probability at most ``a``, and ``N > upper(X)`` only on a lower tail of
probability at most ``a``). The conditional guarantee is per level and per node: a node's level
draws a fresh Poisson sample, independent of the levels that decided its parent (module notes
of :mod:`privhist.federated.triehh`), so conditioning on the history changes nothing. The
intervals are per node, not simultaneous.

**Numerics.** The tails are SciPy's binomial ``logsf`` / ``logcdf`` (Boost's incomplete beta,
relative error about ``1e-14``). To keep the interval at least as wide as the exact one, both
tests compare with ``a (1 - 1e-9)`` instead of ``a``; ``tests/federated/test_triehh_intervals.py``
checks the endpoints against exact rational sums on a grid of small cases. Both conditional
tails are monotone in ``N``, so each endpoint is found by bisection (exponential search for the
upper one), ``O(log N)`` tail evaluations per distinct released count.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from privhist.core.errors import ValidationError
from privhist.core.validation import check_probability

__all__ = ["node_interval", "selective_tails"]

#: the tests compare with a * (1 - _MARGIN): a float tail a hair above the exact one only widens
_MARGIN = 1e-9


def selective_tails(n: int, x: int, p: float, tau: int) -> tuple[float, float]:
    """``(Pr_N[X >= x | X >= tau], Pr_N[X <= x | X >= tau])`` for ``X ~ Binomial(n, p)``
    (module notes), ``x >= tau``; ``(0, 1)`` when release is impossible (``n < tau``)."""
    from scipy import stats  # here: scipy is slow to import

    if n < tau:
        return 0.0, 1.0
    log_sel = float(stats.binom.logsf(tau - 1, n, p))
    upper_tail = math.exp(min(0.0, float(stats.binom.logsf(x - 1, n, p)) - log_sel))
    # Pr[tau <= X <= x] = Pr[X >= tau] - Pr[X >= x + 1]
    log_above = float(stats.binom.logsf(x, n, p)) - log_sel
    lower_tail = -math.expm1(min(0.0, log_above)) if log_above > -745 else 1.0
    return upper_tail, lower_tail


def node_interval(count: int, p: float | Fraction, tau: int, confidence: float) -> tuple[int, int]:
    """The selective Clopper-Pearson interval ``[lower, upper]`` for the number of clients ``N``
    of a node released with sampled count ``count >= tau`` (module notes).

    >>> node_interval(40, 0.5, 10, 0.95)
    (64, 100)
    >>> node_interval(10, 0.5, 10, 0.95)[0]  # at the threshold, release itself says little
    10
    """
    fn = "node_interval"
    conf = check_probability(confidence, fn, "confidence", open_low=True, open_high=True)
    pf = float(p)
    if not 0 < pf <= 1:
        raise ValidationError("p", fn, "a sampling rate in (0, 1]", p)
    if isinstance(tau, bool) or not isinstance(tau, int | np.integer) or tau < 1:
        raise ValidationError("tau", fn, "an integer >= 1", tau)
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < tau:
        raise ValidationError("count", fn, f"an integer >= tau = {tau} (a released count)", count)
    return _interval(int(count), pf, int(tau), conf)


@functools.lru_cache(maxsize=4096)
def _interval(x: int, p: float, tau: int, conf: float) -> tuple[int, int]:
    a = (1 - conf) / 2 * (1 - _MARGIN)
    if p >= 1:
        return x, x
    # lower: the smallest N >= x with Pr_N[X >= x | X >= tau] > a (increasing in N)
    lo, hi = x, max(x + 1, math.ceil(x / p))
    while selective_tails(hi, x, p, tau)[0] <= a:
        lo, hi = hi, 2 * hi
    if selective_tails(lo, x, p, tau)[0] > a:
        lower = lo
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if selective_tails(mid, x, p, tau)[0] > a else (mid, hi)
        lower = hi
    # upper: the largest N with Pr_N[X <= x | X >= tau] > a (decreasing in N); N = x has
    # conditional lower tail 1
    lo, hi = x, max(x + 1, 2 * math.ceil(x / p) + 16)
    while selective_tails(hi, x, p, tau)[1] > a:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if selective_tails(mid, x, p, tau)[1] > a else (lo, mid)
    return lower, lo
