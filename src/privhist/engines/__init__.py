"""Engines: where records become contribution-bounded counts per key.

Every engine implements :class:`~privhist.engines.base.Engine`; ``local`` (Polars/NumPy) is the
embedded default.
"""

from privhist.engines.base import CountRequest, Engine, check_engine
from privhist.engines.local import LocalEngine, count, count_array

__all__ = ["CountRequest", "Engine", "LocalEngine", "check_engine", "count", "count_array"]
