"""Small systems the harness tests run in fresh processes (imported there by name)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _harness import Skip


def spin(seconds: float) -> Callable[[], dict[str, float]]:
    """Busy for ``seconds`` of this process's CPU time."""

    def run() -> dict[str, float]:
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
        return {"spun": seconds}

    return run


def spin_child(seconds: float) -> Callable[[], int]:
    """Busy in a forked child for ``seconds`` of CPU time (the tree's CPU must include it)."""

    def run() -> int:
        pid = os.fork()
        if pid == 0:
            start = time.process_time()
            while time.process_time() - start < seconds:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        return pid

    return run


def hold(megabytes: int) -> Callable[[], int]:
    """Touches ``megabytes`` of fresh memory in the timed run (the setup allocates nothing)."""

    def run() -> int:
        block = bytearray(megabytes << 20)
        block[::4096] = b"\1" * len(block[::4096])
        return len(block)

    return run


def absent() -> Callable[[], None]:
    raise Skip("the peer is not installed here")


def sleep(seconds: float) -> Callable[[], None]:
    return lambda: time.sleep(seconds)


def slow_setup(seconds: float) -> Callable[[], None]:
    """Sleeps ``seconds`` in the untimed setup."""
    time.sleep(seconds)
    return lambda: None


def spin_grandchild(seconds: float) -> Callable[[], None]:
    """The timed run forks a child that spins for ``seconds`` of CPU time, then sleeps, and is
    never waited for (as a JVM a driver starts): only the tree read before a stop sees it."""

    def run() -> None:
        if os.fork() == 0:
            start = time.process_time()
            while time.process_time() - start < seconds:
                pass
            time.sleep(600)
            os._exit(0)
        time.sleep(600)

    return run
