"""OrdSample (Algorithm 6, read with ties) against brute force, and the truncated sampler of
Theorem 6.5 against its error analysis.

The truth is computed independently: every tuple of ``m`` i.i.d. draws enumerated, sorted, its top
``n + 1`` kept. The samplers' deterministic steps are enumerated over every uniform ``u``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import SeededRandom, ValidationError
from privhist.mechanisms.finite.geometric import FastSample, GeoSample
from privhist.mechanisms.finite.ordsample import (
    OrdSample,
    _mul,
    _pow,
    _ratio,
    precision_for,
)


def brute_force(pmf: list[Fraction], m: int, top: int) -> dict[tuple[int, ...], Fraction]:
    out: dict[tuple[int, ...], Fraction] = {}
    for values in itertools.product(range(len(pmf)), repeat=m):
        prob = Fraction(1)
        for x in values:
            prob *= pmf[x]
        key = tuple(sorted(values, reverse=True)[:top])
        out[key] = out.get(key, Fraction(0)) + prob
    return out


def printed_lemma_2_9(cdf: list[int], m: int) -> dict[tuple[int, ...], Fraction]:
    """Algorithm 6 exactly as printed: v_i from the CDF (F(z)/F(v_{i-1}))**(m - i)."""
    n = len(cdf) - 1
    out: dict[tuple[int, ...], Fraction] = {}

    def rec(i: int, prev: int, prefix: tuple[int, ...], prob: Fraction) -> None:
        if i > n:
            out[prefix] = out.get(prefix, Fraction(0)) + prob
            return
        e = m - i
        for z in range(prev + 1):
            lower = Fraction(cdf[z - 1], cdf[prev]) ** e if z > 0 else Fraction(0)
            p = Fraction(cdf[z], cdf[prev]) ** e - lower
            if p:
                rec(i + 1, z, (*prefix, z), prob * p)

    rec(0, n, (), Fraction(1))
    return out


def geo_cdf(n: int, k: int) -> tuple[list[int], list[Fraction]]:
    g = GeoSample.from_k(n, k)
    return [g.scaled_cdf(0, z) for z in range(n + 1)], g.pmf(0)


def pmf_of(cdf: list[int]) -> list[Fraction]:
    d = cdf[-1]
    return [Fraction(cdf[0], d)] + [Fraction(b - a, d) for a, b in itertools.pairwise(cdf)]


CASES = [
    ("coins", [1, 2], 3),
    ("coins-m5", [1, 2], 5),
    ("three-levels", [1, 3, 4], 4),
    ("geo-n2-k0", None, 5),
    ("geo-n3-k1", None, 4),
]


def _cdf(name: str, cdf: list[int] | None) -> list[int]:
    if cdf is not None:
        return cdf
    return geo_cdf(2, 0)[0] if name == "geo-n2-k0" else geo_cdf(3, 1)[0]


@pytest.mark.parametrize(("name", "cdf", "m"), CASES)
def test_exact_distribution_equals_brute_force(name: str, cdf: list[int] | None, m: int) -> None:
    f = _cdf(name, cdf)
    n = len(f) - 1
    truth = brute_force(pmf_of(f), m, n + 1)
    assert sum(truth.values()) == 1
    assert OrdSample(f, m).pmf() == truth


def test_the_printed_recursion_ignores_ties() -> None:
    """Our reading (module notes): Lemma 2.9 as printed is wrong for integer variables."""
    truth = brute_force(pmf_of([1, 2]), 2, 2)
    printed = printed_lemma_2_9([1, 2], 2)
    assert truth[(1, 0)] == Fraction(1, 2) and printed[(1, 0)] == Fraction(3, 8)
    f, _ = geo_cdf(2, 0)
    assert printed_lemma_2_9(f, 4) != brute_force(pmf_of(f), 4, 3)


def chi2(obs: np.ndarray, exp: np.ndarray) -> float:
    """Chi-square p-value, cells expecting fewer than 5 pooled into one."""
    keep = exp >= 5
    o, e = obs[keep], exp[keep]
    if exp[~keep].sum() > 0:
        o, e = np.append(o, obs[~keep].sum()), np.append(e, exp[~keep].sum())
    return float(stats.chisquare(o, e * (o.sum() / e.sum())).pvalue)


def _enumerate_steps(o: OrdSample, exact: bool) -> dict[tuple[int, ...], Fraction]:
    """The output distribution of the sampler's deterministic steps, every u enumerated."""
    out: dict[tuple[int, ...], Fraction] = {}

    def rec(t: int, mm: int, r: int, prefix: tuple[int, ...], prob: Fraction) -> None:
        if r <= 0:
            out[prefix] = out.get(prefix, Fraction(0)) + prob
            return
        size = o.F(t) ** mm if exact else 1 << (o.precision or 0)
        hits: Counter[tuple[int, int]] = Counter()
        for u in range(size):
            if exact:
                hits[o.decide_exact(t, mm, r, u, False)] += 1
            else:
                hits[o.decide_truncated(t, mm, r, u, False)] += 1
        for (v, k), cnt in hits.items():
            rec(v - 1, mm - k, r - k, prefix + (v,) * min(k, r), prob * Fraction(cnt, size))

    rec(o.n, o.m, o.n + 1, (), Fraction(1))
    return out


