"""Every releasing command charges ``--dataset`` in the ledger, refuses before reading data when
the budget is short, and never charges seeded (not private) output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.cli_run import run


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    words = tmp_path / "words.csv"
    words.write_text("word\n" + "hello\n" * 4000 + "hey\n" * 3000 + "hi\n" * 2000)
    times = tmp_path / "times.csv"
    times.write_text("t\n" + "".join(f"{(i * 37) % 1000}\n" for i in range(20000)))
    return {"words": words, "times": times, "ledger": tmp_path / "ledger.sqlite"}


def _spent(capsys: pytest.CaptureFixture[str], ledger: Path) -> dict[str, float]:
    code, out, _ = run(
        capsys, "budget", "show", "--dataset", "d", "--ledger", str(ledger), "--json"
    )
    assert code == 0
    row = json.loads(out)[0]
    return {"epsilon": row["spent"]["epsilon"], "releases": row["releases"]}


def test_release_commands_charge_the_ledger(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    led = str(files["ledger"])
    code, _, err = run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "d",
        "--epsilon",
        "2.5",
        "--delta",
        "1e-6",
        "--ledger",
        led,
    )
    assert code == 0, err
    charge = ["--dataset", "d", "--ledger", led]
    code, out, err = run(
        capsys,
        "heavy-hitters",
        str(files["words"]),
        "--key",
        "word",
        "--one-shot",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        *charge,
    )
    assert code == 0, err
    assert _spent(capsys, files["ledger"]) == {"epsilon": 1.0, "releases": 1}
    common = ["--column", "t", "--range", "0", "1000", "--epsilon", "1", "--delta", "1e-8"]
    code, out, err = run(
        capsys, "range", str(files["times"]), *common, "--query", "0", "500", *charge
    )
    assert code == 0, err
    # the range is charged the guarantee it states: its levels' certified PLD composition,
    # calibrated to just within the epsilon asked for
    stated = float(re.search(r"guarantee \(([^,]+), ", err).group(1))  # type: ignore[union-attr]
    assert 0.98 < stated <= 1.0
    spent = _spent(capsys, files["ledger"])
    assert spent["releases"] == 2 and spent["epsilon"] == pytest.approx(1 + stated, abs=1e-6)
    # 0.5 is left: a third release of epsilon 1 is refused before any output
    code, out, err = run(capsys, "quantiles", str(files["times"]), *common, "--q", "0.5", *charge)
    assert code == 2 and out == "" and "release refused for dataset 'd'" in err
    assert _spent(capsys, files["ledger"]) == spent
    # seeded output is never charged
    code, out, err = run(
        capsys,
        "heavy-hitters",
        str(files["words"]),
        "--key",
        "word",
        "--one-shot",
        "--epsilon",
        "0.1",
        "--delta",
        "1e-8",
        "--seed",
        "1",
        *charge,
    )
    assert code == 2 and "(--seed)" in err and out == ""
    # --ledger alone names no dataset
    code, out, err = run(
        capsys, "quantiles", str(files["times"]), *common, "--q", "0.5", "--ledger", led
    )
    assert code == 2 and "'--dataset'" in err


def test_unknown_dataset_is_refused_before_the_data_is_read(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    led = str(files["ledger"])
    run(capsys, "budget", "init", "--dataset", "d", "--epsilon", "1", "--ledger", led)
    missing = tmp_path / "absent.csv"
    code, _, err = run(
        capsys,
        "heavy-hitters",
        str(missing),
        "--key",
        "word",
        "--epsilon",
        "0.5",
        "--delta",
        "1e-8",
        "--dataset",
        "other",
        "--ledger",
        led,
    )
    assert code == 2 and "other" in err and "absent.csv" not in err


def test_private_sample_is_charged(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    led = str(files["ledger"])
    run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "d",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--ledger",
        led,
    )
    out_file = tmp_path / "s.csv"
    args = [
        "sample",
        str(files["words"]),
        "--key",
        "word",
        "--tau",
        "0.01",
        "--scheme",
        "ppswor",
        "--epsilon",
        "0.75",
        "--delta",
        "1e-6",
        "--keys-only",
        "--no-progress",
        "--dataset",
        "d",
        "--ledger",
        led,
    ]
    code, _, err = run(capsys, *args, "--output", str(out_file))
    assert code == 0, err
    assert _spent(capsys, files["ledger"]) == {"epsilon": 0.75, "releases": 1}
    second = tmp_path / "t.csv"
    code, _, err = run(capsys, *args, "--output", str(second))
    assert code == 2 and "release refused" in err and not second.exists()


# -- `budget`: names, the Renyi filter's view, readable amounts, upgrades -----------------------


@pytest.mark.parametrize("name", ["x" * 100_000, "two\nlines", "esc\x1b[31mred"])
def test_budget_init_refuses_long_or_unprintable_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    path = tmp_path / "l.sqlite"
    code, out, err = run(capsys, "budget", "init", "--dataset", name, "--epsilon", "1",
                         "--ledger", str(path))  # fmt: skip
    assert code != 0 and out == "" and err.count("\n") == 1 and len(err) < 300
    assert err.startswith("privhist: error: parameter 'dataset' (--dataset) of budget init must")
    assert not path.exists()


def test_budget_show_in_the_renyi_regime_shows_the_filter(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from privhist.accounting.composition import GaussianEvent
    from privhist.accounting.ledger import Ledger
    from privhist.core.budget import Budget
    from privhist.core.errors import BudgetExceededError

    path = tmp_path / "l.sqlite"
    code, _, err = run(capsys, "budget", "init", "--dataset", "g", "--epsilon", "2", "--delta",
                       "1e-6", "--regime", "renyi", "--ledger", str(path))  # fmt: skip
    assert code == 0 and "(Renyi regime)" in err
    led = Ledger(path)
    n = 0
    while True:  # Gaussian releases each stating (0.3, 1e-8), until the filter refuses
        try:
            with led.spend("g", Budget(0.3, 1e-8), mechanism="g", event=GaussianEvent(15.0)):
                n += 1
        except BudgetExceededError:
            break
    assert 0.3 * n > 2  # their stated epsilons add far past the total
    code, out, _ = run(capsys, "budget", "show", "--ledger", str(path))
    assert code == 0
    view = led.show("g").renyi_view()
    assert view is not None
    assert out.startswith(f"g: total (2, 1e-06), Renyi filter, {n} releases: order {view.order:g}")
    assert f"rho <= {float(view.rho_left):.4g}" in out and "spent" not in out
    code, out, _ = run(capsys, "budget", "show", "--ledger", str(path), "--json")
    row = json.loads(out)[0]
    assert row["regime"] == "renyi" and "remaining" not in row and "spent" not in row
    assert row["filter"]["rho_remaining"] == float(view.rho_left)
    assert row["stated_sum"]["epsilon"] == pytest.approx(0.3 * n)


def test_amounts_print_the_same_in_show_remaining_and_refusals(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from privhist.accounting.ledger import Ledger
    from privhist.core.budget import Budget
    from privhist.core.errors import BudgetExceededError
    from privhist.session import Session

    path = tmp_path / "l.sqlite"
    Ledger(path).init_dataset("d", Budget(1.0, 1e-6))
    with Ledger(path).spend("d", Budget(0.1, 1e-8), mechanism="m"):
        pass
    code, out, _ = run(capsys, "budget", "show", "--ledger", str(path))
    assert code == 0
    assert (
        out.strip()
        == "d: total (1, 1e-06), spent (0.1, 1e-08) in 1 release, remaining (0.9, 9.9e-07)"
    )
    with Session(ledger=path, dataset="d") as s:
        assert str(s.remaining()) == "(0.9, 9.9e-07)"
    with pytest.raises(BudgetExceededError, match=r"but only \(0\.9, 9\.9e-07\) remains$"):
        with Ledger(path).spend("d", Budget(1.0), mechanism="m"):
            pass
    assert "9.899999999999998e-07" not in out


def test_budget_upgrade(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import sqlite3

    from privhist.accounting.ledger import Ledger
    from privhist.core.budget import Budget

    path = tmp_path / "old.sqlite"
    Ledger(path).init_dataset("d", Budget(1.0))
    with Ledger(path).spend("d", Budget(0.5), mechanism="m"):
        pass
    conn = sqlite3.connect(path)  # as privhist wrote it before the chain (schema version 3)
    conn.execute("ALTER TABLE spends DROP COLUMN chain")
    conn.execute("ALTER TABLE datasets DROP COLUMN head")
    conn.execute("DELETE FROM meta WHERE key = 'ledger_head'")
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    code, _, err = run(capsys, "budget", "show", "--ledger", str(path))
    assert code != 0 and f"`privhist budget upgrade --ledger {path}`" in err
    code, _, err = run(capsys, "budget", "upgrade", "--ledger", str(path))
    assert code == 0 and "upgraded from schema version 3 to 4" in err
    assert "1 spend hash-chained" in err
    code, out, _ = run(capsys, "budget", "show", "--ledger", str(path))
    assert code == 0 and "spent (0.5, 0) in 1 release" in out
    code, _, err = run(capsys, "budget", "upgrade", "--ledger", str(path))
    assert code == 0 and "already at schema version 4" in err
    code, _, err = run(capsys, "budget", "upgrade", "--ledger", str(tmp_path / "none.sqlite"))
    assert code != 0 and "no ledger at" in err and not (tmp_path / "none.sqlite").exists()
