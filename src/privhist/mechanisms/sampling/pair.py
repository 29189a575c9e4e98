"""The privacy event of sample-and-threshold releases: a dominating pair with a stated point.

One sample-and-threshold release (Bharadwaj & Cormode 2022, Section 3), for the one key a client
added or removed touches, is dominated by the pair of
:func:`privhist.accounting.pairs.dominating_pair` built from its certified privacy profile
(:func:`privhist.mechanisms.sampling.profile.certified_delta`) on the grid
``eps * 2^(j/4)``, ``j = -12 .. 20`` (the f-DP envelope of those points and the pure removal
line ``ln(1/(1-p))``). :func:`threshold_pair_event` states that pair together with the
release's calibrated ``(eps, delta)`` point, so the accountant can compose runs by basic and
advanced composition and by the certified PLD (:mod:`privhist.accounting.accountant`).

>>> from fractions import Fraction
>>> e = threshold_pair_event(Fraction(1, 20), 14, 0.25, 2e-9, 4)
>>> e.count, e.epsilon, e.delta
(4, 0.25, 2e-09)
"""

from __future__ import annotations

import functools
from fractions import Fraction

from privhist.accounting.events import DominatingPairEvent
from privhist.accounting.pairs import dominating_pair
from privhist.mechanisms.sampling.profile import certified_delta, delta_float

__all__ = ["PROFILE_GRID", "profile_points", "threshold_pair_event"]

#: the profile grid: ``eps * 2**(j/4)`` for ``j`` in this range
PROFILE_GRID = range(-12, 21)
#: grid points above this epsilon are left out (``e^eps`` would overflow a float): a pair built
#: from fewer valid points of the profile is a looser envelope, still a dominating pair
MAX_PROFILE_EPSILON = 500.0


@functools.lru_cache(maxsize=64)
def profile_points(
    sampling_rate: Fraction, threshold: int, epsilon: float, certified: bool = True
) -> tuple[tuple[float, float], ...]:
    """``(eps_j, delta_j)`` on :data:`PROFILE_GRID`; ``certified=False`` (for calibration
    searches only, never for a reported guarantee) takes float64 deltas times 1.01. The rounding
    margin is added by :func:`~privhist.accounting.pairs.dominating_pair`. Points above
    :data:`MAX_PROFILE_EPSILON` are left out."""
    out = []
    for j in PROFILE_GRID:
        eps = epsilon * 2.0 ** (j / 4)
        if eps > MAX_PROFILE_EPSILON:
            break
        if certified:
            d = certified_delta(sampling_rate, threshold, Fraction(eps)).upper
        else:
            d = delta_float(float(sampling_rate), threshold, eps)[0] * 1.01
        out.append((eps, d))
    return tuple(out)


def threshold_pair_event(
    sampling_rate: Fraction,
    threshold: int,
    epsilon: float,
    delta: float | None,
    count: int = 1,
    *,
    certified: bool = True,
) -> DominatingPairEvent:
    """``count`` sample-and-threshold releases at rate ``sampling_rate`` and ``threshold``, each
    ``(epsilon, delta)``-DP per key (``delta`` its certified value; None to state no point), as
    one dominating-pair event (module notes)."""
    p = Fraction(sampling_rate)
    P, Q = dominating_pair(p, profile_points(p, threshold, epsilon, certified))
    atoms = sorted(set(P) | set(Q))
    return DominatingPairEvent(
        tuple(P.get(a, 0.0) for a in atoms),
        tuple(Q.get(a, 0.0) for a in atoms),
        count,
        None if delta is None else epsilon,
        delta,
    )
