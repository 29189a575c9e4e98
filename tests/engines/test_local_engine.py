"""The local engine: exact counts, contribution bounding, uniform key selection, nulls, files."""

from __future__ import annotations

import gzip
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import U64, RandomSource, SecureRandom, SeededRandom
from privhist.engines import count, count_array
from privhist.engines.local import bound_contributions, counting
from privhist.engines.local.progress import status
from privhist.engines.priorities import PairPriorities

SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def as_dict(c: Counts) -> dict[Any, int]:
    return dict(zip(c.keys.tolist(), c.counts.tolist(), strict=True))


def check_invariants(c: Counts) -> None:
    assert c.counts.dtype == np.int64
    assert len(c.keys) == len(c.counts)
    if len(c) > 1:
        assert (c.keys[1:] > c.keys[:-1]).all()  # sorted and unique
    assert (c.counts > 0).all()
    if c.units is not None:
        assert c.units.dtype == np.int64
        assert (c.units >= 1).all() and (c.units <= c.counts).all()


def random_records(seed: int, n: int, users: int, keys: int) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "key": g.integers(0, keys, n),
            "user": g.integers(0, users, n),
        }
    )


# -- record-level counts ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_count_array_matches_brute_force_for_integers(seed: int) -> None:
    g = np.random.default_rng(seed)
    for keys in (g.integers(-5, 20, 300), g.integers(0, 2**40, 300), g.zipf(1.5, 500)):
        c = count_array(keys)
        check_invariants(c)
        assert as_dict(c) == dict(Counter(keys.tolist()))
        assert c.units is None
        assert c.neighbouring == Neighbouring.add_remove()
        assert c.info["records"] == keys.size
        assert c.info["distinct_keys"] == len(set(keys.tolist()))


def test_count_array_integer_paths() -> None:
    """Every route of the integer count: bins from 0 (smallest key 0 or above), a shifted range
    (negative or large smallest key), a sort (a wide range), other integer dtypes."""
    g = np.random.default_rng(5)
    cases = [
        g.integers(1, 50, 4_000),  # smallest key 1: counted in place
        g.integers(-30, 30, 4_000),  # a negative key: shifted
        g.integers(10**12, 10**12 + 40, 4_000),  # far from 0, narrow: shifted
        g.integers(0, 2**50, 4_000),  # wide: sorted
        g.integers(0, 200, 4_000).astype(np.uint8),
        g.integers(0, 2**40, 300).astype(np.uint64),
        g.integers(-(2**31), 2**31 - 1, 300).astype(np.int32),
        np.array([7], dtype=np.int64),
    ]
    for keys in cases:
        c = count_array(keys)
        check_invariants(c)
        assert as_dict(c) == dict(Counter(keys.tolist())), keys.dtype
        assert c.keys.dtype == np.int64 and c.counts.dtype == np.int64


def test_count_array_does_not_copy_keys_counted_in_place() -> None:
    """Keys from 1 (not 0) are counted without a shifted copy: the traced peak stays far below
    the 32 MiB array."""
    import tracemalloc

    keys = np.random.default_rng(2).integers(1, 1000, 1 << 22)
    count_array(keys)  # first call: imports outside the trace
    tracemalloc.start()
    c = count_array(keys)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert int(c.counts.sum()) == keys.size
    assert peak < keys.nbytes / 8


def test_count_array_strings_and_null_keys() -> None:
    keys = np.array(["b", "a", None, "b", "b", None], dtype=object)
    c = count_array(keys)
    check_invariants(c)
    assert as_dict(c) == {"a": 1, "b": 3}
    assert c.info["null_keys"] == 2 and c.info["records"] == 6
    u = count_array(np.array(["x", "y", "x"]))
    assert as_dict(u) == {"x": 2, "y": 1}


def test_count_array_rejects_other_types() -> None:
    with pytest.raises(ValidationError, match="parameter 'keys' of count_array"):
        count_array(np.array([1.5, 2.5]))
    with pytest.raises(ValidationError, match="parameter 'keys' of count_array"):
        count_array(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValidationError, match="parameter 'keys' of count_array"):
        count_array(np.array([1, "a"], dtype=object))


