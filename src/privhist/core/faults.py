"""Named points of the release path where a crash test can kill the process.

The release path (:meth:`privhist.session.Session.charged`, the ledger's spend and the atomic
writers) calls :func:`checkpoint` at each step. When the environment variable
:data:`KILL_ENV` names that step, the process sends itself ``SIGKILL``: no handler, ``finally``
block or ``atexit`` hook runs, exactly as if the machine's operator had killed it there. The crash
tests (``tests/hardening``) run a release in a child process with the variable set, then check
the files it left behind against the ledger.

When the variable is unset (every normal run) a checkpoint reads one environment entry and
returns; it has no other effect. Setting it can only kill the process that reads it.

The steps, in the order a release passes them (:data:`STEPS`):

* ``read``: the data has been read and counted, nothing drawn yet;
* ``drawn``: the release has been drawn, inside the open ledger transaction;
* ``encoded``: the release has been encoded, in memory, inside the open transaction;
* ``before-commit``: the ledger is about to commit the spend;
* ``committed``: the spend is committed, no byte of the release is on disk yet;
* ``staged``: the complete file is written to a hidden temporary file, not yet renamed;
* ``published``: the file has been renamed to its destination.
"""

from __future__ import annotations

import os
import signal
from typing import Final

__all__ = ["KILL_ENV", "STEPS", "checkpoint"]

#: the environment variable naming the step at which to kill the process
KILL_ENV: Final[str] = "PRIVHIST_FAULT_KILL_AT"

#: the checkpoints of the release path, in order
STEPS: Final[tuple[str, ...]] = (
    "read",
    "drawn",
    "encoded",
    "before-commit",
    "committed",
    "staged",
    "published",
)


def checkpoint(step: str) -> None:
    """Kill this process with ``SIGKILL`` if :data:`KILL_ENV` names ``step``; else return."""
    if os.environ.get(KILL_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
