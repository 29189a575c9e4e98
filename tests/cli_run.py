"""The one helper that runs the ``privhist`` command in-process for the tests."""

from __future__ import annotations

import pytest

from privhist.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``privhist ARGV...``; return its exit code, standard output and standard error."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
