"""Every aggregation metric is differentially private as it states, checked exactly on small
neighbouring inputs in both directions, at record level and at user level (k = 2 groups, c = 2
records per group).

The neighbouring inputs are real tables: the engine bounds and aggregates both (so what one user
changes is the engine's, not a formula's), and the release's noise is the one the noise-spy
contract (tests/contracts/test_noise_spy.py) shows is drawn. With independent noise per aggregate,
the hockey-stick divergence ``sum_z max(0, P(z) - e^eps Q(z))`` of the two output laws depends
only on the aggregates that differ:

* discrete Gaussian (Canonne, Kamath & Steinke 2020, Definition 1): the privacy loss of one
  aggregate shifted by ``s`` is ``(2 w s + s**2) / (2 sigma2)`` at noise ``w``, exact and rational;
  aggregates with the same variance and shift share a loss that depends on the sum of their
  noises, so the loss distribution is a convolution, computed here in 40 digits from the pmf
  normalised here, with the mass outside the box added as an upper bound;
* discrete Laplace (``Pr[Z = z]`` proportional to ``exp(-|z| / t)``): the largest ratio of the
  two laws is the product of each aggregate's largest ratio over a box past its shift (beyond it
  the ratio is constant).

Power: each check is shown to fail for a slightly smaller epsilon, so a release whose noise were
a little too small (or whose bounding let one user change more) would be caught.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import polars as pl
import pytest
from tests.selection_laws import pf_level_law

from privhist import metrics as m
from privhist.analytics.aggregate import Aggregation
from privhist.core.metrics import KINDS
from privhist.core.random import SeededRandom
from privhist.core.requests import Fields, GroupAggregates
from privhist.engines import LocalEngine

DPS = 40
GROUPS = ("a", "b", "c")
#: (epsilon, delta) of the Gaussian releases: large epsilon keeps the variances (and so the
#: enumerated boxes) small; the divergences are exact whatever the variance
GAUSS = (6.0, 1e-3)
LAPLACE_EPS = 3.0


def _metric(kind: str) -> Any:
    if kind == "count":
        return m.count()
    if kind == "count_users":
        return m.count_users()
    if kind == "sum":
        return m.sum("x", -1, 2, resolution=1)
    if kind == "quantiles":
        return m.quantiles("x", [0.5], 0, 2, resolution=1, method="tree")
    # a range of 4 units (centre 2, M = 2): the centred sum's and squares' sensitivities differ
    return {"mean": m.mean, "variance": m.variance}[kind]("x", 0, 4, resolution=1)


def _base(user_level: bool) -> list[tuple[int, str, float]]:
    """A small input: a few records in each group (users with one or two records)."""
    rows = []
    for i, g in enumerate(GROUPS):
        for j in range(2 + i):
            rows.append((10 * i + j, g, float((i + j) % 3)))
            if user_level and j == 0:
                rows.append((10 * i + j, g, 1.0))
    return rows


#: the added unit's values: all at the top of the range, all at the bottom, and mixed
ADDED = {"high": (5.0, 5.0, 5.0), "low": (-5.0, -5.0, -5.0), "mixed": (5.0, -5.0, 0.0)}


def _neighbours(user_level: bool, added: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(D, D + one unit)``: at record level one record (in group ``a``), at user level one user
    holding every group with three records each (more than k = 2 groups and c = 2 records)."""
    base = _base(user_level)
    values = ADDED[added]
    if user_level:
        extra = [(-1, g, v) for g in GROUPS for v in values]
    else:
        extra = [(-1, "a", values[0])]

    def frame(rows: list[tuple[int, str, float]]) -> pl.DataFrame:
        return pl.DataFrame(
            {"u": [r[0] for r in rows], "g": [r[1] for r in rows], "x": [r[2] for r in rows]}
        )

    return frame(base), frame(base + extra)


def _aggregation(kind: str, user_level: bool, gaussian: bool) -> Aggregation:
    eps, delta = GAUSS if gaussian else (LAPLACE_EPS, 0.0)
    k, c = (2, 2) if user_level else (1, 1)
    return Aggregation(
        {"v": _metric(kind)},
        ("g",),
        eps,
        delta,
        user_level,
        max_partitions=k,
        max_per_partition=c,
        partitions=tuple((g,) for g in GROUPS),
        noise="gaussian" if gaussian else "laplace",
    )


