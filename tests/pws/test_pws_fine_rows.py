"""Sanitized frequencies at any delta: Algorithms 4 and 5 on a grid finer than ``2**-62``
(:mod:`privhist.mechanisms.sampling.pws.fine_rows`), checked by exact hockey-stick divergences
in both directions, against Algorithm 3's optimal reporting probabilities in high precision, and
by goodness-of-fit of the draw, including the tie path that reads the low bits."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from tests.pws.test_pws_audit import Words
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import NOT_RELEASED, check_dp
from privhist.mechanisms._grid import ONE
from privhist.mechanisms.sampling.pws import schemes as S
from privhist.mechanisms.sampling.pws.fine_rows import (
    fine_grid_bits,
    fine_to_float,
    fine_token_rows,
    needs_fine_grid,
    verify_fine_rows,
)
from privhist.mechanisms.sampling.pws.frequencies import integer_token_matrix
from privhist.mechanisms.sampling.pws.keys import reporting_probabilities_mp
from privhist.mechanisms.sampling.pws.sanitize import (
    grid_frequency_sanitizer,
    sanitize_frequencies,
)


def _row(E: Any, i: int, bits: int) -> dict[Any, Fraction]:
    one = 1 << bits
    row: dict[Any, Fraction] = {NOT_RELEASED: Fraction(int(E[i, 0]), one)}
    for j in range(1, E.shape[1]):
        if int(E[i, j]):
            row[j] = Fraction(int(E[i, j]), one)
    return row


def _exact_dp(E: Any, bits: int, eps: float, delta: float) -> float:
    """Largest divergence over neighbouring rows, both directions (exact rationals); asserts
    each pair holds."""
    worst = 0.0
    for i in range(1, E.shape[0]):
        res = check_dp(_row(E, i - 1, bits), _row(E, i, bits), eps, delta)
        assert res.holds, (i, res)
        worst = max(worst, float(res.worst))
    return worst


TINY = [
    ("ppswor", 0.3, 1.0, 1e-30, 14),
    ("priority", 0.05, 0.5, 1e-20, 12),
    ("ppswor", 0.2, 2.0, 1e-200, 10),
]


@pytest.mark.parametrize(("scheme", "tau", "eps", "delta", "m"), TINY)
@pytest.mark.parametrize("rule", ["integer-tokens", "max-separation"])
def test_fine_rows_are_exactly_dp_at_tiny_delta(
    scheme: str, tau: float, eps: float, delta: float, m: int, rule: str
) -> None:
    """Every pair of neighbouring rows ("not reported" an output) is (eps, delta)-DP in both
    directions, in exact rationals; the rows are realisable from the sample; most of delta is
    used (the construction is not trivially loose)."""
    Q = S.grid_inclusion(np.arange(m + 1), scheme, tau)  # type: ignore[arg-type]
    assert (Q[1:] < ONE).any()
    san = grid_frequency_sanitizer(Q, eps, delta, rule=rule)
    E, bits = san.end_to_end, san.bits
    assert bits == fine_grid_bits(delta, eps) > 62 and san.certified and not san.exact
    one = 1 << bits
    for i in range(m + 1):
        body = [int(x) for x in E[i, 1:]]
        assert min(body) >= 0 and sum(body) <= int(Q[i]) << (bits - 62)
        assert int(E[i, 0]) + sum(body) == one
    worst = _exact_dp(E, bits, eps, delta)
    assert delta / 2 < worst <= delta
    # the divergence is measured, not assumed: half the delta is refused
    assert not all(
        check_dp(_row(E, i - 1, bits), _row(E, i, bits), eps, delta / 2).holds
        for i in range(1, m + 1)
    )


@pytest.mark.parametrize(("scheme", "tau", "eps", "delta", "m"), TINY[:2])
def test_fine_reporting_is_optimal(
    scheme: str, tau: float, eps: float, delta: float, m: int
) -> None:
    """Row sums are Algorithm 3's optimal reporting probabilities (computed independently in
    mpmath at 400 bits) up to a relative 1e-12: the slack and rounding cost nothing visible."""
    Q = S.grid_inclusion(np.arange(m + 1), scheme, tau)  # type: ignore[arg-type]
    san = grid_frequency_sanitizer(Q, eps, delta)
    one = 1 << san.bits
    with mpmath.workprec(400):
        q = np.array([float(Fraction(int(x), ONE)) for x in Q])
        pi, _, _, _ = reporting_probabilities_mp(q, eps, delta)
        for i in range(1, m + 1):
            got = mpmath.mpf(int(san.end_to_end[i, 1:].sum())) / one
            assert got <= pi[i] * (1 + mpmath.mpf(2) ** -50)
            assert abs(got - pi[i]) <= pi[i] * mpmath.mpf(10) ** -12, i


def test_no_sampling_at_tiny_delta_uses_the_exact_shift() -> None:
    """``q_i = 1`` for every frequency: the certified shift of Lemma 5.2 on its finer grid;
    exactly DP both ways, and reporting ``delta`` at frequency 1."""
    eps, delta, m = 1.0, 1e-40, 30
    Q = np.array([0] + [ONE] * m, dtype=np.int64)
    san = grid_frequency_sanitizer(Q, eps, delta)
    assert san.exact and san.bits > 62
    E, bits = san.end_to_end, san.bits
    assert int(E[1, 1]) == int(Fraction(delta) * (1 << bits))  # pi_1 = delta on the grid
    assert _exact_dp(E, bits, eps, delta) > delta / 2


def test_integer_algorithm4_is_algorithm4() -> None:
    """The integer construction, run at a large delta on a fine grid, reproduces the double
    precision Algorithm 4 entry by entry (to 1e-12); with a few units of slack it certifies."""
    m, eps, delta, bits = 30, 1.0, 1e-3, 140
    Q = S.grid_inclusion(np.arange(m + 1), "ppswor", 0.3)
    E = fine_token_rows(Q, eps, delta, bits, 0)
    F = np.asarray(integer_token_matrix(Q / ONE, eps, delta), dtype=np.float64)
    assert np.abs(fine_to_float(E, bits) - F).max() < 1e-12
    assert verify_fine_rows(fine_token_rows(Q, eps, delta, bits, 10**6), Q, eps, delta, bits)


def test_verifier_rejects_one_unit_too_much() -> None:
    """Power of the certificate on the fine grid: moving a grid unit of mass from "not reported"
    to frequency 1's token breaks delta (pi_1 = delta is tight) and is refused, as the exact
    check agrees."""
    eps, delta, m = 1.0, 1e-25, 8
    Q = S.grid_inclusion(np.arange(m + 1), "ppswor", 0.5)
    san = grid_frequency_sanitizer(Q, eps, delta)
    E, bits = san.end_to_end.copy(), san.bits
    assert verify_fine_rows(E, Q, eps, delta, bits)
    units = int(Fraction(delta) * (1 << bits))
    E[1, 1] = units + 1  # one unit above delta
    E[1, 0] = (1 << bits) - units - 1
    assert not verify_fine_rows(E, Q, eps, delta, bits)
    assert not check_dp(_row(E, 0, bits), _row(E, 1, bits), eps, delta).holds


def test_fine_draw_follows_the_certified_law() -> None:
    """Sample then sanitise at delta = 1e-20: token counts (not reported an outcome) fit the
    certified end-to-end row at alpha = 1e-6; the neighbouring rows are rejected (power)."""
    eps, delta, tau, m, n, freq = 1.0, 1e-20, 0.08, 60, 40000, 52
    rng = SeededRandom(23)
    s = S.threshold_sample(np.arange(n), np.full(n, freq), "ppswor", tau, rng)
    out = sanitize_frequencies(s, eps, delta, rng, max_frequency=m)
    assert out.metadata["grid_bits"] > 62
    san = grid_frequency_sanitizer(S.grid_inclusion(np.arange(m + 1), "ppswor", tau), eps, delta)
    obs = np.bincount(out.tokens, minlength=m + 1).astype(float)
    obs[0] = n - len(out)
    assert obs[1:].sum() > 1000

    table = fine_to_float(san.end_to_end, san.bits)

    def law(i: int) -> np.ndarray[Any, Any]:
        row: np.ndarray[Any, Any] = table[i]
        return row

    assert_fits(chi2_cells(obs, law(freq), max_cells=None))
    assert_rejects(chi2_cells(obs, law(freq - 1), max_cells=None))
    assert_rejects(chi2_cells(obs, law(freq + 1), max_cells=None))


def test_a_tie_of_the_high_parts_is_decided_by_the_low_bits() -> None:
    """``V_hi`` equal to the high part of a cumulative sum: the token depends on the low bits
    exactly as ``C <= V`` says (low part of ``V`` just below and at the threshold's)."""
    eps, delta, m, freq = 1.0, 1e-30, 12, 12
    s = S.threshold_sample(np.arange(3), np.full(3, freq), "priority", 1.0, SeededRandom(1))
    Q = S.grid_inclusion(np.arange(m + 1), "priority", 1.0)
    assert int(Q[freq]) == ONE  # the high part is the top 62 bits of one word
    san = grid_frequency_sanitizer(Q, eps, delta)
    shift = san.bits - 62
    C = np.cumsum(san.end_to_end[freq, 1:])
    c = int(np.flatnonzero(C > 0)[0]) + 2  # a threshold with non-zero low part
    while int(C[c]) & ((1 << shift) - 1) == 0:
        c += 1
    hi, lo = int(C[c]) >> shift, int(C[c]) & ((1 << shift) - 1)
    words_lo = (shift + 63) // 64

    def low_words(value: int) -> list[int]:
        value <<= words_lo * 64 - shift  # randbelow keeps the top bits of its words
        return [(value >> (64 * (words_lo - 1 - k))) & (2**64 - 1) for k in range(words_lo)]

    def token(v_lo: int) -> int:
        rng = Words([hi << 2, *low_words(v_lo)])
        one = S.WeightedSample(s.keys[:1], s.frequencies[:1], s.scheme, s.tau)
        out = sanitize_frequencies(one, eps, delta, rng, max_frequency=m)
        return int(out.tokens[0]) if len(out) else 0

    below, at = token(lo - 1), token(lo)
    assert at == below + 1  # C_c <= V only once V_lo reaches the low part of C_c
    assert int(C[below - 2]) <= (hi << shift) + lo - 1 < int(C[below - 1])


def test_size_limits_at_tiny_delta_are_named() -> None:
    """The integer matrices grow like m**2 (Python ints) and Algorithm 5 in high precision like
    m**2 mpmath operations: the sizes above the limits are refused naming the limit, before any
    matrix is built."""
    Q = S.grid_inclusion(np.arange(302), "ppswor", 0.01)
    with pytest.raises(ValidationError, match="<= 200"):
        grid_frequency_sanitizer(Q, 1.0, 1e-20, rule="max-separation")
    Q = S.grid_inclusion(np.arange(2002), "ppswor", 0.01)
    with pytest.raises(ValidationError, match="<= 2000"):
        grid_frequency_sanitizer(Q, 1.0, 1e-20)
    assert needs_fine_grid(1e-13) and not needs_fine_grid(1e-12)


def test_cli_releases_frequencies_at_tiny_delta(tmp_path: Path) -> None:
    """``privhist sample`` with ``--delta 1e-30`` (refused before) releases, and states it."""
    data = tmp_path / "w.csv"
    rows = ["key,weight"] + [f"k{i},{1 + (i * 37) % 300}" for i in range(400)]
    data.write_text("\n".join(rows) + "\n")
    out = tmp_path / "o.csv"
    cmd = [sys.executable, "-m", "privhist", "sample", str(data), "--key", "key"]
    cmd += ["--weight", "weight", "--epsilon", "1", "--delta", "1e-30", "--tau", "0.5"]
    cmd += ["--max-frequency", "300", "--seed", "3", "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "(1.0, 1e-30)-DP" in res.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("key,token,estimate") and len(lines) > 10


def test_plan_shows_the_certified_matrix_at_tiny_delta() -> None:
    """``plan pws --frequencies`` prints the matrix a release draws from: at delta = 1e-30 with
    sampling, frequency 1 is reported with probability delta (Algorithm 3's pi_1) and every row
    sums to the reporting probability of the keys-only table."""
    from privhist.cli.planners.pws import build_plan

    plan = build_plan(1.0, 1e-30, 80, sampling="ppswor", tau=0.1, frequencies=True)
    rows = plan["frequency_matrix"]
    assert math.isclose(rows[1][1], 1e-30, rel_tol=1e-12)
    pi = plan["reporting_probability"]
    assert all(math.isclose(sum(rows[i][1:]), pi[i], rel_tol=1e-9) for i in range(1, 81))


def test_verifier_rejects_a_not_reported_excess_and_unrealisable_or_negative_rows() -> None:
    """Power of the certificate beyond one token: (a) tokens of row 2 exactly ``r`` times row
    1's, so the tokens pass both ways, but "not reported" breaks delta from row 1 to row 2;
    (b) a DP matrix whose row reports more than the sample holds; (c) a negative entry."""
    bits, one = 100, 1 << 100
    eps, delta = 1.0, 0.36
    r_float = math.e * (1 - 1e-12)
    a1 = int(0.36 * one)
    b1 = int(r_float * a1)
    E = np.array(
        [[one, 0, 0], [one - a1, a1, 0], [one - b1, b1, 0]],
        dtype=object,
    )
    Q = [0, 2**62, 2**62]
    assert not verify_fine_rows(E, Q, eps, delta, bits)
    res = check_dp(_row(E, 1, bits), _row(E, 2, bits), eps, delta)
    assert not res.holds and float(res.delta_pq) > delta  # row 1 over row 2
    E_ok = E.copy()
    E_ok[2, 1], E_ok[2, 0] = a1, one - a1  # row 2 = row 1: certified
    assert verify_fine_rows(E_ok, Q, eps, delta, bits)
    # (b) realisability: the same DP matrix against a sample that includes less
    m = 8
    Qs = S.grid_inclusion(np.arange(m + 1), "ppswor", 0.5)
    san = grid_frequency_sanitizer(Qs, 1.0, 1e-25)
    assert verify_fine_rows(san.end_to_end, Qs, 1.0, 1e-25, san.bits)
    less = Qs.copy()
    less[m] = (int(san.end_to_end[m, 1:].sum()) >> (san.bits - 62)) - 1  # sample holds less
    assert int(san.end_to_end[m, 1:].sum()) > int(less[m]) << (san.bits - 62)
    assert not verify_fine_rows(san.end_to_end, less, 1.0, 1e-25, san.bits)
    # (c) a negative entry balanced by "not reported"
    neg = san.end_to_end.copy()
    neg[m, 1] -= int(neg[m, 1]) + 1
    neg[m, 0] = (1 << san.bits) - int(neg[m, 1:].sum())
    assert not verify_fine_rows(neg, Qs, 1.0, 1e-25, san.bits)


@pytest.mark.parametrize(
    ("eps", "delta", "tau", "m", "rule"),
    [
        (5.0, 1e-60, 0.5, 40, "max-separation"),  # masses near 1 at a tiny delta
        (30.0, 1e-30, 0.05, 20, "integer-tokens"),  # a grid unit costs e^30 units
        (26.0, 1e-12, 0.5, 30, "integer-tokens"),  # the double rows fail: the fine grid takes over
    ],
)
def test_hard_corners_are_certified_and_exactly_dp(
    eps: float, delta: float, tau: float, m: int, rule: str
) -> None:
    """Corners a review found refused: Algorithm 5 once reporting probabilities are large (the
    certificate's ``r`` is now within ``2**-(B + 64)`` of ``e^eps``), very large epsilon (the
    grid has ``e^eps`` more room), and delta above ``2**-42`` where the double-precision rows
    fail their certificate. Each is built, and exactly DP in both directions."""
    Q = S.grid_inclusion(np.arange(m + 1), "ppswor", tau)
    san = grid_frequency_sanitizer(Q, eps, delta, rule=rule)
    assert san.bits > 62 and san.delta_used > delta * (1 - 2.0**-20)
    assert float(san.matrix[:, 1:].sum(axis=1).max()) > 0.5
    _exact_dp(san.end_to_end, san.bits, eps, delta)


def test_float_view_keeps_full_precision_below_1e_285() -> None:
    """The estimators' float matrix at delta = 1e-300: frequency 1's report is delta to a
    relative 1e-12 (it was quantised to 2**-1000 before, 7 % off)."""
    Q = S.grid_inclusion(np.arange(9), "ppswor", 0.5)
    san = grid_frequency_sanitizer(Q, 1.0, 1e-300)
    assert san.bits > 1000
    assert math.isclose(float(san.matrix[1, 1]), 1e-300, rel_tol=1e-12)
