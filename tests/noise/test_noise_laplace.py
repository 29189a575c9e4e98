"""Statistical tests of the discrete Laplace sampler (CKS Algorithm 2)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from tests.stats import assert_fits, assert_rejects, chi2_cells, chi2_integer

from privhist.core.errors import ValidationError
from privhist.core.random import SecureRandom, SeededRandom
from privhist.noise import DiscreteLaplace, discrete_laplace
from privhist.noise.laplace import laplace_threshold

N = 200_000

SCALES = [
    Fraction(1),
    Fraction(10),
    Fraction(1000),
    Fraction(10, 3),
    Fraction(1, 3),
    Fraction(5000),  # beyond the two-sided table: geometric magnitude with a sign bit
    Fraction(10**6 + 1, 7),  # the split geometric
]


@pytest.mark.parametrize("scale", SCALES, ids=str)
def test_discrete_laplace_fits(scale: Fraction) -> None:
    z = discrete_laplace(scale, SeededRandom(scale.numerator % 1013), N)
    assert z.dtype == np.int64 and z.shape == (N,)
    bound = int(25 * scale) + 3
    assert_fits(chi2_integer(z, DiscreteLaplace(scale), -bound, bound))
    wrong = [DiscreteLaplace(scale * Fraction(f)) for f in ("0.7", "1.3")]
    assert_rejects([chi2_integer(z, w, -bound, bound) for w in wrong])


def test_discrete_laplace_is_symmetric_in_shape() -> None:
    z = discrete_laplace(10, SeededRandom(8), (1000, 3))
    assert z.shape == (1000, 3) and z.dtype == np.int64


def test_discrete_laplace_secure_random_fits() -> None:
    for scale in (Fraction(1), Fraction(1000)):
        z = discrete_laplace(scale, SecureRandom(), N)
        bound = int(25 * scale)
        assert_fits(chi2_integer(z, DiscreteLaplace(scale), -bound, bound))


# -- thresholded draws: only the noise that can reach the threshold ---------------------------


def _threshold_pvalues(
    idx: np.ndarray, values: np.ndarray, counts: np.ndarray, threshold: int, scale: Fraction
) -> list[float]:
    """One chi-square p-value per distinct count: the outcomes "not kept" and each kept value
    (the tail pooled) against the exact law ``P[v] = P[Z = v - count]`` for ``v >= threshold``."""
    law = DiscreteLaplace(scale)
    width = min(int(12 * scale) + 4, 400)
    out = []
    for c in np.unique(counts).tolist():
        gap = threshold - c
        mine = counts[idx] == c
        # kept values threshold + j for j < width, then the pooled tail
        hist = np.bincount(np.minimum(values[mine] - threshold, width), minlength=width + 1)
        observed = [int((counts == c).sum() - mine.sum()), *hist.tolist()]
        probs = [float(1 - law.sf_mp(gap))]
        probs += [float(law.pmf_mp(gap + j)) for j in range(width)]
        probs.append(float(law.sf_mp(gap + width)))
        out.append(chi2_cells(observed, probs))
    return out


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(10, 3), Fraction(5000)], ids=str)
def test_laplace_threshold_keeps_what_the_full_draw_keeps(scale: Fraction) -> None:
    """The law of ``laplace_threshold``: for each count (gaps from 0 to beyond the point where
    only keys whose first byte is 0 draw their noise), the kept share and the kept values fit
    the full draw's exact law; counts are interleaved so that the two paths' indices merge."""
    threshold = 40
    step = max(1, int(scale))
    gaps = list(range(0, int(9 * scale) + 2, step)) if scale < 100 else [0, 1, 1000, 5000]
    per = 200_000 if scale < 100 else 40_000
    counts = np.repeat(np.array([threshold - g for g in gaps], dtype=np.int64), per)
    counts = counts[np.random.default_rng(5).permutation(counts.shape[0])]
    idx, values = laplace_threshold(scale, counts, threshold, SeededRandom(11))
    assert idx.dtype == np.int64 and values.dtype == np.int64
    assert (np.diff(idx) > 0).all() and (values >= threshold).all()
    for p in _threshold_pvalues(idx, values, counts, threshold, scale):
        assert_fits(p)


def test_laplace_threshold_power_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Power check: a variant that skips counts whose noise can still reach the threshold
    without a first byte of 0 (the cut moved from 2**56 to 2**60) is rejected."""
    from privhist.noise import laplace

    monkeypatch.setattr(laplace, "_BYTE", 1 << 60)
    scale, threshold = Fraction(1), 40
    counts = np.repeat(np.array([threshold - g for g in (4, 5)], dtype=np.int64), 200_000)
    idx, values = laplace_threshold(scale, counts, threshold, SeededRandom(12))
    assert_rejects(_threshold_pvalues(idx, values, counts, threshold, scale))


def test_laplace_threshold_validates() -> None:
    with pytest.raises(ValidationError):
        laplace_threshold(1, np.array([[1, 2]]), 3, SeededRandom(0))
    with pytest.raises(ValidationError):
        laplace_threshold(1, np.array([1.5]), 3, SeededRandom(0))
    with pytest.raises(ValidationError):
        laplace_threshold(0, np.array([1]), 3, SeededRandom(0))
    idx, values = laplace_threshold(1, np.zeros(0, dtype=np.int64), 3, SeededRandom(0))
    assert idx.shape == values.shape == (0,)
