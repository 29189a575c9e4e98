"""Algorithm 5 on the release path: the certified integer rows (checked again, independently, in
200-bit arithmetic, both directions, "not reported" included), the certificate's power, the
draws against the rows (goodness of fit at alpha = 1e-6 with a power check), and the Session
and CLI entry (``--frequency-rule max-separation``, formerly ``algorithm5``, still accepted)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import polars as pl
import pytest
from pws_helpers import inclusion_vector
from scipy import stats
from tests.stats import ALPHA

from privhist import SeededRandom, Session, ValidationError
from privhist.cli.main import main
from privhist.mechanisms.optimal_selection import ONE
from privhist.mechanisms.sampling.pws import schemes as S
from privhist.mechanisms.sampling.pws.max_separation import max_separation_pdfs
from privhist.mechanisms.sampling.pws.max_separation_release import max_separation_rows
from privhist.mechanisms.sampling.pws.sanitize import (
    grid_frequency_sanitizer,
    sanitize_frequencies,
    verify_frequency_rows,
)

CASES = [
    ("one", 0.5, 0.01, 24),
    ("ppswor:0.05", 0.5, 0.01, 30),
    ("priority:0.02", 0.3, 0.02, 24),
    ("ppswor:0.5", 1.0, 1e-3, 18),
    ("ppswor:0.1", 1.0, 1e-6, 60),
]


def _grid(kind: str, m: int) -> np.ndarray:
    q = inclusion_vector(kind, m)
    return np.minimum(np.floor(q * float(ONE)), float(ONE)).astype(np.int64)


def _worst_divergence(E: np.ndarray, eps: float) -> mpmath.mpf:
    """max over neighbouring rows and both directions of sum [a - e^eps b]_+ / 2**62, with the
    not-reported mass 2**62 - (row sum) as one more output (200-bit arithmetic)."""
    with mpmath.workprec(200):
        e = mpmath.exp(mpmath.mpf(eps))
        full = [[ONE - int(r[1:].sum())] + [int(v) for v in r[1:]] for r in E]
        worst = mpmath.mpf(0)
        for a, b in itertools.pairwise(full):
            for x, y in ((a, b), (b, a)):
                h = sum((max(mpmath.mpf(0), u - e * v) for u, v in zip(x, y, strict=True)), 0)
                worst = max(worst, h / ONE)
        return worst


@pytest.mark.parametrize(("kind", "eps", "delta", "m"), CASES)
def test_rows_are_dp_realisable_and_close_to_algorithm_5(
    kind: str, eps: float, delta: float, m: int
) -> None:
    Q = _grid(kind, m)
    E, used, x = max_separation_rows(Q, eps, delta)
    assert E.shape == (m + 1, len(x) + 1) and len(x) <= 3 * m
    assert (E[:, 1:] >= 0).all() and not E[0].any()
    assert (E[:, 1:].sum(axis=1) <= Q).all()  # realisable from the sample
    worst = _worst_divergence(E, eps)
    assert worst <= delta  # independent 200-bit check of the certificate
    assert worst > 0.99 * delta  # and the rows use the budget (not trivially private)
    # the released rows are Algorithm 5's (at delta' = used) up to the 2**-62 grid
    P = max_separation_pdfs(Q.astype(float) / float(ONE), eps, used).matrix
    assert np.abs(E[:, 1:] / float(ONE) - P[:, 1:]).max() < 1e-12
    assert delta - used <= delta / 64 + 1e-18


def test_the_certificate_rejects_a_slightly_leakier_matrix() -> None:
    Q = _grid("ppswor:0.05", 30)
    E, _, _ = max_separation_rows(Q, 0.5, 0.01)
    bad = E.copy()
    i = 12
    j = 1 + int(np.argmax(bad[i, 1:]))
    bad[i, j] += int(0.02 * 0.01 * ONE)  # 2% of delta moved from "not reported" to one token
    realisable = np.maximum(Q, bad[:, 1:].sum(axis=1))  # so only the divergence can fail
    assert _worst_divergence(bad, 0.5) > 0.01
    assert not verify_frequency_rows(bad, realisable, 0.5, 0.01)


def test_sanitizer_tables_follow_the_rectangular_matrix() -> None:
    Q = _grid("ppswor:0.1", 40)
    san = grid_frequency_sanitizer(Q, 0.7, 1e-3, rule="max-separation")
    assert san.rule == "max-separation" and san.certified and not san.exact
    K = san.end_to_end.shape[1] - 1
    assert san.estimator.shape == (K + 1,) and san.token_values.shape == (K + 1,)
    assert (np.diff(san.token_values[1:]) > 0).all() and san.token_values[-1] == 40
    assert (san.end_to_end.sum(axis=1) == ONE).all()


@pytest.mark.parametrize("freq", [6, 15])
def test_draws_follow_the_certified_row(freq: int) -> None:
    eps, delta, n, m, tau = 0.5, 0.02, 40000, 30, 0.2
    rng = SeededRandom(31 + freq)
    s = S.threshold_sample(np.arange(n), np.full(n, freq), "ppswor", tau, rng)
    out = sanitize_frequencies(s, eps, delta, rng, max_frequency=m, rule="max-separation")
    assert out.metadata["frequency_rule"] == "max-separation" and out.metadata["certified"]
    Q = s.grid_q(np.arange(m + 1))
    san = grid_frequency_sanitizer(Q, eps, delta, rule="max-separation")
    K = san.end_to_end.shape[1] - 1
    obs = np.bincount(out.tokens, minlength=K + 1).astype(float)
    obs[0] = len(s) - len(out)

    def pvalue(row: np.ndarray) -> float:
        p = row.astype(float).copy()
        p[0] = float(Q[freq]) - p[1:].sum()  # sampled, not reported
        exp = p / p.sum() * len(s)
        keep = exp > 5
        return float(
            stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue
        )

    assert pvalue(san.end_to_end[freq]) > ALPHA
    assert pvalue(san.end_to_end[freq - 1]) < ALPHA  # power: the neighbouring row is rejected
    # each token reports its sanitized value, within (0, m], and the MLE estimate
    assert np.array_equal(out.values, san.token_values[out.tokens])
    assert ((out.values > 0) & (out.values <= m)).all() and np.isfinite(out.estimates).all()


def test_bad_rule_and_sizes_are_named() -> None:
    s = S.threshold_sample(np.arange(10), np.full(10, 3), "ppswor", 0.5, SeededRandom(1))
    with pytest.raises(ValidationError, match="parameter 'rule'"):
        sanitize_frequencies(s, 1.0, 1e-3, SeededRandom(2), rule="algorithm6")
    with pytest.raises(ValidationError, match=r"parameter 'max_frequency'.*1000"):
        sanitize_frequencies(
            s, 1.0, 1e-3, SeededRandom(2), max_frequency=1001, rule="max-separation"
        )


@pytest.fixture
def elements(tmp_path: Path) -> Path:
    gen = np.random.default_rng(5)
    freqs = np.minimum(gen.zipf(1.6, size=300), 80)
    rows = ["item"]
    for k, f in enumerate(freqs.tolist()):
        rows += [f"k{k:03d}"] * f
    p = tmp_path / "elems.csv"
    p.write_text("\n".join(rows) + "\n")
    return p


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_sample_with_algorithm_5_then_estimate(
    capsys: pytest.CaptureFixture[str], elements: Path, tmp_path: Path
) -> None:
    out = tmp_path / "s.csv"
    argv = ["sample", str(elements), "--key", "item", "--tau", "0.05", "--epsilon", "1"]
    argv += ["--delta", "1e-3", "--max-frequency", "100", "--seed", "2", "--output", str(out)]
    code, _, err = _run(capsys, *argv, "--frequency-rule", "max-separation")
    assert code == 0, err
    # the former name by algorithm number is still accepted and gives the same seeded release
    old = tmp_path / "s-old.csv"
    code, _, err = _run(capsys, *argv[:-1], str(old), "--frequency-rule", "algorithm5")
    assert code == 0, err
    assert old.read_bytes() == out.read_bytes()
    df = pl.read_csv(out, comment_prefix="#")
    assert df.columns == ["key", "token", "estimate", "bias", "variance", "sanitized_value"]
    assert (df["token"] >= 1).all() and (df["sanitized_value"] > 0).all()
    assert (df["sanitized_value"] <= 100).all()
    code, o, err = _run(capsys, "estimate", str(out), "--json")
    assert code == 0, err
    assert json.loads(o)["estimate"] == pytest.approx(df["estimate"].sum())


@pytest.mark.parametrize("rule", ["max-separation", "algorithm5"])
def test_cli_refuses_algorithm_5_with_keys_only(
    capsys: pytest.CaptureFixture[str], elements: Path, rule: str
) -> None:
    argv = ["sample", str(elements), "--key", "item", "--tau", "0.05", "--epsilon", "1"]
    code, out, err = _run(capsys, *argv, "--delta", "1e-3", "--keys-only", "--frequency-rule", rule)
    assert code == 2 and out == "" and "--frequency-rule" in err


def test_session_weighted_sample_with_algorithm_5(elements: Path) -> None:
    kwargs: dict[str, Any] = dict(
        key="item", tau=0.05, epsilon=1.0, delta=1e-3, max_frequency=100, seed=3
    )
    ws = Session().weighted_sample(str(elements), frequency_rule="max-separation", **kwargs)
    assert ws.metadata["frequency_rule"] == "max-separation" and ws.metadata["certified"]
    old = Session().weighted_sample(str(elements), frequency_rule="algorithm5", **kwargs)
    assert old.metadata["frequency_rule"] == "max-separation"
    assert old.to_polars().equals(ws.to_polars())
    assert "sanitized_value" in ws.to_polars().columns
    with pytest.raises(ValidationError, match="parameter 'frequency_rule'"):
        Session().weighted_sample(
            str(elements), key="item", tau=0.05, epsilon=1.0, delta=1e-3, frequency_rule="x"
        )
