"""privhist: differentially private histograms and frequency estimation.

The package is layered (see ``DESIGN.md``): ``core`` <- ``noise`` <- ``accounting`` <-
``mechanisms`` <- ``planning`` <- ``engines``/``io`` <- ``cli``.
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
    "ValidationError",
    "__version__",
]
