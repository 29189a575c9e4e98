"""The pws key sanitiser at any delta: Algorithm 3 on the finer grid ``2**-B`` and the lazy draw.

The end-to-end law of a key of frequency ``i`` ("reported" with ``N_i / 2**B``, "not reported"
otherwise) is checked for (eps, delta)-DP between neighbouring frequencies in both directions in
exact rationals, with ``e^eps`` replaced by an independent 3000-bit lower bound (no slack), at
delta = 1e-30 and 1e-100 per key; one grid unit more breaks it. The lazy draw is checked by a
binomial goodness-of-fit test conditioned on a uniform far below one 64-bit word.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.cli_run import run
from tests.stats import ALPHA

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource, SeededRandom
from privhist.mechanisms._grid import ONE
from privhist.mechanisms.sampling.pws import schemes as S
from privhist.mechanisms.sampling.pws.keys import (
    exact_reporting_grid,
    grid_reporting_numerators,
    grid_reporting_table,
)
from privhist.mechanisms.sampling.pws.sanitize import key_numerators, key_table, sanitize_keys

TINY = [1e-30, 1e-100]


def _e_lower(eps: float) -> Fraction:
    """A rational lower bound on e^eps (3000 bits, rounded down, then lowered by 2**-2900)."""
    with mpmath.workprec(3000):
        v = mpmath.exp(mpmath.mpf(eps))
        num = int(mpmath.floor(v * mpmath.mpf(2) ** 2900))
    return Fraction(num - 1, 2**2900)


def _mp_algorithm3(q: list[Fraction], eps: float, delta: float) -> list[Any]:
    """Algorithm 3 (Cohen et al., Section 4) at 1000 digits, from the exact grid q."""
    with mpmath.workdps(1000):
        e, d = mpmath.exp(mpmath.mpf(eps)), mpmath.mpf(delta)
        out = [mpmath.mpf(0)]
        for qi in q[1:]:
            p = out[-1]
            qm = mpmath.mpf(qi.numerator) / qi.denominator
            out.append(min(qm, e * p + d, 1 - (1 - p - d) / e))
        return out


def _worst_divergence(pis: list[Fraction], lower: Fraction) -> Fraction:
    """The largest hockey-stick divergence between neighbouring frequencies, both directions."""
    worst = Fraction(0)
    for a, b in itertools.pairwise(pis):
        p, q = (1 - a, a), (1 - b, b)  # (not reported, reported) at i and i + 1
        for x, y in ((p, q), (q, p)):
            h = sum((max(Fraction(0), xi - lower * yi) for xi, yi in zip(x, y, strict=True)))
            worst = max(worst, h)
    return worst


@pytest.mark.parametrize("delta", TINY)
@pytest.mark.parametrize(("scheme", "tau", "eps"), [("ppswor", 0.05, 0.5), ("priority", 0.3, 1.0)])
def test_key_sanitiser_is_exactly_dp_at_tiny_delta(
    delta: float, scheme: str, tau: float, eps: float
) -> None:
    m = 3000
    sample = S.WeightedSample(np.array(["x"]), np.array([m]), scheme, tau)  # type: ignore[arg-type]
    bits, Q, N = key_table(sample, eps, delta, m)
    assert bits > 62
    one = 1 << bits
    d = Fraction(delta)
    assert Fraction(1, one) <= d * Fraction(1, 2**62)  # the grid is 62 bits finer than delta
    qs = [Fraction(int(x), ONE) for x in Q]
    pis = [Fraction(int(n), one) for n in N]
    assert pis[0] == 0 and pis[-1] == 1
    for pi, qi in zip(pis, qs, strict=True):
        assert pi <= qi  # realisable: never above the sampling probability
    lower = _e_lower(eps)
    worst = _worst_divergence(pis, lower)
    assert worst <= d
    assert worst >= d * (1 - Fraction(1, 10**15))  # the optimum spends delta
    # power: one grid unit more on pi_1 (2**-B) breaks the constraint from frequency 0
    raised = [*pis]
    raised[1] += Fraction(1, one)
    assert _worst_divergence(raised[:3], lower) > d
    # and it is Algorithm 3: never above the real-valued optimum, within 1e-12 of it
    opt = _mp_algorithm3(qs, eps, delta)
    for pi, o in zip(pis, opt, strict=True):
        with mpmath.workdps(1000):
            piv = mpmath.mpf(pi.numerator) / pi.denominator
            assert piv <= o * (1 + mpmath.mpf(10) ** -900)
            if o > 0:
                assert piv >= o * (1 - mpmath.mpf(10) ** -12)


@pytest.mark.parametrize("delta", TINY)
def test_q_one_grid_matches_optimal_selection_and_is_exactly_dp(delta: float) -> None:
    eps = 0.7
    bits, N = exact_reporting_grid(eps, delta)
    pis = [Fraction(int(n), 1 << bits) for n in N]
    lower = _e_lower(eps)
    assert pis[-1] == 1
    assert _worst_divergence(pis, lower) <= Fraction(delta)
    raised = [pis[0], pis[1] + Fraction(1, 1 << bits), pis[2]]
    assert _worst_divergence(raised, lower) > Fraction(delta)
    # the same recursion through explicit q = 1 (Q = 2**62 everywhere)
    Q = np.array([0] + [ONE] * (len(N) + 2), dtype=np.int64)
    bits2, N2 = grid_reporting_table(eps, delta, Q)
    assert bits2 == bits
    assert [int(x) for x in N2[: len(N)]] == [int(x) for x in N]


def test_the_2_62_functions_refuse_tiny_delta_naming_the_any_delta_ones() -> None:
    Q = np.array([0, ONE, ONE], dtype=np.int64)
    with pytest.raises(ValidationError, match="grid_reporting_table"):
        grid_reporting_numerators(1.0, 1e-30, Q)
    sample = S.WeightedSample(np.array(["x"]), np.array([5]), "ppswor", 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="key_table"):
        key_numerators(sample, 1.0, 1e-30, 5)
    # at delta >= 2**-62 the grid and the numbers are unchanged
    assert grid_reporting_table(1.0, 0.25, Q)[0] == 62
    assert grid_reporting_numerators(1.0, 0.25, Q).tolist() == [
        int(x) for x in grid_reporting_table(1.0, 0.25, Q)[1]
    ]


class _Conditioned(RandomSource):
    """Words of U conditioned on U < 2**-(64 (1 + zeros) + shift): a vector call (the first
    words) gives zeros; each key's tie then draws words one at a time, of which the first
    ``zeros`` are zero and the next has its top ``shift`` bits zero."""

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


def _binomial_p(k: int, n: int, p: float) -> float:
    return float(stats.binomtest(k, n, p).pvalue)


@pytest.mark.parametrize(("delta", "zeros", "shift"), [(1e-30, 0, 26), (1e-100, 4, 4)])
def test_lazy_keep_follows_the_conditioned_probability(
    delta: float, zeros: int, shift: int
) -> None:
    """Every key has frequency 1 and is in the sample; it is kept with ``p = N_1 / (Q_1
    2**(B-62))`` (about delta / q_1). Conditioned on ``U < 2**-c``, ``P[kept] = p 2**c``."""
    n, eps, tau = 60_000, 0.5, 0.05
    sample = S.WeightedSample(np.arange(n), np.ones(n, dtype=np.int64), "ppswor", tau)  # type: ignore[arg-type]
    bits, Q, N = key_table(sample, eps, delta, 1)
    p = Fraction(int(N[1]), int(Q[1]) << (bits - 62))
    c = 64 * (1 + zeros) + shift
    target = float(p * 2**c)
    assert 0.01 < target < 0.2  # the first word of U alone never decides
    src = _Conditioned(SeededRandom(7), zeros, shift)
    kept = len(sanitize_keys(sample, eps, delta, src))
    # every key tied on its first word and was decided by word 2 + zeros (a tie there has
    # probability 2**-(64 - shift))
    assert src.single_calls == (zeros + 1) * n
    assert _binomial_p(kept, n, target) >= ALPHA
    # power: probabilities 25 % off are rejected at this sample size (about 10 sd away)
    assert _binomial_p(kept, n, target * 1.25) < ALPHA
    assert _binomial_p(kept, n, target / 1.25) < ALPHA


def test_tiny_delta_release_keeps_the_sure_keys_with_one_word_per_key() -> None:
    class Counting(RandomSource):
        def __init__(self) -> None:
            self.inner, self.words = SeededRandom(11), 0

        def uint64(self, n: int) -> Any:
            self.words += n
            return self.inner.uint64(n)

        @property
        def description(self) -> str:
            return "counting"

    freqs = np.array([1] * 1000 + [5000] * 1000, dtype=np.int64)
    sample = S.WeightedSample(np.arange(2000), freqs, "priority", 1.0)  # type: ignore[arg-type]
    src = Counting()
    kept = set(sanitize_keys(sample, 1.0, 1e-100, src).keys.tolist())
    assert set(range(1000, 2000)) <= kept  # reporting probability 1 at frequency 5000
    assert not kept & set(range(1000))  # 1e-100 each
    assert src.words == 2000  # more words only on a tie (probability 2**-64 each)


def test_sample_keys_only_accepts_tiny_delta(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``privhist sample --keys-only`` at delta = 1e-100: the keys of large frequency are
    released, the ones of frequency 1 are not (1e-100 each)."""
    data = tmp_path / "in.csv"
    rows = [f"s{i},1" for i in range(200)] + [f"b{i},100000" for i in range(20)]
    data.write_text("key,w\n" + "\n".join(rows) + "\n")
    code, out, err = run(
        capsys,
        *["sample", str(data), "--key", "key", "--weight", "w", "--tau", "1"],
        *["--scheme", "priority", "--epsilon", "1", "--delta", "1e-100", "--keys-only"],
        *["--max-frequency", "100000", "--seed", "3"],
    )
    assert code == 0, err
    rows = out.strip().splitlines()
    assert rows[-1].startswith("# privhist integrity: rows=20 ")  # the file's bytes, sealed
    released = {line.split(",")[0] for line in rows[1:-1]}
    assert released == {f"b{i}" for i in range(20)}
    assert "1e-100" in err