def _aggregates(agg: Aggregation, frame: pl.DataFrame) -> list[np.ndarray[Any, Any]]:
    """The noisy aggregates of ``frame``, in the release's order (before noise), each flattened
    over the groups: what the noise is added to."""
    fields = Fields(key="g", user="u" if agg.user_level else None)
    specs = agg._specs({})
    request = GroupAggregates(
        fields,
        max_partitions=agg.max_partitions,
        max_per_partition=agg.max_per_partition,
        groups=GROUPS,
        values=tuple(specs),
    )
    table = LocalEngine().compute(frame, request, SeededRandom(1))
    out = []
    for comp, _ in agg.noise_parameters():
        if comp.what == "records":
            raw = table.records
        elif comp.what == "users":
            raw = table.users
        else:
            assert comp.spec is not None
            parts = table.values[comp.spec.name]
            raw = parts[comp.what]
            if comp.what == "sum" and agg.metrics[comp.metric].kind in ("mean", "variance"):
                raw = raw - comp.spec.center * parts["n"]
        out.append(np.asarray(raw, dtype=np.int64).reshape(-1))
    return out


def _shifts(agg: Aggregation, added: str) -> list[tuple[Fraction, int]]:
    """``(noise parameter, shift)`` of every noisy aggregate the added unit changes."""
    d0, d1 = _neighbours(agg.user_level, added)
    out = []
    for (_, param), a0, a1 in zip(
        agg.noise_parameters(), _aggregates(agg, d0), _aggregates(agg, d1), strict=True
    ):
        out += [(param, int(s)) for s in (a1 - a0).tolist() if s != 0]
    return out


# -- the divergences, independently ---------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _gauss_pmf(sigma2: Fraction, radius: int) -> tuple[dict[int, mpmath.mpf], mpmath.mpf]:
    """The discrete Gaussian's pmf on ``[-radius, radius]`` and its mass outside (both ends)."""
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    far = radius + int(40 * mpmath.sqrt(s2)) + 40  # the normaliser's terms beyond are < 1e-300
    weights = {w: mpmath.exp(-mpmath.mpf(w * w) / (2 * s2)) for w in range(-far, far + 1)}
    total = mpmath.fsum(weights.values())
    inside = {w: weights[w] / total for w in range(-radius, radius + 1)}
    return inside, max(mpmath.mpf(0), 1 - mpmath.fsum(inside.values()))


def gaussian_delta(factors: list[tuple[Fraction, int]], eps: float) -> mpmath.mpf:
    """An upper bound (tight to the box's tail) of ``sum_z max(0, P(z) - e^eps Q(z))`` for P the
    product of discrete Gaussians ``N_Z(0, sigma2_i)`` and Q the same shifted by ``s_i``."""
    with mpmath.workdps(DPS):
        classes: dict[tuple[Fraction, int], int] = defaultdict(int)
        for s2, s in factors:
            classes[(s2, s)] += 1
        losses: dict[Fraction, mpmath.mpf] = {Fraction(0): mpmath.mpf(1)}
        outside = mpmath.mpf(0)
        for (s2, s), n in classes.items():
            radius = int(9 * mpmath.sqrt(mpmath.mpf(s2.numerator) / s2.denominator)) + 2 * abs(s)
            pmf, tail = _gauss_pmf(s2, radius)
            outside += n * tail
            total: dict[int, mpmath.mpf] = {0: mpmath.mpf(1)}  # the sum of the class's noises
            for _ in range(n):
                nxt: dict[int, mpmath.mpf] = defaultdict(lambda: mpmath.mpf(0))
                for w0, p0 in total.items():
                    for w, p in pmf.items():
                        nxt[w0 + w] += p0 * p
                total = nxt
            merged: dict[Fraction, mpmath.mpf] = defaultdict(lambda: mpmath.mpf(0))
            for big_w, p in total.items():
                loss = Fraction(2 * big_w * s + n * s * s) / (2 * s2)
                for l0, p0 in losses.items():
                    merged[l0 + loss] += p0 * p
            losses = merged
        e = mpmath.mpf(eps)
        delta = mpmath.fsum(
            p * (1 - mpmath.exp(e - mpmath.mpf(loss.numerator) / loss.denominator))
            for loss, p in losses.items()
            if loss > eps
        )
        return delta + outside


