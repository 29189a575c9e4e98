"""Output laws of the selection mechanisms, in high precision from their definitions, for the
sampler and privacy tests.

Permute-and-flip (McKenna & Sheldon 2020) visits the candidates in a uniform order and stops at
candidate ``r`` with probability ``p_r = exp(-gamma (s_r - s*))``. With every coin flipped first,
the output is a uniform choice among the heads, so

    Pr[r] = p_r E[1 / (1 + H_{-r})] = p_r int_0^1 prod_{j != r} (1 - p_j + p_j t) dt,

``H_{-r}`` the number of heads among the others (``E[t**H] = prod_j (1 - p_j + p_j t)`` and
``1 / (1 + h) = int_0^1 t**h dt``). Candidates of one score share a factor, so the integrand is a
product over score levels. It is computed by quadrature on ``u = 1 - t`` with breakpoints on a
geometric grid (the integrand is a polynomial of high degree concentrated near ``t = 1``), and
the law is checked to sum to 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import mpmath


def _mpf(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


def pf_level_law(scores: Sequence[int], counts: Sequence[int], gamma: Fraction) -> list[mpmath.mpf]:
    """``Pr[output has score scores[i]]`` for each distinct score (``counts[i]`` candidates), in
    the working precision of the caller (``mpmath.workdps``)."""
    best = min(scores)
    g = _mpf(Fraction(gamma))
    p = [mpmath.exp(-g * (s - best)) for s in scores]

    def factor(u: mpmath.mpf, skip: int) -> mpmath.mpf:
        """The integrand at ``t = 1 - u`` without candidate ``skip``'s own factor."""
        out = mpmath.mpf(1)
        for j, (pj, nj) in enumerate(zip(p, counts, strict=True)):
            n = nj - 1 if j == skip else nj
            if n:
                out *= (1 - pj * u) ** n  # 1 - p + p t
        return out

    n_total = sum(counts)
    grid = [mpmath.mpf(0)] + [mpmath.mpf(10) ** -e for e in range(len(str(n_total)) + 8, 0, -1)]
    grid.append(mpmath.mpf(1))
    law = []
    for i, (pi, ni) in enumerate(zip(p, counts, strict=True)):
        law.append(ni * pi * mpmath.quad(lambda u, i=i: factor(u, i), grid))
    total = mpmath.fsum(law)
    assert abs(total - 1) < mpmath.mpf(10) ** (-(mpmath.mp.dps - 8)), total
    return law
