"""Every option of every command and sub-command has a help line in ``--help`` (the budget and
ledger flags, whose meaning changes from command to command, among them), and ``budget init``
names what its flags set."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest
from tests.cli_run import run

from privhist.cli.main import _parser


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
    """The option strings of ``parser`` shown in ``--help`` without a help line (none, or an
    empty one)."""
    return [
        action.option_strings[-1]
        for action in parser._actions
        if action.option_strings and not action.help
    ]


def test_every_option_of_every_command_has_a_help_line() -> None:
    commands = list(_commands(_parser("*")))
    assert len(commands) > 40  # every command built in full, plug-ins and sub-commands included
    silent = [
        " ".join(("privhist", *path, flag)) for path, parser in commands for flag in _silent(parser)
    ]
    assert silent == []


def test_budget_init_help_names_the_total_and_the_ledger_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "budget", "init", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "total epsilon of the dataset" in text
    assert "total delta of the dataset (default 0)" in text
    assert "budget ledger (SQLite) path" in text and "created if missing" in text
