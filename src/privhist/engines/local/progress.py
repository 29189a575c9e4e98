"""A quiet status display for long reads: a spinner with elapsed time on standard error.

The display appears only when reading takes longer than a moment (``delay`` seconds), only on
standard error, and only when standard error is a terminal, so pipes, logs and tests see
nothing. It is drawn by Rich's refresh thread while the calling thread waits on Polars (which
releases the GIL), and it leaves no trace once the read finishes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

#: seconds a read may take before the status appears
DEFAULT_DELAY = 0.5


@contextmanager
def status(message: str, *, enabled: bool = True, delay: float = DEFAULT_DELAY) -> Iterator[None]:
    """Show ``message`` with a spinner on stderr while the block runs longer than ``delay``.

    >>> with status("counting", enabled=False):
    ...     pass
    """
    if not enabled:
        yield
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    display = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    display.add_task(message, total=None)
    lock = threading.Lock()
    state = {"started": False, "finished": False}

    def start() -> None:
        with lock:
            if not state["finished"]:
                display.start()
                state["started"] = True

    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["finished"] = True
            if state["started"]:
                display.stop()
