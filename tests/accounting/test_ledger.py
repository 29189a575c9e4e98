"""The durable budget ledger: atomic check-and-spend, rollback, locking, corruption."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from privhist.accounting.composition import ApproxDPEvent, GaussianEvent, LaplaceEvent
from privhist.accounting.events import ZcdpEvent
from privhist.accounting.ledger import (
    BudgetAmount,
    Ledger,
    PrivacyUnit,
    PrivacyUnitMismatchError,
    UnknownDatasetError,
    default_ledger_path,
    init_ledger,
)
from privhist.accounting.ledger_schema import show_amount
from privhist.core.budget import Budget
from privhist.core.errors import BudgetExceededError, LedgerError, ValidationError
from privhist.core.neighbouring import Neighbouring


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path / "ledger.sqlite", timeout=5)
    led.init_dataset("survey", Budget(1.0, 1e-6))
    return led


def test_init_show_spend(ledger: Ledger) -> None:
    status = ledger.show("survey")
    assert status.total == Budget(1.0, 1e-6)
    assert status.spent == BudgetAmount(0, 0)
    assert status.remaining == BudgetAmount(1.0, 1e-6)
    assert status.spends == ()

    with ledger.spend("survey", Budget(0.25, 1e-8), mechanism="stability", note="first") as txn:
        assert txn.before is not None and txn.before.spent == BudgetAmount(0, 0)
    assert txn.spend_id is not None

    status = ledger.show("survey")
    assert status.spent == BudgetAmount(0.25, 1e-8)
    assert status.remaining.epsilon == pytest.approx(0.75)
    assert status.remaining.delta == pytest.approx(1e-6 - 1e-8)
    (record,) = status.spends
    assert (record.id, record.mechanism, record.note) == (txn.spend_id, "stability", "first")
    assert record.budget == Budget(0.25, 1e-8)
    assert ledger.datasets() == ["survey"]
    # a Budget compares against what remains (used by the command line before counting)
    assert Budget(0.5, 0) <= status.remaining
    assert not Budget(0.8, 0) <= status.remaining


def test_ledger_persists_across_instances(ledger: Ledger) -> None:
    with ledger.spend("survey", Budget(0.5, 0), mechanism="dense"):
        pass
    again = Ledger(ledger.path)
    assert again.show("survey").spent == BudgetAmount(0.5, 0)


def test_refused_before_the_body_runs(ledger: Ledger) -> None:
    ran = []
    with pytest.raises(BudgetExceededError) as info:
        with ledger.spend("survey", Budget(1.5, 0), mechanism="stability"):
            ran.append(True)  # noise would be drawn here
    assert ran == []
    assert info.value.dataset == "survey"
    assert info.value.requested == Budget(1.5, 0)
    assert info.value.remaining == BudgetAmount(1.0, 1e-6)
    assert "requests (1.5, 0)-DP but only (1, 1e-06) remains" in str(info.value)
    assert ledger.show("survey").spends == ()


def test_delta_coordinate_is_checked_too(ledger: Ledger) -> None:
    ran = []
    with pytest.raises(BudgetExceededError):
        with ledger.spend("survey", Budget(0.1, 2e-6), mechanism="stability"):
            ran.append(True)
    assert ran == []
    ledger.init_dataset("pure", Budget(1.0, 0))
    with pytest.raises(BudgetExceededError):
        with ledger.spend("pure", Budget(0.1, 1e-12), mechanism="stability"):
            ran.append(True)
    assert ran == []


def test_rollback_on_exception_records_nothing(ledger: Ledger) -> None:
    with pytest.raises(RuntimeError, match="disk full"):
        with ledger.spend("survey", Budget(0.5, 0), mechanism="stability"):
            raise RuntimeError("disk full")
    status = ledger.show("survey")
    assert status.spends == () and status.spent == BudgetAmount(0, 0)
    # the lock was released: a later spend goes through
    with ledger.spend("survey", Budget(0.5, 0), mechanism="stability"):
        pass
    assert len(ledger.show("survey").spends) == 1


def test_exact_sums_ten_tenths_exceed_one(ledger: Ledger) -> None:
    # Fraction(0.1) is slightly above 1/10: nine spends of 0.1 fit a total of 1, the tenth does not
    for _ in range(9):
        with ledger.spend("survey", Budget(0.1, 0), mechanism="m"):
            pass
    status = ledger.show("survey")
    exact_remaining = 1 - 9 * Fraction(0.1)
    assert 0 < exact_remaining < Fraction(0.1)
    assert status.spent_exact == (9 * Fraction(0.1), Fraction(0))
    # floats for display: spent rounded up, remaining rounded down
    assert Fraction(status.spent.epsilon) >= 9 * Fraction(0.1)
    assert Fraction(status.remaining.epsilon) <= exact_remaining
    assert not status.allows(Budget(0.1, 0))
    # the refusal shows the amount rounded as `budget show` does, and the exact amount when the
    # rounded one would seem to admit the request
    with pytest.raises(BudgetExceededError) as info:
        with ledger.spend("survey", Budget(0.1, 0), mechanism="m"):
            pass
    assert str(info.value) == (
        "release refused for dataset 'survey': it requests (0.1, 0)-DP but only (0.1, 1e-06) "
        "remains (exactly epsilon 0.09999999999999995 and delta 1e-06 remain; the ledger adds "
        "the stored floats exactly)"
    )
    assert info.value.note is not None and "0.09999999999999995" in info.value.note
    # what remains (rounded down) can still be spent, and then nothing is left
    assert status.allows(Budget(status.remaining.epsilon, 0))
    with ledger.spend("survey", Budget(status.remaining.epsilon, 0), mechanism="m"):
        pass
    status = ledger.show("survey")
    assert status.spent_exact[0] <= 1
    assert not status.allows(Budget(5e-324, 0))
    assert len(status.spends) == 10


def test_exact_sums_binary_fractions_fill_the_total(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.init_dataset("d", Budget(1.0, 2.0**-20))
    for _ in range(4):
        with led.spend("d", Budget(0.25, 2.0**-22), mechanism="m"):
            pass
    status = led.show("d")
    assert status.spent == BudgetAmount(1.0, 2.0**-20)
    assert status.remaining == BudgetAmount(0, 0)
    assert status.spent_exact == (Fraction(1), Fraction(1, 2**20))
    # no tolerance: not even the smallest float fits any more
    assert not status.allows(Budget(5e-324, 0))
    with pytest.raises(BudgetExceededError):
        with led.spend("d", Budget(0.25, 0), mechanism="m"):
            pass
    with pytest.raises(BudgetExceededError):
        with led.spend("d", Budget(5e-324, 0), mechanism="m"):
            pass
    assert len(led.show("d").spends) == 4


def test_exact_sums_delta_coordinate(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.init_dataset("d", Budget(2.0, 2.0**-20))
    for _ in range(4):
        with led.spend("d", Budget(0.25, 2.0**-22), mechanism="m"):
            pass
    status = led.show("d")
    assert status.allows(Budget(0.25, 0))
    assert not status.allows(Budget(0.25, 5e-324))
    with pytest.raises(BudgetExceededError):
        with led.spend("d", Budget(0.25, 5e-324), mechanism="m"):
            pass
    with led.spend("d", Budget(0.25, 0), mechanism="m"):
        pass


def test_allows_is_the_rule_spend_applies(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.init_dataset("d", Budget(1.0, 1e-6))
    for eps, delta in [(0.3, 1e-7), (0.3, 3e-7), (0.3, 1e-7), (0.1, 5e-7), (0.1, 0.0), (0.05, 0)]:
        budget = Budget(eps, delta)
        expected = led.show("d").allows(budget)
        try:
            with led.spend("d", budget, mechanism="m"):
                pass
            spent = True
        except BudgetExceededError:
            spent = False
        assert spent == expected, (budget, expected)


def test_budget_amount_text_is_readable_and_exact_on_request() -> None:
    assert str(BudgetAmount(1.0, 1e-6)) == "(1, 1e-06)"
    assert str(BudgetAmount(0.75, 0)) == "(0.75, 0)"
    # what 1 - 0.1 and 1e-6 - 1e-8 leave, rounded down to floats: shown as `budget show` shows it
    left = BudgetAmount(0.8999999999999999, 9.899999999999998e-07)
    assert str(left) == "(0.9, 9.9e-07)" == show_amount(left.epsilon, left.delta)
    assert left.exact_text() == "(0.8999999999999999, 9.899999999999998e-07)"
    assert BudgetAmount(1.0, 0.0).exact_text() == "(1, 0)"
    assert left.shown() == BudgetAmount(0.9, 9.9e-07)


def test_refusal_adds_the_exact_amount_only_when_the_rounded_one_misleads(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.init_dataset("d", Budget(1.0, 1e-6))
    with led.spend("d", Budget(0.1, 1e-8), mechanism="m"):
        pass
    remaining = led.show("d").remaining
    assert str(remaining) == "(0.9, 9.9e-07)"
    with pytest.raises(BudgetExceededError) as far:
        with led.spend("d", Budget(2.0, 0), mechanism="m"):
            pass
    assert far.value.note is None
    assert str(far.value).endswith("it requests (2, 0)-DP but only (0.9, 9.9e-07) remains")
    with pytest.raises(BudgetExceededError) as near:  # looks as if it fits; it does not
        with led.spend("d", Budget(0.9, 9.9e-7), mechanism="m"):
            pass
    assert "e-07 remains" not in str(near.value) and repr(remaining.delta) in str(near.value)
    assert "\n" not in str(near.value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("x" * 100_000, "at most 200 characters long"),
        ("x" * 201, "at most 200 characters long"),
        ("a\nb", "a name without control characters or line breaks"),
        ("tab\there", "a name without control characters or line breaks"),
        ("bidi\u202eevil", "a name without control characters or line breaks"),
        ("line\u2028sep", "a name without control characters or line breaks"),
        ("  ", "a non-empty string"),
    ],
)
def test_dataset_names_are_short_printable_lines(tmp_path: Path, name: str, expected: str) -> None:
    path = tmp_path / "l.sqlite"
    with pytest.raises(
        ValidationError, match=f"parameter 'dataset' of budget init must be {expected}"
    ):
        init_ledger(path, name, Budget(1.0))
    assert not path.exists()
    led = Ledger(path)
    with pytest.raises(ValidationError, match=r"parameter 'dataset' of Ledger\.init_dataset"):
        led.init_dataset(name, Budget(1.0))
    with pytest.raises(ValidationError, match=r"parameter 'dataset' of Ledger\.show"):
        led.show(name)
    assert led.datasets() == []
    ok = "x" * 200
    led.init_dataset(ok, Budget(1.0))
    led.init_dataset("survey 2024 (é, 調査)", Budget(1.0))
    assert led.datasets() == sorted([ok, "survey 2024 (é, 調査)"])


def test_renyi_view_is_what_the_filter_admits(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    total = Budget(2.0, 1e-6)
    led.init_dataset("g", total, regime="renyi")
    led.init_dataset("b", total)
    assert led.show("b").renyi_view() is None
    empty = led.show("g").renyi_view()
    assert empty is not None and empty.releases == 0 and empty.pure_left == Fraction(2)
    gauss = GaussianEvent(15.0)
    n = 0
    while True:
        try:
            with led.spend("g", Budget(0.3, 1e-8), mechanism="gauss", event=gauss):
                n += 1
        except BudgetExceededError:
            break
    status = led.show("g")
    view = status.renyi_view()
    assert view is not None and view.releases == n and view.pure_left is None
    assert status.spent.epsilon > total.epsilon  # the stated epsilons add past the total
    assert 0 < view.used <= view.budget
    # what the view says remains is what the filter admits: a little less fits, a little more not
    rho = float(view.rho_left)
    assert 0 < rho < float(gauss_rho := Fraction(1, 2 * 15**2))
    assert status.allows(Budget(0.1, 1e-9), ZcdpEvent(rho * 0.999))
    assert not status.allows(Budget(0.1, 1e-9), ZcdpEvent(rho * 1.001))
    assert not status.allows(Budget(0.3, 1e-8), gauss) and rho < gauss_rho
    assert view.sigma_needed == pytest.approx((2 * rho) ** -0.5)


# -- privacy unit ---------------------------------------------------------------------------------


def test_user_dataset_refuses_record_level_spends(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.init_dataset("people", Budget(1.0, 1e-6), unit="user")
    assert led.show("people").unit is PrivacyUnit.USER
    for nb, relation in [
        (Neighbouring.add_remove(), "'add-remove'"),
        (Neighbouring.replace(), "'replace'"),
        (None, "unspecified"),
    ]:
        ran = []
        with pytest.raises(PrivacyUnitMismatchError) as info:
            with led.spend("people", Budget(0.1), mechanism="m", neighbouring=nb):
                ran.append(True)
        assert ran == []
        message = str(info.value)
        assert "dataset 'people'" in message
        assert "privacy unit 'user'" in message
        assert f"relation {relation}" in message
        assert isinstance(info.value, LedgerError)
        assert (info.value.dataset, info.value.unit, info.value.neighbouring) == (
            "people",
            PrivacyUnit.USER,
            nb,
        )
    # the unit is checked before the budget: an over-budget record-level spend names the unit
    with pytest.raises(PrivacyUnitMismatchError):
        with led.spend("people", Budget(5.0), mechanism="m", neighbouring=Neighbouring.replace()):
            pass
    assert led.show("people").spends == ()

    nb = Neighbouring.user(3, 2)
    with led.spend("people", Budget(0.25, 1e-8), mechanism="m", neighbouring=nb) as txn:
        assert txn.neighbouring == nb
    status = led.show("people")
    (record,) = status.spends
    assert record.neighbouring == nb
    assert status.admits(Neighbouring.user(1)) and not status.admits(Neighbouring.add_remove())
    assert not status.admits(None)
    with pytest.raises(PrivacyUnitMismatchError):
        status.check(Budget(0.1), Neighbouring.add_remove())
    with pytest.raises(BudgetExceededError):
        status.check(Budget(1.0), nb)
    status.check(Budget(0.75), nb)


def test_record_dataset_accepts_every_relation(ledger: Ledger) -> None:
    assert ledger.show("survey").unit is PrivacyUnit.RECORD
    relations = [
        None,
        Neighbouring.add_remove(),
        Neighbouring.replace(),
        Neighbouring.user(4, 1),
    ]
    for nb in relations:
        with ledger.spend("survey", Budget(0.125), mechanism="m", neighbouring=nb):
            pass
    status = ledger.show("survey")
    assert [s.neighbouring for s in status.spends] == relations
    assert all(status.admits(nb) for nb in relations)
    # the relation is stored as JSON of Neighbouring.to_dict(), '' when not stated
    conn = sqlite3.connect(ledger.path)
    stored = [r[0] for r in conn.execute("SELECT neighbouring FROM spends ORDER BY id")]
    conn.close()
    assert stored[0] == ""
    assert json.loads(stored[3]) == Neighbouring.user(4, 1).to_dict()


def test_unit_is_validated_and_fixed(ledger: Ledger) -> None:
    with pytest.raises(ValidationError, match=r"parameter 'unit' of Ledger\.init_dataset"):
        ledger.init_dataset("x", Budget(1.0), unit="person")
    with pytest.raises(ValidationError, match="parameter 'unit'"):
        ledger.init_dataset("x", Budget(1.0), unit=None)  # type: ignore[arg-type]
    with pytest.raises(
        LedgerError, match="privacy unit 'record'; a unit, once set, is not changed"
    ):
        ledger.init_dataset("survey", Budget(1.0, 1e-6), unit="user", exist_ok=True)
    ledger.init_dataset("u", Budget(1.0), unit=PrivacyUnit.USER)
    ledger.init_dataset("u", Budget(1.0), unit="user", exist_ok=True)
    with pytest.raises(ValidationError, match=r"parameter 'neighbouring' of Ledger\.spend"):
        ledger.spend("survey", Budget(0.1), "m", neighbouring="user")  # type: ignore[arg-type]


# -- older schema versions -------------------------------------------------------------------------

_V1_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE datasets (id TEXT PRIMARY KEY, epsilon_total REAL NOT NULL, "
    "delta_total REAL NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE spends (id INTEGER PRIMARY KEY, dataset TEXT NOT NULL REFERENCES datasets(id), "
    "epsilon REAL NOT NULL, delta REAL NOT NULL, mechanism TEXT NOT NULL, created TEXT NOT NULL, "
    "note TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX spends_dataset ON spends (dataset)",
)


def _v1_ledger(path: Path) -> None:
    conn = sqlite3.connect(path)
    for statement in _V1_SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO datasets VALUES ('old', 1.0, 1e-6, '2024-01-01T00:00:00+00:00')")
    conn.executemany(
        "INSERT INTO spends (dataset, epsilon, delta, mechanism, created, note) "
        "VALUES ('old', ?, ?, 'stability', '2024-01-02T00:00:00+00:00', ?)",
        [(0.25, 1e-8, "first"), (0.5, 0.0, "")],
    )
    conn.commit()
    conn.close()


def _schema_of(path: Path) -> tuple[str, set[str], set[str]]:
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        datasets = {r[1] for r in conn.execute("PRAGMA table_info(datasets)")}
        spends = {r[1] for r in conn.execute("PRAGMA table_info(spends)")}
    finally:
        conn.close()
    return str(version[0]), datasets, spends


@pytest.mark.parametrize("create", [True, False])
def test_version_1_is_refused_until_upgraded_explicitly(tmp_path: Path, create: bool) -> None:
    path = tmp_path / "v1.sqlite"
    _v1_ledger(path)
    before = path.read_bytes()
    with pytest.raises(LedgerError) as info:
        Ledger(path, create=create)
    assert (
        f"schema version 1, from before spends were hash-chained; upgrade it explicitly with "
        f"`privhist budget upgrade --ledger {path}`" in str(info.value)
    )
    assert path.read_bytes() == before  # refused, not touched
    led, found = Ledger.upgrade(path)
    assert found == 1
    version, datasets, spends = _schema_of(path)
    assert version == "4" and "unit" in datasets and "neighbouring" in spends
    assert {"regime", "head"} <= datasets and {"event", "rule", "chain"} <= spends
    status = led.show("old")
    assert status.unit is PrivacyUnit.RECORD
    assert status.total == Budget(1.0, 1e-6)
    assert status.spent == BudgetAmount(0.75, 1e-8)
    assert [(s.note, s.neighbouring) for s in status.spends] == [("first", None), ("", None)]
    assert status.regime == "basic" and [s.rule for s in status.spends] == ["basic", "basic"]
    assert status.spends[0].privacy_event == ApproxDPEvent(0.25, 1e-8)
    with led.spend("old", Budget(0.25), mechanism="m", neighbouring=Neighbouring.user(2)):
        pass
    with pytest.raises(BudgetExceededError):
        with led.spend("old", Budget(0.125), mechanism="m"):
            pass
    again = Ledger(path, create=create)  # opening an upgraded file again changes nothing
    assert again.show("old").spends[-1].neighbouring == Neighbouring.user(2)
    assert Ledger.upgrade(path)[1] == 4  # nothing to do
    assert _schema_of(path)[0] == "4" and len(again.show("old").spends) == 3
    # the upgraded spends are chained: removing one is detected
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM spends WHERE note = 'first'")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="damaged and refused"):
        again.show("old")


def test_upgrade_waits_for_the_lock_and_changes_nothing_when_it_fails(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    _v1_ledger(path)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(LedgerError, match=r"locked.*upgrade the schema"):
            Ledger.upgrade(path, timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    version, datasets, _ = _schema_of(path)
    assert version == "1" and "unit" not in datasets
    assert Ledger.upgrade(path)[0].show("old").unit is PrivacyUnit.RECORD


def test_failed_upgrade_is_rolled_back(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    _v1_ledger(path)
    conn = sqlite3.connect(path)  # a stray column makes the second ALTER TABLE fail
    conn.execute("ALTER TABLE spends ADD COLUMN neighbouring TEXT")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="upgrade the schema from version 1 to 4"):
        Ledger.upgrade(path)
    version, datasets, _ = _schema_of(path)
    assert version == "1" and "unit" not in datasets


def test_upgrade_refuses_a_damaged_or_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    _v1_ledger(path)
    conn = sqlite3.connect(path)  # an orphan spend: its dataset is gone
    conn.execute(
        "INSERT INTO spends (dataset, epsilon, delta, mechanism, created) "
        "VALUES ('gone', 1.0, 0.0, 'm', 'x')"
    )
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match=r"1 spend.* belong to no registered dataset"):
        Ledger.upgrade(path)
    assert _schema_of(path)[0] == "1"
    with pytest.raises(LedgerError, match=r"no ledger at .* to upgrade"):
        Ledger.upgrade(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()


# -- no silent creation ---------------------------------------------------------------------------


def test_create_false_refuses_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ledger.sqlite"
    with pytest.raises(LedgerError) as info:
        Ledger(path, create=False)
    assert str(info.value).startswith(f"no ledger at {path}; create one with `privhist budget init")
    assert f"--ledger {path}" in str(info.value)
    assert not path.exists() and not path.parent.exists()
    # an empty file is not a ledger either, and is left as it is
    path.parent.mkdir()
    path.touch()
    with pytest.raises(LedgerError, match=r"no ledger at .* holds no tables"):
        Ledger(path, create=False)
    assert path.stat().st_size == 0
    with pytest.raises(ValidationError, match="parameter 'create' of Ledger"):
        Ledger(path, create=1)  # type: ignore[arg-type]
    # the default creates it; afterwards create=False opens it
    Ledger(path).init_dataset("d", Budget(1.0))
    assert Ledger(path, create=False).datasets() == ["d"]


def test_a_ledger_deleted_after_opening_is_not_recreated(ledger: Ledger) -> None:
    ledger.path.unlink()
    with pytest.raises(LedgerError, match="cannot open ledger"):
        ledger.show("survey")
    with pytest.raises(LedgerError, match="cannot open ledger"):
        with ledger.spend("survey", Budget(0.1), mechanism="m"):
            pass
    assert not ledger.path.exists()


def test_unknown_dataset_says_how_to_register(ledger: Ledger) -> None:
    with pytest.raises(
        UnknownDatasetError, match=r"privhist budget init --dataset census --epsilon"
    ):
        with ledger.spend("census", Budget(0.1, 0), mechanism="m"):
            pass
    with pytest.raises(LedgerError, match="'census' is not in the ledger"):
        ledger.show("census")


def test_init_dataset_exist_ok(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="already in the ledger"):
        ledger.init_dataset("survey", Budget(1.0, 1e-6))
    ledger.init_dataset("survey", Budget(1.0, 1e-6), exist_ok=True)
    with pytest.raises(LedgerError, match="not changed"):
        ledger.init_dataset("survey", Budget(2.0, 1e-6), exist_ok=True)
    ledger.init_dataset("other", Budget(3.0))
    assert ledger.datasets() == ["other", "survey"]


def test_validation(ledger: Ledger, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="parameter 'epsilon' of Budget must be"):
        Budget(-1, 0)
    with pytest.raises(ValidationError, match="parameter 'delta' of Budget"):
        Budget(1, 1.5)
    with pytest.raises(
        ValidationError, match=r"parameter 'budget' of Ledger\.spend must be a Budget"
    ):
        ledger.spend("survey", (0.1, 0), mechanism="m")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"parameter 'dataset' of Ledger\.spend"):
        ledger.spend("", Budget(0.1), mechanism="m")
    with pytest.raises(ValidationError, match=r"parameter 'mechanism' of Ledger\.spend"):
        ledger.spend("survey", Budget(0.1), mechanism="")
    with pytest.raises(ValidationError, match=r"parameter 'total' of Ledger\.init_dataset"):
        ledger.init_dataset("x", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'timeout' of Ledger"):
        Ledger(tmp_path / "l.sqlite", timeout=-1)
    with pytest.raises(ValidationError, match="parameter 'delta' of BudgetAmount"):
        BudgetAmount(0, -1e-9)


def test_a_transaction_is_entered_once(ledger: Ledger) -> None:
    txn = ledger.spend("survey", Budget(0.1), mechanism="m")
    with txn:
        pass
    with pytest.raises(LedgerError, match="only once"), txn:
        pass
    assert len(ledger.show("survey").spends) == 1


def test_default_ledger_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import platformdirs

    monkeypatch.setattr(platformdirs, "user_data_dir", lambda app: str(tmp_path / "data" / app))
    path = default_ledger_path()
    assert path == tmp_path / "data" / "privhist" / "ledger.sqlite"
    assert path.parent.is_dir()
    led = Ledger()
    assert led.path == path and path.exists()


# -- locking and corruption ---------------------------------------------------------------------


def test_locked_ledger_gives_ledger_error(ledger: Ledger) -> None:
    holder = sqlite3.connect(ledger.path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        impatient = Ledger(ledger.path, timeout=0.2)  # reading is still possible
        assert impatient.show("survey").spends == ()
        ran = []
        start = time.monotonic()
        with pytest.raises(LedgerError, match=r"ledger .*ledger\.sqlite is locked"):
            with impatient.spend("survey", Budget(0.1), mechanism="m"):
                ran.append(True)
        assert time.monotonic() - start >= 0.15
        assert ran == []
        with pytest.raises(LedgerError, match="locked"):
            impatient.init_dataset("other", Budget(1.0))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with ledger.spend("survey", Budget(0.1), mechanism="m"):
        pass


def test_garbage_file_gives_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not a database\x00\xff" * 200)
    with pytest.raises(LedgerError, match=r"garbage\.sqlite is corrupted or not a privhist ledger"):
        Ledger(path)


def test_file_corrupted_after_opening_gives_ledger_error(ledger: Ledger) -> None:
    ledger.path.write_bytes(os.urandom(8192))
    with pytest.raises(LedgerError, match=str(ledger.path.name)):
        ledger.show("survey")
    with pytest.raises(LedgerError, match=str(ledger.path.name)):
        with ledger.spend("survey", Budget(0.1), mechanism="m"):
            pass


def test_foreign_database_gives_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="not a privhist ledger: missing table"):
        Ledger(path)


def test_wrong_schema_version_gives_ledger_error(ledger: Ledger) -> None:
    conn = sqlite3.connect(ledger.path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="schema version 99"):
        Ledger(ledger.path)


def test_missing_column_gives_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("CREATE TABLE datasets (id TEXT PRIMARY KEY, epsilon_total REAL)")
    conn.execute("CREATE TABLE spends (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="wrong schema: table datasets lacks column"):
        Ledger(path)


def test_directory_path_gives_ledger_error(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="is a directory"):
        Ledger(tmp_path)


# -- two processes ------------------------------------------------------------------------------

_WORKER = """
import os, sys, time
from privhist.accounting.ledger import Ledger
from privhist.core.budget import Budget
from privhist.core.errors import BudgetExceededError

