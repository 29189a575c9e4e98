"""Every release draws exactly the noise its guarantee was computed for.

The exact privacy checks elsewhere verify each mechanism's *declared* analysis; the law tests
sample near the release point and cannot see a noise scale 10 % off. Here a spy
(:mod:`tests.contracts.noise_spy`) records every sampler call a release makes, at the level of
:mod:`privhist.noise` (and the finite mechanisms' counting samplers and the cPBM encoder, which
draw without it), and each case checks that

* every scale, variance, threshold and rate the release *uses* is the one its event or
  guarantee was computed from (thresholds are read off the release itself: the spy scripts the
  noise so that noisy values sit just below and exactly at the expected threshold);
* those parameters meet the stated guarantee by the paper's formula, evaluated independently in
  high precision (:mod:`tests.contracts.formulas`), and are not far looser than it (a noise
  scale 10 % too large is a bug too: the calibration is wrong);

for several parameter sets: small and large epsilon (the large-scale sampler paths), user
level, replace-one, and caps chosen privately inside the release.

A new releasable (mechanism, weighted selector, federated encoder, or aggregation metric) is one
entry in :data:`CASES` (a function decorated with :func:`case`); the coverage test below fails
for a registered mechanism, selector or metric without one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from tests.contracts import formulas as F
from tests.contracts.noise_spy import Draw, NoiseSpy
from tests.scripted_random import ScriptedRandom

import privhist.mechanisms  # noqa: F401  (registers the built-in mechanisms)
from privhist import Release
from privhist.core.data import Counts
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import SeededRandom
from privhist.mechanisms import registry


@dataclass(frozen=True)
class Case:
    covers: str
    name: str
    run: Callable[[], None]


CASES: list[Case] = []


def case(covers: str, *param_sets: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``fn(*params)`` once per parameter set as a case covering ``covers``."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        for params in param_sets or [()]:
            args = params if isinstance(params, tuple) else (params,)
            label = "-".join(_label(a) for a in args) or "default"
            CASES.append(Case(covers, f"{covers}[{label}]", lambda fn=fn, args=args: fn(*args)))
        return fn

    return register


def _label(x: Any) -> str:
    if isinstance(x, Neighbouring):
        return x.describe().split(" (")[0].replace(" ", "_")
    return str(x)


# -- shared parameter sets ------------------------------------------------------------------

#: (epsilon, delta, neighbouring): moderate, small epsilon (scales above the sampler tables'
#: 1456: the large-scale discrete Laplace path), large epsilon with replace-one, user level
PER_KEY = [
    (1.0, 1e-6, Neighbouring.add_remove()),
    (0.02, 1e-9, Neighbouring.user(20, 3)),
    (4.0, 1e-4, Neighbouring.replace()),
    (0.5, 1e-8, Neighbouring.user(5, 2)),
]


def _counts(n: int, count: int, nb: Neighbouring, units: int | None = None) -> Counts:
    c = nb.max_contributions_per_partition
    u = units if units is not None else -(-count // c)
    keys = [f"k{i:04d}" for i in range(n)]
    return Counts.from_arrays(keys, [count] * n, [u] * n, neighbouring=nb)


def _half_script(sampler: str, value: Callable[[Draw], tuple[int, int]]) -> Callable[[Draw], Any]:
    """A script answering ``sampler`` with ``below`` for the first half of the entries and
    ``at`` for the second, ``(below, at) = value(draw)``; other samplers draw for real."""

    def script(d: Draw) -> Any:
        if d.sampler != sampler:
            return None
        below, at = value(d)
        half = d.size // 2
        return np.array([below] * half + [at] * (d.size - half), dtype=np.int64)

    return script


def _laplace_scale_ok(scale: Fraction, l1: int, epsilon: float | Fraction) -> None:
    """The discrete Laplace noise with this scale on an L1-sensitivity-``l1`` vector is
    ``epsilon``-DP (Ghosh, Roughgarden & Sundararajan 2009; the density ratio at distance ``d``
    is ``exp(d / scale)``), and the scale is ``l1 / epsilon`` rounded up by less than ``2**-20``
    (the calibration's resolution)."""
    eps = Fraction(epsilon)
    assert Fraction(l1) / scale <= eps, f"scale {scale} spends {float(l1 / scale)} > {eps}"
    assert scale - Fraction(l1) / eps <= Fraction(1, 2**20), f"scale {scale} is not l1/eps"


def _only(spy: NoiseSpy, *samplers: str) -> None:
    used = {d.sampler for d in spy.draws}
    assert used <= set(samplers), f"unexpected draws: {used - set(samplers)}"


def _window(
    bound: Callable[[int], Any], target: float | mpmath.mpf, slack: float, start: int
) -> tuple[int, int]:
    """``(T_min, T_max)`` for a bound decreasing in ``T``: ``T_min`` the smallest ``T`` with
    ``bound(T) <= target`` (below it the guarantee fails), ``T_max`` the smallest with
    ``bound(T) <= target (1 - slack)`` (a calibration whose rigorous bound is at most ``slack``
    looser than the exact value stops there). A release must apply a threshold in between."""

    def smallest(limit: Any) -> int:
        t = start
        step = 1
        while bound(t) <= limit:
            t -= step
            step *= 2
        lo, hi = t, t + step  # bound(lo) > limit
        while bound(hi) > limit:
            lo, hi = hi, hi + step
            step *= 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if bound(mid) <= limit else (mid, hi)
        return hi

    return smallest(target), smallest(target * (1 - slack))


def _dg_slack(sigma2: Fraction) -> float:
    """How much looser than the exact discrete Gaussian tail the rigorous tail bound of the
    user-level module may be (its notes, item 4): term by term up to ``sigma <= 256``, then one
    term plus the integral, which overshoots by about ``m / (2 sigma**2)``, below ``4 / sigma``
    at the thresholds used."""
    sigma = math.sqrt(float(sigma2))
    return 1e-9 if sigma <= 256 else 4.0 / sigma


# -- dense ----------------------------------------------------------------------------------


@case("dense", *[(e, nb) for e, _, nb in PER_KEY])
def dense_laplace(epsilon: float, nb: Neighbouring) -> None:
    cls = registry.get("dense")
    domain = [f"k{i:04d}" for i in range(30)]
    m = cls(epsilon, neighbouring=nb, domain=domain)
    with NoiseSpy().active() as spy:
        rel = m.release(_counts(10, 3 * nb.max_contributions_per_partition, nb), SeededRandom(1))
    _only(spy, "discrete_laplace")
    (d,) = spy.draws
    assert d.size == len(domain) == len(rel.keys)
    g = m.guarantee()
    assert g.delta == 0 and g.epsilon <= epsilon
    _laplace_scale_ok(d.parameter, nb.l1_sensitivity, g.epsilon)
    ev = m.event()
    assert ev.epsilon <= epsilon and ev.delta == 0  # type: ignore[attr-defined]


def _dg_hockey_stick(sigma2: Fraction, shift: int, l0: int, epsilon: float) -> mpmath.mpf:
    """delta(epsilon) of ``l0`` independent discrete Gaussians ``N_Z(0, sigma2)`` against the
    same shifted by ``shift`` each (the dense histogram's worst neighbours), by direct summation
    over the privacy loss ``L = sum_i (shift**2 - 2 shift z_i) / (2 sigma2)`` (its law for one
    coordinate convolved ``l0`` times)."""
    with mpmath.workdps(40):
        s2 = F.mp(sigma2)
        radius = int(14 * math.sqrt(float(sigma2))) + 4
        zs = range(-radius, radius + 1)
        weights = [mpmath.exp(-mpmath.mpf(z * z) / (2 * s2)) for z in zs]
        total = mpmath.fsum(weights)
        one = {}
        for z, w in zip(zs, weights, strict=True):
            loss = shift * shift - 2 * shift * z  # times 1 / (2 sigma2)
            one[loss] = one.get(loss, 0) + w / total
        dist = {0: mpmath.mpf(1)}
        for _ in range(l0):
            nxt: dict[int, Any] = {}
            for a, pa in dist.items():
                for b, pb in one.items():
                    nxt[a + b] = nxt.get(a + b, 0) + pa * pb
            dist = nxt
        e = mpmath.mpf(epsilon)
        # P[L > eps] - e^eps Q[L > eps], with Q the law of L under the other side: for the
        # discrete Gaussian, Q(l) = P(l) e^-l
        return mpmath.fsum(
            p * (1 - mpmath.exp(e - mpmath.mpf(loss) / (2 * s2)))
            for loss, p in dist.items()
            if mpmath.mpf(loss) / (2 * s2) > e
        )


@case("dense", (1.0, 1e-6, 1, 1), (0.5, 1e-5, 2, 2), (10.0, 1e-6, 4, 2))
def dense_gaussian(epsilon: float, delta: float, k: int, c: int) -> None:
    cls = registry.get("dense")
    nb = Neighbouring.user(k, c) if k > 1 or c > 1 else Neighbouring.add_remove()
    m = cls(epsilon, delta, nb, domain=["a", "b", "c"], noise="gaussian")
    with NoiseSpy().active() as spy:
        m.release(Counts.from_arrays(["a"], [c], [1], neighbouring=nb), SeededRandom(2))
    _only(spy, "discrete_gaussian")
    (d,) = spy.draws
    ev = m.event()
    # the event states a sigma at most the one drawn (never more noise than there is)
    sigma = Fraction(ev.sigma)  # type: ignore[attr-defined]
    assert sigma * sigma <= d.parameter and sigma * sigma >= d.parameter * (1 - Fraction(1, 10**9))
    assert ev.sensitivity == c and ev.count == k  # type: ignore[attr-defined]
    g = m.guarantee()
    exact = _dg_hockey_stick(d.parameter, c, k, g.epsilon)
    assert exact <= g.delta, f"the drawn sigma2 {d.parameter} gives delta {exact} > {g.delta}"
    # calibrated, not loose: the PLD's pessimism and the 2**-8 grid of sigma leave at most 7 %
    # of delta unused at these parameters (a target 10 % lower would leave 10 % or more)
    assert exact >= 0.93 * delta, f"the drawn sigma2 {d.parameter} uses only {exact / delta}"


# -- stability ------------------------------------------------------------------------------


def _stability_window(scale: Fraction, c: int, delta_key: Fraction) -> tuple[int, int]:
    """Thresholds ``T > c`` with ``Pr[c + Z >= T] <= delta_key`` (module notes of stability:
    a key only one neighbour holds has count at most ``c``), the smallest within 1e-9."""
    start = c + max(1, int(float(scale) * math.log(1 / float(delta_key))))
    lo, hi = _window(lambda t: F.dlap_sf(scale, t - c), F.mp(delta_key), 1e-9, start)
    return max(lo, c + 1), max(hi, c + 1)


@case("stability", *PER_KEY)
def stability(epsilon: float, delta: float, nb: Neighbouring) -> None:
    m = registry.get("stability")(epsilon, delta, nb)
    c, l0 = nb.linf_sensitivity, nb.l0_sensitivity
    count = 3 * c
    expected: dict[str, int] = {}

    def at_threshold(d: Draw) -> tuple[int, int]:
        lo, hi = _stability_window(d.parameter, c, Fraction(delta) / l0)
        expected["T"] = hi
        return lo - 1 - count, hi - count

    with NoiseSpy(_half_script("discrete_laplace", at_threshold)).active() as spy:
        rel = m.release(_counts(40, count, nb), SeededRandom(3))
    _only(spy, "discrete_laplace")
    (d,) = spy.draws
    g = m.guarantee()
    _laplace_scale_ok(d.parameter, nb.l1_sensitivity, g.epsilon)
    assert g.delta <= delta
    # exactly the keys at the threshold are released, with their noisy count
    assert len(rel.keys) == 20 and (rel.values == expected["T"]).all()


# -- gaussian thresholding -----------------------------------------------------------------


def _gauss_window(sigma2: Fraction, weights: list[int], target: float) -> tuple[int, int]:
    """Thresholds ``T`` with ``max_t 1 - (1 - Pr[Z >= T - w_t])**t <= target`` (Gopi et al.
    2020, Theorem 5.1, for the integer weights and the discrete noise), exact tails: the
    smallest, and the smallest a tail bound :func:`_dg_slack` looser would give."""

    def bound(t: int) -> mpmath.mpf:
        return max(1 - (1 - F.dg_sf(sigma2, t - w)) ** i for i, w in enumerate(weights, 1))

    sigma = math.sqrt(float(sigma2))
    guess = max(weights) + int(sigma * math.sqrt(2 * math.log(len(weights) / target)))
    return _window(bound, target, _dg_slack(sigma2), guess)


@case("gaussian-threshold", *PER_KEY)
def gaussian_threshold(epsilon: float, delta: float, nb: Neighbouring) -> None:
    share = 0.5
    m = registry.get("gaussian-threshold")(epsilon, delta, nb, threshold_share=share)
    c, l0 = nb.linf_sensitivity, nb.l0_sensitivity
    count = 3 * c
    expected: dict[str, int] = {}

    def at_threshold(d: Draw) -> tuple[int, int]:
        lo, hi = _gauss_window(d.parameter, [c] * l0, share * delta)
        expected["T"] = hi
        expected["T_min"] = lo
        return lo - 1 - count, hi - count

    with NoiseSpy(_half_script("discrete_gaussian", at_threshold)).active() as spy:
        rel = m.release(_counts(40, count, nb), SeededRandom(4))
    _only(spy, "discrete_gaussian")
    (d,) = spy.draws
    assert len(rel.keys) == 20 and (rel.values == expected["T"]).all()
    # the guarantee at the drawn variance and the applied threshold (Gaussian thresholding:
    # CKS Theorem 14 and Corollary 13 for the shared keys, the threshold for the others)
    rho = Fraction(l0 * c * c) / (2 * d.parameter)
    # the applied threshold is at least T_min (checked above): bound it at T_min
    p_f = 1 - (1 - F.dg_sf(d.parameter, expected["T_min"] - c)) ** l0
    certified = F.with_failure(lambda e: F.zcdp_delta(rho, e), epsilon, p_f)
    g = m.guarantee()
    assert certified <= g.delta <= delta, f"certified {certified} > {g.delta}"
    # calibrated: 2 % more zCDP than drawn would exceed the noise's share of delta
    e_z = mpmath.mpf(epsilon) + mpmath.log(1 - share * delta)
    assert F.zcdp_delta(rho * Fraction(102, 100), e_z) > (1 - share) * delta * (1 - 1e-6)
    # the mechanism's own certificate is an upper bound on the same quantity at its threshold,
    # and a close one
    p_t = 1 - (1 - F.dg_sf(d.parameter, m.threshold - c)) ** l0
    at_t = F.with_failure(lambda e: F.zcdp_delta(rho, e), epsilon, p_t)
    assert at_t <= m.certified_delta() <= at_t * (1 + 2 * _dg_slack(d.parameter)) + 1e-15


# -- sample and threshold -------------------------------------------------------------------


def _st_threshold(p: Fraction, eps: Fraction, delta: Fraction) -> int:
    """Smallest ``tau`` whose exact per-key delta is at most ``delta`` (Bharadwaj & Cormode 2022,
    Section 3; both directions, every unit count up to beyond the worst one)."""

    def d(tau: int) -> mpmath.mpf:
        return F.sample_threshold_delta(p, tau, eps, int(2 * tau / p) + 20)

    lo, hi = 0, 1  # d(lo) > delta (tau = 0 releases everything)
    while d(hi) > F.mp(delta):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if d(mid) <= F.mp(delta) else (mid, hi)
    return hi


@case(
    "sample-and-threshold",
    (1.0, 1e-6, Neighbouring.add_remove()),
    (1.5, 1e-4, Neighbouring.user(3, 2)),
    (4.0, 1e-3, Neighbouring.replace()),
)
def sample_and_threshold(epsilon: float, delta: float, nb: Neighbouring) -> None:
    m = registry.get("sample-and-threshold")(epsilon, delta, nb)
    l0 = nb.l0_sensitivity
    eps_key = Fraction(epsilon) / l0
    delta_key = Fraction(delta) / l0
    expected: dict[str, int] = {}

    def at_threshold(d: Draw) -> tuple[int, int]:
        tau = _st_threshold(d.parameter, eps_key, delta_key)
        expected["T"] = tau
        return tau - 1, tau

    units = 5000
    data = _counts(40, units * nb.max_contributions_per_partition, nb, units=units)
    with NoiseSpy(_half_script("binomial", at_threshold)).active() as spy:
        rel = m.release(data, SeededRandom(5))
    _only(spy, "binomial")
    (d,) = spy.draws
    p = d.parameter
    # every unit is sampled at the rate the guarantee is for: removing a unit is
    # ln(1 / (1 - p))-DP, so p <= 1 - e^-eps per key (Lemma A), and p is the paper's
    # alpha (1 - e^-eps) with alpha = 1/6 (Section 3.1)
    with mpmath.workdps(40):
        bound = 1 - mpmath.exp(-F.mp(eps_key))
        assert F.mp(p) <= bound
        assert abs(F.mp(p) - bound / 6) <= bound * mpmath.mpf(10) ** -9
    assert (d.extra["trials"] == units).all()
    assert len(rel.keys) == 20 and (rel.values == expected["T"]).all()
    assert m.guarantee().delta <= delta
    # keys with fewer units than the threshold can never be released, and are not drawn; the
    # others are drawn with exactly their units
    tau = expected["T"]
    c = nb.max_contributions_per_partition
    units_list = [tau - 1, tau, tau + 1, 3 * tau]
    data = Counts.from_arrays(
        ["a", "b", "c", "d"], [u * c for u in units_list], units_list, neighbouring=nb
    )
    with NoiseSpy().active() as spy:
        m.release(data, SeededRandom(17))
    (d,) = spy.of("binomial")
    assert sorted(d.extra["trials"].tolist()) == [tau, tau + 1, 3 * tau]


# -- optimal selection and PWS ---------------------------------------------------------------


def _probabilities(d: Draw) -> dict[int, Fraction]:
    """Exact per-index probabilities of a ``compare_table`` draw (256 binary digits)."""
    out = {}
    for j in sorted(set(d.extra["index"].tolist())):
        floor, _ = d.extra["oracle"](j)(256)
        out[j] = Fraction(floor, 1 << 256)
    return out


@case(
    "optimal-selection",
    (1.0, 1e-6, Neighbouring.add_remove(), True),
    (1.0, 1e-6, Neighbouring.user(3, 2), False),
    (0.1, 1e-9, Neighbouring.add_remove(), True),
    (6.0, 1e-3, Neighbouring.replace(), False),
)
def optimal_selection(epsilon: float, delta: float, nb: Neighbouring, keys_only: bool) -> None:
    m = registry.get("optimal-selection")(epsilon, delta, nb, keys_only=keys_only)
    l0 = nb.l0_sensitivity
    frac = Fraction(1) if keys_only else Fraction(0.5)
    eps_sel = Fraction(epsilon) * frac / l0
    delta_key = Fraction(delta) / l0
    pis = F.optimal_pi(eps_sel, delta_key, 400)
    top = next(i for i, p in enumerate(pis) if p >= 1)
    units = list(range(1, top + 3))
    c = nb.max_contributions_per_partition
    data = Counts.from_arrays(
        [f"k{u:04d}" for u in units], [u * c for u in units], units, neighbouring=nb
    )
    with NoiseSpy().active() as spy:
        m.release(data, SeededRandom(6))
    _only(spy, "compare_table", "discrete_laplace")
    (sel,) = spy.of("compare_table")
    probs = _probabilities(sel)
    drawn = [Fraction(0)] + [probs[j] for j in sorted(probs)]
    # the drawn reporting probabilities meet both DP constraints between neighbouring unit
    # counts at the per-key (eps, delta), and are the optimum to within 1e-12
    assert F.dp_constraints_hold(drawn, eps_sel, delta_key)
    # rounding down to the 2**-62 grid loses less than 2**-62 a step, carried forward with a
    # factor e**eps at most (module notes of optimal_selection)
    for u, p in enumerate(drawn):
        slack = (u + 1) * math.exp(float(eps_sel) * u) * 2.0**-61
        assert F.mp(p) <= pis[u] and pis[u] - F.mp(p) <= slack, (u, float(p), pis[u])
    if keys_only:
        assert not spy.of("discrete_laplace")
    else:
        (noise,) = spy.of("discrete_laplace")
        _laplace_scale_ok(noise.parameter, nb.l1_sensitivity, Fraction(epsilon) - eps_sel * l0)
    g = m.guarantee()
    assert g.epsilon <= epsilon and g.delta <= delta


def _token_law(nums: list[int], bits: int, u: int) -> dict[int, Fraction]:
    """PWS with q = 1: the token is ``u - K`` when the shift ``K < u`` (Cohen, Geri, Sarlos &
    Stemmer, Lemma 5.2), ``P[K < k] = nums[k] / 2**bits``; token 0 stands for not reported."""
    one = 1 << bits
    law: dict[int, Fraction] = {}
    for k in range(min(u, len(nums) - 1)):
        law[u - k] = Fraction(nums[k + 1] - nums[k], one)
    law[0] = 1 - sum(law.values(), Fraction(0))
    return law


def _hockey(p: dict[int, Fraction], q: dict[int, Fraction], eps: Fraction) -> mpmath.mpf:
    with mpmath.workdps(60):
        ee = mpmath.exp(F.mp(eps))
        keys = set(p) | set(q)
        return mpmath.fsum(
            max(mpmath.mpf(0), F.mp(p.get(k, 0)) - ee * F.mp(q.get(k, 0))) for k in keys
        )


@case("pws", (1.0, 1e-3, Neighbouring.add_remove()), (0.5, 1e-2, Neighbouring.user(2, 1)))
def pws(epsilon: float, delta: float, nb: Neighbouring) -> None:
    """PWS draws its shift by inversion of one word against its thresholds (no sampler call):
    the thresholds the release applies are read off with scripted words, by bisection over the
    62-bit word, and the law they give is checked DP directly."""
    m = registry.get("pws")(epsilon, delta, nb)
    l0 = nb.l0_sensitivity
    eps_key, delta_key = Fraction(epsilon) / l0, Fraction(delta) / l0
    big = 10**6  # every key is reported whatever the shift; the token reveals the shift
    bound = len(F.optimal_pi(eps_key, delta_key, 400))

    def shifts(words: list[int]) -> list[int]:
        data = Counts.from_arrays(
            [f"k{i:05d}" for i in range(len(words))],
            [big * nb.max_contributions_per_partition] * len(words),
            [big] * len(words),
            neighbouring=nb,
        )
        rel = m.release(data, ScriptedRandom([w << 2 for w in words]))
        assert len(rel.keys) == len(words)
        return [big - int(t) for t in rel.values]

    # smallest 62-bit word with shift >= k, for every k (vectorised bisection)
    lo = [0] * bound
    hi = [1 << 62] * bound
    while any(h - lo_ > 1 for lo_, h in zip(lo, hi, strict=True)):
        mids = [(a + b) // 2 for a, b in zip(lo, hi, strict=True)]
        got = shifts(mids)
        for k in range(bound):
            if got[k] >= k + 1:
                hi[k] = mids[k]
            else:
                lo[k] = mids[k]
    top = shifts([(1 << 62) - 1])[0]
    nums = [0] + [h for h in hi[:top]] + [1 << 62]
    worst = max(
        _hockey(_token_law(nums, 62, u), _token_law(nums, 62, u + 1), eps_key)
        for u in range(0, len(nums) + 1)
    )
    worst = max(
        worst,
        max(
            _hockey(_token_law(nums, 62, u + 1), _token_law(nums, 62, u), eps_key)
            for u in range(0, len(nums) + 1)
        ),
    )
    assert worst <= F.mp(delta_key), f"the drawn token law has delta {worst} > {delta_key}"
    # and it is the optimum: reported with the optimal probabilities to within 1e-12
    pis = F.optimal_pi(eps_key, delta_key, len(nums))
    for u in range(1, len(nums)):
        assert abs(F.mp(Fraction(nums[u], 1 << 62)) - pis[u]) < 1e-12


# -- finite (integer-only) mechanisms --------------------------------------------------------

FINITE = {
    "basic-geometric": dict(domain=[f"k{i:04d}" for i in range(20)], count_bound=50),
    "stability-geometric": dict(count_bound=200),
    "keep-heavy": dict(domain=[f"k{i:04d}" for i in range(20)], count_bound=50, max_keys=5),
    "pure-sparse": dict(universe_bits=16, count_bound=60),
    "sparse": dict(count_bound=60),
    "kh-prime": dict(count_bound=60),
    "compact": dict(universe_bits=16, count_bound=60, max_keys=30),
}


def _finite_kwargs(name: str) -> dict[str, Any]:
    kw = dict(FINITE[name])
    cls = registry.get(name)
    accepted = {o.name for o in cls.options} | {"domain"}
    return {k: v for k, v in kw.items() if k in accepted}


@case(
    "finite",
    *[
        (name, eps, nb)
        for name in FINITE
        for eps, nb in ((0.5, Neighbouring.add_remove()), (0.9, Neighbouring.user(2, 2)))
    ],
)
def finite(name: str, epsilon: float, nb: Neighbouring) -> None:
    """The integer counting samplers' per-record ratio ``1 + s 2**-K`` is what the guarantee
    spends: ``l1 ln(ratio) <= epsilon`` (Balcer & Vadhan, Theorems 4.5, 4.6, 5.1), and the ratio
    drawn is the one the mechanism states."""
    cls = registry.get(name)
    delta = 1e-6 if cls.requires_delta or name in ("sparse", "kh-prime") else 0.0
    m = cls(epsilon, delta, nb, **_finite_kwargs(name))
    keys = (
        list(range(1, 11))
        if "universe_bits" in FINITE[name] or name in ("sparse", "kh-prime")
        else [f"k{i:04d}" for i in range(10)]
    )
    c = nb.max_contributions_per_partition
    data = Counts.from_arrays(keys, [20 * c] * 10, [20] * 10, neighbouring=nb)
    with NoiseSpy().active() as spy:
        m.release(data, SeededRandom(7))
    draws = spy.of("counting_sampler")
    assert draws, f"{name} drew no counting-sampler noise"
    l1 = nb.l1_sensitivity
    with mpmath.workdps(60):
        for d in draws:
            ratio = d.parameter
            assert ratio == m.sampler.ratio  # type: ignore[attr-defined]
            assert l1 * mpmath.log(F.mp(ratio)) <= m.guarantee().epsilon <= epsilon
            sampler = d.extra["sampler"]
            if hasattr(sampler, "gamma"):  # FastSample: the mixture condition of Lemma 3.1
                p = F.mp(sampler.noise.p)
                q = F.mp(sampler.noise.q)
                a = p / q
                t = sampler.width
                n = sampler.n
                gam = F.mp(sampler.gamma)
                if t < n:
                    dmax = (q / p - 1) / (q / p + 1) * gam / (1 - gam) / (n + 1)
                    assert 2 * a ** (t + 1) / (1 + a) <= dmax


# -- weighted user-level selectors -----------------------------------------------------------

#: (epsilon, delta, max_keys, scale, counts)
SELECTOR_SETS = [
    (1.0, 1e-6, 3, 64, False),
    (0.2, 1e-8, 5, 32, True),
    (4.0, 1e-5, 2, 128, False),
]


def _weights(scale: int, max_keys: int) -> list[int]:
    """``w_t = floor(scale / sqrt(t))``: Gopi et al. 2020's ``1/sqrt(t)`` in integer units, so
    that ``t w_t**2 <= scale**2`` (L2 norm at most one unit)."""
    out = []
    for t in range(1, max_keys + 1):
        w = int(scale / math.sqrt(t))
        while t * (w + 1) ** 2 <= scale * scale:
            w += 1
        while t * w * w > scale * scale:
            w -= 1
        out.append(w)
    return out


def _one_key_users(keys: int, holders: int) -> pl.DataFrame:
    """``keys`` keys, each held by ``holders`` users who hold nothing else (weight = scale)."""
    return pl.DataFrame(
        {
            "user": list(range(keys * holders)),
            "key": [f"k{i // holders:04d}" for i in range(keys * holders)],
        }
    )


def _selector_round_script(
    sel: Any, holders: int, cumulative: bool, found: dict[str, Any], first_gauss: int = 0
) -> Callable[[Draw], Any]:
    """Script every round's Gaussian draw: half of the candidates land just below the round's
    smallest admissible threshold (they must stay unreleased) and half on the largest (they must
    be released); counts and caps draw for real. Unreleased candidates share one history, so
    cumulative-sips' running statistics stay equal among them."""
    state = {"gauss": 0, "prev": 0}
    w = sel.scale * holders  # every candidate's weight sum in every round

    def script(d: Draw) -> Any:
        if d.sampler != "discrete_gaussian":
            return None
        r = state["gauss"] - first_gauss
        state["gauss"] += 1
        if r < 0 or r >= sel.rounds:
            return None
        found.setdefault("sigma2s", []).append(d.parameter)
        if cumulative:
            lo, hi = _cumulative_window(sel, found["sigma2s"], r)
            c = sel.combine[r]
            z_below = -((state["prev"] - lo) // c) - 1 - w  # ceil((lo - prev) / c) - 1 - w
            z_at = -((state["prev"] - hi) // c) - w
            state["prev"] += c * (w + z_below)
        else:
            target = sel.delta * sel.threshold_share / sel.rounds
            lo, hi = _gauss_window(d.parameter, _weights(sel.scale, sel.max_keys), target)
            z_below, z_at = lo - 1 - w, hi - w
        found.setdefault("thresholds", []).append(lo)
        half = d.size // 2
        return np.array([z_below] * half + [z_at] * (d.size - half), dtype=np.int64)

    return script


def _cumulative_window(sel: Any, sigma2s: list[Fraction], r: int) -> tuple[int, int]:
    """Round ``r``'s admissible thresholds of cumulative-sips from its module notes, items 2-3:
    ``max_P P Phi_bar((T - C_r w_P - 2 C_r) / sqrt(V_r)) <= target_r``, ``C_r`` and ``V_r`` the
    sums of ``c_j`` and ``c_j**2 sigma2_j`` over the rounds so far, ``target_r`` 80 % of the
    threshold share of delta for the last round and equal parts of the rest before."""
    weights = _weights(sel.scale, sel.max_keys)
    cs = sel.combine[: r + 1]
    big_c = sum(cs)
    var = sum((c * c * s for c, s in zip(cs, sigma2s[: r + 1], strict=True)), Fraction(0))
    p_f = sel.delta * sel.threshold_share
    if sel.rounds == 1:
        target = p_f
    elif r == sel.rounds - 1:
        target = p_f * 0.8
    else:
        target = p_f * 0.2 / (sel.rounds - 1)

    def bound(t: int) -> mpmath.mpf:
        with mpmath.workdps(40):
            sd = mpmath.sqrt(F.mp(var))
            return max(
                p_ * mpmath.ncdf(-(t - big_c * w - 2 * big_c) / sd)
                for p_, w in enumerate(weights, start=1)
            )

    sd = math.sqrt(float(var))
    return _window(bound, target, 1e-9, int(big_c * (max(weights) + 2) + 3 * sd))


def _selector_delta(
    sel: Any,
    sigma2s: list[Fraction],
    thresholds: list[int],
    count_sigma2: Fraction | None,
    spent_rho: Fraction,
) -> mpmath.mpf:
    """The certified delta at the drawn variances and applied thresholds, independently:
    zCDP (CKS Theorem 14, Bun & Steinke Lemma 2.3, CKS Corollary 13) plus the private-key bound
    (Gopi et al. Theorem 5.1 per round, summed); for cumulative-sips also its Gaussian-profile
    route (module notes, item 4), whichever is smaller."""
    weights = _weights(sel.scale, sel.max_keys)
    rho = spent_rho + sum((Fraction(sel.scale**2) / (2 * s) for s in sigma2s), Fraction(0))
    if count_sigma2 is not None:
        rho += Fraction(sel.count_max_keys) / (2 * count_sigma2)
    if getattr(sel, "uses_held_subsets", False):
        p_f = mpmath.mpf(0)
        cs = sel.combine
        for r, t in enumerate(thresholds):
            big_c = sum(cs[: r + 1])
            var = sum(
                (c * c * s for c, s in zip(cs[: r + 1], sigma2s[: r + 1], strict=True)), Fraction(0)
            )
            sd = mpmath.sqrt(F.mp(var))
            p_f += max(
                p_ * mpmath.ncdf(-(t - big_c * w - 2 * big_c) / sd)
                for p_, w in enumerate(weights, 1)
            )
        zc = F.with_failure(lambda e: F.zcdp_delta(rho, e), sel.epsilon, p_f)
        if spent_rho:
            return zc
        l1 = max(t * w for t, w in enumerate(weights, 1))
        mu2 = sum((Fraction(sel.scale**2) / s for s in sigma2s), Fraction(0))
        eta = sum((Fraction(2 * l1) / s for s in sigma2s), Fraction(0))
        if count_sigma2 is not None:
            mu2 += Fraction(sel.count_max_keys) / count_sigma2
            eta += Fraction(2 * sel.count_max_keys) / count_sigma2
        prof = F.with_failure(lambda e: F.gaussian_profile(e - F.mp(eta), mu2), sel.epsilon, p_f)
        return min(zc, prof)
    p_f = mpmath.fsum(
        max(1 - (1 - F.dg_sf(s, t - w)) ** i for i, w in enumerate(weights, 1))
        for s, t in zip(sigma2s, thresholds, strict=True)
    )
    return F.with_failure(lambda e: F.zcdp_delta(rho, e), sel.epsilon, p_f)


def _check_selector_release(
    sel: Any,
    spy: NoiseSpy,
    found: dict[str, Any],
    rel: Any,
    holders: int,
    keys: int,
    spent_rho: Fraction,
    first: int = 0,
) -> None:
    gauss = spy.of("discrete_gaussian")
    rounds = gauss[first : first + sel.rounds]
    sigma2s = [d.parameter for d in rounds]
    assert sigma2s == found["sigma2s"]
    # half the candidates of each round are released: exactly those at the threshold
    per_round = rel.metadata["released_per_round"]
    left = keys
    for r, d in enumerate(rounds):
        assert d.size == left, f"round {r}: {d.size} candidates, expected {left}"
        assert per_round[r] == left - left // 2
        left //= 2
    count_sigma2 = None
    if sel.counts:
        (cnt,) = gauss[first + sel.rounds :]
        count_sigma2 = cnt.parameter
        assert cnt.size == len(rel.keys)
        # the stated split: count_share of the zCDP to the counts, the rest over the rounds in
        # the rounds' fractions (each rounded up to a rational with denominator 2**20)
        rho_c = Fraction(sel.count_max_keys) / (2 * count_sigma2)
        for f, s2 in zip(sel.fractions, sigma2s, strict=True):
            rho_r = Fraction(sel.scale**2) / (2 * s2)
            want = f * (1 - Fraction(sel.count_share)) / Fraction(sel.count_share)
            assert abs(rho_r / rho_c / want - 1) < Fraction(1, 2**16), (rho_r / rho_c, want)
    # the event records the zCDP of exactly these variances (rounded up, never down)
    rho = spent_rho + sum((Fraction(sel.scale**2) / (2 * s) for s in sigma2s), Fraction(0))
    if count_sigma2 is not None:
        rho += Fraction(sel.count_max_keys) / (2 * count_sigma2)
    ev = sel.event()
    assert Fraction(ev.rho) >= rho and Fraction(ev.rho) - rho <= rho * Fraction(1, 10**12)
    certified = _selector_delta(sel, sigma2s, found["thresholds"], count_sigma2, spent_rho)
    assert certified <= sel.delta, f"certified delta {certified} > {sel.delta}"
    # not loose: the calibration uses most of delta (a 10 % larger variance would not)
    assert certified >= 0.5 * sel.delta, f"certified delta {certified} far below {sel.delta}"


@case(
    "weighted",
    *[(name, *s) for name in ("wgm", "dp-sips", "cumulative-sips") for s in SELECTOR_SETS],
)
def weighted(
    name: str, epsilon: float, delta: float, max_keys: int, scale: int, counts: bool
) -> None:
    from privhist.engines.local.weighting import LocalWeightedSource

    cls = registry.weighted_registry()[name]
    sel = cls(epsilon, delta, max_keys=max_keys, scale=scale, counts=counts)
    keys, holders = 64, 3
    found: dict[str, Any] = {}
    cumulative = getattr(sel, "uses_held_subsets", False)
    src = LocalWeightedSource(_one_key_users(keys, holders), SeededRandom(8))
    with NoiseSpy(_selector_round_script(sel, holders, cumulative, found)).active() as spy:
        rel = sel.release_weighted(src, SeededRandom(9))
    _only(spy, "discrete_gaussian")
    _check_selector_release(sel, spy, found, rel, holders, keys, Fraction(0))


@case("weighted", *[(name,) for name in ("wgm", "dp-sips", "cumulative-sips")])
def weighted_auto_cap(name: str) -> None:
    """A cap chosen privately (``auto``): the degree histogram's noise is
    ``1 / (2 rho_q)`` (sensitivity 1; CKS Theorem 14), and the selector's event adds it."""
    from privhist.engines.local.weighting import LocalWeightedSource
    from privhist.mechanisms.user_level.caps import CAP_CANDIDATES, auto_selector

    cls = registry.weighted_registry()[name]
    epsilon, delta = 1.0, 1e-6
    keys, holders = 64, 3
    src = LocalWeightedSource(_one_key_users(keys, holders), SeededRandom(10))
    found: dict[str, Any] = {}
    holder: dict[str, Any] = {}

    def script(d: Draw) -> Any:
        if "sel" not in holder:
            return None
        return holder["script"](d)

    # the selector is only known after the cap is drawn: build the round script lazily
    with NoiseSpy(script).active() as spy:
        original = cls.release_weighted

        def release(self: Any, source: Any, rng: Any = None) -> Any:
            holder["sel"] = self
            holder["script"] = _selector_round_script(
                self, holders, getattr(self, "uses_held_subsets", False), found
            )
            return original(self, source, rng)

        cls.release_weighted = release
        try:
            sel, choice = auto_selector(cls, epsilon, delta, src, rng=SeededRandom(11), scale=64)
            rel = sel.release_weighted(src, SeededRandom(12))
        finally:
            cls.release_weighted = original
    cap = spy.of("discrete_gaussian")[0]
    assert cap.size == len(CAP_CANDIDATES) + 1
    rho_q = Fraction(1) / (2 * cap.parameter)  # what the cap's noise costs
    assert sel.spent_rho >= rho_q and sel.spent_rho - rho_q <= rho_q * Fraction(1, 2**18)
    assert choice.cap == sel.max_keys
    _check_selector_release(sel, spy, found, rel, holders, keys, sel.spent_rho, first=1)


# -- the session: what is charged covers what is drawn ----------------------------------------


@case("session", ("stability",), ("gaussian-threshold",), ("cumulative-sips",))
def session_auto_caps(mechanism: str) -> None:
    """A release whose cap is chosen privately inside the spend: the ledger's recorded event
    covers the cap's noise and the release's."""
    from privhist import Budget, Session

    frame = pl.DataFrame(
        {
            "user": [u for u in range(600) for _ in range(2)],
            "key": [f"k{(u + j) % 40:03d}" for u in range(600) for j in range(2)],
        }
    )
    with Session.in_memory(Budget(epsilon=4.0, delta=1e-5), unit="user") as s:
        with NoiseSpy().active() as spy:
            rel = s.histogram(
                frame,
                key="key",
                user="user",
                max_partitions="auto",
                epsilon=1.0,
                delta=1e-6,
                mechanism=mechanism,
            )
        release_meta = rel.metadata
        (spend,) = s.status().spends  # type: ignore[union-attr]
        event = spend.privacy_event
    if mechanism == "cumulative-sips":
        cap, *rest = spy.of("discrete_gaussian")
        assert cap.size == 13  # the degree histogram over the public cap candidates
        rounds, counts = rest[:-1], rest[-1]
        rel_params = release_meta["parameters"]
        scale, k_c = rel_params["scale"], rel_params["count_max_keys"]
        drawn = (
            Fraction(1) / (2 * cap.parameter)
            + sum((Fraction(scale * scale) / (2 * d.parameter) for d in rounds), Fraction(0))
            + Fraction(k_c) / (2 * counts.parameter)
        )
        # the recorded event bounds the cap's zCDP plus every round's and the counts'
        assert Fraction(event.rho) >= drawn  # type: ignore[attr-defined]
        return
    (cap, noise) = spy.draws
    assert cap.sampler == "discrete_laplace" and cap.size == 13
    # 5 % of epsilon buys the cap: sensitivity 1 (one bucket per user)
    _laplace_scale_ok(cap.parameter, 1, 0.05)
    # the release runs at the rest, with the cap it drew
    k = release_meta["cap"]["max_partitions"]
    eps_mech = release_meta["mechanism_guarantee"]["epsilon"]
    assert Fraction(eps_mech) + Fraction(0.05) <= Fraction(1.0)
    if mechanism == "stability":
        _laplace_scale_ok(noise.parameter, k, eps_mech)
    else:
        assert noise.sampler == "discrete_gaussian"
        assert release_meta["parameters"]["sigma2"] == str(noise.parameter)
        rho = Fraction(k) / (2 * noise.parameter)  # L2 sensitivity sqrt(k) (c = 1)
        assert F.zcdp_delta(rho, eps_mech + math.log(1 - 0.5e-6)) <= 0.5e-6
    # what is charged covers both parts, and no more than was asked
    charged = spend.budget
    assert charged.epsilon >= 0.05 + eps_mech - 1e-12
    assert charged.epsilon <= 1.0 + 1e-12 and charged.delta <= 1e-6


# -- federated encoders ----------------------------------------------------------------------


def _cpbm_rdp(n: int, theta: Fraction, m: int, dim: int, order: int) -> mpmath.mpf:
    """Lemma 2 of the federated-frequency paper (Appendix C.2): ``m D / (lambda - 1) log
    max(Pi_1, Pi_2)`` with ``A = Bernoulli(1/2 - theta) + Binomial(n', 1/2 + theta)`` and
    ``B = Binomial(n' + 1, 1/2 + theta)``, ``n' = ceil((n - 1) / 2)``: the Renyi moments of the
    worst pair, computed exactly from the two laws."""
    npr = -(-(n - 1) // 2)
    q = Fraction(1, 2) + theta
    b = F.binomial_pmf(npr + 1, q)
    inner = F.binomial_pmf(npr, q)
    a = [Fraction(0)] * (npr + 2)
    for k, pk in enumerate(inner):  # the Bernoulli(1 - q) is 1 with probability 1 - q
        a[k] += pk * q
        a[k + 1] += pk * (1 - q)
    with mpmath.workdps(60):
        pi1 = mpmath.fsum(
            F.mp(bk) * (F.mp(ak) / F.mp(bk)) ** order for ak, bk in zip(a, b, strict=True)
        )
        pi2 = mpmath.fsum(
            F.mp(ak) * (F.mp(bk) / F.mp(ak)) ** order for ak, bk in zip(a, b, strict=True)
        )
        return m * dim * mpmath.log(max(pi1, pi2)) / (order - 1)


@case("cpbm", (Fraction(1, 5), 30, 4, 9), (Fraction(1, 4), 100, 3, 5))
def cpbm(theta: Fraction, m: int, dim: int, n_users: int) -> None:
    from privhist.federated.cpbm import Cpbm

    clip = 2.0
    mech = Cpbm(theta=float(theta), m=m, clip=clip, dimension=dim, n_users=n_users)
    y = np.zeros((n_users, dim))
    y[0, 0] = clip  # on the clipping sphere: the largest probability
    y[1, 0] = -3 * clip  # beyond it: clipped to -clip, the smallest
    y[2, :] = 0.1
    with NoiseSpy().active() as spy:
        mech.encode(y, SeededRandom(13))
    draws = spy.of("cpbm_binomial")
    assert draws
    one = 1 << 32
    for d in draws:
        assert d.extra["trials"] == m and d.extra["bits"] == 32
    nums = np.concatenate([d.extra["numerators"] for d in draws]).reshape(n_users, dim)
    half_width = int(theta * one)  # theta is exactly representable here
    # every probability lies in [1/2 - theta, 1/2 + theta], the range Lemma 2 is for, and the
    # clipped extremes reach both ends (so a smaller theta in the accounting would be wrong)
    assert (np.abs(nums - one // 2) <= half_width).all()
    assert nums[0, 0] == one // 2 + half_width and nums[1, 0] == one // 2 - half_width
    # the event is Lemma 2's curve at the encoder's (n, theta, m, D)
    ev = mech.event()
    for order, value in zip(ev.orders, ev.values, strict=True):
        if order in (2, 4, 8, 16):
            expected = _cpbm_rdp(n_users, theta, m, dim, int(order))
            assert value >= expected * (1 - 1e-9) and value <= expected * (1 + 1e-6), order


@case("cpbm", (Fraction(1, 5), 30, 3, "dht"), (Fraction(1, 4), 20, 2, "flat"))
def federated_quantile(theta: Fraction, m: int, bits: int, scheme: str) -> None:
    """The quantile encoder (cPBM at ``C = 1`` on entries in {-1, 0, 1}): probabilities ``1/2``
    and ``1/2 +- theta``, and the event is Lemma 2 over the coordinates actually sent."""
    from privhist.federated.dht import FederatedQuantile

    n_users = 7
    fq = FederatedQuantile(
        upper=8.0, bits=bits, theta=float(theta), m=m, n_users=n_users, scheme=scheme
    )
    with NoiseSpy().active() as spy:
        out = fq.encode(np.linspace(0.0, 7.9, n_users), SeededRandom(14))
    (d,) = spy.of("cpbm_binomial")
    one, hw = 1 << 32, int(theta * (1 << 32))
    assert d.extra["trials"] == m and d.extra["bits"] == 32
    nums = np.asarray(d.extra["numerators"]).ravel()
    assert set(np.unique(nums).tolist()) <= {
        one // 2 - hw,
        one // 2,
        one // 2 + hw,
    }
    assert hw in set(np.abs(nums - one // 2).tolist())
    dim = out.shape[1]
    assert dim == fq.dimension
    ev = fq.rdp().to_event()
    for order, value in zip(ev.orders, ev.values, strict=True):
        if order in (2, 8):
            expected = _cpbm_rdp(n_users, theta, m, dim, int(order))
            assert expected * (1 - 1e-9) <= value <= expected * (1 + 1e-6), order


@case("hadamard", 0.5, 2.0)
def hadamard_response(epsilon: float) -> None:
    """Hadamard response (the federated baselines): a report falls in the item's half of the
    codes with probability ``r / (1 + r)`` for a rational ``r <= e**epsilon`` (the local
    randomizer is ``ln r``-DP), and the event states ``ln r``."""
    from privhist.federated.baselines.hadamard import HadamardResponse

    hr = HadamardResponse(epsilon, 16)
    with NoiseSpy().active() as spy:
        hr.encode(np.arange(16) % 16, SeededRandom(15))
    (d,) = spy.of("bernoulli_rational")
    with mpmath.workdps(60):
        e = mpmath.exp(mpmath.mpf(epsilon))
        r = d.parameter / (1 - d.parameter)
        assert F.mp(r) <= e and e - F.mp(r) <= e * mpmath.mpf(2) ** -18
        assert mpmath.log(F.mp(r)) <= hr.event().epsilon <= epsilon


@case("sample-and-threshold", (1.0, 1e-6), (3.0, 1e-4))
def federated_sample_and_threshold(epsilon: float, delta: float) -> None:
    """A federated round samples clients at the central mechanism's rate (whose guarantee the
    central case checks) and releases exactly the items whose sampled count reaches its
    threshold."""
    from privhist.federated.population import Population
    from privhist.federated.sample_threshold import simulate_round

    m = registry.get("sample-and-threshold")(epsilon, delta)
    eps_key, delta_key = Fraction(epsilon), Fraction(delta)
    expected: dict[str, int] = {}

    def at_threshold(d: Draw) -> tuple[int, int]:
        tau = _st_threshold(d.parameter, eps_key, delta_key)
        expected["T"] = tau
        return tau - 1, tau

    population = Population.from_counts([f"i{j:03d}" for j in range(30)], [4000] * 30)
    with NoiseSpy(_half_script("binomial", at_threshold)).active() as spy:
        result = simulate_round(population, m, SeededRandom(16))
    (d,) = spy.of("binomial")
    assert d.parameter == m.sampling_rate
    with mpmath.workdps(40):
        assert F.mp(d.parameter) <= 1 - mpmath.exp(-F.mp(eps_key))
    assert len(result.release.keys) == 15
    assert (result.release.values == expected["T"]).all()


# -- aggregation metrics ----------------------------------------------------------------------

#: the aggregation settings: (user level, public groups, epsilon, delta, k, c, an automatic bound)
AGG_SETTINGS: dict[str, tuple[bool, bool, float, float, int, int, bool]] = {
    "laplace": (False, True, 1.0, 0.0, 1, 1, False),
    "gaussian": (False, True, 1.0, 1e-6, 1, 1, False),
    "small-epsilon": (False, True, 0.02, 1e-9, 1, 1, False),
    "auto-bound": (False, True, 1.0, 1e-6, 1, 1, True),
    "auto-laplace": (False, True, 1.0, 0.0, 1, 1, True),
    "record-private": (False, False, 1.0, 1e-6, 1, 1, False),
    "user-laplace": (True, True, 1.0, 0.0, 3, 2, False),
    "user": (True, True, 1.0, 1e-6, 3, 2, False),
    "user-private": (True, False, 2.0, 1e-5, 2, 2, False),
    # Laplace noise asked for although delta > 0: public groups, and record-level private groups
    # (the selection then takes all of delta)
    "delta-laplace": (False, True, 1.0, 1e-6, 1, 1, False),
    "record-private-laplace": (False, False, 1.0, 1e-6, 1, 1, False),
    # user level, groups chosen by optimal selection per group (epsilon_s / k, delta / k)
    "user-private-laplace": (True, False, 2.0, 1e-5, 2, 2, False),
}


def _agg_noise(setting: str) -> str:
    """The noise a setting asks for: Laplace without delta or when named, else Gaussian."""
    delta = AGG_SETTINGS[setting][3]
    return "laplace" if delta == 0 or setting.endswith("laplace") else "gaussian"


_AGG_GROUPS = [f"g{i}" for i in range(6)]
#: a value column's public bounds (asymmetric, so that a sum's largest |value| is the upper one)
_AGG_LO, _AGG_HI = -10.0, 30.0


def _agg_metric(kind: str, auto: bool) -> Any:
    from privhist import metrics

    upper: Any = "auto" if auto else _AGG_HI
    if kind == "count":
        return metrics.count()
    if kind == "count_users":
        return metrics.count_users()
    if kind == "quantiles":
        return metrics.quantiles("x", [0.25, 0.5, 0.9], _AGG_LO, upper, method="tree")
    maker = {"sum": metrics.sum, "mean": metrics.mean, "variance": metrics.variance}[kind]
    return maker("x", _AGG_LO, upper)


def _agg_frame(user_level: bool, heavy: bool) -> pl.DataFrame:
    """400 units per group, values spread beyond the bounds (clamping is exercised); user level:
    each user holds at most 2 groups with at most 2 records each (never bounded), and with
    ``heavy`` one more user holds every group with 5 records each at a value far above the
    upper bound (bounded to k groups and c records, each at the clamp)."""
    rng = np.random.default_rng(5)
    users: list[int] = []
    groups: list[str] = []
    values: list[float] = []
    for i, g in enumerate(_AGG_GROUPS):
        for j in range(400):
            uid = i * 1000 + j
            for _ in range(1 + (j % 2 if user_level else 0)):
                users.append(uid)
                groups.append(g)
                values.append(float(rng.uniform(-15.0, 35.0)))
    if heavy:  # record level: one record more
        for g in _AGG_GROUPS if user_level else _AGG_GROUPS[:1]:
            for _ in range(5 if user_level else 1):
                users.append(-1)
                groups.append(g)
                values.append(1e6)
    return pl.DataFrame({"u": users, "g": groups, "x": values})


def _agg_sensitivities(kind: str, spec: Any, c: int) -> list[tuple[str, Fraction, Fraction]]:
    """``(aggregate, L2, L1)`` per noisy aggregate of one group, derived here from what one user
    (``c`` records clamped to ``[L, H]`` units) changes: records ``c``; users ``1``; a sum
    ``c max(|L|, |H|)``; values ``c``, a centred sum ``c M`` and centred squares ``c M**2`` with
    ``M`` the largest distance of ``[L, H]`` from its centre ``m = floor((L + H) / 2)``; the
    quantile tree a count at each of its 4 levels (``L2 = c sqrt(4)``, ``L1 = 4 c``)."""
    if kind == "count":
        return [("records", Fraction(c), Fraction(c))]
    if kind == "count_users":
        return [("users", Fraction(1), Fraction(1))]
    lo, hi = spec.low, spec.high
    if kind == "sum":
        s = Fraction(c * max(abs(lo), abs(hi)))
        return [("sum", s, s)]
    if kind == "quantiles":
        return [("tree", Fraction(2 * c), Fraction(4 * c))]
    mid = (lo + hi) // 2
    big_m = max(hi - mid, mid - lo)
    out = [("n", Fraction(c), Fraction(c)), ("sum", Fraction(c * big_m), Fraction(c * big_m))]
    if kind == "variance":
        out.append(("squares", Fraction(c * big_m**2), Fraction(c * big_m**2)))
    return out


def _agg_table(frame: pl.DataFrame, agg: Any, user_level: bool, specs: list[Any]) -> Any:
    from privhist.core.requests import Fields, GroupAggregates
    from privhist.engines import LocalEngine

    fields = Fields(key="g", user="u" if user_level else None)
    request = GroupAggregates(
        fields,
        max_partitions=agg.max_partitions,
        max_per_partition=agg.max_per_partition,
        groups=tuple(_AGG_GROUPS),
        values=tuple(specs),
    )
    return LocalEngine().compute(frame, request, SeededRandom(3))


def _agg_component(table: Any, what: str, spec: Any) -> npt.NDArray[np.int64]:
    if what == "records":
        return np.asarray(table.records, dtype=np.int64)
    if what == "users":
        return np.asarray(table.users, dtype=np.int64)
    parts = table.values[spec.name]
    return np.asarray(parts[what], dtype=np.int64)


@case(
    "count",
    *[(s,) for s in AGG_SETTINGS if not s.startswith("auto")],
)
def aggregation_count(setting: str) -> None:
    _aggregation_contract("count", setting)


@case("count_users", *[(s,) for s in AGG_SETTINGS if s.startswith("user")])
def aggregation_count_users(setting: str) -> None:
    _aggregation_contract("count_users", setting)


@case("sum", *[(s,) for s in AGG_SETTINGS])
def aggregation_sum(setting: str) -> None:
    _aggregation_contract("sum", setting)


@case("mean", *[(s,) for s in AGG_SETTINGS])
def aggregation_mean(setting: str) -> None:
    _aggregation_contract("mean", setting)


@case("variance", *[(s,) for s in AGG_SETTINGS])
def aggregation_variance(setting: str) -> None:
    _aggregation_contract("variance", setting)


@case("quantiles", *[(s,) for s in AGG_SETTINGS])
def aggregation_quantiles(setting: str) -> None:
    _aggregation_contract("quantiles", setting)


#: settings (public groups) for quantiles drawn by selection, one draw per group and level
EM_SETTINGS = ("laplace", "gaussian", "small-epsilon", "user-laplace", "user", "delta-laplace")


@case("quantiles", *[(s,) for s in EM_SETTINGS])
def aggregation_quantiles_by_selection(setting: str) -> None:
    """Quantiles by ``method="exponential"``: permute-and-flip with Laplace noise, the
    exponential mechanism with Gaussian noise. Every draw's ``gamma`` is ``epsilon_g / (2 c
    Delta)`` with ``Delta = 2 max(a, d - a)`` for ``q = a / d`` (derived here: the score is ``2 d``
    times the target rank's distance to the middle of a candidate's ranks), ``epsilon_g`` the
    accounted one; the ``k L`` draws a user reaches compose to the metric's budget (Laplace:
    ``k L epsilon_g``; Gaussian: ``k L epsilon_g**2 / 8`` zCDP) with little to spare; one draw
    per group and level, each over the range's units."""
    from privhist import Session, metrics

    user_level, public, eps, delta, k, c, _ = AGG_SETTINGS[setting]
    assert public
    levels = [0.25, 0.5, 0.9]
    metric = metrics.quantiles("x", levels, _AGG_LO, _AGG_HI, resolution=1, method="exponential")
    noise = _agg_noise(setting)
    kwargs: dict[str, Any] = dict(
        by="g", metrics={"m": metric}, epsilon=eps, delta=delta, noise=noise
    )
    kwargs["partitions"] = _AGG_GROUPS
    if user_level:
        kwargs.update(user="u", max_partitions=k, max_per_partition=c)
    with NoiseSpy().active() as spy:
        rel = Session().aggregate(_agg_frame(user_level, heavy=False), seed=4, **kwargs)
    gaussian = noise == "gaussian"
    name = "exponential" if gaussian else "permute_and_flip"
    draws = spy.of(name)
    other = spy.of("permute_and_flip" if gaussian else "exponential")
    assert draws and not other
    assert not spy.of("discrete_laplace") and not spy.of("discrete_gaussian")
    agg = _aggregation_of(kwargs)
    ((comp, eps_g),) = agg.noise_parameters()
    assert comp.what == "exponential"
    g = len(rel.keys)
    per_level = len(draws) // len(levels)
    assert per_level * len(levels) == len(draws)
    assert sum(d.size for d in draws) == g * len(levels)  # one draw per group and level
    units = int(_AGG_HI - _AGG_LO) + 1
    for i, q in enumerate(levels):
        level = Fraction(q).limit_denominator(10**4)
        sens = 2 * max(level.numerator, level.denominator - level.numerator)
        for d in draws[i * per_level : (i + 1) * per_level]:
            assert d.parameter == eps_g / (2 * c * sens), (q, d.parameter)
            assert int(d.extra["sizes"].sum()) == units * d.size  # every unit a candidate
    draws_per_user = k * len(levels)
    if gaussian:
        spent, budget = draws_per_user * eps_g**2 / 8, agg.rho_m
    else:
        spent, budget = draws_per_user * eps_g, Fraction(agg.eps_m)
    assert spent <= budget, (spent, budget)
    assert spent >= budget * (1 - Fraction(1, 10**6)), (spent, budget)
    stated = rel.metadata["guarantee"]
    assert stated["epsilon"] <= eps and stated["delta"] <= delta


def _aggregation_contract(kind: str, setting: str) -> None:
    """One metric released by ``Session.aggregate``: the noise of every aggregate drawn at the
    variance (scale) its guarantee was computed from, that noise enough for what one user changes
    (measured on the engine's bounded aggregates with and without a user far above the caps,
    and derived here), and the parts adding up to the guarantee by CKS Corollary 13 recomputed
    in high precision (Laplace: basic composition), with little to spare."""
    from privhist import Session
    from privhist.analytics.aggregate import AUTO_GRID

    user_level, public, eps, delta, k, c, auto = AGG_SETTINGS[setting]
    metric = _agg_metric(kind, auto)
    frame = _agg_frame(user_level, heavy=False)
    kwargs: dict[str, Any] = dict(
        by="g", metrics={"m": metric}, epsilon=eps, delta=delta, noise=_agg_noise(setting)
    )
    if user_level:
        kwargs.update(user="u", max_partitions=k, max_per_partition=c)
    if public:
        kwargs["partitions"] = _AGG_GROUPS
    with NoiseSpy().active() as spy:
        rel = Session().aggregate(frame, seed=21, **kwargs)
    assert isinstance(rel, Release)
    draws = spy.of("discrete_gaussian") + spy.of("discrete_laplace")
    gaussian = kwargs["noise"] == "gaussian"
    assert rel.metadata["noise"] == kwargs["noise"]
    noisy = "discrete_gaussian" if gaussian else "discrete_laplace"
    assert all(d.sampler == noisy for d in draws), [d.sampler for d in draws]
    g = len(rel.keys)
    assert g >= (6 if public else 4)  # 400 units per group: private groups are released too
    # the Aggregation the release was built from (the same calibration: parameters only)
    agg = _aggregation_of(kwargs)
    chosen: dict[str, Any] = {}
    spent = Fraction(0)  # zCDP rho (Gaussian) or epsilon (Laplace) of the draws checked here
    budget = agg.rho_m if gaussian else Fraction(agg.eps_m)
    used = list(draws)
    if auto:  # the automatic bound's histogram: one count per grid bucket, sensitivity 1
        d0 = used.pop(0)
        assert d0.size == len(AUTO_GRID) + 1
        spent += 1 / (2 * d0.parameter) if gaussian else 1 / d0.parameter
        lo, hi = rel.metadata["metrics"]["m"]["lower"], rel.metadata["metrics"]["m"]["upper"]
        assert hi in AUTO_GRID and hi >= 16  # most values lie below 35
        chosen = {"m": (lo, hi)}
    specs = agg._specs(chosen)
    spec = specs[0] if specs else None
    if spec is not None:  # the clamp in units, from the public bounds and the resolution
        r = Fraction(repr(spec.resolution))
        lo_b, hi_b = chosen.get("m", (_AGG_LO, _AGG_HI))
        assert spec.low == math.ceil(Fraction(lo_b) / r)
        assert spec.high == math.floor(Fraction(hi_b) / r)
        assert rel.metadata["metrics"]["m"]["clamped_to_units"] == [spec.low, spec.high]
    parts = _agg_sensitivities(kind, spec, c)
    # record level, private groups, Laplace noise, fixed bounds: the stability selection counts
    # the column's values per group and its noisy count is the metric's count, so a mean or
    # variance draws no count, and a lone sum (selection and sum at half of epsilon each) is its
    # centred sum plus the middle times that count when M**2 + m**2 < max(|L|, |H|)**2
    free = not (public or user_level or gaussian or auto) and kind in ("sum", "mean", "variance")
    parts_n: list[tuple[str, Fraction, Fraction]] = []  # the selection's count, when it is reused
    if free:
        assert spec is not None
        mid = (spec.low + spec.high) // 2
        big_m = max(spec.high - mid, mid - spec.low)
        if kind == "sum":
            assert big_m**2 + mid**2 < max(abs(spec.low), abs(spec.high)) ** 2
            parts = [("centred", Fraction(c * big_m), Fraction(c * big_m))]
        else:
            parts = [p for p in parts if p[0] != "n"]
    if kind == "quantiles" and spec is not None:
        # the tree's noise is drawn lazily, one batch of children per level of the descent:
        # every batch at the tree's parameter, whole sets of children, at most every node once
        levels, b = spec.tree or (0, 1)
        tree_param = agg.noise_parameters(chosen)[-1][1]
        batches = []
        while used and used[-1].parameter == tree_param:
            batches.insert(0, used.pop())
        asked = len(metric.levels)  # one descent per level asked, sharing the nodes it reads
        assert len(batches) <= levels * asked and all(d.size % b == 0 for d in batches)
        assert g * b <= sum(d.size for d in batches) <= min(g * spec.nodes, g * levels * b * asked)
        used.append(dataclasses.replace(batches[0], size=g * spec.nodes))
    metric_draws = used[-len(parts) :]
    selection_draws = used[: len(used) - len(parts)]
    if public:
        assert not selection_draws
    elif free:  # one discrete Laplace count per group present, at the selection's epsilon
        from privhist.mechanisms.stability import StabilityHistogram

        sel = agg._selector
        assert isinstance(sel, StabilityHistogram)
        assert Fraction(sel.epsilon) + Fraction(agg.eps_m) == Fraction(eps)
        (d_s,) = selection_draws
        assert d_s.sampler == "discrete_laplace" and d_s.size == len(_AGG_GROUPS)
        _laplace_scale_ok(d_s.parameter, c, sel.epsilon)
        parts_n = [("n", Fraction(c), Fraction(c))]  # checked on the engine's table below
    elif not user_level or not gaussian:  # optimal partition selection draws no such noise
        assert not selection_draws
    else:  # cumulative-sips' rounds (its own case checks them) at the metrics' zCDP budget
        assert agg._selector.spent_rho == agg.rho_m
        assert len(selection_draws) == agg._selector.rounds + (
            agg._selector.count_sigma2 is not None
        )
    accounted = agg.noise_parameters(chosen)
    assert [p for _, p in accounted] == [d.parameter for d in metric_draws]
    nodes = spec.nodes if kind == "quantiles" and spec is not None else 1
    for (what, l2, l1), d, comp in zip(
        parts, metric_draws, rel.metadata["components"], strict=True
    ):
        assert d.size == g * nodes, (what, d.size, g, nodes)
        assert comp["aggregate"] == what
        assert comp["sigma2" if gaussian else "scale"] == float(d.parameter)
        spent += k * l2 * l2 / (2 * d.parameter) if gaussian else k * l1 / d.parameter
    # what one user changes, on the engine's bounded aggregates: at most (and here exactly) the
    # sensitivities above, over at most k groups
    with_heavy = _agg_frame(user_level, heavy=True)
    t0 = _agg_table(frame, agg, user_level, specs)
    t1 = _agg_table(with_heavy, agg, user_level, specs)
    for what, l2, l1 in parts + parts_n:
        raw = "sum" if what == "centred" else what
        diff = _agg_component(t1, raw, spec) - _agg_component(t0, raw, spec)
        if what == "centred" or (what == "sum" and kind in ("mean", "variance")):
            assert spec is not None
            n_diff = _agg_component(t1, "n", spec) - _agg_component(t0, "n", spec)
            diff = diff - spec.center * n_diff  # the release adds noise to the centred sum
        changed = int((diff.reshape(len(_AGG_GROUPS), -1) != 0).any(axis=1).sum())
        assert changed == k, (what, changed)
        assert Fraction(int((diff.astype(object) ** 2).sum())) == k * l2 * l2, what
        assert Fraction(int(np.abs(diff).sum())) == k * l1, what
    # the parts add up to the budget, and the budget to the guarantee
    assert spent <= budget, (spent, budget)
    assert spent >= budget * (1 - Fraction(1, 10**6)), (spent, budget)
    stated = rel.metadata["guarantee"]
    assert stated["epsilon"] <= eps and stated["delta"] <= delta
    if not gaussian:
        if public:
            assert agg.eps_m == eps
        else:  # optimal selection at half of epsilon and all of delta, the metrics the rest
            sel = agg._selector
            assert Fraction(sel.delta) == Fraction(delta) and stated["delta"] == delta
            assert Fraction(agg.eps_m) + Fraction(sel.epsilon) == Fraction(eps)
            # at user level each group's selection runs at a k-th of (epsilon_s, delta)
            assert sel.neighbouring.l0_sensitivity == k
        return
    if public:
        assert F.zcdp_delta(spent, eps) <= delta
        assert F.zcdp_delta(budget * Fraction(1001, 1000), eps) > delta  # little to spare
    elif not user_level:  # optimal selection at half of (epsilon, delta), the metrics the rest
        sel = agg._selector
        eps_m, dl_m = Fraction(eps) - Fraction(sel.epsilon), Fraction(delta) - Fraction(sel.delta)
        assert eps_m > 0 and dl_m > 0
        assert F.zcdp_delta(spent, float(eps_m)) <= dl_m
        # the two parts the ledger composes use the whole budget when its halves are exact
        parts = [leaf for leaf, _ in agg.event()._leaves()]
        assert sum((Fraction(p.epsilon) for p in parts), Fraction(0)) == Fraction(eps)
        assert sum((Fraction(p.delta) for p in parts), Fraction(0)) == Fraction(delta)
    else:
        sel = agg._selector
        cert = _selector_delta(sel, sel.sigma2s, sel.thresholds, sel.count_sigma2, spent)
        assert cert <= delta, (cert, delta)


def _aggregation_of(kwargs: dict[str, Any]) -> Any:
    from privhist.analytics.aggregate import Aggregation

    partitions = kwargs.get("partitions")
    return Aggregation(
        kwargs["metrics"],
        ("g",),
        kwargs["epsilon"],
        kwargs["delta"],
        "user" in kwargs,
        max_partitions=kwargs.get("max_partitions", 1),
        max_per_partition=kwargs.get("max_per_partition", 1),
        partitions=None if partitions is None else tuple((p,) for p in partitions),
        noise=kwargs["noise"],
    )


# -- coverage ---------------------------------------------------------------------------------


def _covered(name: str) -> bool:
    """Whether some case covers the registered releasable ``name``."""
    kinds = {c.covers for c in CASES}
    return (
        name in kinds
        or (name in FINITE and "finite" in kinds)
        or (name in registry.weighted_registry() and "weighted" in kinds)
    )


def _registered() -> list[str]:
    """Every registered releasable: mechanisms, weighted selectors and the aggregation metrics
    (the kinds :mod:`privhist.metrics` builds, :data:`privhist.core.metrics.KINDS`)."""
    from privhist.core.metrics import KINDS

    return [*registry.names(), *registry.weighted_registry(), *KINDS]


def test_every_releasable_has_a_case() -> None:
    """A releasable registered without an entry here fails: add one (a function decorated with
    :func:`case`, covering its registered name)."""
    missing = [n for n in _registered() if not _covered(n)]
    assert not missing, f"no noise-spy case for {missing}: add one to tests/contracts"


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_release_draws_the_noise_its_guarantee_is_for(c: Case) -> None:
    c.run()


def test_the_spy_sees_a_release_path_that_draws_less_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Power check: a stability release whose sampler call is scaled by 0.9 (the defect the
    law tests could not see) fails the scale check."""
    from privhist.mechanisms import _noise

    original = _noise.LaplaceCountNoise.above

    def weaker(self: Any, counts: Any, threshold: int, rng: Any) -> Any:
        from privhist.noise.laplace import laplace_threshold

        return laplace_threshold(self.scale * Fraction(9, 10), counts, threshold, rng)

    monkeypatch.setattr(_noise.LaplaceCountNoise, "above", weaker)
    with pytest.raises(AssertionError, match=r"spends|threshold|released"):
        stability(1.0, 1e-6, Neighbouring.add_remove())
    monkeypatch.setattr(_noise.LaplaceCountNoise, "above", original)


def test_the_aggregation_contract_sees_less_noise_and_a_loose_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Power checks: an aggregation drawing 0.9 of the variance it accounts for fails, and so
    does an engine keeping k + 1 groups per user (the guarantee would then be for less than one
    user changes)."""
    import dataclasses

    from privhist.analytics.aggregate import Aggregation
    from privhist.engines.local import aggregate as local_aggregate

    noisy = Aggregation._noisy

    def weaker(self: Any, values: Any, param: Fraction, rng: Any) -> Any:
        return noisy(self, values, param * Fraction(9, 10), rng)

    with monkeypatch.context() as patch:
        patch.setattr(Aggregation, "_noisy", weaker)
        with pytest.raises(AssertionError):
            _aggregation_contract("mean", "gaussian")
    _aggregation_contract("mean", "gaussian")  # unpatched, the same case passes
    bound = local_aggregate.bound

    def looser(df: Any, request: Any, n_specs: int, prio: Any, coder: Any = None) -> Any:
        wider = dataclasses.replace(request, max_partitions=request.max_partitions + 1)
        return bound(df, wider, n_specs, prio, coder)

    monkeypatch.setattr(local_aggregate, "bound", looser)
    with pytest.raises(AssertionError, match="records"):
        _aggregation_contract("count", "user")


def test_the_selection_contract_sees_a_larger_gamma_and_the_wrong_mechanism(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Power checks for quantiles drawn by selection: blocks scored with half the sensitivity
    (gamma doubled, less randomness than accounted) fail, and so does the exponential mechanism
    drawn where the release states permute-and-flip."""
    from privhist.analytics import aggregate

    blocks = aggregate.em_blocks

    def halved(*args: Any) -> Any:
        scores, sizes, first, sens = blocks(*args)
        return scores, sizes, first, Fraction(sens, 2)

    with monkeypatch.context() as patch:
        patch.setattr(aggregate, "em_blocks", halved)
        with pytest.raises(AssertionError):
            aggregation_quantiles_by_selection("user-laplace")
    with monkeypatch.context() as patch:
        patch.setattr(aggregate.Aggregation, "_flip", lambda self: False)
        with pytest.raises(AssertionError):
            aggregation_quantiles_by_selection("laplace")
    aggregation_quantiles_by_selection("user-laplace")  # unpatched, the cases pass
    aggregation_quantiles_by_selection("laplace")
