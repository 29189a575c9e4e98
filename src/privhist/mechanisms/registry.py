"""The mechanism registry.

A mechanism class registers itself with :func:`register`; from then on the ``privhist`` command
knows its CLI name and options, ``privhist plan`` can plan it, and the contract tests in
``tests/mechanisms/test_contract.py`` run on it (exact DP check on its small neighbouring cases,
canonical order, no foreign keys, validation, zero data). A later mechanism gets all of that by
registering — nothing else needs to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from privhist.core.errors import ValidationError

if TYPE_CHECKING:
    from privhist.mechanisms.base import Mechanism

_REGISTRY: dict[str, type[Mechanism]] = {}

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
