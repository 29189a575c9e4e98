"""Hierarchical (beta-ary) bucketing of a public range, range decomposition, and composition.

Bharadwaj & Cormode, "Sample and Threshold Differential Privacy: Histograms and applications"
(AISTATS 2022), Section 4.2, "Quantiles and range queries via hierarchical histograms": the
public range ``[lo, hi)`` is cut into ``beta^l`` equal buckets at level ``l = 1..L``; bucket ``i``
of level ``l`` is the union of buckets ``beta i .. beta i + beta - 1`` of level ``l + 1``. A range
made of whole leaves (level-``L`` buckets) is split greedily into the fewest such nodes
(:func:`decompose`):

* a prefix ``[lo, t)`` (and a suffix ``[t, hi)``) other than the whole range takes at most
  ``beta - 1`` nodes per level, ``L (beta - 1)`` in all -- the paper's count of probes;
* any other range takes at most ``2 (beta - 1)`` nodes on each level below the first and
  ``beta - 1`` on the first, ``(2 L - 1)(beta - 1)`` in all;
* the whole range is the ``beta`` nodes of level 1.

The tests check these bounds, exact coverage and minimality against brute force on small trees.

Composition (:func:`compose`; every bound is the accountant's,
:mod:`privhist.accounting.accountant`, for the releases' event): each client holds one value, and
every histogram built on the values (one per level, or one per binary-search step) is a fresh
sample-and-threshold release in which that client's value adds one to exactly one bucket. A
neighbouring dataset (one client added or removed) therefore changes one key of each of the ``k``
releases by one, and each release is ``(eps_k, delta_k)``-DP for it (the per-key guarantee of
:class:`~privhist.mechanisms.sampling.SampleAndThreshold`). The releases use independent samples,
so the ``k``-fold adaptive composition theorems apply: basic composition (Dwork & Roth 2014,
Theorem 3.16; the paper's Lemma 4.1, ``(L eps, L delta)``) and the optimal composition of
Kairouz, Oh & Viswanath (2015, Theorem 3.3), applied at every point of the exact per-release
profile ``(eps', delta(eps'))`` on a grid and minimised -- sound because each release is
``(eps', delta(eps'))``-DP for every ``eps'`` at which its certified profile is evaluated.
A third bound, ``pld_certified``, composes the dominating pair of the certified per-release
profile (:func:`privhist.accounting.pairs.dominating_pair`: the f-DP envelope of the profile on a
grid of ``eps'`` and the pure removal line ``ln(1/(1-p))``) ``k`` times with the certified PLD
of :mod:`privhist.accounting.certified` (pessimistic discretisation, every rounding outwards: a
proven upper bound; adaptive composition of dominating pairs: Zhu, Dong & Wang 2022,
Theorem 10). The guarantee a release states and a ledger is charged is the smaller of basic
and certified PLD composition (:attr:`ReleasesComposition.guarantee`), and by default the
budget is split so that the certified PLD composition spends it
(:func:`split_sample_and_threshold`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import account, guarantee_of, optimal_over_profile
from privhist.accounting.composition import PrivacyEvent
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.errors import InputDataError, UnsupportedError, ValidationError
from privhist.core.validation import check_positive_int, delta_constraint, float_down

if TYPE_CHECKING:
    from privhist.core.random import RandomSource
    from privhist.mechanisms.sampling import SampleAndThreshold

__all__ = [
    "COMPOSITION",
    "MAX_LEAVES",
    "Hierarchy",
    "MappedValues",
    "ReleasesComposition",
    "compose",
    "compose_releases",
    "composed_metadata",
    "decompose",
    "pld_epsilon",
    "split_budget",
    "split_sample_and_threshold",
]

#: the most leaves a hierarchy may have (quantile search evaluates every leaf boundary)
MAX_LEAVES = 1 << 22

Node = tuple[int, int]  # (level, index), level 1..L
#: grid of the certified PLD composition
CERTIFIED_STEP = Fraction(1, 2**14)
#: the coarser grid of :func:`pld_epsilon`'s search (its result is checked on the fine one)
SEARCH_STEP = Fraction(1, 2**12)


def decompose(branching: int, levels: int, start: int, stop: int) -> list[Node]:
    """The fewest tree nodes whose leaves are exactly ``start .. stop - 1`` (Section 4.2).

    Greedy, bottom up: on each level the nodes left of the first whole parent and right of the
    last whole parent are taken, then the search moves to the parents; level 1 takes what is
    left. Nodes come level by level from the leaves up.

    Args:
        branching: beta >= 2.
        levels: L >= 1.
        start: first leaf, ``0 <= start <= stop``.
        stop: one past the last leaf, ``<= beta^L``.

    Returns:
        ``(level, index)`` pairs.

    >>> decompose(4, 2, 0, 11)  # [0, 11/16) with beta = 4: the paper's example, two levels
    [(2, 10), (2, 9), (2, 8), (1, 0), (1, 1)]
    >>> decompose(2, 3, 1, 7)
    [(3, 1), (3, 6), (2, 1), (2, 2)]
    """
    fn = "decompose"
    beta = check_positive_int(branching, fn, "branching", minimum=2)
    depth = check_positive_int(levels, fn, "levels")
    n_leaves = beta**depth
    i = check_positive_int(start, fn, "start", minimum=0)
    j = check_positive_int(stop, fn, "stop", minimum=0)
    if j > n_leaves:
        raise ValidationError("stop", fn, f"<= branching^levels = {n_leaves}", stop)
    if i > j:
        raise ValidationError("start", fn, f"<= stop = {j}", start)
    nodes: list[Node] = []
    level = depth
    while i < j and level > 1:
        while i < j and i % beta:
            nodes.append((level, i))
            i += 1
        while i < j and j % beta:
            j -= 1
            nodes.append((level, j))
        i, j, level = i // beta, j // beta, level - 1
    nodes.extend((level, x) for x in range(i, j))
    return nodes


@dataclass(frozen=True)
class MappedValues:
    """Values mapped into a hierarchy's range: ``positions`` are leaf indices; ``clamped``
    counts the values moved to the nearest end (exact, not private); ``dropped`` the missing
    values (NaN) left out (exact, not private)."""

    positions: npt.NDArray[np.int64]
    clamped: int
    dropped: int


@dataclass(frozen=True)
class Hierarchy(Declared):
    """The public geometry: ``levels`` levels of ``branching``-ary buckets over ``[lo, hi)``.

    >>> h = Hierarchy(0.0, 1.0, 4, 2)
    >>> h.leaves, h.node_range(1, 2)
    (16, (0.5, 0.75))
    >>> h.buckets(np.array([0.0, 0.3, 0.99]), 1).tolist()
    [0, 1, 3]
    """

    lo: float
    hi: float
    branching: int
    levels: int

    declared: ClassVar[dict[str, Constraint]] = {
        "lo": Constraint.real(),
        "hi": Constraint.real(),
        "branching": Constraint.integer(2),
        "levels": Constraint.integer(1),
    }

    def __post_init__(self) -> None:
        fn = "Hierarchy"
        for name in ("lo", "hi"):
            object.__setattr__(self, name, self.check_parameter(name, getattr(self, name)))
        if not self.hi > self.lo:  # relational
            raise ValidationError("hi", fn, f"> lo = {self.lo:g}", self.hi)
        beta = self.check_parameter("branching", self.branching)
        depth = self.check_parameter("levels", self.levels)
        # beta >= 2, so depth > 22 exceeds 2^22 leaves: test it first (beta**depth of a huge
        # depth would not fit in memory)
        if depth > MAX_LEAVES.bit_length() - 1 or beta**depth > MAX_LEAVES:
            raise ValidationError(
                "levels", fn, f"such that branching^levels <= 2^22 (branching {beta})", depth
            )
        object.__setattr__(self, "branching", beta)
        object.__setattr__(self, "levels", depth)

    @property
    def leaves(self) -> int:
        return int(self.branching**self.levels)

    @property
    def leaf_width(self) -> float:
        return (self.hi - self.lo) / self.leaves

    def boundary(self, j: int | npt.NDArray[np.int64]) -> Any:
        """The value at leaf boundary ``j`` (0 is ``lo``, ``leaves`` is ``hi``)."""
        return self.lo + (self.hi - self.lo) * (np.asarray(j, dtype=np.float64) / self.leaves)

    def node_range(self, level: int, index: int) -> tuple[float, float]:
        """``[a, b)`` covered by node ``index`` of ``level``."""
        scale = self.branching ** (self.levels - level)
        return float(self.boundary(index * scale)), float(self.boundary((index + 1) * scale))

    def map_values(
        self, values: npt.ArrayLike, *, clamp: bool = False, function: str = "Hierarchy"
    ) -> MappedValues:
        """Leaf index of every value. NaN values are dropped and counted; a value outside
        ``[lo, hi)`` is an :class:`InputDataError` unless ``clamp`` (then it goes to the first
        or last leaf and is counted).
        """
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 1:
            raise ValidationError("values", function, "a one-dimensional array", f"shape {x.shape}")
        missing = np.isnan(x)
        dropped = int(missing.sum())
        if dropped:
            x = x[~missing]
        outside = (x < self.lo) | (x >= self.hi)
        n_out = int(outside.sum())
        if n_out and not clamp:
            first = float(x[np.argmax(outside)])
            values = "1 value lies" if n_out == 1 else f"{n_out} values lie"
            raise InputDataError(
                f"{values} outside the public range [{self.lo:g}, {self.hi:g}) (the first is "
                f"{first:g}); widen the range or ask for clamping (clamp=True, --clamp)"
            )
        pos = np.floor((x - self.lo) / (self.hi - self.lo) * self.leaves)
        pos = np.clip(np.nan_to_num(pos, nan=0.0, posinf=self.leaves, neginf=0.0), 0, None)
        positions = np.minimum(pos, self.leaves - 1).astype(np.int64)
        return MappedValues(positions=positions, clamped=n_out, dropped=dropped)

    def buckets(self, values: npt.ArrayLike, level: int, *, clamp: bool = False) -> Any:
        """Bucket index of each value at ``level`` (1..levels)."""
        level = check_positive_int(level, "Hierarchy.buckets", "level")
        if level > self.levels:
            raise ValidationError("level", "Hierarchy.buckets", f"<= {self.levels}", level)
        pos = self.map_values(values, clamp=clamp).positions
        return pos // self.branching ** (self.levels - level)

    def snap(self, value: float, function: str = "Hierarchy.snap") -> int:
        """The leaf boundary nearest to ``value`` (which must lie in ``[lo, hi]``)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(
                "value", function, f"a number in [{self.lo:g}, {self.hi:g}]", value
            )
        v = float(value)
        if not (math.isfinite(v) and self.lo <= v <= self.hi):
            raise ValidationError(
                "value", function, f"a number in [{self.lo:g}, {self.hi:g}]", value
            )
        return int(
            min(self.leaves, max(0, round((v - self.lo) / (self.hi - self.lo) * self.leaves)))
        )

    def decompose(self, start: int, stop: int) -> list[Node]:
        """:func:`decompose` for this hierarchy (leaf indices)."""
        return decompose(self.branching, self.levels, start, stop)


