"""privhist: differentially private histograms and frequency estimation.

The package is layered (see ``DESIGN.md``): ``core`` <- ``noise`` <- ``accounting`` <-
``mechanisms`` <- ``planning`` <- ``engines``/``io`` <- ``session`` <- ``cli``.

The names below are imported on first use (PEP 562), so ``import privhist`` (and the start-up of
the ``privhist`` command) does not load NumPy until something needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Budget": "privhist.core.budget",
    "BudgetExceededError": "privhist.core.errors",
    "InputDataError": "privhist.core.errors",
    "LedgerError": "privhist.core.errors",
    "PrivhistError": "privhist.core.errors",
    "ValidationError": "privhist.core.errors",
    "Neighbouring": "privhist.core.neighbouring",
    "Relation": "privhist.core.neighbouring",
    "RandomSource": "privhist.core.random",
    "SecureRandom": "privhist.core.random",
    "SeededRandom": "privhist.core.random",
    "Session": "privhist.session",
}

if TYPE_CHECKING:
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
    from privhist.session import Session


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privhist' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


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
