"""Crash test of the release path: a release killed (SIGKILL, in a child process) at every step
leaves no readable release without a recorded spend, a ledger that opens cleanly, and a retry that
works.

The child (forked from a server process by ``_hardening_child.run``) runs the real ``privhist``
command with :data:`privhist.core.faults.KILL_ENV` naming the step; it must die by SIGKILL there
(so the test proves the step was reached). Afterwards every file in the directory other than the
input and the ledger is a release, and the ledger must hold a spend for it. The retry runs in this
process, without the variable.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.context
import signal
from pathlib import Path

import _hardening_child
import polars as pl
import pytest

from privhist.accounting.ledger import Ledger
from privhist.cli.main import main
from privhist.core.budget import Budget
from privhist.core.faults import KILL_ENV, STEPS, checkpoint

#: steps before which the spend is committed: a kill there must leave nothing spent and no file
UNPAID_STEPS = ("read", "drawn", "encoded", "before-commit")


def _data(tmp: Path) -> Path:
    rows = ["user,key"] + [f"u{i},{'abc'[i % 7 % 3]}" for i in range(600)]
    path = tmp / "data.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _command(kind: str, data: Path, ledger: Path, out: Path) -> list[str]:
    charge = ["--ledger", str(ledger), "--dataset", "d", "--no-progress"]
    if kind == "histogram":
        return ["histogram", str(data), "--key", "key", "--epsilon", "0.5", "--delta", "1e-6",
                "--output", str(out), *charge]  # fmt: skip
    if kind == "sample":
        return ["sample", str(data), "--key", "key", "--tau", "0.5", "--epsilon", "0.5",
                "--max-frequency", "50", "--delta", "1e-6", "--output", str(out),
                *charge]  # fmt: skip
    assert kind == "heavy-hitters"
    return ["heavy-hitters", str(data), "--key", "key", "--one-shot", "--epsilon", "0.5",
            "--delta", "1e-6", "--output", str(out), *charge]  # fmt: skip


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.ForkServerContext:
    """Children forked from one server process that has imported privhist (a fresh interpreter
    per kill would cost seconds of imports each)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        [
            "privhist.cli.main",
            "privhist.session.releases",
            "privhist.engines.local",
            "privhist.federated.triehh",
            "privhist.mechanisms.sampling.pws.sanitize",
            "_hardening_child",
        ]
    )
    return ctx


def _kill_at(
    ctx: multiprocessing.context.ForkServerContext, step: str, argv: list[str]
) -> int | None:
    """Run the command in a child process set to kill itself at ``step``; its exit code."""
    child = ctx.Process(target=_hardening_child.run, args=(step, argv))
    child.start()
    child.join(timeout=120)
    if child.is_alive():  # pragma: no cover - a hang is a failure, not a pass
        child.kill()
        child.join()
        pytest.fail(f"the release killed at {step!r} hung")
    return child.exitcode


def _releases_on_disk(tmp: Path, keep: set[str]) -> list[Path]:
    """Every file in ``tmp`` that is not the input or the ledger (with its journal)."""
    return sorted(p for p in tmp.iterdir() if p.name not in keep)


def _check_release(path: Path, kind: str) -> None:
    """``path`` is a complete release of ``kind`` (a file privhist's readers accept)."""
    if kind == "sample":
        doc = json.loads(path.read_text())
        assert {"metadata", "rows"} <= set(doc)
    else:
        frame = pl.read_csv(path)
        assert frame.columns[0] == "key" and frame.height >= 1


CASES = [("histogram", step) for step in STEPS] + [
    (kind, step)
    for kind in ("sample", "heavy-hitters")
    for step in ("encoded", "before-commit", "staged")
]


@pytest.mark.parametrize(("kind", "step"), CASES)
def test_kill_at_every_step_leaves_no_unpaid_release(
    tmp_path: Path,
    kind: str,
    step: str,
    capsys: pytest.CaptureFixture[str],
    forkserver: multiprocessing.context.ForkServerContext,
) -> None:
    data = _data(tmp_path)
    ledger_path = tmp_path / "ledger.sqlite"
    Ledger(ledger_path).init_dataset("d", Budget(2.0, 1e-5))
    out = tmp_path / ("out.json" if kind == "sample" else "out.csv")
    keep = {data.name, ledger_path.name, ledger_path.name + "-journal", ledger_path.name + "-wal"}
    argv = _command(kind, data, ledger_path, out)

    code = _kill_at(forkserver, step, argv)
    assert code == -signal.SIGKILL, (step, code)

    # the ledger opens cleanly (a hot journal left by the kill is rolled back on opening)
    spends = len(Ledger(ledger_path, create=False).show("d").spends)
    left = _releases_on_disk(tmp_path, keep)
    if step in UNPAID_STEPS:
        assert spends == 0, step
        assert left == [], (step, left)  # no byte of the release reached the disk
    else:
        assert spends == 1, step  # the spend is durable before any byte is written
        if step == "committed":
            assert left == []
        elif step == "staged":  # the complete, paid-for release in a hidden file
            assert len(left) == 1 and left[0].name.startswith(f".{out.name}.")
        else:
            assert left == [out]
            _check_release(out, kind)
    # no readable release without a recorded spend
    assert spends >= min(len(left), 1)

    # a retry works and is charged once more
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 0, err
    _check_release(out, kind)
    assert len(Ledger(ledger_path, create=False).show("d").spends) == spends + 1


def test_checkpoints_are_inert_unless_their_step_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Normal runs pass every checkpoint (a named step would kill this very process)."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    for step in STEPS:
        checkpoint(step)
    monkeypatch.setenv(KILL_ENV, "no-such-step")
    for step in STEPS:
        checkpoint(step)
    assert len(set(STEPS)) == 7
