"""A dataset's composition regime applies through the Session, not only through the ledger.

The Session checks the budget before reading any data and charges the spend afterwards; both
must judge the release's *event*, so that a Renyi-regime dataset admits Gaussian releases by their
Renyi curves. The expected counts come from the filter's rule written out here (basic: epsilons
add; Renyi: the continuous Gaussian's curve ``alpha / (2 sigma_eff**2)`` summed and compared with
``E - log(J / D) / (alpha - 1)`` at the best order), not from the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest

from privhist import Budget, Session
from privhist.accounting.filters import RENYI_ORDERS
from privhist.accounting.ledger import Ledger
from privhist.core.errors import BudgetExceededError

TOTAL = Budget(2.0, 1e-6)
DATA = pl.DataFrame({"key": ["a"] * 500 + ["b"] * 300})


def _releases(
    tmp_path: Path, regime: str, options: dict[str, str], mechanism: str = "dense"
) -> tuple[int, str]:
    path = tmp_path / f"{regime}.sqlite"
    Ledger(path).init_dataset("data", TOTAL, regime=regime)
    with Session(path, "data") as session:
        for n in range(40):
            try:
                session.histogram(
                    DATA,
                    key="key",
                    epsilon=0.5,
                    delta=1e-8,
                    mechanism=mechanism,
                    domain=["a", "b"] if mechanism == "dense" else None,
                    options=options,
                )
            except BudgetExceededError as err:
                return n, str(err)
    raise AssertionError("the ledger never refused")


def _renyi_count(sigma_over_sensitivity: float) -> int:
    """Largest n with n * alpha / (2 s**2) <= E - log(J / D) / (alpha - 1) at some order."""
    j = len(RENYI_ORDERS)
    best = 0
    for a in RENYI_ORDERS:
        room = TOTAL.epsilon - math.log(j / TOTAL.delta) / (a - 1)
        per = a / (2 * sigma_over_sensitivity**2)
        if room > 0:
            best = max(best, math.floor(room / per))
    return best


def test_renyi_regime_admits_more_gaussian_releases_through_the_session(tmp_path: Path) -> None:
    basic, _ = _releases(tmp_path, "basic", {"noise": "gaussian"})
    renyi, message = _releases(tmp_path, "renyi", {"noise": "gaussian"})
    # basic: (0.4999, 1e-8) releases add within (2, 1e-6): four of them
    assert basic == 4
    assert renyi > basic
    # at most what the Renyi rule allows for the continuous Gaussian of the same sigma (the
    # discrete Gaussian's curve is no larger): sigma from the mechanism's own parameters
    from privhist.mechanisms.dense import DenseHistogram

    mech = DenseHistogram(0.5, 1e-8, noise="gaussian", domain=["a", "b"])
    sigma = math.sqrt(float(Fraction(mech.parameters()["sigma2"])))
    assert renyi <= _renyi_count(sigma)
    assert "Renyi" in message


def test_renyi_regime_refusal_says_why(tmp_path: Path) -> None:
    # a stability release has an (epsilon, delta) guarantee only: no Renyi curve to compose
    n, message = _releases(tmp_path, "renyi", {}, mechanism="stability")
    assert n == 0
    assert "no Renyi guarantee" in message
    assert "remains" not in message


def test_renyi_regime_dry_run_agrees_with_the_release(tmp_path: Path) -> None:
    path = tmp_path / "dry.sqlite"
    Ledger(path).init_dataset("data", TOTAL, regime="renyi")
    with Session(path, "data") as session:
        dry = session.histogram(
            DATA,
            key="key",
            epsilon=0.5,
            delta=1e-8,
            mechanism="dense",
            domain=["a", "b"],
            options={"noise": "gaussian"},
            dry_run=True,
        )
        assert dry.allowed
        with pytest.raises(BudgetExceededError):
            session.histogram(DATA, key="key", epsilon=0.5, delta=1e-8, mechanism="stability")
