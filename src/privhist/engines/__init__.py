"""Engines: where records become contribution-bounded counts per key.

``local`` (Polars/NumPy) is the embedded default.
"""

from privhist.engines.local import count, count_array

__all__ = ["count", "count_array"]
