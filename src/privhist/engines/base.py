"""The ``Engine`` protocol: where records become the aggregates a release asks for.

A release states what it needs as **requests** (:mod:`privhist.core.requests`) and an engine
answers them: ``supports(request)`` says whether it can, before any data is read, and
``compute(source, request, rng)`` reads the source and returns the answer. Every engine answers
the same requests with the same values for a seed (the engine contract test runs every request
kind over every engine against a brute-force reference engine in the tests), so mechanisms and
analyses never know which engine counted. What an engine must do for every request:

* **scan** the source it accepts (:meth:`Engine.accepts`): a file path and the in-memory tables of
  its ecosystem (the local engine: pandas, Polars and pyarrow tables; the Spark engine: Spark
  DataFrames);
* **account for nulls**: records with a null key (and, with a user column, a null user) are
  counted in the answer's facts (``null_keys`` / ``null_users``) and dropped, never an error;
* **bound contributions** with cryptographic randomness from the
  :class:`~privhist.core.random.RandomSource` it is given: a user holding more than ``k`` keys
  keeps a uniformly random ``k``-subset, independently of every other user, and each kept
  (user, key) pair keeps at most ``c`` records. The result must not depend on how the engine
  splits the data into partitions or chunks;
* **answer** in the canonical order (keys sorted).

Drawing a release where the data lives (per-key noise on Spark executors) is the optional
request :class:`~privhist.core.requests.KeyedDraw`: an engine that can do it for a mechanism says
so in :meth:`Engine.supports`. An engine that writes Parquet releases itself (where the data is)
returns a writer from :meth:`Engine.publisher`. The requests of one release are answered inside
:meth:`Engine.reading`, so an engine may keep what it read for the release's next request (the
Spark engine keeps a small source's records on the driver); nothing is kept past it. Engines
are named in one registry (:mod:`privhist.engines.registry`).

Key types are a public choice (:attr:`~privhist.core.requests.Reading.key_type`), never inferred
from the data.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, overload

from privhist.core.data import Counts
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.random import RandomSource
from privhist.core.requests import (
    ColumnValues,
    KeyCounts,
    KeyedDraw,
    KeyWeights,
    Request,
    UserItems,
    UserKeys,
    Values,
)
from privhist.core.weighted import WeightedSource
from privhist.io.release import Release

#: what answers a request: ``(source, request, rng, progress) -> answer``
Handler = Callable[[Any, Any, RandomSource, bool], Any]

#: a prepared draw (the answer of :class:`KeyedDraw`): called inside the ledger transaction
Draw = Callable[[], Release]

#: prepares the writing of a release's file inside the transaction; returns the function that
#: writes and publishes it after the commit (None: the release path encodes it itself)
Publisher = Callable[[Release], Callable[[], object] | None]


class Engine(ABC):
    """Where counting happens (see the module notes). Subclasses name themselves and map each
    request type they answer to a handler (:meth:`handlers`)."""

    #: a short name recorded in the release's diagnostics ("local", "spark")
    name: ClassVar[str]

    @abstractmethod
    def accepts(self, source: Any) -> bool:
        """Whether this engine can read ``source`` (checked before any data is read)."""

    def describe(self, source: Any) -> str:
        """A short label for ``source`` in messages and progress displays."""
        if isinstance(source, str | os.PathLike):
            return os.fspath(source)
        return f"a {type(source).__module__.split('.')[0]} {type(source).__name__}"

    @abstractmethod
    def handlers(self) -> Mapping[type[Request], Handler]:
        """The request types this engine answers, each with the function that answers it."""

    @contextmanager
    def reading(self, source: Any) -> Iterator[None]:
        """Within it, the requests of one release on ``source`` in this thread: what a handler
        puts in :meth:`_memo` serves the release's next requests, and is dropped on exit, so the
        next release reads the source again."""
        kept = self._kept_by_thread()
        thread = threading.get_ident()
        kept[thread] = (source, {})
        try:
            yield
        finally:
            kept.pop(thread, None)

    def _memo(self, source: Any) -> dict[Any, Any] | None:
        """Inside :meth:`reading` on ``source`` (the same object) in this thread, the mapping
        in which a handler keeps what it read, under keys of its choosing; else None (keep
        nothing)."""
        kept = self._kept_by_thread().get(threading.get_ident())
        return kept[1] if kept is not None and kept[0] is source else None

    def _kept_by_thread(self) -> dict[int, tuple[Any, dict[Any, Any]]]:
        # per engine, created on first use (engines need no base initialiser): by thread, the
        # source of the open reading() and what was kept of it
        kept: dict[int, tuple[Any, dict[Any, Any]]] = self.__dict__.setdefault("_kept", {})
        return kept

    def supports(self, request: Request) -> bool:
        """Whether :meth:`compute` answers ``request`` (decided without reading data); a
        :class:`KeyedDraw` only for a mechanism drawn key by key from keyed streams."""
        if type(request) not in self.handlers():
            return False
        if isinstance(request, KeyedDraw):
            from privhist.engines.keyed_noise import runs_per_key

            return runs_per_key(request.mechanism)
        return True

    @overload
    def compute(
        self, source: Any, request: KeyedDraw, rng: RandomSource, *, progress: bool = False
    ) -> Draw: ...

    @overload
    def compute(
        self, source: Any, request: KeyCounts, rng: RandomSource, *, progress: bool = False
    ) -> Counts: ...

    @overload
    def compute(
        self, source: Any, request: UserKeys, rng: RandomSource, *, progress: bool = False
    ) -> WeightedSource: ...

    @overload
    def compute(
        self,
        source: Any,
        request: ColumnValues | KeyWeights,
        rng: RandomSource,
        *,
        progress: bool = False,
    ) -> Values: ...

    @overload
    def compute(
        self, source: Any, request: UserItems, rng: RandomSource, *, progress: bool = False
    ) -> Any: ...

    @overload
    def compute(
        self, source: Any, request: Request, rng: RandomSource, *, progress: bool = False
    ) -> Any: ...

    def compute(
        self, source: Any, request: Request, rng: RandomSource, *, progress: bool = False
    ) -> Any:
        """The answer of ``request`` on ``source`` (see :mod:`privhist.core.requests` for each
        request's answer); ``rng`` draws what bounding needs (and a keyed draw's secret)."""
        handler = self.handlers().get(type(request))
        if handler is None or not self.supports(request):
            raise UnsupportedError(f"the {self.name} engine cannot compute {request.describe()}")
        return handler(source, request, rng, progress)

    def publisher(
        self, output: str | os.PathLike[str], format: str | None, source: Any = None
    ) -> Publisher | None:
        """How this engine writes a release of ``source`` to ``output`` itself (None: the release
        path encodes the release in memory and writes it; the default). Called before the data
        is read, so that a destination the engine cannot write is refused first; a URI
        destination (``hdfs://...``) is only written by an engine that returns a writer here."""
        return None

    def count(
        self, source: Any, request: KeyCounts, rng: RandomSource, *, progress: bool = False
    ) -> Counts:
        """The answer of a :class:`~privhist.core.requests.KeyCounts` request (a shorthand of
        :meth:`compute`)."""
        counts: Counts = self.compute(source, request, rng, progress=progress)
        return counts


def check_engine(engine: Any, function: str) -> Engine:
    """``engine`` if it is an :class:`Engine`, else a typed error."""
    if not isinstance(engine, Engine):
        raise ValidationError("engine", function, "an Engine", type(engine).__name__)
    return engine