# --------------------------------------------------------------------------------------------
# budget split and composition


def split_budget(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """``(epsilon / k, delta / k)`` rounded down, so that ``k`` of them never add up to more
    than ``(epsilon, delta)``.

    >>> split_budget(1.0, 1e-8, 4)
    (0.25, 2.5e-09)
    """
    k = check_positive_int(k, "split_budget", "k")
    e, d = float_down(Fraction(epsilon) / k), float_down(Fraction(delta) / k)
    return e, d


@dataclass(frozen=True)
class ReleasesComposition:
    """The guarantee of ``releases`` sample-and-threshold releases run one after another.

    Attributes:
        releases: how many histograms were released (levels, or search steps).
        per_release: the ``(eps, delta)`` each release is calibrated to (delta: its certified
            value).
        basic: basic composition, ``releases`` times each coordinate.
        tight: the optimal composition (Kairouz, Oh & Viswanath 2015) minimised over the
            certified per-release profile, at the same total delta as ``basic``.
        tight_from: the per-release ``(eps', delta(eps'))`` point giving ``tight``.
        pld_certified: the certified PLD composition of the per-release dominating pair at the
            same total delta (None when it does not reach that delta).
        guarantee: the smaller-epsilon of ``basic`` and ``pld_certified`` (the accountant's
            guarantee of :meth:`event` at the total delta): what a release states and a ledger
            is charged.
    """

    releases: int
    per_release: Budget
    basic: Budget
    tight: Budget
    tight_from: Budget
    pld_certified: Budget | None = None
    run_event: PrivacyEvent | None = field(default=None, compare=False, repr=False)

    @property
    def guarantee(self) -> Budget:
        pld = self.pld_certified
        return pld if pld is not None and pld.epsilon < self.basic.epsilon else self.basic

    @property
    def guarantee_rule(self) -> str:
        """``"pld_certified"`` or ``"basic"``: the bound :attr:`guarantee` is."""
        return "basic" if self.guarantee is self.basic else "pld_certified"

    def event(self) -> PrivacyEvent:
        """The releases as a privacy event: the per-release dominating pair with its
        ``(eps, delta)`` point, composed ``releases`` times (its certified composition is
        :attr:`pld_certified`; :attr:`basic` is the accountant's guarantee of it)."""
        if self.run_event is None:
            raise ValidationError(
                "run_event", "ReleasesComposition.event", "a composition from compose()", None
            )
        return self.run_event

    def to_dict(self) -> dict[str, Any]:
        return {
            "releases": self.releases,
            "per_release": {"epsilon": self.per_release.epsilon, "delta": self.per_release.delta},
            "basic": {"epsilon": self.basic.epsilon, "delta": self.basic.delta},
            "tight": {"epsilon": self.tight.epsilon, "delta": self.tight.delta},
            "tight_from_per_release": {
                "epsilon": self.tight_from.epsilon,
                "delta": self.tight_from.delta,
            },
            "pld_certified": None
            if self.pld_certified is None
            else {"epsilon": self.pld_certified.epsilon, "delta": self.pld_certified.delta},
            "guarantee": {
                "epsilon": self.guarantee.epsilon,
                "delta": self.guarantee.delta,
                "rule": self.guarantee_rule,
            },
            "statement": self.statement(),
        }

    def statement(self) -> str:
        """One sentence: the releases, the guarantee and the bound it is, then the others."""
        bounds = {
            "pld_certified": (self.pld_certified, "certified PLD composition"),
            "basic": (self.basic, "basic composition"),
        }
        first = self.guarantee_rule
        others = [
            f"{b} by {how}" for rule, (b, how) in bounds.items() if rule != first and b is not None
        ]
        if self.tight.epsilon < self.guarantee.epsilon:  # not an accountant's rule: reported
            others.append(
                f"{self.tight} by Kairouz-Oh-Viswanath composition of the per-release "
                "profile's points"
            )
        return (
            f"{self.releases} sample-and-threshold releases, each {self.per_release} for one "
            f"client added or removed: {self.guarantee} by {bounds[first][1]} (the guarantee); "
            + ", ".join(others)
        )


def compose(
    sampling_rate: Fraction,
    threshold: int,
    epsilon: float,
    delta: float,
    releases: int,
    total_delta: float | None = None,
) -> ReleasesComposition:
    """Basic and tight composition of ``releases`` independent sample-and-threshold releases.

    Each release is ``(epsilon, delta)``-DP per key (``delta`` its certified value at
    ``epsilon``). The tight bound evaluates the certified profile ``delta(eps')`` (exact
    privacy profile, :func:`privhist.mechanisms.sampling.profile.certified_delta`) on a grid of
    ``eps'`` from ``epsilon / 2`` to ``2 epsilon`` (only points above ``ln(1/(1-p))``: below it
    removing a client is no longer pure and the certificate does not apply), applies
    Kairouz-Oh-Viswanath optimal composition at each point with total delta ``total_delta``
    (default: that of basic composition), and keeps the smallest total epsilon. For a handful
    of releases at small delta this rarely beats basic composition (the optimal bound gains
    like ``sqrt(k)``); the gain appears with many releases or when the certified deltas leave
    slack below the target.

    ``pld_certified`` composes the dominating pair of the certified profile (module notes) on a
    ``2^-14`` grid; it is usually the smallest of the three.

    >>> c = compose(Fraction(1, 20), 14, 0.25, 2e-9, 4, total_delta=1e-8)
    >>> c.basic.epsilon, c.tight.epsilon < c.basic.epsilon
    (1.0, True)
    >>> c.pld_certified.epsilon < c.tight.epsilon
    True
    >>> c.event().count
    4
    """
    from privhist.mechanisms.sampling.profile import certified_delta, exp_lower

    fn = "compose"
    k = check_positive_int(releases, fn, "releases")
    per = Budget(epsilon, delta)
    p = Fraction(sampling_rate)
    event = _pair_event(p, threshold, epsilon, delta, k)
    basic = guarantee_of(event)
    target = basic.delta if total_delta is None else float(total_delta)
    if target < basic.delta:
        raise ValidationError(
            "total_delta", fn, f">= {basic.delta:.6g} (basic composition)", target
        )
    low = -math.log1p(-float(p))
    factors = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1, 1.25, 1.5, 2.0)
    grid = sorted({epsilon, *(epsilon * f for f in factors if epsilon * f > low)})
    points = []  # the certified per-release profile, where its certificate applies
    for e in grid:
        e_frac = Fraction(e)
        if exp_lower(e_frac) * (1 - p) <= 1:  # not strictly above ln(1/(1-p))
            continue
        d = delta if e == epsilon else certified_delta(p, threshold, e_frac).upper
        if e > epsilon:
            d = min(d, delta)
        points.append((e, d))
    tight, best_from = optimal_over_profile(points, k, target, (basic.epsilon, per))
    certified = certified_composition(p, threshold, epsilon, delta, k, target)
    return ReleasesComposition(k, per, basic, tight, best_from, certified, event)


