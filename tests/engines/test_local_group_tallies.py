"""Counts of keys over several columns on the local engine, which groups the records by their
values before it writes any key text (:func:`privhist.engines.local.aggregate.group_tallies`,
:func:`privhist.engines.local.counting.count_tallies`).

Every count is compared, for the same seed, with two references computed from a key written
row by row in plain Python (:func:`privhist.core.groups.encode` of each value's text): the local
count of that one text column record by record, and the brute-force reference engine
(tests/engines/reference.py), which bounds users in dicts and loops.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.engines.reference import ReferenceEngine

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.groups import encode
from privhist.core.random import SeededRandom
from privhist.core.requests import Fields, KeyCounts
from privhist.engines.local import LocalEngine, count
from privhist.engines.local.aggregate import group_tallies
from privhist.engines.local.counting import count_tallies

#: text values, most of them needing an escape (a backslash, the separator, both, "\s" itself)
TEXTS = ["a", "b\\c", "d\x1fe", "\\s", "x\\\x1fy", "plain", ""]


def _with_nulls(g: np.random.Generator, values: list[Any], rate: float) -> list[Any]:
    return [None if g.random() < rate else v for v in values]


def records(seed: int, n: int = 4000, users: int = 60, text_users: bool = False) -> pl.DataFrame:
    """Skewed groups (so users repeat groups and hold many), nulls in every column."""
    g = np.random.default_rng(seed)
    skew = np.array([0.4, 0.2, 0.12, 0.1, 0.08, 0.06, 0.04])
    t = [TEXTS[i] for i in g.choice(len(TEXTS), n, p=skew)]
    t2 = [TEXTS[i] for i in g.choice(len(TEXTS), n, p=skew[::-1])]
    i = [int(v) for v in g.choice([-3, 0, 7, 12, -40], n, p=[0.5, 0.2, 0.15, 0.1, 0.05])]
    b = [bool(v) for v in g.random(n) < 0.7]
    f = [float(v) for v in g.choice([0.0, -0.0, 2.5, -1.25], n)]
    u = [int(v) for v in g.integers(0, users, n)]
    return pl.DataFrame(
        {
            "t": pl.Series(_with_nulls(g, t, 0.03), dtype=pl.String),
            "t2": pl.Series(_with_nulls(g, t2, 0.03), dtype=pl.String),
            "i": pl.Series(_with_nulls(g, i, 0.03), dtype=pl.Int32),
            "b": pl.Series(_with_nulls(g, b, 0.03), dtype=pl.Boolean),
            "f": pl.Series(_with_nulls(g, f, 0.03), dtype=pl.Float64),
            "user": pl.Series(
                _with_nulls(g, [f"u{v}" if text_users else v for v in u], 0.02),
                dtype=pl.String if text_users else pl.Int64,
            ),
        }
    )


def _text(value: Any) -> Any:
    """A value's text as a key part writes it: booleans as true/false, floats as Python's repr
    (equal to Polars' text for the values above, -0.0 included), integers in decimal."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(int(value))


def keyed(frame: pl.DataFrame, by: tuple[str, ...]) -> pl.DataFrame:
    """The records as (key, user): the key written row by row in plain Python."""
    keys = [encode([_text(v) for v in row]) for row in frame.select(by).rows()]
    return pl.DataFrame(
        {"key": pl.Series(keys, dtype=pl.String), "user": frame["user"]},
    )


def same(got: Counts, want: Counts) -> None:
    assert got.keys.tolist() == want.keys.tolist()
    assert got.counts.tolist() == want.counts.tolist()
    if want.units is None:
        assert got.units is None
    else:
        assert got.units is not None and got.units.tolist() == want.units.tolist()
    assert got.neighbouring == want.neighbouring


GROUPS = [("t", "i"), ("t", "b", "i"), ("t", "t2"), ("i", "b"), ("t", "f"), ("f", "b", "t2")]
BOUNDS = [(1, 1), (1, 4), (3, 1), (3, 4)]


@pytest.mark.parametrize("by", GROUPS, ids="-".join)
@pytest.mark.parametrize("k,c", BOUNDS)
@pytest.mark.parametrize("text_users", [False, True])
def test_user_counts_over_several_columns_equal_counts_of_the_written_keys(
    by: tuple[str, ...], k: int, c: int, text_users: bool
) -> None:
    seed = 11 * k + c
    frame = records(seed, text_users=text_users)
    request = KeyCounts(Fields(None, "user", by=by), k, c)
    got = LocalEngine().count(frame, request, SeededRandom(seed))
    written = keyed(frame, by)
    want = count(
        written,
        user="user",
        max_partitions_contributed=k,
        max_contributions_per_partition=c,
        rng=SeededRandom(seed),
    )
    same(got, want)
    assert got.info == want.info
    brute = ReferenceEngine().count(
        written, KeyCounts(Fields("key", "user"), k, c), SeededRandom(seed)
    )
    same(got, brute)
    for fact in ("records", "null_keys", "null_users"):
        assert got.info[fact] == brute.info[fact]
    # the data makes every part of the bounding matter: users holding more than k keys (drawn
    # priorities), pairs of more than c records, null keys and users, and (floats) a key
    # differing only in the sign of a zero
    assert got.info["users_bounded"] > 0 and got.info["null_keys"] > 0
    assert got.info["null_users"] > 0
    held = Counter(
        written.drop_nulls().select("user", "key").rows()
    )  # records per (user, key) pair
    assert max(held.values()) > c
    if "f" in by:
        assert any("-0.0" in key for key in got.keys.tolist())
        assert any(key.startswith("0.0") or "\x1f0.0" in key for key in got.keys.tolist())


@pytest.mark.parametrize("by", GROUPS, ids="-".join)
def test_record_counts_over_several_columns_equal_counts_of_the_written_keys(
    by: tuple[str, ...],
) -> None:
    frame = records(5)
    got = LocalEngine().count(frame, KeyCounts(Fields(None, None, by=by)), SeededRandom(5))
    written = keyed(frame, by).select("key")
    want = count(written)
    same(got, want)
    assert got.info == want.info
    brute = ReferenceEngine().count(written, KeyCounts(Fields("key")), SeededRandom(5))
    same(got, brute)
    assert got.info["null_keys"] > 0 and max(got.counts.tolist()) > 1


@pytest.mark.parametrize("user", ["user", None])
def test_parquet_files_count_like_their_tables(tmp_path: Path, user: str | None) -> None:
    frame = records(3)
    path = tmp_path / "records.parquet"
    frame.write_parquet(path)
    k, c = (2, 3) if user else (None, None)
    request = KeyCounts(Fields(None, user, by=("t", "b", "i", "f")), k, c)
    got = LocalEngine().count(path, request, SeededRandom(3))
    written = keyed(frame, ("t", "b", "i", "f"))
    if user is None:
        want = count(written.select("key"))
    else:
        want = count(
            written,
            user="user",
            max_partitions_contributed=2,
            max_contributions_per_partition=3,
            rng=SeededRandom(3),
        )
    same(got, want)
    assert got.info == want.info


def test_group_tallies_are_the_distinct_pairs_with_their_records() -> None:
    frame = records(9)
    by = ("t", "f", "i")
    tallies = group_tallies(Fields(None, "user", by=by), "count", lambda c: frame.lazy().select(c))
    rows = tallies.collect()
    assert rows.columns == ["key", "user", "n"] and rows["n"].dtype == pl.Int64
    want = Counter(keyed(frame, by).rows())  # records per (key, user), nulls included
    full = rows.drop_nulls()
    # every pair with a non-null key and user is one row, holding its number of records
    assert full.height == full.select("key", "user").n_unique()
    assert {(k, u): n for k, u, n in full.rows()} == {
        (k, u): n for (k, u), n in want.items() if k is not None and u is not None
    }
    assert int(rows["n"].sum()) == frame.height


# -- count_tallies on its own -------------------------------------------------------------


def _split(frame: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Tallies of ``frame``'s records (key, user): each (key, user)'s records cut into one to
    three rows at random, in a shuffled order, so pairs come in several rows."""
    g = np.random.default_rng(seed)
    rows: list[tuple[Any, Any, int]] = []
    for (key, user), n in Counter(frame.rows()).items():
        parts = int(g.integers(1, min(n, 3) + 1))
        cuts = sorted(g.choice(np.arange(1, n), parts - 1, replace=False).tolist()) if n > 1 else []
        rows += [(key, user, b - a) for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    order = g.permutation(len(rows))
    shuffled = [rows[i] for i in order]
    return pl.DataFrame(
        {
            "key": pl.Series([r[0] for r in shuffled], dtype=frame["key"].dtype),
            "user": pl.Series([r[1] for r in shuffled], dtype=frame["user"].dtype),
            "n": pl.Series([r[2] for r in shuffled], dtype=pl.UInt32),
        }
    )


@pytest.mark.parametrize("k,c", BOUNDS)
@pytest.mark.parametrize("integer_keys", [False, True])
def test_tallies_of_a_pair_in_several_rows_count_as_its_records(
    k: int, c: int, integer_keys: bool
) -> None:
    g = np.random.default_rng(k * 10 + c)
    n = 3000
    keys = g.zipf(1.6, n) % 40
    frame = pl.DataFrame(
        {
            "key": pl.Series(
                _with_nulls(g, [int(x) if integer_keys else f"k{x}" for x in keys], 0.02)
            ),
            "user": pl.Series(_with_nulls(g, [int(x) for x in g.integers(0, 50, n)], 0.02)),
        }
    )
    tallies = _split(frame, k + c)
    assert tallies.height > tallies.select("key", "user").n_unique()  # repeated pairs
    got = count_tallies(
        tallies.lazy(),
        user=True,
        max_partitions_contributed=k,
        max_contributions_per_partition=c,
        rng=SeededRandom(k),
    )
    want = count(
        frame,
        user="user",
        max_partitions_contributed=k,
        max_contributions_per_partition=c,
        rng=SeededRandom(k),
    )
    same(got, want)
    assert got.info == want.info
    assert got.info["users_bounded"] > 0
    records = count_tallies(tallies.lazy().drop("user"), user=False)
    plain = count(frame.drop("user"))
    same(records, plain)
    assert records.info == plain.info


def test_bad_tallies_fail_closed() -> None:
    good = pl.LazyFrame({"key": ["a", "b"], "user": [1, 2], "n": [1, 2]})
    for n in ([0, 2], [1, None], [-1, 3]):
        bad = good.with_columns(pl.Series("n", n, dtype=pl.Int64))
        for user in (True, False):
            with pytest.raises(ValidationError, match="tallies"):
                count_tallies(bad if user else bad.drop("user"), user=user)
    with pytest.raises(ValidationError, match="tallies"):
        count_tallies(good.with_columns(pl.col("n").cast(pl.Float64)), user=True)
    with pytest.raises(InputDataError, match="n"):
        count_tallies(good.drop("n"), user=True)
    with pytest.raises(InputDataError, match="user"):
        count_tallies(good.drop("user"), user=True)
    with pytest.raises(ValidationError, match="max_partitions_contributed"):
        count_tallies(good.drop("user"), user=False, max_partitions_contributed=2)
    with pytest.raises(ValidationError, match="max_contributions_per_partition"):
        count_tallies(good, user=True, max_contributions_per_partition=0)
    c = count_tallies(good, user=True, rng=SeededRandom(0))
    assert c.counts.tolist() == [1, 1] and c.info["records"] == 3
    assert c.info["bounds_defaulted"] == [
        "max_partitions_contributed",
        "max_contributions_per_partition",
    ]


# -- integer group codes (integer users) ------------------------------------------------------


@pytest.mark.parametrize("text_users", [False, True])
def test_integer_users_are_counted_by_group_codes_and_text_users_by_tallies(
    monkeypatch: pytest.MonkeyPatch, text_users: bool
) -> None:
    """With integer users the composite count takes the code path (no tallies are counted);
    with text users it falls back to the tallies. The counts themselves are checked against
    the written keys above."""
    from privhist.engines.local import engine as local_engine

    def refused(*args: Any, **kwargs: Any) -> Counts:
        raise AssertionError("the tallies were counted")

    monkeypatch.setattr(local_engine, "count_tallies", refused)
    frame = records(5, text_users=text_users)
    request = KeyCounts(Fields(None, "user", by=("t", "i")), 2, 2)
    if text_users:
        with pytest.raises(AssertionError, match="tallies"):
            LocalEngine().count(frame, request, SeededRandom(5))
    else:
        got = LocalEngine().count(frame, request, SeededRandom(5))
        assert got.info["users_bounded"] > 0


@pytest.mark.parametrize("given", [(None, None), (2, None), (None, 3), (2, 3)])
def test_group_codes_state_their_defaulted_bounds_as_the_tallies_do(
    given: tuple[int | None, int | None],
) -> None:
    """The code path (integer users) and the tallies (text users) fill in the same default
    bounds and name the same ones as defaulted; a bound of 0 is refused by both."""
    k, c = given
    request = KeyCounts(Fields(None, "user", by=("t", "i")), k, c)
    coded = LocalEngine().count(records(6), request, SeededRandom(6))
    tallied = LocalEngine().count(records(6, text_users=True), request, SeededRandom(6))
    want = [
        name
        for name, value in (
            ("max_partitions_contributed", k),
            ("max_contributions_per_partition", c),
        )
        if value is None
    ]
    assert coded.info["bounds_defaulted"] == tallied.info["bounds_defaulted"] == want
    for text_users in (False, True):
        zero = KeyCounts(Fields(None, "user", by=("t", "i")), 0, c)
        with pytest.raises(ValidationError, match="max_partitions_contributed"):
            LocalEngine().count(records(6, text_users=text_users), zero, SeededRandom(6))


def test_groups_too_wide_for_codes_fall_back_to_the_same_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from privhist.engines.local import aggregate

    frame = records(8)
    by = ("t", "b", "i")
    request = KeyCounts(Fields(None, "user", by=by), 2, 3)
    coded = LocalEngine().count(frame, request, SeededRandom(8))
    monkeypatch.setattr(aggregate, "MAX_GROUP_CODES", 10)
    fields = Fields(None, "user", by=by)
    assert (
        aggregate.count_group_codes(
            fields, "count", frame.lazy().select, 2, 3, SeededRandom(8), pl.LazyFrame.collect, "t"
        )
        is None
    )
    tallied = LocalEngine().count(frame, request, SeededRandom(8))
    same(coded, tallied)
    assert coded.info == tallied.info


@pytest.mark.parametrize("by", GROUPS, ids="-".join)
def test_group_codes_write_the_keys_of_their_records(by: tuple[str, ...]) -> None:
    """Each record's code, written back as text, is the key written row by row (null when a
    part is null), and equal keys have equal codes."""
    from privhist.engines.local.aggregate import _group_types, group_coder

    frame = records(13, n=1500)
    types = _group_types(by, frame.schema, "count")
    coder = group_coder(frame.lazy(), by, types, pl.LazyFrame.collect)
    assert coder is not None
    codes = frame.select(coder.expr().alias("code"))["code"]
    want = keyed(frame, by)["key"]
    assert codes.is_null().to_list() == want.is_null().to_list()
    present = codes.drop_nulls().to_numpy()
    assert coder.keys(present).to_list() == want.drop_nulls().to_list()
    pairs = set(zip(present.tolist(), want.drop_nulls().to_list(), strict=True))
    assert len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs})


@pytest.mark.parametrize("partitions", [None, "some"])
@pytest.mark.parametrize("seed", [0, 1])
def test_aggregates_over_group_codes_equal_those_over_written_keys(
    monkeypatch: pytest.MonkeyPatch, partitions: str | None, seed: int
) -> None:
    """A seeded aggregate of several columns is the same release whether its records carry
    integer group codes or key texts (groups too wide for codes write the text per record):
    users bounded to k groups and c records, public groups given as texts, nulls."""
    from privhist import Session
    from privhist import metrics as m
    from privhist.engines.local import aggregate

    frame = records(20 + seed, n=12000, users=1500).with_columns(
        pl.Series("x", np.random.default_rng(seed).integers(0, 50, 12000))
    )
    by = ["t", "i", "b"]
    groups = None
    if partitions is not None:
        groups = frame.select(by).drop_nulls().unique().sort(by).head(9)
        absent = pl.DataFrame({"t": ["absent"], "i": [1], "b": [True]}, schema=groups.schema)
        groups = pl.concat([groups, absent])

    def run() -> pl.DataFrame:
        release = Session().aggregate(
            frame,
            by=by,
            user="user",
            metrics={"n": m.count(), "s": m.sum("x", 0, 50), "q": m.quantiles("x", [0.5], 0, 50)},
            partitions=groups,
            max_partitions=2,
            max_per_partition=2,
            epsilon=8.0,
            delta=1e-6,
            seed=seed,
        )
        return release.to_polars()

    # the bounding matters: users hold more than k = 2 groups and pairs more than c = 2 records
    pairs = frame.drop_nulls(["user", *by]).group_by("user", *by).len()
    assert pairs.group_by("user").len()["len"].max() > 2 and pairs["len"].max() > 2
    coded = run()
    monkeypatch.setattr(aggregate, "group_coder", lambda *args: None)
    written = run()
    assert coded.equals(written), (coded, written)
    assert coded.height > 0


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("user", ["user", None])
@pytest.mark.parametrize("by", [["t", "i"], ["t"]], ids="-".join)
@pytest.mark.parametrize("partitions", [None, "some"])
def test_aggregates_in_several_passes_equal_one_pass(
    monkeypatch: pytest.MonkeyPatch,
    user: str | None,
    by: list[str],
    partitions: str | None,
    threads: int,
    tmp_path: Path,
) -> None:
    """A large table is aggregated in passes over disjoint users (or records), one after the
    other or several at once on threads; the seeded release, facts included, is the one a
    single pass gives, from a table and from a file."""
    from privhist import Session
    from privhist import metrics as m
    from privhist.engines.local import aggregate

    frame = records(31, n=12000, users=1500).with_columns(
        pl.Series("x", np.random.default_rng(31).integers(0, 50, 12000))
    )
    path = tmp_path / "records.parquet"
    frame.write_parquet(path)
    groups = None
    if partitions is not None:
        groups = frame.select(by).drop_nulls().unique().sort(by).head(5)
    bounds = {"max_partitions": 2, "max_per_partition": 2} if user else {}

    def run(source: Any) -> tuple[pl.DataFrame, dict[str, Any]]:
        release = Session().aggregate(
            source,
            by=by,
            user=user,
            metrics={"n": m.count(), "s": m.sum("x", 0, 50), "q": m.quantiles("x", [0.5], 0, 50)},
            partitions=groups,
            epsilon=8.0,
            delta=1e-6,
            seed=3,
            **bounds,
        )
        return release.to_polars(), dict(release.diagnostics)

    monkeypatch.setattr("privhist.engines.local.engine.worker_threads", lambda: threads)
    once, once_facts = run(frame)  # 12000 records: below the concurrent size, one pass
    assert once.height > 0 and once_facts["records"] == 12000
    assert "passes" not in once_facts
    monkeypatch.setattr(aggregate, "ROWS_PER_AGGREGATE_PASS", 2500)  # 5 passes a thread
    monkeypatch.setattr(aggregate, "CONCURRENT_AGGREGATE_RECORDS", 10000)
    seen: list[tuple[int, int]] = []
    real = aggregate.aggregates

    def counted(*args: Any) -> Any:
        seen.append(tuple(args[6:]))
        return real(*args)

    monkeypatch.setattr("privhist.engines.local.engine.aggregates", counted)
    for source in (frame, path):
        passes, passes_facts = run(source)
        assert passes.equals(once), (passes, once)
        # a table's passes run on the threads; a file's in turn (each pass reads the file)
        assert passes_facts == {**once_facts, "passes": 5 * threads if source is frame else 5}
    assert seen == [(5,) if threads == 1 else (5 * threads, threads), (5,)]
