"""Privacy filters: may one more (adaptively chosen) release be run within a total budget?

A filter looks at the events already run and the one requested, and admits it or not; it is
*valid* at ``(E, D)`` when every interaction it lets run, with each release chosen after seeing
the previous outputs, is ``(E, D)``-DP (Rogers, Roth, Ullman and Vadhan 2016, "Privacy odometers
and filters", Definition 4). Two rules are offered, and a dataset uses one *regime*, fixed before
its first release (a public choice that no output can influence):

**basic** (:func:`basic_admits`): the epsilons add and the deltas add, exactly, and must stay
within ``(E, D)``. Valid for approximate-DP releases with adaptively chosen parameters (Rogers et
al. 2016, Theorem 3.6). This is the ledger's rule today and the default regime.

**renyi** (:func:`renyi_admission`): every event must have Renyi curves
(:func:`privhist.accounting.events.event_rdp`). Let ``S`` be the ``J`` orders of
:data:`RENYI_ORDERS`. A release is admitted when, with it,

* the events are all pure and their epsilons add to at most ``E`` (rule ``"basic-pure"``), or
* for some order ``alpha`` in ``S``, ``sum_i rho_i(alpha) <= E - log(J / D) / (alpha - 1)``
  (rule ``"renyi(alpha)"``).

*Theorem used.* Feldman and Zrnic 2021 ("Individual privacy accounting via a Renyi filter",
NeurIPS, Theorem 3.1): if each step is ``(alpha, rho_t)``-RDP with ``rho_t`` chosen adaptively,
and the interaction is stopped as soon as ``sum_t rho_t`` would exceed ``B``, the interaction is
``(alpha, B)``-RDP; their proof shows ``E[exp((alpha - 1) L)] <= exp((alpha - 1) B)`` for the
privacy loss ``L`` of the stopped interaction, for any stopping time under which the sum stays
within ``B``. By Markov's inequality ``Pr[L > E] <= exp((alpha - 1)(B - E)) = D / J`` with the
``B`` above. *Union over the rules.* Our interaction stops at ``T``, the first request no rule
admits. For each order, ``T_alpha`` (the last step the order's own filter would run, capped at
``T``) is a stopping time within that filter's budget, so ``Pr[L_(T_alpha) > E] <= D / J``; for
pure events ``L_(T_pure) <= E`` surely. At the end of every run some rule admitted the last step,
and every earlier step too (the sums only grow), so ``L_T`` equals one of these stopped losses and
``Pr[L_T > E] <= J (D / J) = D``. A privacy-loss tail ``Pr[L > E] <= D`` in both directions gives
``(E, D)``-DP. The curves must bound the Renyi divergence in both orders of the neighbouring pair
(true of the Gaussian, Laplace and pure events here), and hold whatever the earlier outputs
(they depend only on each release's public parameters).

Why a regime and not "whichever rule admits": the union above needs each rule's guarantee as a
privacy-loss tail; basic composition of ``(eps, delta)`` releases with ``delta > 0`` is not one,
so switching between it and the Renyi rule according to the path taken is not covered.

>>> from privhist.accounting.composition import GaussianEvent
>>> a = renyi_admission([GaussianEvent(10.0)] * 5, GaussianEvent(10.0), Budget(2.0, 1e-6))
>>> a.admitted, a.rule
(True, 'renyi(12)')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext

from privhist.accounting.composition import PrivacyEvent
from privhist.accounting.events import event_rdp, pure_epsilon
from privhist.core.budget import Budget
from privhist.core.errors import ValidationError

__all__ = [
    "RENYI_ORDERS",
    "Admission",
    "RenyiView",
    "basic_admits",
    "renyi_admission",
    "renyi_budget",
    "renyi_view",
]

#: the orders of the Renyi filter (fixed: the union bound splits delta among them)
RENYI_ORDERS: tuple[float, ...] = (
    1.5,
    2.0,
    3.0,
    4.0,
    5.0,
    6.0,
    8.0,
    10.0,
    12.0,
    16.0,
    20.0,
    24.0,
    32.0,
    48.0,
    64.0,
    128.0,
)

_IV = MPIntervalContext()
_IV.prec = 128


@dataclass(frozen=True)
class Admission:
    """A filter's answer: whether the release is admitted and by which rule
    (``"basic"``, ``"basic-pure"`` or ``"renyi(alpha)"``), with a sentence saying why not."""

    admitted: bool
    rule: str | None
    detail: str


def basic_admits(spent: Sequence[Budget], requested: Budget, total: Budget) -> bool:
    """Basic composition, exactly on the floats' rational values.

    >>> basic_admits([Budget(0.5, 1e-8)] * 3, Budget(0.5, 1e-8), Budget(2.0, 1e-6))
    True
    >>> basic_admits([Budget(0.5, 1e-8)] * 4, Budget(0.5, 1e-8), Budget(2.0, 1e-6))
    False
    """
    eps = sum((Fraction(b.epsilon) for b in spent), Fraction(requested.epsilon))
    delta = sum((Fraction(b.delta) for b in spent), Fraction(requested.delta))
    return eps <= Fraction(total.epsilon) and delta <= Fraction(total.delta)


def renyi_budget(total: Budget, order: float, orders: int = len(RENYI_ORDERS)) -> Fraction:
    """``E - log(J / D) / (alpha - 1)``, rounded down (exact rational; may be negative)."""
    if not total.delta > 0:
        raise ValidationError("total", "renyi_budget", "a budget with delta > 0", total)
    e, d = Fraction(total.epsilon), Fraction(total.delta)
    iv = (_IV.mpf(e.numerator) / e.denominator) - _IV.log(
        _IV.mpf(orders * d.denominator) / d.numerator
    ) / (_IV.mpf(Fraction(order).numerator) / Fraction(order).denominator - 1)
    p, q = libmp.to_rational(iv._mpi_[0])
    return Fraction(p, q)


def renyi_admission(
    spent: Sequence[PrivacyEvent],
    requested: PrivacyEvent,
    total: Budget,
    orders: Sequence[float] = RENYI_ORDERS,
) -> Admission:
    """The Renyi regime's rule (module notes): ``basic-pure`` first, then each order in turn.

    Returns an :class:`Admission`; an event without Renyi curves is not admitted (its
    ``detail`` says so).
    """
    events = [*spent, requested]
    pure = [pure_epsilon(e) for e in events]
    if all(p is not None for p in pure):
        if sum((p for p in pure if p is not None), Fraction(0)) <= Fraction(total.epsilon):
            return Admission(True, "basic-pure", "pure releases within epsilon")
    if total.delta <= 0:
        return Admission(False, None, "a Renyi filter needs a total delta > 0")
    best: Any = None
    for order in orders:
        values = [event_rdp(e, order) for e in events]
        if any(v is None for v in values):
            return Admission(
                False,
                None,
                "the release has no Renyi guarantee (an (epsilon, delta) guarantee with "
                "delta > 0), which the Renyi regime cannot compose",
            )
        used = sum((v for v in values if v is not None), Fraction(0))
        room = renyi_budget(total, order, len(orders))
        if used <= room:
            return Admission(True, f"renyi({order:g})", f"order {order:g}: {float(used):.6g}")
        gap = used - room
        if best is None or gap < best[0]:
            best = (gap, order)
    return Admission(
        False, None, f"over the Renyi budget at every order (closest: order {best[1]:g})"
    )


@dataclass(frozen=True)
class RenyiView:
    """What remains of a Renyi-regime dataset, as its filter sees it (not the sum of the
    releases' stated epsilons, which the filter does not add).

    Attributes:
        releases: The number of releases run.
        order: The order ``alpha`` that leaves the most room for a further release.
        used: ``sum_i rho_i(alpha)`` at that order (exact, rounded up).
        budget: The filter's Renyi budget at that order, ``E - log(J / D) / (alpha - 1)``.
        rho_left: The largest ``rho`` such that a further ``rho``-zCDP release (Renyi curve
            ``alpha rho``, e.g. a Gaussian of ``sigma = s / sqrt(2 rho)`` at L2 sensitivity
            ``s``) is admitted by a Renyi rule: ``max_alpha (budget(alpha) - used(alpha)) /
            alpha`` over the filter's orders, at least 0.
        pure_left: When every release so far is pure, the epsilon a further pure release may
            still have under the ``basic-pure`` rule; None otherwise.
    """

    releases: int
    order: float
    used: Fraction
    budget: Fraction
    rho_left: Fraction
    pure_left: Fraction | None

    @property
    def sigma_needed(self) -> float:
        """The least Gaussian ``sigma`` (at L2 sensitivity 1) a further release may have
        (``1 / sqrt(2 rho_left)``; ``inf`` when nothing is left)."""
        if self.rho_left <= 0:
            return float("inf")
        return float((1 / (2 * self.rho_left)) ** 0.5)


def renyi_view(
    spent: Sequence[PrivacyEvent], total: Budget, orders: Sequence[float] = RENYI_ORDERS
) -> RenyiView:
    """The Renyi filter's view of ``spent`` within ``total`` (:class:`RenyiView`).

    >>> from privhist.accounting.composition import GaussianEvent
    >>> from privhist.accounting.events import ZcdpEvent
    >>> spent, total = [GaussianEvent(10.0)] * 5, Budget(2.0, 1e-6)
    >>> v = renyi_view(spent, total)
    >>> v.releases, v.pure_left is None, 0 < v.used < v.budget
    (5, True, True)
    >>> rho = float(v.rho_left)    # a further release of a little less fits, a little more not
    >>> renyi_admission(spent, ZcdpEvent(rho * 0.999), total).admitted
    True
    >>> renyi_admission(spent, ZcdpEvent(rho * 1.001), total).admitted
    False

    Raises:
        ValidationError: An event has no Renyi curve (such a release is never admitted by the
            Renyi regime, so its ledger is damaged), or ``total.delta`` is 0.
    """
    pure = [pure_epsilon(e) for e in spent]
    pure_left = None
    if all(p is not None for p in pure):
        pure_left = max(
            Fraction(0),
            Fraction(total.epsilon) - sum((p for p in pure if p is not None), Fraction(0)),
        )
    best: tuple[Fraction, float, Fraction, Fraction] | None = None
    for order in orders:
        values = [event_rdp(e, order) for e in spent]
        if any(v is None for v in values):
            raise ValidationError(
                "spent", "renyi_view", "events with Renyi curves", "an event without one"
            )
        used = sum((v for v in values if v is not None), Fraction(0))
        room = renyi_budget(total, order, len(orders))
        left = max(Fraction(0), (room - used) / Fraction(order))
        if best is None or left > best[0]:
            best = (left, order, used, room)
    assert best is not None
    return RenyiView(len(spent), best[1], best[2], best[3], best[0], pure_left)