@functools.lru_cache(maxsize=64)
def _pair_event(
    p: Fraction, threshold: int, epsilon: float, delta: float | None, releases: int
) -> PrivacyEvent:
    """:func:`~privhist.mechanisms.sampling.pair.threshold_pair_event` with the certified
    profile, kept for its public inputs (the event is immutable)."""
    from privhist.mechanisms.sampling.pair import threshold_pair_event

    return threshold_pair_event(p, threshold, epsilon, delta, releases)


@functools.lru_cache(maxsize=64)
def certified_composition(
    p: Fraction, threshold: int, epsilon: float, delta: float, releases: int, total_delta: float
) -> Budget | None:
    """The certified PLD composition (:data:`CERTIFIED_STEP`) of ``releases``
    sample-and-threshold releases at rate ``p``, ``threshold`` and per-release ``(epsilon,
    delta)``, at ``total_delta``; None when no epsilon reaches it. Public inputs only: kept, so
    the check of :func:`pld_epsilon`'s answer and :func:`compose` of the release it calibrates
    compute it once.

    >>> certified_composition(Fraction(1, 20), 14, 0.25, 2e-9, 4, 1e-8).epsilon < 1.0
    True
    """
    event = _pair_event(Fraction(p), threshold, epsilon, delta, releases)
    try:
        return account(event, total_delta, rules=("pld_certified",), step=CERTIFIED_STEP).budget
    except UnsupportedError:  # no epsilon reaches the target
        return None


