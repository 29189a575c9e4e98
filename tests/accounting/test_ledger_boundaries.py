"""The ledger at its boundaries: a spend that exactly exhausts a budget is admitted and one unit in
the last place more is refused, in both coordinates and both regimes; what is reported spent is
never below the exact sum and what remains never above the exact difference; each refusal fails
closed, before any release runs.

The Renyi regime's rule (Feldman & Zrnic 2021, Theorem 3.1, with the union over the orders of
``privhist.accounting.filters``) is recomputed here in 60-digit arithmetic: the number of
identical Gaussian releases a total admits, and the order that comes closest when it refuses.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest

from privhist.accounting.composition import ApproxDPEvent, GaussianEvent
from privhist.accounting.filters import RENYI_ORDERS, basic_admits, renyi_admission, renyi_budget
from privhist.accounting.ledger import (
    Ledger,
    LedgerError,
    PrivacyUnit,
    PrivacyUnitMismatchError,
    UnknownDatasetError,
)
from privhist.core.budget import Budget
from privhist.core.errors import BudgetExceededError, ValidationError
from privhist.core.neighbouring import Neighbouring


def up(x: float) -> float:
    return math.nextafter(x, math.inf)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.sqlite", create=True)


# -- basic composition, exactly --------------------------------------------------------------


def test_basic_admits_exactly_up_to_the_total() -> None:
    total = Budget(1.0, 1e-6)
    spent = [Budget(0.25, 2.5e-7)] * 3
    assert basic_admits(spent, Budget(0.25, 2.5e-7), total)
    assert not basic_admits(spent, Budget(up(0.25), 2.5e-7), total)
    assert not basic_admits(spent, Budget(0.25, up(2.5e-7)), total)
    # the exact rational values count, not float sums: 0.1 + 0.2 > 0.3 exactly
    assert not basic_admits([Budget(0.1, 0)], Budget(0.2, 0), Budget(0.3, 0))
    assert basic_admits([Budget(0.1, 0)], Budget(0.2, 0), Budget(up(0.3), 0))


@pytest.mark.parametrize("coordinate", ["epsilon", "delta"])
def test_a_spend_exhausting_the_budget_is_recorded_and_one_more_ulp_is_refused(
    ledger: Ledger, coordinate: str
) -> None:
    # dyadic values: the exact sums are the floats' own (0.75 + 0.25 = 1, 3/2**22 + 1/2**22)
    ledger.init_dataset("d", Budget(1.0, 2.0**-20))
    with ledger.spend("d", Budget(0.75, 3 * 2.0**-22), "m"):
        pass
    rest = Budget(0.25, 2.0**-22)
    over = Budget(up(0.25), 2.0**-22) if coordinate == "epsilon" else Budget(0.25, up(2.0**-22))
    ran = []
    with pytest.raises(BudgetExceededError):
        with ledger.spend("d", over, "m"):
            ran.append(1)
    assert not ran  # refused before the release runs
    st = ledger.show("d")
    assert st.allows(rest) and not st.allows(over)
    with ledger.spend("d", rest, "m"):
        pass
    st = ledger.show("d")
    assert st.spent_exact == (Fraction(1), Fraction(1, 2**20))
    assert st.remaining.epsilon == 0 and st.remaining.delta == 0
    assert not st.allows(Budget(5e-324, 0.0))


def test_spent_is_rounded_up_and_remaining_down(ledger: Ledger) -> None:
    ledger.init_dataset("d", Budget(1.0, 1e-6))
    for eps, delta in ((0.1, 1e-9), (0.2, 3e-9)):
        with ledger.spend("d", Budget(eps, delta), "m"):
            pass
    st = ledger.show("d")
    exact_eps = Fraction(0.1) + Fraction(0.2)
    exact_delta = Fraction(1e-9) + Fraction(3e-9)
    assert st.spent_exact == (exact_eps, exact_delta)
    for got, exact in ((st.spent.epsilon, exact_eps), (st.spent.delta, exact_delta)):
        assert Fraction(got) >= exact > Fraction(math.nextafter(got, -math.inf))
    for got, exact in (
        (st.remaining.epsilon, Fraction(1.0) - exact_eps),
        (st.remaining.delta, Fraction(1e-6) - exact_delta),
    ):
        assert Fraction(got) <= exact < Fraction(math.nextafter(got, math.inf))


# -- privacy units ----------------------------------------------------------------------------


def test_units_admit_the_relations_that_protect_them() -> None:
    user, record = Neighbouring.user(3, 2), Neighbouring.add_remove()
    assert PrivacyUnit.RECORD.admits(None) and PrivacyUnit.RECORD.admits(record)
    assert PrivacyUnit.RECORD.admits(user)
    assert PrivacyUnit.USER.admits(user)
    assert not PrivacyUnit.USER.admits(record) and not PrivacyUnit.USER.admits(None)
    assert not PrivacyUnit.USER.admits(Neighbouring.replace())


def test_a_user_dataset_refuses_record_level_spends_before_they_run(ledger: Ledger) -> None:
    ledger.init_dataset("u", Budget(2.0, 1e-6), unit="user")
    ran = []
    for nb in (None, Neighbouring.add_remove()):
        with pytest.raises(PrivacyUnitMismatchError):
            with ledger.spend("u", Budget(0.1, 0.0), "m", neighbouring=nb):
                ran.append(nb)
    assert not ran and ledger.show("u").spends == ()
    with ledger.spend("u", Budget(0.1, 0.0), "m", neighbouring=Neighbouring.user(2)):
        pass
    st = ledger.show("u")
    assert len(st.spends) == 1
    with pytest.raises(PrivacyUnitMismatchError):
        st.check(Budget(0.1, 0.0), Neighbouring.add_remove())
    with pytest.raises(BudgetExceededError):
        st.check(Budget(2.0, 0.0), Neighbouring.user(2))
    assert st.check(Budget(0.1, 0.0), Neighbouring.user(2)).admitted


# -- refusals of malformed calls --------------------------------------------------------------


def test_malformed_spends_and_registrations_are_refused(ledger: Ledger) -> None:
    ledger.init_dataset("d", Budget(1.0, 1e-6))
    for kwargs in (
        {"budget": (0.1, 0.0)},
        {"note": 3},
        {"neighbouring": "user"},
        {"event": Budget(0.1, 0.0)},
    ):
        args = {"budget": Budget(0.1, 0.0), "note": "", **kwargs}
        with pytest.raises(ValidationError):
            ledger.spend(
                "d",
                args.pop("budget"),  # type: ignore[arg-type]
                "m",
                args.pop("note"),  # type: ignore[arg-type]
                **args,  # type: ignore[arg-type]
            )
    # a neighbouring relation and an event of the right types are accepted
    with ledger.spend(
        "d", Budget(0.1, 0.0), "m", neighbouring=Neighbouring.user(1), event=ApproxDPEvent(0.1, 0)
    ):
        pass
    with pytest.raises(ValidationError):
        ledger.init_dataset("e", (1.0, 0.0))  # type: ignore[arg-type]
    with pytest.raises(LedgerError, match="already in the ledger"):
        ledger.init_dataset("d", Budget(1.0, 1e-6))
    with pytest.raises(LedgerError, match="total"):
        ledger.init_dataset("d", Budget(2.0, 1e-6), exist_ok=True)
    ledger.init_dataset("d", Budget(1.0, 1e-6), exist_ok=True)
    with pytest.raises(UnknownDatasetError):
        ledger.show("nobody")
    with pytest.raises(UnknownDatasetError):
        with ledger.spend("nobody", Budget(0.1, 0.0), "m"):
            pass


# -- the Renyi regime -------------------------------------------------------------------------


def _room(total: Budget, order: float) -> mpmath.mpf:
    with mpmath.workdps(60):
        j = len(RENYI_ORDERS)
        return mpmath.mpf(Fraction(total.epsilon).numerator) / Fraction(
            total.epsilon
        ).denominator - mpmath.log(j / mpmath.mpf(Fraction(total.delta))) / (order - 1)


@pytest.mark.parametrize("total", [Budget(2.0, 1e-6), Budget(1.0, 1e-8), Budget(8.0, 1e-3)])
def test_renyi_budget_is_the_filters_room_rounded_down(total: Budget) -> None:
    for order in RENYI_ORDERS:
        got = renyi_budget(total, order)
        exact = _room(total, order)
        with mpmath.workdps(60):
            g = mpmath.mpf(got.numerator) / got.denominator
            assert g <= exact and exact - g < mpmath.mpf(2) ** -100


def test_renyi_budget_needs_a_positive_delta() -> None:
    with pytest.raises(ValidationError):
        renyi_budget(Budget(1.0, 0.0), 2.0)


@pytest.mark.parametrize(
    ("sigma", "total"), [(9.86353, Budget(2.0, 1e-6)), (4.0, Budget(8.0, 1e-3))]
)
def test_renyi_filter_admits_exactly_as_many_gaussian_releases_as_the_rule(
    sigma: float, total: Budget
) -> None:
    """``n`` Gaussian releases (sensitivity 1) use ``n alpha / (2 sigma**2)`` at order alpha
    (Mironov 2017, Proposition 7); the filter admits the ``n``-th while some order has room."""
    s2 = Fraction(sigma) ** 2

    def fits(n: int) -> bool:
        with mpmath.workdps(60):
            return any(
                n * mpmath.mpf(Fraction(a)) / (2 * mpmath.mpf(s2.numerator) / s2.denominator)
                <= _room(total, a)
                for a in RENYI_ORDERS
            )

    n_max = 0
    while fits(n_max + 1):
        n_max += 1
    assert n_max >= 2
    spent = [GaussianEvent(sigma)] * (n_max - 1)
    assert renyi_admission(spent, GaussianEvent(sigma), total).admitted
    refused = renyi_admission([GaussianEvent(sigma)] * n_max, GaussianEvent(sigma), total)
    assert not refused.admitted
    # the refusal names the order that came closest: the smallest overshoot, first on a tie
    with mpmath.workdps(60):
        gaps = [
            (n_max + 1) * mpmath.mpf(Fraction(a)) / (2 * mpmath.mpf(s2.numerator) / s2.denominator)
            - _room(total, a)
            for a in RENYI_ORDERS
        ]
    closest = RENYI_ORDERS[min(range(len(gaps)), key=lambda i: gaps[i])]
    assert f"closest: order {closest:g}" in refused.detail


def test_renyi_regime_pure_releases_up_to_epsilon_and_no_delta_without_it() -> None:
    total = Budget(1.0, 1e-6)
    pure = [ApproxDPEvent(0.25, 0.0)] * 3
    a = renyi_admission(pure, ApproxDPEvent(0.25, 0.0), total)
    assert a.admitted and a.rule == "basic-pure"
    b = renyi_admission(pure, ApproxDPEvent(up(0.25), 0.0), total)
    assert b.rule != "basic-pure"
    no_delta = renyi_admission([], GaussianEvent(1.0), Budget(1.0, 0.0))
    assert not no_delta.admitted and "total delta > 0" in no_delta.detail
    approx = renyi_admission([], ApproxDPEvent(0.1, 1e-9), total)
    assert not approx.admitted and "no Renyi guarantee" in approx.detail


def test_renyi_dataset_spends_by_the_filter(ledger: Ledger) -> None:
    ledger.init_dataset("r", Budget(2.0, 1e-6), regime="renyi")
    for _ in range(10):
        with ledger.spend("r", Budget(0.5, 1e-8), "g", event=GaussianEvent(9.86353)) as tx:
            pass
        assert tx.rule.startswith("renyi(")
    with pytest.raises(BudgetExceededError, match="Renyi"):
        with ledger.spend("r", Budget(0.5, 1e-8), "g", event=GaussianEvent(9.86353)):
            pass