path, attempts, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ledger = Ledger(path, timeout=60)
while not os.path.exists(go):
    time.sleep(0.001)
ok = refused = 0
for _ in range(attempts):
    try:
        with ledger.spend("shared", Budget(0.125, 2.0**-30), mechanism="worker"):
            time.sleep(0.002)  # the release happens while the lock is held
        ok += 1
    except BudgetExceededError:
        refused += 1
print(ok, refused)
"""


def test_two_processes_never_overspend(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    Ledger(path).init_dataset("shared", Budget(1.0, 2.0**-27))  # allows exactly 8 spends
    go = tmp_path / "go"
    attempts = 6
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), str(attempts), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(0.3)
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        ok, refused = map(int, out.split())
        results.append((ok, refused))
    assert sum(ok for ok, _ in results) == 8
    assert sum(refused for _, refused in results) == 2 * attempts - 8
    status = Ledger(path).show("shared")
    assert len(status.spends) == 8
    assert status.spent_exact == (Fraction(1), Fraction(1, 2**27))


# -- schema version 3: events, regimes and the rule of each spend ---------------------------------


def test_version_2_is_upgraded_to_4(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite"
    _v1_ledger(path)
    conn = sqlite3.connect(path)  # the version-1 -> 2 statements, as the previous release ran them
    conn.execute("ALTER TABLE datasets ADD COLUMN unit TEXT NOT NULL DEFAULT 'record'")
    conn.execute("ALTER TABLE spends ADD COLUMN neighbouring TEXT NOT NULL DEFAULT ''")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="schema version 2"):
        Ledger(path)
    led, found = Ledger.upgrade(path)
    status = led.show("old")
    assert found == 2 and _schema_of(path)[0] == "4"
    assert status.regime == "basic" and status.spent == BudgetAmount(0.75, 1e-8)
    assert [s.event for s in status.spends] == ["", ""]


def test_renyi_regime_admits_more_gaussians_and_records_events_and_rules(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite", create=True)
    led.init_dataset("g", Budget(2.0, 1e-6), regime="renyi")
    led.init_dataset("b", Budget(2.0, 1e-6))
    gauss = GaussianEvent(9.86353)  # (0.5, 1e-8) by the analytic Gaussian
    counts = {}
    for name in ("g", "b"):
        n = 0
        while True:
            try:
                with led.spend(name, Budget(0.5, 1e-8), mechanism="gauss", event=gauss):
                    n += 1
            except BudgetExceededError:
                break
        counts[name] = n
    assert counts == {"g": 10, "b": 4}
    spends = led.show("g").spends
    assert all(s.privacy_event == gauss for s in spends)
    assert spends[0].rule.startswith("renyi(") and spends[-1].rule == "renyi(16)"
    assert {s.rule for s in led.show("b").spends} == {"basic"}
    # the Renyi regime cannot compose an (epsilon, delta) release with delta > 0
    led.init_dataset("mixed", Budget(2.0, 1e-6), regime="renyi")
    with led.spend("mixed", Budget(0.5), mechanism="laplace", event=LaplaceEvent(2.0)) as tx:
        pass
    assert tx.rule == "basic-pure"
    with pytest.raises(BudgetExceededError):
        with led.spend("mixed", Budget(0.5, 1e-8), mechanism="stability"):
            pass
    with pytest.raises(ValidationError, match="'regime'"):
        led.init_dataset("x", Budget(1.0), regime="advanced")