#: what the budget and confidence of a composed release accept (its constructor's declarations)
BUDGET_CONSTRAINTS: dict[str, Constraint] = {
    "epsilon": Constraint.real(0, open_low=True),
    "delta": delta_constraint(positive=True),
    "confidence": Constraint.real(0, 1, open_low=True, open_high=True),
}

#: rounds of a binary search: each halves the interval, so 52 reach a float's resolution
STEPS = Constraint.integer(1, 52, note=" (float resolution)")


def step_constraints() -> dict[str, Constraint]:
    """The declarations of the options :func:`split_sample_and_threshold` passes on
    (``sampling_rate``, ``threshold``, ``alpha``, ``calibration``): sample-and-threshold's own."""
    from privhist.mechanisms.sampling import SampleAndThreshold

    declared = SampleAndThreshold.constraints()
    return {name: declared[name] for name in ("sampling_rate", "threshold", "alpha", "calibration")}


def split_sample_and_threshold(
    epsilon: float,
    delta: float,
    releases: int,
    *,
    confidence: float,
    sampling_rate: float | Fraction | None = None,
    threshold: int | None = None,
    alpha: float | Fraction | None = None,
    calibration: str | None = None,
    composition: str | None = None,
) -> SampleAndThreshold:
    """The one sample-and-threshold mechanism each of ``releases`` histograms uses.

    Each release gets ``delta / releases`` (:func:`split_budget`). Its epsilon depends on
    ``composition``:

    * ``"basic"``: ``epsilon / releases``, so that basic composition over the releases (the
      paper's Lemma 4.1) stays within the budget;
    * ``"pld"`` (the default): the largest per-release epsilon found (:func:`pld_epsilon`) at
      which the certified PLD composition of the releases is within ``(epsilon, delta)``; never
      below ``epsilon / releases``. A sample-and-threshold release is far more private than its
      ``(eps, delta)`` point says (removing a client is pure ``ln(1/(1-p))`` and adding one
      moves the count of one key), so the releases compose to much less than the sum: at
      ``(1, 1e-8)`` over 8 releases the split ``(1/8, 1.25e-9)`` composes to ``epsilon``
      0.19, and each release may take epsilon 0.67 instead of 0.125 (a sampling rate 0.081
      against 0.0196 at the default ``alpha``). The search stays at most ``releases``
      times ``epsilon``.

    With both ``sampling_rate`` and ``threshold`` given the per-release epsilon only names the
    point the release is certified at, and stays ``epsilon / releases``. The other options go to
    :class:`~privhist.mechanisms.sampling.SampleAndThreshold` unchanged.

    >>> split_sample_and_threshold(1.0, 1e-8, 4, confidence=0.95, composition="basic").epsilon
    0.25
    >>> m = split_sample_and_threshold(1.0, 1e-8, 4, confidence=0.95)
    >>> 0.25 < m.epsilon, compose_releases(m, 4, 1e-8).guarantee.epsilon <= 1.0
    (True, True)
    """
    from privhist.mechanisms.sampling import SampleAndThreshold

    eps_r, delta_r = split_budget(epsilon, delta, releases)
    rule = COMPOSITION.check(composition, "composition", "split_sample_and_threshold") or "pld"
    options: dict[str, Any] = {
        "sampling_rate": sampling_rate,
        "threshold": threshold,
        "alpha": alpha,
        "calibration": calibration,
        "confidence": confidence,
    }
    fixed = sampling_rate is not None and threshold is not None
    if rule == "pld" and releases > 1 and not fixed:
        try:
            eps_r = pld_epsilon(epsilon, delta, releases, tuple(sorted(options.items())))
        except TypeError:  # an option the search cannot keep (a list): the release names it
            SampleAndThreshold(eps_r, delta_r, **options)
            raise
    return SampleAndThreshold(eps_r, delta_r, **options)


