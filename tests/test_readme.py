"""The README stays true: its first commands, and its Python examples (and those of the
command-line guide it points to, ``docs/guide.md``) print what they show."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"


def _blocks(lang: str, pages: tuple[Path, ...] = (README,)) -> list[str]:
    return [
        block
        for page in pages
        for block in re.findall(rf"```{lang}\n(.*?)```", page.read_text(), flags=re.S)
    ]


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


#: ``...`` in an expected output stands for what differs from run to run (noisy counts)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _run_example(source: str, name: str) -> doctest.TestResults:
    test = doctest.DocTestParser().get_doctest(source, {}, name, str(README), 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=lambda text: print(text, end=""))
    return doctest.TestResults(runner.failures, runner.tries)


def test_every_python_example_states_its_output() -> None:
    """Examples are doctests (``pycon`` blocks) whose printed results are checked; a plain
    ``python`` block would run without asserting anything."""
    assert _blocks("python", (README, GUIDE)) == []
    examples = _blocks("pycon", (README, GUIDE))
    assert len(_blocks("pycon")) >= 1 and len(examples) >= 8
    for block in examples:
        parsed = doctest.DocTestParser().get_examples(block)
        assert parsed and all(e.source for e in parsed)
        assert any(e.want.strip() for e in parsed), f"an example that prints nothing:\n{block}"


def test_python_examples_print_what_they_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the examples write files (ledgers, releases) where they run
    for i, block in enumerate(_blocks("pycon", (README, GUIDE))):
        result = _run_example(block, f"README example {i + 1}")
        assert result.failed == 0, f"README example {i + 1} printed something else"


def test_a_wrong_printed_result_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Power check: the same runner fails an example whose stated output is wrong."""
    monkeypatch.chdir(tmp_path)
    block = next(b for b in _blocks("pycon", (README, GUIDE)) if "[12 15  8]" in b)
    assert _run_example(block.replace("[12 15  8]", "[12 15  9]"), "altered").failed == 1


def test_readme_links_point_at_files_in_the_repository() -> None:
    # a link to a page the documentation build generates (docs/mechanisms/) is broken where the
    # README is read most, in the repository itself
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local, "the README links no page of the repository"
    missing = [link for link in local if not (README.parent / link).exists()]
    assert missing == []
