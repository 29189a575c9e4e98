"""The bounded geometric noise on the finer grid ``q = 2**K + s`` (``s > 1``) and
stability-geometric's use of it.

* every uniform ``u in [1, d]`` is enumerated for small ``n`` and the tally equals the closed-form
  pmf ``d Pr[Y = y]`` written out here for general ``p, q``; the privacy ratio for counts one apart
  is exactly ``q / p`` (attained; a hair less fails);
* the 64-bit table floors are the exact floors, and the vectorised sampler fits the exact pmf
  (chi-square at alpha = 1e-6) and rejects the neighbouring steps ``s - 1`` and ``s + 1``;
* stability-geometric at epsilon = 1: its ratio is the largest on the grid (the next one spends
  more than epsilon), every neighbouring pair of counts is exactly ``(eps / l0, delta / l0)``-DP
  in both directions with the threshold tight, and a ``count_bound`` too large for the finer
  denominator keeps the coarse ratio.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_exact

from privhist import Neighbouring, SeededRandom
from privhist.accounting.profile import NOT_RELEASED, LogRational, check_dp
from privhist.mechanisms.finite import BoundedGeometricNoise, GeoSample
from privhist.mechanisms.finite.geometric import _table
from privhist.mechanisms.finite.histograms import (
    FINE_BITS,
    StabilityGeometricHistogram,
    finest_ratio,
    histogram_k,
    largest_ratio_k,
)


def closed_form_scaled_pmf(n: int, p: int, q: int, c: int) -> list[int]:
    """``d Pr[Y = y]`` for ``Y = clamp(c + Z, 0, n)``, ``d = q**(n - 1) (p + q)``: the lumped
    ends ``p**c q**(n - c)`` and ``p**(n - c) q**c``, interior ``(q - p) p**j q**(n - 1 - j)``."""
    out = []
    for y in range(n + 1):
        if y == 0:
            out.append(p**c * q ** (n - c) if c > 0 else q**n)
        elif y == n:
            out.append(p ** (n - c) * q**c if c < n else q**n)
        else:
            j = abs(y - c)
            out.append((q - p) * p**j * q ** (n - 1 - j))
    return out


ENUMERABLE = [(n, 1, 2) for n in range(1, 7)] + [(n, 2, 3) for n in range(1, 5)]
ENUMERABLE += [(n, 2, 7) for n in range(1, 4)] + [(n, 0, 3) for n in range(1, 6)]


@pytest.mark.parametrize(("n", "k", "step"), ENUMERABLE)
def test_enumerating_every_u_gives_the_closed_form_pmf(n: int, k: int, step: int) -> None:
    g = GeoSample.from_k(n, k, step)
    p, q = 2**k, 2**k + step
    d = g.denominator
    assert d == q ** (n - 1) * (p + q)
    for c in range(n + 1):
        expected = closed_form_scaled_pmf(n, p, q, c)
        if 0 < c < n:  # c in the interior: the ends lump p**m q**(n - m) (m = c or n - c)
            assert sum(expected) == d
        tally = Counter(g.evaluate(c, u) for u in range(1, d + 1))
        got = [tally[y] for y in range(n + 1)]
        assert sum(got) == d
        assert g.pmf(c) == [Fraction(x, d) for x in got]
        if 0 < c < n:
            assert got == expected


@pytest.mark.parametrize(("n", "k", "step"), [(6, 1, 2), (9, 2, 3), (12, 3, 11), (5, 0, 3)])
def test_privacy_ratio_is_exactly_q_over_p(n: int, k: int, step: int) -> None:
    g = GeoSample.from_k(n, k, step)
    ratio = Fraction(2**k + step, 2**k)
    assert g.ratio == ratio
    assert g.epsilon_tilde == pytest.approx(2 * math.log(ratio))
    worst = Fraction(1)
    for c in range(n):
        a, b = g.pmf(c), g.pmf(c + 1)
        assert sum(a) == 1 and sum(b) == 1
        worst = max(worst, *(x / y for x, y in zip(a, b, strict=True)))
        worst = max(worst, *(y / x for x, y in zip(a, b, strict=True)))
        pa, pb = dict(enumerate(a)), dict(enumerate(b))
        assert check_dp(pa, pb, LogRational(ratio), 0).holds
        assert not check_dp(pa, pb, LogRational(ratio - Fraction(1, 10**9)), 0).holds
    assert worst == ratio


@pytest.mark.parametrize(("k", "width", "step"), [(4, 300, 27), (3, 200, 5), (7, 60, 17)])
def test_table_floors_are_the_exact_floors(k: int, width: int, step: int) -> None:
    z = BoundedGeometricNoise(k, width, step)
    d = z.denominator
    assert d.bit_length() >= 64
    tab = _table(k, width, step)
    assert tab.shift == d.bit_length() - 64 and tab.top == (d - 1) >> tab.shift
    exact = [z.scaled_cdf(j) >> tab.shift for j in range(-tab.m0, tab.m0)]
    assert [int(f) for f in tab.floors] == exact
    # the exact pmf and cdf agree with the scaled integers
    for j in range(-5, 6):
        assert z.cdf(j) * d == z.scaled_cdf(j)
        assert z.pmf(j) * d == z.scaled_cdf(j) - z.scaled_cdf(j - 1)


@pytest.mark.parametrize(
    ("n", "k", "step", "c"), [(10, 1, 3, 4), (1000, 4, 27, 500), (400, 3, 5, 0)]
)
def test_vectorised_sampler_fits_and_rejects_the_neighbouring_steps(
    n: int, k: int, step: int, c: int
) -> None:
    g = GeoSample.from_k(n, k, step)
    size = 200_000
    model = g.pmf_window(c, 400)[0]
    assert_fits(chi2_exact(g.sample(np.full(size, c), SeededRandom(3 + c)), model))
    for other in (step - 1, step + 1):
        h = GeoSample.from_k(n, k, other)
        assert_rejects(chi2_exact(h.sample(np.full(size, c), SeededRandom(5 + other)), model))


# -- stability-geometric on the finer grid -----------------------------------------------------


def _dist(mech: StabilityGeometricHistogram, count: int) -> dict[object, Fraction]:
    kd = mech.key_distribution(count, count)
    assert kd.tail == 0
    return dict(kd.probabilities)


@pytest.mark.parametrize(
    "nb", [Neighbouring.add_remove(), Neighbouring.replace(), Neighbouring.user(2, 2)]
)
def test_ratio_is_the_largest_on_the_grid(nb: Neighbouring) -> None:
    m = StabilityGeometricHistogram(1.0, 1e-6, nb, count_bound=300)
    l1 = nb.l1_sensitivity
    coarse = largest_ratio_k(1.0, nb, histogram_k(1.0, nb))
    grid = 2 ** (coarse + FINE_BITS)
    on_grid = (m.ratio - 1) * grid
    assert on_grid.denominator == 1 and on_grid >= 2**FINE_BITS  # on the grid, >= 1 + 2**-K
    nxt = 1 + (on_grid + 1) / grid

    def spend(r: Fraction) -> object:
        return l1 * mpmath.log(mpmath.mpf(r.numerator) / r.denominator)

    with mpmath.workdps(60):
        assert spend(m.ratio) <= 1 < spend(nxt)  # one more grid step spends more than epsilon
        assert m.parameters()["epsilon_effective"] == pytest.approx(float(spend(m.ratio)))
        # and it beats the coarse ratio 1 + 2**-K the previous construction was limited to
        assert spend(m.ratio) > spend(1 + Fraction(1, 2**coarse))


def test_finest_ratio_at_epsilon_one() -> None:
    assert finest_ratio(1.0, Neighbouring.add_remove(), 0) == (4, 27)  # 43/16 <= e < 44/16
    assert 43 / 16 <= math.e < 44 / 16


@pytest.mark.parametrize("nb", [Neighbouring.add_remove(), Neighbouring.user(2, 2)])
def test_stability_geometric_at_epsilon_one_is_exactly_eps_delta(nb: Neighbouring) -> None:
    m = StabilityGeometricHistogram(1.0, 1e-3, nb, count_bound=70)
    assert m.sampler.noise.step > 1  # the finer grid is in use
    c, l0 = nb.linf_sensitivity, nb.l0_sensitivity
    delta_key = Fraction(1e-3) / l0
    with mpmath.workdps(50):
        assert c * mpmath.log(mpmath.mpf(m.ratio.numerator) / m.ratio.denominator) <= 1.0 / l0
    worst = Fraction(0)
    tight = False
    for u in range(0, 50):
        for j in range(1, c + 1):
            p, q = _dist(m, u), _dist(m, u + j)
            assert sum(p.values()) == 1 and sum(q.values()) == 1
            assert check_dp(p, q, LogRational(m.ratio**c), delta_key).holds, (u, j)
            if u == 0:
                worst = max(worst, 1 - q[NOT_RELEASED])
            elif not check_dp(p, q, LogRational(m.ratio**j - Fraction(1, 10**12)), 0).holds:
                tight = True
    assert delta_key / 2 < worst <= delta_key and tight
    weak = StabilityGeometricHistogram(1.0, 1e-3, nb, count_bound=70)
    weak.threshold -= 1
    assert not check_dp(_dist(weak, 0), _dist(weak, c), LogRational(m.ratio**c), delta_key).holds


def test_a_count_bound_too_large_for_the_finer_denominator_keeps_the_coarse_ratio() -> None:
    m = StabilityGeometricHistogram(1.0, 1e-6, count_bound=10**7)
    assert m.ratio == 2 and m.sampler.noise.step == 1
    assert m.parameters()["epsilon_effective"] == pytest.approx(math.log(2))
    fine = StabilityGeometricHistogram(1.0, 1e-6, count_bound=10**6)
    assert fine.ratio == Fraction(43, 16)
