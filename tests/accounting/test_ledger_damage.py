"""A damaged ledger is refused with one line, never read as fewer spends.

Every page of a ledger is zeroed, and the file truncated to every page count, in turn; the file
cut by one byte (``head -c -1``), a spend removed or edited with SQL, and a dataset removed with
its spends: each is either refused with a one-line :class:`LedgerError` or read back with every
spend it held, and no further spend is then admitted beyond the total.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.cli_run import run

from privhist.accounting.ledger import Ledger, LedgerStatus
from privhist.core.budget import Budget
from privhist.core.errors import BudgetExceededError, LedgerError

DATASETS = ("alpha", "beta", "gamma")
TOTAL = Budget(3.0, 1e-6)
SPEND = Budget(0.25, 1e-8)


@pytest.fixture(scope="module")
def ledger_bytes(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, LedgerStatus]]:
    """A ledger of several pages: three datasets, each spent to its total (12 spends of 0.25),
    with notes of varying length so that spends straddle page boundaries."""
    path = tmp_path_factory.mktemp("damage") / "ledger.sqlite"
    led = Ledger(path)
    for name in DATASETS:
        led.init_dataset(name, TOTAL)
    for i in range(36):
        with led.spend(DATASETS[i % 3], SPEND, mechanism="stability", note="n" * (37 * i % 400)):
            pass
    status = {name: led.show(name) for name in DATASETS}
    assert all(not st.allows(SPEND) for st in status.values())
    return path.read_bytes(), status


def _outcome(path: Path, original: dict[str, LedgerStatus]) -> str:
    """'refused' (one-line LedgerError) or 'intact' (every spend read back, no overspend)."""
    try:
        led = Ledger(path, create=False)
        for name in DATASETS:
            status = led.show(name)
            assert status.total == original[name].total, name
            assert status.spends == original[name].spends, f"a spend of {name} was lost"
            with pytest.raises(BudgetExceededError):
                with led.spend(name, SPEND, mechanism="m"):
                    pass
    except LedgerError as e:
        assert "\n" not in str(e) and str(path) in str(e), str(e)
        return "refused"
    return "intact"


def test_ledger_spans_several_pages(ledger_bytes: tuple[bytes, dict[str, LedgerStatus]]) -> None:
    data, _ = ledger_bytes
    assert len(data) // 4096 >= 8  # the page-by-page tests below cover a real layout


@pytest.mark.parametrize("damage", ["zeroed", "truncated"])
def test_every_page_damaged_in_turn_is_refused(
    tmp_path: Path, ledger_bytes: tuple[bytes, dict[str, LedgerStatus]], damage: str
) -> None:
    data, original = ledger_bytes
    page = int.from_bytes(data[16:18], "big")
    pages = len(data) // page
    outcomes = {}
    for i in range(pages):
        path = tmp_path / f"{damage}-{i}.sqlite"
        if damage == "zeroed":
            path.write_bytes(data[: i * page] + bytes(page) + data[(i + 1) * page :])
        else:
            path.write_bytes(data[: i * page])
        outcomes[i] = _outcome(path, original)
    # every page of this ledger holds something the ledger needs, so none is left unnoticed
    assert set(outcomes.values()) == {"refused"}, outcomes


def test_a_file_cut_by_one_byte_is_refused(
    tmp_path: Path,
    ledger_bytes: tuple[bytes, dict[str, LedgerStatus]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, original = ledger_bytes
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[:-1])  # head -c -1
    assert _outcome(path, original) == "refused"
    code, out, err = run(capsys, "budget", "show", "--ledger", str(path))
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and "is damaged and refused" in err


def test_the_issue_case_two_releases_then_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # two releases of epsilon 1 on a total of 3, the file cut by one byte: without the checks
    # the ledger read one release and admitted three more
    path = tmp_path / "L.db"
    led = Ledger(path)
    led.init_dataset("d", Budget(3.0))
    for _ in range(2):
        with led.spend("d", Budget(1.0), mechanism="m"):
            pass
    cut = tmp_path / "T.db"
    cut.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(LedgerError, match="is damaged and refused"):
        Ledger(cut).show("d")
    with pytest.raises(LedgerError, match="is damaged and refused"):
        with Ledger(cut).spend("d", Budget(1.0), mechanism="m"):
            pass
    code, _, err = run(capsys, "budget", "show", "--ledger", str(cut))
    assert code != 0 and err.startswith("privhist: error: ledger") and err.count("\n") == 1


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("DELETE FROM spends WHERE id = 5", "spend 8 does not match its hash chain"),
        (
            "DELETE FROM spends WHERE id = (SELECT MAX(id) FROM spends WHERE dataset = 'beta')",
            "do not reach its head hash",
        ),
        ("UPDATE spends SET epsilon = 0.125 WHERE id = 5", "spend 5 does not match"),
        ("UPDATE spends SET note = 'moved' WHERE id = 2", "spend 2 does not match"),
        ("UPDATE spends SET dataset = 'alpha' WHERE id = 2", "dataset 'alpha': spend"),
        ("UPDATE datasets SET epsilon_total = 30.0 WHERE id = 'beta'", "spend 2 does not match"),
        ("DELETE FROM spends WHERE dataset = 'beta'", "do not reach its head hash"),
    ],
)
def test_a_removed_or_edited_spend_is_detected(
    tmp_path: Path, ledger_bytes: tuple[bytes, dict[str, LedgerStatus]], edit: str, message: str
) -> None:
    data, original = ledger_bytes
    path = tmp_path / "edited.sqlite"
    path.write_bytes(data)
    _sql(path, edit)
    led = Ledger(path, create=False)  # the file itself is sound; its content is not
    with pytest.raises(LedgerError, match=message):
        for name in DATASETS:
            led.show(name)
    refused = []
    for name in DATASETS:  # the damaged dataset refuses; the others are spent out
        try:
            with led.spend(name, Budget(0.125), mechanism="m"):
                pass
        except BudgetExceededError:
            continue
        except LedgerError as e:
            refused.append(str(e))
    assert len(refused) >= 1 and all("damaged and refused" in e for e in refused)
    assert _outcome(path, original) == "refused"


def test_a_removed_dataset_is_detected(
    tmp_path: Path, ledger_bytes: tuple[bytes, dict[str, LedgerStatus]]
) -> None:
    # removed with all its spends: re-registering it would start a fresh budget
    data, _ = ledger_bytes
    path = tmp_path / "removed.sqlite"
    path.write_bytes(data)
    _sql(
        path,
        "DELETE FROM spends WHERE dataset = 'gamma'",
        "DELETE FROM datasets WHERE id = 'gamma'",
    )
    led = Ledger(path, create=False)
    for action in (led.datasets, lambda: led.show("alpha")):
        with pytest.raises(LedgerError, match="do not match the ledger's head hash"):
            action()
    with pytest.raises(LedgerError, match="head hash"):
        led.init_dataset("gamma", TOTAL)


def test_an_index_that_disagrees_with_its_table_is_refused(
    tmp_path: Path, ledger_bytes: tuple[bytes, dict[str, LedgerStatus]]
) -> None:
    # the index by dataset is what `WHERE dataset = ?` reads; a spend missing from it would be
    # a spend forgotten. SQLite's integrity check compares every index with its table.
    data, _ = ledger_bytes
    path = tmp_path / "index.sqlite"
    path.write_bytes(data)
    conn = sqlite3.connect(path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'spends_dataset'")
    index_page = root.fetchone()[0]
    conn.close()
    raw = bytearray(path.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    start = (index_page - 1) * page
    cells = int.from_bytes(raw[start + 3 : start + 5], "big")  # a leaf index page's cell count
    assert raw[start] == 0x0A and cells > 1
    raw[start + 3 : start + 5] = (cells - 1).to_bytes(2, "big")  # forget its last entry
    path.write_bytes(bytes(raw))
    with pytest.raises(LedgerError, match="integrity check reports"):
        Ledger(path, create=False)
