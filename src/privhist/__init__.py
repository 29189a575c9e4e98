"""privhist: differentially private histograms and frequency estimation.

The package is layered; the order is stated once, in ``docs/concepts/architecture.md``, and
enforced by ``tests/test_layers.py``. Start with :class:`Session`: each of its methods is one
kind of release and returns a :class:`Release` (or, with ``dry_run=True``, a :class:`DryRun`).

The names below are imported on first use (PEP 562), so ``import privhist`` (and the start-up of
the ``privhist`` command) does not load NumPy until something needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from privhist.core.version import __version__

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
    "Release": "privhist.io.release",
    "DryRun": "privhist.session.dryrun",
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
    from privhist.io.release import Release
    from privhist.session import Session
    from privhist.session.dryrun import DryRun


def __getattr__(name: str) -> Any:
    if name == "metrics":  # the submodule of Session.aggregate's metrics, as privhist.metrics
        return importlib.import_module("privhist.metrics")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privhist' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Budget",
    "BudgetExceededError",
    "DryRun",
    "InputDataError",
    "LedgerError",
    "Neighbouring",
    "PrivhistError",
    "RandomSource",
    "Relation",
    "Release",
    "SecureRandom",
    "SeededRandom",
    "Session",
    "ValidationError",
    "__version__",
]
