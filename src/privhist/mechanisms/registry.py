"""The mechanism registry.

A mechanism class registers itself with :func:`register`; from then on the ``privhist`` command
knows its CLI name and options, ``privhist plan`` can plan it, and the contract tests in
``tests/mechanisms/test_contract.py`` run on it (exact DP check on its small neighbouring cases,
canonical order, no foreign keys, validation, zero data). A later mechanism gets all of that by
registering — nothing else needs to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from privhist.core.errors import ValidationError

if TYPE_CHECKING:
    from privhist.mechanisms.base import Mechanism

_REGISTRY: dict[str, type[Mechanism]] = {}
#: weighted user-level selectors (they release from a ``WeightedSource``, not from ``Counts``,
#: so they are kept apart from the ``Counts`` mechanisms the CLI and ``plan`` iterate over); the
#: contract tests in ``tests/user_level/test_weighted_contract.py`` run on every one of them
_WEIGHTED: dict[str, type[Any]] = {}

M = TypeVar("M", bound="type[Mechanism]")


def register(cls: M) -> M:
    """Class decorator: add a mechanism under its ``name``."""
    name = cls.name
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"a mechanism named {name!r} is already registered")
    _REGISTRY[name] = cls
    return cls


def get(name: str) -> type[Mechanism]:
    """The mechanism class registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValidationError(
            "mechanism", "privhist", f"one of {', '.join(sorted(_REGISTRY))}", name
        ) from None


def names() -> list[str]:
    return sorted(_REGISTRY)


def registry() -> dict[str, type[Mechanism]]:
    return dict(_REGISTRY)


def get_or_none(name: str) -> type[Mechanism] | None:
    return _REGISTRY.get(name)


W = TypeVar("W", bound="type[Any]")


def register_weighted(cls: W) -> W:
    """Class decorator: add a weighted user-level selector under its ``name``."""
    name = cls.name
    if name in _WEIGHTED and _WEIGHTED[name] is not cls:
        raise ValueError(f"a weighted selector named {name!r} is already registered")
    _WEIGHTED[name] = cls
    return cls


def weighted_registry() -> dict[str, type[Any]]:
    """The registered weighted selectors (see :mod:`privhist.mechanisms.user_level`)."""
    return dict(_WEIGHTED)
