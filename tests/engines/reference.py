"""A brute-force reference engine: the oracle of the engine contract test.

It answers every request of :mod:`privhist.core.requests` by the definitions, one record at a time
in plain Python (dicts, loops): the records of a Polars table or a CSV file (read with the
standard library), nulls dropped and counted, each user holding more than ``k`` keys keeping the
``k`` of smallest pseudorandom priority (:class:`privhist.engines.priorities.PairPriorities`, the
definition of a uniform ``k``-subset that every engine shares; the secret drawn from the release's
source only when some user is bounded), at most ``c`` records per kept pair. Nothing in it is
shared with the engines' counting code, so an engine that drops a record, keeps one key too many
or sorts differently disagrees with it.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from privhist.core.data import Counts
from privhist.core.groups import encode
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.requests import (
    ColumnValues,
    Fields,
    GroupAggregates,
    GroupTable,
    KeyCounts,
    KeyedDraw,
    KeyWeights,
    Request,
    UserItems,
    UserKeys,
    UserVotes,
    ValueRange,
    Values,
)
from privhist.core.weighted import VoteCounts, WeightedCounts
from privhist.engines.base import Engine, Handler
from privhist.engines.keyed_noise import release_keyed
from privhist.engines.priorities import PairPriorities, group_code, record_codes


def _rows(source: Any) -> list[dict[str, Any]]:
    if isinstance(source, str | os.PathLike):
        with open(source, newline="", encoding="utf-8") as fh:
            return [{k: (v if v != "" else None) for k, v in r.items()} for r in csv.DictReader(fh)]
    frame = source.collect() if isinstance(source, pl.LazyFrame) else source
    return list(frame.to_dicts())


def _key(value: Any, source: Any, key_type: str | None) -> Any:
    """A key as the engines read it: text for files unless ``int``; a table's own type."""
    if value is None:
        return None
    if key_type == "int" or (
        key_type is None and not isinstance(source, str | os.PathLike) and isinstance(value, int)
    ):
        try:
            return int(value)
        except ValueError:
            return None
    return str(value)


def _group(r: dict[str, Any], source: Any, fields: Fields) -> Any:
    """A record's key: one column as the engines read it, several as one text key."""
    if fields.by is None or len(fields.by) == 1:
        column = fields.key_column if fields.by is None else fields.by[0]
        return _key(r.get(column), source, fields.reading.key_type)
    return encode([r.get(c) for c in fields.by])


def _records(source: Any, fields: Fields) -> tuple[list[tuple[Any, Any]], dict[str, int]]:
    """``(user, key)`` per record (user None for record-level data) and the null facts."""
    out, null_keys, null_users = [], 0, 0
    rows = _rows(source)
    for r in rows:
        k = _group(r, source, fields)
        u = r.get(str(fields.user)) if fields.user_level else None
        null_keys += k is None
        null_users += fields.user_level and u is None
        if k is not None and not (fields.user_level and u is None):
            out.append((u, k))
    return out, {"records": len(rows), "null_keys": null_keys, "null_users": null_users}


def _keep(held: Mapping[Any, set[Any]], k: int, rng: RandomSource) -> dict[Any, list[Any]]:
    """Each user's keys, at most ``k`` of them: the ``k`` of smallest priority (ties by key)."""
    prio: PairPriorities | None = None
    kept = {}
    for u in sorted(held, key=_order):
        keys = sorted(held[u])
        if len(keys) > k:
            if prio is None:
                prio = PairPriorities.draw(rng)
            p = prio(
                np.array([u] * len(keys), dtype=object if isinstance(u, str) else None),
                np.array(keys, dtype=object if isinstance(keys[0], str) else None),
            )
            keys = [keys[i] for i in sorted(range(len(keys)), key=lambda i: (int(p[i]), keys[i]))][
                :k
            ]
        kept[u] = sorted(keys)
    return kept


