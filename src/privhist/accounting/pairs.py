"""Dominating pairs built from a family of (epsilon, delta) guarantees (an f-DP envelope).

If a mechanism is ``(eps_i, delta_i)``-DP in one direction for every ``i`` and removing the
individual is pure ``ln(1 / (1 - p))``, its tradeoff function is bounded below by the convex,
piecewise-linear ``g(x) = max(0, max_i (1 - delta_i - e^eps_i x), (1 - p)(1 - x))`` (Dong, Roth
and Su 2022, "Gaussian differential privacy", Section 2: each ``(eps, delta)`` guarantee is the
tradeoff line ``1 - delta - e^eps x``, and the supremum of valid lower bounds is one). The pair
``(P*, Q*)`` with ``T(Q*, P*) = g`` -- one atom per segment of ``g``: ``Q*`` mass the segment's
width, ``P*`` mass its drop; ``P*`` mass ``1 - g(0)`` where ``Q* = 0`` -- then dominates the
mechanism's pairs in both hockey-stick directions, and composes (Zhu, Dong and Wang 2022,
Theorem 10). Used by TrieHH++ (:mod:`privhist.federated.triehh`) and the hierarchies
(:mod:`privhist.analytics.hierarchy`) for sample-and-threshold levels.

The envelope and the atoms are float64: rounding moves the pair's curve by about ``1e-16`` in
either direction, so every line of ``g`` (the pure line included) is lowered by ``slack``
(default ``1e-14``) first; a lower ``g`` is still a valid bound. The pair's masses are then
exact binary rationals, and :mod:`privhist.accounting.certified` composes them with proven
rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from privhist.core.errors import ValidationError

__all__ = ["ENVELOPE_SLACK", "dominating_pair"]

#: absolute amount by which every line of the float64 envelope is lowered (rounding margin)
ENVELOPE_SLACK = 1e-14
_SLACK = ENVELOPE_SLACK


def dominating_pair(
    p: Fraction, constraints: Sequence[tuple[float, float]], slack: float = _SLACK
) -> tuple[dict[int, float], dict[int, float]]:
    """A pair ``(P*, Q*)`` whose tradeoff function ``T(Q*, P*)`` is ``g`` lowered by ``slack``
    (see the module notes), hence below the exact envelope despite float64 rounding.

    ``constraints`` are ``(eps_i, delta_i)`` with ``sup_c H_(e^eps_i)(P_c || Q_c) <= delta_i``;
    the reverse direction is Lemma A's line ``(1 - p)(1 - x)``. Returns the probability mass
    functions of ``P*`` and ``Q*`` over integer atoms (atom -1 carries ``P*``'s mass where
    ``Q* = 0``; atoms where ``P* = 0`` are omitted from ``P*``).

    >>> P, Q = dominating_pair(Fraction(1, 10), [(1.0, 0.0)])
    >>> round(sum(P.values()), 12), round(sum(Q.values()), 12)
    (1.0, 1.0)
    """
    if not (math.isfinite(slack) and 0 <= slack < 1e-6):
        raise ValidationError("slack", "dominating_pair", "in [0, 1e-6)", slack)
    pf = float(p)
    # y = b - s x, every line lowered by the slack: float rounding of the exponentials, the
    # intersections and the masses moves the pair's curve by ~1e-16, which must not lift it
    # above the exact envelope (that would understate the privacy loss)
    lines = [(1.0 - d - slack, math.exp(e)) for e, d in constraints]
    lines.append((1.0 - pf - slack, 1.0 - pf))
    xs = {0.0, 1.0}
    for i, (b1, s1) in enumerate(lines):
        if 0 < b1 / s1 < 1:
            xs.add(b1 / s1)
        for b2, s2 in lines[i + 1 :]:
            if s1 != s2:
                x = (b1 - b2) / (s1 - s2)
                if 0 < x < 1:
                    xs.add(x)
    grid = np.array(sorted(xs))
    b = np.array([ln[0] for ln in lines])
    s = np.array([ln[1] for ln in lines])
    g = np.maximum(0.0, (b[None, :] - s[None, :] * grid[:, None]).max(axis=1))
    dq = np.diff(grid)
    dp = -np.diff(g)
    P: dict[int, float] = {}
    Q: dict[int, float] = {}
    top = 1.0 - float(g[0])
    if top > 0:
        P[-1] = top
    atom = 0
    last_slope = math.nan
    for wq, wp in zip(dq.tolist(), dp.tolist(), strict=True):
        if wq <= 0:
            continue
        slope = max(wp, 0.0) / wq
        if atom > 0 and abs(slope - last_slope) <= 1e-12 * max(slope, 1e-300):
            Q[atom - 1] += wq  # collinear with the previous segment: same atom
            if wp > 0:
                P[atom - 1] = P.get(atom - 1, 0.0) + wp
            continue
        Q[atom] = wq
        if wp > 0:
            P[atom] = wp
        last_slope = slope
        atom += 1
    return P, Q
