"""Aggregations (:mod:`privhist.analytics.aggregate`, ``Session.aggregate``): exact DP on small
neighbouring inputs in both directions ("group absent" an output where groups are private),
the noise a release draws against the noise its guarantee was computed for, public partitions and
products, groups over several columns, automatic bounds inside the spend, and what the release
holds."""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import polars as pl
import pytest
from scipy import stats
from tests.stats import assert_fits, assert_rejects, chi2_integer

from privhist import Release, Session
from privhist import metrics as m
from privhist.analytics.aggregate import AUTO_SHARE, Aggregation, plan
from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.mechanisms.user_level._gauss import calibrate
from privhist.noise import DiscreteGaussian, DiscreteLaplace

mpmath.mp.dps = 40


def _pmf(noise: str, param: Fraction) -> Any:
    dist = DiscreteGaussian(param) if noise == "gaussian" else DiscreteLaplace(param)
    return dist.pmf_mp


def _radius(noise: str, param: Fraction) -> int:
    """A box half-width holding all but about 1e-15 of the noise (the rest is added to the
    divergence as a bound)."""
    sd = math.sqrt(float(param)) if noise == "gaussian" else float(param) * math.sqrt(2)
    return int(8 * sd) + 4 if noise == "gaussian" else int(25 * float(param)) + 4


def _product_delta(
    pmfs: list[Any], radii: list[int], shifts: list[int], eps: float, present: tuple[Any, Any]
) -> Any:
    """``sum_z max(0, a P(z) - e^eps b Q(z))`` over a box, P the product of ``pmfs`` and Q the
    same shifted by ``shifts`` (``present = (a, b)`` weights both), plus the mass of ``a P``
    outside the box (so the value is an upper bound; the box holds all but a tiny tail)."""
    a, b = present
    e = mpmath.exp(eps)
    grids = [range(-r, r + 1) for r in radii]
    tables = [{z: f(z) for z in g} for f, g in zip(pmfs, grids, strict=True)]
    shifted = [{z: f(z - s) for z in g} for f, g, s in zip(pmfs, grids, shifts, strict=True)]
    total = mpmath.mpf(0)
    mass = mpmath.mpf(0)
    for z in itertools.product(*grids):
        p = a * mpmath.fprod(t[v] for t, v in zip(tables, z, strict=True))
        q = b * mpmath.fprod(t[v] for t, v in zip(shifted, z, strict=True))
        mass += p
        total += max(mpmath.mpf(0), p - e * q)
    return total + max(mpmath.mpf(0), a - mass)


def _public(noise: str, user_level: bool) -> Aggregation:
    # record level: a count and a mean (3 noisy aggregates); user level: records and users
    metrics: dict[str, Any] = {"n": m.count()}
    if user_level:
        metrics["people"] = m.count_users()
    else:
        metrics["avg"] = m.mean("x", 0, 2, resolution=1)
    return Aggregation(
        metrics,
        ("g",),
        6.0,
        1e-3 if noise == "gaussian" else 0.0,
        user_level,
        partitions=(("a",), ("b",)),
        noise=noise,
    )


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("user_level", [False, True])
def test_public_groups_are_dp_both_ways(noise: str, user_level: bool) -> None:
    """The group the added unit (one record, or one user with one record) changes: every
    component of its noise, jointly, at the release's (epsilon, delta), both directions; and
    a power check: 0.85 epsilon (Laplace: any less) is exceeded."""
    agg = _public(noise, user_level)
    assert agg.noise == noise
    params = agg.noise_parameters()
    pmfs = [_pmf(noise, p) for _, p in params]
    radii = [_radius(noise, p) for _, p in params]
    # one record of value 2 (units [0, 2], centre 1): count +1, values +1, centred sum +1,
    # users +1
    shifts = []
    for comp, _ in params:
        shifts.append({"records": 1, "n": 1, "sum": 1, "users": 1}[comp.what])
    g = agg.guarantee()
    assert g.epsilon <= 6.0 and g.delta <= agg.delta
    for direction in (1, -1):
        s = [direction * x for x in shifts]
        if noise == "laplace":
            # pure DP: the largest ratio of the two laws over a box reaching past every shift
            # (beyond it the ratio of each factor is constant) is at most e^epsilon
            ratio = _max_ratio(pmfs, radii, s)
            assert ratio <= mpmath.exp(g.epsilon) * (1 + mpmath.mpf(10) ** -30), (direction, ratio)
            assert ratio > mpmath.exp(0.85 * g.epsilon), (direction, ratio)
            continue
        d = _product_delta(pmfs, radii, s, g.epsilon, (1, 1))
        assert d <= g.delta + mpmath.mpf(10) ** -30, (direction, d)
        weak = _product_delta(pmfs, radii, s, 0.85 * g.epsilon, (1, 1))
        assert weak > g.delta, (direction, weak)


def _max_ratio(pmfs: list[Any], radii: list[int], shifts: list[int]) -> Any:
    """``max_z P(z) / Q(z)`` for independent factors: the product of each factor's largest ratio
    (each over its box)."""
    out = mpmath.mpf(1)
    for f, r, sh in zip(pmfs, radii, shifts, strict=True):
        out *= max(f(z) / f(z - sh) for z in range(-r, r + 1))
    return out


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_record_level_private_groups_are_dp_with_the_group_absent(noise: str) -> None:
    """Groups chosen by optimal partition selection, then the metrics of the released groups:
    for the group of the added record, with 0 and with 3 other records, the joint law of
    (absent, or present with its noisy count and centred sum) at the release's guarantee, both
    ways, "group absent" an output. With Laplace noise the selection takes all of delta (and a
    count alone: a mean would take the stability selection, whose counts it reuses; tested
    below)."""
    metrics: dict[str, Any] = {"n": m.count()}
    if noise == "gaussian":
        metrics["avg"] = m.mean("x", 0, 2, resolution=1)
    agg = Aggregation(metrics, ("g",), 6.0, 1e-3, False, noise=noise)
    sel = agg._selector
    assert sel.name == "optimal-selection" and agg.free_column() is None
    # the selection: one share beside each of the metrics' noisy components (the count, and the
    # mean's count and centred sum): a quarter, or a half beside a count; all of delta with
    # Laplace
    parts = 3 if noise == "gaussian" else 1
    assert Fraction(sel.epsilon) == Fraction(6.0) / (1 + parts)
    assert sel.delta == (1e-3 if noise == "laplace" else float(Fraction(1e-3) / 4))
    params = agg.noise_parameters()
    pmfs = [_pmf(noise, p) for _, p in params]
    radii = [_radius(noise, p) for _, p in params]
    g = agg.guarantee()
    assert g.epsilon <= 6.0 and g.delta <= 1e-3

    def deltas(others: int, eps: float) -> tuple[Any, Any]:
        # the added record's group has count `others` without it, others + 1 with it
        # the keys-only selection: "released" or not, exactly (OptimalSelection.key_distribution)
        pi_d = sel.key_distribution(others, others).probabilities["released"]
        pi_d1 = sel.key_distribution(others + 1, others + 1).probabilities["released"]
        miss_d, miss_d1 = 1 - pi_d, 1 - pi_d1
        shifts = [{"records": 1, "n": 1, "sum": 1}[c.what] for c, _ in params]
        e = mpmath.exp(eps)
        # D + r against D, then D against D + r
        up = max(0, miss_d1 - e * miss_d) + _product_delta(pmfs, radii, shifts, eps, (pi_d1, pi_d))
        down = max(0, miss_d - e * miss_d1) + _product_delta(
            pmfs, radii, [-x for x in shifts], eps, (pi_d, pi_d1)
        )
        return up, down

    for others in (0, 3, 40):
        for d in deltas(others, g.epsilon):
            assert d <= g.delta + mpmath.mpf(10) ** -30, (others, d)
    # power: a group only the added record is in shows nearly all of the selection's delta (the
    # optimal rule spends it there), and a third of epsilon is exceeded
    assert deltas(0, g.epsilon)[0] >= 0.99 * sel.delta
    assert max(max(deltas(o, g.epsilon / 3)) for o in (0, 3, 40)) > g.delta


