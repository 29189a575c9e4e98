"""Binary-search quantiles on fixed-size cohorts: the exact per-round profile (against exact
enumeration of every cohort and exact rational hypergeometric laws, both directions), the
calibration and its power, the leak of withholding one bucket alone, the cohort count's law
(goodness of fit at alpha = 1e-6 with a power check), and the Session / CLI entry."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from math import comb
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import SeededRandom, Session
from privhist.analytics.quantiles import private_quantiles, quantile_method
from privhist.analytics.quantiles_cohort import (
    FixedCohortQuantiles,
    cohort_profile,
    cohort_threshold,
)
from privhist.cli.main import main
from privhist.core.errors import InputDataError, ValidationError
from privhist.noise.subset import uniform_subset

BOT = "withheld"


def _release(c: int, m: int, tau: int, both: bool = True) -> Any:
    """The round's output for ``c`` of the ``m`` sampled clients below the split."""
    if both:
        return c if tau <= c <= m - tau else BOT
    # the leaky variant: each bucket withheld alone when below tau (Section 3.2)
    return (c if c >= tau else BOT, m - c if m - c >= tau else BOT)


def _law_by_enumeration(n: int, m: int, big_n: int, tau: int, both: bool) -> dict[Any, Fraction]:
    """The output law with clients 0..N-1 below the split, over every m-subset (no formula)."""
    law: dict[Any, Fraction] = {}
    subsets = list(itertools.combinations(range(n), m))
    for s in subsets:
        out = _release(sum(1 for i in s if i < big_n), m, tau, both)
        law[out] = law.get(out, Fraction(0)) + Fraction(1, len(subsets))
    return law


def _law_exact(n: int, m: int, big_n: int, tau: int, both: bool = True) -> dict[Any, Fraction]:
    law: dict[Any, Fraction] = {}
    for c in range(m + 1):
        p = Fraction(comb(big_n, c) * comb(n - big_n, m - c), comb(n, m))
        if p:
            out = _release(c, m, tau, both)
            law[out] = law.get(out, Fraction(0)) + p
    return law


def _hockey(p: dict[Any, Fraction], q: dict[Any, Fraction], e: Any) -> Any:
    return sum(
        (max(mpmath.mpf(0), mpmath.mpf(p.get(k, 0)) - e * mpmath.mpf(q.get(k, 0))))
        for k in set(p) | set(q)
    )


def _exact_delta(n: int, m: int, tau: int, eps: float, law: Any, both: bool = True) -> Any:
    with mpmath.workprec(200):
        e = mpmath.exp(mpmath.mpf(eps))
        worst = mpmath.mpf(0)
        laws = [law(n, m, k, tau, both) for k in range(n + 1)]
        for a, b in itertools.pairwise(laws):
            worst = max(worst, _hockey(b, a, e), _hockey(a, b, e))  # both directions
        return worst


