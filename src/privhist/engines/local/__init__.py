"""The local engine: counting with Polars and NumPy on one machine (the embedded default)."""

from privhist.engines.local.counting import bound_contributions, count, count_array

__all__ = ["bound_contributions", "count", "count_array"]
