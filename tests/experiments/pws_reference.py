"""Algorithm 3 of Cohen, Geri, Sarlos & Stemmer (Section 4) as printed, one step at a time: the
independent reference the PWS experiment's tests compare the library's vectorised version with."""

from __future__ import annotations

import math


def algorithm3(q: list[float], eps: float, delta: float) -> list[float]:
    """Algorithm 3 as printed, one step at a time over every frequency."""
    pi = [0.0]
    e, inv = math.exp(eps), math.exp(-eps)
    for i in range(1, len(q)):
        pi.append(min(q[i], e * pi[-1] + delta, 1 + inv * (pi[-1] + delta - 1)))
    return pi
