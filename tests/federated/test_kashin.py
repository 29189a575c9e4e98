"""Tight frames and the Lyubarskii-Vershynin iteration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.federated import kashin
from privhist.federated.kashin import (
    HadamardFrame,
    OrthogonalFrame,
    kashin_representation,
    standard_normal,
    walsh_hadamard_rows,
)


@pytest.mark.parametrize("frame_cls", [OrthogonalFrame, HadamardFrame])
def test_frames_are_parseval(frame_cls: type) -> None:
    f = frame_cls(37, 128, SeededRandom(4))
    u = f.matrix()
    assert u.shape == (37, 128)
    assert np.allclose(u @ u.T, np.eye(37), atol=1e-12)
    x = standard_normal(SeededRandom(1), 5 * 37).reshape(5, 37)
    assert np.allclose(f.analyze(x), x @ u)
    y = standard_normal(SeededRandom(2), 5 * 128).reshape(5, 128)
    assert np.allclose(f.synthesize(y), y @ u.T)


def test_fwht_matches_sylvester_matrix() -> None:
    from scipy.linalg import hadamard

    for k in (1, 3, 6, 7, 9):
        x = standard_normal(SeededRandom(k), 3 << k).reshape(3, 1 << k)
        assert np.allclose(walsh_hadamard_rows(x), x @ hadamard(1 << k), atol=1e-9)


@pytest.mark.parametrize("frame_cls", [OrthogonalFrame, HadamardFrame])
@pytest.mark.parametrize(("eta", "nu"), [(0.5, 0.5), (0.9, 0.25)])
def test_kashin_bound_and_reconstruction(frame_cls: type, eta: float, nu: float) -> None:
    d, big, r = 100, 256, 8
    f = frame_cls(d, big, SeededRandom(7))
    rng = SeededRandom(8)
    sparse = np.zeros((3, d))
    sparse[0, 0] = 100.0
    sparse[1, :5] = [50, 20, 10, 5, 1]
    sparse[2, ::7] = 3.0
    dense = standard_normal(rng, 20 * d).reshape(20, d)
    for x in (sparse, dense, np.abs(dense) ** 3):
        res = kashin_representation(f, x, eta=eta, nu=nu, iterations=r)
        norms = np.linalg.norm(x, axis=1)
        level = 1 / ((1 - eta) * np.sqrt(nu))
        assert res.level == pytest.approx(level)
        assert (np.abs(res.coefficients).max(axis=1) <= level * norms / np.sqrt(big) + 1e-12).all()
        recon = f.synthesize(res.coefficients)
        err = np.linalg.norm(x - recon, axis=1)
        assert np.allclose(err, res.residual, atol=1e-9)
        assert (err <= eta**r * norms + 1e-9).all()


def test_box_muller_normals() -> None:
    z = standard_normal(SeededRandom(3), 200_000)
    assert stats.kstest(z, "norm").pvalue > ALPHA
    assert stats.kstest(z, "norm", args=(0.03, 1)).pvalue < ALPHA  # power


def test_bad_frames() -> None:
    with pytest.raises(ValidationError):
        HadamardFrame(10, 24, SeededRandom(0))
    with pytest.raises(ValidationError):
        OrthogonalFrame(10, 5, SeededRandom(0))
    with pytest.raises(ValidationError):
        OrthogonalFrame(0, 5, SeededRandom(0))
    f = HadamardFrame(4, 8, SeededRandom(0))
    with pytest.raises(ValidationError):
        kashin_representation(f, np.ones((1, 4)), eta=1.0)
    with pytest.raises(ValidationError):
        kashin_representation(f, np.ones((1, 5)))


def _reference_lv(frame_matrix: np.ndarray, x: np.ndarray, eta: float, nu: float, r: int):
    """The Lyubarskii-Vershynin iteration exactly as written (dense U, one vector at a time)."""
    u = frame_matrix
    big = u.shape[1]
    coeffs = np.zeros((x.shape[0], big))
    resid = np.zeros(x.shape[0])
    for i, v in enumerate(x):
        level = np.linalg.norm(v) / np.sqrt(nu * big)
        res = v.copy()
        for _ in range(r):
            full = u.T @ res
            b = np.clip(full, -level, level)
            res = res - u @ b
            coeffs[i] += b
            level *= eta
            if (b == full).all():
                res[:] = 0.0
                break
        resid[i] = np.linalg.norm(res)
    return coeffs, resid


@pytest.mark.parametrize("frame_cls", [OrthogonalFrame, HadamardFrame])
def test_gram_matrix(frame_cls: type) -> None:
    f = frame_cls(21, 64, SeededRandom(3))
    u = f.matrix()
    g = f.gram()
    assert np.allclose(g, u.T @ u, atol=1e-13)
    e = standard_normal(SeededRandom(4), 3 * 64).reshape(3, 64)
    assert np.allclose(f.gram_apply(e), e @ u.T @ u, atol=1e-12)


@pytest.mark.parametrize("sparse_per_row", [0, 12, 10**9])
@pytest.mark.parametrize("frame_cls", [OrthogonalFrame, HadamardFrame])
def test_iteration_matches_the_direct_algorithm(
    frame_cls: type, sparse_per_row: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks, threads, the sparse excess and the G e_t recursion give the coefficients and
    residuals of the iteration as written, on vectors that need 1 to r steps and on zero rows;
    ``sparse_per_row`` 0 forces two transforms per step, 10**9 the sparse Gram product."""
    monkeypatch.setattr(kashin, "SPARSE_PER_ROW", sparse_per_row)
    monkeypatch.setattr(kashin, "KASHIN_BLOCK", 7)  # several blocks, a partial last one
    d, big = 40, 64
    f = frame_cls(d, big, SeededRandom(5))
    x = standard_normal(SeededRandom(6), 30 * d).reshape(30, d) ** 3
    x[3] = 0.0
    x[4] = 0.0
    x[4, 2] = 5.0  # one item: its U^T x needs no truncation for the Hadamard frame
    for eta, nu, r in ((0.5, 0.5, 8), (0.5, 0.5, 2), (0.9, 0.25, 5)):
        ref_c, ref_r = _reference_lv(f.matrix(), x, eta, nu, r)
        res = kashin_representation(f, x, eta=eta, nu=nu, iterations=r)
        assert np.allclose(res.coefficients, ref_c, atol=1e-9)
        assert np.allclose(res.residual, ref_r, atol=1e-9)
    assert (res.coefficients[3] == 0).all() and res.residual[3] == 0


