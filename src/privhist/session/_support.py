"""The Session's support functions: output checks, public domains, building mechanisms and
engines (kept apart so the Session module holds the release pipeline itself)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

import privhist.mechanisms.registry as registry
from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.engines.base import Engine, check_engine
from privhist.engines.local import LocalEngine
from privhist.io.release import Release
from privhist.io.writers import check_destination
from privhist.mechanisms.base import Mechanism

F = TypeVar("F", bound=Callable[..., Any])


def naming_the_method(command: str) -> Callable[[F], F]:
    """A :class:`~privhist.session.Session` method whose :class:`ValidationError` names the
    method the user called (``Session.histogram``), also when the session's own checks (which
    name the command, ``histogram``), a mechanism (its class) or another internal step raised
    it; a mechanism's error says which (``Session.histogram with mechanism stability``). The
    error the method received is chained as the cause, with its label: the command line shows
    that one (``histogram --mechanism stability``)."""

    def decorate(method: F) -> F:
        label = f"Session.{method.__name__}"

        @functools.wraps(method)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except ValidationError as err:
                if err.function.startswith(label):
                    raise
                raise ValidationError(
                    err.parameter, _relabelled(err.function, command, label), err.expected, err.got
                ) from err

        return wrapped  # type: ignore[return-value]

    return decorate


def _relabelled(function: str, command: str, label: str) -> str:
    if function == command or function.startswith(command + " "):
        return label + function[len(command) :]  # "histogram with mechanism wgm"
    known = {**registry.registry(), **registry.weighted_registry()}
    names = [name for name, cls in known.items() if cls.__name__ == function]
    return f"{label} with mechanism {names[0]}" if names else label


def check_output(
    output: str | os.PathLike[str],
    output_format: str | None,
    inputs: Sequence[str | os.PathLike[str] | None],
    ledger: str | os.PathLike[str] | None,
    function: str,
) -> str:
    """Validate an output destination before any data is read; return its format.

    Refused: a missing directory, a directory, a format that disagrees with the file name, and
    any path that resolves to an input file or to the ledger (through links too): writing the
    release there would destroy the data or the record of its budget.
    """
    dest, fmt = check_destination(output, output_format, function)
    protected: list[tuple[str, Path]] = [
        ("an input file", Path(p)) for p in inputs if p is not None
    ]
    if ledger is not None:
        protected.append(("the budget ledger", Path(ledger)))
        protected.extend(
            ("the budget ledger", Path(f"{ledger}{suffix}")) for suffix in ("-wal", "-journal")
        )
    for what, p in protected:
        if _same_file(dest, p):
            raise ValidationError(
                "output", function, f"a file other than {what} (it would be overwritten)", str(dest)
            )
    return fmt


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are (or would be) one file; when the system cannot tell (a path
    that cannot be examined), ``True``: a protected file is never risked on a guess."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symbolic link loop before Python 3.13
        return True


def read_domain(
    domain: Sequence[Any] | npt.ArrayLike | str | os.PathLike[str] | None, function: str
) -> npt.NDArray[Any] | None:
    """A public domain: as given (array-like), or read from a file of one key per line.

    Lines that are all integers make an integer domain; otherwise keys are text.
    """
    if domain is None:
        return None
    if isinstance(domain, str | os.PathLike):
        p = Path(domain)
        if not p.is_file():
            raise InputDataError(f"domain file '{p}' does not exist")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputDataError(
                f"domain file '{p}' is not UTF-8 text (byte {exc.start}: {exc.reason})"
            ) from exc
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if not lines:
            raise InputDataError(f"domain file '{p}' is empty")
        try:
            return np.array([int(x) for x in lines], dtype=np.int64)
        except ValueError:
            return np.array(lines, dtype=object)
    arr = np.asarray(domain)
    if arr.ndim != 1 or arr.size == 0:
        raise ValidationError("domain", function, "a non-empty one-dimensional sequence", domain)
    if arr.dtype.kind in "U":
        arr = arr.astype(object)
    return arr


def _build(
    name: str,
    epsilon: float,
    delta: float,
    nb: Neighbouring,
    domain: Any,
    confidence: float,
    options: dict[str, Any],
) -> Mechanism:
    from privhist.planning.plan import build, choose_default

    if name == "default":
        keys_only = bool(options.get("keys_only"))
        try:
            name = choose_default(epsilon, delta, nb, domain=domain, keys_only=keys_only)
        except ValidationError as exc:
            if exc.parameter != "mechanism":
                raise
            # no mechanism applies: building the one that would be chosen says why
            preferred = (
                "dense" if domain is not None else "optimal-selection" if keys_only else "stability"
            )
            build(preferred, epsilon, delta, nb, domain=domain, confidence=confidence, **options)
            raise
    return build(name, epsilon, delta, nb, domain=domain, confidence=confidence, **options)


def _engine(engine: Engine | str | None, function: str) -> Engine:
    if engine is None or engine == "local":
        return LocalEngine()
    if engine == "spark":
        from privhist.engines.spark import SparkEngine

        return SparkEngine()
    if isinstance(engine, str):
        raise ValidationError("engine", function, "'local', 'spark' or an Engine", engine)
    return check_engine(engine, function)


def _with_counts_info(release: Release, counts: Counts, engine: str) -> Release:
    release.diagnostics.setdefault("distinct_keys_counted", len(counts))
    release.diagnostics.setdefault("engine", engine)
    return release


def _is_fimi(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).endswith((".dat", ".fimi"))
