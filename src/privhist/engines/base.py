"""The ``Engine`` protocol: where records become contribution-bounded counts per key.

An engine answers one question for the release pipeline (:class:`privhist.session.Session`):
given a source of records and a :class:`CountRequest`, what are the per-key counts after each
user's contribution is bounded? Everything a mechanism needs comes back as
:class:`~privhist.core.data.Counts` (keys, counts, units, the neighbouring relation the bounds
give, and exact facts about the input in ``info``), so mechanisms never know which engine
counted. What an engine must do:

* **scan** the source it accepts (:meth:`Engine.accepts`): a file path and the in-memory tables of
  its ecosystem (the local engine: pandas, Polars and pyarrow tables; the Spark engine: Spark
  DataFrames);
* **account for nulls**: records with a null key (and, with a user column, a null user) are
  counted in ``info["null_keys"]`` / ``info["null_users"]`` and dropped, never an error;
* **bound contributions** with cryptographic randomness from the
  :class:`~privhist.core.random.RandomSource` it is given: a user holding more than ``k`` keys
  keeps a uniformly random ``k``-subset, independently of every other user, and each kept
  (user, key) pair keeps at most ``c`` records. The result must not depend on how the engine
  splits the data into partitions or chunks;
* **count** per key: records (``counts``) and, with a user column, distinct users (``units``),
  keys sorted.

Key types are a public choice (``CountRequest.key_type``), never inferred from the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource


@dataclass(frozen=True)
class CountRequest:
    """What to count: the columns, how keys are read, and the contribution bounds.

    Attributes:
        key: the key column (ignored for ``text`` and ``fimi`` files).
        user: the user column; ``True`` makes each line of a ``text``/``fimi`` file a user;
            None for record-level data (every record its own privacy unit).
        format: the file format when the name does not tell (files only).
        key_type: ``"str"`` or ``"int"`` (None: the format's default, or a table's own type).
        max_partitions: ``k``, the most distinct keys one user keeps (user-level only).
        max_per_partition: ``c``, the most records one user keeps per key (user-level only).
    """

    key: str = "key"
    user: str | bool | None = None
    format: str | None = None
    key_type: str | None = None
    max_partitions: int | None = None
    max_per_partition: int | None = None

    @property
    def user_level(self) -> bool:
        return self.user is not None and self.user is not False


@runtime_checkable
class Engine(Protocol):
    """What the release pipeline needs from an engine (see the module notes)."""

    #: a short name recorded in the release's diagnostics ("local", "spark")
    name: str

    def accepts(self, source: Any) -> bool:
        """Whether this engine can read ``source`` (checked before any data is read)."""
        ...

    def describe(self, source: Any) -> str:
        """A short label for ``source`` in messages and progress displays."""
        ...

    def count(
        self,
        source: Any,
        request: CountRequest,
        rng: RandomSource,
        *,
        progress: bool = False,
    ) -> Counts:
        """Per-key counts of ``source`` with contributions bounded as ``request`` says."""
        ...


def check_engine(engine: Any, function: str) -> Engine:
    """``engine`` if it implements :class:`Engine`, else a typed error."""
    if not isinstance(engine, Engine):
        raise ValidationError(
            "engine", function, "an Engine (accepts, describe, count)", type(engine).__name__
        )
    return engine