def test_threads_do_not_change_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    f = HadamardFrame(100, 256, SeededRandom(1))
    x = np.abs(standard_normal(SeededRandom(2), 600 * 100).reshape(600, 100)) ** 4
    monkeypatch.setattr(kashin, "KASHIN_BLOCK", 64)
    monkeypatch.setattr(kashin, "KASHIN_THREADS", 1)
    one = kashin_representation(f, x)
    monkeypatch.setattr(kashin, "KASHIN_THREADS", 3)
    three = kashin_representation(f, x)
    assert np.array_equal(one.coefficients, three.coefficients)
    assert np.array_equal(one.residual, three.residual)


@pytest.mark.parametrize("max_bits", [1, 2, 7])
def test_fwht_factorisations_and_blocks(max_bits: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two, three or more Kronecker factors (the products alternate between two buffers) and
    inputs longer than one block give the Sylvester-Hadamard product."""
    from scipy.linalg import hadamard

    monkeypatch.setattr(kashin, "_MAX_FACTOR_BITS", max_bits)
    for k in (1, 5, 8):
        x = standard_normal(SeededRandom(k), 300 << k).reshape(300, 1 << k)
        assert np.allclose(walsh_hadamard_rows(x), x @ hadamard(1 << k), atol=1e-9)


@pytest.mark.parametrize("frame_cls", [OrthogonalFrame, HadamardFrame])
def test_in_place_transforms(frame_cls: type) -> None:
    f = frame_cls(30, 64, SeededRandom(9))
    u = f.matrix()
    for n in (5, 300):  # within one block and beyond it
        x = standard_normal(SeededRandom(n), n * 30).reshape(n, 30)
        out = np.full((n, 64), np.nan)
        f.analyze_into(x, out)
        assert np.allclose(out, x @ u, atol=1e-12)
        e = standard_normal(SeededRandom(n + 1), n * 64).reshape(n, 64)
        f.gram_apply_into(e, out)
        assert np.allclose(out, e @ u.T @ u, atol=1e-12)
        assert np.allclose(f.gram_apply(e), e @ u.T @ u, atol=1e-12)


@pytest.mark.parametrize("screen", [kashin.SCREEN_FRACTION, 0.0])
@pytest.mark.parametrize("frame_cls", [OrthogonalFrame, HadamardFrame])
def test_count_vectors_match_the_direct_algorithm(
    frame_cls: type, screen: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Zipf count vectors at D = 2 d (the regime of the benchmark): sparse scatter of the items,
    dense steps, then the sparse excess with the gamma ||e||_1 screening (or, with 0, full
    sparse products in every step); coefficients and residuals equal the direct iteration."""
    from privhist.federated.user_data import generate_iid

    monkeypatch.setattr(kashin, "SCREEN_FRACTION", screen)
    monkeypatch.setattr(kashin, "KASHIN_BLOCK", 32)
    d, big = 100, 256
    x = generate_iid(100, d, SeededRandom(11), items_per_user=30).dense()
    f = frame_cls(d, big, SeededRandom(12))
    stopped = []
    for eta, nu, r in ((0.5, 0.5, 8), (0.5, 0.5, 4), (0.5, 0.5, 2), (0.7, 0.3, 6)):
        ref_c, ref_r = _reference_lv(f.matrix(), x, eta, nu, r)
        res = kashin_representation(f, x, eta=eta, nu=nu, iterations=r)
        assert np.allclose(res.coefficients, ref_c, atol=1e-9)
        assert np.allclose(res.residual, ref_r, atol=1e-9)
        stopped.append(int((ref_r > 0).sum()))
    assert stopped[0] == 0 and max(stopped) > 0  # some runs stop vectors with an excess left


def test_screening_bound_is_the_largest_off_diagonal_entry() -> None:
    for f in (HadamardFrame(21, 64, SeededRandom(3)), OrthogonalFrame(21, 64, SeededRandom(3))):
        u = f.matrix()
        g = u.T @ u
        off = np.abs(g - np.diag(np.diag(g))).max()
        assert f._kernel_offdiag() == pytest.approx(off, rel=1e-12)


def test_frame_for_chooses_by_kind_and_size() -> None:
    rng = SeededRandom(3)
    auto_small, auto_large = kashin.frame_for(128, rng), kashin.frame_for(129, rng)
    assert isinstance(auto_small, kashin.OrthogonalFrame) and auto_small.D == 256
    assert isinstance(auto_large, kashin.HadamardFrame) and auto_large.D == 512
    forced = kashin.frame_for(200, rng, "orthogonal")
    assert isinstance(forced, kashin.OrthogonalFrame) and forced.D == 400
    hadamard = kashin.frame_for(20, rng, "hadamard")
    assert isinstance(hadamard, kashin.HadamardFrame) and hadamard.D == 64
    with pytest.raises(ValidationError, match="frame"):
        kashin.frame_for(20, rng, "random")