@pytest.mark.parametrize(("name", "cdf", "m"), CASES[:4])
def test_exact_steps_enumerated_over_every_u(name: str, cdf: list[int] | None, m: int) -> None:
    f = _cdf(name, cdf)
    o = OrdSample(f, m)
    assert _enumerate_steps(o, exact=True) == brute_force(pmf_of(f), m, len(f))


def test_strict_exact_steps_agree_with_the_default_search() -> None:
    f, _ = geo_cdf(2, 0)
    o = OrdSample(f, 5)
    for u in range(f[-1] ** 5):
        assert o.decide_exact(2, 5, 3, u, True) == o.decide_exact(2, 5, 3, u, False)


@pytest.mark.parametrize("prec", [9, 11, 14])
def test_truncated_sampler_within_its_statistical_distance_bound(prec: int) -> None:
    """Theorem 6.5's approximation, every u enumerated: the distance to the exact order
    statistics is within (n + 1)(2n + 1)(2C + 1) 2**-P and shrinks with P."""
    f, _ = geo_cdf(2, 0)
    m = 5
    o = OrdSample(f, m, precision=prec)
    approx = _enumerate_steps(o, exact=False)
    truth = brute_force(pmf_of(f), m, 3)
    assert sum(approx.values()) == 1
    tv = sum(abs(approx.get(k, 0) - truth.get(k, 0)) for k in set(approx) | set(truth)) / 2
    c = 3 * m + 2 * 2 + 2
    bound = Fraction((2 + 1) * (2 * 2 + 1) * (2 * c + 1), 2**prec)
    assert tv <= bound
    assert tv > 0 or prec >= 14  # coarse precisions are visibly inexact


def test_truncated_powers_respect_the_rounding_bound() -> None:
    """y_k >= t**k (1 - rho)**(3k - 1) (base truncated once, then 2k - 1 roundings)."""
    gen = np.random.default_rng(5)
    for prec in (16, 40, 90):
        rho = Fraction(2, 2**prec)
        for _ in range(20):
            den = int(gen.integers(2, 10**6))
            num = int(gen.integers(1, den))
            k = int(gen.integers(1, 400))
            y = _pow(_ratio(num, den, prec), k, prec)
            value = Fraction(y[0]) * Fraction(2) ** y[1]
            exact = Fraction(num, den) ** k
            assert exact * (1 - rho) ** (3 * k - 1) <= value <= exact
            assert y[0].bit_length() == prec
    a = _ratio(3, 7, 30)
    assert _mul(a, a, 30)[0].bit_length() == 30


def test_precision_for_matches_the_formula() -> None:
    for n, m, delta in [
        (10, 2**64, Fraction(1, 2**40)),
        (3, 100, Fraction(1, 7)),
        (500, 2**20, Fraction(1, 10**9)),
    ]:
        p = precision_for(n, m, delta)
        c = 3 * m + 2 * n + 2
        bound = (n + 1) * (2 * n + 1) * (2 * c + 1)
        assert Fraction(bound, 2**p) <= delta < Fraction(bound, 2 ** (p - 1)) or p == 8


def test_lazy_bracket_gives_the_full_precision_answer_draw_for_draw() -> None:
    """Default (lazy) and strict modes draw the same u and must agree exactly; a narrow lazy
    precision forces the full-precision fallback often."""
    g = GeoSample.from_k(30, 1)
    f = [g.scaled_cdf(0, z) for z in range(31)]
    m = 2**64
    narrow = OrdSample(f, m, precision=400, lazy_bits=(3 * m + 62).bit_length() + 3)
    wide = OrdSample(f, m, precision=400)
    for seed in range(40):
        a = narrow.sample(SeededRandom(seed))
        b = wide.sample(SeededRandom(seed))
        c = wide.sample(SeededRandom(seed), strict=True)
        assert a == b == c and len(a) == 31 and a == sorted(a, reverse=True)
    assert narrow.full_evaluations > 0