#: the loss grid of the discretised route: losses rounded up (an upper bound of delta) or down
#: (a lower bound) to multiples of 2**-10
GRID = 2**-10


def gaussian_delta_bounds(factors: list[tuple[Fraction, int]], eps: float) -> tuple[float, float]:
    """``(lower, upper)`` bounds of the same divergence as :func:`gaussian_delta` by the privacy
    loss distribution on a grid (as PLD accountants discretise, Koskela, Jalko & Honkela 2020):
    each aggregate's loss rounded down, resp. up, to a multiple of :data:`GRID` (the divergence
    ``E[max(0, 1 - e^(eps - L))]`` grows with the loss, so rounding up can only raise it), the
    distributions convolved in float64 (FFT), and the box's tail added to the upper bound; the
    float error (about 1e-15 of the total mass) is covered by a 1e-12 margin either way. For
    releases with many differing aggregates, whose exact loss distribution has too many points
    to enumerate quickly."""
    bounds = []
    for up in (False, True):
        dist, offset, outside = _loss_distribution(tuple(sorted(factors)), up)
        losses = (np.arange(dist.size) + offset) * GRID
        gain = np.where(losses > eps, -np.expm1(eps - losses), 0.0)
        value = float(np.dot(dist, gain))
        bounds.append(value + outside + 1e-12 if up else max(0.0, value - 1e-12))
    return bounds[0], bounds[1]


@functools.lru_cache(maxsize=256)
def _factor_on_grid(s2: Fraction, s: int, up: bool) -> tuple[np.ndarray[Any, Any], int, float]:
    """One aggregate's loss distribution on the grid: ``(masses, grid index of the first,
    mass outside the box)``; each exact (rational) loss rounded in the chosen direction."""
    radius = int(9 * float(s2) ** 0.5) + 2 * abs(s)
    pmf, tail = _gauss_pmf(s2, radius)
    idx = np.array(
        [_round(Fraction(2 * w * s + s * s) / (2 * s2) / Fraction(GRID), up) for w in pmf]
    )
    lo = int(idx.min())
    arr = np.zeros(int(idx.max()) - lo + 1)
    np.add.at(arr, idx - lo, np.array([float(p) for p in pmf.values()]))
    return arr, lo, float(tail)


@functools.lru_cache(maxsize=64)
def _loss_distribution(
    factors: tuple[tuple[Fraction, int], ...], up: bool
) -> tuple[np.ndarray[Any, Any], int, float]:
    from scipy.signal import fftconvolve

    dist = np.ones(1)
    offset, outside = 0, 0.0
    for s2, s in factors:
        arr, lo, tail = _factor_on_grid(s2, s, up)
        dist = np.clip(fftconvolve(dist, arr), 0.0, None)
        offset += lo
        outside += tail
    return dist, offset, outside