@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_profile_matches_enumeration_of_every_cohort(eps: float) -> None:
    n, m = 11, 5
    prof = cohort_profile(n, m, eps)
    for tau in (1, 2):
        exact = _exact_delta(n, m, tau, eps, _law_by_enumeration)
        assert float(prof[tau - 1]) == pytest.approx(float(exact), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize(("n", "m", "eps"), [(40, 12, 0.5), (60, 20, 1.0), (90, 9, 0.2)])
def test_profile_matches_exact_rational_laws(n: int, m: int, eps: float) -> None:
    prof = cohort_profile(n, m, eps)
    for tau in range(1, m // 2 + 1):
        exact = _exact_delta(n, m, tau, eps, _law_exact)
        assert float(prof[tau - 1]) == pytest.approx(float(exact), rel=1e-9, abs=1e-300), tau


def test_withholding_one_bucket_alone_leaks_m_over_n() -> None:
    """Section 3.2: with m public, a small bucket withheld alone is revealed by the other."""
    n, m, eps = 11, 5, 1.0
    leaky = _exact_delta(n, m, 2, eps, _law_by_enumeration, both=False)
    assert leaky >= Fraction(m, n) * (1 - Fraction(1, 10**9))
    # at a calibrated threshold the both-or-nothing rule meets delta; the leaky one is >= m / n
    n, m, delta = 60, 20, 1e-3
    tau, _ = cohort_threshold(n, m, eps, delta, "t")
    assert float(_exact_delta(n, m, tau, eps, _law_exact)) <= delta
    assert _exact_delta(n, m, tau, eps, _law_exact, both=False) >= Fraction(m, n) * (1 - 1e-9)


def test_calibration_is_the_smallest_threshold_and_tau_minus_one_fails() -> None:
    n, m, eps, delta = 60, 20, 1.0, 1e-3
    tau, stated = cohort_threshold(n, m, eps, delta, "t")
    exact = float(_exact_delta(n, m, tau, eps, _law_exact))
    assert exact <= stated <= delta
    assert tau > 1
    # power: the exact check rejects the next smaller threshold
    assert float(_exact_delta(n, m, tau - 1, eps, _law_exact)) > delta


def test_cohort_count_is_hypergeometric_with_power_check() -> None:
    n, m, big_n, draws = 60, 15, 24, 40_000
    rng = SeededRandom(77)
    counts = np.array([int((uniform_subset(n, m, rng) < big_n).sum()) for _ in range(draws)])
    obs = np.bincount(counts, minlength=m + 1).astype(float)

    def pvalue(k: int) -> float:
        p = stats.hypergeom.pmf(np.arange(m + 1), n, k, m)
        exp = p * draws
        keep = exp > 5
        o, e = obs[keep], exp[keep]
        return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)

    assert pvalue(big_n) > ALPHA
    assert pvalue(big_n + 2) < ALPHA  # power: two more clients below the split is rejected


def test_run_answers_within_the_resolution() -> None:
    n = 5000
    values = np.sort(np.random.default_rng(3).random(n))
    fc = FixedCohortQuantiles(1.0, 1e-6, clients=n, cohort_size=1000, steps=6, quantiles=2)
    res = fc.run(values, [0.3, 0.7], SeededRandom(5))
    for a in res.answers:
        truth = float(np.quantile(values, a.q))
        # the search interval holds the truth up to the cohort's sampling error (about 0.03 in
        # rank) plus one step of the resolution
        assert a.lower - 0.05 <= truth <= a.upper + 0.05
        assert a.upper - a.lower == pytest.approx(1 / 64) and a.withheld == 0
    g = res.metadata["guarantee"]
    assert g["epsilon"] <= 1.0 and g["delta"] <= 1e-6 and "replace" in g["neighbouring"]
    assert res.metadata["parameters"]["threshold"] == fc.threshold


def test_an_extreme_quantile_stops_at_a_withheld_round() -> None:
    n = 2000
    fc = FixedCohortQuantiles(1.0, 1e-6, clients=n, cohort_size=400, steps=10)
    a = fc.run(np.linspace(0, 0.999, n), [0.999], SeededRandom(2)).answers[0]
    assert a.withheld == 1 and a.upper - a.lower > 1 / 1024


def test_bad_inputs_are_named() -> None:
    fc = FixedCohortQuantiles(1.0, 1e-6, clients=2000, cohort_size=400)
    with pytest.raises(InputDataError, match="clients=2000"):
        fc.run(np.zeros(1999), [0.5])
    with pytest.raises(ValidationError, match=r"parameter 'cohort_size'.*m/n = 0.5"):
        FixedCohortQuantiles(1.0, 1e-6, clients=100, cohort_size=50)
    with pytest.raises(ValidationError, match="parameter 'clients'"):
        quantile_method(1, 1.0, 1e-6, method="binary-search", cohort_size=50)
    with pytest.raises(ValidationError, match="parameter 'method'"):
        quantile_method(1, 1.0, 1e-6, cohort_size=50, clients=100)
    with pytest.raises(ValidationError, match="parameter 'threshold'"):
        quantile_method(
            1, 1.0, 1e-6, method="binary-search", cohort_size=50, clients=100, threshold=3
        )
    with pytest.raises(ValidationError, match="parameter 'cohort_size'"):
        FixedCohortQuantiles(1.0, 1e-6, clients=100, cohort_size=200)
    with pytest.raises(ValidationError, match="parameter 'cohort_size'"):
        FixedCohortQuantiles(1.0, 1e-6, clients=10**8, cohort_size=1000)  # work limit


def test_private_quantiles_with_cohorts() -> None:
    values = np.linspace(0, 0.999, 3000)
    res = private_quantiles(
        values,
        [0.5],
        1.0,
        1e-6,
        method="binary-search",
        levels=5,
        cohort_size=600,
        clients=3000,
        rng=SeededRandom(4),
    )
    assert res.metadata["method"] == "binary-search (fixed cohort)"
    assert abs(res.answers[0].value - 0.5) <= 2 / 32


@pytest.fixture
def values_csv(tmp_path: Path) -> Path:
    path = tmp_path / "v.csv"
    path.write_text("x\n" + "".join(f"{v:.6f}\n" for v in np.linspace(0, 99.9, 3000)))
    return path


def test_cli_quantiles_with_cohorts(capsys: Any, values_csv: Path) -> None:
    argv = ["quantiles", str(values_csv), "--column", "x", "--range", "0", "100", "--q", "0.5"]
    argv += ["--epsilon", "1", "--delta", "1e-6", "--method", "binary-search", "--levels", "5"]
    code = main([*argv, "--cohort-size", "600", "--clients", "3000", "--seed", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rep = json.loads(out)
    assert rep["parameters"]["cohort_size"] == 600
    assert abs(rep["quantiles"][0]["value"] - 50) <= 200 / 32
    assert "replaced" in err
    code = main([*argv, "--cohort-size", "600"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "--clients" in err


def test_session_dry_run_and_release(values_csv: Path) -> None:
    kwargs: dict[str, Any] = {
        "column": "x",
        "q": [0.5],
        "lower": 0.0,
        "upper": 100.0,
        "epsilon": 1.0,
        "delta": 1e-6,
        "method": "binary-search",
        "levels": 5,
        "cohort_size": 600,
        "clients": 3000,
    }
    dry = Session().quantiles(str(values_csv), dry_run=True, **kwargs)
    assert dry.cost.epsilon <= 1.0  # type: ignore[union-attr]
    result = Session().quantiles(str(values_csv), seed=3, **kwargs)
    assert result.metadata["guarantee"]["neighbouring"].startswith("replace")
    assert result.diagnostics["rows"] == 3000
