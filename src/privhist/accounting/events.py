"""Serialisable privacy events and their Renyi-DP curves.

The event types of :mod:`privhist.accounting.composition` (Laplace, discrete Laplace, Gaussian,
discrete Gaussian, approximate DP, composed) are joined by two kinds that carry a curve rather
than a noise distribution:

* :class:`RdpCurveEvent` -- Renyi-DP guarantees ``(alpha, rho(alpha))`` at listed orders
  (Mironov 2017, Definition 4), e.g. a cPBM secure sum (Lemma 2 of the federated frequency
  paper);
* :class:`ZcdpEvent` -- ``rho``-zCDP (Bun and Steinke 2016, Definition 1.1):
  ``rho(alpha) = alpha rho`` at every order;
* :class:`ZcdpThresholdEvent` -- ``rho``-zCDP but for a threshold failure probability (the
  weighted Gaussian selectors; :mod:`privhist.accounting.zcdp`), without a Renyi curve;
* :class:`DominatingPairEvent` -- a dominating pair of distributions (e.g. TrieHH++'s per-level
  pair), composed by the certified PLD.

Every event is immutable and round-trips through versioned JSON (:func:`event_to_json`,
:func:`event_from_json`); ``{"version": 1, "kind": ..., ...}``.

:func:`event_rdp` gives an upper bound on an event's Renyi divergence of order ``alpha`` for both
orders of a neighbouring pair, or ``None`` when the event has none (an ``(epsilon, delta)``
guarantee with ``delta > 0``):

* Gaussian of standard deviation ``sigma`` and L2 sensitivity ``s``: ``alpha s^2 / (2 sigma^2)``
  (Mironov 2017, Proposition 7);
* discrete Gaussian: the same (Canonne, Kamath and Steinke 2020, "The discrete Gaussian for
  differential privacy", Theorem 4: ``s^2 / (2 sigma^2)``-zCDP);
* Laplace of scale ``b`` and L1 sensitivity ``s`` (``eps = s / b``):
  ``1/(alpha - 1) log(alpha/(2 alpha - 1) e^((alpha-1) eps) + (alpha-1)/(2 alpha - 1)
  e^(-alpha eps))`` (Mironov 2017, Proposition 6 / Table II), evaluated in interval arithmetic;
* pure ``eps``-DP (discrete Laplace, approximate DP with ``delta = 0``):
  ``min(eps, alpha eps^2 / 2)`` (Mironov 2017, Proposition 3, and Bun and Steinke 2016,
  Proposition 3.3);
* composed events and repetitions add (Mironov 2017, Proposition 1), also when each step is
  chosen adaptively.

All values are exact rationals rounded upwards.

>>> e = composed([GaussianEvent(2.0), LaplaceEvent(4.0, count=3)])
>>> event_from_json(event_to_json(e)) == e
True
>>> float(event_rdp(GaussianEvent(2.0), 2.0))
0.25
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from privhist.accounting._interval import IV as _IV
from privhist.accounting._interval import exact as _iv
from privhist.accounting._interval import upper as _hi
from privhist.accounting.composition import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
)
from privhist.accounting.composition import composed as composed  # re-exported for examples
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.validation import check_positive_int

__all__ = [
    "EVENT_VERSION",
    "DominatingPairEvent",
    "RdpCurveEvent",
    "ZcdpEvent",
    "ZcdpThresholdEvent",
    "event_from_dict",
    "event_from_json",
    "event_rdp",
    "event_to_dict",
    "event_to_json",
    "pure_epsilon",
]

EVENT_VERSION = 1


@dataclass(frozen=True)
class RdpCurveEvent(PrivacyEvent):
    """Renyi-DP ``rho(alpha)`` at the listed ``orders`` (each > 1, increasing), for both orders
    of a neighbouring pair, run ``count`` times.

    >>> RdpCurveEvent((2.0, 4.0), (0.1, 0.3)).count
    1
    """

    orders: tuple[float, ...]
    values: tuple[float, ...]
    count: int = 1

    def __post_init__(self) -> None:
        name = "RdpCurveEvent"
        orders = tuple(float(o) for o in self.orders)
        values = tuple(float(v) for v in self.values)
        if not orders or len(orders) != len(values):
            raise ValidationError("values", name, "one value per order", values)
        if any(not (math.isfinite(o) and o > 1) for o in orders) or list(orders) != sorted(
            set(orders)
        ):
            raise ValidationError("orders", name, "increasing numbers > 1", orders)
        if any(not (math.isfinite(v) and v >= 0) for v in values):
            raise ValidationError("values", name, "finite numbers >= 0", values)
        object.__setattr__(self, "orders", orders)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "count", check_positive_int(self.count, name, "count"))

    def to_dp_accounting(self) -> Any:
        raise UnsupportedError(f"{self!r} has no dp_accounting DpEvent")

    def _leaves(self) -> Any:
        yield self, self.count


@dataclass(frozen=True)
class ZcdpEvent(PrivacyEvent):
    """``rho``-zCDP (Bun and Steinke 2016), run ``count`` times.

    >>> ZcdpEvent(0.125).rho
    0.125
    """

    rho: float
    count: int = 1

    def __post_init__(self) -> None:
        name = "ZcdpEvent"
        if not (isinstance(self.rho, (int, float)) and math.isfinite(self.rho) and self.rho >= 0):
            raise ValidationError("rho", name, "a finite number >= 0", self.rho)
        object.__setattr__(self, "rho", float(self.rho))
        object.__setattr__(self, "count", check_positive_int(self.count, name, "count"))

    def to_dp_accounting(self) -> Any:
        from dp_accounting import dp_event

        return self._repeat(dp_event.ZCDpEvent(self.rho))

    def _leaves(self) -> Any:
        yield self, self.count


@dataclass(frozen=True)
class ZcdpThresholdEvent(PrivacyEvent):
    """``rho``-zCDP except that, with probability at most ``failure``, a key only the added user
    holds is released: a weighted Gaussian selection (WGM, DP-SIPS, with or without counts;
    :mod:`privhist.accounting.zcdp`), run ``count`` times. ``epsilon`` and ``delta``, when
    given, state the calibrated point each run is ``(epsilon, delta)``-DP at (basic and advanced
    composition use it; the ``zcdp_threshold`` rule recomputes it). With ``failure > 0`` there is
    no Renyi curve.

    >>> e = ZcdpThresholdEvent(0.01, 1e-9)
    >>> event_from_json(event_to_json(e)) == e
    True
    """

    rho: float
    failure: float
    count: int = 1
    epsilon: float | None = None
    delta: float | None = None

    def __post_init__(self) -> None:
        name = "ZcdpThresholdEvent"
        if not (isinstance(self.rho, (int, float)) and math.isfinite(self.rho) and self.rho >= 0):
            raise ValidationError("rho", name, "a finite number >= 0", self.rho)
        f = self.failure
        if not (isinstance(f, (int, float)) and 0 <= f < 1):
            raise ValidationError("failure", name, "a probability in [0, 1)", f)
        _check_point(self, name)
        object.__setattr__(self, "rho", float(self.rho))
        object.__setattr__(self, "failure", float(f))
        object.__setattr__(self, "count", check_positive_int(self.count, name, "count"))

    def to_dp_accounting(self) -> Any:
        raise UnsupportedError(f"{self!r} has no dp_accounting DpEvent")

    def _leaves(self) -> Any:
        yield self, self.count


@dataclass(frozen=True)
class DominatingPairEvent(PrivacyEvent):
    """A mechanism dominated by the pair of distributions ``(p, q)`` on the same atoms (index
    ``i`` has probability ``p[i]`` under one neighbour and ``q[i]`` under the other) in both
    hockey-stick directions, run ``count`` times (Zhu, Dong and Wang 2022, Definition 7);
    composed by :mod:`privhist.accounting.certified`. No Renyi curve is derived from it.
    ``epsilon`` and ``delta``, when given, state that each run is also ``(epsilon, delta)``-DP
    (a point of its certified profile; basic and advanced composition use it).

    >>> DominatingPairEvent((0.75, 0.25), (0.25, 0.75), 3).account().remove.compositions
    3
    """

    p: tuple[float, ...]
    q: tuple[float, ...]
    count: int = 1
    epsilon: float | None = None
    delta: float | None = None

    def __post_init__(self) -> None:
        name = "DominatingPairEvent"
        _check_point(self, name)
        p = tuple(float(x) for x in self.p)
        q = tuple(float(x) for x in self.q)
        if not p or len(p) != len(q):
            raise ValidationError("q", name, "one probability per atom of p", q)
        for label, dist in (("p", p), ("q", q)):
            if (
                any(not (math.isfinite(x) and x >= 0) for x in dist)
                or not 0 < sum(dist) <= 1 + 1e-9
            ):
                raise ValidationError(label, name, "probabilities summing to at most 1", dist)
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "count", check_positive_int(self.count, name, "count"))

    def to_dp_accounting(self) -> Any:
        raise UnsupportedError(f"{self!r} has no dp_accounting DpEvent")

    def _leaves(self) -> Any:
        yield self, self.count

    def masses(self, which: str) -> dict[int, float]:
        """``p`` or ``q`` as ``atom index -> probability``, atoms of zero mass left out."""
        dist = self.p if which == "p" else self.q
        return {i: x for i, x in enumerate(dist) if x > 0}

    def account(self, step: Any = None) -> Any:
        """The certified PLD account of the ``count``-fold composition."""
        from privhist.accounting.certified import DEFAULT_STEP, CertifiedAccount

        pair = CertifiedAccount.from_pair(
            dict(enumerate(self.p)), dict(enumerate(self.q)), DEFAULT_STEP if step is None else step
        )
        return pair.self_compose(self.count)


# --------------------------------------------------------------------------------------------
# serialisation

_KINDS: dict[str, tuple[type[PrivacyEvent], tuple[str, ...]]] = {
    "laplace": (LaplaceEvent, ("scale", "sensitivity", "count")),
    "discrete_laplace": (DiscreteLaplaceEvent, ("scale", "sensitivity", "count")),
    "gaussian": (GaussianEvent, ("sigma", "sensitivity", "count")),
    "discrete_gaussian": (DiscreteGaussianEvent, ("sigma", "sensitivity", "count")),
    "approx_dp": (ApproxDPEvent, ("epsilon", "delta", "count")),
    "rdp_curve": (RdpCurveEvent, ("orders", "values", "count")),
    "zcdp": (ZcdpEvent, ("rho", "count")),
    "zcdp_threshold": (
        ZcdpThresholdEvent,
        ("rho", "failure", "count", "epsilon", "delta"),
    ),
    "dominating_pair": (DominatingPairEvent, ("p", "q", "count", "epsilon", "delta")),
}


def event_to_dict(event: PrivacyEvent) -> dict[str, Any]:
    """A JSON-ready description: ``{"version": 1, "kind": ..., <fields>}``."""
    if isinstance(event, ComposedEvent):
        return {
            "version": EVENT_VERSION,
            "kind": "composed",
            "events": [event_to_dict(e) for e in event.events],
            "count": event.count,
        }
    for kind, (cls, fields) in _KINDS.items():
        if type(event) is cls:
            out: dict[str, Any] = {"version": EVENT_VERSION, "kind": kind}
            for f in fields:
                value = getattr(event, f)
                if value is None:  # optional fields are written only when set
                    continue
                out[f] = list(value) if isinstance(value, tuple) else value
            return out
    raise ValidationError("event", "event_to_dict", "a privhist privacy event", event)


def event_from_dict(data: Any) -> PrivacyEvent:
    """The inverse of :func:`event_to_dict`."""
    fn = "event_from_dict"
    if not isinstance(data, dict):
        raise ValidationError("data", fn, "a mapping", data)
    if data.get("version") != EVENT_VERSION:
        raise ValidationError("data", fn, f"an event of version {EVENT_VERSION}", data)
    kind = data.get("kind")
    if kind == "composed":
        return ComposedEvent(
            tuple(event_from_dict(e) for e in data.get("events", [])), data.get("count", 1)
        )
    if kind not in _KINDS:
        raise ValidationError("data", fn, f"a kind among {sorted(_KINDS)} or composed", kind)
    cls, fields = _KINDS[kind]
    try:
        kwargs = {
            f: tuple(data[f]) if isinstance(data[f], list) else data[f] for f in fields if f in data
        }
        return cls(**kwargs)
    except TypeError as exc:
        raise ValidationError("data", fn, f"the fields {list(fields)}", data) from exc


def event_to_json(event: PrivacyEvent) -> str:
    """Compact, key-sorted JSON of :func:`event_to_dict`."""
    return json.dumps(event_to_dict(event), sort_keys=True, separators=(",", ":"))


def event_from_json(text: str) -> PrivacyEvent:
    """The inverse of :func:`event_to_json`."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValidationError("text", "event_from_json", "JSON of a privacy event", text) from exc
    return event_from_dict(data)