def _laplace_tail(scale: Fraction) -> Any:
    """``k -> Pr[Z >= k]`` of the discrete Laplace of ``scale`` (``Pr[Z = z]`` proportional to
    ``a**|z|``, ``a = exp(-1 / scale)``), in closed form."""
    a = mpmath.exp(-mpmath.mpf(scale.denominator) / scale.numerator)

    def tail(k: int) -> Any:
        return a**k / (1 + a) if k >= 1 else 1 - a ** (1 - k) / (1 + a)

    return tail


def _loss_law(factors: list[tuple[Fraction, int]]) -> dict[Any, Any]:
    """The law of the privacy loss ``ln(P(w) / Q(w))`` under ``P`` for independent discrete
    Laplace factors ``(scale t, shift s)``: ``P`` the law of ``s + Z``, ``Q`` of ``Z``. One factor
    loses ``(|s + Z| - |Z|) / t``: ``s / t`` for ``Z >= max(0, -s)``, ``-s / t`` for ``Z <= min(0,
    -s)`` (both masses in closed form), and the values between enumerated."""
    law: dict[Any, Any] = {mpmath.mpf(0): mpmath.mpf(1)}
    for t, s in factors:
        if s == 0:
            continue
        tail = _laplace_tail(t)
        a = mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)
        lo, hi = min(0, -s), max(0, -s)
        one: dict[int, Any] = defaultdict(lambda: mpmath.mpf(0))
        one[s] += tail(hi)
        one[-s] += 1 - tail(lo + 1)
        for z in range(lo + 1, hi):
            one[abs(s + z) - abs(z)] += (1 - a) / (1 + a) * a ** abs(z)
        merged: dict[Any, Any] = defaultdict(lambda: mpmath.mpf(0))
        for loss, p in law.items():
            for d, q in one.items():
                merged[loss + mpmath.mpf(d) * t.denominator / t.numerator] += p * q
        law = dict(merged)
    return law


def test_record_level_private_groups_reuse_the_selection_counts_and_stay_dp() -> None:
    """Laplace noise, groups chosen privately at record level: the stability selection counts
    the values of the first sum's column, and its noisy count is the mean's count and the count
    that uncentres the sum. For the group of the added record (0, 1, 3 or 40 others; values at
    either end and in the middle), the joint law of (absent, or present with the selection's
    noisy count at or above its threshold and every metric's noise) is checked exactly at the
    release's (epsilon, delta), both ways, "group absent" an output; a third of epsilon is
    exceeded (power)."""
    agg = Aggregation(
        {
            "n": m.count(),
            "total": m.sum("x", 0, 4, resolution=1),
            "avg": m.mean("x", 0, 2, resolution=1),
        },
        ("g",),
        6.0,
        1e-3,
        False,
        noise="laplace",
    )
    sel = agg._selector
    assert sel.name == "stability" and agg.free_column() == "x"
    # one share beside three noisy components: the count, the sum's and the mean's centred sums
    assert Fraction(sel.epsilon) == Fraction(6.0) / 4 and sel.delta == 1e-3
    params = agg.noise_parameters()
    assert [c.what for c, _ in params] == ["records", "centred", "sum"]
    scale = Fraction(sel.noise.scale)
    tail = _laplace_tail(scale)
    law = _pmf("laplace", scale)
    threshold = sel.threshold
    g = agg.guarantee()
    assert g.epsilon <= 6.0 and g.delta <= 1e-3

    def deltas(others: int, value: int, eps: float) -> tuple[Any, Any]:
        # the added record (value `value`): records +1, the sum's centred value (range 0..4,
        # middle 2) value - 2, the mean's (0..2 clamped, middle 1) min(value, 2) - 1; the
        # selection's count of values +1
        shifts = [1, value - 2, min(value, 2) - 1]
        up_law = _loss_law([(Fraction(p), s) for (_, p), s in zip(params, shifts, strict=True)])
        down_law = _loss_law([(Fraction(p), -s) for (_, p), s in zip(params, shifts, strict=True)])
        e = mpmath.exp(eps)
        n0, n1 = others, others + 1

        def present(n: int, y: int) -> Any:  # the selection's count released as y
            return law(y - n) if n > 0 else mpmath.mpf(0)

        def absent(n: int) -> Any:  # n + Z below the threshold
            return mpmath.mpf(1) if n == 0 else 1 - tail(threshold - n)

        reach = 80
        # beyond n1 + reach at most the law's tail is left, added as an upper bound
        up = max(0, absent(n1) - e * absent(n0)) + tail(reach + 1)
        down = max(0, absent(n0) - e * absent(n1)) + tail(reach + 1)
        for y in range(threshold, n1 + reach + 1):
            a, b = present(n1, y), present(n0, y)
            # sum over the metrics' noises of max(0, a P - e^eps b Q) = E_P[max(0, a - e^eps b
            # e^-loss)], and the reverse under Q
            up += mpmath.fsum(p * max(0, a - e * b * mpmath.exp(-x)) for x, p in up_law.items())
            down += mpmath.fsum(p * max(0, b - e * a * mpmath.exp(-x)) for x, p in down_law.items())
        return up, down

    worst = mpmath.mpf(0)
    for others in (0, 1, 3, 40):
        for value in (0, 1, 4):
            for d in deltas(others, value, g.epsilon):
                assert d <= g.delta + mpmath.mpf(10) ** -30, (others, value, d)
            worst = max(worst, *deltas(others, value, g.epsilon / 3))
    # power: a group only the added record is in shows a release probability near the
    # selection's delta, and a third of epsilon is exceeded
    assert deltas(0, 4, g.epsilon)[0] >= 0.1 * sel.delta
    assert worst > g.delta


def test_user_level_private_groups_account_for_every_component() -> None:
    """cumulative-sips chooses the groups with ``spent_rho`` = the metrics' zCDP budget; the
    metrics' noise (recomputed here from the per-group sensitivities, k and each sigma2) and
    the automatic bounds spend no more than that, so the selector's certified delta covers the
    whole release."""
    metrics = {
        "n": m.count(),
        "people": m.count_users(),
        "spend": m.sum("x", -10, 30),
        "avg": m.mean("x", "auto", 30),
        "var": m.variance("x", 0, 30),
        "q": m.quantiles("x", [0.5, 0.9], 0, 30),
    }
    agg = Aggregation(metrics, ("g", "h"), 1.0, 1e-6, True, max_partitions=3, max_per_partition=2)
    rho_total, _ = calibrate(1.0, 1e-6, 0.5)
    # the selection's share: 1 / (1 + 10 components): count, users, sum, a mean's count and
    # centred sum, a variance's count, centred sum and squares, and the quantiles, counted twice
    assert agg.rho_m == rho_total * Fraction(10, 11)
    chosen = {"avg": (-4.0, 30.0)}
    k, c = 3, 2
    used = Fraction(0)
    for comp, s2 in agg.noise_parameters(chosen):
        spec = comp.spec
        if comp.what in ("records", "n"):
            sens = Fraction(c)
        elif comp.what == "users":
            sens = Fraction(1)
        elif comp.what == "sum" and comp.metric == "spend":
            sens = Fraction(c * max(abs(spec.low), abs(spec.high)))
        elif comp.what == "sum":
            sens = Fraction(c * max(spec.high - spec.center, spec.center - spec.low))
        elif comp.what == "squares":
            half = max(spec.high - spec.center, spec.center - spec.low)
            sens = Fraction(c * half * half)
        elif comp.what == "exponential":  # k groups x 2 levels, each draw eps**2 / 8-zCDP
            used += k * 2 * s2**2 / 8
            continue
        else:  # the tree: a count per level
            sens = Fraction(c) * Fraction(math.sqrt(4))
        used += k * sens**2 / (2 * s2)
    used += Fraction(AUTO_SHARE) * agg.rho_m  # one automatic bound
    assert used <= agg.rho_m
    assert agg._selector.spent_rho == agg.rho_m
    assert agg._selector.certified_delta() <= 1e-6
    assert agg.guarantee().epsilon <= 1.0 and agg.guarantee().delta <= 1e-6