def test_count_array_empty() -> None:
    empties: list[Any] = [np.array([], dtype=np.int64), np.array([], dtype=object), []]
    for keys in empties:
        c = count_array(keys)
        assert len(c) == 0 and c.info["records"] == 0


@pytest.mark.parametrize("seed", range(3))
def test_count_frame_and_files_match_brute_force(seed: int, tmp_path: Path) -> None:
    df = random_records(seed, 2000, 50, 30)
    truth = dict(Counter(df["key"].to_list()))
    assert as_dict(count(df)) == truth
    assert as_dict(count(df.lazy())) == truth
    df.write_csv(tmp_path / "d.csv")
    df.write_parquet(tmp_path / "d.parquet")
    df.write_ndjson(tmp_path / "d.ndjson")
    as_text = {str(k): n for k, n in truth.items()}
    for name in ("d.csv", "d.parquet", "d.ndjson"):
        c = count(tmp_path / name, key_type="int", progress=False)
        check_invariants(c)
        assert as_dict(c) == truth
        assert c.info["records"] == 2000 and c.info["source"].endswith(name)
        assert c.info["key_type"] == "int"
        t = count(tmp_path / name, progress=False)
        check_invariants(t)
        assert as_dict(t) == as_text and t.info["key_type"] == "str"


def test_record_level_null_keys_are_counted_and_dropped() -> None:
    df = pl.DataFrame({"k": ["a", None, "a", None, None, "b"]})
    c = count(df, key="k")
    assert as_dict(c) == {"a": 2, "b": 1}
    assert c.info == {"records": 6, "null_keys": 3, "distinct_keys": 2, "records_kept": 3}


