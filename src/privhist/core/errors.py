"""Typed errors. Every message names the parameter, what was expected and what was received.

The one template (DESIGN.md, convention 4) is::

    parameter 'epsilon' of stability_histogram must be > 0; got -1
"""

from __future__ import annotations

from typing import Any


class PrivhistError(Exception):
    """Base class of every error privhist raises on purpose."""


class ValidationError(PrivhistError, ValueError):
    """A parameter has a value outside what the function accepts."""

    def __init__(self, parameter: str, function: str, expected: str, got: Any) -> None:
        self.parameter = parameter
        self.function = function
        self.expected = expected
        self.got = got
        super().__init__(
            f"parameter '{parameter}' of {function} must be {expected}; got {_show(got)}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from the constructor's arguments, so the error crosses process boundaries
        return (type(self), (self.parameter, self.function, self.expected, self.got))


class InputDataError(PrivhistError, ValueError):
    """The data cannot be used: unreadable or empty file, missing column, bad values."""


class MissingInputError(InputDataError):
    """The data lacks what a parameter names: a file, a column, a column of scalar values. Its
    message reads like a :class:`ValidationError`'s (``got`` is already shown as text); the
    release path restates it for the public method that was called (:meth:`for_function`),
    since the engine step that found it has a name of its own."""

    def __init__(self, parameter: str, function: str, must: str, got: str) -> None:
        self.parameter = parameter
        self.function = function
        self.must = must
        self.got = got
        super().__init__(f"parameter '{parameter}' of {function} must {must}; got {got}")

    def for_function(self, function: str, parameter: str | None = None) -> MissingInputError:
        """The same error, as ``function``'s (and its ``parameter``'s, when it names the
        same thing another way)."""
        return MissingInputError(parameter or self.parameter, function, self.must, self.got)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.parameter, self.function, self.must, self.got))


class BudgetExceededError(PrivhistError):
    """A release would spend more than the dataset's remaining budget."""

    def __init__(
        self,
        dataset: str,
        requested: Any,
        remaining: Any,
        reason: str | None = None,
        note: str | None = None,
    ) -> None:
        self.dataset = dataset
        self.requested = requested
        self.remaining = remaining
        #: why the dataset's filter refused, where that is more than "it does not fit what
        #: remains" (the Renyi regime: no Renyi guarantee, or over the Renyi budget)
        self.reason = reason
        #: a remark after the message (e.g. the exact amount left, when the rounded one shown
        #: would seem to admit the request)
        self.note = note
        message = f"release refused for dataset '{dataset}': it requests {requested} "
        if reason is None:
            message += f"but only {remaining} remains"
        else:
            message += f"and the dataset's Renyi regime refuses it: {reason}"
        if note:
            message += f" ({note})"
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.dataset, self.requested, self.remaining, self.reason, self.note),
        )


class LedgerError(PrivhistError):
    """The budget ledger is locked, corrupted or otherwise unusable."""


class ProtocolError(PrivhistError):
    """A protocol message is malformed, out of range, replayed, duplicated or out of order."""


class ProtocolAbort(ProtocolError):
    """A secure aggregation round stopped without output (too few clients survived)."""


class UnsupportedError(PrivhistError):
    """A combination of options that privhist does not (yet) support."""


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."
