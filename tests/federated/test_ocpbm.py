"""OcPBM: Theorem 1's bound against brute force and simulation, the optimal quantile, the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.cpbm import Cpbm
from privhist.federated.kashin import OrthogonalFrame, kashin_representation
from privhist.federated.ocpbm import (
    best_clip,
    column_weights,
    error_bound,
    expected_squared_error,
    optimal_clip,
    optimal_quantile,
    printed_error_bound,
    quantile_of,
)


def _bound_by_hand(norms: np.ndarray, c: float, dim: int, m: int, theta: float) -> float:
    n = norms.size
    bias = sum(max(0.0, float(v) - c) for v in norms) / n
    return bias + c * math.sqrt(dim / (4 * m * n * theta**2))


def test_error_bound_matches_the_formula() -> None:
    norms = np.array([0.5, 1.0, 2.0, 7.0, 3.5])
    for c in (0.1, 1.0, 2.5, 10.0):
        assert error_bound(norms, c, 8, 3, 0.2) == pytest.approx(
            _bound_by_hand(norms, c, 8, 3, 0.2), rel=1e-12
        )
    assert printed_error_bound(norms, 1.0, 9, 8, 3, 0.2) == pytest.approx(
        3 * _bound_by_hand(norms, 1.0, 8, 3, 0.2)
    )


def test_optimal_quantile_closed_form_and_the_paper_default() -> None:
    # Section 5: n = 1e4, D = 2d = 100, m = 30, theta = 0.2
    assert optimal_quantile(100, 30, 10_000, 0.2) == pytest.approx(
        1 - math.sqrt(100 / (4 * 30 * 10_000 * 0.04))
    )
    with pytest.raises(ValidationError) as info:
        optimal_quantile(100, 1, 10, 0.2)  # s > 1: no positive minimiser
    assert info.value.parameter == "n"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_optimal_clip_minimises_the_bound_by_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    norms = rng.gamma(3.0, 2.0, size=400)
    dim, m, theta = 6, 2, 0.25
    c = optimal_clip(norms, dim, m, theta)
    # E is piecewise linear with kinks at the norms: its minimum is at a norm; check all of them
    # and a fine grid in between
    candidates = np.concatenate([norms, np.linspace(1e-3, norms.max() * 1.1, 3000)])
    values = np.array([_bound_by_hand(norms, float(v), dim, m, theta) for v in candidates])
    assert _bound_by_hand(norms, c, dim, m, theta) <= values.min() + 1e-12
    # and it is the gamma* quantile of the norms
    gamma = optimal_quantile(dim, m, norms.size, theta)
    assert np.mean(norms <= c) >= gamma
    assert np.mean(norms < c) < gamma


def test_quantile_and_norm_validation() -> None:
    assert quantile_of([3.0, 1.0, 2.0], 0.34) == 2.0
    with pytest.raises(ValidationError):
        quantile_of([1.0], 1.0)
    with pytest.raises(InputDataError):
        error_bound([1.0, -2.0], 1.0, 2, 3, 0.2)
    with pytest.raises(InputDataError):
        error_bound([], 1.0, 2, 3, 0.2)
    with pytest.raises(ValidationError):
        error_bound([1.0], 0.0, 2, 3, 0.2)  # C <= 0
    with pytest.raises(ValidationError):
        error_bound([1.0], 1.0, 2, 3, 0.3)  # theta > 1/4
    with pytest.raises(ValidationError):
        error_bound([1.0], 1.0, 2, 0, 0.2)  # m < 1


def _setup(n: int = 300, d: int = 4, big: int = 8, seed: int = 3):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    x = rng.poisson(rng.uniform(0.2, 3.0, size=(n, d))).astype(float)
    x[x.sum(axis=1) == 0, 0] = 1.0
    frame = OrthogonalFrame(d, big, SeededRandom(seed))
    y = kashin_representation(frame, x).coefficients
    return x, frame, y


def test_expected_squared_error_against_simulation() -> None:
    """The closed form (bias^2 + column-weighted binomial variances) against 400 runs of the
    actual device sampler and decoder."""
    x, frame, y = _setup()
    n, m, theta = x.shape[0], 4, 0.2
    x_bar = x.mean(axis=0)
    rng = SeededRandom(17)
    norms = np.linalg.norm(y, axis=1)
    for c in (float(np.quantile(norms, 0.3)), float(np.quantile(norms, 0.9))):
        mech = Cpbm(theta=theta, m=m, clip=c, dimension=frame.D, n_users=n)
        errs = []
        for _ in range(400):
            y_hat = mech.decode(mech.encode(y, rng).sum(axis=0))
            errs.append(float(np.sum((frame.synthesize(y_hat[None])[0] - x_bar) ** 2)))
        formula = float(expected_squared_error(y, x_bar, frame, [c], m, theta)[0])
        se = np.std(errs) / math.sqrt(len(errs))
        assert abs(np.mean(errs) - formula) < 5.5 * se
        # Theorem 1 (without the sqrt(d) factor for a Parseval frame) bounds the mean error
        assert np.mean(np.sqrt(errs)) <= error_bound(norms, c, frame.D, m, theta)


def test_column_weights_sum_to_d_and_variance_term_by_matrix() -> None:
    x, frame, y = _setup(n=50)
    w = column_weights(frame)
    u = frame.matrix()
    assert np.allclose(w, (u * u).sum(axis=0))
    assert w.sum() == pytest.approx(frame.d)
    # the closed form equals trace(U diag(var) U^T) + ||bias||^2 computed with dense matrices
    c, m, theta = 2.0, 3, 0.25
    n = y.shape[0]
    s = np.minimum(1.0, c / np.linalg.norm(y, axis=1))[:, None]
    yc = y * s
    p = 0.5 + theta / c * yc
    var = (c / (m * n * theta)) ** 2 * (m * p * (1 - p)).sum(axis=0)
    bias = x.mean(axis=0) - u @ yc.mean(axis=0)
    direct = float(bias @ bias + np.trace(u @ np.diag(var) @ u.T))
    got = float(expected_squared_error(y, x.mean(axis=0), frame, [c], m, theta)[0])
    assert got == pytest.approx(direct, rel=1e-9)


def test_best_clip_is_the_grid_minimum() -> None:
    x, frame, y = _setup(n=200)
    grid = np.linspace(0.2, 12.0, 60)
    oracle = best_clip(y, x.mean(axis=0), frame, 5, 0.2, grid=grid, batch=7)
    direct = np.sqrt(expected_squared_error(y, x.mean(axis=0), frame, grid, 5, 0.2))
    assert oracle.clip == grid[int(np.argmin(direct))]
    assert oracle.rmse == pytest.approx(direct.min())
    default = best_clip(y, x.mean(axis=0), frame, 5, 0.2)  # quantile grid of the norms
    median = float(np.median(np.linalg.norm(y, axis=1)))
    at_median = expected_squared_error(y, x.mean(axis=0), frame, [median], 5, 0.2)[0]
    assert default.rmse <= math.sqrt(at_median) + 1e-12
