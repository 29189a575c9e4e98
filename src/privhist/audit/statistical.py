"""The statistical (black-box) audit: search a neighbouring pair, draw, bound (epsilon, delta).

``audit_statistical(sampler, epsilon, delta, samples=N)``:

1. Candidate pairs — given by the caller, or from :func:`candidate_pairs` for a privhist
   mechanism: one key moving from absent to present (the delta regime of every thresholded
   mechanism), counts just below and at the count released half of the time ("counts near the
   threshold", where a key is most likely to flip), and, for a user-level relation, every one of
   the ``k`` keys a user may touch moving at once.
2. Search — each candidate gets a pilot of ``pilot`` draws per side and the full
   select-and-estimate procedure of :mod:`privhist.audit.stats`; the pair with the largest lower
   bound on delta (then on epsilon) wins. Pilot draws are discarded.
3. Audit — ``N`` fresh draws per side of the chosen pair; DP-Sniper-style likelihood-ratio events
   chosen on a selection share, Clopper-Pearson bounds on the rest, union bound over the events
   and over the feature maps (the values alone, and the values with their binary resolution).
   The reported bounds hold simultaneously with probability at least ``confidence``.

A violation is a lower bound above the claim. Passing is not a proof: it says that no violation
larger than the resolution (reported) was seen with these ``N`` and these pairs; the exact audit
(:mod:`privhist.audit.exact`) is the proof for privhist's own mechanisms.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privhist.audit.sampling import (
    NeighbouringPair,
    Sampler,
    describe_row,
    rate,
    timed_draw,
)
from privhist.audit.stats import PairAudit, audit_samples
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Relation
from privhist.core.random import RandomSource, SecureRandom
from privhist.mechanisms.base import Mechanism

__all__ = ["StatisticalAudit", "audit_statistical", "candidate_pairs"]

#: columns kept by each feature map (of the two per key): value only, value and resolution
FEATURE_MAPS = {"value": (0,), "value+bits": (0, 1)}


def candidate_pairs(mechanism: Mechanism, limit: int = 6) -> list[NeighbouringPair]:
    """Neighbouring pairs worth auditing for ``mechanism`` (from its public planning data)."""
    nb = mechanism.neighbouring
    c = nb.max_contributions_per_partition
    k = nb.max_partitions_contributed if nb.relation is Relation.USER else 1
    rp = mechanism.reporting_probability(4000)
    positive = np.nonzero(rp > 0)[0]
    half = np.nonzero(rp >= 0.5)[0]
    first = int(positive[positive > 0][0]) if positive[positive > 0].size else 1
    mid = int(half[0]) if half.size else 1
    counts = [0]
    grid: tuple[int, ...] = (first - c, mid - c, mid - 1, mid)
    if np.isnan(rp).any():  # no reporting probability (pure-sparse): spread over the count bound
        bound = int(getattr(mechanism, "n", 10))
        grid = (bound // 2, bound - c)
    for n in grid:
        if n >= 0 and n not in counts:
            counts.append(n)
    pairs: list[NeighbouringPair] = []
    # a universe of integers (pure-sparse) takes integer keys; otherwise readable names
    integers = getattr(getattr(mechanism, "universe", None), "domain", "") is None
    x, y = (1, 2) if integers else ("x", "y")
    names: list[Any] = [10 + i if integers else f"k{i}" for i in range(k)]
    for n in counts[:limit]:
        if nb.relation is Relation.REPLACE:
            # one record moves from key y to key x: {x: n, y: n + 1} vs {x: n + 1, y: n}
            a = {kk: v for kk, v in ((x, n), (y, n + 1)) if v}
            b = {kk: v for kk, v in ((x, n + 1), (y, n)) if v}
            pairs.append(NeighbouringPair(a, b, f"replace: x {n} -> {n + 1}, y {n + 1} -> {n}"))
        elif k == 1:
            a = {x: n} if n else {}
            pairs.append(NeighbouringPair(a, {x: n + c}, f"x: {n} vs {n + c} records"))
        else:
            a = {kk: n for kk in names if n}
            b = dict.fromkeys(names, n + c)
            pairs.append(NeighbouringPair(a, b, f"user touching {k} keys: {n} vs {n + c} each"))
    return pairs


@dataclass
class StatisticalAudit:
    """Outcome of :func:`audit_statistical`."""

    name: str
    epsilon: float
    delta: float
    confidence: float
    samples: int
    pair: NeighbouringPair
    result: PairAudit
    feature_map: str
    pilot: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    draw_seconds: float = 0.0
    vectorised: bool = True
    all_maps: dict[str, PairAudit] = field(default_factory=dict)

    @property
    def violation(self) -> bool:
        return any(r.violation for r in self.all_maps.values()) or self.result.violation

    def verdict(self) -> str:
        """One line: the claim, the lower bounds, and whether the claim is disproved."""
        r = self.result
        head = "VIOLATION" if self.violation else "no violation found"
        return (
            f"{head}: {self.name} claims ({self.epsilon:g}, {self.delta:.3g})-DP; with "
            f"{self.confidence:.0%} confidence epsilon >= {r.epsilon_lower:.4g} at delta "
            f"{self.delta:.3g} and delta >= {r.delta_lower:.3g} at epsilon {self.epsilon:g} "
            f"(N = {self.samples} per side, pair {self.pair.note}; resolution {r.resolution:.2g})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "audit": "statistical",
            "name": self.name,
            "claim": {"epsilon": self.epsilon, "delta": self.delta},
            "confidence": self.confidence,
            "samples_per_side": self.samples,
            "pair": self.pair.to_dict(),
            "feature_map": self.feature_map,
            "epsilon_lower": self.result.epsilon_lower,
            "delta_lower": self.result.delta_lower,
            "resolution": self.result.resolution,
            "violation": self.violation,
            "events": [e.to_dict() for e in self.result.events],
            "by_feature_map": {k: v.to_dict() for k, v in self.all_maps.items()},
            "pilot": self.pilot,
            "vectorised": self.vectorised,
            "seconds": self.seconds,
            "samples_per_second": rate(2 * self.samples, self.draw_seconds),
            "verdict": self.verdict(),
        }


def _audit_pair(
    first: np.ndarray[Any, Any],
    second: np.ndarray[Any, Any],
    keys: Sequence[Any],
    epsilon: float,
    delta: float,
    confidence: float,
) -> tuple[str, dict[str, PairAudit]]:
    """Every feature map at ``confidence`` shared by a union bound; the worst map first."""
    maps = FEATURE_MAPS
    # integer outputs have no resolution column to speak of: one map, no split of confidence
    if not ((first[:, 1::2] < 0).any() or (second[:, 1::2] < 0).any()):
        maps = {"value": (0, 1)}
    level = 1 - (1 - confidence) / len(maps)
    out: dict[str, PairAudit] = {}
    name_row = describe_row(keys)
    for name, cols in maps.items():
        idx = [2 * i + c for i in range(len(keys)) for c in cols]
        a, b = first[:, idx], second[:, idx]
        describe = _describer(name_row, len(keys), cols)
        out[name] = audit_samples(a, b, epsilon, delta, confidence=level, describe=describe)
    worst = max(out, key=lambda k: (out[k].delta_lower, out[k].epsilon_lower))
    return worst, out


def _describer(name_row: Callable[[Any], str], m: int, cols: tuple[int, ...]) -> Any:
    """Names of feature rows restricted to ``cols`` (the resolution column read as 0)."""

    def describe(row: Any) -> str:
        full = np.zeros(2 * m, dtype=np.int64)
        for j, c in enumerate(cols):
            full[c::2] = row[j :: len(cols)]
        return name_row(full)

    return describe


def audit_statistical(
    sampler: Sampler,
    epsilon: float,
    delta: float,
    *,
    samples: int = 100_000,
    pairs: Sequence[NeighbouringPair] | None = None,
    mechanism: Mechanism | None = None,
    pilot: int | None = None,
    confidence: float = 0.95,
    rng: RandomSource | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> StatisticalAudit:
    """Search a neighbouring pair and bound (epsilon, delta) from below (module notes).

    Args:
        sampler: Draws outputs (:mod:`privhist.audit.sampling`).
        epsilon: Claimed epsilon.
        delta: Claimed delta.
        samples: ``N``, outputs drawn per side of the chosen pair.
        pairs: Candidate pairs; by default :func:`candidate_pairs` of ``mechanism``.
        mechanism: The privhist mechanism behind ``sampler`` (for the default pairs).
        pilot: Draws per side per candidate in the search (default ``min(N/10, 20000)``); not
            used when there is one candidate.
        confidence: Probability that the reported bounds all hold.
        rng: Randomness for privhist samplers (default :class:`SecureRandom`).
        progress: ``f(stage, done, total)`` called as draws complete.
    """
    fn = "audit"
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 10:
        raise ValidationError("samples", fn, "an integer >= 10", samples)
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon >= 0):
        raise ValidationError("epsilon", fn, "a finite number >= 0", epsilon)
    if not (isinstance(delta, int | float) and 0 <= delta < 1):
        raise ValidationError("delta", fn, "a number in [0, 1)", delta)
    if pairs is None:
        if mechanism is None:
            raise ValidationError("pairs", fn, "given when no privhist mechanism is", None)
        pairs = candidate_pairs(mechanism)
    pairs = list(pairs)
    if not pairs:
        raise ValidationError("pairs", fn, "at least one neighbouring pair", 0)
    rng = rng or SecureRandom()
    t0 = time.perf_counter()
    pilot_report: list[dict[str, Any]] = []
    chosen = pairs[0]
    if len(pairs) > 1:
        n_pilot = pilot if pilot is not None else max(10, min(samples // 10, 20_000))
        best: tuple[float, float] | None = None
        for i, pair in enumerate(pairs):
            keys = pair.keys
            a, _ = timed_draw(sampler, pair.first, keys, n_pilot, rng)
            b, _ = timed_draw(sampler, pair.second, keys, n_pilot, rng)
            _, res = _audit_pair(a, b, keys, epsilon, delta, confidence)
            score = (
                max(r.delta_lower for r in res.values()),
                max(r.epsilon_lower for r in res.values()),
            )
            pilot_report.append(
                {
                    "pair": pair.note,
                    "samples": n_pilot,
                    "delta_lower": score[0],
                    "epsilon_lower": score[1],
                }
            )
            if best is None or score > best:
                best, chosen = score, pair
            if progress is not None:
                progress("search", i + 1, len(pairs))
    keys = chosen.keys
    done = [0]

    def tick(k: int) -> None:
        done[0] += k
        if progress is not None:
            progress("draw", done[0], 2 * samples)

    first, s1 = timed_draw(sampler, chosen.first, keys, samples, rng, tick)
    second, s2 = timed_draw(sampler, chosen.second, keys, samples, rng, tick)
    worst, maps = _audit_pair(first, second, keys, epsilon, delta, confidence)
    return StatisticalAudit(
        name=sampler.name,
        epsilon=float(epsilon),
        delta=float(delta),
        confidence=confidence,
        samples=samples,
        pair=chosen,
        result=maps[worst],
        feature_map=worst,
        pilot=pilot_report,
        seconds=time.perf_counter() - t0,
        draw_seconds=s1 + s2,
        vectorised=bool(sampler.vectorised),
        all_maps=maps,
    )