# --------------------------------------------------------------------------------------------
# Renyi curves


def pure_epsilon(event: PrivacyEvent) -> Fraction | None:
    """The event's pure-DP epsilon (exact, summed over its parts), or None when it is not pure.

    >>> pure_epsilon(composed([LaplaceEvent(2.0), ApproxDPEvent(0.25)]))
    Fraction(3, 4)
    """
    total = Fraction(0)
    for leaf, n in event._leaves():
        if isinstance(leaf, (LaplaceEvent, DiscreteLaplaceEvent)):
            eps = _hi(_iv(Fraction(leaf.sensitivity)) / _iv(Fraction(leaf.scale)))
        elif isinstance(leaf, ApproxDPEvent) and leaf.delta == 0:
            eps = Fraction(leaf.epsilon)
        else:
            return None
        total += n * eps
    return total


def _leaf_rdp(leaf: PrivacyEvent, order: Fraction) -> Fraction | None:
    a = order
    if isinstance(leaf, (GaussianEvent, DiscreteGaussianEvent)):
        s, sigma = Fraction(leaf.sensitivity), Fraction(leaf.sigma)
        return a * s * s / (2 * sigma * sigma)
    if isinstance(leaf, ZcdpEvent):
        return a * Fraction(leaf.rho)
    if isinstance(leaf, ZcdpThresholdEvent):
        return a * Fraction(leaf.rho) if leaf.failure == 0 else None
    if isinstance(leaf, RdpCurveEvent):
        for o, v in zip(leaf.orders, leaf.values, strict=True):
            if Fraction(o) >= a:  # RDP is non-decreasing in the order (Mironov 2017, Prop. 9)
                return Fraction(v)
        return None
    if isinstance(leaf, LaplaceEvent):
        eps = _iv(Fraction(leaf.sensitivity)) / _iv(Fraction(leaf.scale))
        ia = _iv(a)
        inner = ia / (2 * ia - 1) * _IV.exp((ia - 1) * eps) + (ia - 1) / (2 * ia - 1) * _IV.exp(
            -ia * eps
        )
        return min(_hi(_IV.log(inner) / (ia - 1)), _hi(eps))
    pure = pure_epsilon(leaf)
    if pure is not None:
        return min(pure, a * pure * pure / 2)
    return None


