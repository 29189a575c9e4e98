"""Requests: what a release asks of the data.

A release never reads records itself. It states **requests** -- frozen values saying exactly which
aggregate it needs and under which contribution bounds -- and an engine
(:class:`privhist.engines.base.Engine`) answers them where the data lives (this process, a Spark
cluster, a brute-force reference in the tests). So a new engine implements each request once and
serves every release, and a new aggregate is one request, one releasable and one branch per
engine.

Every request names the :class:`Fields` it reads: the key column, the user column (user-level
data) and how files are read (:class:`Reading`). Column names and file layouts are public
choices of the caller; bounds come from the release's parameters; nothing here depends on the
data.

=========================  ================================================================
request                    answer
=========================  ================================================================
:class:`KeyCounts`         :class:`~privhist.core.data.Counts`: records and users per key after
                           each user keeps at most ``k`` keys and ``c`` records per key
:class:`UserKeys`          a :class:`~privhist.core.weighted.WeightedSource`: each user's distinct
                           keys, held where the data lives; the weighted selectors ask it round by
                           round (weighted sums, sums over held subsets, user counts of released
                           keys, degree and records histograms), with released keys removed
:class:`UserVotes`         :class:`~privhist.core.weighted.VoteCounts`: the votes of vote selection
                           (one per user, cast in turn under public vote caps); engines that
                           cannot run the rule say so in ``supports``
:class:`ColumnValues`      :class:`Values`: the numeric values of one column (quantiles, ranges)
:class:`KeyWeights`        :class:`Values` with keys: one weight (or count) per distinct key
                           (weighted samples)
:class:`UserItems`         each user's item counts (federated frequency estimation)
:class:`KeyedDraw`         an optional capability: the release of a per-key mechanism drawn where
                           the data lives (Spark executors) from keyed random streams; engines
                           that cannot do it say so in ``supports``
=========================  ================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy.typing as npt

from privhist.core.errors import ValidationError


@dataclass(frozen=True)
class Reading:
    """How a file's records are read (ignored for in-memory tables).

    Attributes:
        format: ``csv``, ``tsv``, ``parquet``, ``ndjson``, ``text`` or ``fimi`` (None: from the
            file name).
        key_type: ``"str"`` or ``"int"``: how keys are read, a public choice never inferred from
            the data (None: the format's default, or a table's own type).
        columns: the names of a CSV file's columns when it has no header line (its first line
            is then a record).
        separator: the field separator of a CSV file (None: ``,`` for ``.csv``, a tab for
            ``.tsv``).
    """

    format: str | None = None
    key_type: str | None = None
    columns: tuple[str, ...] | None = None
    separator: str | None = None


@dataclass(frozen=True)
class Fields:
    """Where a release looks in the records.

    Attributes:
        key: the key (or value) column; None for text and FIMI files, whose format defines it,
            and for groups of several columns (``by``).
        user: the user column (user-level privacy); ``True`` makes each line of a text or FIMI
            file a user; None for record-level data (every record its own privacy unit).
        reading: how files are read.
        by: the group columns of an aggregation: the key is the combination of their values
            (:mod:`privhist.core.groups`); None when the key is one column.
    """

    key: str | None = None
    user: str | bool | None = None
    reading: Reading = field(default_factory=Reading)
    by: tuple[str, ...] | None = None

    @property
    def user_level(self) -> bool:
        return self.user is not None and self.user is not False

    @property
    def key_column(self) -> str:
        """The key column as engines name it (``key`` when the format defines it or when the key
        combines several columns)."""
        return self.key or "key"

    @property
    def composite(self) -> bool:
        """Whether the key combines the values of several columns (``by``)."""
        return self.by is not None and len(self.by) > 1


@dataclass(frozen=True)
class Request:
    """A request for an aggregate of the records (see the module notes)."""

    fields: Fields

    def describe(self) -> str:
        """A short phrase for messages (``"key counts"``)."""
        return _NAMES.get(type(self).__name__, type(self).__name__)


@dataclass(frozen=True)
class KeyCounts(Request):
    """Records (``counts``) and distinct users (``units``) per key, after each user keeps a
    uniformly random subset of at most ``max_partitions`` of its keys and at most
    ``max_per_partition`` records per kept key (user-level data; both default to 1 there and
    are ignored for record-level data)."""

    max_partitions: int | None = None
    max_per_partition: int | None = None


@dataclass(frozen=True)
class UserKeys(Request):
    """Each user's distinct keys (user-level data), held where the data lives, as a
    :class:`~privhist.core.weighted.WeightedSource` the weighted selectors ask round by round."""


@dataclass(frozen=True)
class UserVotes(Request):
    """The votes of vote selection (user-level data): every user casts one vote, in increasing
    order of its number of distinct keys (ties by a uniform random priority), for its first key
    in a public random key order (a salted hash) whose votes are below ``cap``, else below
    ``top_cap`` (:mod:`privhist.mechanisms.user_level.votes` states the rule and its proof).
    The answer is a :class:`~privhist.core.weighted.VoteCounts`. The rule is sequential over
    users; an engine that cannot run it where the data lives says so in ``supports``."""

    cap: int = 1
    top_cap: int = 1


@dataclass(frozen=True)
class ColumnValues(Request):
    """The values of the numeric column ``fields.key``, one per record: every cell is parsed on
    its own as a number (never a type inferred from the data); empty and non-numeric cells are
    dropped and counted."""


@dataclass(frozen=True)
class KeyWeights(Request):
    """One positive weight per distinct key of ``fields.key``: its number of records (``weight``
    None), or the key's value of the column ``weight`` (each key once; ``aggregate`` sums the
    weights of repeated keys instead of refusing them)."""

    weight: str | None = None
    aggregate: bool = False


@dataclass(frozen=True)
class UserItems(Request):
    """Each user's counts of the items of ``fields.key`` over an item ``domain`` (a public one,
    or ``top_d`` most frequent items of the data, which is not private)."""

    domain: tuple[Any, ...] | None = None
    top_d: int | None = None


@dataclass(frozen=True)
class KeyedDraw(KeyCounts):
    """The release of ``mechanism`` (a per-key mechanism) on the answer of :attr:`counts`, each
    key's noise drawn where the data lives from a keyed stream
    (:mod:`privhist.engines.keyed_noise`).

    The answer is a callable that draws the release: the counting runs when the request is
    answered, the draw when the release path calls it inside its ledger transaction."""

    mechanism: Any = None

    @property
    def counts(self) -> KeyCounts:
        return KeyCounts(self.fields, self.max_partitions, self.max_per_partition)


@dataclass(frozen=True)
class ValueSpec:
    """One value a :class:`GroupAggregates` request sums: ``column`` read as a number, turned
    into fixed-point units ``v = floor(x / resolution + 1/2)`` and clamped to ``[low, high]``
    (integers); records whose cell is empty or not a number do not count for it.

    Per group the answer holds the number of such values ``n``, their sum, with ``squares``
    the sum of ``(v - center)**2``, and with ``tree = (levels, branching)`` the counts of a
    tree of ``branching**levels`` equal buckets of ``[low, high]`` (level by level, level 1
    first)."""

    name: str
    column: str
    low: int
    high: int
    resolution: float
    center: int = 0
    squares: bool = False
    tree: tuple[int, int] | None = None

    @property
    def nodes(self) -> int:
        """The number of tree nodes (all levels)."""
        if self.tree is None:
            return 0
        levels, b = self.tree
        return sum(b**level for level in range(1, levels + 1))


@dataclass(frozen=True, eq=False)
class GroupAggregates(Request):
    """Per group (the combination of the ``fields.by`` columns): records and distinct users kept,
    and for each :class:`ValueSpec` the count, sum, sum of squares and tree of its clamped
    fixed-point values -- after each user keeps at most ``max_partitions`` of its groups among
    ``groups`` and at most ``max_per_partition`` records in each (uniformly random choices;
    user-level data), or every record (record-level data). With ``groups`` (encoded keys, public
    or released) the answer has exactly those groups, in sorted order, absent ones with zeros, and
    records of other groups are dropped and counted; without, every group present."""

    max_partitions: int | None = None
    max_per_partition: int | None = None
    groups: tuple[Any, ...] | None = None
    values: tuple[ValueSpec, ...] = ()


@dataclass(frozen=True)
class ValueRange(Request):
    """For choosing bounds privately: the number of privacy units (users, or records) whose
    largest value of ``fields.key`` falls in each bucket of the increasing ``grid``, and the same
    for their smallest value. Bucket ``i`` holds values ``v`` with ``grid[i - 1] < v <=
    grid[i]`` (bucket 0: ``v <= grid[0]``; the last: ``v > grid[-1]``); units without a
    numeric value count in neither."""

    grid: tuple[float, ...] = ()


@dataclass(frozen=True)
class GroupTable:
    """The answer of :class:`GroupAggregates` (integers, exact, NOT private).

    ``keys`` are encoded group keys (:mod:`privhist.core.groups`), sorted; ``by_types`` the type of
    each group column (``"int"`` or ``"str"``) for decoding them; ``values[name]`` holds, per
    spec, ``"n"``, ``"sum"``, ``"squares"`` (arrays, one entry per group) and ``"tree"`` (groups x
    nodes: a :class:`~privhist.core.sparse.SparseCounts`, or a dense array) as asked."""

    keys: npt.NDArray[Any]
    records: npt.NDArray[Any]
    users: npt.NDArray[Any]
    values: dict[str, dict[str, Any]]
    by_types: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.keys.shape[0])


@dataclass(frozen=True)
class Values:
    """The answer of :class:`ColumnValues` (``keys`` None) or :class:`KeyWeights`: values (and
    their keys, sorted) with exact, NOT private facts about the input (rows read, values
    dropped)."""

    values: npt.NDArray[Any]
    keys: npt.NDArray[Any] | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.values.shape[0])


@runtime_checkable
class Closeable(Protocol):
    """An answer that holds resources where the data lives (cached Spark tables): the release
    path closes it once the release is drawn or refused."""

    def close(self) -> None: ...


_NAMES = {
    "KeyCounts": "key counts",
    "UserKeys": "users' keys (weighted selection)",
    "UserVotes": "users' votes (vote selection)",
    "ColumnValues": "the values of a column",
    "KeyWeights": "weights per key",
    "UserItems": "users' item counts",
    "KeyedDraw": "per-key noise drawn where the data lives",
    "GroupAggregates": "clamped sums and counts per group",
    "ValueRange": "the range of a column's values",
}


def check_fields(fields: Fields, function: str) -> Fields:
    """``fields`` with every name checked: strings (or None), a user column other than the key
    column, a known key type, column names that are non-empty strings."""
    if not isinstance(fields, Fields):
        raise ValidationError("fields", function, "a Fields value", type(fields).__name__)
    if fields.key is not None and (not isinstance(fields.key, str) or not fields.key):
        raise ValidationError("key", function, "a column name (a non-empty string)", fields.key)
    user = fields.user
    if user is not None and not isinstance(user, bool) and (not isinstance(user, str) or not user):
        raise ValidationError("user", function, "a column name (a non-empty string)", user)
    if fields.by is not None:
        by = fields.by
        if not by or any(not isinstance(c, str) or not c for c in by) or len(set(by)) != len(by):
            raise ValidationError("by", function, "one or more distinct column names", by)
        if isinstance(user, str) and user in by:
            raise ValidationError("user", function, "a column other than the group columns", user)
    if isinstance(user, str) and user == fields.key:
        raise ValidationError(
            "user", function, "a column other than the key column", f"{user!r} (the key)"
        )
    r = fields.reading
    if r.key_type not in (None, "str", "int"):
        raise ValidationError("key_type", function, "'str' or 'int'", r.key_type)
    if r.columns is not None and (
        not r.columns or any(not isinstance(c, str) or not c for c in r.columns)
    ):
        raise ValidationError(
            "columns", function, "a non-empty sequence of column names", r.columns
        )
    if r.columns is not None and len(set(r.columns)) != len(r.columns):
        raise ValidationError("columns", function, "distinct column names", r.columns)
    if r.separator is not None and (not isinstance(r.separator, str) or len(r.separator) != 1):
        raise ValidationError("separator", function, "one character", r.separator)
    return fields