#: how the budget of composed releases is split (:func:`split_sample_and_threshold`)
COMPOSITION = Constraint.one_of("pld", "basic", optional=True)


@functools.lru_cache(maxsize=32)
def pld_epsilon(
    epsilon: float, delta: float, releases: int, options: tuple[tuple[str, Any], ...]
) -> float:
    """The per-release epsilon of :func:`split_sample_and_threshold`'s ``"pld"`` rule.

    Each candidate ``e`` is the release ``SampleAndThreshold(e, delta / releases, **options)``
    composed ``releases`` times (:func:`compose`'s event). The composed epsilon grows about in
    proportion to ``e``, so the search starts at ``epsilon / releases`` and rescales ``e`` by
    ``epsilon`` over its composed epsilon (at most 8 steps; it stops within 0.5% below
    ``epsilon``), composing the pair of the float64 profile (an estimate) on the coarser grid
    :data:`SEARCH_STEP`; the certified composition (certified profile, :data:`CERTIFIED_STEP`)
    then checks the result, stepping down by 1% twice and then bisecting (6 geometric steps)
    towards ``epsilon / releases`` until it meets ``epsilon`` at ``delta``.
    ``epsilon / releases`` always does (its basic composition), so the result is never below
    it. A point the release or its profile cannot be built at is not a candidate. Public inputs
    only: the result is cached.
    """
    from privhist.mechanisms.sampling import SampleAndThreshold
    from privhist.mechanisms.sampling.pair import threshold_pair_event

    floor, delta_r = split_budget(epsilon, delta, releases)
    kwargs = dict(options)

    def composed(e: float, certified: bool) -> float:
        try:
            m = SampleAndThreshold(e, delta_r, **kwargs)
            p, tau = m.sampling_rate, m.threshold
            if certified:
                got = certified_composition(p, tau, m.epsilon, m.delta_exact, releases, delta)
                return math.inf if got is None else got.epsilon
            event = threshold_pair_event(
                p, tau, m.epsilon, m.delta_exact, releases, certified=False
            )
            return account(event, delta, rules=("pld_certified",), step=SEARCH_STEP).budget.epsilon
        except (ValidationError, UnsupportedError, ArithmeticError, ValueError):
            # a point the release or its profile cannot be built at (e.g. an epsilon so large
            # that the profile's arithmetic overflows): not a candidate
            return math.inf

    cap = releases * float(epsilon)
    best, e = floor, floor
    for _ in range(8):
        got = composed(e, False)
        if got <= epsilon:
            best = e
            if got >= 0.995 * epsilon or e >= cap:
                break
            step = min(cap, e * epsilon / got)
        elif math.isfinite(got):  # overshot: back off below the proportional estimate
            step = e * epsilon / got * 0.999
        else:  # not a valid release: halfway back
            step = math.sqrt(best * e)
        if step <= best:
            break
        e = step
    for shrink in (1.0, 0.99, 0.98):  # the certified figure is a little above the estimate
        if best * shrink <= floor:
            return floor
        if composed(best * shrink, True) <= epsilon:
            return best * shrink
    lo, hi = floor, best * 0.98  # far off (e.g. the certified profile fails there): bisect
    for _ in range(6):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if composed(mid, True) <= epsilon else (lo, mid)
    return lo


