"""Type checks of the Session's arguments: every wrong-typed argument is a
:class:`~privhist.core.errors.ValidationError` naming the parameter and the method the user
called, never a ``TypeError`` or an assertion, and numbers given as strings are refused, not
converted."""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from typing import Any

from privhist.core.errors import ValidationError
from privhist.core.requests import Fields, Reading, check_fields


def flag(value: Any, name: str, fn: str) -> bool:
    """``value`` if it is True or False."""
    if not isinstance(value, bool):
        raise ValidationError(name, fn, "True or False", value)
    return value


def number(value: Any, name: str, fn: str) -> float:
    """A real number (never a string, a bool or a container)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(name, fn, "a number", value)
    return float(value)


def optional_int(value: Any, name: str, fn: str, *, minimum: int = 1) -> int | None:
    """None, or an integer >= ``minimum`` (never a string, a bool or a float)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(name, fn, f"an integer >= {minimum}", value)
    if int(value) < minimum:
        raise ValidationError(name, fn, f"an integer >= {minimum}", value)
    return int(value)


def cap(value: Any, name: str, fn: str) -> int | str | None:
    """A contribution cap: None, an integer >= 1, or ``"auto"``."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ValidationError(name, fn, "an integer >= 1, 'auto' or None", value)
    return int(value)


def name(value: Any, param: str, fn: str, *, optional: bool = True) -> str | None:
    """A column (or other) name: a non-empty string (None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ValidationError(param, fn, "a column name (a non-empty string)", value)
    return value


def choice(value: Any, param: str, fn: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(param, fn, f"one of {', '.join(choices)}", value)
    return value


def user(value: Any, fn: str) -> str | bool | None:
    """A user column, ``True`` (each line of a text or FIMI file is a user) or None."""
    if value is None or isinstance(value, bool):
        return value
    if not isinstance(value, str) or not value:
        raise ValidationError("user", fn, "a column name, True or None", value)
    return value


def path_or_none(value: Any, param: str, fn: str) -> str | os.PathLike[str] | None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise ValidationError(param, fn, "a file path or None", type(value).__name__)
    return value


def columns(value: Any, fn: str) -> tuple[str, ...] | None:
    """Column names of a headerless CSV file: a sequence of strings (not one string)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError("columns", fn, "a sequence of column names", value)
    return tuple(value)


def fields(
    fn: str,
    *,
    key: Any,
    user_column: Any = None,
    input_format: Any = None,
    key_type: Any = None,
    column_names: Any = None,
    separator: Any = None,
) -> Fields:
    """The checked :class:`~privhist.core.requests.Fields` of a call."""
    key = name(key, "key", fn)
    u = user(user_column, fn)
    if input_format is not None and not isinstance(input_format, str):
        raise ValidationError("input_format", fn, "a format name or None", input_format)
    if key_type is not None:
        choice(key_type, "key_type", fn, ("str", "int"))
    if separator is not None and not isinstance(separator, str):
        raise ValidationError("separator", fn, "one character or None", separator)
    reading = Reading(input_format, key_type, columns(column_names, fn), separator)
    return check_fields(Fields(key, u, reading), fn)
