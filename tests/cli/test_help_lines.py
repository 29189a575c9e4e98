"""Every option a new user meets first has a help line in ``--help``: the budget flags
(``--epsilon``, ``--delta``) and the ledger flags (``--ledger``, ``--dataset``) of every command,
and every option of ``privhist sample`` and of each ``privhist budget`` action."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest
from tests.cli_run import run

from privhist.cli.main import _parser

#: flags whose meaning changes from command to command, so each command must say what it is
BUDGET_AND_LEDGER = ("--epsilon", "--delta", "--ledger", "--dataset")


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``(command words, parser)`` of every command and sub-command, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _silent(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings of ``parser`` shown in ``--help`` without a help line."""
    return [
        action.option_strings[-1]
        for action in parser._actions
        if action.option_strings and action.help is None
    ]


def test_budget_and_ledger_flags_say_what_they_are() -> None:
    silent = [
        f"privhist {' '.join(path)} {flag}"
        for path, parser in _commands(_parser("*"))
        for flag in _silent(parser)
        if flag in BUDGET_AND_LEDGER
    ]
    assert silent == []


@pytest.mark.parametrize(
    "command", [("sample",), ("budget", "init"), ("budget", "show"), ("budget", "upgrade")]
)
def test_every_option_of_sample_and_budget_has_a_help_line(command: tuple[str, ...]) -> None:
    parsers = dict(_commands(_parser("*")))
    assert _silent(parsers[command]) == []


def test_budget_init_help_names_the_total_and_the_ledger_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "budget", "init", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "total epsilon of the dataset" in text
    assert "total delta of the dataset (default 0)" in text
    assert "budget ledger (SQLite) path" in text and "created if missing" in text
