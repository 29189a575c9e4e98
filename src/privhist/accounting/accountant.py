"""The one accountant: the ``(epsilon, delta)`` guarantee of a privacy event.

Every releasable object states what it does as an event (:mod:`privhist.accounting.events`);
:func:`guarantee_of` turns the event into the guarantee the object prints, and :func:`account`
shows every bound it tried. The rules, each a theorem about the event's parts:

* ``basic`` -- every part states an ``(eps_i, delta_i)`` (approximate-DP events, pure Laplace
  and discrete Laplace noise, dominating pairs with a stated point): the epsilons add and the
  deltas add, exactly, rounded up (Dwork and Roth 2014, Theorem 3.16). Without a target delta
  this is the guarantee; with one, it applies when the deltas add up to at most the target.
* ``advanced`` -- ``k`` parts stating the same ``(eps, delta)``, at a target ``D``:
  advanced composition with ``delta' = D - k delta`` (Dwork, Rothblum and Vadhan 2010;
  Dwork and Roth 2014, Theorem 3.20).
* ``renyi`` -- every part has a Renyi curve (:func:`privhist.accounting.events.event_rdp`):
  the curves add (Mironov 2017, Proposition 1) and equation (8) of the federated frequency paper
  converts (:func:`privhist.accounting.renyi.rdp_to_dp`), at the orders of the event's curves
  (or :data:`privhist.accounting.renyi.DEFAULT_ORDERS`).
* ``zcdp_threshold`` -- a weighted Gaussian selection
  (:class:`~privhist.accounting.events.ZcdpThresholdEvent`) composed with it and other zCDP
  parts: the rhos add and the threshold failure probabilities add, then
  :func:`privhist.accounting.zcdp.certified_delta` is inverted
  (:mod:`privhist.accounting.zcdp`; :func:`threshold_delta` gives the delta at an epsilon).
* ``pld_certified`` -- every part is a dominating pair
  (:class:`~privhist.accounting.events.DominatingPairEvent`): the certified PLD of their
  composition (:mod:`privhist.accounting.certified`; adaptive composition of dominating pairs,
  Zhu, Dong and Wang 2022, Theorem 10), a proven upper bound.
* ``pld`` -- the same with ``dp_accounting``'s float64 PLD, and for noise events (Laplace,
  Gaussian, their discrete forms, approximate DP) the PLD of
  :func:`~privhist.accounting.composition.pld_compose`: an estimate, computed only when asked
  (reported beside the certified one, used while searching a calibration, or by a mechanism
  calibrated by that very composition, such as the dense Gaussian histogram), never a default.

With a target delta the guarantee is the smallest epsilon among the rules that apply (on a tie,
a PLD rule, then the order above).

>>> from privhist.accounting.composition import ApproxDPEvent, GaussianEvent
>>> guarantee_of(ApproxDPEvent(0.25, 1e-9, count=4))
Budget(epsilon=1.0, delta=4e-09)
>>> a = account(ApproxDPEvent(0.25, 1e-9, count=4), 1e-8)
>>> a.rule, a.budget
('basic', Budget(epsilon=1.0, delta=1e-08))
>>> round(guarantee_of(GaussianEvent(4.0, count=10), 1e-5).epsilon, 2)
3.63
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from privhist.accounting.composition import (
    ApproxDPEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    advanced_composition,
    optimal_composition,
    pld_compose,
)
from privhist.accounting.events import (
    DominatingPairEvent,
    RdpCurveEvent,
    ZcdpEvent,
    ZcdpThresholdEvent,
    event_rdp,
    pure_epsilon,
)
from privhist.accounting.renyi import DEFAULT_ORDERS, RdpCurve, rdp_to_dp
from privhist.core.budget import Budget
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.validation import check_delta, check_positive_int, float_up

__all__ = [
    "DEFAULT_RULES",
    "RULES",
    "Account",
    "account",
    "float_pld",
    "guarantee_of",
    "optimal_over_profile",
    "threshold_delta",
    "threshold_parts",
]

#: every rule, in the order that breaks ties (after the PLD rules)
RULES: tuple[str, ...] = ("basic", "advanced", "renyi", "zcdp_threshold", "pld_certified", "pld")
#: the rules tried unless the caller names others (``pld`` is an estimate, never a default)
DEFAULT_RULES: tuple[str, ...] = ("basic", "advanced", "renyi", "zcdp_threshold", "pld_certified")


@dataclass(frozen=True)
class Account:
    """What the accountant found for one event.

    Attributes:
        event: the event accounted.
        delta: the target delta (None: the event's own, by basic composition).
        bounds: every rule computed -> its bound (None where the rule does not apply or does not
            reach the target).
        rule: the rule of the guarantee (the smallest epsilon among ``candidates``).
        candidates: the rules the guarantee was chosen from.
    """

    event: PrivacyEvent
    delta: float | None
    bounds: dict[str, Budget | None]
    rule: str
    candidates: tuple[str, ...] = field(default=DEFAULT_RULES)

    @property
    def budget(self) -> Budget:
        """The guarantee."""
        b = self.bounds[self.rule]
        assert b is not None
        return b


def _leaves(event: PrivacyEvent) -> list[tuple[PrivacyEvent, int]]:
    return list(event._leaves())


def _stated(leaf: PrivacyEvent) -> tuple[Fraction, Fraction] | None:
    """The ``(eps, delta)`` one run of ``leaf`` states, exactly, or None."""
    if isinstance(leaf, ApproxDPEvent):
        return Fraction(leaf.epsilon), Fraction(leaf.delta)
    if isinstance(leaf, (LaplaceEvent, DiscreteLaplaceEvent)):
        eps = pure_epsilon(leaf)
        return None if eps is None else (eps, Fraction(0))
    if isinstance(leaf, (DominatingPairEvent, ZcdpThresholdEvent)) and leaf.epsilon is not None:
        return Fraction(leaf.epsilon), Fraction(leaf.delta or 0.0)
    return None


def _basic(leaves: list[tuple[PrivacyEvent, int]], delta: float | None) -> Budget | None:
    eps, dlt = Fraction(0), Fraction(0)
    for leaf, n in leaves:
        s = _stated(leaf)
        if s is None:
            return None
        eps += n * s[0]
        dlt += n * s[1]
    d = float_up(dlt)
    if d >= 1 or (delta is not None and dlt > Fraction(delta)):
        return None
    return Budget(float_up(eps), d if delta is None else delta)


def _advanced(leaves: list[tuple[PrivacyEvent, int]], delta: float) -> Budget | None:
    stated = {_stated(leaf) for leaf, _ in leaves}
    if len(stated) != 1 or None in stated:
        return None
    (one,) = stated
    assert one is not None
    k = sum(n for _, n in leaves)
    level = Budget(float_up(one[0]), float(one[1]))
    if Fraction(level.delta) != one[1]:
        return None
    slack = Fraction(delta) - k * one[1]
    slack_f = float(slack)
    if Fraction(slack_f) > slack:
        slack_f = math.nextafter(slack_f, 0.0)
    if k < 2 or slack_f <= 0:
        return None
    try:
        adv = advanced_composition(level, k, slack_f)
    except ValidationError:
        return None
    return adv if adv.delta <= delta else None


def _renyi(event: PrivacyEvent, leaves: list[tuple[PrivacyEvent, int]], delta: float) -> Any:
    curves = [leaf for leaf, _ in leaves if isinstance(leaf, RdpCurveEvent)]
    orders = sorted({o for c in curves for o in c.orders}) if curves else list(DEFAULT_ORDERS)
    kept, values = [], []
    for o in orders:
        v = event_rdp(event, o)
        if v is not None:  # None: some part has no curve at this order (or at all)
            kept.append(o)
            values.append(float_up(v))
    if not kept:
        return None
    eps = rdp_to_dp(RdpCurve(tuple(kept), tuple(values)), delta)[0]
    return Budget(max(eps, math.ulp(0.0)), delta) if math.isfinite(eps) else None


def threshold_parts(event: PrivacyEvent) -> tuple[Fraction, Fraction] | None:
    """``(rho, failure)`` summed over the event's parts (exact), when it has a threshold part
    (:class:`~privhist.accounting.events.ZcdpThresholdEvent`) and every other part is zCDP
    (zCDP, Gaussian or discrete Gaussian noise); None otherwise (:mod:`privhist.accounting.zcdp`).

    >>> from privhist.accounting.composition import composed
    >>> threshold_parts(composed([ZcdpThresholdEvent(0.5, 0.25), GaussianEvent(2.0)]))
    (Fraction(5, 8), Fraction(1, 4))
    """
    rho, failure, threshold = Fraction(0), Fraction(0), False
    for leaf, n in event._leaves():
        if isinstance(leaf, ZcdpThresholdEvent):
            rho += n * Fraction(leaf.rho)
            failure += n * Fraction(leaf.failure)
            threshold = True
        elif isinstance(leaf, ZcdpEvent):
            rho += n * Fraction(leaf.rho)
        elif isinstance(leaf, (GaussianEvent, DiscreteGaussianEvent)):
            s, sigma = Fraction(leaf.sensitivity), Fraction(leaf.sigma)
            rho += n * s * s / (2 * sigma * sigma)
        else:
            return None
    return (rho, failure) if threshold else None


def threshold_delta(event: PrivacyEvent, epsilon: float) -> float:
    """The delta at ``epsilon`` of an event with a threshold part
    (:func:`privhist.accounting.zcdp.certified_delta` of :func:`threshold_parts`).

    Raises:
        UnsupportedError: the event has no threshold part or a part that is not zCDP.
    """
    from privhist.accounting.zcdp import certified_delta

    parts = threshold_parts(event)
    if parts is None:
        raise UnsupportedError(f"{event!r} is not a zCDP event with a threshold part")
    return certified_delta(parts[0], epsilon, float_up(parts[1]))


def _zcdp_threshold(event: PrivacyEvent, delta: float) -> Budget | None:
    from privhist.accounting.zcdp import threshold_epsilon

    parts = threshold_parts(event)
    if parts is None:
        return None
    eps = threshold_epsilon(parts[0], float_up(parts[1]), delta)
    return Budget(max(eps, math.ulp(0.0)), delta) if math.isfinite(eps) else None


def _pairs(leaves: list[tuple[PrivacyEvent, int]]) -> list[tuple[DominatingPairEvent, int]] | None:
    """The pairs and how many times each runs (the leaves' counts include the pair's own)."""
    out = []
    for leaf, n in leaves:
        if not isinstance(leaf, DominatingPairEvent):
            return None
        out.append((leaf, n))
    return out


def _pld_certified(
    pairs: list[tuple[DominatingPairEvent, int]], delta: float, step: Any
) -> Budget | None:
    from privhist.accounting.certified import DEFAULT_STEP, CertifiedAccount, compose_accounts

    h = DEFAULT_STEP if step is None else step
    total = compose_accounts(
        (CertifiedAccount.from_pair(pair.masses("p"), pair.masses("q"), h), n) for pair, n in pairs
    )
    eps = total.epsilon_for_delta(delta)
    return Budget(max(eps, math.ulp(0.0)), delta) if math.isfinite(eps) else None


def float_pld(event: PrivacyEvent, value_discretization_interval: float = 1e-4) -> Any:
    """``dp_accounting``'s float64 PLD (pessimistic discretisation) of an event made of
    dominating pairs: an estimate, not certified (the ``pld`` rule)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    pairs = _pairs(_leaves(event))
    if pairs is None:
        raise UnsupportedError(f"{event!r} is not made of dominating pairs")
    total: Any = None
    for pair, n in pairs:
        p, q = pair.masses("p"), pair.masses("q")
        one = pld.from_two_probability_mass_functions(
            {k: math.log(v) for k, v in q.items()},
            {k: math.log(v) for k, v in p.items()},
            pessimistic_estimate=True,
            value_discretization_interval=value_discretization_interval,
            symmetric=False,
        )
        one = one.self_compose(n) if n > 1 else one
        total = one if total is None else total.compose(one)
    return total


_NOISE = (LaplaceEvent, DiscreteLaplaceEvent, GaussianEvent, DiscreteGaussianEvent, ApproxDPEvent)


def _pld_noise(event: PrivacyEvent, delta: float, vdi: float) -> Budget | None:
    """``dp_accounting``'s PLD of noise events (:func:`~privhist.accounting.composition.
    pld_compose`, with its margin for the truncated discrete Gaussian), inverted at ``delta``."""
    eps = pld_compose(event, value_discretization_interval=vdi).epsilon_for_delta(delta)
    return Budget(max(eps, math.ulp(0.0)), delta) if math.isfinite(eps) else None


def _pld_float(event: PrivacyEvent, delta: float, vdi: float) -> Budget | None:
    if all(isinstance(leaf, _NOISE) for leaf, _ in _leaves(event)):
        return _pld_noise(event, delta, vdi)
    if _pairs(_leaves(event)) is None:
        return None
    total = float_pld(event, vdi)
    eps = float(total.get_epsilon_for_delta(delta))
    step = 1e-12
    for _ in range(80):  # dp_accounting's inversion and its delta can differ by rounding
        if not math.isfinite(eps):
            return None
        if float(total.get_delta_for_epsilon(eps)) <= delta:
            return Budget(max(eps, math.ulp(0.0)), delta)
        eps += step * max(1.0, eps)
        step *= 2
    return None  # pragma: no cover


def account(
    event: PrivacyEvent,
    delta: float | None = None,
    *,
    rules: Sequence[str] | None = None,
    report: Iterable[str] = (),
    step: Any = None,
    value_discretization_interval: float = 1e-4,
) -> Account:
    """Every applicable bound of ``event`` at ``delta`` and the guarantee among ``rules``.

    Args:
        event: what was run.
        delta: the target delta in (0, 1); None for the event's own delta by basic composition
            (then only ``basic`` applies).
        rules: the rules to choose the guarantee from (default :data:`DEFAULT_RULES`).
        report: further rules computed and reported in :attr:`Account.bounds` but not chosen.
        step: the grid of the certified PLD (default its
            :data:`~privhist.accounting.certified.DEFAULT_STEP`).
        value_discretization_interval: the grid of the float PLD (``pld``).

    Raises:
        UnsupportedError: no rule applies (the message names the event).
    """
    fn = "account"
    if not isinstance(event, PrivacyEvent):
        raise ValidationError("event", fn, "a PrivacyEvent", event)
    chosen = tuple(DEFAULT_RULES if rules is None else rules)
    extra = tuple(r for r in report if r not in chosen)
    for r in (*chosen, *extra):
        if r not in RULES:
            raise ValidationError("rules", fn, f"rules among {list(RULES)}", r)
    d = None if delta is None else check_delta(delta, fn, positive=True)
    leaves = _leaves(event)
    bounds: dict[str, Budget | None] = {}
    for r in (*chosen, *extra):
        if d is None:
            bounds[r] = _basic(leaves, None) if r == "basic" else None
        elif r == "basic":
            bounds[r] = _basic(leaves, d)
        elif r == "advanced":
            bounds[r] = _advanced(leaves, d)
        elif r == "renyi":
            bounds[r] = _renyi(event, leaves, d)
        elif r == "zcdp_threshold":
            bounds[r] = _zcdp_threshold(event, d)
        elif r == "pld":
            bounds[r] = _pld_float(event, d, value_discretization_interval)
        else:
            pairs = _pairs(leaves)
            bounds[r] = None if pairs is None else _pld_certified(pairs, d, step)
    found = [r for r in chosen if bounds.get(r) is not None]
    if not found:
        raise UnsupportedError(
            f"no rule among {list(chosen)} gives a guarantee for {event!r}"
            + ("" if d is None else f" at delta {d:g}")
        )

    def key(r: str) -> tuple[float, bool, int]:
        b = bounds[r]
        assert b is not None
        return (b.epsilon, not r.startswith("pld"), RULES.index(r))

    return Account(event, d, bounds, min(found, key=key), chosen)


def guarantee_of(
    event: PrivacyEvent,
    delta: float | None = None,
    *,
    rules: Sequence[str] | None = None,
    step: Any = None,
) -> Budget:
    """The guarantee of ``event``: :attr:`Account.budget` of :func:`account`.

    >>> from privhist.accounting.renyi import RdpCurve, rdp_to_dp
    >>> e = RdpCurveEvent((2.0, 8.0), (0.05, 0.3))
    >>> guarantee_of(e, 1e-6).epsilon == rdp_to_dp(RdpCurve((2.0, 8.0), (0.05, 0.3)), 1e-6)[0]
    True
    """
    return account(event, delta, rules=rules, step=step).budget


def optimal_over_profile(
    points: Iterable[tuple[float, float]],
    releases: int,
    total_delta: float,
    fallback: tuple[float, Budget],
) -> tuple[Budget, Budget]:
    """The optimal composition (Kairouz, Oh and Viswanath 2015, Theorem 3.3) of ``releases``
    runs of a mechanism that is ``(eps', delta')``-DP at every listed point of its profile,
    minimised over the points, at ``total_delta``.

    Points whose ``releases``-fold delta alone exceeds ``total_delta`` are skipped. Returns the
    composed bound and the point it came from; ``fallback`` (an epsilon already known at
    ``total_delta``, e.g. by basic composition, and its point) when no point does better.

    >>> tight, point = optimal_over_profile([(0.1, 0.0)], 100, 1e-6, (10.0, Budget(0.1, 0)))
    >>> round(tight.epsilon, 3), point  # 100-fold randomized response at eps 0.1: 4.7746
    (4.775, Budget(epsilon=0.1, delta=0.0))
    """
    k = check_positive_int(releases, "optimal_over_profile", "releases")
    target = Fraction(total_delta)
    best, best_from = fallback
    for e, dl in points:
        if 1 - (1 - Fraction(dl)) ** k > target:
            continue
        b = optimal_composition(Budget(e, dl), k, total_delta)
        if b.epsilon < best:
            best, best_from = b.epsilon, Budget(e, dl)
    return Budget(best, total_delta), best_from