def test_the_release_draws_the_noise_it_accounts_for() -> None:
    """The noisy counts of 3,000 public groups of 50 records each (one release: independent noise
    per group) follow the discrete Gaussian of the variance the guarantee was computed from
    (alpha 1e-6); a 20% smaller variance is rejected (power)."""
    groups = [f"g{i}" for i in range(3000)]
    frame = pl.DataFrame({"g": [x for x in groups for _ in range(50)]})
    agg = Aggregation(
        {"n": m.count()},
        ("g",),
        1.0,
        1e-6,
        False,
        partitions=tuple((x,) for x in groups),
        noise="gaussian",
    )
    ((_, s2),) = agg.noise_parameters()
    release = Session().aggregate(
        frame,
        by="g",
        metrics={"n": m.count()},
        epsilon=1.0,
        delta=1e-6,
        partitions=groups,
        noise="gaussian",
        seed=11,
    )
    draws = np.asarray(release.extra["n"], dtype=np.int64) - 50
    assert release.metadata["components"][0]["sigma2"] == float(s2)
    assert (draws > -50).all()  # the clamp at 0 never bites here
    lo, hi = int(draws.min()) - 1, int(draws.max()) + 1
    assert_fits(chi2_integer(draws, DiscreteGaussian(s2), lo, hi))
    assert_rejects(chi2_integer(draws, DiscreteGaussian(s2 * Fraction(8, 10)), lo, hi))


class _Convolved:
    """The law of ``Z_c + w Z_s`` for independent discrete Laplace ``Z_c`` and ``Z_s`` (scales
    ``t_c``, ``t_s``), tabulated from their closed-form pmfs on a range whose outside mass is
    below 1e-15: ``pmf``, ``cdf`` and ``sf`` as :func:`tests.stats.chi2_integer` asks."""

    def __init__(self, t_c: float, t_s: float, w: int) -> None:
        def pmf(t: float, z: Any) -> Any:
            a = math.exp(-1 / t)
            return (1 - a) / (1 + a) * a ** np.abs(z)

        r_c, r_s = int(40 * t_c) + 5, int(40 * t_s) + 5
        self.lo = -(r_c + w * r_s)
        table = np.zeros(2 * -self.lo + 1)
        zc = np.arange(-r_c, r_c + 1)
        for j in range(-r_s, r_s + 1):
            table[zc + w * j - self.lo] += pmf(t_s, j) * pmf(t_c, zc)
        self.table = table
        self.cum = np.cumsum(table)

    def pmf(self, k: Any) -> Any:
        i = np.asarray(k) - self.lo
        ok = (i >= 0) & (i < self.table.size)
        return np.where(ok, self.table[np.clip(i, 0, self.table.size - 1)], 0.0)

    def cdf(self, k: int) -> float:
        i = k - self.lo
        return 0.0 if i < 0 else float(self.cum[min(i, self.cum.size - 1)])

    def sf(self, k: int) -> float:
        return 1.0 - self.cdf(k - 1)


def test_a_sum_reusing_the_selection_count_draws_the_noise_it_accounts_for() -> None:
    """Private groups at record level, Laplace noise: 3,000 groups of 200 records of value 4
    (always released), a sum in [0, 4]. Each released sum less the true one is the centred
    sum's noise plus the middle (2) times the selection's count noise: their convolution, at the
    scales the metadata states, fits (alpha 1e-6); a direct sum's noise at its own scale and the
    centred noise alone are rejected (power)."""
    groups = [f"g{i:04d}" for i in range(3000)]
    frame = pl.DataFrame({"g": [x for x in groups for _ in range(200)], "x": [4] * 600_000})
    release = Session().aggregate(
        frame,
        by="g",
        metrics={"total": m.sum("x", 0, 4, resolution=1)},
        epsilon=1.0,
        delta=1e-6,
        noise="laplace",
        seed=12,
    )
    assert len(release) == 3000
    meta = release.metadata
    assert meta["selection"]["mechanism"] == "stability"
    (comp,) = meta["components"]
    assert comp["aggregate"] == "centred"
    t_c, t_s = comp["scale"], meta["selection"]["noise_scale_float"]
    # half the budget each: the centred sum's sensitivity 2 over 0.5, the count's 1 over 0.5
    assert t_c == pytest.approx(4.0, rel=1e-6) and t_s == pytest.approx(2.0, rel=1e-5)
    draws = np.rint(np.asarray(release.extra["total"], dtype=np.float64)).astype(np.int64) - 800
    lo, hi = int(draws.min()) - 1, int(draws.max()) + 1
    assert_fits(chi2_integer(draws, _Convolved(t_c, t_s, 2), lo, hi))
    assert_rejects(chi2_integer(draws, _Convolved(8.0, 1.0, 0), lo, hi))  # a direct sum's
    assert_rejects(chi2_integer(draws, _Convolved(t_c, 1.0, 0), lo, hi))  # no count noise


def test_product_partitions_give_every_group_a_row() -> None:
    frame = pl.DataFrame(
        {
            "sex": ["F", "M", "F", "X"] * 500,
            "age": [20, 30, 40, 50] * 500,
            "deg": [1, 2, 1, 3] * 500,
        }
    )
    r = Session().aggregate(
        frame,
        by=["sex", "deg"],
        metrics={"n": m.count(), "mean_age": m.mean("age", 0, 100)},
        partitions=m.product({"sex": ["F", "M"], "deg": [1, 2, 3]}),
        epsilon=2.0,
        seed=1,
    )
    assert isinstance(r, Release)
    t = r.to_pandas()
    assert t[["sex", "deg"]].values.tolist() == [
        ["F", 1],
        ["F", 2],
        ["F", 3],
        ["M", 1],
        ["M", 2],
        ["M", 3],
    ]
    assert list(t.columns) == ["sex", "deg", "n", "n_lower", "n_upper", "mean_age"]
    assert r.diagnostics["records_outside_groups"] == 500  # the X rows
    assert abs(t["n"][0] - 1000) < 20 and abs(t["mean_age"][0] - 30) < 1
    assert r.metadata["noise"] == "laplace" and r.metadata["guarantee"]["delta"] == 0


def test_public_partitions_as_keys_and_as_a_table() -> None:
    frame = pl.DataFrame({"c": ["fr", "de"] * 100, "d": [1, 2] * 100, "v": [3.0, 5.0] * 100})
    for parts in ([("fr", 1), ("de", 2)], pl.DataFrame({"d": [1, 2], "c": ["fr", "de"]})):
        r = Session().aggregate(
            frame,
            by=["c", "d"],
            metrics={"s": m.sum("v", 0, 10)},
            partitions=parts,
            epsilon=5.0,
            seed=2,
        )
        assert r.to_pandas()[["c", "d"]].values.tolist() == [["de", 2], ["fr", 1]]