def compose_releases(
    mechanism: SampleAndThreshold, releases: int, total_delta: float
) -> ReleasesComposition:
    """:func:`compose` for ``releases`` runs of ``mechanism`` (at its certified delta)."""
    return compose(
        mechanism.sampling_rate,
        mechanism.threshold,
        mechanism.epsilon,
        mechanism.delta_exact,
        releases,
        total_delta=total_delta,
    )


def composed_metadata(
    method: str,
    parameters: dict[str, Any],
    composition: ReleasesComposition,
    rng: RandomSource | None = None,
) -> dict[str, Any]:
    """Release metadata of a run of composed releases: method, parameters, the guarantee for
    one client added or removed (:attr:`ReleasesComposition.guarantee`, with the whole
    :class:`ReleasesComposition`), and
    the randomness source (with a warning when it is seeded)."""
    summary = composition.to_dict()
    meta: dict[str, Any] = {
        "method": method,
        "parameters": parameters,
        "guarantee": {
            "epsilon": composition.guarantee.epsilon,
            "delta": composition.guarantee.delta,
            "neighbouring": "add or remove one client (one value)",
            "composition": summary,
            "statement": summary["statement"],
        },
    }
    if rng is not None:
        meta["randomness"] = rng.to_dict()
        if not rng.private:
            meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
    return meta