class ReferenceSource:
    """The reference answer of :class:`UserKeys`: every user's distinct keys, in a dict."""

    def __init__(
        self, keys: dict[Any, set[Any]], records: dict[Any, dict[Any, int]], rng: RandomSource
    ) -> None:
        self.keys, self.records, self.rng = keys, records, rng
        self.held: dict[int, dict[Any, list[Any]]] = {}

    def _sums(self, kept: dict[Any, list[Any]], scale: int, max_keys: int) -> WeightedCounts:
        w: dict[Any, int] = defaultdict(int)
        units: dict[Any, int] = defaultdict(int)
        for keys in kept.values():
            for key in keys:
                w[key] += math.isqrt(scale * scale // len(keys))
                units[key] += 1
        ks = sorted(w)
        return WeightedCounts.from_arrays(
            np.array(ks, dtype=object if ks and isinstance(ks[0], str) else np.int64),
            [w[x] for x in ks],
            scale=scale,
            max_keys=max_keys,
            units=[units[x] for x in ks],
        )

    def weighted_sums(self, max_keys: int, scale: int, exclude: Any = None) -> WeightedCounts:
        ex = set(np.asarray(exclude).tolist()) if exclude is not None else set()
        held = {u: ks - ex for u, ks in self.keys.items() if ks - ex}
        return self._sums(_keep(held, max_keys, self.rng), scale, max_keys)

    def held_sums(self, max_keys: int, scale: int, exclude: Any = None) -> WeightedCounts:
        if max_keys not in self.held:
            self.held[max_keys] = _keep(self.keys, max_keys, self.rng)
        ex = set(np.asarray(exclude).tolist()) if exclude is not None else set()
        kept = {u: [x for x in ks if x not in ex] for u, ks in self.held[max_keys].items()}
        return self._sums({u: ks for u, ks in kept.items() if ks}, scale, max_keys)

    def unit_counts(self, keys: Any, max_keys: int) -> Counts:
        wanted = sorted(set(np.asarray(keys).tolist()))
        held = {u: ks & set(wanted) for u, ks in self.keys.items() if ks & set(wanted)}
        n: dict[Any, int] = defaultdict(int)
        for ks in _keep(held, max_keys, self.rng).values():
            for key in ks:
                n[key] += 1
        counts = [n[x] for x in wanted]
        return Counts.from_arrays(
            np.array(wanted, dtype=np.asarray(keys).dtype),
            counts,
            counts,
            neighbouring=Neighbouring.user(max_keys, 1),
        )

    def _histogram(self, values: list[int], bounds: Any) -> np.ndarray[Any, Any]:
        b = list(bounds)
        out = np.zeros(len(b) + 1, dtype=np.int64)
        for v in values:
            out[next((i for i, x in enumerate(b) if v <= x), len(b))] += 1
        return out

    def degree_histogram(self, bounds: Any) -> np.ndarray[Any, Any]:
        return self._histogram([len(ks) for ks in self.keys.values()], bounds)

    def records_histogram(self, bounds: Any) -> np.ndarray[Any, Any]:
        return self._histogram([max(r.values()) for r in self.records.values()], bounds)


class ReferenceEngine(Engine):
    """The brute-force oracle (see the module notes)."""

    name = "reference"

    def accepts(self, source: Any) -> bool:
        return isinstance(source, str | os.PathLike | pl.DataFrame)

    def handlers(self) -> Mapping[type[Request], Handler]:
        return {
            KeyCounts: self.key_counts,
            UserKeys: self.user_keys,
            UserVotes: self.user_votes,
            ColumnValues: self.column_values,
            KeyWeights: self.key_weights,
            UserItems: self.user_items,
            KeyedDraw: self.keyed_draw,
            GroupAggregates: self.group_aggregates,
            ValueRange: self.value_range,
        }

    def key_counts(self, source: Any, request: KeyCounts, rng: RandomSource, _: bool) -> Counts:
        records, facts = _records(source, request.fields)
        if not request.fields.user_level:
            n: dict[Any, int] = defaultdict(int)
            for _u, key in records:
                n[key] += 1
            keys = sorted(n)
            return Counts.from_arrays(_arr(keys), [n[x] for x in keys])
        k = request.max_partitions or 1
        c = request.max_per_partition or 1
        per: dict[Any, dict[Any, int]] = defaultdict(lambda: defaultdict(int))
        for u, key in records:
            per[u][key] += 1
        kept = _keep({u: set(r) for u, r in per.items()}, k, rng)
        counts: dict[Any, int] = defaultdict(int)
        units: dict[Any, int] = defaultdict(int)
        for u, keys in kept.items():
            for key in keys:
                counts[key] += min(c, per[u][key])
                units[key] += 1
        keys = sorted(counts)
        return Counts.from_arrays(
            _arr(keys),
            [counts[x] for x in keys],
            [units[x] for x in keys],
            neighbouring=Neighbouring.user(k, c),
            info=facts,
        )

    def user_keys(self, source: Any, request: UserKeys, rng: RandomSource, _: bool) -> Any:
        records, _facts = _records(source, request.fields)
        per: dict[Any, dict[Any, int]] = defaultdict(lambda: defaultdict(int))
        for u, key in records:
            per[u][key] += 1
        return ReferenceSource({u: set(r) for u, r in per.items()}, per, rng)

    def user_votes(self, source: Any, request: UserVotes, rng: RandomSource, _: bool) -> Any:
        """The vote rule by its definition: a 128-bit salt, then one 64-bit priority per user
        (users in sorted order); users vote fewest keys first (ties by priority, then label),
        each for its first key in the salted-hash order (ties by key) below the cap, else below
        the top cap."""
        records, _facts = _records(source, request.fields)
        held: dict[Any, set[Any]] = defaultdict(set)
        for u, key in records:
            held[u].add(key)
        users = sorted(held)
        salt = rng.uint64(2).astype(">u8").tobytes()
        priority = rng.uint64(len(users))

        def place(key: Any) -> tuple[int, Any]:
            text = str(key).encode("utf-8")
            return int.from_bytes(hashlib.blake2b(salt + text, digest_size=8).digest(), "big"), key

        turns = sorted(
            range(len(users)), key=lambda i: (len(held[users[i]]), int(priority[i]), users[i])
        )
        votes: dict[Any, int] = {}
        non_voters = 0
        for i in turns:
            ballot = sorted(held[users[i]], key=place)
            below = [key for key in ballot if votes.get(key, 0) < request.cap]
            if not below:
                non_voters += 1
                below = [key for key in ballot if votes.get(key, 0) < request.top_cap]
            if below:
                votes[below[0]] = votes.get(below[0], 0) + 1
        keys = sorted(votes)
        return VoteCounts(
            _arr(keys), np.array([votes[x] for x in keys], dtype=np.int64), non_voters
        )

    def column_values(
        self, source: Any, request: ColumnValues, rng: RandomSource, _: bool
    ) -> Values:
        rows = _rows(source)
        out = []
        for r in rows:
            cell = r.get(request.fields.key_column)
            try:
                x = float(str(cell).strip()) if cell is not None else math.nan
            except ValueError:
                x = math.nan
            if not math.isnan(x):
                out.append(x)
        return Values(
            np.array(sorted(out)), facts={"rows": len(rows), "dropped": len(rows) - len(out)}
        )

    def key_weights(self, source: Any, request: KeyWeights, rng: RandomSource, _: bool) -> Values:
        rows = _rows(source)
        w: dict[str, int] = defaultdict(int)
        for r in rows:
            key = str(r[request.fields.key_column])
            w[key] += 1 if request.weight is None else int(float(str(r[request.weight])))
        keys = sorted(w)
        return Values(
            np.array([w[x] for x in keys], dtype=np.int64),
            keys=np.array(keys, dtype=object),
            facts={"rows": len(rows)},
        )

    def user_items(self, source: Any, request: UserItems, rng: RandomSource, _: bool) -> Any:
        from privhist.federated.user_data import UserCounts

        records, _facts = _records(
            source, Fields(request.fields.key, request.fields.user, request.fields.reading)
        )
        labels = (
            list(request.domain)
            if request.domain is not None
            else sorted({str(k) for _u, k in records})
        )
        index = {x: i for i, x in enumerate(labels)}
        per: dict[Any, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        users = sorted({u for u, _k in records}, key=_order)
        for u, key in records:
            if str(key) in index:
                per[u][index[str(key)]] += 1
        indptr, items, counts = [0], [], []
        for u in users:
            row = per.get(u, {})
            items += sorted(row)
            counts += [row[i] for i in sorted(row)]
            indptr.append(len(items))
        return UserCounts.from_arrays(indptr, items, counts, len(labels), labels, allow_empty=True)

    def group_aggregates(
        self, source: Any, request: GroupAggregates, rng: RandomSource, _: bool
    ) -> GroupTable:
        fields = request.fields
        specs = request.values
        rows = _rows(source)
        by = fields.by or (fields.key_column,)
        types = tuple(
            "int"
            if not isinstance(source, str | os.PathLike) and source.schema[c].is_integer()
            else "str"
            for c in by
        )
        wanted = None
        if request.groups is not None:
            wanted = {int(g) if types == ("int",) else str(g) for g in request.groups}
        records: list[tuple[Any, Any, tuple[int | None, ...]]] = []
        for i, r in enumerate(rows):
            k = _group(r, source, Fields(fields.key, fields.user, fields.reading, fields.by))
            u = r.get(str(fields.user)) if fields.user_level else i
            if k is None or u is None or (wanted is not None and k not in wanted):
                continue
            records.append((u, k, tuple(_units(r.get(s.column), s) for s in specs)))
        if fields.user_level:
            prio: list[PairPriorities | None] = [None]
            k_cap, c_cap = request.max_partitions or 1, request.max_per_partition or 1
            per: dict[Any, dict[Any, list[tuple[int | None, ...]]]] = defaultdict(
                lambda: defaultdict(list)
            )
            for u, key, vals in records:
                per[u][key].append(vals)
            records = []
            for u in sorted(per, key=_order):
                groups = sorted(per[u], key=_order)
                if len(groups) > k_cap:
                    ranked = sorted(groups, key=lambda g: (_prio(prio, rng, u, g), _order(g)))
                    groups = ranked[:k_cap]
                for key in groups:
                    vals = per[u][key]
                    if len(vals) > c_cap:
                        seen: dict[tuple[int | None, ...], int] = defaultdict(int)
                        named = []
                        for v in vals:
                            code = record_codes(
                                np.array([group_code(key)], dtype=np.uint64),
                                [(np.array([x or 0]), np.array([x is None])) for x in v],
                                np.array([seen[v]]),
                            )
                            name = int(code.view(np.int64)[0])
                            rank = seen[v]
                            seen[v] += 1
                            p = _prio(prio, rng, u, name)
                            order = tuple((x is None, x or 0) for x in v)
                            named.append((p, order, rank, v))
                        vals = [v for *_, v in sorted(named)[:c_cap]]
                    records += [(u, key, v) for v in vals]
        keys = sorted({k for _, k, _ in records} if wanted is None else wanted, key=_order)
        index = {k: i for i, k in enumerate(keys)}
        g = len(keys)
        n_records = np.zeros(g, np.int64)
        users: list[set[Any]] = [set() for _ in keys]
        values: dict[str, dict[str, Any]] = {
            s.name: {
                "n": np.zeros(g, np.int64),
                "sum": np.zeros(g, np.int64),
                "squares": np.zeros(g, np.int64),
                "tree": np.zeros((g, s.nodes), np.int64),
            }
            for s in specs
        }
        for u, key, vals in records:
            i = index[key]
            n_records[i] += 1
            users[i].add(u)
            for s, v in zip(specs, vals, strict=True):
                if v is None:
                    continue
                out = values[s.name]
                out["n"][i] += 1
                out["sum"][i] += v
                out["squares"][i] += (v - s.center) ** 2
                if s.tree is not None:
                    levels, b = s.tree
                    leaf = ((v - s.low) * b**levels) // (s.high - s.low + 1)
                    offset = 0
                    for level in range(1, levels + 1):
                        out["tree"][i, offset + leaf // b ** (levels - level)] += 1
                        offset += b**level
        for s in specs:
            if not s.squares:
                del values[s.name]["squares"]
            if s.tree is None:
                del values[s.name]["tree"]
        key_arr = np.array(keys, dtype=np.int64 if types == ("int",) else object)
        user_counts = np.array([len(x) for x in users], dtype=np.int64)
        return GroupTable(key_arr, n_records, user_counts, values, types, {})

    def value_range(self, source: Any, request: ValueRange, rng: RandomSource, _: bool) -> Any:
        column = request.fields.key_column
        units: dict[Any, list[float]] = defaultdict(list)
        for i, r in enumerate(_rows(source)):
            u = r.get(str(request.fields.user)) if request.fields.user_level else i
            try:
                x = float(str(r.get(column)).strip()) if r.get(column) is not None else math.nan
            except ValueError:
                continue
            if u is not None and math.isfinite(x):
                units[u].append(x)
        grid = list(request.grid)
        hi = np.zeros(len(grid) + 1, np.int64)
        lo = np.zeros(len(grid) + 1, np.int64)
        for xs in units.values():
            hi[next((i for i, gv in enumerate(grid) if max(xs) <= gv), len(grid))] += 1
            lo[next((i for i, gv in enumerate(grid) if min(xs) <= gv), len(grid))] += 1
        return hi, lo

    def keyed_draw(self, source: Any, request: KeyedDraw, rng: RandomSource, _: bool) -> Any:
        counts = self.key_counts(source, request.counts, rng, False)
        return lambda: release_keyed(request.mechanism, counts, rng)


def _units(cell: Any, spec: Any) -> int | None:
    """A value cell as clamped fixed-point units (None when not a finite number)."""
    try:
        x = float(str(cell).strip()) if cell is not None else math.nan
    except ValueError:
        return None
    if not math.isfinite(x):
        return None
    return min(max(math.floor(x / spec.resolution + 0.5), spec.low), spec.high)


def _prio(prio: list[PairPriorities | None], rng: RandomSource, user: Any, name: Any) -> int:
    if prio[0] is None:
        prio[0] = PairPriorities.draw(rng)
    f = prio[0]
    users = np.array([user], dtype=object if isinstance(user, str) else np.int64)
    names = np.array([name], dtype=object if isinstance(name, str) else np.int64)
    return int(f(users, names)[0])


def _order(value: Any) -> tuple[bool, Any]:
    """Users and keys in sorted order, integers before text."""
    return (isinstance(value, str), value)


def _arr(keys: list[Any]) -> np.ndarray[Any, Any]:
    if keys and isinstance(keys[0], str):
        return np.array(keys, dtype=object)
    return np.array(keys, dtype=np.int64)