def test_empty_input_gives_empty_counts(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("k,u\n")
    for user in (None, "u"):
        c = count(f, key="k", user=user, rng=SeededRandom(0))
        assert len(c) == 0 and c.info["records"] == 0
    only_nulls = pl.DataFrame({"k": pl.Series([None, None], dtype=pl.String)})
    c = count(only_nulls, key="k")
    assert len(c) == 0 and c.info["null_keys"] == 2


def test_empty_or_missing_file_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_bytes(b"")
    with pytest.raises(InputDataError, match="empty"):
        count(f, key="k")
    with pytest.raises(InputDataError, match="parameter 'path' of count"):
        count(tmp_path / "missing.parquet", key="k")
    with pytest.raises(InputDataError, match="parameter 'key' of count"):
        count(pl.DataFrame({"a": [1]}), key="k")


# -- key types: a public choice, never inferred from the data ---------------------------------


def write_records(path: Path, keys: list[str], users: list[str] | None = None) -> None:
    """Write string keys (and users) as CSV, NDJSON or Parquet, by the file's extension."""
    columns = {"k": keys} if users is None else {"k": keys, "u": users}
    df = pl.DataFrame(columns, schema={c: pl.String for c in columns})
    if path.suffix == ".csv":
        df.write_csv(path)
    elif path.suffix == ".ndjson":
        df.write_ndjson(path)
    else:
        df.write_parquet(path)


@pytest.mark.parametrize("name", ["d.csv", "d.ndjson", "d.parquet"])
def test_one_added_record_changes_only_its_own_key(tmp_path: Path, name: str) -> None:
    # D and D plus one record are neighbours: with keys parsed record by record, every key of D
    # keeps its count, whatever the added record holds
    d = ["007"] * 3000 + ["7"] * 3000
    plus = tmp_path / ("plus_" + name)
    base = tmp_path / name
    write_records(base, d)
    write_records(plus, [*d, "zzz"])

    c, c1 = count(base, key="k", progress=False), count(plus, key="k", progress=False)
    assert as_dict(c) == {"007": 3000, "7": 3000}
    assert as_dict(c1) == {"007": 3000, "7": 3000, "zzz": 1}
    assert c.info["null_keys"] == c1.info["null_keys"] == 0

    c = count(base, key="k", key_type="int", progress=False)
    c1 = count(plus, key="k", key_type="int", progress=False)
    assert as_dict(c) == as_dict(c1) == {7: 6000}
    assert c.info["null_keys"] == 0 and c1.info["null_keys"] == 1
    assert c1.info["records"] == 6001 and c1.info["records_kept"] == 6000
    assert "keys_read_as_text" not in c1.info


@pytest.mark.parametrize("name", ["d.csv", "d.ndjson", "d.parquet"])
def test_users_are_compared_as_text(tmp_path: Path, name: str) -> None:
    # "007" and "7" are two users, with or without a record that is not a number
    for extra in ([], ["zzz"]):
        f = tmp_path / (str(len(extra)) + name)
        users = ["007", "7", *extra]
        write_records(f, ["5"] * len(users), users)
        for key_type in ("str", "int"):
            c = count(
                f,
                key="k",
                user="u",
                key_type=key_type,
                max_partitions_contributed=1,
                max_contributions_per_partition=1,
                rng=SeededRandom(0),
                progress=False,
            )
            assert c.info["users"] == len(users)
            key = "5" if key_type == "str" else 5
            assert as_dict(c) == {key: len(users)}
            assert c.units is not None and c.units.tolist() == [len(users)]


def test_parquet_integer_users_are_text(tmp_path: Path) -> None:
    f = tmp_path / "d.parquet"
    pl.DataFrame({"k": [1, 1, 2], "u": [7, 7, 8]}).write_parquet(f)
    c = count(f, key="k", user="u", max_partitions_contributed=2, rng=SeededRandom(0))
    assert as_dict(c) == {"1": 1, "2": 1} and c.info["users"] == 2
    c = count(f, key="k", user="u", key_type="int", rng=SeededRandom(0))
    assert c.keys.dtype == np.int64 and c.info["users"] == 2


def test_integer_looking_keys_are_never_reread(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("k\n" + "1\n" * 20_000 + "abc\n")
    c = count(f, key="k")
    assert as_dict(c) == {"1": 20_000, "abc": 1} and c.info["key_type"] == "str"
    c = count(f, key="k", key_type="int")
    assert as_dict(c) == {1: 20_000}
    assert c.info["null_keys"] == 1 and c.info["records"] == 20_001


def test_tables_keep_their_type_unless_key_type_is_given() -> None:
    df = pl.DataFrame({"n": [7, 7, 12], "s": ["007", "7", "x"]})
    assert as_dict(count(df, key="n")) == {7: 2, 12: 1}
    assert as_dict(count(df, key="n", key_type="str")) == {"12": 1, "7": 2}
    assert as_dict(count(df, key="s")) == {"007": 1, "7": 1, "x": 1}
    c = count(df, key="s", key_type="int")
    assert as_dict(c) == {7: 2} and c.info["null_keys"] == 1


def test_key_type_is_validated_before_reading(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="parameter 'key_type' of count must be one of"):
        count(tmp_path / "missing.csv", key_type="auto")
    with pytest.raises(ValidationError, match="parameter 'key_type' of count"):
        count(pl.DataFrame({"key": [1]}), key_type="float")


def test_malformed_fimi_item_is_a_null_key(tmp_path: Path) -> None:
    f = tmp_path / "r.dat"
    f.write_text("1 2\n3 x\n")
    c = count(f, user=True, max_partitions_contributed=2, rng=SeededRandom(0))
    assert as_dict(c) == {1: 1, 2: 1, 3: 1}
    assert c.info["null_keys"] == 1 and c.info["key_type"] == "int"
    t = count(f, key_type="str")
    assert as_dict(t) == {"1": 1, "2": 1, "3": 1, "x": 1} and t.info["null_keys"] == 0


def test_text_and_fimi_files(tmp_path: Path) -> None:
    t = tmp_path / "t.txt.gz"
    t.write_bytes(gzip.compress(b"To be, or not to be\nthat is the question\n"))
    c = count(t)
    assert as_dict(c)["to"] == 2 and as_dict(c)["be"] == 2 and c.info["format"] == "text"
    u = count(t, user=True, max_partitions_contributed=10, max_contributions_per_partition=1)
    assert as_dict(u)["to"] == 1 and u.info["users"] == 2
    f = tmp_path / "r.dat"
    f.write_text("1 2 2 \n2 3 \n")
    assert as_dict(count(f)) == {1: 1, 2: 3, 3: 1}
    b = count(f, user=True, max_partitions_contributed=2, max_contributions_per_partition=1)
    assert as_dict(b) == {1: 1, 2: 2, 3: 1} and b.units is not None


# -- contribution bounding --------------------------------------------------------------------


def brute_force_pairs(df: pl.DataFrame) -> dict[tuple[Any, Any], int]:
    out: dict[tuple[Any, Any], int] = Counter()
    for u, k in zip(df["user"].to_list(), df["key"].to_list(), strict=True):
        if u is not None and k is not None:
            out[(u, k)] += 1
    return dict(out)


@pytest.mark.parametrize(("k", "c"), [(1, 1), (2, 3), (3, 1), (100, 100)])
def test_bounded_dataset_respects_the_bounds(k: int, c: int) -> None:
    df = random_records(11, 3000, 40, 12)
    pairs = brute_force_pairs(df)
    held: dict[Any, set[Any]] = defaultdict(set)
    for u, key in pairs:
        held[u].add(key)
    table = pl.DataFrame(
        {
            "user": [u for u, _ in pairs],
            "key": [key for _, key in pairs],
            "n": list(pairs.values()),
        }
    )
    kept = bound_contributions(table, k, c, SeededRandom(3))
    per_user: dict[Any, list[Any]] = defaultdict(list)
    for u, key, n in kept.iter_rows():
        per_user[u].append(key)
        assert n == min(pairs[(u, key)], c)  # at most c per (user, key), and no fewer
    for u, keys in held.items():
        chosen = per_user.get(u, [])
        assert len(chosen) == min(len(keys), k)  # at most k keys, and no fewer
        assert len(set(chosen)) == len(chosen) and set(chosen) <= keys

    # the engine's counts are exactly the bounded dataset's counts
    counts = count(
        df,
        user="user",
        max_partitions_contributed=k,
        max_contributions_per_partition=c,
        rng=SeededRandom(3),
    )
    check_invariants(counts)
    expected_counts: Counter[Any] = Counter()
    expected_units: Counter[Any] = Counter()
    for _, key, n in kept.iter_rows():
        expected_counts[key] += n
        expected_units[key] += 1
    assert as_dict(counts) == dict(expected_counts)
    assert counts.units is not None
    assert dict(zip(counts.keys.tolist(), counts.units.tolist(), strict=True)) == dict(
        expected_units
    )
    assert counts.neighbouring == Neighbouring.user(k, c)
    assert counts.neighbouring.relation is Relation.USER
    assert counts.info["users"] == len(held)
    assert counts.info["users_bounded"] == sum(len(v) > k for v in held.values())


def _kept_by_priority(
    df: pl.DataFrame, f: PairPriorities, k: int, c: int
) -> dict[Any, tuple[int, int]]:
    """Per key: (sum of min(n, c), kept pairs) when each user keeps its k pairs of smallest
    (priority, key), by loops over the users."""
    held: dict[Any, dict[Any, int]] = defaultdict(dict)
    for (u, key), n in brute_force_pairs(df).items():
        held[u][key] = n
    out: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
    for u, pairs in held.items():
        keys = sorted(pairs)
        if len(keys) > k:
            prio = f(np.full(len(keys), u, dtype=np.int64), np.array(keys, dtype=np.int64))
            keys = [key for _, key in sorted(zip(prio.tolist(), keys, strict=True))][:k]
        for key in keys:
            out[key][0] += min(pairs[key], c)
            out[key][1] += 1
    return {key: (v[0], v[1]) for key, v in out.items()}


ROUTES = {
    "one chunk": {},
    "chunks on two threads": {"_CODE_CHUNK": 64, "_MAX_THREADS": 2},
    "passes": {"_CODE_ROWS_PER_PASS": 900, "_CODE_CHUNK": 100},
    "sparse keys": {"_DENSE_KEYS": 10, "_CODE_CHUNK": 80},
    "exact ranking": {"_MATRIX_MAX_KEYS": 8},
}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize(("k", "c"), [(3, 2), (1, 1)])
def test_integer_user_counts_keep_the_k_smallest_priorities(
    route: str, k: int, c: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The integer path (one code per record, sorted, cut into chunks of whole users, tallied
    on threads, in passes over ranges of users) against loops over users: every user keeps its
    k pairs of smallest (priority, key) under the secret drawn from the seed, whatever route
    the counts take; users hold 1 to 150 keys (every size class and the exact ranking)."""
    g = np.random.default_rng(9)
    sizes = np.concatenate([g.integers(1, 12, 150), g.integers(12, 150, 25)])
    users = np.repeat(np.arange(sizes.size) * 7 - 300, sizes)
    keys = np.concatenate([g.choice(400, int(s), replace=False) for s in sizes]) - 50
    dup = g.integers(0, users.size, users.size // 3)  # more records of some pairs
    users, keys = np.concatenate([users, users[dup]]), np.concatenate([keys, keys[dup]])
    order = g.permutation(users.size)
    ukeys: list[Any] = keys[order].tolist()
    uusers: list[Any] = users[order].tolist()
    ukeys[3] = None
    uusers[5] = None
    df = pl.DataFrame({"user": uusers, "key": ukeys}, schema={"user": pl.Int64, "key": pl.Int64})
    f = tmp_path / "pairs.parquet"
    df.write_parquet(f)
    for name, value in ROUTES[route].items():
        monkeypatch.setattr(counting, name, value)
    got = count(
        f,
        key="key",
        user="user",
        key_type="int",
        max_partitions_contributed=k,
        max_contributions_per_partition=c,
        rng=SeededRandom(21),
    )
    check_invariants(got)
    expected = _kept_by_priority(df, PairPriorities.draw(SeededRandom(21)), k, c)
    assert got.units is not None
    table = zip(got.keys.tolist(), got.counts.tolist(), got.units.tolist(), strict=True)
    assert {key: (n, u) for key, n, u in table} == expected
    valid = df.drop_nulls()
    assert got.info["users"] == valid["user"].n_unique()
    assert got.info["distinct_keys"] == valid["key"].n_unique()
    assert got.info["null_keys"] == 1 and got.info["null_users"] == 1
    assert got.info["users_bounded"] == int(
        (valid.unique().group_by("user").len()["len"] > k).sum()
    )
    assert ("user_partitions" in got.info) == (route == "passes")


def test_smallest_k_breaks_ties_by_key_order() -> None:
    """Runs with equal priorities at the threshold, in the matrix classes and the exact
    ranking: each keeps exactly k rows, the smallest by (priority, position in the run)."""
    g = np.random.default_rng(3)
    sizes = np.array([4, 5, 9, 17, 40, 70, 6])
    k = 3
    priority = g.integers(0, 6, int(sizes.sum())).astype(np.uint64)  # many ties
    keep = counting._smallest_k(priority, sizes, k)
    start = 0
    for s in sizes.tolist():
        run = priority[start : start + s].tolist()
        best = sorted(range(s), key=lambda i: (run[i], i))[:k]
        assert sorted(np.flatnonzero(keep[start : start + s]).tolist()) == sorted(best)
        start += s


def test_loose_bounds_keep_everything_exactly() -> None:
    df = random_records(5, 1000, 30, 8)
    pairs = brute_force_pairs(df)
    c = count(
        df,
        user="user",
        max_partitions_contributed=8,
        max_contributions_per_partition=10**6,
        rng=SeededRandom(0),
    )
    assert as_dict(c) == dict(Counter(df["key"].to_list()))
    assert c.info["users_bounded"] == 0
    units: Counter[Any] = Counter(key for _, key in pairs)
    assert c.units is not None and c.units.tolist() == [units[k] for k in c.keys.tolist()]


def test_users_within_k_draw_no_randomness() -> None:
    class Refuse(RandomSource):
        def uint64(self, n: int) -> U64:
            raise AssertionError("no randomness should be drawn")

        @property
        def description(self) -> str:
            return "refuse"

    df = pl.DataFrame({"user": [1, 1, 2], "key": ["a", "b", "a"]})
    c = count(df, user="user", max_partitions_contributed=2, rng=Refuse())
    assert as_dict(c) == {"a": 2, "b": 1}


def test_equal_priorities_still_respect_the_bound() -> None:
    class Zeros(RandomSource):
        def uint64(self, n: int) -> U64:
            return np.zeros(n, dtype=np.uint64)

        @property
        def description(self) -> str:
            return "zeros"

    df = random_records(2, 500, 10, 20)
    c = count(
        df,
        user="user",
        max_partitions_contributed=3,
        max_contributions_per_partition=2,
        rng=Zeros(),
    )
    assert c.units is not None and int(c.units.sum()) == 30  # ten users, three keys each
    assert int(c.counts.sum()) <= 10 * 3 * 2


def test_null_keys_and_null_users_are_counted_and_dropped() -> None:
    df = pl.DataFrame(
        {
            "user": [1, 1, None, 2, None, 3],
            "key": ["a", None, "a", "b", None, "a"],
        }
    )
    c = count(
        df,
        user="user",
        max_partitions_contributed=5,
        max_contributions_per_partition=5,
        rng=SeededRandom(0),
    )
    assert as_dict(c) == {"a": 2, "b": 1}
    assert c.info["records"] == 6
    assert c.info["null_keys"] == 2  # records whose key is null
    assert c.info["null_users"] == 2  # records whose user is null
    assert c.info["users"] == 3


def test_user_false_means_record_level() -> None:
    df = pl.DataFrame({"user": [1, 1], "key": ["a", "a"]})
    c = count(df, user=False)
    assert as_dict(c) == {"a": 2} and c.units is None
    assert c.neighbouring == Neighbouring.add_remove()


def test_defaults_are_used_and_recorded() -> None:
    df = pl.DataFrame({"user": [1, 1, 1, 2], "key": ["a", "a", "b", "a"]})
    c = count(df, user="user", rng=SeededRandom(1))
    assert c.neighbouring == Neighbouring.user(1, 1)
    assert c.info["bounds_defaulted"] == [
        "max_partitions_contributed",
        "max_contributions_per_partition",
    ]
    assert int(c.counts.sum()) == 2  # one record from each user
    d = count(df, user="user", max_partitions_contributed=2, rng=SeededRandom(1))
    assert d.info["bounds_defaulted"] == ["max_contributions_per_partition"]
    assert as_dict(d) == {"a": 2, "b": 1}


def test_bad_bounds_and_arguments() -> None:
    df = pl.DataFrame({"user": [1], "key": ["a"]})
    with pytest.raises(ValidationError, match="parameter 'max_partitions_contributed' of count"):
        count(df, user="user", max_partitions_contributed=0)
    with pytest.raises(ValidationError, match="max_contributions_per_partition"):
        count(df, user="user", max_contributions_per_partition=-1)
    with pytest.raises(ValidationError, match="without a user column"):
        count(df, max_partitions_contributed=2)
    with pytest.raises(ValidationError, match="parameter 'input_format' of count"):
        count(df, format="csv")
    with pytest.raises(ValidationError, match="parameter 'source' of count"):
        count(np.array([1, 2]))  # type: ignore[arg-type]


def test_reproducible_with_seeded_random() -> None:
    df = random_records(9, 5000, 100, 50)

    def run(seed: int) -> Counts:
        return count(
            df,
            user="user",
            max_partitions_contributed=2,
            max_contributions_per_partition=1,
            rng=SeededRandom(seed),
        )

    a, b, other = run(42), run(42), run(43)
    assert a.keys.tolist() == b.keys.tolist()
    assert a.counts.tolist() == b.counts.tolist()
    assert a.units is not None and b.units is not None
    assert a.units.tolist() == b.units.tolist()
    assert as_dict(a) != as_dict(other)
    # the input row order does not matter either
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=1)
    c = count(
        shuffled,
        user="user",
        max_partitions_contributed=2,
        max_contributions_per_partition=1,
        rng=SeededRandom(42),
    )
    assert as_dict(c) == as_dict(a)


def test_count_array_with_users() -> None:
    keys = np.array([5, 5, 6, 7, 5])
    users = np.array(["p", "p", "p", "q", "q"])
    c = count_array(
        keys,
        users,
        max_partitions_contributed=2,
        max_contributions_per_partition=2,
        rng=SeededRandom(0),
    )
    assert c.neighbouring == Neighbouring.user(2, 2)
    assert as_dict(c) == {5: 3, 6: 1, 7: 1}
    with pytest.raises(ValidationError, match="parameter 'users' of count_array"):
        count_array(keys, users[:3])


# -- uniformity of the per-user key selection --------------------------------------------------


def chi_square_p(observed: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * observed.sum()
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(statistic, df=observed.size - 1))


def test_one_of_four_keys_is_chosen_uniformly() -> None:
    users = 40_000
    df = pl.DataFrame(
        {
            "user": np.repeat(np.arange(users), 4),
            "key": np.tile(np.array(["w", "x", "y", "z"]), users),
        }
    )
    c = count(df, user="user", max_partitions_contributed=1, rng=SeededRandom(2024))
    observed = c.counts.astype(float)
    assert c.keys.tolist() == ["w", "x", "y", "z"] and observed.sum() == users
    uniform = np.full(4, 0.25)
    assert chi_square_p(observed, uniform) > ALPHA

    # power: the same test rejects an always-the-first-key rule and a mild bias
    assert chi_square_p(np.array([users, 0.0, 0.0, 0.0]), uniform) < ALPHA
    mild = np.array([0.28, 0.24, 0.24, 0.24]) * users
    assert chi_square_p(mild, uniform) < ALPHA


def test_two_of_four_keys_every_pair_equally_likely() -> None:
    users = 30_000
    pairs = pl.DataFrame(
        {
            "user": np.repeat(np.arange(users), 4),
            "key": np.tile(np.arange(4), users),
            "n": np.ones(4 * users, dtype=np.int64),
        }
    )
    kept = bound_contributions(pairs, 2, 1, SeededRandom(7))
    chosen = kept.group_by("user").agg(pl.col("key").sort()).get_column("key").to_list()
    freq = Counter(tuple(x) for x in chosen)
    assert len(freq) == 6 and sum(freq.values()) == users
    observed = np.array([freq[p] for p in sorted(freq)], dtype=float)
    assert chi_square_p(observed, np.full(6, 1 / 6)) > ALPHA
    # power: "the two smallest keys" would be rejected
    assert chi_square_p(np.array([users, 0, 0, 0, 0, 0], dtype=float), np.full(6, 1 / 6)) < ALPHA


# -- progress display -------------------------------------------------------------------------


def test_status_is_silent_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with status("counting", enabled=True, delay=0.0):
        pass
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    c = count(pl.DataFrame({"key": [1, 2, 2]}), progress=True)
    assert as_dict(c) == {1: 1, 2: 2}
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


# -- real data --------------------------------------------------------------------------------


def test_retail_fimi_file() -> None:
    path = SHARED_DATA / "retail.dat"
    if not path.is_file():
        pytest.skip("../shared/data/retail.dat is not present")
    truth: Counter[int] = Counter()
    baskets = 0
    with open(path, encoding="ascii") as fh:
        for line in fh:
            baskets += 1
            truth.update(int(tok) for tok in line.split())
    c = count(path, progress=False)
    check_invariants(c)
    assert as_dict(c) == dict(truth)
    assert c.info["records"] == sum(truth.values())
    b = count(
        path,
        user=True,
        max_partitions_contributed=5,
        max_contributions_per_partition=1,
        rng=SeededRandom(0),
    )
    check_invariants(b)
    assert b.info["users"] <= baskets
    assert b.info["records"] == sum(truth.values())
    assert int(b.counts.sum()) <= 5 * b.info["users"]
    assert all(b.counts[i] <= truth[k] for i, k in enumerate(b.keys.tolist()))


def test_user_partitions_give_the_same_counts(tmp_path: Path, monkeypatch: Any) -> None:
    """A Parquet file counted in several passes over disjoint users: with bounds that keep
    everything the counts are exactly those of one pass; with tight bounds every user still keeps
    min(keys, k) keys and the totals match."""
    import privhist.engines.local.counting as counting

    df = random_records(11, 3000, 40, 12)
    f = tmp_path / "d.parquet"
    df.write_parquet(f)
    loose = {"max_partitions_contributed": 12, "max_contributions_per_partition": 10**6}
    one = count(f, key="key", user="user", rng=SeededRandom(1), **loose)
    monkeypatch.setattr(counting, "ROWS_PER_USER_PARTITION", 700)
    many = count(f, key="key", user="user", rng=SeededRandom(1), **loose)
    assert many.info["user_partitions"] == 5 and "user_partitions" not in one.info
    assert as_dict(many) == as_dict(one)
    assert many.units is not None and one.units is not None
    assert many.units.tolist() == one.units.tolist()
    for name in ("records", "users", "distinct_keys", "null_keys", "null_users"):
        assert many.info[name] == one.info[name], name
    tight = count(f, key="key", user="user", max_partitions_contributed=2, rng=SecureRandom())
    held = brute_force_pairs(df)
    per_user: Counter[Any] = Counter(u for u, _ in held)
    assert tight.info["records_kept"] == sum(min(n, 2) for n in per_user.values())
    assert tight.info["users_bounded"] == sum(n > 2 for n in per_user.values())


@pytest.mark.parametrize("spread", [50, 10**15])
def test_streamed_integer_counts_match_brute_force(
    spread: int, tmp_path: Path, monkeypatch: Any
) -> None:
    """Integer keys of a file are counted batch by batch (dense or sorted, merged as they pile
    up); with tiny batches the counts, nulls and totals are exactly the brute-force ones."""
    import privhist.engines.local.counting as counting

    g = np.random.default_rng(5)
    keys = g.integers(-spread, spread, 5000).astype(object)
    keys[g.random(5000) < 0.05] = None
    f = tmp_path / "k.parquet"
    pl.DataFrame({"k": pl.Series(keys.tolist(), dtype=pl.Int64)}).write_parquet(f)
    monkeypatch.setattr(counting, "_BATCH_ROWS", 300)
    monkeypatch.setattr(counting, "_MERGE_EVERY", 3)
    c = count(f, key="k", key_type="int")
    expected = Counter(k for k in keys.tolist() if k is not None)
    assert as_dict(c) == dict(expected)
    assert c.keys.tolist() == sorted(expected)
    assert c.info["records"] == 5000 and c.info["null_keys"] == 5000 - sum(expected.values())
    assert c.info["distinct_keys"] == len(expected)


def test_a_missing_table_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """pandas tables go through pyarrow both ways: without it, the error says what to install."""
    import pandas as pd

    from privhist import Session
    from privhist.engines.local.engine import as_polars
    from privhist.io.release import Release

    def no_arrow(*args: Any, **kwargs: Any) -> Any:
        raise ModuleNotFoundError("pyarrow is required for converting a pandas dataframe")

    release = Session().histogram(
        pl.DataFrame({"k": ["a"] * 50}), key="k", epsilon=1, delta=1e-6, seed=0
    )
    assert isinstance(release, Release)
    assert list(release.to_pandas().columns)[:2] == ["key", "count"]
    monkeypatch.setattr(pl, "from_pandas", no_arrow)
    with pytest.raises(ValidationError, match=r"privhist\[pandas\]"):
        as_polars(pd.DataFrame({"k": ["a", "b"]}), "histogram")
    monkeypatch.setattr(pl.DataFrame, "to_pandas", no_arrow)
    with pytest.raises(ImportError, match=r"privhist\[pandas\]"):
        release.to_pandas()