def test_private_groups_release_only_large_groups(tmp_path: Path) -> None:
    g = np.random.default_rng(1)
    n = 40_000
    frame = pl.DataFrame(
        {
            "user": g.integers(0, 8000, n),
            "country": g.choice(["fr", "de", "it"], n),
            "device": g.choice(["ios", "android"], n),
            "spend": g.gamma(2.0, 10.0, n),
        }
    )
    frame = pl.concat(
        [
            frame,
            pl.DataFrame(
                {"user": [99_999], "country": ["rare"], "device": ["ios"], "spend": [1.0]}
            ),
        ],
        how="vertical_relaxed",
    )
    for user in (None, "user"):
        r = (
            Session().aggregate(
                frame,
                by=["country", "device"],
                user=user,
                max_partitions=2,
                max_per_partition=3,
                metrics={
                    "n": m.count(),
                    "spend": m.sum("spend", 0, 100),
                    "med": m.quantiles("spend", [0.5], 0, 100),
                },
                epsilon=1.0,
                delta=1e-6,
                seed=3,
            )
            if user
            else Session().aggregate(
                frame,
                by=["country", "device"],
                metrics={
                    "n": m.count(),
                    "spend": m.sum("spend", 0, 100),
                    "med": m.quantiles("spend", [0.5], 0, 100),
                },
                epsilon=1.0,
                delta=1e-6,
                seed=3,
            )
        )
        t = r.to_pandas()
        assert len(t) == 6 and "rare" not in t["country"].tolist()
        truth = frame.filter(pl.col("country") == "fr").filter(pl.col("device") == "ios")
        row = t[(t["country"] == "fr") & (t["device"] == "ios")].iloc[0]
        assert abs(row["med_0.5"] - float(truth["spend"].median())) < 3
        # record level: Laplace noise (the smaller error here), so the stability selection whose
        # counts the sum reuses
        expected = ("cumulative-sips", "optimal-selection") if user else ("stability",)
        assert r.metadata["selection"]["mechanism"] in expected


