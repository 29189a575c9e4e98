"""Engines: where records become the aggregates a release asks for.

Every engine implements :class:`~privhist.engines.base.Engine` (``supports`` and ``compute`` for
the requests of :mod:`privhist.core.requests`) and is named in :mod:`privhist.engines.registry`;
``local`` (Polars/NumPy) is the embedded default, ``spark`` the distributed engine. The names
below load on first use, so the registry's names are read without importing an engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Engine": "privhist.engines.base",
    "check_engine": "privhist.engines.base",
    "LocalEngine": "privhist.engines.local",
    "count": "privhist.engines.local",
    "count_array": "privhist.engines.local",
}

if TYPE_CHECKING:
    from privhist.engines.base import Engine, check_engine
    from privhist.engines.local import LocalEngine, count, count_array


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privhist.engines' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(_LAZY)


__all__ = ["Engine", "LocalEngine", "check_engine", "count", "count_array"]
