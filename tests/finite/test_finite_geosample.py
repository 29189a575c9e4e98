"""GeoSample (Balcer & Vadhan, Theorem 4.5) and its bounded geometric noise: exactness proofs.

* every uniform ``u in [1, d]`` is enumerated for small ``n`` and the tally of outputs equals the
  closed-form pmf (written out independently here) exactly, and the fast inversion equals the
  literal inverse transform of Lemma 2.7 for every ``u``;
* the privacy ratio for counts one apart is exactly ``1 + 2**-K`` (attained), checked with
  ``LogRational`` at no rounding, with a power check just below it;
* the vectorised (lazy top-word) sampler returns exactly ``from_uniform(w)`` for adversarial ``w``
  (ties with every stored floor, the rejection edge, the far tails), the 64-bit floors are the
  exact floors of the big integers, and the sampler fits the exact pmf (chi-square, alpha = 1e-6,
  with power checks);
* validation, and the ``eps~`` range of Theorem 4.5.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_exact

from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import LogRational, check_dp
from privhist.core.random import RandomSource
from privhist.mechanisms.finite import BoundedGeometricNoise, GeoSample, counting_k
from privhist.mechanisms.finite._exact import floor_scaled, uniform_int
from privhist.mechanisms.finite.geometric import _table


def closed_form_scaled_pmf(n: int, k: int, c: int) -> list[int]:
    """``d Pr[Y = y]`` from the formulas in the module notes (independent of the code)."""
    p, q = 2**k, 2**k + 1
    out = []
    for y in range(n + 1):
        if y == 0:
            out.append(p**c * q ** (n - c))
        elif y == n:
            out.append(p ** (n - c) * q**c)
        else:
            j = abs(y - c)
            out.append(p**j * q ** (n - 1 - j))
    return out


# settings small enough to enumerate all of [1, d] (d at most about 3 * 10**4)
ENUMERABLE = [(n, 0) for n in range(1, 13)] + [(n, 1) for n in range(1, 8)]
ENUMERABLE += [(n, 2) for n in range(1, 6)] + [(n, 3) for n in range(1, 5)]


@pytest.mark.parametrize(("n", "k"), ENUMERABLE)
def test_enumerating_every_u_gives_the_closed_form_pmf_exactly(n: int, k: int) -> None:
    g = GeoSample.from_k(n, k)
    p, q = 2**k, 2**k + 1
    d = g.denominator
    assert d == q ** (n - 1) * (2 * p + 1)
    for c in range(n + 1):
        expected = closed_form_scaled_pmf(n, k, c)
        assert sum(expected) == d
        tally = Counter(g.evaluate(c, u) for u in range(1, d + 1))
        assert [tally[y] for y in range(n + 1)] == expected
        # the exact pmf of the code is the same
        assert g.pmf(c) == [Fraction(e, d) for e in expected]
        # the literal inverse transform (Lemma 2.7), computed independently with bisect on the
        # scaled CDF, gives the same output for every u
        scaled = [g.scaled_cdf(c, z) for z in range(n + 1)]
        assert scaled == [sum(expected[: z + 1]) for z in range(n + 1)]
        for u in range(1, d + 1):
            assert g.evaluate(c, u) == bisect.bisect_left(scaled, u)


def test_inverse_cdf_method_agrees_with_evaluate() -> None:
    g = GeoSample(9, 1)
    rng = np.random.default_rng(5)
    for c in range(10):
        for u in rng.integers(1, g.denominator + 1, size=60).tolist():
            assert g.inverse_cdf(c, u) == g.evaluate(c, u)
        assert g.evaluate(c, 1) == 0 and g.evaluate(c, g.denominator) == 9


@pytest.mark.parametrize(("k", "width"), [(0, 1), (0, 9), (1, 1), (1, 7), (2, 5), (3, 4)])
def test_noise_inversion_is_the_first_threshold_above_w(k: int, width: int) -> None:
    z = BoundedGeometricNoise(k, width)
    thresholds = [z.scaled_cdf(j) for j in range(-width, width + 1)]
    for w in range(z.denominator):
        assert z.from_uniform(w) == bisect.bisect_right(thresholds, w) - width
    # the vectorised small-denominator path is the same function
    ws = np.arange(z.denominator, dtype=np.int64)
    expect = [z.from_uniform(int(w)) for w in ws]
    assert z._invert_small(ws).tolist() == expect


@pytest.mark.parametrize(("n", "k"), [(1, 0), (2, 0), (5, 1), (8, 2), (12, 3), (40, 5), (7, 0)])
def test_privacy_ratio_is_exactly_one_plus_two_to_minus_k(n: int, k: int) -> None:
    """Theorem 4.5: (eps~/2, 0)-DP with e^(eps~/2) = 1 + 2**-K; the ratio is attained."""
    g = GeoSample.from_k(n, k)
    ratio = Fraction(2**k + 1, 2**k)
    assert g.ratio == ratio
    worst = Fraction(1)
    for c in range(n):
        a, b = g.pmf(c), g.pmf(c + 1)
        assert sum(a) == 1 and sum(b) == 1
        worst = max(worst, *(x / y for x, y in zip(a, b, strict=True)))
        worst = max(worst, *(y / x for x, y in zip(a, b, strict=True)))
        pa, pb = dict(enumerate(a)), dict(enumerate(b))
        assert check_dp(pa, pb, LogRational(ratio), 0).holds
        # power: just below the claimed ratio the exact check fails
        assert not check_dp(pa, pb, LogRational(ratio - Fraction(1, 10**9)), 0).holds
    assert worst == ratio


@pytest.mark.parametrize(
    "epsilon", [1, 0.999, 0.75, 0.5, 0.51, 0.3, 0.25, 0.1, "1/3", "1/7", 0.01, 1e-4]
)
def test_rounded_epsilon_lies_in_four_ninths_eps_to_eps(epsilon: object) -> None:
    k = counting_k(epsilon)
    eps = Fraction(str(epsilon)) if isinstance(epsilon, str) else Fraction(epsilon)
    assert 2**k * eps >= 2 and (k == 0 or 2 ** (k - 1) * eps < 2)  # K = ceil(log2(2/eps))
    with mpmath.workdps(60):
        e = mpmath.mpf(eps.numerator) / eps.denominator
        tilde = 2 * mpmath.log(1 + mpmath.mpf(2) ** -k)
        assert mpmath.mpf(4) / 9 * e < tilde <= e


def test_counting_k_validation_offers_the_nearest_valid_setting() -> None:
    with pytest.raises(ValidationError, match="nearest valid setting is epsilon=1"):
        GeoSample(5, 1.5)
    for bad in (0, -1, math.nan, math.inf, True, "abc", None):
        with pytest.raises(ValidationError, match="parameter 'epsilon' of GeoSample"):
            GeoSample(5, bad)  # type: ignore[arg-type]
    assert counting_k("1/10") == counting_k(0.1) == 5


def test_validation_of_n_counts_and_u() -> None:
    with pytest.raises(ValidationError, match="parameter 'n' of GeoSample must be an integer >= 1"):
        GeoSample(0, 1)
    for bad_n in (-3, 2.5, True):
        with pytest.raises(ValidationError, match="parameter 'n'"):
            GeoSample(bad_n, 1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="FastSample"):
        GeoSample(2**40, 1)  # d would have about 1.7e12 bits
    g = GeoSample(6, 1)
    rng = SeededRandom(1)
    for bad in ([-1, 2], [0, 7], [[1, 2]]):
        with pytest.raises(ValidationError, match="parameter 'counts'"):
            g.sample(bad, rng)
    with pytest.raises(ValidationError, match="parameter 'counts'"):
        g.sample(np.array([1.0, 2.0]), rng)
    with pytest.raises(ValidationError, match="parameter 'u'"):
        g.evaluate(3, 0)
    with pytest.raises(ValidationError, match="parameter 'u'"):
        g.evaluate(3, g.denominator + 1)
    with pytest.raises(ValidationError, match="parameter 'c'"):
        g.evaluate(7, 1)
    with pytest.raises(ValidationError, match="parameter 'k'"):
        BoundedGeometricNoise(-1, 3)
    with pytest.raises(ValidationError, match="parameter 'width'"):
        BoundedGeometricNoise(1, 0)
    assert g.sample(np.zeros(0, dtype=np.int64), rng).shape == (0,)


# -- the 64-bit table and the lazy path -----------------------------------------------------------


class ScriptedRandom(RandomSource):
    """Serves given 64-bit words in order (to steer the lazy sampler to chosen ``w``)."""

    def __init__(self, words: list[int]) -> None:
        self.words = list(words)

    def uint64(self, n: int) -> np.ndarray:  # type: ignore[type-arg]
        assert len(self.words) >= n, "the sampler asked for more words than scripted"
        out, self.words = self.words[:n], self.words[n:]
        return np.array(out, dtype=np.uint64)

    @property
    def description(self) -> str:
        return "scripted"


def _script(z: BoundedGeometricNoise, w: int) -> list[int]:
    """The words that make the lazy sampler consider ``w`` (low words only where it reads them)."""
    tab = _table(z.k, z.width)
    s = tab.shift
    t = w >> s
    floors = [int(f) for f in tab.floors]
    words = [t]
    undecided = t <= floors[0] or t >= floors[-1] or t in set(floors)
    needs_low = t == tab.top or (t < tab.top and undecided)
    if needs_low and s > 0:
        nwords = (s + 63) // 64
        low = (w & ((1 << s) - 1)) << (nwords * 64 - s)
        raw = low.to_bytes(nwords * 8, "big")
        words += [int.from_bytes(raw[8 * i : 8 * i + 8], "big") for i in range(nwords)]
    return words


LAZY = [(2, 300), (0, 200), (5, 50), (0, 63), (1, 2000), (3, 41), (1, 60), (9, 30)]


@pytest.mark.parametrize(("k", "width"), LAZY)
def test_table_floors_are_the_exact_floors(k: int, width: int) -> None:
    z = BoundedGeometricNoise(k, width)
    d = z.denominator
    assert d.bit_length() >= 64
    tab = _table(k, width)
    assert tab.shift == d.bit_length() - 64 and tab.top == (d - 1) >> tab.shift
    exact = [z.scaled_cdf(j) >> tab.shift for j in range(-tab.m0, tab.m0)]
    assert [int(f) for f in tab.floors] == exact
    if tab.m0 < width:  # beyond the table the thresholds are below 2**s or above d - 2**s
        assert z.lumped(tab.m0 + 1) < 1 << tab.shift
        assert z.lumped(tab.m0) >= 1 << tab.shift


def test_floor_scaled_is_exact_including_the_near_integer_case() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        value = int(rng.integers(1, 2**62)) ** 9 + int(rng.integers(0, 2**40))
        den = int(rng.integers(2, 10**6))
        num = int(rng.integers(0, den + 1))
        shift = int(rng.integers(0, value.bit_length()))
        assert floor_scaled(value, num, den, shift)[0] == (value * num) // (den << shift)
    # value / (3 * 2**200) = X - 1 / (3 * 2**200): the head alone leaves the fractional part
    # 1 - 1 / (3 * 2**128), within 2**-128 of 1, so the exact product decides (floor X - 1)
    x = 7 << 300
    value = 3 * x * (1 << 200) - 1
    got, used_exact = floor_scaled(value, 1, 3, 200)
    assert got == x - 1 and used_exact == 1
    # at exactly 2**-128 below the next integer the head still decides
    assert floor_scaled((x << 200) - 1, 1, 1, 200) == (x - 1, 0)


@pytest.mark.parametrize(("k", "width"), LAZY)
def test_lazy_sampler_returns_from_uniform_for_adversarial_w(k: int, width: int) -> None:
    z = BoundedGeometricNoise(k, width)
    d = z.denominator
    tab = _table(k, width)
    s, big = tab.shift, 1 << (tab.shift + 64)
    cands = {0, 1, d - 1, d - 2, (tab.top << s), (tab.top << s) - 1, ((tab.top - 1) << s)}
    for j in range(-min(width, tab.m0 + 2), min(width, tab.m0 + 2)):
        x = z.scaled_cdf(j)
        cands |= {x - 1, x, x + 1}
    for f in tab.floors.tolist():
        cands |= {(f << s) - 1, f << s, (f << s) + (1 << s) - 1}
    cands |= {(1 << s) - 1, 1 << s}
    accepted = [w for w in sorted(cands) if 0 <= w < d]
    assert len(accepted) > 4 * tab.m0
    for w in accepted:
        rng = ScriptedRandom(_script(z, w))
        assert int(z.sample(1, rng)[0]) == z.from_uniform(w), w
        assert rng.words == [], "unused scripted words: the path differs from the model"
    # rejected values (w >= d, top word at or above (d - 1) >> s) are redrawn
    w_ok = accepted[len(accepted) // 2]
    for w_bad in (d, d + 1, big - 1, (tab.top + 1) << s):
        if d <= w_bad < big:
            rng = ScriptedRandom(_script(z, w_bad) + _script(z, w_ok))
            assert int(z.sample(1, rng)[0]) == z.from_uniform(w_ok)
            assert rng.words == []


def test_strict_sampler_is_the_exact_algorithm_on_a_full_uniform_u() -> None:
    z = BoundedGeometricNoise(2, 70)
    a = z.sample(200, SeededRandom(9), strict=True)
    twin = SeededRandom(9)
    b = [z.from_uniform(uniform_int(twin, z.denominator)) for _ in range(200)]
    assert a.tolist() == b


# -- goodness of fit of the vectorised samplers ---------------------------------------------------

N_GOF = 200_000


def _model(g: GeoSample, c: int) -> dict[int, Fraction]:
    return g.pmf_window(c, 400)[0]


@pytest.mark.parametrize(
    ("n", "epsilon", "c"),
    [
        (10, 1, 4),  # d < 2**63: one vectorised exact uniform integer per draw
        (40, 1, 0),  # d just above 2**63: lazy path with a short table
        (300, "1/3", 150),
        (10**6, 0.1, 3),  # lumped mass at 0, 5 million bit denominator
        (10**6, 0.1, 500_000),
        (10**6, 1, 10**6),
    ],
)
def test_vectorised_geosample_fits_the_exact_pmf(n: int, epsilon: object, c: int) -> None:
    g = GeoSample(n, epsilon)
    samples = g.sample(np.full(N_GOF, c), SeededRandom(11 + c))
    assert samples.min() >= 0 and samples.max() <= n
    assert_fits(chi2_exact(samples, _model(g, c)))


def test_gof_power_check_rejects_a_slightly_different_sampler() -> None:
    n, c = 10**6, 300
    g = GeoSample(n, 0.5)  # K = 2
    # less noise (K + 1) and a count off by one must both be rejected by the same test
    less = g.with_k(g.k + 1).sample(np.full(N_GOF, c), SeededRandom(1))
    shifted = g.sample(np.full(N_GOF, c + 1), SeededRandom(2))
    assert_rejects(chi2_exact(less, _model(g, c)))
    assert_rejects(chi2_exact(shifted, _model(g, c)))


def test_mixed_counts_in_one_batch_each_follow_their_own_pmf() -> None:
    g = GeoSample(50, 1)
    counts = np.repeat(np.array([0, 1, 25, 49, 50]), 40_000)
    # the batch interleaves counts: one noise table serves them all
    perm = np.random.default_rng(0).permutation(counts.size)
    out = np.empty(counts.size, dtype=np.int64)
    out[perm] = g.sample(counts[perm], SeededRandom(4))
    for c in (0, 1, 25, 49, 50):
        assert_fits(chi2_exact(out[counts == c], _model(g, c)))


def test_strict_sampler_fits_the_exact_pmf() -> None:
    g = GeoSample(30, 0.5)
    samples = g.sample(np.full(20_000, 7), SeededRandom(5), strict=True)
    assert_fits(chi2_exact(samples, _model(g, 7)))


# -- accuracy --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "epsilon"), [(1000, 1), (1000, 0.1), (50, 0.5)])
def test_half_width_is_exact_and_within_theorem_4_5(n: int, epsilon: object) -> None:
    g = GeoSample(n, epsilon)
    for beta in (Fraction(1, 20), Fraction(1, 1000), Fraction(1, 10**9)):
        a = g.half_width_for_tail(beta)
        assert g.error_bound(a) <= beta and (a == 0 or g.error_bound(a - 1) > beta)
        # Theorem 4.5: (a, beta)-accuracy with a = ceil((2 / eps~) ln(1 / beta))
        paper = math.ceil(2 / g.epsilon_tilde * math.log(1 / float(beta)))
        assert a <= paper
        # the bound is the true probability of |Y - c| > a for an interior count
        c = n // 2
        if c - a - 1 >= 0 and c + a + 1 <= n:
            _, rest = g.pmf_window(c, a)
            assert rest == g.error_bound(a)


def test_a_capped_table_sends_the_rest_to_the_exact_ladder(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tiny eps the table would need about 44 * 2**K floors per side; it stops at TABLE_MAX
    and draws beyond it use the exact ladder. Simulated here with a cap of 6."""
    import privhist.mechanisms.finite.geometric as geometric

    k, width = 2, 301
    geometric._table.cache_clear()
    monkeypatch.setattr(geometric, "TABLE_MAX", 6)
    try:
        z = BoundedGeometricNoise(k, width)
        tab = _table(k, width)
        assert tab.m0 == 6
        for w in range(0, z.denominator, z.denominator // 997):
            rng = ScriptedRandom(_script(z, w))
            assert int(z.sample(1, rng)[0]) == z.from_uniform(w)
            assert rng.words == []
        g = GeoSample.from_k(width, k)
        assert_fits(chi2_exact(g.sample(np.full(50_000, 150), SeededRandom(6)), _model(g, 150)))
    finally:
        geometric._table.cache_clear()
