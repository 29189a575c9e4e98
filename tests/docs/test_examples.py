"""Every ``python``, ``pycon`` and ``bash`` block of the documentation runs.

The blocks of one page run in order, in a fresh temporary directory, sharing one Python
namespace: a page generates its own data in an early block and later blocks use it. ``pycon``
blocks run as doctests, so what they print is checked too. ``bash`` blocks run under
``bash -euo pipefail`` with ``privhist`` meaning this checkout's command.
"""

from __future__ import annotations

import doctest
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docs._pages import REPO, RUN_LANGUAGES, Block, blocks, pages, runnable_pages

# blocks that may not run (installing the package, servers waiting for peers); keep this small
MAX_SKIPPED = 6

FORKSERVER = Path(__file__).with_name("_forkserver.py")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["MPLBACKEND"] = "Agg"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def privhist_command(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The shell function that ``privhist`` means in the bash blocks: this checkout's command,
    run by a fork server that has imported it once (``_forkserver.py``), or as
    ``python -m privhist`` where Unix sockets with descriptor passing are unavailable."""
    plain = f'privhist() {{ "{sys.executable}" -m privhist "$@"; }}'
    if not hasattr(socket, "send_fds") or not hasattr(os, "fork"):
        yield plain
        return
    sock = tmp_path_factory.mktemp("fork") / "s"
    server = subprocess.Popen(
        [sys.executable, str(FORKSERVER), str(sock)],
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        yield f'privhist() {{ "{sys.executable}" "{FORKSERVER}" --client "{sock}" "$@"; }}'
    finally:
        server.kill()
        server.wait()


def _run_python(block: Block, namespace: dict[str, Any]) -> None:
    exec(compile(block.code, f"{block.page}:{block.line}", "exec"), namespace)


def _run_pycon(block: Block, namespace: dict[str, Any]) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.code, namespace, block.page, block.page, block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    assert runner.failures == 0, "".join(report)


def _run_bash(block: Block, cwd: Path, privhist: str) -> None:
    # the default ledger (in the user data directory) stays in the test's directory
    env = _env(XDG_DATA_HOME=str(cwd / "data-home"))
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{privhist}\nexport -f privhist\n{block.code}"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.page}:{block.line} exited {done.returncode}\n--- block\n{block.code}"
        f"--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"
    )


@pytest.mark.parametrize("page", runnable_pages())
def test_page_examples_run(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, privhist_command: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    ran = 0
    for block in blocks(page, pages()[page]):
        if block.language not in RUN_LANGUAGES or block.skip_reason is not None:
            continue
        if block.language == "python":
            _run_python(block, namespace)
        elif block.language == "pycon":
            _run_pycon(block, namespace)
        else:
            _run_bash(block, tmp_path, privhist_command)
        ran += 1
    assert ran > 0


def test_skipped_blocks_are_few_and_say_why() -> None:
    skipped = [
        b for name, text in pages().items() for b in blocks(name, text) if b.skip_reason is not None
    ]
    assert all(b.skip_reason for b in skipped), "a skip marker needs a reason"
    assert len(skipped) <= MAX_SKIPPED, [f"{b.page}:{b.line}" for b in skipped]


def test_every_block_has_a_language() -> None:
    """An unlabelled fence would escape the runner; non-runnable ones must say what they are
    (``text``, ``yaml``, ...)."""
    unlabelled = [
        f"{b.page}:{b.line}"
        for name, text in pages().items()
        for b in blocks(name, text)
        if not b.language
    ]
    assert unlabelled == []


def test_every_mechanism_page_has_a_runnable_example() -> None:
    gp = pytest.importorskip("tests.docs._pages").gen_pages()
    for info in gp.mechanisms():
        runnable = [
            b
            for b in blocks(info.path, pages()[info.path])
            if b.language in RUN_LANGUAGES and b.skip_reason is None
        ]
        assert runnable, f"{info.path} has no example that runs"
