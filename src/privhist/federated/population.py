"""Populations of federated clients, each holding one item (Bharadwaj & Cormode 2022, Section 3).

In the paper's histogram problem "each client ``i`` holds a single item ``x_i``" (Section 3).
A :class:`Population` stores such a fleet *aggregated*: the distinct items (sorted) and how many
clients hold each. Nothing in the federated protocols needs to tell two clients with the same item
apart — a client sends only its item, and Poisson sampling of clients makes the number of sampled
holders of an item ``Binomial(count, p)`` independently across items — so a population of
``10**9`` clients costs memory and time proportional to its number of *distinct* items, never one
Python object per client.

Populations come from a file (any format :func:`privhist.io.scan` reads, counted by the local
engine: each record is one client), from an iterable of items (consumed in chunks), from given
``(item, count)`` pairs, or from the deterministic Zipf apportionment :meth:`Population.zipf`
used by the simulations (no randomness: the counts are ``N`` times the Zipf probabilities,
rounded by the largest-remainder method so that they sum to exactly ``N``).

An empty population (no clients) is an :class:`~privhist.core.errors.InputDataError`: there is
nothing to sample, and a protocol run on it would report a release that describes no one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.validation import check_counts, check_epsilon, check_positive_int

__all__ = ["Population"]

I64 = npt.NDArray[np.int64]


def _aggregate(items: npt.NDArray[Any], counts: I64) -> tuple[npt.NDArray[Any], I64]:
    """Sum the counts of equal items; drop items held by no client; sort by item."""
    if items.shape[0] == 0:
        return items, counts
    uniq, inverse = np.unique(items, return_inverse=True)
    summed = np.zeros(uniq.shape[0], dtype=np.int64)
    np.add.at(summed, inverse.reshape(-1), counts)
    keep = summed > 0
    return uniq[keep], summed[keep]


@dataclass(frozen=True)
class Population:
    """Clients each holding one item, stored as distinct ``items`` (sorted) and ``counts``.

    Build one with :meth:`from_counts`, :meth:`from_items`, :meth:`from_iterable`,
    :meth:`from_file` or :meth:`zipf`; the constructor is not meant to be called directly.

    >>> pop = Population.from_counts(["hi", "hey", "hi"], [3, 2, 1])
    >>> pop.items.tolist(), pop.counts.tolist(), pop.size
    (['hey', 'hi'], [2, 4], 6)
    >>> Population.zipf(10**9, 4, 1.0).counts.tolist()
    [480000000, 240000000, 160000000, 120000000]
    """

    items: npt.NDArray[Any]
    counts: I64
    #: facts about how the population was built (source file, records read, ...); not private
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.items.shape[0] == 0 or int(self.counts.sum()) == 0:
            raise InputDataError("the population is empty: it has no clients to sample")

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def from_counts(
        cls, items: npt.ArrayLike, counts: npt.ArrayLike, info: dict[str, Any] | None = None
    ) -> Population:
        """Clients given as ``(item, number of clients holding it)`` pairs.

        Repeated items are merged (their counts add); items with count 0 are dropped.
        """
        fn = "Population.from_counts"
        k = np.asarray(items)
        if k.ndim != 1:
            raise ValidationError("items", fn, "a one-dimensional array", f"shape {k.shape}")
        c = check_counts(counts, fn, "counts")
        if c.shape[0] != k.shape[0]:
            raise ValidationError(
                "counts", fn, f"the same length as items ({k.shape[0]})", c.shape[0]
            )
        if k.dtype == object and any(x is None for x in k.tolist()):
            raise ValidationError("items", fn, "no null items", "a None item")
        u, s = _aggregate(k, c)
        return cls(u, s, dict(info or {}))

    @classmethod
    def from_items(cls, items: npt.ArrayLike) -> Population:
        """One client per entry of ``items``."""
        k = np.asarray(items)
        if k.ndim != 1:
            raise ValidationError(
                "items", "Population.from_items", "a one-dimensional array", f"shape {k.shape}"
            )
        if k.shape[0] == 0:
            raise InputDataError("the population is empty: it has no clients to sample")
        uniq, cnt = np.unique(k, return_counts=True)
        return cls(uniq, cnt.astype(np.int64), {"clients": int(k.shape[0])})

    @classmethod
    def from_iterable(cls, items: Iterable[Any], chunk_size: int = 1 << 16) -> Population:
        """One client per item yielded by ``items`` (e.g. a generator), consumed in chunks of
        ``chunk_size`` so that only the distinct items are ever held in memory."""
        fn = "Population.from_iterable"
        size = check_positive_int(chunk_size, fn, "chunk_size")
        try:
            it = iter(items)
        except TypeError:
            raise ValidationError("items", fn, "an iterable of items", type(items)) from None
        acc_items: list[npt.NDArray[Any]] = []
        acc_counts: list[I64] = []
        while True:
            chunk = list(itertools.islice(it, size))
            if not chunk:
                break
            if any(x is None for x in chunk):
                raise ValidationError("items", fn, "no null items", "a None item")
            uniq, cnt = np.unique(np.asarray(chunk), return_counts=True)
            acc_items.append(uniq)
            acc_counts.append(cnt.astype(np.int64))
            if len(acc_items) >= 16:  # keep the buffers at the size of the distinct items
                merged = _aggregate(np.concatenate(acc_items), np.concatenate(acc_counts))
                acc_items, acc_counts = [merged[0]], [merged[1]]
        if not acc_items:
            raise InputDataError("the population is empty: it has no clients to sample")
        u, s = _aggregate(np.concatenate(acc_items), np.concatenate(acc_counts))
        return cls(u, s, {"clients": int(s.sum())})

    @classmethod
    def zipf(cls, clients: int, support: int, exponent: float = 1.1) -> Population:
        """``clients`` clients over items ``0 .. support-1`` in Zipf(``exponent``) proportions.

        Deterministic: item ``i`` gets ``floor(N w_i)`` clients with ``w_i`` proportional to
        ``(i + 1)^-exponent``, and the remaining clients go one each to the items with the
        largest fractional parts (Hamilton's largest-remainder method), so the counts sum to
        exactly ``N``. Items with no client are dropped.
        """
        fn = "Population.zipf"
        n = check_positive_int(clients, fn, "clients")
        b = check_positive_int(support, fn, "support")
        s = check_epsilon(exponent, fn, "exponent")
        w = np.arange(1, b + 1, dtype=np.float64) ** (-s)
        w /= w.sum()
        exact = w * n
        base = np.floor(exact).astype(np.int64)
        short = n - int(base.sum())
        if short > 0:
            order = np.argsort(-(exact - base), kind="stable")[:short]
            base[order] += 1
        elif short < 0:  # float rounding of the sum; take from the largest counts
            order = np.argsort(-base, kind="stable")[:-short]
            base[order] -= 1
        keep = base > 0
        return cls(np.arange(b, dtype=np.int64)[keep], base[keep], {"clients": n})

    # -- views ----------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """The number of clients (an exact Python int)."""
        return int(self.counts.sum(dtype=np.int64))

    def __len__(self) -> int:
        """The number of distinct items."""
        return int(self.items.shape[0])

    def count_of(self, item: Any) -> int:
        """How many clients hold ``item`` (0 when none)."""
        i = int(np.searchsorted(self.items, item))
        if i < len(self) and self.items[i] == item:
            return int(self.counts[i])
        return 0

    def to_counts(self) -> Counts:
        """The population as record-level :class:`~privhist.core.data.Counts` (one record and
        one privacy unit per client; add/remove neighbours)."""
        return Counts.from_arrays(self.items, self.counts, info={"records": self.size})
