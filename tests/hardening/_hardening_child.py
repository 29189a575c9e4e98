"""What a crash-test child process runs: one ``privhist`` command, killed at a named step.

The children are forked from a server process that has already imported privhist (see
``test_kill.py``), so each kill costs a fork instead of a fresh interpreter.
"""

from __future__ import annotations

import os


def run(step: str, argv: list[str]) -> None:
    """Run ``privhist ARGV`` with the release path set to kill this process at ``step``."""
    from privhist.cli.main import main
    from privhist.core.faults import KILL_ENV

    os.environ[KILL_ENV] = step
    main(argv)
