"""Aggregations: counts, distinct users, sums, means, variances and quantiles per group.

:class:`Aggregation` releases, for groups of one or more columns, the metrics of
:mod:`privhist.metrics`, as one event charged once. Groups are chosen privately or given (public
partitions); values are fixed-point integers at a stated resolution, clamped to their public
bounds, and every noisy aggregate is an exact integer sum plus exact discrete noise.

**Contribution bounding.** At user level each user keeps at most ``k = max_partitions`` of its
groups and at most ``c = max_per_partition`` records in each (uniformly random choices,
:mod:`privhist.engines.local.aggregate`); a value ``x`` of a metric with bounds
``[lower, upper]`` counts as ``v = floor(x / r + 1/2)`` units of the resolution ``r``, clamped to
``[L, H] = [ceil(lower / r), floor(upper / r)]``. At record level every record is its own unit
(``k = c = 1``). A value that is empty or not a finite number leaves its record out of that
column's aggregates only (its values' number, sums, squares and tree): the record still counts
in ``count`` and ``count_users`` and in the bounding; the engines count such records per value
column (``values_not_numbers`` in the release's diagnostics, exact and not private). A value
column of a type that is not a type of numbers (a table's text, booleans, dates) is refused
before any record is read (:meth:`privhist.session.Session.aggregate`).

**Noise components.** Per group, each metric adds noise to integer aggregates (its
*components*); ``s`` is one user's largest change of a component in one group:

=============  =========================================================  ===================
metric         components (per group)                                     ``s`` (L2 per group)
=============  =========================================================  ===================
count          records kept                                               ``c``
count_users    users kept                                                 ``1``
sum            ``sum v``                                                  ``c max(|L|, |H|)``
mean           values ``n``; ``sum (v - m)`` with ``m`` the range's middle  ``c``; ``c M``
variance       as mean, and ``sum (v - m)**2``                             ``c M**2``
quantiles      a tree of ``16**4`` buckets of ``[L, H]``: every node's count  ``c sqrt(4)``
               (method ``tree``; ``exponential``: no noisy aggregate, below)
=============  =========================================================  ===================

with ``M = max(H - m, m - L)``. A user changes at most ``k`` groups, so a component's L2
sensitivity over all groups is ``sqrt(k) s`` (and its L1 sensitivity ``k s1``, ``s1`` the L1
change in one group: ``c L`` for a tree of ``L`` levels).

**Privacy.**

* *Gaussian (delta > 0).* Each component gets discrete Gaussian noise ``N_Z(0, sigma2)`` with
  ``sigma2 >= k s**2 / (2 rho_i)``: ``rho_i``-zCDP (Canonne, Kamath & Steinke 2020, Theorem 14 and
  its multivariate form), and the components compose to ``sum rho_i = rho_m`` (Bun & Steinke 2016,
  Lemma 2.3), adaptively, so bounds chosen privately first and keys selected first compose too.
  With *private groups at user level* the groups are selected by cumulative-sips
  (:class:`~privhist.mechanisms.user_level.cumulative.CumulativeSIPS`) over each user's groups
  with ``spent_rho = rho_m``: its event (zCDP plus the threshold failure of groups only the added
  user holds) certifies ``(epsilon, delta)`` for the whole. With *private groups at record level*
  the groups are selected by optimal partition selection
  (:class:`~privhist.mechanisms.optimal_selection.OptimalSelection`) at ``(epsilon_s, delta_s)``
  and the metrics are ``rho_m``-zCDP with ``zcdp_delta(rho_m, epsilon_m) <= delta_m``: basic
  composition gives ``(epsilon_s + epsilon_m, delta_s + delta_m)``. With *public groups*
  ``rho_m`` is the largest with ``zcdp_delta(rho_m, epsilon) <= delta``.
* *Laplace.* Each component gets discrete Laplace noise of scale ``k s1 / epsilon_i``
  (``epsilon_i``-DP), and basic composition gives ``sum epsilon_i = epsilon_m``: ``epsilon_m =
  epsilon`` with public groups (the release is then ``(epsilon, 0)``-DP whatever delta was
  allowed); with private groups the selection (optimal partition selection; at user level per
  group at ``(epsilon_s / k, delta / k)`` on the group's users; at record level with a sum, mean
  or variance the stability selection, *The selection's counts* below) takes ``epsilon_s`` and
  *all* of delta, the metrics ``epsilon_m = epsilon - epsilon_s``.

**The selection's counts.** With private groups at record level and Laplace noise (and no
automatic bound), the groups are chosen by the stability selection
(:class:`~privhist.mechanisms.stability.StabilityHistogram`: Korolova et al. 2009; the exact
discrete form of Algorithm 6 of ``private-weighted-sampling.txt``) instead of optimal partition
selection: each group's number ``n`` of values of the *free column* (the column of the first
sum, mean or variance, :meth:`Aggregation.free_column`) gets discrete Laplace noise of scale ``1 /
epsilon_s`` and the group is released when ``n + Z`` reaches the threshold ``T`` set by delta.
One record changes one group's ``n`` by at most 1, so this is ``(epsilon_s, delta)``-DP (the proof
in :mod:`privhist.mechanisms.stability`), and ``n + Z`` is released with the group. Its value is
then, as post-processing, the count of the free column's means and variances (which draw no
count of their own), and a sum of the free column is answered as ``sum (v - m) + m (n + Z)``: a
centred sum of sensitivity ``M = max(H - m, m - L)`` instead of ``max(|L|, |H|)``, when that
has the smaller variance at the release's shares (:meth:`Aggregation._centred`; at equal shares
always, unless the range is centred on 0: ``M**2 + m**2 = (L**2 + H**2) / 2``). The free column
is the first with a mean or variance, or whose first sum is answered so; with none, optimal
selection chooses the groups. The selection keeps one share beside the remaining components,
so a lone mean gives the selection and its centred sum half each (a third each to the
selection, the count and the centred sum before), and a lone sum of ``[0, U]`` has noise of
standard deviation ``sqrt(2) U / (2 epsilon_s)`` from each of its two parts: ``1 / sqrt(2)`` of
a direct sum's at the same share. The released
groups are those whose noisy counts passed the threshold, so near the threshold their counts
(and a free-column sum) are biased upwards; a group far above it is released with its count's
noise unbiased. Optimal selection releases a group with a few more records somewhat more often;
the free count is worth more to every group released. The metrics of other columns keep their
own counts; at user level the selection counts users, not values, and nothing is reused.

**Quantiles.** ``method="exponential"`` releases each level ``q`` of each group by one draw of
the exponential mechanism (McSherry & Talwar 2007; for quantiles, Smith 2011) over the ``16**4``
leaves of the tree (public candidates; when the range has fewer units than leaves, the units
themselves, each in its own leaf, so that integer data at ``resolution=1`` have the integers as
candidates): with ``q = a / d`` (a rational with ``d <= 10**4``),
``n`` the group's count and ``C_j`` the count before leaf ``j``, leaf ``j`` scores ``s_j =
|d (C_j + C_{j+1}) - 2 a n|`` (``2 d`` times the distance of the target rank ``q n`` to the
middle of the leaf's ranks ``[C_j, C_{j+1}]``), which one record moves by at most ``Delta = 2
max(a, d - a)`` (below the leaf both ``C`` and ``n`` grow: ``2 d - 2 a``; in it ``d - 2 a``;
above it ``-2 a``) and a user by ``c Delta`` in each of at most ``k`` groups. The middle, not
the nearest of the leaf's ranks (which scores every leaf holding the target 0 at half this
``Delta``): a neighbour of the answer then scores its own records' weight further off, which
on data with many equal values (integer ages) matters more than the answer's own offset. On
equal values ``e`` per unit with the target uniform in the answer's run, the expected distance
of the exponential mechanism's draw at ``epsilon = 1`` fell from 0.27 to 0.14 units at ``e =
5`` and from 0.14 to 0.07 at ``e = 10``. On adult (32 groups, a median of age alone at
epsilon 1, public groups), 40 releases each read privhist's mean error over groups 1.21x
OpenDP's with the nearest rank and 1.11x (interval 1.00-1.42) with the middle. OpenDP 0.16
draws a quantile by report-noisy-min with exponential noise (its ``summarize()`` names the
distribution ``ExponentialMin``, scale 2 at epsilon 1 on the score ``|2 C_<(v) + C_=(v) - n|``,
the same middle score), which is permute-and-flip (Ding, Kifer, Saucier, Wang, Xiao & Zhang 2021,
arXiv 2105.07260): at equal epsilon, with Laplace noise (permute-and-flip here too), the two
libraries' medians have the same law, and any gap between them is the budget split. With
``gamma = epsilon_g / (2 c Delta)``, the candidate is drawn, exactly, by permute-and-flip
(McKenna & Sheldon 2020; :mod:`privhist.noise.permute_flip`) with Laplace noise, and by the
exponential mechanism (probability proportional to ``exp(-gamma s_j)``,
:mod:`privhist.noise.exponential`) with Gaussian noise, and answered as the unit or the
leaf's middle. Both are ``epsilon_g``-DP;
permute-and-flip's expected score gap is never larger than the exponential mechanism's (their
Theorem 2; on the benchmark's generated data at user level the median error over groups went
from 1.05x OpenDP's to 0.96x), but only the
exponential mechanism is known to be ``epsilon_g``-bounded-range, hence ``epsilon_g**2 / 8``-zCDP
(Cesar & Rogers 2021, Lemma 3.4 via Durfee & Rogers 2019), which the Gaussian route needs: a metric
with ``L`` levels and budget ``epsilon_i`` (Laplace) or ``rho_i`` (Gaussian) takes
``epsilon_g = epsilon_i / (k L)`` or ``sqrt(8 rho_i / (k L))``. Its rank error on data without
gaps is a two-sided geometric of scale ``2 c max(q, 1 - q) / epsilon_g``; a tree answers every
level from one budget with a rank error of about ``sqrt(L (b - 1) / 2)`` node noises. ``"auto"``
takes the exponential mechanism when :data:`EM_GAPS` (4) times its predicted error is at most the
tree's (gaps between values widen its error, not the tree's): at record level with Laplace noise,
one to three levels.

**Choosing the noise.** ``noise="auto"`` (the default) takes Laplace when delta is 0, and
otherwise the noise whose components' standard deviations have the smaller geometric mean,
computed from the parameters before any data is read. With private groups at user level the
choice also picks the selection: Gaussian noise composes with cumulative-sips in zCDP, Laplace
noise with optimal selection run per group at ``(epsilon_s / k, delta / k)`` on the group's users
(each user in at most ``k`` groups; basic composition). On 10**6 generated rows with ``k = 2``,
``c = 5`` at ``(1, 1e-6)``, one metric at a time, the weighted selection released about 580
groups and the per-group one about 510 (nearly all among the 580); on the groups both released
the Laplace route's relative error was 0.71-0.93 of the Gaussian one (median over groups; 0.69-0.86
the mean) for sums, means and medians, over three draws each. ``"auto"`` prefers the smaller
error; ``noise="gaussian"`` keeps the weighted selection's extra groups.

Gaussian noise gains from spreading a user's change over many aggregates (L2 against L1
sensitivity: ``sqrt(k)`` against ``k`` over groups, ``sqrt(4)`` against ``4`` over a tree's
levels) and from zCDP composition across components, and pays for delta at ``epsilon``: at record
level (``k = 1``) with one or two metrics Laplace wins (at ``(1, 1e-6)`` a sum's noise has
standard deviation ``1.41 s / epsilon`` against ``4.5 s / epsilon``), at user level with many
groups per user Gaussian does.

Metrics not asked for are not computed, and a group absent from the data is released only when it
is public. Groups released privately are a function of the noisy selection only; the metrics of
the released groups use the same user contributions bounded again among the released groups.

**Shared components.** A sum of the same column, bounds and resolution as a mean is answered
from the mean's noisy count and centred sum, ``sum v = sum (v - m) + m n`` (post-processing),
and gives the mean its budget share: the two metrics then share twice the budget, split 1 : 1
between count and centred sum. For ``lower = 0`` (``m = M``) and Laplace noise the sum's noise
then has standard deviation ``2 M sqrt(2) / epsilon_p`` at the pooled ``epsilon_p``: ``1 /
sqrt(2)`` of a direct sum's at its own half; the mean's centred sum gets 1.5 times and its
count 3 times the budget they would have without the sum.

**Budget split.** The metrics' budget is split equally among the metrics (or by the ``weights``
given: each metric's share is its weight over the metrics' total), and each metric's share
among its components to minimise the variance of its estimate for values about half-way between
the middle and an end of their range (``|mean - m| = M / 2``, data-independent): a mean's error
``r sqrt(sigma_s**2 + (mean - m)**2 sigma_n**2) / n`` is smallest with ``rho_s : rho_n = 2 : 1``;
a variance's three terms (squares, sum, count, weighing ``M**2``, ``M**2`` and ``0.83 M**2``) with
``rho`` in the same ratios (Lagrange: ``rho_i`` proportional to each term's weight). With private
groups the selection takes one share beside one per noisy component of the metrics, ``1 / (1 +
components)`` of the budget (of the zCDP budget with cumulative-sips; else of epsilon, and with
Gaussian noise of delta too): a mean counts two components (its count and centred sum), a
variance three, a quantiles metric two, a sum answered from a mean's components none, any other
metric one. So the selection takes half beside a sum, a third beside a mean or a median and a
sixth beside a sum, a mean and a median: one share per noisy mechanism, as PipelineDP's split
gives, with a quantile's draw counted twice because its score is not monotone in the data (one
record moves every candidate's score, up or down), so the same noise scale relative to its
sensitivity costs twice the epsilon of a count's: OpenDP's rule. With a share per metric a mean
alone left half for the selection, and its error on adult was 1.23x PipelineDP's; with the
median counted once, a median alone had half of epsilon where OpenDP gives it two thirds, and its
exact expected relative error over adult's 32 groups of education and sex (age in ``[17, 90]``,
epsilon 1; each law integrated from permute-and-flip's report-noisy-max form) was 1.35x
OpenDP's; counted twice it gets two thirds, and the two laws are the same. Bounds
``"auto"`` take 5% of the metrics' budget each from it. These shares are
constants, not tuned to any data set.

*The split* is the user's to change (``weights``), as every peer's is: no one split is best for
every metric, since each peer favours another. On adult with a sum, a mean and a median and
public groups, PipelineDP gives the sum half of epsilon (one call per value column) and a sixth
to each of the mean's count and sum and the median; OpenDP's Polars context gives every noisy
aggregate the same noise scale relative to its sensitivity, so a fifth of epsilon to the sum, to
the mean's sum and to its count, and two fifths to the median (its exponential mechanism's
score is not monotone, so the same scale costs twice the epsilon); with private groups its
length takes a share like any aggregate (a median alone gets two thirds, the length a third).
Matching each of them on its favourite metric would need more than the whole budget at equal
mechanisms. ``"groups"`` weighs the selection against the metrics' total: ``{"groups": 1,
"q": 2}`` gives a median two thirds and the selection a third.

**Estimates.** ``count``, ``count_users`` and ``sum`` are the noisy aggregates (counts clamped at
0), each with a confidence interval for the aggregate of the bounded, clamped data (not of the raw
data); ``mean = m r + r (sum (v - m) + Z) / max(n + Z', 1)`` clamped to ``[lower, upper]``, as
PipelineDP's normalised sum; ``variance`` from the noisy second moment about ``m`` minus the
noisy first, clamped to ``[0, (upper - lower)**2 / 4]``; quantiles by descending the noisy tree
(children's counts clamped at 0), interpolated inside the leaf. A tree's noise is drawn lazily:
each node's noise, independent of every other, is drawn the first time a descent reads the node
and kept for the other levels asked, so the nodes no descent reads (all but ``16 x 4`` per level
asked) are never drawn. The released quantiles have exactly the law they have when every node is
drawn first, since they are a function of the read nodes only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.accounting.composition import ApproxDPEvent, PrivacyEvent, composed
from privhist.core.budget import Budget
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.groups import decode, encode
from privhist.core.metrics import Metric, default_resolution
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.requests import (
    Fields,
    GroupAggregates,
    GroupTable,
    KeyCounts,
    Request,
    UserKeys,
    ValueRange,
    ValueSpec,
)
from privhist.core.sparse import SparseCounts
from privhist.core.validation import check_positive_int
from privhist.core.version import LIBRARY
from privhist.io.release import Release
from privhist.mechanisms.releasable import Answers
from privhist.mechanisms.user_level._gauss import (
    calibrate,
    calibrate_rho,
    sigma2_for,
    tail_upper,
)
from privhist.noise import (
    DiscreteGaussian,
    DiscreteLaplace,
    discrete_gaussian,
    discrete_laplace,
    rational_at_least,
)

#: the quantile tree: ``BRANCHING**LEVELS`` buckets (as PipelineDP's default tree)
TREE = (4, 16)
#: how a metric's budget is split among its components, to minimise the error of its estimate
#: (module notes): a mean's count and centred sum 1 : 2, a variance's count, centred sum and
#: centred squares 0.83 : 1 : 1
WITHIN: dict[str, dict[str, Fraction]] = {
    "mean": {"n": Fraction(1, 3), "sum": Fraction(2, 3)},
    "variance": {
        "n": Fraction(83, 283),
        "sum": Fraction(100, 283),
        "squares": Fraction(100, 283),
    },
}
#: the same when the selection's noisy count is the metric's count
#: (:meth:`Aggregation.free_column`): a mean's centred sum takes all of its share, a variance's
#: centred sum and squares 1 : 1 (the Lagrange weights of the module notes without the count)
WITHIN_FREE: dict[str, dict[str, Fraction]] = {
    "mean": {"sum": Fraction(1)},
    "variance": {"sum": Fraction(1, 2), "squares": Fraction(1, 2)},
}
#: the noises a release may ask for
NOISES = ("auto", "gaussian", "laplace")
#: quantiles by the exponential mechanism when this many times its predicted rank error (on data
#: without gaps) is at most the tree's: gaps between values widen its error, the tree's not
EM_GAPS = 4
#: share of the metrics' budget spent on each bound chosen privately
AUTO_SHARE = 0.05
#: the quantiles of the units' largest and smallest values that an automatic bound is
AUTO_QUANTILE = 0.99
#: the grid automatic bounds are chosen from: 0 and +-2**j
AUTO_GRID = tuple(sorted({0.0, *(s * 2.0**j for s in (-1.0, 1.0) for j in range(-10, 41))}))
#: noisy counts of an automatic bound's histogram below this many standard deviations of the
#: noise count as 0 (post-processing): the many empty buckets then add no noise to the quantile
AUTO_CUTOFF = 3


def _part_of(total: float, share: Fraction) -> float:
    """``total * share`` as a float whose difference from ``total`` is a float too, so that the
    two spends add up to ``total`` exactly: the nearest float when that holds, else rounded down
    to a multiple of ``2**(e - 52)`` (``total = f 2**e``, ``1/2 <= f < 1``), which leaves a
    multiple of ``2**(e - 53)`` below ``2**e`` (shares such as 1/3)."""
    if total <= 0:
        return 0.0
    part = float(Fraction(total) * share)
    rest = Fraction(total) - Fraction(part)
    if rest >= 0 and Fraction(float(rest)) == rest:
        return part
    _, e = math.frexp(total)
    unit = Fraction(2) ** (e - 52)
    return float(math.floor(Fraction(total) * share / unit) * unit)


@dataclass(frozen=True)
class Component:
    """One noisy integer aggregate per group: its spec and metric, what it is (``records``,
    ``users``, ``n``, ``sum``, ``squares``, ``tree``) and its per-group sensitivities."""

    metric: str
    what: str
    spec: ValueSpec | None = None
    l2: Fraction = Fraction(1)
    l1: Fraction = Fraction(1)


@dataclass
class Aggregation:
    """Metrics per group as one release (see the module notes).

    Args:
        metrics: ``{column name: metric}`` (:mod:`privhist.metrics`), in output order.
        by: the group columns.
        epsilon, delta: the guarantee of the whole release.
        user_level: whether a user column is given (else every record is its own unit).
        max_partitions, max_per_partition: ``k`` and ``c`` (user level).
        partitions: the public groups (tuples of values, one per group column), or None for
            groups chosen privately.
        confidence: the confidence of the intervals.
        max_keys: the cap of the user-level group selection (held subsets, cumulative-sips).
        noise: ``"auto"`` (the noise with the smaller predicted error, module notes),
            ``"gaussian"`` or ``"laplace"``; after construction, the noise used.
        weights: relative weights of the metrics in the split of the metrics' budget
            (``{metric name: weight}``, 1 for a metric not named), and with private groups
            ``"groups"``: the selection's weight against the metrics' total (module notes,
            *The split*); None: equal weights and the selection's rule.
    """

    metrics: Mapping[str, Metric]
    by: tuple[str, ...]
    epsilon: float
    delta: float
    user_level: bool
    max_partitions: int = 1
    max_per_partition: int = 1
    partitions: tuple[tuple[Any, ...], ...] | None = None
    confidence: float = 0.95
    max_keys: int | None = None
    noise: str = "auto"
    weights: Mapping[str, float] | None = None
    _selector: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        fn = "aggregate"
        if not self.metrics:
            raise ValidationError("metrics", fn, "at least one metric", {})
        for name, metric in self.metrics.items():
            if not isinstance(name, str) or not name or name in self.by:
                raise ValidationError("metrics", fn, "names that are not group columns", name)
            if not isinstance(metric, Metric):
                raise ValidationError("metrics", fn, "metrics of privhist.metrics", metric)
            if metric.kind == "count_users" and not self.user_level:
                raise ValidationError("metrics", fn, "count_users() only with a user column", name)
        if not self.user_level:
            self.max_partitions = self.max_per_partition = 1
        if self.partitions is None and self.delta <= 0:
            raise ValidationError(
                "delta", fn, "> 0 when the groups are chosen privately (or give partitions)", 0.0
            )
        self._weights = self._checked_weights(self.weights)
        self.noise_requested = self.noise
        self.noise = self._resolve_noise(self.noise)
        self._calibrate()

    def _checked_weights(self, weights: Mapping[str, float] | None) -> dict[str, Fraction]:
        """The weights as exact fractions (a float's exact value): every metric's (1 unless
        named), and ``"groups"`` when given; a typed error for an unknown name, a weight that is
        not a finite positive number, or ``"groups"`` with public groups."""
        fn = "aggregate"
        if weights is not None and not isinstance(weights, Mapping):
            raise ValidationError("weights", fn, "a mapping of metric names to weights", weights)
        given = dict(weights or {})
        out: dict[str, Fraction] = {}
        for name, w in given.items():
            if name != "groups" and name not in self.metrics:
                known = ", ".join([*self.metrics, "groups"])
                raise ValidationError("weights", fn, f"names among {known}", name)
            if name == "groups" and self.partitions is not None:
                raise ValidationError(
                    "weights", fn, "no 'groups' weight with public partitions", name
                )
            ok = isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w)
            if not ok or w <= 0:
                raise ValidationError("weights", fn, "finite positive numbers", {name: w})
            out[name] = Fraction(w)
        for name in self.metrics:
            out.setdefault(name, Fraction(1))
        return out

    # -- calibration (from parameters only) ---------------------------------------------------

    @property
    def name(self) -> str:
        return "aggregate"

    @property
    def neighbouring(self) -> Neighbouring:
        if self.user_level:
            return Neighbouring.user(self.max_partitions, self.max_per_partition)
        return Neighbouring.add_remove()

    def _resolve_noise(self, noise: str) -> str:
        """The noise of the release (module notes, *Choosing the noise*)."""
        fn = "aggregate"
        if noise not in NOISES:
            raise ValidationError("noise", fn, f"one of {', '.join(NOISES)}", noise)
        if self.delta <= 0:
            if noise == "gaussian":
                raise ValidationError("noise", fn, "'laplace' or 'auto' when delta = 0", noise)
            return "laplace"
        if noise != "auto":
            return noise
        errors = {}
        for option in ("laplace", "gaussian"):
            self.noise = option
            self._calibrate()
            errors[option] = _log_error(self)
        return "laplace" if errors["laplace"] <= errors["gaussian"] else "gaussian"

    @property
    def selection_share(self) -> Fraction:
        """The share of the budget that chooses private groups (module notes): one share beside
        one per noisy component of the metrics, ``1 / (1 + components)``: a mean has two (count
        and centred sum), a variance three, a quantiles metric two (a score that is not monotone:
        the same noise scale costs twice the epsilon), a sum answered from a mean's components
        none, any other metric one; a mean or variance whose count is the selection's one less. A
        ``"groups"`` weight ``w`` sets it instead: ``w / (w + the metrics' weights)``."""
        return self._share_with(self.free_column())

    def _share_with(self, free: str | None) -> Fraction:
        if "groups" in self._weights:
            w = self._weights["groups"]
            return w / (w + sum(self._weights[n] for n in self.metrics))
        shared = self.shared_sums()
        parts = 0
        for name, m in self.metrics.items():
            if name in shared:
                continue
            own = {"mean": 2, "variance": 3, "quantiles": 2}.get(m.kind, 1)
            if free is not None and m.column == free and m.kind in ("mean", "variance"):
                own -= 1  # the count is the selection's
            parts += own
        return Fraction(1, 1 + parts)

    def free_column(self) -> str | None:
        """The column whose number of values per group the selection counts, when its noisy
        counts are reused as that column's counts (module notes, *The selection's counts*):
        groups chosen privately at record level with Laplace noise and no automatic bound, and
        the first column (in the metrics' order) with a mean or variance, or whose first sum
        has the smaller predicted variance centred (:meth:`_centred`); None otherwise."""
        if self.partitions is not None or self.user_level or self.noise != "laplace":
            return None
        if self._auto():
            return None
        columns = [m.column for m in self.metrics.values() if m.kind in ("sum", "mean", "variance")]
        for column in dict.fromkeys(columns):
            on = [(n, m) for n, m in self.metrics.items() if m.column == column]
            if any(m.kind in ("mean", "variance") for _, m in on):
                return str(column)
            name, first = next((n, m) for n, m in on if m.kind == "sum")
            if self._centred(name, first, str(column)):
                return str(column)
        return None

    def _centred(self, name: str, metric: Metric, free: str) -> bool:
        """Whether a sum of the free column is answered as its centred sum plus the middle times
        the selection's count: when that has the smaller variance at the release's shares,
        ``2 M**2 / e_i**2 + 2 m**2 / e_s**2 < 2 max(L**2, H**2) / e_i**2`` with ``e_i`` the
        sum's and ``e_s`` the selection's epsilon (parameters only)."""
        spec = self._spec(name, metric, {})
        sel = self._share_with(free)
        e_i = (1 - sel) * self._shares()[0][name]
        half = max(spec.high - spec.center, spec.center - spec.low)
        big = max(abs(spec.low), abs(spec.high))
        return half**2 / e_i**2 + Fraction(spec.center) ** 2 / sel**2 < big**2 / e_i**2

    def _calibrate(self) -> None:
        eps, dl = float(self.epsilon), float(self.delta)
        self.selection: dict[str, Any] = {}
        if self.partitions is not None:
            if self.noise == "gaussian":
                self.rho_m = calibrate_rho(eps, dl)
                self._event: PrivacyEvent = ApproxDPEvent(eps, dl)
            else:
                self.eps_m = eps
                self._event = ApproxDPEvent(eps, 0.0)
            return
        if self.user_level and self.noise == "gaussian":
            from privhist.mechanisms.user_level.cumulative import CumulativeSIPS

            rho, _ = calibrate(eps, dl, 0.5)
            self.rho_m = rho * (1 - self.selection_share)
            kwargs = {} if self.max_keys is None else {"max_keys": self.max_keys}
            self._selector = CumulativeSIPS(eps, dl, spent_rho=self.rho_m, **kwargs)
            self._event = self._selector.event()
            self.selection = {"mechanism": self._selector.name, **self._selector.parameters()}
        else:
            from privhist.mechanisms.optimal_selection import OptimalSelection

            eps_s = _part_of(eps, self.selection_share)
            eps_m = float(Fraction(eps) - Fraction(eps_s))  # exact (see _part_of)
            while Fraction(eps_s) + Fraction(eps_m) > Fraction(eps):
                eps_m = math.nextafter(eps_m, 0.0)
            if self.noise == "laplace":  # the metrics are pure: the selection takes all of delta
                dl_s, dl_m = dl, 0.0
                self.eps_m = eps_m
            else:
                dl_s = _part_of(dl, self.selection_share)
                dl_m = float(Fraction(dl) - Fraction(dl_s))
                while Fraction(dl_s) + Fraction(dl_m) > Fraction(dl):
                    dl_m = math.nextafter(dl_m, 0.0)
                self.rho_m = calibrate_rho(eps_m, dl_m)
            # at user level (Laplace noise) the selection runs on the users of each group, each
            # user in at most k groups: epsilon_s / k and delta / k per group
            nb = self.neighbouring if self.user_level else None
            if self.free_column() is not None:
                from privhist.mechanisms.stability import StabilityHistogram

                self._selector = StabilityHistogram(eps_s, dl_s)
            else:
                self._selector = OptimalSelection(eps_s, dl_s, nb, keys_only=True)
            self._event = composed([ApproxDPEvent(eps_s, dl_s), ApproxDPEvent(eps_m, dl_m)])
            self.selection = {"mechanism": self._selector.name, **self._selector.parameters()}

    def event(self) -> PrivacyEvent:
        return self._event

    def guarantee(self) -> Budget:
        from privhist.accounting.accountant import guarantee_of

        if self._weighted_selection():
            budget: Budget = self._selector.guarantee()
            return budget
        return guarantee_of(self._event, self.delta if self.delta > 0 else None, rules=("basic",))

    # -- requests -----------------------------------------------------------------------------

    def _fields(self, fields: Fields) -> Fields:
        return fields

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        if self.partitions is not None:
            return (
                (self._aggregates(fields, self._public_keys(), None),) if not self._auto() else ()
            )
        if self._weighted_selection():
            return (UserKeys(fields),)
        if self.free_column() is not None:  # one table: the selection's counts and the metrics'
            return (self._aggregates(fields, None, None),)
        if self.user_level:
            return (KeyCounts(fields, self.max_partitions, self.max_per_partition),)
        return (KeyCounts(fields),)

    def _weighted_selection(self) -> bool:
        """Whether the groups are chosen by cumulative-sips (user level, Gaussian noise)."""
        return self.partitions is None and self.user_level and self.noise == "gaussian"

    def _auto(self) -> bool:
        return any(m.auto for m in self.metrics.values())

    def _public_keys(self) -> tuple[Any, ...]:
        assert self.partitions is not None
        if len(self.by) == 1:
            return tuple(p[0] for p in self.partitions)
        return tuple(encode(p) for p in self.partitions)

    def _aggregates(
        self, fields: Fields, groups: tuple[Any, ...] | None, bounds: Mapping[str, Any] | None
    ) -> GroupAggregates:
        return GroupAggregates(
            fields,
            max_partitions=self.max_partitions,
            max_per_partition=self.max_per_partition,
            groups=groups,
            values=tuple(self._specs(bounds or {})),
        )

    # -- bounds and components ----------------------------------------------------------------

    def _bounds(self, name: str, metric: Metric, chosen: Mapping[str, Any]) -> tuple[float, float]:
        lo, hi = chosen.get(name, (metric.lower, metric.upper))
        return float(lo), float(hi)

    def _spec(self, name: str, metric: Metric, chosen: Mapping[str, Any]) -> ValueSpec:
        lo, hi = self._bounds(name, metric, chosen)
        units = 2**10 if metric.kind == "variance" else 2**16
        r = metric.resolution or default_resolution(lo, hi, units)
        low, high = math.ceil(lo / r - 1e-9), math.floor(hi / r + 1e-9)
        if high <= low:
            raise ValidationError(
                "resolution", f"metrics.{metric.kind}", f"finer than the range {lo}..{hi}", r
            )
        center = (low + high) // 2
        return ValueSpec(
            name=name,
            column=str(metric.column),
            low=low,
            high=high,
            resolution=r,
            center=center,
            squares=metric.kind == "variance",
            tree=TREE if metric.kind == "quantiles" else None,
        )

    def _specs(self, chosen: Mapping[str, Any]) -> list[ValueSpec]:
        return [
            self._spec(name, m, chosen)
            for name, m in self.metrics.items()
            if m.kind in ("sum", "mean", "variance", "quantiles")
        ]

    def components(self, chosen: Mapping[str, Any] | None = None) -> list[Component]:
        """The noisy aggregates of the metrics, with their per-group sensitivities (the bounds
        of ``"auto"`` metrics as ``chosen``; unknown ones as 1 until chosen)."""
        c = self.max_per_partition
        out: list[Component] = []
        specs = {s.name: s for s in self._specs(chosen or {})} if not self._auto() or chosen else {}
        free = self.free_column()
        for name, m in self.metrics.items():
            if m.kind == "count":
                out.append(Component(name, "records", None, Fraction(c), Fraction(c)))
            elif m.kind == "count_users":
                out.append(Component(name, "users", None, Fraction(1), Fraction(1)))
            else:
                spec = specs.get(name)
                if m.kind == "sum" and name in self.shared_sums():
                    continue  # from its mean's count and centred sum (module notes)
                half = 1 if spec is None else max(spec.high - spec.center, spec.center - spec.low)
                if (
                    m.kind == "sum"
                    and free is not None
                    and m.column == free
                    and self._centred(name, m, free)
                ):
                    # centred, its count the selection's
                    out.append(
                        Component(name, "centred", spec, Fraction(c * half), Fraction(c * half))
                    )
                elif m.kind == "sum":
                    big = 1 if spec is None else max(abs(spec.low), abs(spec.high))
                    out.append(Component(name, "sum", spec, Fraction(c * big), Fraction(c * big)))
                elif m.kind in ("mean", "variance"):
                    if m.column != free:
                        out.append(Component(name, "n", spec, Fraction(c), Fraction(c)))
                    out.append(Component(name, "sum", spec, Fraction(c * half), Fraction(c * half)))
                    if m.kind == "variance":
                        sq = Fraction(c * half * half)
                        out.append(Component(name, "squares", spec, sq, sq))
                elif self.quantile_method(name) == "exponential":  # a rank score per group
                    out.append(Component(name, "exponential", spec, Fraction(c), Fraction(c)))
                else:  # quantiles: a count per level in each group
                    levels = TREE[0]
                    out.append(
                        Component(
                            name, "tree", spec, Fraction(c) * _sqrt_up(levels), Fraction(c * levels)
                        )
                    )
        return out

    def quantile_method(self, name: str) -> str:
        """How the quantiles metric ``name`` is released (module notes, *Quantiles*): as asked,
        or (``"auto"``) the exponential mechanism when :data:`EM_GAPS` times its predicted
        rank error is at most the tree's."""
        metric = self.metrics[name]
        if metric.method != "auto":
            return metric.method
        share = self._shares()[0][name]
        k, c = self.max_partitions, self.max_per_partition
        levels, b = TREE
        if self.noise == "gaussian":
            sd_node = math.sqrt(float(k * Fraction(c * c * levels) / (2 * self.rho_m * share)))
        else:
            sd_node = math.sqrt(2.0) * float(k * c * levels / (Fraction(self.eps_m) * share))
        tree = sd_node * math.sqrt(levels * (b - 1) / 2)
        em = _em_rank_sd(self._em_epsilon(share, len(metric.levels)), c, metric.levels)
        return "exponential" if EM_GAPS * em <= tree else "tree"

    def _flip(self) -> bool:
        """Whether quantile draws use permute-and-flip: with Laplace noise (pure DP composed
        basically, where it is never worse than the exponential mechanism); with Gaussian noise
        the exponential mechanism's ``epsilon**2 / 8`` zCDP (bounded range) is the better
        account (permute-and-flip is only known to be ``epsilon**2 / 2``-zCDP, as any
        ``epsilon``-DP mechanism)."""
        return self.noise != "gaussian"

    def _em_epsilon(self, part: Fraction, n_levels: int) -> Fraction:
        """The epsilon of each exponential-mechanism draw (one per group and level) for a metric
        with ``part`` of the metrics' budget, rounded down to a multiple of ``2**-40``: ``k L``
        draws of it compose to the part (Laplace: basic composition; Gaussian: each draw is
        ``epsilon**2 / 8``-zCDP, module notes)."""
        draws = self.max_partitions * n_levels
        if self.noise == "gaussian":
            square = 8 * self.rho_m * part / draws  # epsilon**2
            return Fraction(math.isqrt(math.floor(square * 2**80)), 2**40)
        return Fraction(math.floor(Fraction(self.eps_m) * part / draws * 2**40), 2**40)

    def _shares(self) -> tuple[dict[str, Fraction], int]:
        """Each metric's share of the metrics' budget, its weight over the metrics' total (equal
        by default; module notes, *The split*) of what the automatic bounds leave (each takes
        :data:`AUTO_SHARE` first), and the number of automatic bounds."""
        n_auto = sum((m.lower == "auto") + (m.upper == "auto") for m in self.metrics.values())
        rest = 1 - Fraction(AUTO_SHARE) * n_auto
        total = sum(self._weights[n] for n in self.metrics)
        return {n: rest * self._weights[n] / total for n in self.metrics}, n_auto

    def split(self) -> dict[str, Fraction]:
        """Each metric's share of the whole budget (its automatic bounds' included) and, with
        private groups, the selection's (``"groups"``; of the zCDP budget with cumulative-sips,
        else of epsilon)."""
        sel = self.selection_share if self.partitions is None else Fraction(0)
        shares, _ = self._shares()
        out = {}
        for name, m in self.metrics.items():
            auto = (m.lower == "auto") + (m.upper == "auto")
            out[name] = (1 - sel) * (shares[name] + Fraction(AUTO_SHARE) * auto)
        if self.partitions is None:
            out["groups"] = sel
        return out

    def shared_sums(self) -> dict[str, str]:
        """``{sum metric: mean metric}`` for every sum answered from a mean's components: the
        first mean of the same column, bounds and resolution (none of them automatic)."""
        out: dict[str, str] = {}
        for name, m in self.metrics.items():
            if m.kind != "sum" or m.auto:
                continue
            for other, o in self.metrics.items():
                same = (o.column, o.lower, o.upper, o.resolution)
                if (
                    o.kind == "mean"
                    and not o.auto
                    and same
                    == (
                        m.column,
                        m.lower,
                        m.upper,
                        m.resolution,
                    )
                ):
                    out[name] = other
                    break
        return out

    def component_part(self, comp: Component, shares: Mapping[str, Fraction]) -> Fraction:
        """A component's part of the metrics' budget, from the metrics' ``shares``: its share
        of its metric's (:data:`WITHIN`, or :data:`WITHIN_FREE` when the selection's count is the
        metric's) times the metric's share; a mean answering sums too has its own share and
        theirs, split between count and centred sum 1 : 1 (or all to the centred sum)."""
        metric = self.metrics[comp.metric]
        free = metric.column is not None and metric.column == self.free_column()
        owned = [s for s, owner in self.shared_sums().items() if owner == comp.metric]
        if owned:
            total = shares[comp.metric] + sum(shares[s] for s in owned)
            return (Fraction(1) if free else Fraction(1, 2)) * total
        within = WITHIN_FREE if free else WITHIN
        return shares[comp.metric] * within.get(metric.kind, {}).get(comp.what, Fraction(1))

    # -- drawing ------------------------------------------------------------------------------

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        fields = answers.fields
        shares, n_auto = self._shares()
        chosen = self._choose_bounds(answers, rng) if n_auto else {}
        meta_selection: dict[str, Any] = {}
        free: tuple[npt.NDArray[Any], Fraction] | None = None
        if self.partitions is not None:
            groups: tuple[Any, ...] = self._public_keys()
            request = self._aggregates(fields, groups, chosen)
            table: GroupTable = answers.ask(request) if n_auto else answers.of(GroupAggregates)
        elif self.free_column() is not None:
            table, free = self._select_counted(answers.of(GroupAggregates), rng)
            meta_selection = {"released_groups": len(table)}
        else:
            released = self._select(answers, rng)
            meta_selection = {"released_groups": len(released)}
            table = answers.ask(self._aggregates(fields, tuple(released.tolist()), chosen))
        return self._release(table, chosen, shares, rng, meta_selection, free)

    def _select_counted(
        self, table: GroupTable, rng: RandomSource
    ) -> tuple[GroupTable, tuple[npt.NDArray[Any], Fraction]]:
        """The groups of ``table`` the stability selection releases on the free column's counts
        of values (:meth:`free_column`), and their noisy counts with the noise's scale."""
        column = self.free_column()
        spec = next(s for s in self._specs({}) if s.column == column)
        counts = Counts.from_arrays(table.keys, table.values[spec.name]["n"])
        release = self._selector.release(counts, rng)
        at = {k: i for i, k in enumerate(table.keys.tolist())}
        rows = np.array([at[k] for k in release.keys.tolist()], dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        noisy = np.asarray(release.values, dtype=np.int64)[order]
        return _rows_of(table, rows[order]), (noisy, self._selector.noise.scale)

    def _select(self, answers: Answers, rng: RandomSource) -> npt.NDArray[Any]:
        if self._weighted_selection():
            release = self._selector.release_weighted(answers.of(UserKeys), rng)
        else:
            release = self._selector.release(answers.of(KeyCounts), rng)
        keys: npt.NDArray[Any] = release.keys
        return keys

    def _choose_bounds(self, answers: Answers, rng: RandomSource) -> dict[str, tuple[float, float]]:
        """``"auto"`` bounds: the grid point below which (above which) lie the largest (smallest)
        values of :data:`AUTO_QUANTILE` of the units, from noisy histograms of the units' largest
        and smallest values (each unit in one bucket of each: sensitivity 1)."""
        out: dict[str, tuple[float, float]] = {}
        self.auto_noise: dict[str, Any] = {}
        for name, m in self.metrics.items():
            if not m.auto:
                continue
            fields = Fields(str(m.column), answers.fields.user, answers.fields.reading)
            hi_hist, lo_hist = answers.ask(ValueRange(fields, AUTO_GRID))
            lo, hi = m.lower, m.upper
            if hi == "auto":
                noisy = self._auto_noise(hi_hist, rng)
                cum = np.cumsum(noisy)
                total = max(int(cum[-1]), 1)
                i = int(np.searchsorted(cum, AUTO_QUANTILE * total, side="left"))
                hi = AUTO_GRID[min(i, len(AUTO_GRID) - 1)]
            if lo == "auto":
                noisy = self._auto_noise(lo_hist, rng)
                cum = np.cumsum(noisy)
                total = max(int(cum[-1]), 1)
                i = int(np.searchsorted(cum, (1 - AUTO_QUANTILE) * total, side="left"))
                lo = AUTO_GRID[max(min(i, len(AUTO_GRID) - 1) - 1, 0)]
            lo_f, hi_f = float(lo), float(hi)  # type: ignore[arg-type]
            if not lo_f < hi_f:
                hi_f = lo_f + max(abs(lo_f), 1.0)
            out[name] = (lo_f, hi_f)
        return out

    def _auto_noise(self, hist: npt.NDArray[Any], rng: RandomSource) -> npt.NDArray[np.int64]:
        counts = np.asarray(hist, dtype=np.int64)
        if self.noise == "gaussian":
            s2 = sigma2_for(self.rho_m * Fraction(AUTO_SHARE), 1)
            noisy = counts + discrete_gaussian(s2, rng, counts.shape[0])
            std = math.sqrt(float(s2))
        else:
            scale = rational_at_least(1 / (Fraction(self.eps_m) * Fraction(AUTO_SHARE)))
            noisy = counts + discrete_laplace(scale, rng, counts.shape[0])
            std = math.sqrt(2) * float(scale)
        out: npt.NDArray[np.int64] = np.where(noisy >= AUTO_CUTOFF * std, noisy, 0)
        return out

    def noise_parameters(
        self, chosen: Mapping[str, Any] | None = None
    ) -> list[tuple[Component, Fraction]]:
        """Each component with its noise: ``sigma2`` (Gaussian) or the scale (Laplace), and for
        quantiles by the exponential mechanism the epsilon of each draw."""
        shares, _ = self._shares()
        k = self.max_partitions
        out = []
        for comp in self.components(chosen):
            part = self.component_part(comp, shares)
            if comp.what == "exponential":  # the epsilon of each draw
                levels = len(self.metrics[comp.metric].levels)
                out.append((comp, self._em_epsilon(part, levels)))
            elif self.noise == "gaussian":
                out.append((comp, _sigma2(self.rho_m * part, k * comp.l2 * comp.l2)))
            else:
                eps_i = Fraction(self.eps_m) * part
                out.append((comp, rational_at_least(k * comp.l1 / eps_i)))
        return out

    def _noisy(self, values: npt.NDArray[Any], param: Fraction, rng: RandomSource) -> Any:
        n = int(np.asarray(values).size)
        if self.noise == "gaussian":
            z = discrete_gaussian(param, rng, n)
        else:
            z = discrete_laplace(param, rng, n)
        return np.asarray(values, dtype=np.int64).reshape(-1) + z

    def _interval(self, param: Fraction, confidence: float | None = None) -> int:
        """The half-width ``w`` of a ``confidence`` interval of the noise: ``Pr[|Z| > w] <= 1 -
        confidence`` (exact below ``2**20`` of variance; above, from the rigorous tail bound
        :func:`~privhist.mechanisms.user_level._gauss.tail_upper`, which can only widen it)."""
        conf = self.confidence if confidence is None else confidence
        if self.noise == "laplace":
            return int(DiscreteLaplace(param).interval(conf)[1])
        if param <= 2**20:
            return int(DiscreteGaussian(param).interval(conf)[1])
        target = (1 - conf) / 2
        lo, hi = 0, int(10 * math.sqrt(float(param))) + 2  # tail_upper(., hi) is far below
        while hi - lo > 1:  # the smallest w with Pr[Z >= w + 1] <= target
            mid = (lo + hi) // 2
            if tail_upper(param, mid + 1) <= target:
                hi = mid
            else:
                lo = mid
        return hi

    def _release(
        self,
        table: GroupTable,
        chosen: Mapping[str, Any],
        shares: Mapping[str, Fraction],
        rng: RandomSource,
        selection: dict[str, Any],
        free: tuple[npt.NDArray[Any], Fraction] | None = None,
    ) -> Release:
        """The release of ``table``'s groups; ``free``: the selection's noisy counts of the free
        column's values (one per group of ``table``) and their noise's scale."""
        g = len(table)
        columns: dict[str, npt.NDArray[Any]] = {}
        noisy: dict[tuple[str, str], Any] = {}
        described: list[dict[str, Any]] = []
        for comp, param in self.noise_parameters(chosen):
            if comp.what == "records":
                raw = table.records
            elif comp.what == "users":
                raw = table.users
            else:
                assert comp.spec is not None
                parts = table.values[comp.spec.name]
                raw = parts[{"exponential": "tree", "centred": "sum"}.get(comp.what, comp.what)]
                if comp.what == "centred" or (
                    comp.what == "sum" and self.metrics[comp.metric].kind in ("mean", "variance")
                ):
                    # the sum of centred values, exact from the true count
                    raw = raw - comp.spec.center * parts["n"]
            if comp.what == "exponential":  # the scores are the leaves' counts'
                assert comp.spec is not None
                noisy[(comp.metric, comp.what)] = (_sparse(raw), param)
                described.append(
                    {
                        "metric": comp.metric,
                        "aggregate": (
                            "permute-and-flip" if self._flip() else "exponential mechanism"
                        )
                        + " over the leaves of the tree",
                        "epsilon_per_group_and_level": float(param),
                        "score": "2 |q n - the middle of the candidate's ranks|",
                        "score_sensitivity_per_group": (
                            f"{2 * self.max_per_partition} max(q, 1 - q)"
                        ),
                    }
                )
                continue
            if comp.what == "tree":  # drawn node by node as the descents read them
                noisy[(comp.metric, comp.what)] = (
                    _LazyTree(_sparse(raw), param, self._noisy, rng),
                    param,
                )
            else:
                noisy[(comp.metric, comp.what)] = (
                    self._noisy(raw, param, rng).reshape(raw.shape) if g else raw,
                    param,
                )
            described.append(
                {
                    "metric": comp.metric,
                    "aggregate": comp.what,
                    "l2_sensitivity": float(comp.l2 * _sqrt_up(self.max_partitions)),
                    "sigma2" if self.noise == "gaussian" else "scale": float(param),
                }
            )
        specs = {s.name: s for s in self._specs(chosen)}
        if free is not None:  # the selection's counts stand for the free column's
            column = self.free_column()
            for name, m in self.metrics.items():
                if m.column == column and m.kind in ("mean", "variance"):
                    noisy[(name, "n")] = free
        for name, m in self.metrics.items():
            spec = specs.get(name)
            if m.kind in ("count", "count_users"):
                value, param = noisy[(name, "records" if m.kind == "count" else "users")]
                w = self._interval(param)
                columns[name] = np.maximum(value, 0)
                columns[f"{name}_lower"] = np.maximum(value - w, 0)
                columns[f"{name}_upper"] = np.maximum(value + w, 0)
            elif m.kind == "sum" and (name in self.shared_sums() or (name, "centred") in noisy):
                # sum v = sum (v - m) + m n, both noisy: a mean's centred sum and count, or the
                # sum's own centred sum and the selection's count (module notes); the interval
                # joins each noise's at half the miss probability (union bound)
                assert spec is not None
                owner = self.shared_sums().get(name)
                if owner is not None:
                    (centred, p_s), (count, p_n) = noisy[(owner, "sum")], noisy[(owner, "n")]
                else:
                    assert free is not None
                    (centred, p_s), (count, p_n) = noisy[(name, "centred")], free
                value = centred + spec.center * count
                half = (1 + self.confidence) / 2
                w = self._interval(p_s, half) + abs(spec.center) * self._interval(p_n, half)
                r = spec.resolution
                columns[name] = in_values(value, r)
                columns[f"{name}_lower"] = in_values(value - w, r)
                columns[f"{name}_upper"] = in_values(value + w, r)
            elif m.kind == "sum":
                assert spec is not None
                value, param = noisy[(name, "sum")]
                w = self._interval(param)
                r = spec.resolution
                columns[name] = in_values(value, r)
                columns[f"{name}_lower"] = in_values(value - w, r)
                columns[f"{name}_upper"] = in_values(value + w, r)
            elif m.kind in ("mean", "variance"):
                assert spec is not None
                n = np.maximum(noisy[(name, "n")][0], 1).astype(np.float64)
                s = noisy[(name, "sum")][0].astype(np.float64)
                lo, hi = in_values(spec.low, spec.resolution), in_values(spec.high, spec.resolution)
                mean_units = spec.center + s / n
                if m.kind == "mean":
                    columns[name] = np.clip(in_values(mean_units, spec.resolution), lo, hi)
                else:
                    q = noisy[(name, "squares")][0].astype(np.float64)
                    var_units = q / n - (s / n) ** 2
                    top = ((spec.high - spec.low) / 2) ** 2
                    columns[name] = np.clip(var_units, 0, top) * spec.resolution**2
            elif (name, "exponential") in noisy:
                assert spec is not None
                leaves, eps_g = noisy[(name, "exponential")]
                for q in m.levels:
                    columns[f"{name}_{q:g}"] = _em_quantiles(
                        leaves, q, spec, eps_g, self.max_per_partition, rng, self._flip()
                    )
            else:
                assert spec is not None
                lazy = noisy[(name, "tree")][0]
                for q in m.levels:
                    columns[f"{name}_{q:g}"] = _tree_quantiles(lazy, q, spec)
        keys = _decoded_keys(table, self.by)
        order = _order(keys)
        release_keys = keys[order]
        extra = {name: np.asarray(v)[order] for name, v in columns.items()}
        meta = self._metadata(chosen, described, selection, rng, shares)
        diagnostics = {**table.facts, "groups": g}
        read = sorted({s.column for s in specs.values()})
        found = diagnostics.pop("values_not_numbers", None) or {}
        if read:  # every value column's, 0 where an engine's partitions found none
            diagnostics["values_not_numbers"] = {c: int(found.get(c, 0)) for c in read}
        return Release(keys=release_keys, metadata=meta, diagnostics=diagnostics, extra=extra)

    def _within_text(self) -> list[str]:
        """How the sums, means and variances of this release split their shares among their
        components (:meth:`component_part`), one clause per metric that has several parts or
        none of its own, for the metadata: a mean's count and centred sum 1 : 2, or all to the
        centred sum when the selection's count is its count; a variance's as
        :data:`WITHIN`; a mean answering sums pools their shares, split 1 : 1."""
        free = self.free_column()
        shared = self.shared_sums()
        out: list[str] = []
        for name, m in self.metrics.items():
            owned = [s for s, owner in shared.items() if owner == name]
            share = f"its share and that of {', '.join(map(repr, owned))}" if owned else "its share"
            if m.kind in ("mean", "variance") and free is not None and m.column == free:
                parts = "centred sum" if m.kind == "mean" else "centred sum and squares 1:1"
                out.append(
                    f"{name!r} has no count of its own (the selection's noisy count of "
                    f"{free!r} is its count): {share} to its {parts}"
                )
            elif owned:
                out.append(f"{name!r}: {share}, count and centred sum 1:1")
            elif m.kind == "mean":
                out.append(f"{name!r}: count and centred sum 1:2")
            elif m.kind == "variance":
                out.append(f"{name!r}: count, centred sum and squares 0.83:1:1")
            elif name in shared:
                out.append(
                    f"{name!r} is answered from the count and centred sum of {shared[name]!r}, "
                    "to which it gives its share"
                )
            elif m.kind == "sum" and free is not None and m.column == free:
                if self._centred(name, m, free):
                    out.append(
                        f"{name!r} is its centred sum plus the middle times the selection's "
                        f"noisy count of {free!r}"
                    )
        return out

    def _metadata(
        self,
        chosen: Mapping[str, Any],
        noise: list[dict[str, Any]],
        selection: dict[str, Any],
        rng: RandomSource,
        shares: Mapping[str, Fraction],
    ) -> dict[str, Any]:
        g = self.guarantee()
        nb = self.neighbouring.describe()
        specs = {s.name: s for s in self._specs(chosen)}
        metrics = {}
        for name, m in self.metrics.items():
            entry: dict[str, Any] = {"kind": m.kind}
            if m.column is not None:
                lo, hi = self._bounds(name, m, chosen)
                spec = specs[name]
                entry.update(
                    column=m.column,
                    lower=lo,
                    upper=hi,
                    bounds_chosen_privately=m.auto,
                    resolution=spec.resolution,
                    clamped_to_units=[spec.low, spec.high],
                )
                if name in self.shared_sums():
                    entry["answered_from"] = (
                        f"the count and centred sum of {self.shared_sums()[name]!r}: "
                        "sum = centred sum + middle x count"
                    )
                if m.levels:
                    entry["levels"] = list(m.levels)
                    entry["method"] = self.quantile_method(name)
                    entry["tree"] = {"levels": TREE[0], "branching": TREE[1]}
            entry["budget_share"] = float(shares[name])  # of the metrics' budget
            metrics[name] = entry
        meta: dict[str, Any] = {
            "mechanism": "aggregate",
            "key_columns": list(self.by),
            "groups": "public partitions" if self.partitions is not None else "chosen privately",
            "metrics": metrics,
            "noise": self.noise,
            "noise_requested": self.noise_requested,
            "components": noise,
            "budget_split": (
                _split_text(shares, self._weights)
                + (f" ({'; '.join(clauses)})" if (clauses := self._within_text()) else "")
                + (f"; {AUTO_SHARE:g} per automatic bound" if chosen else "")
                + (
                    f"; {float(self.selection_share):.4g} of the budget chose the groups"
                    if self.partitions is None
                    else ""
                )
            ),
            "contribution_bounding": (
                f"each user keeps at most {self.max_partitions} group(s) and at most "
                f"{self.max_per_partition} record(s) per group; values clamped to their bounds"
                if self.user_level
                else "each record is its own unit; values clamped to their bounds"
            ),
            "guarantee": {
                "epsilon": g.epsilon,
                "delta": g.delta,
                "neighbouring": nb,
                "statement": f"{g} under {nb} neighbours",
            },
            "confidence": self.confidence,
            "library": LIBRARY,
            "randomness": rng.to_dict(),
        }
        if self.selection:
            meta["selection"] = {**self.selection, **selection}
            free = self.free_column()
            if free is not None:
                meta["selection"]["counts"] = (
                    f"the groups' numbers of values of {free!r}; their noisy counts are the "
                    f"counts of the sums, means and variances of {free!r}"
                )
        if not rng.private:
            meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
        return meta


def _log_error(aggregation: Aggregation) -> float:
    """The mean log standard deviation of the components' noise, at the noise the aggregation
    is calibrated for (parameters only; unknown automatic bounds as one unit)."""
    chosen = {name: _planned_bounds(m) for name, m in aggregation.metrics.items() if m.auto}
    logs = []
    free = aggregation.free_column()
    # the selection's count stands for the free column's counts: its noise is theirs
    free_sd = math.sqrt(2.0) * float(aggregation._selector.noise.scale) if free else 0.0
    for m in aggregation.metrics.values():
        if free is not None and m.column == free and m.kind in ("mean", "variance"):
            logs.append(math.log(free_sd))
    for comp, param in aggregation.noise_parameters(chosen):
        if comp.what == "exponential":  # a rank error, as a noise's standard deviation
            levels = aggregation.metrics[comp.metric].levels
            logs.append(math.log(_em_rank_sd(param, aggregation.max_per_partition, levels)))
        elif aggregation.noise == "gaussian":
            logs.append(0.5 * math.log(float(param)))
        elif comp.what == "centred":  # sum (v - m) + m n: both noises
            assert comp.spec is not None
            sd = math.sqrt(2.0) * float(param)
            logs.append(0.5 * math.log(sd**2 + (comp.spec.center * free_sd) ** 2))
        else:  # the discrete Laplace's variance is below the continuous one's, 2 t**2
            logs.append(math.log(math.sqrt(2.0) * float(param)))
    return sum(logs) / len(logs)


def _sigma2(rho: Fraction, sensitivity2: Fraction) -> Fraction:
    """``sigma2 >= sensitivity2 / (2 rho)`` (:func:`sigma2_for`), an integer above ``2**30`` so
    that the exact sampler takes it."""
    s2 = sigma2_for(rho, sensitivity2)
    return Fraction(math.ceil(s2)) if s2 > 2**30 else s2


def _sqrt_up(n: int) -> Fraction:
    """A rational at least ``sqrt(n)`` (exact for squares)."""
    r = math.isqrt(n)
    if r * r == n:
        return Fraction(r)
    return rational_at_least(Fraction(math.sqrt(n)) * (1 + Fraction(1, 2**40)), 2**20)


class _LazyTree:
    """The noisy trees of every group, each node's noise drawn when first read (module notes):
    ``children(groups, starts)`` gives the noisy counts of the ``b`` nodes from ``starts[i]`` in
    group ``groups[i]``, drawing in one batch the noise of those not drawn before."""

    def __init__(self, raw: SparseCounts, param: Fraction, noisy: Any, rng: Any) -> None:
        self.raw = raw
        self.param, self.noisy, self.rng = param, noisy, rng
        self.drawn: dict[tuple[int, int], npt.NDArray[np.int64]] = {}

    def __len__(self) -> int:
        return int(self.raw.shape[0])

    def children(self, groups: Sequence[int], starts: Sequence[int], b: int) -> npt.NDArray[Any]:
        pairs = list(zip(groups, starts, strict=True))
        todo = sorted({pair for pair in pairs if pair not in self.drawn})
        if todo:
            rows = np.repeat(np.asarray([i for i, _ in todo], dtype=np.int64), b)
            cols = (
                np.asarray([s for _, s in todo], dtype=np.int64)[:, None] + np.arange(b)
            ).ravel()
            raw = self.raw.cells(rows, cols).reshape(len(todo), b)
            drawn = self.noisy(raw, self.param, self.rng).reshape(len(todo), b)
            for pair, row in zip(todo, drawn, strict=True):
                self.drawn[pair] = row
        return np.stack([self.drawn[pair] for pair in pairs])


def _tree_quantiles(tree: _LazyTree, q: float, spec: ValueSpec) -> npt.NDArray[np.float64]:
    """The ``q`` quantile of every group from its noisy tree (module notes), in the column's
    units.

    From the top, the target is a fraction ``f`` of the current node's mass (the sum of its
    children's counts, each clamped at 0): the child where the cumulative mass reaches it is
    entered, with the remaining fraction of that child; in a leaf the value is interpolated. A
    node with no mass below answers the middle of itself.
    """
    levels, b = spec.tree or TREE
    g = len(tree)
    leaf_width = (spec.high - spec.low + 1) / b**levels
    f = np.full(g, float(q))
    index = np.zeros(g, dtype=np.int64)
    done = np.full(g, np.nan)  # the answer of a group whose descent ended early
    offset = 0
    for level in range(1, levels + 1):
        live = np.flatnonzero(np.isnan(done))
        if live.size == 0:
            break
        starts = offset + index[live] * b
        c = np.maximum(tree.children(live.tolist(), starts.tolist(), b).astype(np.float64), 0.0)
        mass = c.sum(axis=1)
        below = b ** (levels - level)  # leaves under each child
        empty = mass <= 0
        done[live[empty]] = spec.low + (index[live[empty]] * b + b / 2) * below * leaf_width
        cum = np.cumsum(c, axis=1)
        target = f[live] * mass
        j = np.minimum((cum < target[:, None]).sum(axis=1), b - 1)
        rows = np.arange(live.size)
        before = np.where(j > 0, cum[rows, np.maximum(j - 1, 0)], 0.0)
        child = c[rows, j]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(child > 0, np.clip((target - before) / child, 0.0, 1.0), 0.5)
        keep = ~empty
        f[live[keep]] = frac[keep]
        index[live[keep]] = index[live[keep]] * b + j[keep]
        offset += b**level
    out = np.where(np.isnan(done), spec.low + (index + f) * leaf_width, done)
    return in_values(out, spec.resolution)


def _em_rank_sd(epsilon: Fraction, c: int, levels: Sequence[float]) -> float:
    """The standard deviation of an exponential-mechanism quantile's rank error, in records, on
    data without gaps (every bucket holds values): the law over ranks is then a two-sided
    geometric of scale ``2 c max(q, 1 - q) / epsilon``; the worst level counts."""
    worst = max(max(q, 1 - q) for q in levels)
    return math.sqrt(2.0) * 2 * c * worst / float(epsilon)


def _level(q: float) -> Fraction:
    """A quantile level as a rational with a denominator of at most ``10**4`` (``0.9`` is
    ``9/10``): the rank target moves by at most ``10**-4`` of the group."""
    return Fraction(repr(float(q))).limit_denominator(10**4)


def em_blocks(
    leaves: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    n_leaves: int,
    q: float,
    units: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """One group's leaves for level ``q`` as blocks of equal score (module notes, *Quantiles*:
    with ``q = a / d``, ``n`` the group's count and ``C_j`` the count before leaf ``j``, leaf ``j``
    scores ``|d (C_j + C_{j+1}) - 2 a n|``, and one record moves that by at most
    ``2 max(a, d - a)``), without listing every leaf: each non-empty leaf (``leaves``, increasing,
    with its ``counts``) is a block of one, and each run of empty leaves between them (and
    before the first, after the last) a block of its length, whose leaves all have the same
    records before and up to them. Returns ``(scores, sizes, first candidate, sensitivity)`` of
    the non-empty blocks.

    The candidates are the leaves, or, when the range has fewer ``units`` than leaves, the units
    (public: leaf ``j`` holds the unit ``ceil(j units / n_leaves)`` when any, no leaf two), so
    that leaves no value can fall in are not candidates: a block's size is then its units."""
    level = _level(q)
    a, d = level.numerator, level.denominator
    h = np.asarray(counts, dtype=np.int64)
    idx = np.asarray(leaves, dtype=np.int64)
    n = int(h.sum())
    after = np.cumsum(h)
    before = after - h
    leaf_scores = np.abs(d * (before + after) - 2 * a * n)
    # the runs of empty leaves: before leaf 0 of the list, between, and after the last
    starts = np.concatenate([[0], idx + 1])
    ends = np.concatenate([idx, [n_leaves]])
    ranks = np.concatenate([[0], after])  # records before (and up to) every leaf of the run
    run_scores = 2 * np.abs(a * n - d * ranks)
    scores = np.concatenate([leaf_scores, run_scores])
    if units is not None and units < n_leaves:  # the first unit at or after each leaf
        starts, ends, idx = (-((-x * units) // n_leaves) for x in (starts, ends, idx))
    sizes = np.concatenate([np.ones(idx.size, dtype=np.int64), ends - starts])
    first = np.concatenate([idx, starts])
    keep = sizes > 0
    return scores[keep], sizes[keep], first[keep], 2 * max(a, d - a)


def _em_quantiles(
    tree: SparseCounts,
    q: float,
    spec: ValueSpec,
    epsilon: Fraction,
    c: int,
    rng: RandomSource,
    flip: bool = False,
) -> npt.NDArray[np.float64]:
    """The ``q`` quantile of every group: one exact draw of a candidate per group over
    :func:`em_blocks` with ``gamma = epsilon / (2 c Delta)``, by the exponential mechanism
    (:func:`privhist.noise.exponential.exponential_blocks`) or, with ``flip``, by
    permute-and-flip (:func:`privhist.noise.permute_flip.permute_and_flip_blocks`, all groups
    at once), answered as the unit drawn or the leaf's middle, in the column's units."""
    from privhist.noise.exponential import exponential_blocks
    from privhist.noise.permute_flip import permute_and_flip_blocks

    levels, b = spec.tree or TREE
    n_leaves = b**levels
    offset = spec.nodes - n_leaves
    units = spec.high - spec.low + 1
    width = units / n_leaves
    picked = np.empty(len(tree), dtype=np.int64)
    blocks: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
    gamma = Fraction(0)
    for i in range(len(tree)):
        cols, counts = tree.row(i, offset)
        scores, sizes, first, sensitivity = em_blocks(cols - offset, counts, n_leaves, q, units)
        gamma = epsilon / (2 * c * sensitivity)  # the same for every group
        if flip:
            blocks.append((scores, sizes, first))
            continue
        one, at = exponential_blocks(scores, sizes, gamma, rng)
        picked[i] = int(first[one]) + at
    if flip and blocks:
        owner = np.repeat(np.arange(len(blocks)), [x[0].shape[0] for x in blocks])
        first_all = np.concatenate([x[2] for x in blocks])
        block, within = permute_and_flip_blocks(
            owner,
            np.concatenate([x[0] for x in blocks]),
            np.concatenate([x[1] for x in blocks]),
            gamma,
            rng,
        )
        picked = first_all[block] + within
    if units < n_leaves:
        out = (spec.low + picked).astype(np.float64)
    else:
        out = np.minimum(spec.low + (picked + 0.5) * width, spec.high)
    return in_values(out, spec.resolution)


def in_values(units: Any, resolution: float) -> npt.NDArray[np.float64]:
    """``units * resolution`` written as the decimals they are: a resolution with a short
    decimal form ``m / 10**k`` (0.01, 0.002) multiplies by the integer ``m`` and divides by
    ``10**k``, both exact in doubles for whole units below ``2**53 / m``, so a whole number of
    units is the double nearest its decimal (47.48, not 47.480000000000004, which ``47.48 / 0.01
    * 0.01`` gives); any other resolution multiplies. Post-processing: the value differs from
    the product by at most one unit in the last place.

    >>> in_values([2374, 6527086], 0.02).tolist(), (np.array([2374, 6527086]) * 0.02).tolist()
    ([47.48, 130541.72], [47.480000000000004, 130541.72])
    """
    x = np.asarray(units, dtype=np.float64)
    _, digits, exponent = Decimal(repr(float(resolution))).normalize().as_tuple()
    if isinstance(exponent, int) and -22 <= exponent < 0:
        m = int("".join(map(str, digits)))
        if m < 2**20:
            return np.asarray(x * m / 10.0 ** (-exponent), dtype=np.float64)
    return np.asarray(x * resolution, dtype=np.float64)


def _split_text(shares: Mapping[str, Fraction], weights: Mapping[str, Fraction]) -> str:
    """How the metrics' budget is shared, for the metadata."""
    values = set(shares.values())
    if len(values) == 1:
        return f"equal shares of the metrics' budget ({float(values.pop()):.4g} each)"
    parts = ", ".join(
        f"{name} {float(share):.4g} (weight {float(weights[name]):g})"
        for name, share in shares.items()
    )
    return f"shares of the metrics' budget by weight: {parts}"


def _rows_of(table: GroupTable, rows: npt.NDArray[np.int64]) -> GroupTable:
    """``table`` kept to the groups at ``rows`` (increasing positions)."""
    values: dict[str, dict[str, Any]] = {}
    for name, parts in table.values.items():
        values[name] = {
            what: (v.take_rows(rows) if isinstance(v, SparseCounts) else np.asarray(v)[rows])
            for what, v in parts.items()
        }
    return GroupTable(
        table.keys[rows],
        np.asarray(table.records)[rows],
        np.asarray(table.users)[rows],
        values,
        table.by_types,
        table.facts,
    )


def _sparse(raw: Any) -> SparseCounts:
    """A tree's counts as :class:`~privhist.core.sparse.SparseCounts` (engines may answer a
    dense table)."""
    return raw if isinstance(raw, SparseCounts) else SparseCounts.from_dense(raw)


def _decoded_keys(table: GroupTable, by: tuple[str, ...]) -> npt.NDArray[Any]:
    if len(by) == 1:
        return np.asarray(table.keys)
    out = np.empty(len(table), dtype=object)
    for i, k in enumerate(table.keys.tolist()):
        out[i] = decode(str(k), table.by_types)
    return out


def _order(keys: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """The canonical order: by the group's values (data-independent given the released set)."""
    return np.asarray(sorted(range(keys.shape[0]), key=lambda i: keys[i]), dtype=np.int64)


def plan(aggregation: Aggregation, sizes: Sequence[int] = (100, 1_000, 10_000)) -> dict[str, Any]:
    """The expected error of each metric before any data is read: per metric, the noise's
    standard deviation in the column's units and, for a group of each of ``sizes`` records (users
    at user level), the standard deviation of its estimate, by the delta method, and its share of
    the budget; with private groups the selection's share and the count at which a group is
    released with probability 1/2 and 0.99. Bounds ``"auto"`` are planned at the bounds given
    beside them, or as a unit range when both are automatic.

    A mean's error ``r (Z_s - a Z_n) / n`` (``Z_s`` its centred sum's noise, ``Z_n`` its count's,
    the selection's when the selection's count is its count) depends on how far, ``a`` units, the
    group's mean lies from the middle of the range: the plan gives it for a mean at the middle
    (``mean_error_std_at_middle``: the centred sum's noise alone) and at a bound
    (``mean_error_std_at_bounds``, ``a = M``: the largest); between them it is
    ``sqrt(middle**2 + (a / M)**2 (bounds**2 - middle**2))``. A variance's error is planned for
    a group with the largest variance (half its values at each bound: mean at the middle,
    second moment ``M**2``); a quantile's as the rank error, a share of the group, of the
    exponential mechanism or of the tree's descent.

    ``budget_share`` is a metric's share of the metrics' budget, the release's metadata's
    ``budget_share``; ``share_of_whole_budget`` its share of the whole budget (with its
    automatic bounds' shares, beside the selection's ``selection_share``)."""
    for n in sizes:
        check_positive_int(n, "plan", "sizes")
    g = aggregation.guarantee()
    chosen = {name: _planned_bounds(m) for name, m in aggregation.metrics.items() if m.auto}
    std: dict[tuple[str, str], float] = {}
    for comp, param in aggregation.noise_parameters(chosen):
        if comp.what == "exponential":
            levels = aggregation.metrics[comp.metric].levels
            std[(comp.metric, comp.what)] = _em_rank_sd(
                param, aggregation.max_per_partition, levels
            )
        elif aggregation.noise == "gaussian":
            std[(comp.metric, comp.what)] = float(DiscreteGaussian(param).var()) ** 0.5
        else:
            std[(comp.metric, comp.what)] = float(DiscreteLaplace(param).var()) ** 0.5
    specs = {s.name: s for s in aggregation._specs(chosen)}
    free = aggregation.free_column()
    if free is not None:  # the selection's count is the free column's (module notes)
        free_sd = float(DiscreteLaplace(aggregation._selector.noise.scale).var()) ** 0.5
        for name, m in aggregation.metrics.items():
            if m.column == free and m.kind in ("mean", "variance"):
                std[(name, "n")] = free_sd
    split = aggregation.split()
    shares, _ = aggregation._shares()
    metrics: dict[str, Any] = {}
    for name, m in aggregation.metrics.items():
        entry: dict[str, Any] = {"kind": m.kind}
        if m.kind in ("count", "count_users"):
            sd = std[(name, "records" if m.kind == "count" else "users")]
            entry["noise_std"] = sd
            entry["relative_error_std"] = {n: sd / n for n in sizes}
        else:
            spec = specs[name]
            r = spec.resolution
            if m.kind == "sum" and name in aggregation.shared_sums():
                owner = aggregation.shared_sums()[name]
                s_c, s_n = std[(owner, "sum")], std[(owner, "n")]
                entry["noise_std"] = math.sqrt(s_c**2 + (spec.center * s_n) ** 2) * r
                entry["answered_from"] = owner
            elif m.kind == "sum" and (name, "centred") in std:
                s_c = std[(name, "centred")]
                entry["noise_std"] = math.sqrt(s_c**2 + (spec.center * free_sd) ** 2) * r
                entry["answered_from"] = "its centred sum and the selection's count"
            elif m.kind == "sum":
                sd = std[(name, "sum")] * r
                entry["noise_std"] = sd
            elif m.kind in ("mean", "variance"):
                half = max(spec.high - spec.center, spec.center - spec.low)
                s_sum, s_n = std[(name, "sum")], std[(name, "n")]
                # the error r (Z_s - a Z_n) / n of a group whose mean is a units from the middle
                entry["mean_error_std_at_middle"] = {n: r * s_sum / n for n in sizes}
                entry["mean_error_std_at_bounds"] = {
                    n: r * math.sqrt(s_sum**2 + (half * s_n) ** 2) / n for n in sizes
                }
                if m.kind == "variance":
                    s_sq = std[(name, "squares")]
                    entry["variance_error_std"] = {
                        n: r * r * math.sqrt(s_sq**2 + (half * half * s_n) ** 2) / n for n in sizes
                    }
            elif (name, "exponential") in std:
                sd = std[(name, "exponential")]
                entry["method"] = "exponential"
                entry["rank_error_std"] = {n: sd / n for n in sizes}
            else:
                depth, b = TREE
                sd = std[(name, "tree")] * math.sqrt(depth * (b - 1) / 2)
                entry["method"] = "tree"
                entry["rank_error_std"] = {n: sd / n for n in sizes}
            entry["resolution"] = r
        entry["budget_share"] = float(shares[name])  # of the metrics' budget, as the release
        entry["share_of_whole_budget"] = float(split[name])  # its automatic bounds' included
        metrics[name] = entry
    report: dict[str, Any] = {
        "release": "aggregate",
        "guarantee": {"epsilon": g.epsilon, "delta": g.delta},
        "neighbouring": aggregation.neighbouring.describe(),
        "noise": aggregation.noise,
        "noise_requested": aggregation.noise_requested,
        "groups": "public" if aggregation.partitions is not None else "chosen privately",
        "metrics": metrics,
    }
    report["shares"] = (
        "budget_share: of the metrics' budget (as in the release's metadata); "
        "share_of_whole_budget: of the whole budget, automatic bounds included"
        + ("" if "groups" not in split else " (the selection's: selection_share)")
    )
    if "groups" in split:
        report["selection_share"] = float(split["groups"])
    sel = aggregation._selector
    if sel is not None:
        top = 2_000
        if aggregation._weighted_selection():
            curve = sel.ever_released(np.arange(top + 1) * sel.scale)
        else:
            curve = sel.reporting_probability(top)
        for level, label in (
            (0.5, "released_with_probability_one_half_at"),
            (0.99, "released_with_probability_0.99_at"),
        ):
            hit = np.flatnonzero(np.asarray(curve) >= level)
            report[label] = int(hit[0]) if hit.size else None
    return report


def _planned_bounds(metric: Metric) -> tuple[float, float]:
    """Bounds to plan an ``"auto"`` metric at: the given one and one unit beyond it."""
    lo, hi = metric.lower, metric.upper
    if isinstance(lo, int | float) and not isinstance(lo, str):
        return float(lo), float(lo) + 1.0
    if isinstance(hi, int | float) and not isinstance(hi, str):
        return float(hi) - 1.0, float(hi)
    return 0.0, 1.0
