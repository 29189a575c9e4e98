"""The README stays true: its first commands, and its Python example runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_opens_with_exactly_two_commands() -> None:
    first = _blocks("bash")[0].strip().splitlines()
    assert len(first) == 2
    install_demo, install_test = first
    assert "pip install" in install_demo and "privhist demo" in install_demo
    assert "pip install" in install_test and "pytest" in install_test


def test_ci_runs_the_readme_test_command() -> None:
    test_command = _blocks("bash")[0].strip().splitlines()[1]
    ci = CI.read_text()
    # CI runs in a fresh venv, where `python` is the venv's interpreter
    assert test_command.replace("python3", "python") in ci


def test_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the examples write files (ledgers, releases) where they run
    for block in _blocks("python"):
        exec(compile(block, str(README), "exec"), {})
