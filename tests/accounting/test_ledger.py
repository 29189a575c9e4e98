"""The durable budget ledger: atomic check-and-spend, rollback, locking, corruption."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privhist.accounting.ledger import (
    BudgetAmount,
    Ledger,
    UnknownDatasetError,
    default_ledger_path,
)
from privhist.core.budget import Budget
from privhist.core.errors import BudgetExceededError, LedgerError, ValidationError


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


def test_float_sums_within_relative_tolerance(ledger: Ledger) -> None:
    # ten spends of 0.1 fit a total of 1 (their float sum is not above 1 by more than rounding)
    for _ in range(10):
        with ledger.spend("survey", Budget(0.1, 0), mechanism="m"):
            pass
    status = ledger.show("survey")
    assert not status.allows(Budget(0.1, 0))
    assert not status.allows(Budget(1e-6, 0))
    with pytest.raises(BudgetExceededError):
        with ledger.spend("survey", Budget(1e-6, 0), mechanism="m"):
            pass
    assert len(ledger.show("survey").spends) == 10


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
        with ledger.spend("shared", Budget(0.1, 1e-9), mechanism="worker"):
            time.sleep(0.002)  # the release happens while the lock is held
        ok += 1
    except BudgetExceededError:
        refused += 1
print(ok, refused)
"""


def test_two_processes_never_overspend(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    Ledger(path).init_dataset("shared", Budget(1.0, 1e-8))  # allows exactly 10 spends
    go = tmp_path / "go"
    attempts = 9
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
    assert sum(ok for ok, _ in results) == 10
    assert sum(refused for _, refused in results) == 2 * attempts - 10
    status = Ledger(path).show("shared")
    assert len(status.spends) == 10
    assert status.spent.epsilon <= 1.0 * (1 + 1e-9)
    assert status.spent.delta <= 1e-8 * (1 + 1e-9)