def _round(x: Fraction, up: bool) -> int:
    return -((-x.numerator) // x.denominator) if up else x.numerator // x.denominator


def _support(factors: list[tuple[Fraction, int]]) -> int:
    """About how many points the exact route's loss distribution has."""
    classes: dict[tuple[Fraction, int], int] = defaultdict(int)
    for s2, s in factors:
        classes[(s2, s)] += 1
    out = 1
    for (s2, s), n in classes.items():
        out *= n * 2 * (int(9 * float(s2) ** 0.5) + 2 * abs(s)) + 1
    return out


def laplace_ratio(factors: list[tuple[Fraction, int]]) -> mpmath.mpf:
    """``max_z P(z) / Q(z)`` for P the product of discrete Laplace laws of scales ``t_i`` and Q the
    same shifted by ``s_i``: the product of each factor's largest ratio over ``[-2|s|, 2|s|]``."""
    with mpmath.workdps(DPS):
        out = mpmath.mpf(1)
        for t, s in factors:
            a = mpmath.exp(-1 / (mpmath.mpf(t.numerator) / t.denominator))
            box = range(-2 * abs(s) - 1, 2 * abs(s) + 2)
            out *= max(a ** abs(w) / a ** abs(w + s) for w in box)
        return out


# -- the checks -----------------------------------------------------------------------------

CASES = [
    (kind, user_level, gaussian)
    for kind in KINDS
    for user_level in (False, True)
    for gaussian in (True, False)
    if user_level or kind != "count_users"
]


@pytest.mark.parametrize(
    ("kind", "user_level", "gaussian"),
    CASES,
    ids=[f"{k}-{'user' if u else 'record'}-{'gaussian' if g else 'laplace'}" for k, u, g in CASES],
)
def test_each_metric_is_dp_both_ways_on_neighbouring_tables(
    kind: str, user_level: bool, gaussian: bool
) -> None:
    agg = _aggregation(kind, user_level, gaussian)
    g = agg.guarantee()
    eps, delta = GAUSS if gaussian else (LAPLACE_EPS, 0.0)
    assert g.epsilon <= eps and g.delta <= delta
    worst = mpmath.mpf(0)
    for added in ADDED:
        shifts = _shifts(agg, added)
        assert shifts, added  # the added unit changes the release
        for direction in (1, -1):  # D + u against D, then D against D + u
            factors = [(p, direction * s) for p, s in shifts]
            if gaussian and (_support(factors) > 3000 or len(factors) > 6):  # the discretised route
                _, upper = gaussian_delta_bounds(factors, g.epsilon)
                assert upper <= g.delta, (added, direction, upper, g.delta)
                lower, _ = gaussian_delta_bounds(factors, 0.8 * g.epsilon)
                worst = max(worst, mpmath.mpf(lower))
            elif gaussian:
                d = gaussian_delta(factors, g.epsilon)
                assert d <= g.delta, (added, direction, d, g.delta)
                worst = max(worst, gaussian_delta(factors, 0.8 * g.epsilon))
            else:
                ratio = laplace_ratio(factors)
                assert ratio <= mpmath.exp(g.epsilon) * (1 + mpmath.mpf(10) ** -30), (
                    added,
                    direction,
                    ratio,
                )
                worst = max(worst, ratio)
    # power: the worst neighbours come close to the stated guarantee (a little less noise, or
    # one more record kept, would break it)
    if gaussian:
        assert worst > g.delta, worst
    else:
        assert worst > mpmath.exp(0.99 * g.epsilon), worst


def test_the_divergences_fail_when_the_noise_is_too_small() -> None:
    """Power of the computations themselves: a count's noise at half its variance (0.8 of its
    scale) breaks the stated guarantee on the same neighbours."""
    for gaussian in (True, False):
        agg = _aggregation("count", False, gaussian)
        g = agg.guarantee()
        shifts = _shifts(agg, "high")
        if gaussian:
            weaker = [(p * Fraction(1, 2), s) for p, s in shifts]
            assert gaussian_delta(weaker, g.epsilon) > g.delta
            assert gaussian_delta_bounds(weaker, g.epsilon)[0] > g.delta
        else:
            weaker = [(p * Fraction(8, 10), s) for p, s in shifts]
            assert laplace_ratio(weaker) > mpmath.exp(g.epsilon)


def test_the_gaussian_divergence_matches_the_known_one_dimensional_case() -> None:
    """The convolution route against a direct sum over one factor and over two independent
    factors (different variances and shifts), in 40 digits."""
    with mpmath.workdps(DPS):
        for factors in ([(Fraction(3, 2), 1)], [(Fraction(3, 2), 1), (Fraction(5), -2)]):
            pmfs = [_gauss_pmf(s2, 60)[0] for s2, _ in factors]
            e = mpmath.exp(mpmath.mpf(0.5))
            direct = mpmath.mpf(0)
            box = range(-50, 51)
            for z in np.ndindex(*(len(box),) * len(factors)):
                ws = [box[i] for i in z]
                p = mpmath.fprod(f[w] for f, w in zip(pmfs, ws, strict=True))
                q = mpmath.fprod(f[w + s] for f, w, (_, s) in zip(pmfs, ws, factors, strict=True))
                direct += max(mpmath.mpf(0), p - e * q)
            got = gaussian_delta(factors, 0.5)
            # the box's tail is added as a bound: never below the direct sum, and tight
            assert direct > mpmath.mpf(10) ** -4
            assert direct - mpmath.mpf(10) ** -35 <= got <= direct + mpmath.mpf(10) ** -15


@pytest.mark.parametrize("kind", ["mean", "count"])
def test_the_discretised_route_brackets_the_exact_one(kind: str) -> None:
    """On user-level neighbours small enough to enumerate exactly, the grid route's bounds hold
    the exact divergence and are within 5 % of it."""
    agg = _aggregation(kind, True, True)
    factors = _shifts(agg, "high")
    for eps in (agg.guarantee().epsilon, 0.8 * agg.guarantee().epsilon):
        exact = gaussian_delta(factors, eps)
        lower, upper = gaussian_delta_bounds(factors, eps)
        assert lower <= exact <= upper, (lower, exact, upper)
        assert upper - lower <= 0.05 * exact


# -- quantiles by the exponential mechanism ---------------------------------------------------


def _em_rows(agg: Aggregation, frame: pl.DataFrame) -> np.ndarray[Any, Any]:
    """The engine's leaf counts of every group of ``frame``'s release."""
    fields = Fields(key="g", user="u" if agg.user_level else None)
    request = GroupAggregates(
        fields,
        max_partitions=agg.max_partitions,
        max_per_partition=agg.max_per_partition,
        groups=GROUPS,
        values=tuple(agg._specs({})),
    )
    table = LocalEngine().compute(frame, request, SeededRandom(1))
    return np.asarray(table.values["v"]["tree"])[:, -(16**4) :]


def _em_scores(row: np.ndarray[Any, Any], q: float, units: int) -> list[int]:
    """Every candidate's score, from the definition: the candidates are the leaves, or the units
    when the range has fewer units than leaves (unit ``v`` in leaf ``v * leaves // units``); a
    candidate scores ``2 d`` times the distance of the target rank ``q n`` (``q = a / d``) to
    the middle of its leaf's rank interval ``[records before the leaf, records up to it]``."""
    level = Fraction(q)
    a, d = level.numerator, level.denominator
    n_leaves = row.shape[0]
    after = np.cumsum(row)
    before = after - row
    n = int(after[-1])
    leaf = np.arange(units) * n_leaves // units if units < n_leaves else np.arange(n_leaves)
    s = np.abs(d * (before[leaf] + after[leaf]) - 2 * a * n)
    return [int(x) for x in s.tolist()]


def _em_losses(
    agg: Aggregation, d0: pl.DataFrame, d1: pl.DataFrame, gamma_factor: int = 1
) -> list[dict[mpmath.mpf, mpmath.mpf]]:
    """Per draw (one per group and level), the privacy loss distribution of ``d0``'s release
    against ``d1``'s: the loss ``log(P(c) / Q(c))`` of each candidate ``c`` with its probability
    under ``P``: proportional to ``exp(-gamma score)`` (the exponential mechanism, Gaussian
    releases) or permute-and-flip's (Laplace releases), with ``gamma = epsilon / (2 c Delta)``,
    ``Delta = 2 max(a, d - a)`` (what one record moves a score by), ``epsilon`` the draw's (the
    same candidates in both: public)."""
    ((_, eps_g),) = agg.noise_parameters()
    spec = agg._specs({})[0]
    units = spec.high - spec.low + 1
    rows0, rows1 = _em_rows(agg, d0), _em_rows(agg, d1)
    out = []
    with mpmath.workdps(DPS):
        for q in agg.metrics["v"].levels:
            level = Fraction(q)
            a, d = level.numerator, level.denominator
            gamma = eps_g / (2 * agg.max_per_partition * 2 * max(a, d - a))
            g = mpmath.mpf(gamma.numerator) / gamma.denominator * gamma_factor
            for r0, r1 in zip(rows0, rows1, strict=True):
                pairs: dict[tuple[int, int], int] = defaultdict(int)
                for x, y in zip(_em_scores(r0, q, units), _em_scores(r1, q, units), strict=True):
                    pairs[(x, y)] += 1
                if agg._flip():  # permute-and-flip: each candidate's share of its level's law
                    p_of, q_of = (
                        _pf_candidate_law(pairs, side, gamma * gamma_factor) for side in (0, 1)
                    )
                else:
                    z0 = mpmath.fsum(k * mpmath.exp(-g * x) for (x, _), k in pairs.items())
                    z1 = mpmath.fsum(k * mpmath.exp(-g * y) for (_, y), k in pairs.items())
                    p_of = {x: mpmath.exp(-g * x) / z0 for x, _ in pairs}
                    q_of = {y: mpmath.exp(-g * y) / z1 for _, y in pairs}
                dist: dict[mpmath.mpf, mpmath.mpf] = defaultdict(lambda: mpmath.mpf(0))
                for (x, y), k in pairs.items():
                    p_c, q_c = p_of[x], q_of[y]
                    dist[mpmath.log(p_c / q_c)] += k * p_c
                out.append(dist)
    return out


def _pf_candidate_law(
    pairs: dict[tuple[int, int], int], side: int, gamma: Fraction
) -> dict[int, mpmath.mpf]:
    """Permute-and-flip's probability of one candidate of each score, on one side of the pairs
    (:func:`tests.selection_laws.pf_level_law` over the side's scores, divided among the
    level's candidates, which are equally likely)."""
    counts: dict[int, int] = defaultdict(int)
    for pair, k in pairs.items():
        counts[pair[side]] += k
    scores = sorted(counts)
    with mpmath.workdps(25):  # quadrature: 25 digits are far below the checks' 1e-12
        law = pf_level_law(scores, [counts[s] for s in scores], gamma)
    with mpmath.workdps(DPS):
        return {s: p / counts[s] for s, p in zip(scores, law, strict=True)}


def _em_delta(losses: list[dict[mpmath.mpf, mpmath.mpf]], eps: float) -> mpmath.mpf:
    """``E_P[max(0, 1 - exp(eps - L))]`` for ``L`` the sum of independent per-draw losses (the
    hockey-stick divergence of the product laws), losses merged on a ``1e-25`` grid rounded
    up (an upper bound, since the divergence grows with the loss)."""
    with mpmath.workdps(DPS):
        total: dict[mpmath.mpf, mpmath.mpf] = {mpmath.mpf(0): mpmath.mpf(1)}
        grid = mpmath.mpf(10) ** -25
        for dist in losses:
            nxt: dict[mpmath.mpf, mpmath.mpf] = defaultdict(lambda: mpmath.mpf(0))
            for l0, p0 in total.items():
                for l1, p1 in dist.items():
                    nxt[mpmath.ceil((l0 + l1) / grid) * grid] += p0 * p1
            total = nxt
        e = mpmath.mpf(eps)
        return mpmath.fsum(p * (1 - mpmath.exp(e - x)) for x, p in total.items() if x > e)


EM_CASES = [(u, g, f) for u in (False, True) for g in (True, False) for f in (False, True)]


@pytest.mark.parametrize(
    ("user_level", "gaussian", "fine"),
    EM_CASES,
    ids=[
        f"{'user' if u else 'record'}-{'gaussian' if g else 'laplace'}-{'leaves' if f else 'units'}"
        for u, g, f in EM_CASES
    ],
)
def test_exponential_quantiles_are_dp_both_ways(
    user_level: bool, gaussian: bool, fine: bool
) -> None:
    """Two levels (0.5 and 0.9) per group by the exponential mechanism (Gaussian releases) or
    permute-and-flip (Laplace releases), over the release's
    candidates (the range's three units; ``fine``: 100,001 units, so the 65,536 leaves): the whole
    release's
    largest privacy loss (Laplace: ``max log P/Q`` over outputs, the sum of each draw's) and its
    hockey-stick divergence at the release's epsilon (Gaussian: exact from the per-draw loss
    distributions) stay within the guarantee on every neighbouring pair, both ways; with the
    draws' gamma quadrupled the same neighbours break it. (On these small inputs the largest
    loss is a third (user level, three units) to 0.7 of the stated epsilon: the mechanism's
    factor 2 covers a score that moves either way, which one added unit does not fully use.)"""
    eps, delta = GAUSS if gaussian else (LAPLACE_EPS, 0.0)
    k, c = (2, 2) if user_level else (1, 1)
    resolution = 2e-5 if fine else 1
    agg = Aggregation(
        {"v": m.quantiles("x", [0.5, 0.9], 0, 2, resolution=resolution, method="exponential")},
        ("g",),
        eps,
        delta,
        user_level,
        max_partitions=k,
        max_per_partition=c,
        partitions=tuple((g,) for g in GROUPS),
        noise="gaussian" if gaussian else "laplace",
    )
    ((comp, eps_g),) = agg.noise_parameters()
    assert comp.what == "exponential"
    g = agg.guarantee()
    assert g.epsilon <= eps and g.delta <= delta
    # the accounting: k groups x 2 levels of draws compose to the metrics' budget
    if gaussian:
        assert k * 2 * eps_g**2 / 8 <= agg.rho_m
    else:
        assert k * 2 * eps_g <= Fraction(agg.eps_m)
    broke = False
    for added in ADDED:
        d0, d1 = _neighbours(user_level, added)
        for a, b in ((d1, d0), (d0, d1)):
            losses = _em_losses(agg, a, b)
            if gaussian:
                assert _em_delta(losses, g.epsilon) <= g.delta, (added,)
                broke |= _em_delta(_em_losses(agg, a, b, 4), g.epsilon) > g.delta
            else:
                worst = mpmath.fsum(max(dist) for dist in losses)
                assert worst <= g.epsilon * (1 + 1e-12), (added, worst)
                quadrupled = _em_losses(agg, a, b, 4)
                broke |= mpmath.fsum(max(dist) for dist in quadrupled) > g.epsilon
    assert broke  # power: a mechanism with less randomness is caught on these neighbours


@pytest.mark.parametrize("q", [0.5, 0.9, 0.0, 1.0, 1 / 3])
def test_blocks_of_leaves_score_every_leaf_as_the_definition(q: float) -> None:
    """The release scores runs of empty leaves as blocks: expanded, the blocks give every leaf
    the score of the definition (the middle of the records before and up to the leaf against
    the target rank), for full, sparse and empty groups."""
    from privhist.analytics.aggregate import em_blocks

    g = np.random.default_rng(5)
    n_leaves = 64
    for row in (
        g.integers(0, 3, n_leaves),
        np.where(g.random(n_leaves) < 0.1, g.integers(1, 9, n_leaves), 0),
        np.zeros(n_leaves, dtype=np.int64),
    ):
        nz = np.flatnonzero(row)
        scores, sizes, first, sens = em_blocks(nz, row[nz], n_leaves, q)
        level = Fraction(q).limit_denominator(10**4)
        a, d = level.numerator, level.denominator
        assert sens == 2 * max(a, d - a)
        n = int(row.sum())
        expanded = np.full(n_leaves, -1, dtype=np.int64)
        for s, size, start in zip(scores.tolist(), sizes.tolist(), first.tolist(), strict=True):
            assert (expanded[start : start + size] == -1).all()  # the blocks do not overlap
            expanded[start : start + size] = s
        for j in range(n_leaves):
            before, upto = int(row[:j].sum()), int(row[: j + 1].sum())
            target = Fraction(a * n, d)
            dist = abs(Fraction(before + upto, 2) - target)
            assert expanded[j] == 2 * d * dist, (j, expanded[j], 2 * d * dist)


def test_blocks_of_units_when_the_range_has_fewer_units_than_leaves() -> None:
    """With fewer units than leaves the candidates are the units, each in its own leaf: the
    blocks cover every unit once, each with the score of its leaf."""
    from privhist.analytics.aggregate import em_blocks

    n_leaves, units = 64, 10
    leaf_of = [(v * n_leaves) // units for v in range(units)]
    assert len(set(leaf_of)) == units  # one unit per leaf at most
    g = np.random.default_rng(8)
    for _ in range(5):
        per_unit = g.integers(0, 4, units) * (g.random(units) < 0.6)
        row = np.zeros(n_leaves, dtype=np.int64)
        row[leaf_of] = per_unit
        nz = np.flatnonzero(row)
        for q in (0.5, 0.25):
            scores, sizes, first, _ = em_blocks(nz, row[nz], n_leaves, q, units)
            assert int(sizes.sum()) == units
            level = Fraction(q)
            a, d, n = level.numerator, level.denominator, int(row.sum())
            expanded = np.full(units, -1, dtype=np.int64)
            for s, size, start in zip(scores.tolist(), sizes.tolist(), first.tolist(), strict=True):
                assert (expanded[start : start + size] == -1).all()
                expanded[start : start + size] = s
            for v in range(units):
                j = leaf_of[v]
                before, upto = int(row[:j].sum()), int(row[: j + 1].sum())
                dist = abs(Fraction(before + upto, 2) - Fraction(a * n, d))
                assert expanded[v] == 2 * d * dist, (v, expanded[v], 2 * d * dist)