def test_auto_bound_histogram_keeps_counts_at_least_the_cutoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The automatic bound's noisy histogram keeps a bucket whose noisy count is at least
    ``AUTO_CUTOFF`` noise standard deviations, the cutoff itself included, and zeroes the
    others (post-processing). The budget is set so that the variance is 4 (deviation 2, cutoff
    6) and the noise is scripted to 0, so the counts are the noisy counts."""
    from privhist.analytics import aggregate

    agg = Aggregation({"avg": m.mean("x", 0, "auto")}, ("g",), 1.0, 1e-6, False, noise="gaussian")
    agg.rho_m = Fraction(1, 8) / Fraction(AUTO_SHARE)  # sigma2 = 1 / (2 rho share) = 4
    assert aggregate.AUTO_CUTOFF == 3

    def silent(sigma2: Fraction, rng: Any, n: int) -> Any:
        assert sigma2 == 4
        return np.zeros(n, dtype=np.int64)

    monkeypatch.setattr(aggregate, "discrete_gaussian", silent)
    out = agg._auto_noise(np.array([0, 5, 6, 7, 100]), SeededRandom(0))
    assert out.tolist() == [0, 0, 6, 7, 100]


def test_aggregation_variances_are_whole_numbers_only_above_2_30() -> None:
    """A Gaussian component's variance is ``sigma2_for``'s rational up to ``2**30`` and its
    ceiling above (the large-variance sampler takes integers): both at least the calibrated
    ``sensitivity2 / (2 rho)``."""
    from privhist.analytics.aggregate import _sigma2
    from privhist.mechanisms.user_level._gauss import sigma2_for

    for target in (Fraction(2**30) - Fraction(1, 2), Fraction(2**30), Fraction(2**30) + 3 // 2):
        rho, sens2 = Fraction(1, 2), target  # sensitivity2 / (2 rho) = target
        s2 = _sigma2(rho, sens2)
        assert s2 >= sens2 / (2 * rho)
        if sigma2_for(rho, sens2) > 2**30:
            assert s2 == math.ceil(sigma2_for(rho, sens2))
        else:
            assert s2 == sigma2_for(rho, sens2)
    assert _sigma2(Fraction(1, 2), Fraction(2**30) - Fraction(1, 2)) == Fraction(2**31 - 1, 2)
    assert _sigma2(Fraction(1, 2), Fraction(2**30) + Fraction(1, 2)) == 2**30 + 1


def test_auto_bounds_are_chosen_inside_the_spend() -> None:
    g = np.random.default_rng(2)
    frame = pl.DataFrame({"g": g.choice(["a", "b"], 20_000), "x": g.uniform(0, 90, 20_000)})
    metrics = {"avg": m.mean("x", "auto", "auto")}
    # the bounds are a DP choice: a seeded (uncharged) release makes the values reproducible
    r = Session().aggregate(frame, by="g", metrics=metrics, epsilon=1.0, delta=1e-6, seed=3)
    chosen = r.metadata["metrics"]["avg"]
    # the values' 1% quantile is 0.9 and their 99% quantile 89: the grid points next to them
    # (the histograms' noise has a scale of about 40 for buckets of about 220 values)
    assert chosen["bounds_chosen_privately"]
    assert chosen["lower"] in (0.0, 0.5, 1.0, 2.0) and chosen["upper"] in (64.0, 128.0)
    assert abs(r.to_pandas()["avg"] - 45).max() < 3
    s = Session.in_memory(__import__("privhist").Budget(1.0, 1e-6))
    s.aggregate(frame, by="g", metrics=metrics, epsilon=1.0, delta=1e-6)
    st = s.status()
    assert st is not None and len(st.spends) == 1 and st.remaining.epsilon == 0


def test_bad_calls_are_refused_before_reading() -> None:
    missing = "never-read.csv"
    s = Session()
    cases = [
        ({"by": [], "metrics": {"n": m.count()}}, "by"),
        ({"by": "g", "metrics": {}}, "metrics"),
        ({"by": "g", "metrics": {"n": m.count_users()}}, "metrics"),
        ({"by": "g", "metrics": {"g": m.count()}}, "metrics"),
        ({"by": "g", "metrics": {"n": m.count()}, "delta": 0.0}, "delta"),
        ({"by": "g", "metrics": {"n": m.count()}, "max_partitions": 2}, "max_partitions"),
        ({"by": "g", "metrics": {"n": m.count()}, "partitions": [("a", 1)]}, "partitions"),
        ({"by": "g", "metrics": {"n": m.count()}, "user": "g"}, "user"),
    ]
    for kwargs, param in cases:
        base: dict[str, Any] = {"epsilon": 1.0, "delta": 1e-6, **kwargs}
        with pytest.raises(ValidationError) as info:
            s.aggregate(missing, **base)
        assert info.value.parameter == param, str(info.value)
    with pytest.raises(ValidationError):
        m.sum("x", 10, 5)
    with pytest.raises(ValidationError):
        m.quantiles("x", [1.5], 0, 1)


def test_a_dry_run_reads_nothing() -> None:
    plan = Session().aggregate(
        "never-read.csv",
        by=["a", "b"],
        metrics={"n": m.count()},
        epsilon=1,
        delta=1e-6,
        dry_run=True,
    )
    assert plan.cost.epsilon <= 1 and plan.release == "aggregate"
    assert "chosen privately" in str(plan)


def test_laplace_count_interval_covers() -> None:
    frame = pl.DataFrame({"g": ["a"] * 300})
    inside = 0
    for seed in range(200):
        r = Session().aggregate(
            frame, by="g", metrics={"n": m.count()}, partitions=["a"], epsilon=0.5, seed=seed
        )
        inside += int(r.extra["n_lower"][0] <= 300 <= r.extra["n_upper"][0])
    # 95% intervals: at least 180 of 200 (binomial lower tail at 1e-6 is far below)
    assert inside >= 180 and stats.binom.cdf(inside, 200, 0.95) > 1e-6


def test_gaussian_interval_above_exact_range_is_the_tail_bound_quantile() -> None:
    # Above 2**20 of variance the half-width comes from the rigorous tail bound: the smallest w
    # whose bound on Pr[Z >= w + 1] is within (1 - confidence) / 2, and near the normal quantile.
    import math
    from fractions import Fraction

    from privhist.analytics.aggregate import Aggregation
    from privhist.mechanisms.user_level._gauss import tail_upper

    agg = object.__new__(Aggregation)
    agg.noise, agg.confidence = "gaussian", 0.95
    for sigma2 in (Fraction(2**20 + 1), Fraction(10**10), Fraction(150606834175)):
        w = agg._interval(sigma2)
        assert tail_upper(sigma2, w + 1) <= 0.025 < tail_upper(sigma2, w)
        sigma = math.sqrt(float(sigma2))
        assert abs(w - 1.959964 * sigma) <= 2 + 1e-6 * sigma


def test_a_sum_beside_a_mean_of_the_same_column_shares_its_components() -> None:
    """A sum with the bounds of a mean is answered from the mean's noisy count and centred sum:
    no component of its own, the mean's two components each at half of the two metrics' budget
    (their Laplace spends add up to epsilon), and over 3,000 public groups the sum's errors have
    the spread of ``centred sum + middle x count`` (the plan's figure), not a direct sum's."""
    metrics = {"s": m.sum("x", 0, 10, resolution=1), "avg": m.mean("x", 0, 10, resolution=1)}
    groups = [f"g{i}" for i in range(3000)]
    agg = Aggregation(metrics, ("g",), 1.0, 0.0, False, partitions=tuple((x,) for x in groups))
    assert agg.shared_sums() == {"s": "avg"}
    params = agg.noise_parameters()
    assert [(c.metric, c.what) for c, _ in params] == [("avg", "n"), ("avg", "sum")]
    spent = sum((c.l1 / p for c, p in params), Fraction(0))
    assert Fraction(999_999, 10**6) <= spent <= 1
    frame = pl.DataFrame({"g": [x for x in groups for _ in range(20)], "x": [7.0] * 60_000})
    r = Session().aggregate(
        frame, by="g", metrics=metrics, epsilon=1.0, partitions=groups, noise="laplace", seed=4
    )
    assert r.metadata["metrics"]["s"]["answered_from"].startswith("the count and centred sum")
    err = np.asarray(r.extra["s"], dtype=np.float64) - 140.0
    predicted = plan(agg)["metrics"]["s"]["noise_std"]
    (_, t_n), (_, t_s) = params
    # the discrete Laplace's variance is a little below the continuous one's 2 t**2
    assert predicted == pytest.approx(
        math.sqrt(2 * float(t_s) ** 2 + 25 * 2 * float(t_n) ** 2), rel=0.02
    )
    assert abs(err.std() / predicted - 1) < 0.08, (err.std(), predicted)
    # a direct sum at the same pooled budget would have a spread of 10 sqrt(2) / 1 = 14.1: the
    # shared one (centre 5, M 5, 1:1 split) has sqrt(2) * sqrt(10**2 + 5**2 * 2**2) = 20
    assert err.std() > 17


def test_aggregate_bounding_draws_its_secret_only_for_users_over_the_cap() -> None:
    """Bounding in the local engine: users with exactly ``k`` groups and at most ``c`` records
    in each are not bounded and draw no secret (a scripted source with no words would fail);
    a user with ``k + 1`` groups is counted as bounded and keeps ``k``, and a pair with ``c + 1``
    records keeps ``c``."""
    from types import SimpleNamespace

    from tests.scripted_random import ScriptedRandom

    from privhist.engines.local.aggregate import bound
    from privhist.engines.priorities import LazyPriorities

    k, c = 2, 3
    request: Any = SimpleNamespace(max_partitions=k, max_per_partition=c)
    users = [u for u in range(10) for _ in range(k * c)]
    keys = [f"g{(u + j // c) % 5}" for u in range(10) for j in range(k * c)]
    frame = pl.DataFrame({"user": users, "key": keys, "s0": list(range(len(users)))})
    out, facts, _ = bound(frame, request, 1, LazyPriorities(ScriptedRandom([])))
    assert out.height == frame.height
    assert facts == {"users": 10, "users_bounded": 0, "pairs_bounded": 0}
    extra = pl.DataFrame(
        {"user": [0] * (c + 1) + [1] * 1, "key": ["g4"] * (c + 1) + ["g4"], "s0": [7] * (c + 2)}
    )  # user 0: a third group with c + 1 records; user 1: a third group
    out, facts, _ = bound(pl.concat([frame, extra]), request, 1, LazyPriorities(SeededRandom(4)))
    assert facts["users_bounded"] == 2 and facts["users"] == 10
    per_user = out.group_by("user").agg(pl.col("key").n_unique().alias("g"), pl.len())
    assert per_user["g"].max() == k
    assert sorted(per_user.filter(pl.col("user") <= 1)["g"].to_list()) == [k, k]
    assert out.group_by("user", "key").len()["len"].max() == c  # c + 1 records cut to c
    others = out.filter(pl.col("user") > 1)
    assert others.height == frame.filter(pl.col("user") > 1).height  # untouched


def test_aggregate_bounding_names_identical_records_by_their_rank() -> None:
    """Within a pair over ``c`` records, the kept records are the ``c`` of smallest priority of
    (user, name), a record's name made from its group, its values and its rank among the
    user's identical records in that group (module notes of the local engine); computed here
    from that definition for 300 users with repeated values, the kept values agree."""
    from collections import Counter
    from types import SimpleNamespace

    from privhist.engines.local.aggregate import bound
    from privhist.engines.priorities import PairPriorities, group_code, record_codes

    c = 2
    request: Any = SimpleNamespace(max_partitions=1, max_per_partition=c)
    pattern = [7, 8, 7, 8, 7, 9]
    users = [u for u in range(300) for _ in pattern]
    values = [v for _ in range(300) for v in pattern]
    frame = pl.DataFrame({"user": users, "key": ["g"] * len(users), "s0": values})
    f = PairPriorities(bytes(range(32)))
    out, _, _ = bound(frame, request, 1, f)
    seen: dict[tuple[int, int], int] = {}
    ranks = []
    for u, v in zip(users, values, strict=True):
        ranks.append(seen.get((u, v), 0))
        seen[(u, v)] = ranks[-1] + 1
    names = record_codes(
        np.full(len(users), group_code("g"), dtype=np.uint64),
        [(np.array(values, dtype=np.int64), np.zeros(len(users), dtype=bool))],
        np.array(ranks, dtype=np.int64),
    )
    prio = f(np.array(users, dtype=np.int64), names.view(np.int64))
    expected: dict[int, Counter[int]] = {}
    for u in range(300):
        rows = [i for i in range(len(users)) if users[i] == u]
        best = sorted(rows, key=lambda i: int(prio[i]))[:c]
        expected[u] = Counter(values[i] for i in best)
    kept: dict[int, Counter[int]] = {}
    for u, v in out.select("user", "s0").iter_rows():
        kept.setdefault(u, Counter())[v] += 1
    assert kept == expected


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_selection_quantiles_draw_uniformly_within_a_run_of_equal_scores(noise: str) -> None:
    """Each group holds the values 0 and 100: every unit of ``[0, 100]`` is a median (rank
    interval containing the target), so all 101 candidates score 0, most of them in one block
    of empty units, and the draw is uniform over them (permute-and-flip with Laplace noise, the
    exponential mechanism with Gaussian noise). 300 groups give many distinct medians, spread
    over the range; a draw stuck at a block's first unit would give at most three values."""
    groups = [f"g{i:03d}" for i in range(300)]
    frame = pl.DataFrame({"g": [g for g in groups for _ in (0, 1)], "x": [0, 100] * 300})
    metric = m.quantiles("x", [0.5], 0, 100, resolution=1, method="exponential")
    rel = Session().aggregate(
        frame,
        by="g",
        metrics={"q": metric},
        partitions=groups,
        epsilon=1.0,
        delta=1e-6 if noise == "gaussian" else 0.0,
        noise=noise,
        seed=11,
    )
    values = rel.to_pandas()["q_0.5"].to_numpy()
    assert ((values >= 0) & (values <= 100) & (values == np.round(values))).all()
    assert len(set(values.tolist())) >= 60
    assert (values < 34).sum() >= 60 and (values > 66).sum() >= 60  # both thirds reached


def test_aggregate_bounding_makes_sparse_key_codes_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """Key codes too sparse for an int64 pair code (here spread ``2**58`` apart) are renumbered
    densely first: the same records and facts as with compact codes."""
    from types import SimpleNamespace

    from privhist.engines.local import aggregate as local
    from privhist.engines.priorities import PairPriorities

    g = np.random.default_rng(2)
    n = 600
    frame = pl.DataFrame(
        {
            "user": g.integers(0, 50, n),
            "key": [f"k{v}" for v in g.integers(0, 5, n)],
            "s0": g.integers(0, 3, n),
        }
    )
    request: Any = SimpleNamespace(max_partitions=2, max_per_partition=2)
    f = PairPriorities(bytes(range(32)))
    want, want_facts, _ = local.bound(frame, request, 1, f)
    assert want_facts["users_bounded"] > 0 and want_facts["pairs_bounded"] > 0
    codes = local._codes

    def sparse(series: pl.Series) -> Any:
        c, top = codes(series)
        if series.name == "key":
            return c * (1 << 58), int(c.max()) * (1 << 58) + 1
        return c, top

    monkeypatch.setattr(local, "_codes", sparse)
    got, got_facts, _ = local.bound(frame, request, 1, f)
    assert got_facts == want_facts
    assert sorted(got.rows()) == sorted(want.rows())


@pytest.mark.parametrize("keys", ["text", "int", "wide"])
def test_bounding_counts_each_groups_users_as_the_kept_records_hold_them(keys: str) -> None:
    """The users per group and in all that the bounding reports are the distinct users of the
    records it keeps (text keys, integer keys, and integer keys too wide for offset codes)."""
    from types import SimpleNamespace

    from privhist.engines.local.aggregate import bound
    from privhist.engines.priorities import PairPriorities

    g = np.random.default_rng(7)
    n = 3000
    raw = g.integers(0, 40, n)
    key: Any = {"text": [f"k{v}" for v in raw], "int": raw, "wide": raw * 10**15 - 7}[keys]
    frame = pl.DataFrame({"user": g.integers(0, 300, n), "key": key, "s0": g.integers(0, 3, n)})
    request: Any = SimpleNamespace(max_partitions=3, max_per_partition=2)
    out, facts, users = bound(frame, request, 1, PairPriorities(bytes(range(32))))
    assert facts["users_bounded"] > 0 and facts["users"] == out["user"].n_unique() == 300
    want = out.group_by("key").agg(pl.col("user").n_unique().cast(pl.Int64).alias("users"))
    assert users.sort("key").equals(want.sort("key")), (users, want)
    empty = bound(frame.head(0), request, 1, PairPriorities(bytes(range(32))))
    assert empty[1]["users"] == 0 and empty[2].height == 0 and empty[2].columns == ["key", "users"]


@pytest.mark.parametrize("modulus", [1, 3, 2**20, 2**64])
@pytest.mark.parametrize("scale", [1, 2**40])
def test_aggregate_bounding_orders_tied_priorities_by_values_then_rank(
    modulus: int, scale: int
) -> None:
    """The records kept in a pair over ``c`` are the ``c`` smallest by (priority, each value
    with nulls last, rank among identical records), computed here from that definition while
    the priorities are cut to few values (``modulus``): every tie of priorities, of their leading
    bits only, or none, and values too wide (``scale``) for one packed sort key."""
    from collections import Counter
    from types import SimpleNamespace

    from privhist.engines.local.aggregate import bound
    from privhist.engines.priorities import PairPriorities, group_code, record_codes

    class Cut:
        def __init__(self) -> None:
            self.f = PairPriorities(bytes(range(32)))

        def codes(self, values: Any) -> Any:
            return self.f.codes(values)

        def __call__(self, users: Any, keys: Any) -> Any:
            p = self.f(users, keys)
            return p if modulus == 2**64 else p % np.uint64(modulus)

    g = np.random.default_rng(modulus % 1000 + scale % 7)
    n, c = 900, 3
    users = g.integers(0, 12, n)
    keys = [f"k{v}" for v in g.integers(0, 4, n)]
    a = (g.integers(-2, 3, n) * scale).tolist()
    b = [None if g.random() < 0.3 else int(v) for v in g.integers(0, 3, n)]
    frame = pl.DataFrame({"user": users, "key": keys, "s0": a, "s1": pl.Series(b, dtype=pl.Int64)})
    request: Any = SimpleNamespace(max_partitions=4, max_per_partition=c)
    prio = Cut()
    out, facts, _ = bound(frame, request, 2, prio)
    assert facts["users_bounded"] == 0 and facts["pairs_bounded"] > 0
    seen: Counter[tuple[Any, ...]] = Counter()
    ranks = []
    for row in zip(users.tolist(), keys, a, b, strict=True):
        ranks.append(seen[row])
        seen[row] += 1
    names = record_codes(
        np.array([group_code(k) for k in keys], dtype=np.uint64),
        [
            (np.array(a, dtype=np.int64), np.zeros(n, dtype=bool)),
            (np.array([v or 0 for v in b], dtype=np.int64), np.array([v is None for v in b])),
        ],
        np.array(ranks, dtype=np.int64),
    )
    p = prio(users.astype(np.int64), names.view(np.int64))
    expected: Counter[tuple[Any, ...]] = Counter()
    for pair in {(u, k) for u, k in zip(users.tolist(), keys, strict=True)}:
        rows = [i for i in range(n) if (int(users[i]), keys[i]) == pair]
        rows.sort(key=lambda i: (int(p[i]), a[i], b[i] is None, b[i] or 0, ranks[i]))
        expected.update((int(users[i]), keys[i], a[i], b[i]) for i in rows[:c])
    assert Counter(out.select("user", "key", "s0", "s1").rows()) == expected


@pytest.mark.parametrize(
    "texts",
    [
        ["a", "b\\c", "d\x1fe", None, "\\\x1f\\s"],  # escapes needed
        ["a", "b", None, "c d", "s"],  # none needed: the text is kept as it is
    ],
)
def test_group_keys_encode_every_part_like_the_key_codec(texts: list[str | None]) -> None:
    """The local engine's key of several columns is :func:`privhist.core.groups.encode` of the
    row's values, whether or not a text column holds a backslash or the separator, and for
    integer and boolean columns beside it; a null part gives a null key."""
    from privhist.core.groups import decode, encode
    from privhist.core.requests import Fields
    from privhist.engines.local.aggregate import group_frame

    n = len(texts)
    frame = pl.DataFrame(
        {"t": texts, "i": [3, -40, 5, 6, None][:n], "b": [True, False, True, None, False][:n]}
    )
    fields = Fields(by=("t", "i", "b"))
    lf, types, coder = group_frame(
        frame, fields, (), "aggregate", lambda cols: frame.lazy().select(cols)
    )
    assert coder is None  # without a collect the key is written per record
    got = lf.collect()["key"].to_list()
    want = [
        encode([t, i, "true" if b else "false"] if b is not None else [t, i, None])
        for t, i, b in frame.rows()
    ]
    assert got == want
    # with a collect the key holds integer codes, written back as the same texts
    coded, _, coder = group_frame(
        frame, fields, (), "aggregate", lambda cols: frame.lazy().select(cols), pl.LazyFrame.collect
    )
    assert coder is not None
    codes = coded.collect()["key"]
    assert codes.dtype == pl.Int64
    texts = iter(coder.keys(codes.drop_nulls().to_numpy()).to_list())
    assert [None if c is None else next(texts) for c in codes.to_list()] == want
    assert types == ("str", "int", "str")
    for key, (t, i, _) in zip(got, frame.rows(), strict=True):
        if key is not None:
            assert decode(key, types)[:2] == (t, i)


@pytest.mark.parametrize(
    ("metrics", "share", "share_free"),
    [
        ({"s": m.sum("x", 0, 10)}, Fraction(1, 2), Fraction(1, 2)),
        ({"a": m.mean("x", 0, 10)}, Fraction(1, 3), Fraction(1, 2)),
        ({"v": m.variance("x", 0, 10)}, Fraction(1, 4), Fraction(1, 3)),
        ({"n": m.count(), "q": m.quantiles("x", [0.5, 0.9], 0, 10)}, Fraction(1, 4), None),
        ({"q": m.quantiles("x", [0.5], 0, 10)}, Fraction(1, 3), None),
        ({"s": m.sum("x", 0, 10), "a": m.mean("x", 0, 10)}, Fraction(1, 3), Fraction(1, 2)),
        ({"s": m.sum("x", 0, 20), "a": m.mean("x", 0, 10)}, Fraction(1, 4), Fraction(1, 3)),
        (
            {"s": m.sum("x", 0, 10), "a": m.mean("x", 0, 10), "q": m.quantiles("x", [0.5], 0, 10)},
            Fraction(1, 5),
            Fraction(1, 4),
        ),
        (  # the first sum's column is the free one: the mean of y keeps its count
            {"s": m.sum("y", 0, 10), "a": m.mean("x", 0, 10)},
            Fraction(1, 4),
            Fraction(1, 4),
        ),
    ],
)
def test_the_selection_takes_one_share_beside_each_noisy_component(
    metrics: dict[str, Any], share: Fraction, share_free: Fraction | None
) -> None:
    """Private groups: the selection's share of epsilon is ``1 / (1 + components)`` (a mean
    counts its count and centred sum, a variance three, a quantiles metric two, a shared sum
    none), and the metrics get
    the rest, with all of delta for the selection under Laplace noise. At record level the
    stability selection's count is the free column's count (``share_free``; None: no sum, mean
    or variance, so optimal selection), at user level each metric keeps its own."""
    for user_level, want in ((True, share), (False, share_free or share)):
        agg = Aggregation(metrics, ("g",), 1.0, 1e-6, user_level, noise="laplace")
        assert agg.selection_share == want, user_level
        free = not user_level and share_free is not None
        assert agg._selector.name == ("stability" if free else "optimal-selection")
        eps_s = agg._selector.epsilon if free else agg.selection["selection_epsilon"]
        assert Fraction(eps_s) + Fraction(agg.eps_m) <= 1
        assert eps_s == pytest.approx(float(want), rel=1e-12)
        assert agg.eps_m == pytest.approx(float(1 - want), rel=1e-12)


def test_the_selection_and_metric_spends_add_up_exactly() -> None:
    """A share's part of a float budget is a float whose rest is a float too (the spends add up
    to the budget exactly), at most the exact share and short of it by under 2**-50 of the
    budget."""
    from privhist.analytics.aggregate import _part_of

    for total in (1.0, 6.0, 0.7, 1e-3, 1e-6, 3.0e-10, 1e5):
        for share in (Fraction(1, 2), Fraction(1, 3), Fraction(1, 4), Fraction(1, 7)):
            part = _part_of(total, share)
            rest = Fraction(total) - Fraction(part)
            assert Fraction(float(rest)) == rest and rest > 0, (total, share)
            exact = Fraction(total) * share
            assert Fraction(part) <= exact
            assert exact - Fraction(part) < Fraction(total) / 2**50, (total, share)


def test_weights_split_the_metrics_budget_and_spend_all_of_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``weights``: each metric's share of the metrics' budget is its weight over their total.
    Public groups, Laplace noise, epsilon 2: a sum of ``[0, 10]`` weighted 3 beside a count
    weighted 1 gets epsilon 3/2 (scale ``10 / 1.5``), the count 1/2 (scale 2), and the
    components spend exactly epsilon; unweighted, 1 each. The metadata states the shares, and
    the command line's ``--weight`` gives the same plan."""
    from tests.cli_run import run

    metrics = {"s": m.sum("x", 0, 10, resolution=1), "c": m.count()}
    parts = (("g1",), ("g2",))
    for weights, eps_sum in (({"s": 3}, Fraction(3, 2)), (None, Fraction(1))):
        agg = Aggregation(metrics, ("g",), 2.0, 0.0, False, partitions=parts, weights=weights)
        scales = {comp.metric: p for comp, p in agg.noise_parameters()}
        want = {"s": 10 / eps_sum, "c": 1 / (2 - eps_sum)}
        for name, scale in scales.items():  # at least l1 / epsilon_i, by under 2**-20
            assert 0 <= scale - want[name] <= Fraction(1, 2**20), (name, scale, want[name])
        spent = sum(comp.l1 / p for comp, p in agg.noise_parameters())
        assert Fraction(2) * (1 - Fraction(1, 10**5)) <= spent <= 2
    frame = pl.DataFrame({"g": ["g1"] * 50 + ["g2"] * 70, "x": [4.0] * 120})
    r = Session().aggregate(
        frame,
        by="g",
        metrics=metrics,
        epsilon=2.0,
        partitions=["g1", "g2"],
        weights={"s": 3},
        seed=3,
    )
    assert isinstance(r, Release)
    assert r.metadata["metrics"]["s"]["budget_share"] == 0.75
    assert r.metadata["metrics"]["c"]["budget_share"] == 0.25
    assert "s 0.75 (weight 3)" in r.metadata["budget_split"]
    scale = {c["metric"]: c["scale"] for c in r.metadata["components"]}
    assert scale["s"] == pytest.approx(20 / 3) and scale["c"] == pytest.approx(2.0)
    argv = ["plan", "aggregate", "--epsilon", "2", "--public", "--metric", "s=sum(x,0,10)"]
    argv += ["--metric", "c=count", "--json"]
    plans = {}
    for extra in ([], ["--weight", "s=3"]):
        code, out, err = run(capsys, *argv, *extra)
        assert code == 0, err
        planned = json.loads(out)["metrics"]["s"]
        plans[bool(extra)] = planned["noise_std"]
        assert planned["budget_share"] == (0.75 if extra else 0.5)
    assert plans[True] == pytest.approx(plans[False] * 2 / 3)  # epsilon 1 -> 1.5


def test_a_groups_weight_sets_the_selection_share() -> None:
    """With private groups, ``"groups"`` weighs the selection against the metrics' total: a
    median weighted 2 beside ``groups`` 1 leaves the selection a third of epsilon (optimal
    selection at record level) and the median two thirds."""
    q = {"q": m.quantiles("x", [0.5], 0, 100, resolution=1)}
    agg = Aggregation(q, ("g",), 1.5, 1e-6, False, noise="laplace", weights={"groups": 1, "q": 2})
    assert agg.selection_share == Fraction(1, 3)
    assert agg.selection["selection_epsilon"] == pytest.approx(0.5, rel=1e-12)
    assert agg.eps_m == pytest.approx(1.0, rel=1e-12)
    assert Fraction(agg.selection["selection_epsilon"]) + Fraction(agg.eps_m) <= Fraction(1.5)
    plain = Aggregation(q, ("g",), 1.5, 1e-6, False, noise="laplace")
    assert plain.selection_share == Fraction(1, 3)  # the rule: one share beside the median's two


@pytest.mark.parametrize(
    "weights",
    [
        {"nope": 1},
        {"s": 0},
        {"s": -1.0},
        {"s": float("nan")},
        {"s": float("inf")},
        {"s": True},
        {"s": "2"},
        [("s", 2)],
    ],
)
def test_bad_weights_are_refused(weights: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="weights"):
        Aggregation(
            {"s": m.sum("x", 0, 1)}, ("g",), 1.0, 0.0, False, partitions=(("a",),), weights=weights
        )


def test_a_groups_weight_is_refused_with_public_groups() -> None:
    with pytest.raises(ValidationError, match="groups"):
        Aggregation(
            {"s": m.sum("x", 0, 1)},
            ("g",),
            1.0,
            0.0,
            False,
            partitions=(("a",),),
            weights={"groups": 1},
        )


def test_values_are_written_as_the_decimals_they_are() -> None:
    """Sums, their intervals and quantiles are whole numbers of their resolution's units (here
    0.002): written with at most three decimals, not as 130544.72200000001 or 47.480000000000004
    (the products of the units and the resolution), and equal to those products to one unit in
    the last place."""
    from privhist.analytics.aggregate import in_values

    g = np.random.default_rng(0)
    n = 10_000
    frame = pl.DataFrame(
        {
            "country": g.choice(["de", "fr", "it", "es"], n),
            "amount": np.round(g.uniform(0, 100, n), 2),
            "age": g.integers(18, 80, n),
        }
    )
    metrics = {"s": m.sum("amount", 0, 100), "q": m.quantiles("age", [0.5], 18, 80)}
    written = []
    for seed in range(4):
        r = Session().aggregate(
            frame, by="country", metrics=metrics, epsilon=1, delta=1e-6, seed=seed
        )
        assert isinstance(r, Release)
        table = r.to_polars()
        for column in ("s", "s_lower", "s_upper", "q_0.5"):
            written += table[column].to_list()
    assert len(written) == 64
    assert all(len(repr(v).partition(".")[2]) <= 3 for v in written), written
    units = np.rint(np.asarray(written) / 0.002)
    assert np.allclose(in_values(units, 0.002), units * 0.002, rtol=2**-52, atol=0)
    # power: the plain products of these units are not all so written
    assert any(len(repr(v).partition(".")[2]) > 3 for v in (units * 0.002).tolist())


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("user_level", [False, True])
def test_centred_sensitivities_are_half_the_range_away_from_zero(
    noise: str, user_level: bool
) -> None:
    """Values in ``[10, 20]`` at resolution 1 are units 10..20 with centre 15: one record moves
    a centred sum by at most 5 and a centred sum of squares by at most 25, so with ``c`` records
    per group the components' sensitivities are ``c``, ``5 c`` and ``25 c`` (and the sum of
    ``[0, 20]``, not centred, ``20 c``). A range far from zero pays for its width, not for its
    offset."""
    metrics = {
        "a": m.mean("x", 10, 20, resolution=1),
        "v": m.variance("y", 10, 20, resolution=1),
        "s": m.sum("z", 0, 20, resolution=1),
    }
    c = 3 if user_level else 1
    agg = Aggregation(
        metrics,
        ("g",),
        1.0,
        1e-6 if noise == "gaussian" else 0.0,
        user_level,
        max_partitions=2,
        max_per_partition=3,
        partitions=(("g1",), ("g2",)),
        noise=noise,
    )
    got = {(comp.metric, comp.what): (comp.l1, comp.l2) for comp in agg.components()}
    want = {
        ("a", "n"): c,
        ("a", "sum"): 5 * c,
        ("v", "n"): c,
        ("v", "sum"): 5 * c,
        ("v", "squares"): 25 * c,
        ("s", "sum"): 20 * c,
    }
    assert got == {key: (Fraction(x), Fraction(x)) for key, x in want.items()}


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_selection_quantiles_answer_a_leafs_middle_when_leaves_hold_several_units(
    noise: str,
) -> None:
    """A range of ``4 x 16**4`` units (``[0, 262143]`` at resolution 1) gives each of the
    ``16**4`` leaves 4 units: leaf ``j`` spans ``[4 j, 4 j + 4)`` and a draw of it answers its
    middle ``4 j + 2`` (the tree's coordinates: an empty node answers its middle too). 300
    records at one value make their leaf the only one scoring 0 (every other block scores
    ``2 x 300``): the draw is another block with probability under ``10**-49`` (``gamma`` is
    0.5 with Laplace noise, 0.21 with Gaussian, over ``16**4`` leaves). 1003 is in
    leaf 250 (answer 1002), 20000 in leaf 5000 (answer 20002), 262143 in the last leaf (answer
    262142)."""
    frame = pl.DataFrame(
        {
            "g": ["a"] * 300 + ["b"] * 300 + ["c"] * 300,
            "x": [1003] * 300 + [20000] * 300 + [262143] * 300,
        }
    )
    metric = m.quantiles("x", [0.5], 0, 262143, resolution=1, method="exponential")
    rel = Session().aggregate(
        frame,
        by="g",
        metrics={"q": metric},
        partitions=["a", "b", "c"],
        epsilon=2.0,
        delta=1e-6 if noise == "gaussian" else 0.0,
        noise=noise,
        seed=5,
    )
    got = rel.to_pandas().set_index("g")["q_0.5"].to_dict()
    assert got == {"a": 1002.0, "b": 20002.0, "c": 262142.0}


def test_values_become_units_rounded_half_up_and_clamped() -> None:
    """The local engine's units are ``floor(x / resolution + 1/2)`` clamped to ``[low, high]``,
    an empty cell staying empty (:class:`~privhist.core.requests.ValueSpec`). By hand, at
    resolution 0.5 in ``[-4, 10]``: 1.2 -> 2.9 -> 2, 1.25 -> 3.0 -> 3 (a half goes up), -1.25 ->
    -2.0 -> -2, 0 -> 0, 0.74 -> 1.98 -> 1, 100 -> 10, -100 -> -4; at resolution 1 in
    ``[-50, 50]``: 1, 1, -1, 0, 1, 50, -50."""
    from privhist.core.requests import ValueSpec
    from privhist.engines.local.aggregate import with_units

    x = [1.2, 1.25, -1.25, 0.0, 0.74, 100.0, -100.0, None]
    df = pl.DataFrame({"key": list("abcdefgh"), "x0": pl.Series(x, dtype=pl.Float64)})
    specs = [ValueSpec("h", "x", -4, 10, 0.5, 3), ValueSpec("w", "x", -50, 50, 1.0, 0)]
    out = with_units(df, specs, ["x"])
    assert out.columns == ["key", "s0", "s1"]
    assert out["s0"].to_list() == [2, 3, -2, 0, 1, 10, -4, None]
    assert out["s1"].to_list() == [1, 1, -1, 0, 1, 50, -50, None]
