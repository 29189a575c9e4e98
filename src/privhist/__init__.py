"""privhist: differentially private histograms and frequency estimation.

The package is layered (see ``DESIGN.md``): ``core`` <- ``noise`` <- ``accounting`` <-
``mechanisms`` <- ``planning`` <- ``engines``/``io`` <- ``session`` <- ``cli``.
"""

from privhist.core.budget import Budget
from privhist.core.errors import (
    BudgetExceededError,
    InputDataError,
    LedgerError,
    PrivhistError,
    ValidationError,
)
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import RandomSource, SecureRandom, SeededRandom

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # the Session pulls in the engines (Polars); import it only when it is asked for
    if name == "Session":
        from privhist.session import Session

        return Session
    raise AttributeError(f"module 'privhist' has no attribute {name!r}")


__all__ = [
    "Budget",
    "BudgetExceededError",
    "InputDataError",
    "LedgerError",
    "Neighbouring",
    "PrivhistError",
    "RandomSource",
    "Relation",
    "SecureRandom",
    "SeededRandom",
    "Session",
    "ValidationError",
    "__version__",
]
