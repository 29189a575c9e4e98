"""Hadamard response: FWHT against scipy, the exact report law (brute force), exact local DP for
every pair of inputs, exact unbiasedness of the decoder, encoder goodness of fit, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.linalg import hadamard
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist.accounting.profile import LogRational, check_dp
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.baselines import HadamardResponse, walsh_hadamard_exact


@pytest.mark.parametrize("size", [1, 2, 4, 8, 64, 1024])
def test_fwht_matches_scipy_hadamard(size: int) -> None:
    rng = np.random.default_rng(size)
    v = rng.integers(-1000, 1000, size)
    h = hadamard(size).astype(np.int64)
    out = walsh_hadamard_exact(v)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, h @ v)
    f = rng.standard_normal(size)
    np.testing.assert_allclose(walsh_hadamard_exact(f), h @ f, rtol=1e-12, atol=1e-9)


def test_fwht_bad_input() -> None:
    for bad in (np.zeros(3), np.zeros(0), np.zeros((2, 2))):
        with pytest.raises(ValidationError, match="parameter 'values' of walsh_hadamard_exact"):
            walsh_hadamard_exact(bad)


def brute_report_law(hr: HadamardResponse, item: int) -> dict[int, Fraction]:
    """P[y | item] written out from scipy's Hadamard matrix and the scheme's definition."""
    h = hadamard(hr.width)
    big_l = hr.ratio
    half = hr.width // 2
    return {
        y: (big_l if h[item + 1, y] == 1 else Fraction(1)) / ((1 + big_l) * half)
        for y in range(hr.width)
    }


@pytest.mark.parametrize(("epsilon", "domain"), [(1.0, 1), (1.0, 3), (0.5, 5), (0.1, 7), (2.0, 8)])
def test_report_law_and_exact_local_dp(epsilon: float, domain: int) -> None:
    hr = HadamardResponse(epsilon, domain)
    assert hr.width >= domain + 1 and hr.width < 2 * (domain + 1)
    assert 1 < hr.ratio <= Fraction(math.exp(epsilon)) * (1 + Fraction(1, 10**12))
    assert float(hr.ratio) == pytest.approx(math.exp(epsilon), rel=1e-8)
    laws = [hr.report_distribution(x) for x in range(domain)]
    for x, law in enumerate(laws):
        assert law == brute_report_law(hr, x)
        assert sum(law.values()) == 1
    big_l = LogRational(hr.ratio)
    for x in range(domain):
        for z in range(domain):
            if x == z:
                continue
            ok = check_dp(laws[x], laws[z], big_l, 0)
            assert ok.holds, str(ok)
            # the bound is tight: a slightly smaller epsilon fails
            tighter = LogRational(hr.ratio * (1 - Fraction(1, 10**6)))
            assert not check_dp(laws[x], laws[z], tighter, 0).holds
    assert hr.guarantee().epsilon <= epsilon
    assert hr.guarantee().epsilon >= math.log(float(hr.ratio)) * (1 - 1e-15)


@pytest.mark.parametrize("domain", [3, 6, 8])
def test_decoder_exactly_unbiased(domain: int) -> None:
    """E[estimate] = sum_y E[h_y] * decode(one report y), exactly, equals the true counts."""
    hr = HadamardResponse(0.7, domain)
    counts = [(3 * x + 1) % 5 for x in range(domain)]
    laws = [hr.report_distribution(x) for x in range(domain)]
    expected_hist = [sum(counts[z] * laws[z][y] for z in range(domain)) for y in range(hr.width)]
    unit = [hr.decode(np.array([y])) / float(hr.scale) for y in range(hr.width)]
    for y in range(hr.width):
        assert set(np.unique(unit[y]).tolist()) <= {-1.0, 1.0}
    mean = [
        hr.scale * sum(expected_hist[y] * int(unit[y][x]) for y in range(hr.width))
        for x in range(domain)
    ]
    assert mean == [Fraction(c) for c in counts]


def test_encoder_fits_report_law() -> None:
    hr = HadamardResponse(1.0, 5)
    reports = hr.encode(np.full(200_000, 2), SeededRandom(5))
    observed = np.bincount(reports, minlength=hr.width)

    def probs(law: dict[int, Fraction]) -> list[float]:
        return [float(law[y]) for y in range(hr.width)]

    assert_fits(chi2_cells(observed, probs(hr.report_distribution(2)), max_cells=None))
    assert_rejects(chi2_cells(observed, probs(hr.report_distribution(3)), max_cells=None))
    assert_rejects(
        chi2_cells(observed, probs(HadamardResponse(0.9, 5).report_distribution(2)), max_cells=None)
    )


def test_encoder_large_domain_inside_rate_and_uniformity() -> None:
    """B = 2**14 - 1: the report lies in C_x with probability L/(1+L), uniformly within it."""
    hr = HadamardResponse(0.5, 2**14 - 1)
    n = 300_000
    rng = SeededRandom(9)
    items = 15 + rng.uniform_below(hr.domain_size - 15, n)  # rows x + 1 >= 16
    y = hr.encode(items, rng)
    inside = np.bitwise_count((items + 1).astype(np.uint64) & y.astype(np.uint64)) % 2 == 0
    p_in = float(hr.ratio / (1 + hr.ratio))
    k = int(inside.sum())
    assert_fits(chi2_cells([n - k, k], [1 - p_in, p_in], max_cells=None))
    assert_rejects(chi2_cells([n - k, k], [0.5, 0.5], max_cells=None))
    # the low 4 bits of y are exactly uniform: row x + 1 >= 16 has a set bit above bit 3, so the
    # parity condition defining C_x (or its complement) can be met whatever the low bits are
    assert_fits(chi2_cells(np.bincount(y & 15, minlength=16), np.full(16, 1 / 16), max_cells=None))


def test_estimate_mean_over_repetitions() -> None:
    hr = HadamardResponse(1.0, 6)
    counts = np.array([40_000, 20_000, 0, 5_000, 25_000, 10_000])
    items = np.repeat(np.arange(6), counts)
    rng = SeededRandom(21)
    reps = 20
    est = np.array([hr.estimate(items, rng) for _ in range(reps)])
    se = np.sqrt(hr.variance(counts) / reps)
    z = (est.mean(axis=0) - counts) / se
    assert 2 * stats.norm.sf(np.abs(z).max()) * 6 >= 1e-6
    z_wrong = (est.mean(axis=0) - 1.1 * counts) / se  # a 10% biased decoder is detected
    assert 2 * stats.norm.sf(np.abs(z_wrong).max()) < 1e-6


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="parameter 'epsilon' of HadamardResponse"):
        HadamardResponse(-1, 4)
    with pytest.raises(ValidationError, match="'domain_size'"):
        HadamardResponse(1.0, 2**27)
    hr = HadamardResponse(1.0, 4)
    with pytest.raises(InputDataError, match=r"got -1 at index 0"):
        hr.encode(np.array([-1, 2]), SeededRandom(0))
    with pytest.raises(ValidationError, match="'reports'"):
        hr.decode(np.array([0, 8]))
    with pytest.raises(ValidationError, match="'item'"):
        hr.report_distribution(4)
    assert hr.encode(np.zeros(0, dtype=np.int64), SeededRandom(0)).size == 0
    np.testing.assert_array_equal(hr.estimate(np.zeros(0, dtype=np.int64), SeededRandom(0)), 0)


def _report_multiset_law(laws: list[dict[int, Fraction]]) -> dict[tuple[int, ...], Fraction]:
    """Exact law of the shuffled reports (the sorted tuple) of independent clients."""
    out: dict[tuple[int, ...], Fraction] = {(): Fraction(1)}
    for law in laws:
        nxt: dict[tuple[int, ...], Fraction] = {}
        for prefix, pr in out.items():
            for y, py in law.items():
                key = tuple(sorted((*prefix, y)))
                nxt[key] = nxt.get(key, Fraction(0)) + pr * py
        out = nxt
    return out


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_add_remove_needs_dummy_reports(epsilon: float) -> None:
    """Add/remove one client: the analyst sees the multiset of reports. Without a dummy the
    number of reports gives the client away (no finite epsilon); with every contacted client
    reporting (an abstaining one sends a dummy report) the guarantee is exactly (ln L, 0)."""
    hr = HadamardResponse(epsilon, 3)
    big_l = LogRational(hr.ratio)
    dummy = hr.dummy_distribution()
    assert sum(dummy.values()) == 1
    for x in range(3):
        law = hr.report_distribution(x)
        assert check_dp(law, dummy, big_l, 0).holds
        # exactly: the worst ratio against a dummy is (1 + L) / 2 < L (dummy vs outside C_x)
        tight = (1 + hr.ratio) / 2
        assert check_dp(law, dummy, LogRational(tight), 0).holds
        assert not check_dp(law, dummy, LogRational(tight * Fraction(999, 1000)), 0).holds
    with_client = _report_multiset_law([hr.report_distribution(0), hr.report_distribution(2)])
    with_dummy = _report_multiset_law([hr.report_distribution(0), dummy])
    ok = check_dp(with_client, with_dummy, big_l, 0)
    assert ok.holds, str(ok)
    without = _report_multiset_law([hr.report_distribution(0)])
    assert not check_dp(with_client, without, 50.0, 0.5).holds
    assert hr.guarantee().epsilon <= epsilon


def test_dummy_reports_fit_and_keep_the_decoder_unbiased() -> None:
    hr = HadamardResponse(1.0, 5)
    rng = SeededRandom(8)
    reports = hr.encode(np.array([2, 2, 4]), rng, abstaining=60_000)
    assert reports.shape == (60_003,)
    observed = np.bincount(reports, minlength=hr.width)
    assert_fits(chi2_cells(observed, np.full(hr.width, 1 / hr.width), max_cells=None))
    assert_rejects(
        chi2_cells(observed, [float(v) for v in hr.report_distribution(2).values()], max_cells=None)
    )
    # a uniform report has mean 0 in every row x + 1 >= 1 of H, so the estimates stay unbiased:
    # exactly, sum_y dummy(y) H[x + 1, y] = 0
    h = hadamard(hr.width)
    for x in range(hr.domain_size):
        assert sum(hr.dummy_distribution()[y] * int(h[x + 1, y]) for y in range(hr.width)) == 0
    with pytest.raises(ValidationError, match="parameter 'abstaining'"):
        hr.encode(np.array([1]), rng, abstaining=-1)
