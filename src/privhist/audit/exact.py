"""The exact (white-box) audit: a mechanism's privacy profile on enumerated neighbouring inputs.

For every registered privhist mechanism, ``Mechanism.key_distribution`` is the exact output law
of one key ("not released" included). The audit enumerates neighbouring
one-key inputs — ``(u, n)`` units and records against ``(u + 1, n + j)``, ``1 <= j <= c``, for
every ``u`` from 0 up to two past the first count always released (capped by ``max_count``), at
the extreme record counts ``n in {u, c u}`` — and computes the hockey-stick divergence in both
directions in exact rational arithmetic with :mod:`privhist.accounting.profile` (Balle, Barthe
and Gaboardi 2018, Section 2; Balle et al. 2020, privacy profiles).

Which profile. Built-in mechanisms act on keys independently and claim the basic composition of
a per-key guarantee over the ``l0`` keys one neighbouring step touches
(:meth:`~privhist.mechanisms.base.Mechanism.key_budget`); for them the claim holds exactly when
every one-key pair satisfies the per-key budget. The per-key figures are exact; the
whole-neighbour figures reported for ``l0 > 1`` are upper bounds by composition over the ``l0``
keys: ``delta(l0 e) <= 1 - (1 - delta_key(e))^l0`` (Kairouz, Oh and Viswanath 2015, "The
composition theorem for differential privacy", Theorem 3.3 with ``i = 0``; at most 1, as a delta
is) and ``epsilon(delta) <= l0 epsilon_key(delta / l0)`` (basic composition), and the verdict says
"at most" for them. Mechanisms calibrated on the joint loss (``per_key_composable`` False) are
checked on the product law of the ``l0`` touched keys, each moved by ``c``, against the whole
guarantee, and their figures are exact.

The variant audited may have hand-set parameters (:func:`privhist.audit.variants.with_parameters`):
the distributions then follow the parameters set, and the claim stays what the mechanism states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np

from privhist.accounting.profile import (
    check_dp,
    epsilon_for_delta,
    privacy_profile,
    product_distribution,
)
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.validation import float_up
from privhist.mechanisms.base import KeyDistribution, Mechanism

__all__ = ["ExactAudit", "audit_exact", "neighbouring_pairs", "plot_exact"]

#: slack for 160-bit per-key distributions (as in the contract tests)
SLACK = 1e-30

Pair = tuple[tuple[int, int], tuple[int, int]]


def neighbouring_pairs(mechanism: Mechanism, max_count: int | None = None) -> list[Pair]:
    """One-key ``(units, count)`` pairs one neighbouring step apart (module notes)."""
    c = mechanism.neighbouring.max_contributions_per_partition
    rp = mechanism.reporting_probability(2000)
    hit = np.nonzero(rp >= 1.0)[0]
    top = int(hit[0]) + 2 if hit.size else 40
    top = min(top, 60 if max_count is None else max_count)
    pairs: list[Pair] = []
    for u in range(0, max(top, 1)):
        for n in sorted({c * u, u}):
            for j in range(1, c + 1):
                pairs.append(((u, n), (u + 1, n + j)))
    return pairs


@dataclass(frozen=True)
class PairResult:
    """The divergences of one pair at the claimed (per-key) epsilon."""

    first: tuple[int, int]
    second: tuple[int, int]
    delta_forward: float
    delta_backward: float
    holds: bool

    @property
    def worst(self) -> float:
        return max(self.delta_forward, self.delta_backward)

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": {"units": self.first[0], "count": self.first[1]},
            "second": {"units": self.second[0], "count": self.second[1]},
            "delta_forward": self.delta_forward,
            "delta_backward": self.delta_backward,
            "holds": self.holds,
        }


@dataclass
class ExactAudit:
    """Outcome of :func:`audit_exact`."""

    name: str
    epsilon: float
    delta: float
    neighbouring: str
    parameters: dict[str, Any]
    l0: int
    per_key: bool
    checked_epsilon: float
    checked_delta: float
    pairs: list[PairResult]
    epsilon_needed: float
    profile_epsilons: list[float] = field(default_factory=list)
    profile_deltas: list[float] = field(default_factory=list)
    #: the exact epsilon of the worst one-key pairs at the checked (per-key) delta
    key_epsilon_needed: float = 0.0

    @property
    def violation(self) -> bool:
        return not all(p.holds for p in self.pairs)

    @property
    def worst(self) -> PairResult:
        return max(self.pairs, key=lambda p: p.worst)

    @property
    def composed(self) -> bool:
        """Whether the whole-neighbour figures are composition bounds (per-key mechanisms with
        ``l0 > 1``) rather than exact."""
        return self.per_key and self.l0 > 1

    @property
    def delta_needed(self) -> float:
        """The delta at the claimed epsilon for the whole neighbour: exact, or for a per-key
        mechanism with ``l0 > 1`` the bound ``1 - (1 - delta_key)^l0`` (module notes)."""
        if not self.composed:
            return self.worst.worst
        return _compose_delta(self.worst.worst, self.l0)

    def verdict(self) -> str:
        w = self.worst
        head = "VIOLATION" if self.violation else "holds"
        tail = (
            f"(worst pair {w.first} vs {w.second} (units, records); {len(self.pairs)} pairs, "
            "both directions)"
        )
        claim = f"{head}: {self.name} claims ({self.epsilon:g}, {self.delta:.3g})-DP"
        if not self.composed:
            return (
                f"{claim}; exact delta at epsilon {self.epsilon:g} is {self.delta_needed:.4g}, "
                f"exact epsilon at delta {self.delta:.3g} is {self.epsilon_needed:.4g} {tail}"
            )
        ke, kd = self.checked_epsilon, self.checked_delta
        return (
            f"{claim}, as ({ke:.4g}, {kd:.3g}) per key over {self.l0} keys; per key, exact "
            f"delta at epsilon {ke:.4g} is {w.worst:.4g} and exact epsilon at delta {kd:.3g} "
            f"is {self.key_epsilon_needed:.4g}; composed over {self.l0} keys, delta at epsilon "
            f"{self.epsilon:g} is at most {self.delta_needed:.4g} and epsilon at delta "
            f"{self.delta:.3g} at most {self.epsilon_needed:.4g} {tail}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "audit": "exact",
            "mechanism": self.name,
            "claim": {"epsilon": self.epsilon, "delta": self.delta},
            "neighbouring": self.neighbouring,
            "parameters": self.parameters,
            "l0": self.l0,
            "profile_kind": "per-key, composed over l0 keys" if self.per_key else "joint",
            "checked": {"epsilon": self.checked_epsilon, "delta": self.checked_delta},
            "delta_at_claimed_epsilon": self.delta_needed,
            "epsilon_at_claimed_delta": self.epsilon_needed,
            # true when the two figures above are composition bounds over l0 keys, not exact
            "composed_bound": self.composed,
            "per_key": {
                "delta_at_checked_epsilon": self.worst.worst,
                "epsilon_at_checked_delta": self.key_epsilon_needed,
            },
            "violation": self.violation,
            "worst_pair": self.worst.to_dict(),
            "profile": {"epsilon": self.profile_epsilons, "delta": self.profile_deltas},
            "pairs": [p.to_dict() for p in self.pairs],
            "verdict": self.verdict(),
        }


def _compose_delta(delta: float, k: int) -> float:
    """``1 - (1 - delta)^k`` rounded up: the delta of ``k``-fold composition at ``k`` times the
    epsilon (Kairouz, Oh and Viswanath 2015, Theorem 3.3, ``i = 0``).

    >>> _compose_delta(0.5, 2), _compose_delta(0.0, 3), _compose_delta(1.0, 3)
    (0.75, 0.0, 1.0)
    """
    d = min(Fraction(1), max(Fraction(0), Fraction(delta)))
    return float_up(1 - (1 - d) ** k)


def _joint(p: KeyDistribution, l0: int) -> tuple[dict[Any, Any], Any]:
    return product_distribution(*[p.probabilities] * l0), 1 - (1 - p.tail) ** l0


def audit_exact(
    mechanism: Mechanism,
    *,
    max_count: int | None = None,
    profile_points: int = 25,
    pairs: list[Pair] | None = None,
) -> ExactAudit:
    """The exact audit of ``mechanism`` against the guarantee it claims (module notes).

    Args:
        mechanism: A privhist mechanism, possibly with hand-set parameters.
        max_count: Largest unit count enumerated (default: two past the first count released
            with probability 1, at most 60).
        profile_points: Number of epsilons on the profile curve (0 for none).
        pairs: Chosen one-key pairs ``((units, count), (units, count))`` instead of the
            enumeration; each must be one neighbouring step (units up by 1, records by 1..c).
    """
    fn = "audit_exact"
    if not isinstance(mechanism, Mechanism):
        raise ValidationError("mechanism", fn, "a privhist Mechanism", mechanism)
    if mechanism.name == "pure-sparse":
        raise UnsupportedError(
            "audit exact: pure-sparse mixes its release with a random histogram over the whole "
            "universe; its exact joint checks are in its own tests, not per key"
        )
    g = mechanism.guarantee()
    l0 = mechanism.neighbouring.l0_sensitivity
    c = mechanism.neighbouring.max_contributions_per_partition
    per_key = mechanism.per_key_composable
    if pairs is not None:
        for a, b in pairs:
            ok = b[0] - a[0] == 1 and 1 <= b[1] - a[1] <= c and 0 <= a[0] <= a[1] <= c * a[0]
            if not ok or not b[0] <= b[1] <= c * b[0]:
                raise ValidationError(
                    "pairs",
                    fn,
                    f"one neighbouring step: (u, n) vs (u + 1, n + j), 1 <= j <= {c}, "
                    "u <= n <= c u",
                    f"{a} vs {b}",
                )
        pairs = list(pairs)
    if per_key:
        kb = mechanism.key_budget()
        eps_c, delta_c = kb.epsilon, kb.delta
        pairs = pairs or neighbouring_pairs(mechanism, max_count)
    else:
        eps_c, delta_c = g.epsilon, g.delta
        pairs = pairs or [((n, n), (n + 1, n + c)) for n in (0, 1, 3)]
    dists: dict[tuple[int, int], KeyDistribution] = {}

    def law(x: tuple[int, int]) -> tuple[dict[Any, Any], Any]:
        if x not in dists:
            dists[x] = mechanism.key_distribution(*x)
        d = dists[x]
        return _joint(d, l0) if not per_key else (d.probabilities, d.tail)

    results = []
    for a, b in pairs:
        (p, tp), (q, tq) = law(a), law(b)
        res = check_dp(p, q, eps_c, delta_c, slack=SLACK, tail_p=tp, tail_q=tq)
        results.append(PairResult(a, b, float(res.delta_pq), float(res.delta_qp), bool(res.holds)))
    # the pairs that matter most: the largest delta at the claimed epsilon, and at half of it
    # (where the pairs that set the epsilon needed show); epsilon and profile on those
    top = sorted(results, key=lambda r: r.worst, reverse=True)[:3]
    if eps_c > 0:
        half = []
        for a, b in pairs:
            (p, tp), (q, tq) = law(a), law(b)
            res = check_dp(p, q, eps_c / 2, 1, tail_p=tp, tail_q=tq)
            half.append((float(res.worst), a, b))
        half.sort(key=lambda t: t[0], reverse=True)
        known = {(r.first, r.second) for r in top}
        top += [
            r
            for r in results
            if (r.first, r.second) in {(a, b) for _, a, b in half[:3]}
            and (r.first, r.second) not in known
        ]
    eps_needed = 0.0
    for r in top:
        (p, tp), (q, tq) = law(r.first), law(r.second)
        eps_needed = max(
            eps_needed,
            epsilon_for_delta(p, q, delta_c + SLACK, tail_p=tp, tail_q=tq, tolerance=1e-7),
        )
    grid: list[float] = []
    curve: list[float] = []
    if profile_points > 0:
        hi = max(3 * eps_c, 1.5 * eps_needed if math.isfinite(eps_needed) else 0.0, 1e-3)
        grid = [hi * i / (profile_points - 1) for i in range(profile_points)]
        curve = [0.0] * len(grid)
        for r in top:
            (p, tp), (q, tq) = law(r.first), law(r.second)
            vals = privacy_profile(p, q, grid, tail_p=tp, tail_q=tq)
            curve = [max(cv, float(mpmath.mpf(v))) for cv, v in zip(curve, vals, strict=True)]
    scale = l0 if per_key else 1
    return ExactAudit(
        name=mechanism.name,
        epsilon=g.epsilon,
        delta=g.delta,
        neighbouring=mechanism.neighbouring.describe(),
        parameters=mechanism.parameters(),
        l0=l0,
        per_key=per_key,
        checked_epsilon=float(eps_c),
        checked_delta=float(delta_c),
        pairs=results,
        epsilon_needed=eps_needed * scale,
        profile_epsilons=[e * scale for e in grid],
        profile_deltas=[_compose_delta(d, scale) for d in curve],
        key_epsilon_needed=eps_needed,
    )


def plot_exact(audit: ExactAudit, path: str | Path) -> Path:
    """Claimed guarantee against the exact privacy profile, ``delta(epsilon)`` on a log scale."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnsupportedError("plotting needs matplotlib: pip install 'privhist[plot]'") from None
    fig: Any
    fig, ax = plt.subplots(figsize=(7, 4))
    eps = np.array(audit.profile_epsilons)
    dl = np.maximum(np.array(audit.profile_deltas), 1e-300)
    ax.semilogy(eps, dl, label="exact profile (max over the worst pairs)", linewidth=2)
    ax.axvline(audit.epsilon, color="grey", linestyle=":", linewidth=1)
    if audit.delta > 0:
        ax.axhline(audit.delta, color="grey", linestyle=":", linewidth=1)
    ax.plot(
        [audit.epsilon],
        [max(audit.delta, 1e-300)],
        marker="o",
        color="red" if audit.violation else "green",
        label=f"claimed ({audit.epsilon:g}, {audit.delta:.3g})",
    )
    positive = dl[dl > 1e-300]
    if positive.size:
        floor = min(float(positive.min()), audit.delta or 1.0) / 10
        ax.set_ylim(bottom=max(floor, 1e-30))
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    verdict = "VIOLATION" if audit.violation else "holds"
    ax.set_title(f"{audit.name}: exact privacy profile vs claim ({verdict})", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out
