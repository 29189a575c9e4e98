"""The local engine: counting with Polars and NumPy on one machine (the embedded default)."""

from privhist.engines.local.counting import bound_contributions, count, count_array
from privhist.engines.local.engine import LocalEngine, as_polars

__all__ = ["LocalEngine", "as_polars", "bound_contributions", "count", "count_array"]
