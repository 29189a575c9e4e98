"""Statistical lower bounds on (epsilon, delta) from samples of two output distributions.

The definition read backwards. ``M`` is (epsilon, delta)-DP exactly when for every neighbouring
pair with output laws ``P`` and ``Q`` and every event ``E``::

    P(E) <= e^epsilon Q(E) + delta        (and the same with P and Q exchanged)

(Dwork and Roth 2014, "The Algorithmic Foundations of Differential Privacy", Definition 2.4;
Bichsel et al. 2021, "DP-Sniper: black-box discovery of differential privacy violations using
classifiers", IEEE S&P, equation (1) and its (epsilon, delta) form). So any event with
``P(E) - e^epsilon Q(E) > delta`` disproves the claim. From ``N`` independent outputs on each side,
Clopper-Pearson bounds (Clopper and Pearson 1934, Biometrika 26(4)) give, with probability at
least ``1 - a`` each, ``P(E) >= p_lo`` and ``Q(E) <= q_hi``; hence, on the intersection,

    delta_lb = p_lo - e^epsilon q_hi              (a lower bound on the delta at epsilon)
    epsilon_lb = ln((p_lo - delta) / q_hi)        (a lower bound on the epsilon at delta)

— the bound used by Jagielski, Ullman and Oprea 2020 ("Auditing differentially private machine
learning: how private is private SGD?", NeurIPS) for the privacy of DP-SGD. ``delta_lb > delta``
and ``epsilon_lb > epsilon`` are the same statement; both are reported.

Choosing events. The most powerful events are likelihood-ratio sets ``{o : P(o)/Q(o) >= t}``
(Neyman-Pearson; DP-Sniper's threshold attacks). They are estimated on a separate *selection*
sample: outputs are ranked by their smoothed empirical ratio and the prefix maximising the lower
bound (computed on the selection sample) is chosen, for the epsilon and for the delta objective
and in each direction. Only then are fresh *estimation* samples counted, and every chosen event's
two bounds are taken at level ``(1 - confidence) / (2 k)`` for ``k`` events (a union bound), so
the reported bounds hold simultaneously with probability at least ``confidence``.

Resolution. With no occurrence at all on the ``Q`` side the upper bound is still
``q_hi = 1 - (a)^(1/N)``; a delta below ``resolution = e^epsilon q_hi`` therefore cannot be told
from zero with ``N`` samples. The report carries this number, so that a pass at small delta is
read for what it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError

__all__ = [
    "EventBound",
    "PairAudit",
    "audit_samples",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "outcome_ids",
]

IntArray = npt.NDArray[np.int64]


def clopper_pearson_lower(k: Any, n: int, a: float) -> npt.NDArray[np.float64]:
    """One-sided lower confidence bound at level ``1 - a`` on a binomial proportion.

    ``Beta(a; k, n - k + 1)`` quantile, 0 when ``k = 0`` (Clopper and Pearson 1934).

    >>> float(clopper_pearson_lower(0, 10, 0.05))
    0.0
    >>> round(float(clopper_pearson_lower(10, 10, 0.05)), 4)  # 0.05 ** (1/10)
    0.7411
    """
    from scipy import stats  # here: scipy is slow to import

    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lo = stats.beta.ppf(a, k, n - k + 1)
    return np.where(k <= 0, 0.0, lo).astype(np.float64)


def clopper_pearson_upper(k: Any, n: int, a: float) -> npt.NDArray[np.float64]:
    """One-sided upper confidence bound at level ``1 - a``: ``Beta(1 - a; k + 1, n - k)``.

    >>> round(float(clopper_pearson_upper(0, 10, 0.05)), 4)  # 1 - 0.05 ** (1/10)
    0.2589
    """
    from scipy import stats  # here: scipy is slow to import

    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        hi = stats.beta.ppf(1 - a, k + 1, n - k)
    return np.where(k >= n, 1.0, hi).astype(np.float64)


def outcome_ids(*blocks: IntArray) -> tuple[list[IntArray], int]:
    """Integer ids of the distinct rows over all ``blocks`` (2-D int64 arrays, same width)."""
    widths = {b.shape[1] for b in blocks}
    if len(widths) != 1:
        raise ValidationError("outputs", "audit", "feature rows of one width", sorted(widths))
    stacked = np.concatenate(blocks, axis=0)
    _, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    out, start = [], 0
    for b in blocks:
        out.append(inverse[start : start + b.shape[0]])
        start += b.shape[0]
    return out, int(inverse.max()) + 1 if inverse.size else 0


@dataclass(frozen=True)
class EventBound:
    """One event and its bounds, from the estimation sample.

    ``direction`` is ``"P>Q"`` when the event is tested as ``P(E) <= e^eps Q(E) + delta`` (``P``
    the first dataset of the pair) and ``"Q>P"`` for the reverse inequality.
    """

    direction: str
    objective: str
    outcomes: int
    description: str
    count_first: int
    count_second: int
    first_lower: float
    second_upper: float
    epsilon_lower: float
    delta_lower: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PairAudit:
    """Outcome of :func:`audit_samples` on one neighbouring pair."""

    epsilon: float
    delta: float
    confidence: float
    samples: int
    selection_samples: int
    estimation_samples: int
    epsilon_lower: float
    delta_lower: float
    resolution: float
    events: tuple[EventBound, ...] = field(default_factory=tuple)

    @property
    def violation(self) -> bool:
        """Whether the claim is disproved at the stated confidence."""
        return self.delta_lower > self.delta or self.epsilon_lower > self.epsilon

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "events"}
        d["violation"] = self.violation
        d["events"] = [e.to_dict() for e in self.events]
        return d


def _bounds(
    kp: Any, kq: Any, n: int, a: float, epsilon: float, delta: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], Any, Any]:
    p_lo = clopper_pearson_lower(kp, n, a)
    q_hi = clopper_pearson_upper(kq, n, a)
    d_lb = p_lo - math.exp(epsilon) * q_hi
    with np.errstate(divide="ignore", invalid="ignore"):
        e_lb = np.where(p_lo > delta, np.log(np.maximum(p_lo - delta, 1e-300) / q_hi), -np.inf)
    return p_lo, q_hi, e_lb, d_lb


def _select(
    cp: IntArray, cq: IntArray, n: int, a: float, epsilon: float, delta: float
) -> dict[str, npt.NDArray[np.bool_]]:
    """Likelihood-ratio prefix events maximising each objective on the selection sample."""
    seen = np.nonzero((cp + cq) > 0)[0]
    if seen.size == 0:
        return {}
    ratio = (cp[seen] + 0.5) / (cq[seen] + 0.5)
    order = seen[np.argsort(-ratio, kind="stable")]
    kp, kq = np.cumsum(cp[order]), np.cumsum(cq[order])
    _, _, e_lb, d_lb = _bounds(kp, kq, n, a, epsilon, delta)
    out = {}
    for name, score in (("epsilon", e_lb), ("delta", d_lb)):
        best = int(np.argmax(score))
        mask = np.zeros(cp.shape[0], dtype=np.bool_)
        mask[order[: best + 1]] = True
        out[name] = mask
    return out


def audit_samples(
    first: IntArray,
    second: IntArray,
    epsilon: float,
    delta: float,
    *,
    confidence: float = 0.95,
    selection_fraction: float = 0.25,
    describe: Any = None,
) -> PairAudit:
    """Lower bounds on epsilon (at ``delta``) and delta (at ``epsilon``) from two samples.

    Args:
        first: Feature rows (2-D int64, one row per output) drawn on the first dataset.
        second: The same number of rows drawn on its neighbour.
        epsilon: The claimed epsilon.
        delta: The claimed delta.
        confidence: Probability that all reported bounds hold simultaneously.
        selection_fraction: Share of each sample used only to choose the events.
        describe: Optional ``f(row) -> str`` naming an outcome in the report.

    Returns:
        A :class:`PairAudit`; ``violation`` is True when a lower bound exceeds the claim.
    """
    fn = "audit_samples"
    if first.ndim != 2 or second.ndim != 2 or first.shape != second.shape:
        raise ValidationError("second", fn, f"an array of shape {first.shape}", second.shape)
    if not 0 < confidence < 1:
        raise ValidationError("confidence", fn, "in (0, 1)", confidence)
    if not 0 < selection_fraction < 1:
        raise ValidationError("selection_fraction", fn, "in (0, 1)", selection_fraction)
    n = first.shape[0]
    n_sel = int(n * selection_fraction)
    n_est = n - n_sel
    if n_sel < 1 or n_est < 1:
        raise ValidationError("samples", fn, "at least 2 per side", n)
    (ids_p, ids_q), n_out = outcome_ids(first, second)
    sel_p = np.bincount(ids_p[:n_sel], minlength=n_out)
    sel_q = np.bincount(ids_q[:n_sel], minlength=n_out)
    est_p = np.bincount(ids_p[n_sel:], minlength=n_out)
    est_q = np.bincount(ids_q[n_sel:], minlength=n_out)
    a_total = 1 - confidence
    # events chosen on the selection sample, at the level a single event would get
    chosen: list[tuple[str, str, npt.NDArray[np.bool_]]] = []
    for direction, cp, cq in (("P>Q", sel_p, sel_q), ("Q>P", sel_q, sel_p)):
        for objective, mask in _select(cp, cq, n_sel, a_total / 2, epsilon, delta).items():
            if not any(d == direction and np.array_equal(m, mask) for d, _, m in chosen):
                chosen.append((direction, objective, mask))
    k = max(len(chosen), 1)
    a = a_total / (2 * k)
    rows = np.unique(np.concatenate([first, second]), axis=0) if describe else None
    events = []
    for direction, objective, mask in chosen:
        cp, cq = (est_p, est_q) if direction == "P>Q" else (est_q, est_p)
        kp, kq = int(cp[mask].sum()), int(cq[mask].sum())
        p_lo, q_hi, e_lb, d_lb = _bounds(kp, kq, n_est, a, epsilon, delta)
        text = ""
        if describe is not None and rows is not None:
            idx = np.nonzero(mask)[0]
            names = [describe(rows[i]) for i in idx[:6]]
            text = "; ".join(names) + (f"; ... ({idx.size} outcomes)" if idx.size > 6 else "")
        events.append(
            EventBound(
                direction=direction,
                objective=objective,
                outcomes=int(mask.sum()),
                description=text,
                count_first=kp,
                count_second=kq,
                first_lower=float(p_lo),
                second_upper=float(q_hi),
                epsilon_lower=float(e_lb),
                delta_lower=float(max(float(d_lb), 0.0)),
            )
        )
    eps_lb = max((e.epsilon_lower for e in events), default=-math.inf)
    delta_lb = max((e.delta_lower for e in events), default=0.0)
    resolution = math.exp(epsilon) * float(clopper_pearson_upper(0, n_est, a))
    return PairAudit(
        epsilon=float(epsilon),
        delta=float(delta),
        confidence=float(confidence),
        samples=n,
        selection_samples=n_sel,
        estimation_samples=n_est,
        epsilon_lower=max(eps_lb, 0.0),
        delta_lower=delta_lb,
        resolution=resolution,
        events=tuple(events),
    )