def test_lazy_decisions_equal_full_precision_for_every_word() -> None:
    """The default path decides u < floor(2**P b~) from a P0-bit bracket; for every P-bit word
    u of every reachable step (P = 12, P0 at its minimum, so the bracket is often undecided and
    often decisive) it must give the strict, full-precision outcome."""
    f, _ = geo_cdf(2, 0)
    m, prec = 5, 12
    lazy_bits = (3 * m + 2 * 2 + 2).bit_length() + 2
    lazy = OrdSample(f, m, precision=prec, lazy_bits=lazy_bits)
    full = OrdSample(f, m, precision=prec)
    states = [(2, 5, 3), (1, 4, 2), (1, 3, 1), (0, 4, 2), (1, 5, 3), (0, 2, 1)]
    for t, mm, r in states:
        for u in range(1 << prec):
            assert lazy.decide_truncated(t, mm, r, u, False) == full.decide_truncated(
                t, mm, r, u, True
            ), (t, mm, r, u)
    assert 0 < lazy.full_evaluations < len(states) * (1 << prec)


def test_exact_sampler_goodness_of_fit_and_power() -> None:
    """Samples of the exact sampler against brute force (alpha = 1e-6); the printed recursion's
    distribution is rejected by the same samples."""
    f, _ = geo_cdf(2, 0)
    m = 6
    truth = brute_force(pmf_of(f), m, 3)
    o = OrdSample(f, m)
    rng = SeededRandom(11)
    draws = Counter(tuple(o.sample(rng)) for _ in range(6000))
    keys = sorted(truth)
    obs = np.array([draws.get(k, 0) for k in keys], dtype=float)
    assert obs.sum() == 6000

    def pvalue(model: dict[tuple[int, ...], Fraction]) -> float:
        return chi2(obs, np.array([float(model.get(k, 0)) for k in keys]) * 6000)

    assert pvalue(truth) > ALPHA
    assert pvalue(printed_lemma_2_9(f, m)) < ALPHA


def test_truncated_sampler_goodness_of_fit_of_the_maximum() -> None:
    """FastSample's count-0 CDF, m = 3000 empty bins, the Theorem 6.5 precision for
    delta = 2**-30: the largest value against its exact law (F(z)/d)**m (Fractions)."""
    g = FastSample.from_k(40, 1, Fraction(1, 2**20))
    f = [g.scaled_cdf(0, z) for z in range(41)]
    m = 3000
    o = OrdSample(f, m, precision=precision_for(40, m, Fraction(1, 2**30)))
    rng = SeededRandom(3)
    tops = Counter(o.sample(rng)[0] for _ in range(400))
    d = f[-1]
    cdf = [Fraction(x, d) ** m for x in f]
    model = [cdf[0]] + [b - a for a, b in itertools.pairwise(cdf)]
    exp = np.array([float(p) for p in model]) * 400
    obs = np.array([tops.get(z, 0) for z in range(41)], dtype=float)
    assert chi2(obs, exp) > ALPHA
    # power: the same samples reject the law of the maximum of m / 4 bins
    cdf4 = [Fraction(x, d) ** (m // 4) for x in f]
    model4 = [cdf4[0]] + [b - a for a, b in itertools.pairwise(cdf4)]
    assert chi2(obs, np.array([float(p) for p in model4]) * 400) < ALPHA


def test_binomial_level_terms_are_exact() -> None:
    """T_{j+1} = T_j (m - j) f / ((j + 1) G) reproduces C(m, j) f**j G**(m-j) exactly."""
    f_, g_, m = 3, 7, 9
    term = m * f_ * g_ ** (m - 1)
    for j in range(1, m):
        assert term == comb(m, j) * f_**j * g_ ** (m - j)
        term = term * (m - j) * f_ // ((j + 1) * g_)


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="parameter 'm'"):
        OrdSample([1, 2, 3], 2)  # m < n + 1
    with pytest.raises(ValidationError, match="parameter 'cdf'"):
        OrdSample([2, 1], 5)
    with pytest.raises(ValidationError, match="parameter 'cdf'"):
        OrdSample([0, 1], 5)
    with pytest.raises(ValidationError, match="parameter 'precision'"):
        OrdSample([1, 2], 2**64, precision=20)
    with pytest.raises(ValidationError, match="parameter 'n'"):
        OrdSample(lambda z: z + 1, 5)
    with pytest.raises(ValidationError, match="parameter 'delta'"):
        precision_for(3, 10, Fraction(0))