def event_rdp(event: PrivacyEvent, order: float) -> Fraction | None:
    """An upper bound on the event's Renyi divergence of order ``order`` (> 1), both ways;
    None when the event has no Renyi guarantee (module notes).

    >>> float(event_rdp(composed([GaussianEvent(1.0), GaussianEvent(1.0)]), 3.0))
    3.0
    >>> event_rdp(ApproxDPEvent(1.0, 1e-6), 2.0) is None
    True
    """
    if not (isinstance(order, (int, float)) and math.isfinite(order) and order > 1):
        raise ValidationError("order", "event_rdp", "a number > 1", order)
    a = Fraction(order)
    total = Fraction(0)
    for leaf, n in event._leaves():
        value = _leaf_rdp(leaf, a)
        if value is None:
            return None
        total += n * value
    return total


def _check_point(event: Any, name: str) -> None:
    """The optional per-run ``(epsilon, delta)`` point of ``event``: both given and valid (stored
    as floats), or both None."""
    if event.epsilon is None and event.delta is None:
        return
    e, d = event.epsilon, event.delta
    if not (isinstance(e, (int, float)) and math.isfinite(e) and e >= 0):
        raise ValidationError("epsilon", name, "a finite number >= 0 (or None)", e)
    if not (isinstance(d, (int, float)) and 0 <= d < 1):
        raise ValidationError("delta", name, "a number in [0, 1) with epsilon", d)
    object.__setattr__(event, "epsilon", float(e))
    object.__setattr__(event, "delta", float(d))
