"""The ``pws`` histogram (the exact shift of Lemma 5.2) at any delta: the shift pmf on the finer
grid ``2**-B`` and its lazy inversion.

Every pair of neighbouring rows (counts ``i`` and ``i + 1``, "not reported" included) is checked
for (eps, delta)-DP in both directions in exact integers, with ``e^eps`` replaced by an
independent 3000-bit lower bound (no slack), at delta = 1e-30 and 1e-100 per key; one grid unit
more on ``d_0`` breaks it. The draw is checked by a chi-square goodness-of-fit test conditioned
on a uniform far below one 64-bit word, with a power check.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.cli_run import run
from tests.stats import ALPHA

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource, SeededRandom
from privhist.mechanisms.sampling.pws.frequencies import (
    exact_shift_grid,
    exact_shift_pmf,
    verify_shift_pmf,
)
from privhist.mechanisms.sampling.pws.mechanism import PWSHistogram

TINY = [1e-30, 1e-100]
_E_BITS = 2900


def _e_lower_num(eps: float) -> int:
    """``a`` with ``a / 2**2900 <= e^eps`` (3000-bit mpmath, rounded down, then lowered by 1)."""
    with mpmath.workprec(3000):
        v = mpmath.exp(mpmath.mpf(eps))
        return int(mpmath.floor(v * mpmath.mpf(2) ** _E_BITS)) - 1


def _worst_scaled(d: list[int], one: int, a: int) -> int:
    """``2**(B + 2900)`` times the largest hockey-stick divergence with ``e^eps`` replaced by
    ``a / 2**2900``, between rows ``i`` and ``i + 1`` of the shift with pmf ``d / one``, both
    directions, over every ``i`` up to past the support. Row ``i``: token ``i - k`` with ``d_k``
    (``k < i``), not reported with ``T_i = one - sum_(k<i) d_k``."""
    s = len(d)
    ext = [*d, 0, 0]
    scale = 1 << _E_BITS
    worst = 0
    tail = [one]  # tail[i] = T_i
    for k in range(s + 2):
        tail.append(tail[-1] - ext[k])
    for i in range(s + 2):
        up = down = 0  # row i+1 against row i, row i against row i+1
        for j in range(1, i + 2):  # token j: row i has d_(i-j) (j <= i), row i+1 has d_(i+1-j)
            x = ext[i - j] if j <= i else 0
            y = ext[i + 1 - j]
            up += max(0, y * scale - a * x)
            down += max(0, x * scale - a * y)
        up += max(0, tail[i + 1] * scale - a * tail[i])
        down += max(0, tail[i] * scale - a * tail[i + 1])
        worst = max(worst, up, down)
    return worst


@pytest.mark.parametrize("delta", TINY)
@pytest.mark.parametrize("eps", [1.0, 2.5])
def test_shift_is_exactly_dp_at_tiny_delta_both_directions(eps: float, delta: float) -> None:
    bits, d_t = exact_shift_grid(Fraction(eps), Fraction(delta))
    d = list(d_t)
    one = 1 << bits
    assert bits > 62 and sum(d) == one and min(d) > 0
    a = _e_lower_num(eps)
    budget = Fraction(delta) * one * (1 << _E_BITS)
    worst = _worst_scaled(d, one, a)
    assert worst <= budget
    assert worst >= budget * (1 - Fraction(1, 10**15))  # the optimum spends delta
    # power: one grid unit moved onto d_0 breaks it (the exact check and the certificate)
    bad = [d[0] + 1, *d[1:-1], d[-1] - 1]
    assert _worst_scaled(bad, one, a) > budget
    assert not verify_shift_pmf(bad, Fraction(eps), Fraction(delta), bits)
    # reporting probabilities are Algorithm 3's with q = 1 (1000 digits): never above, and
    # within a relative 1e-12 of them
    with mpmath.workdps(1000):
        e, dl = mpmath.exp(mpmath.mpf(eps)), mpmath.mpf(delta)
        opt, cum = mpmath.mpf(0), 0
        for k in range(len(d)):
            opt = min(e * opt + dl, 1 - (1 - opt - dl) / e, mpmath.mpf(1))
            cum += d[k]
            got = mpmath.mpf(cum) / one
            assert got <= opt * (1 + mpmath.mpf(10) ** -900)
            assert got >= opt * (1 - mpmath.mpf(10) ** -12)


def test_the_2_62_shift_still_refuses_and_is_unchanged_where_it_accepts() -> None:
    with pytest.raises(ValidationError, match="exact_shift_grid"):
        exact_shift_pmf(Fraction(1), Fraction(1, 2**50))
    bits, d = exact_shift_grid(Fraction(1), Fraction(1, 1000))
    assert bits == 62 and d == exact_shift_pmf(Fraction(1), Fraction(1, 1000))


class _Conditioned(RandomSource):
    """Words of U conditioned on U < 2**-(64 (1 + zeros) + shift) (as in
    tests/pws/test_pws_any_delta.py)."""

    def __init__(self, inner: RandomSource, zeros: int, shift: int) -> None:
        self.inner, self.zeros, self.shift = inner, zeros, shift
        self.single_calls = 0

    def uint64(self, n: int) -> Any:
        if n != 1:
            return np.zeros(n, dtype=np.uint64)
        self.single_calls += 1
        if self.single_calls % (self.zeros + 1):
            return np.zeros(1, dtype=np.uint64)
        return self.inner.uint64(1) >> np.uint64(self.shift)

    @property
    def description(self) -> str:
        return "conditioned words (tests only)"


@pytest.mark.parametrize(("delta", "zeros", "shift"), [(1e-30, 0, 26), (1e-100, 4, 4)])
def test_lazy_shift_follows_the_conditioned_pmf(delta: float, zeros: int, shift: int) -> None:
    """Keys of count 2000 (above the support: always reported with token ``2000 - K``).
    Conditioned on ``U < c = 2**-(64 (1 + zeros) + shift)``, ``P[K = k] = (min(t_(k+1), c)
    - t_k) / c`` with ``t_k = sum_(h<k) d_h / 2**B``; a chi-square test at alpha 1e-6, and the
    same counts reject the pmf moved by one."""
    m = PWSHistogram(1.0, delta)
    one = 1 << m.grid_bits
    cut = Fraction(1, 2 ** (64 * (1 + zeros) + shift))
    t = [Fraction(int(x), one) for x in m._nums]  # t_0 = 0, t_1 = d_0, ...
    probs = []
    k = 0
    while t[k] < cut:
        probs.append((min(t[k + 1], cut) - t[k]) / cut)
        k += 1
    assert sum(probs) == 1 and 4 <= len(probs) <= 12 and min(probs) > 1e-3
    n, units = 20_000, 2000
    src = _Conditioned(SeededRandom(13), zeros, shift)
    rel = m.release(Counts.from_arrays(np.arange(n), np.full(n, units, dtype=np.int64)), src)
    assert rel.keys.shape[0] == n
    # each key tied on its first word and was decided by word 2 + zeros
    assert src.single_calls == (zeros + 1) * n
    assert rel.values is not None
    shifts = units - np.asarray(rel.values, dtype=np.int64)
    observed = np.bincount(shifts, minlength=len(probs))
    assert observed.shape[0] == len(probs)
    expected = np.array([float(p) for p in probs]) * n
    assert float(stats.chisquare(observed, expected).pvalue) >= ALPHA
    moved = np.roll(expected, 1)  # the pmf moved by one (the last bin wrapped to the front)
    assert float(stats.chisquare(observed, moved).pvalue) < ALPHA


def test_pws_release_at_1e_100_one_word_per_key() -> None:
    class Counting(RandomSource):
        def __init__(self) -> None:
            self.inner, self.words = SeededRandom(17), 0

        def uint64(self, n: int) -> Any:
            self.words += n
            return self.inner.uint64(n)

        @property
        def description(self) -> str:
            return "counting"

    m = PWSHistogram(1.0, 1e-100)
    support = len(m._nums) - 1
    units = np.array([1] * 1000 + [support + 5] * 1000, dtype=np.int64)
    src = Counting()
    rel = m.release(Counts.from_arrays(np.arange(2000), units), src)
    kept = set(rel.keys.tolist())
    assert kept == set(range(1000, 2000))  # 1e-100 each at count 1, always beyond the support
    assert src.words == 2000
    assert m.parameters()["reporting_denominator"] == f"2**{m.grid_bits}"


def test_histogram_mechanism_pws_accepts_tiny_delta(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``privhist histogram --mechanism pws --delta 1e-100``: a key of count 400 (beyond the
    shift's support of 229 L-steps) is released with a token, a key of count 5 is not."""
    data = tmp_path / "in.csv"
    data.write_text("key\n" + "a\n" * 400 + "b\n" * 5)
    code, out, err = run(
        capsys,
        *["histogram", str(data), "--key", "key", "--mechanism", "pws"],
        *["--epsilon", "1", "--delta", "1e-100", "--seed", "1"],
    )
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0] == "key,shifted_count,estimate"
    assert [line.split(",")[0] for line in lines[1:]] == ["a"]
    assert "1e-100" in err
