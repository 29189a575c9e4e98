"""ShuffleBernoulli: the exact per-bucket profile against the rational hockey-stick tool, exact DP
checks of both calibrations (both directions, add/remove and replace), the message-level
simulation, noise law, unbiasedness, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist.accounting.profile import check_dp, privacy_profile, product_distribution
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import SeededRandom
from privhist.federated.baselines import ShuffleBernoulli, bucket_delta
from privhist.federated.baselines.shuffle import GRID_BITS, PREC


def shifted_binomial(n: int, q: Fraction, shift: int) -> dict[int, Fraction]:
    """The exact law of ``shift + Binomial(n, q)`` (rationals, by the binomial formula)."""
    return {shift + y: math.comb(n, y) * q**y * (1 - q) ** (n - y) for y in range(n + 1)}


@pytest.mark.parametrize(
    ("n", "q", "eps"),
    [
        (1, Fraction(1, 2), 0.0),
        (30, Fraction(1, 3), 0.5),
        (60, Fraction(7, 100), 1.0),
        (25, Fraction(1, 2), 2.0),
    ],
)
def test_bucket_delta_matches_rational_hockey_stick(n: int, q: Fraction, eps: float) -> None:
    p = shifted_binomial(n, q, 4)
    r = shifted_binomial(n, q, 5)
    exact = privacy_profile(p, r, [eps])[0]
    assert float(bucket_delta(n, q, eps)) == pytest.approx(float(exact), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(("n", "eps", "delta"), [(40, 1.0, 1e-2), (80, 0.5, 1e-2), (60, 2.0, 1e-4)])
def test_exact_calibration_is_dp_and_minimal(n: int, eps: float, delta: float) -> None:
    m = ShuffleBernoulli(eps, delta, n, 3)
    q = m.noise_probability
    assert q.denominator <= 1 << GRID_BITS and 0 < q <= Fraction(1, 2)
    p, r = shifted_binomial(n, q, 7), shifted_binomial(n, q, 8)
    ok = check_dp(p, r, eps, delta)
    assert ok.holds, str(ok)
    assert float(ok.worst) == pytest.approx(m.delta_exact, rel=1e-9)
    # minimal on the grid: one step less noise breaks (eps, delta)
    q_less = q - Fraction(1, 1 << GRID_BITS)
    assert not check_dp(shifted_binomial(n, q_less, 7), shifted_binomial(n, q_less, 8), eps, delta)


def test_balcer_cheu_calibration_is_dp() -> None:
    """Their formula at per-bucket (1, 0.5): n >= 100 ln 4 = 138.6, q = 50 ln 4 / n."""
    n = 140
    m = ShuffleBernoulli(1.0, 0.5, n, 2, calibration="balcer-cheu")
    q = m.noise_probability
    assert float(q) == pytest.approx(50 * math.log(4) / n, rel=1e-9)
    assert float(q) >= 50 * math.log(4) / n
    p, r = shifted_binomial(n, q, 0), shifted_binomial(n, q, 1)
    ok = check_dp(p, r, 1.0, 0.5)
    assert ok.holds, str(ok)
    # their constant is loose: the exact delta is far below 0.5, and the exact calibration is
    # smaller
    assert ok.worst < 1e-6
    assert ShuffleBernoulli(1.0, 0.5, n, 2).noise_probability < q


def test_balcer_cheu_at_experiment_scale_is_far_below_delta() -> None:
    m = ShuffleBernoulli(1.0, 1e-8, 100_000, 16, calibration="balcer-cheu")
    assert m.delta_exact < 1e-100
    exact = ShuffleBernoulli(1.0, 1e-8, 100_000, 16)
    assert exact.delta_exact <= 1e-8
    assert exact.noise_probability * 10 < m.noise_probability


def test_replace_two_buckets_exact() -> None:
    n, eps, delta = 30, 2.0, 1e-2
    m = ShuffleBernoulli(eps, delta, n, 2, neighbouring=Neighbouring.replace())
    assert m.bucket_epsilon == eps / 2 and m.bucket_delta == delta / 2
    q = m.noise_probability
    before = product_distribution(shifted_binomial(n, q, 3), shifted_binomial(n, q, 5))
    after = product_distribution(shifted_binomial(n, q, 2), shifted_binomial(n, q, 6))
    ok = check_dp(before, after, eps, delta)
    assert ok.holds, str(ok)
    assert m.guarantee().epsilon == eps and m.guarantee().delta <= delta


def test_noise_law_and_message_simulation() -> None:
    n, domain = 50, 5000
    m = ShuffleBernoulli(2.0, 1e-2, n, domain)
    q = float(m.noise_probability)
    items = np.array([0, 0, 3], dtype=np.int64)
    rng = SeededRandom(17)
    ys = np.arange(n + 1)
    # aggregate path: buckets without items are i.i.d. Binomial(n, q); buckets 0 and 3 carry
    # their real messages on top
    agg = np.array([m.shuffled_counts(items, rng) for _ in range(4)])
    obs = np.bincount(agg[:, 4:].ravel(), minlength=n + 1)
    assert_fits(chi2_cells(obs, stats.binom.pmf(ys, n, q), max_cells=None))
    assert_rejects(chi2_cells(obs, stats.binom.pmf(ys, n, q * 1.2), max_cells=None))
    assert (agg[:, 0] >= 2).all() and (agg[:, 3] >= 1).all()
    # message path: the same per-bucket law, and every real message is delivered
    msgs = [np.bincount(m.client_messages(items, rng), minlength=domain) for _ in range(4)]
    counts = np.array(msgs)
    obs_m = np.bincount(counts[:, 4:].ravel(), minlength=n + 1)
    assert_fits(chi2_cells(obs_m, stats.binom.pmf(ys, n, q), max_cells=None))
    assert_rejects(chi2_cells(obs_m, stats.binom.pmf(ys, n - 10, q), max_cells=None))
    assert (counts[:, 0] >= 2).all() and (counts[:, 3] >= 1).all()


def test_estimate_unbiased() -> None:
    m = ShuffleBernoulli(0.5, 1e-6, 20_000, 6)
    counts = np.array([5000, 0, 1200, 30, 0, 7])
    items = np.repeat(np.arange(6), counts)
    rng = SeededRandom(4)
    reps = 400
    est = np.array([m.estimate(items, rng) for _ in range(reps)])
    se = math.sqrt(m.noise_variance() / reps)
    z = (est.mean(axis=0) - counts) / se
    assert 2 * stats.norm.sf(np.abs(z).max()) * 6 >= 1e-6
    # power: an estimator that forgot the noise mean n q is rejected
    z_raw = (est.mean(axis=0) + float(m.n_clients * m.noise_probability) - counts) / se
    assert 2 * stats.norm.sf(np.abs(z_raw).min()) < 1e-6


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="parameter 'delta' of ShuffleBernoulli"):
        ShuffleBernoulli(1.0, 0.0, 100, 4)
    with pytest.raises(ValidationError, match="'epsilon'"):
        ShuffleBernoulli(float("nan"), 1e-8, 100, 4)
    with pytest.raises(ValidationError, match=r"'n_clients'.*= 191139"):
        ShuffleBernoulli(0.1, 1e-8, 100_000, 4, calibration="balcer-cheu")
    with pytest.raises(ValidationError, match=r"'n_clients'.*Binomial"):
        ShuffleBernoulli(0.1, 1e-8, 50, 4)
    with pytest.raises(ValidationError, match="'calibration'"):
        ShuffleBernoulli(1.0, 1e-8, 1000, 4, calibration="paper")
    with pytest.raises(ValidationError, match="'neighbouring'"):
        ShuffleBernoulli(1.0, 1e-2, 1000, 4, neighbouring=Neighbouring.user(2))
    m = ShuffleBernoulli(2.0, 1e-2, 10, 4)
    with pytest.raises(ValidationError, match="at most n_clients = 10 items"):
        m.estimate(np.zeros(11, dtype=np.int64), SeededRandom(0))
    with pytest.raises(InputDataError, match="got 9 at index 2"):
        m.estimate(np.array([0, 1, 9]), SeededRandom(0))
    with pytest.raises(ValidationError, match="'counts'"):
        m.decode(np.array([1.5, 2, 3, 4]))


@pytest.mark.parametrize(
    ("n", "eps", "delta"), [(60, 2.0, 1e-4), (200, 1.0, 1e-4), (50, 0.7, 1e-2)]
)
def test_delta_exact_is_rounded_up(n: int, eps: float, delta: float) -> None:
    """The reported per-bucket delta never understates the 256-bit profile (rounding to the
    nearest float would, by up to half an ulp, for these cases)."""
    m = ShuffleBernoulli(eps, delta, n, 3)
    with mpmath.workprec(PREC):
        profile = bucket_delta(n, m.noise_probability, m.bucket_epsilon)
        assert mpmath.mpf(m.delta_exact) >= profile
        assert mpmath.mpf(m.guarantee().delta) >= profile
