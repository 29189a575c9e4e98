"""``DryRun``: what a release would cost and give, answered before any data is read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from privhist.accounting.ledger import BudgetAmount
from privhist.core.budget import Budget
from privhist.core.neighbouring import Neighbouring
from privhist.mechanisms.base import Mechanism

#: the reporting curve covers true counts up to at least this, and past the count at which a key
#: is always released (by a quarter of it), so the whole rise is shown
MIN_CURVE_COUNT = 40
#: ... but never beyond this (the curve of a huge threshold is summarised, not listed)
MAX_CURVE_COUNT = 10_000


@dataclass(frozen=True)
class DryRun:
    """What a release would cost and give, computed without data or budget.

    Attributes:
        release: the release's name (``stability``, ``quantiles (hierarchical)``).
        cost: the budget it would charge.
        neighbouring: the relation its guarantee is for.
        remaining: the dataset's remaining budget now (None without a ledger).
        allowed: whether the ledger would accept the charge (True without a ledger).
        mechanism: the per-key mechanism each key goes through, whose reporting curve says how
            likely a key of each true count is to appear; None where no single curve describes
            the release.
        details: the release's parameters and choices (JSON-friendly).

    Example:
        >>> from privhist import Budget, Session
        >>> with Session.in_memory(Budget(2.0, 1e-6)) as s:
        ...     plan = s.histogram("visits.csv", key="page", epsilon=1, delta=1e-8, dry_run=True)
        >>> plan.cost, plan.allowed, plan.count_at_half() > 10
        (Budget(epsilon=1.0, delta=1e-08), True, True)
    """

    release: str
    cost: Budget
    neighbouring: Neighbouring
    remaining: BudgetAmount | None
    allowed: bool
    mechanism: Mechanism | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def plan(self, max_count: int | None = None) -> dict[str, Any] | None:
        """The mechanism's plan (:func:`privhist.planning.plan.plan`): parameters, noise, the
        count released with probability 1/2 and always, and the reporting curve up to
        ``max_count`` (default: past the count always released); None without a mechanism."""
        from privhist.planning.plan import count_at, plan

        if self.mechanism is None:
            return None
        if max_count is not None:
            return plan(self.mechanism, max_count)
        n = MIN_CURVE_COUNT
        while True:
            rp = self.mechanism.reporting_probability(n)
            always = count_at(rp, 1.0)
            if (always is not None and always + always // 4 <= n) or n >= MAX_CURVE_COUNT:
                break
            n = min(4 * n, MAX_CURVE_COUNT)
        if always is not None:
            n = max(MIN_CURVE_COUNT, always + max(always // 4, 5))
        return plan(self.mechanism, min(n, MAX_CURVE_COUNT))

    def reporting_curve(self, max_count: int | None = None) -> list[float]:
        """Pr[a key is released] for a key of true count 0..max_count (default: past the count
        at which a key is always released); empty without a mechanism."""
        p = self.plan(max_count)
        return [] if p is None else list(p["reporting_probability"])

    def count_at_half(self) -> int | None:
        """The smallest true count released with probability at least 1/2 (None without a
        mechanism, or beyond the curve)."""
        p = self.plan()
        return None if p is None else p["count_at_half"]

    def to_dict(self, max_count: int | None = None) -> dict[str, Any]:
        """The dry run as one JSON-friendly object (what ``--dry-run --json`` prints)."""
        return {
            "dry_run": True,
            "release": self.release,
            "cost": {"epsilon": self.cost.epsilon, "delta": self.cost.delta},
            "neighbouring": self.neighbouring.describe(),
            "remaining": None
            if self.remaining is None
            else {"epsilon": self.remaining.epsilon, "delta": self.remaining.delta},
            "allowed": self.allowed,
            **self.details,
            "plan": self.plan(max_count),
        }

    def rows(self) -> list[tuple[str, str]]:
        """The summary as ``(what, value)`` rows (what ``--dry-run`` prints as a table)."""
        out = [
            ("release", self.release),
            ("cost", f"epsilon {self.cost.epsilon:.6g}, delta {self.cost.delta:.3g}"),
            ("neighbours", self.neighbouring.describe()),
            (
                "remaining",
                "no ledger"
                if self.remaining is None
                else f"epsilon {self.remaining.epsilon:.6g}, delta {self.remaining.delta:.3g}",
            ),
            ("allowed", "yes" if self.allowed else "NO: the ledger would refuse it"),
        ]
        for k, v in self.details.items():
            if isinstance(v, dict | list):
                continue
            out.append((k.replace("_", " "), f"{v:.6g}" if isinstance(v, float) else str(v)))
        explanation = self.details.get("explanation")
        if isinstance(explanation, dict):
            out.extend(_explained(explanation))
        p = self.plan()
        if p is not None:
            threshold = p["parameters"].get("threshold")
            if threshold is not None:
                out.append(("threshold", str(threshold)))
            if p.get("noise_std") is not None:
                out.append(("noise std", f"{p['noise_std']:.4g}"))
            out.append(("released w.p. 1/2 from count", str(p["count_at_half"])))
            out.append(("always released from count", str(p["count_always_released"])))
        return out

    def __str__(self) -> str:
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _explained(explanation: dict[str, Any]) -> list[tuple[str, str]]:
    """The spend and the ranking of a plan's explanation (the user-level planner's) as rows."""
    rows: list[tuple[str, str]] = []
    spend = explanation.get("spend")
    if isinstance(spend, dict):
        parts = [
            f"{name.replace('_', ' ')} epsilon {part['epsilon']:.6g}"
            + (f", delta {part['delta']:.3g}" if part.get("delta") else "")
            for name, part in spend.items()
            if name != "total" and isinstance(part, dict) and "epsilon" in part
        ]
        if parts:
            how = spend.get("composition")
            rows.append(("spend", "; ".join(parts) + (f"; {how}" if how else "")))
    ranking = explanation.get("ranking") or []
    if ranking and "ranking" not in ranking[0]:  # one ranking, at the stated cap
        ranking = [{"degree": ranking[0].get("cap"), "ranking": ranking}]
    for level in ranking:
        ranked = ", ".join(
            f"{m.get('mechanism') or m.get('mechanism_name')} {m['users_at_half']:.6g}"
            for m in level["ranking"]
            if m.get("users_at_half") is not None
        )
        rows.append((f"users for Pr 1/2 at {level['degree']} keys/user", ranked))
    return rows
