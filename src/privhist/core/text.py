"""Wording shared by the library's messages and the command line's output."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, singular: str, plural: str | None = None, *, spec: str = "") -> str:
    """``n`` and what it counts, in the singular for exactly one: ``counted(1, "key")`` is
    ``'1 key'``, ``counted(0, "key")`` is ``'0 keys'``. ``plural`` is for words that do not take
    an ``s`` and for phrases whose verb agrees (``counted(n, "record was dropped", "records were
    dropped")``); ``spec`` formats the number (``","`` groups thousands).

    >>> counted(1, "level"), counted(3, "row"), counted(1, "row was", "rows were")
    ('1 level', '3 rows', '1 row was')
    """
    return f"{n:{spec}} {singular if n == 1 else plural or singular + 's'}"
