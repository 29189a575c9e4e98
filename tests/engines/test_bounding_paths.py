"""Every path of per-user contribution bounding keeps exactly ``k`` keys and ``c`` records.

Contribution bounding has several code paths chosen by public facts: text or integer ids (one
integer code per record, dense or sparse key ranges, codes that would overflow), caps up to 64
(marked in ``k`` passes) or above (by rank), few bounded users (one packed sort) or ids far
apart (a two-column sort), one pass or several (Parquet files split by user), and the Spark
engine's per-partition bounding. A test whose users never hold more than ``k`` keys cannot tell
a path that keeps ``k + 1`` from a right one. Here every path gets users holding far more than
the caps (250 keys, 5 records each, against ``k`` = 3 or 100 and ``c`` = 2) next to users under
them, each user's keys its own (``u17:k3``, or ``17 * 1000 + 3``), so the per-key output shows
every user's choice: each bounded user keeps exactly ``k`` keys, every kept key exactly ``c``
records (or all of a pair's records when fewer), and the users under the caps keep everything.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from privhist.core.random import SeededRandom
from privhist.engines.local import counting
from privhist.engines.local.counting import count
from privhist.engines.priorities import PairPriorities

HEAVY = 24  # users holding HEAVY_KEYS keys of HEAVY_RECORDS records each
HEAVY_KEYS = 250
HEAVY_RECORDS = 5
LIGHT = 6  # users holding 2 keys of 1 record each (under every cap)
EXACT = 3  # users holding exactly 3 keys of 1 record each (at the smallest cap: not bounded)
C = 2
KEY_BLOCK = 1000  # integer keys: key_base + (user index * KEY_BLOCK + j) * key_stride
USERS = HEAVY + LIGHT + EXACT


def _keys_of(u: int) -> tuple[int, int]:
    """(keys, records per key) of user ``u``."""
    if u < HEAVY:
        return HEAVY_KEYS, HEAVY_RECORDS
    return (2, 1) if u < HEAVY + LIGHT else (3, 1)


def _records(
    *,
    int_users: bool,
    int_keys: bool,
    user_stride: int = 1,
    key_stride: int = 1,
    user_base: int = 0,
    key_base: int = 0,
) -> pl.DataFrame:
    users: list[Any] = []
    keys: list[Any] = []
    for u in range(USERS):
        n_keys, n_rec = _keys_of(u)
        uid: Any = user_base + u * user_stride if int_users else f"u{u:03d}"
        for j in range(n_keys):
            kid: Any = (
                key_base + (u * KEY_BLOCK + j) * key_stride if int_keys else f"u{u:03d}:k{j:03d}"
            )
            users.extend([uid] * n_rec)
            keys.extend([kid] * n_rec)
    return pl.DataFrame({"user": users, "key": keys})


def _owner(key: Any, key_stride: int = 1, key_base: int = 0) -> int:
    if isinstance(key, str):
        return int(key.split(":")[0][1:])
    return (int(key) - key_base) // key_stride // KEY_BLOCK


def check_bounded(
    keys: Any,
    counts: Any,
    units: Any,
    k: int,
    c: int = C,
    key_stride: int = 1,
    key_base: int = 0,
) -> None:
    """Each heavy user keeps exactly ``k`` keys of ``min(5, c)`` records; the others keep all
    their keys with their one record; a key is kept by its one owner."""
    keys, counts, units = list(keys), list(counts), list(units)
    kept = [(kk, n, un) for kk, n, un in zip(keys, counts, units, strict=True) if un > 0]
    per_user = Counter(_owner(kk, key_stride, key_base) for kk, _, _ in kept)
    for u in range(USERS):
        want = min(_keys_of(u)[0], k)
        assert per_user.get(u, 0) == want, f"user {u} keeps {per_user.get(u, 0)} keys, not {want}"
    assert set(per_user) <= set(range(USERS)), "a key outside every user's keys"
    for kk, n, un in kept:
        heavy = _owner(kk, key_stride, key_base) < HEAVY
        assert un == 1, f"key {kk} has {un} units"
        assert n == (min(HEAVY_RECORDS, c) if heavy else 1), f"key {kk} keeps {n} records"


def _check_counts(result: Any, k: int, key_stride: int = 1, key_base: int = 0) -> None:
    assert result.units is not None
    check_bounded(
        result.keys.tolist(),
        result.counts.tolist(),
        result.units.tolist(),
        k,
        key_stride=key_stride,
        key_base=key_base,
    )
    # users holding exactly k keys are not bounded
    assert result.info["users_bounded"] == (HEAVY if HEAVY_KEYS > k else 0)
    assert result.info["users"] == USERS
    kept = HEAVY * min(HEAVY_KEYS, k) * min(HEAVY_RECORDS, C) + LIGHT * 2 + EXACT * 3
    assert result.info["records_kept"] == kept == int(result.counts.sum())
    assert result.neighbouring.max_partitions_contributed == k
    assert result.neighbouring.max_contributions_per_partition == C


NEG = -7_000_003  # a negative, odd key base: offsets must be undone exactly

#: the local engine's paths: (name, records)
LOCAL_PATHS = [
    ("text ids", dict(int_users=False, int_keys=False)),
    ("text users, integer keys", dict(int_users=False, int_keys=True, key_base=NEG)),
    ("integer ids, dense keys", dict(int_users=True, int_keys=True, user_base=-50)),
    ("integer ids, negative keys", dict(int_users=True, int_keys=True, key_base=NEG)),
    # keys spread over more than 2**26: the sparse (sorted) key path of the integer codes
    (
        "integer ids, sparse keys",
        dict(int_users=True, int_keys=True, key_stride=1 << 18, key_base=NEG),
    ),
    # user ids 2**25 apart: their indexes need more than 24 bits, so the two-column sort
    ("integer ids far apart", dict(int_users=True, int_keys=True, user_stride=1 << 25)),
    # codes (user span times key range) beyond 2**62: the general path with integer columns
    ("integer codes overflow", dict(int_users=True, int_keys=True, user_stride=1 << 52)),
]


@pytest.mark.parametrize("k", [3, 100])
@pytest.mark.parametrize(("name", "kwargs"), LOCAL_PATHS, ids=[p[0] for p in LOCAL_PATHS])
def test_local_count_keeps_exactly_k_keys_and_c_records(
    name: str, kwargs: dict[str, Any], k: int
) -> None:
    frame = _records(**kwargs)
    result = count(
        frame,
        key="key",
        user="user",
        max_partitions_contributed=k,
        max_contributions_per_partition=C,
        rng=SeededRandom(k),
        progress=False,
    )
    _check_counts(result, k, kwargs.get("key_stride", 1), kwargs.get("key_base", 0))


def test_integer_codes_choose_what_the_general_path_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The integer-code path keeps, for the same secret, the pairs the general path keeps: the
    priorities are a function of the (user, key) ids themselves, offsets undone."""
    frame = _records(int_users=True, int_keys=True, user_base=1000, key_base=NEG)
    args: dict[str, Any] = dict(
        key="key",
        user="user",
        max_partitions_contributed=3,
        max_contributions_per_partition=C,
        progress=False,
    )
    fast = count(frame, rng=SeededRandom(9), **args)
    monkeypatch.setattr(counting, "count_user_codes", lambda *a, **kw: None)
    general = count(frame, rng=SeededRandom(9), **args)
    assert fast.keys.tolist() == general.keys.tolist()
    assert fast.units.tolist() == general.units.tolist()  # type: ignore[union-attr]
    assert fast.counts.tolist() == general.counts.tolist()


@pytest.mark.parametrize("k", [3, 100])
@pytest.mark.parametrize("int_ids", [False, True])
def test_local_parquet_in_several_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, k: int, int_ids: bool
) -> None:
    """A Parquet file of more rows than one pass holds is counted in passes over disjoint sets
    of users (hash buckets of text ids, ranges of integer ids): each pass bounds its users."""
    frame = _records(int_users=int_ids, int_keys=int_ids)
    path = tmp_path / "records.parquet"
    frame.write_parquet(path)
    monkeypatch.setattr(counting, "ROWS_PER_USER_PARTITION", frame.height // 4)
    monkeypatch.setattr(counting, "_CODE_ROWS_PER_PASS", frame.height // 4)  # integer ids
    result = count(
        path,
        key="key",
        user="user",
        key_type="int" if int_ids else "str",
        max_partitions_contributed=k,
        max_contributions_per_partition=C,
        rng=SeededRandom(3),
        progress=False,
    )
    assert result.info["user_partitions"] >= 4
    _check_counts(result, k)


def test_bound_contributions_returns_exactly_k_pairs_of_at_most_c() -> None:
    for k in (3, 64, 65, 100):
        pairs = (
            _records(int_users=False, int_keys=False)
            .group_by("user", "key")
            .agg(pl.len().alias("n"))
        )
        kept = counting.bound_contributions(pairs, k, C, SeededRandom(k))
        per_user = kept.group_by("user").len()
        for user, n in per_user.iter_rows():
            u = int(user[1:])
            assert n == min(_keys_of(u)[0], k), (k, user, n)
        assert kept["n"].max() <= C


def test_keep_mask_ties_are_broken_by_key_order() -> None:
    """Equal priorities (a constant priority function): each user keeps its first ``k`` rows in
    (user, key) order, exactly ``k`` of them."""
    sizes = np.array([10, 3, 70, 2], dtype=np.int64)
    for k in (3, 65):
        keep, bounded = counting._keep_mask(
            sizes,
            k,
            lambda rows: np.zeros(sizes.sum() if rows is None else rows.size, dtype=np.uint64),
        )
        assert keep is not None
        starts = np.cumsum(sizes) - sizes
        for s, n in zip(starts, sizes, strict=True):
            block = keep[s : s + n]
            assert block.sum() == min(n, k)
            assert block[: min(n, k)].all()
        assert bounded == int((sizes > k).sum())


# -- the Spark engine's per-partition bounding (Arrow in, per-key rows out) -------------------


def _spark_rows(table: Any) -> tuple[list[Any], list[int], list[int], dict[str, int]]:
    from privhist.engines.spark.bounding import FACTS

    d = table.to_pydict()
    keys, counts, units, facts = [], [], [], {}
    for i, kk in enumerate(d["key"]):
        if kk is None:
            facts = {f: d[f][i] for f in FACTS}
        else:
            keys.append(kk)
            counts.append(d["count"][i])
            units.append(d["units"][i])
    return keys, counts, units, facts


#: (name, records, key_is_int, key stride): integer codes, text through Polars, mixed ids,
#: and integer codes that would overflow (back to the Polars path)
SPARK_PATHS = [
    ("integer ids", dict(int_users=True, int_keys=True, key_base=NEG), True, 1),
    ("text ids", dict(int_users=False, int_keys=False), False, 1),
    ("text users, integer keys", dict(int_users=False, int_keys=True), True, 1),
    ("integer codes overflow", dict(int_users=True, int_keys=True, user_stride=1 << 52), True, 1),
    # the same from a negative smallest user: the span of users, not the largest, must decide
    (
        "integer codes overflow, negative users",
        dict(int_users=True, int_keys=True, user_stride=1 << 52, user_base=-(1 << 62)),
        True,
        1,
    ),
    (
        "integer ids, sparse keys",
        dict(int_users=True, int_keys=True, key_stride=1 << 18, key_base=NEG),
        True,
        1 << 18,
    ),
]


@pytest.mark.parametrize("k", [3, 100])
@pytest.mark.parametrize(
    ("name", "kwargs", "key_is_int", "stride"), SPARK_PATHS, ids=[p[0] for p in SPARK_PATHS]
)
def test_spark_partition_bounding_keeps_exactly_k_and_c(
    name: str, kwargs: dict[str, Any], key_is_int: bool, stride: int, k: int
) -> None:
    from privhist.engines.spark.bounding import bound_table

    table = _records(**kwargs).to_arrow()
    out = bound_table(table, PairPriorities(bytes(range(32))), k, C, key_is_int)
    keys, counts, units, facts = _spark_rows(out)
    check_bounded(keys, counts, units, k, key_stride=stride, key_base=kwargs.get("key_base", 0))
    assert facts["users"] == USERS
    assert facts["users_bounded"] == (HEAVY if HEAVY_KEYS > k else 0)
    assert facts["records"] == table.num_rows


def test_spark_integer_codes_step_aside_for_keys_spanning_int64() -> None:
    """One user holding the two ends of the int64 range: the packed code ``key - k0`` would
    overflow, so the packed path declines (None) and the table comes from the general path,
    each key counted once."""
    from privhist.engines.spark.bounding import _count_int_pairs, bound_table

    f = PairPriorities(bytes(range(32)))
    user = np.array([7, 7], dtype=np.int64)
    key = np.array([-(2**63) + 5, 2**63 - 5], dtype=np.int64)
    assert _count_int_pairs(user, key, f, 2, 1) is None
    table = pl.DataFrame({"user": user, "key": key}).to_arrow()
    keys, counts, units, facts = _spark_rows(bound_table(table, f, 2, 1, True))
    assert sorted(keys) == sorted(key.tolist()) and list(counts) == [1, 1] == list(units)
    assert facts["users"] == 1 and facts["users_bounded"] == 0


def test_spark_integer_codes_choose_what_the_general_path_chooses() -> None:
    """The packed integer path keeps, for the same secret, the pairs the Polars path keeps: the
    priorities take the (user, key) ids themselves, both offsets undone (users from 1000, keys
    from a negative base)."""
    from privhist.engines.spark.bounding import _count_int_pairs, _count_pairs

    frame = _records(int_users=True, int_keys=True, user_base=1000, key_base=NEG)
    f = PairPriorities(bytes(range(32)))
    user, key = frame["user"].to_numpy(), frame["key"].to_numpy()
    packed = _count_int_pairs(user, key, f, 3, C)
    assert packed is not None
    general = _count_pairs(frame.to_arrow(), f, 3, C)
    rows = [
        sorted(zip(np.asarray(out[0]).tolist(), out[1].tolist(), out[2].tolist(), strict=True))
        for out in (packed, general)
    ]
    assert rows[0] == rows[1]
    assert packed[3:] == general[3:] == (USERS, HEAVY)


def test_spark_keep_mask_ties_fall_back_to_key_order() -> None:
    from privhist.engines.spark.bounding import keep_mask

    sizes = np.array([10, 3, 70], dtype=np.int64)
    m = int(sizes.sum())

    def constant(users: Any, keys: Any) -> Any:
        return np.zeros(len(users), dtype=np.uint64)

    ids = np.arange(m, dtype=np.int64)
    for k in (3, 65):
        keep, bounded = keep_mask(sizes, k, constant, ids, ids)  # type: ignore[arg-type]
        starts = np.cumsum(sizes) - sizes
        for s, n in zip(starts, sizes, strict=True):
            assert keep[s : s + n].sum() == min(n, k) and keep[s : s + min(n, k)].all()
        assert bounded == int((sizes > k).sum())


@pytest.mark.parametrize("k", [3, 100])
@pytest.mark.parametrize("int_ids", [False, True])
def test_spark_engine_count_keeps_exactly_k_and_c(spark: Any, k: int, int_ids: bool) -> None:
    from privhist.core.requests import Fields, KeyCounts
    from privhist.engines.spark import SparkEngine

    frame = _records(int_users=int_ids, int_keys=int_ids)
    sdf = spark.createDataFrame(frame.to_pandas()).repartition(3)
    request = KeyCounts(Fields(key="key", user="user"), max_partitions=k, max_per_partition=C)
    result = SparkEngine(spark, driver_rows=0).count(sdf, request, SeededRandom(4))
    _check_counts(result, k)


# -- the weighted selectors' sources: at most max_keys keys per user, weight floor(s/sqrt(t)) -


def _check_weights(w: Any, max_keys: int, scale: int) -> None:
    """Each user keeps ``t = min(keys, max_keys)`` keys of weight ``floor(scale / sqrt(t))``,
    the largest integer ``w`` with ``t w**2 <= scale**2`` (computed here without isqrt)."""
    kept = [
        (kk, wt, un)
        for kk, wt, un in zip(w.keys.tolist(), w.weights.tolist(), w.units.tolist(), strict=True)
        if un > 0
    ]
    per_user = Counter(_owner(kk) for kk, _, _ in kept)
    for u in range(USERS):
        t = min(_keys_of(u)[0], max_keys)
        assert per_user.get(u, 0) == t, (u, per_user.get(u, 0), t)
    for kk, wt, un in kept:
        t = min(_keys_of(_owner(kk))[0], max_keys)
        assert un == 1 and t * wt * wt <= scale * scale < t * (wt + 1) ** 2, (kk, wt, t)


@pytest.mark.parametrize("scale", [1024, 5])
@pytest.mark.parametrize("max_keys", [3, 100])
def test_local_weighted_source_bounds_every_user(max_keys: int, scale: int) -> None:
    from privhist.engines.local.weighting import LocalWeightedSource

    frame = _records(int_users=False, int_keys=False)
    src = LocalWeightedSource(frame, SeededRandom(max_keys))
    _check_weights(src.weighted_sums(max_keys, scale), max_keys, scale)
    _check_weights(src.held_sums(max_keys, scale), max_keys, scale)
    every = np.array(sorted(set(frame["key"].to_list())), dtype=object)
    counted = src.unit_counts(every, max_keys)
    check_bounded(
        counted.keys.tolist(), counted.counts.tolist(), counted.counts.tolist(), max_keys, c=1
    )


@pytest.mark.parametrize("max_keys", [3, 100])
def test_spark_weighted_source_bounds_every_user(spark: Any, max_keys: int) -> None:
    from privhist.engines.spark.weighting import SparkWeightedSource

    frame = _records(int_users=False, int_keys=False)
    src = SparkWeightedSource(spark.createDataFrame(frame.to_pandas()), SeededRandom(max_keys))
    try:
        _check_weights(src.weighted_sums(max_keys, 1024), max_keys, 1024)
        _check_weights(src.held_sums(max_keys, 1024), max_keys, 1024)
        every = np.array(sorted(set(frame["key"].to_list())), dtype=object)
        counted = src.unit_counts(every, max_keys)
        check_bounded(
            counted.keys.tolist(), counted.counts.tolist(), counted.counts.tolist(), max_keys, c=1
        )
    finally:
        src.close()


def test_weighted_sums_scale_and_input_checks() -> None:
    from privhist.core.errors import ValidationError
    from privhist.engines.local.weighting import MAX_SCALE, weighted_sums

    pairs = pl.DataFrame({"user": [1, 1, 2], "key": [1, 2, 1]})
    w = weighted_sums(pairs, 2, MAX_SCALE, SeededRandom(1))  # the largest scale is accepted
    half = MAX_SCALE * 1000 // 1414  # about floor(MAX_SCALE / sqrt(2)), refined below
    while 2 * (half + 1) ** 2 <= MAX_SCALE**2:
        half += 1
    while 2 * half**2 > MAX_SCALE**2:
        half -= 1
    assert w.weights.tolist() == [half + MAX_SCALE, half]
    for bad in (
        dict(pairs=pairs, scale=MAX_SCALE + 1),
        dict(pairs=pairs.to_pandas(), scale=4),
        dict(pairs=pairs.rename({"user": "who"}), scale=4),
    ):
        with pytest.raises(ValidationError):
            weighted_sums(bad["pairs"], 2, bad["scale"], SeededRandom(1))  # type: ignore[arg-type]


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_user_partitions_count_every_user_once(partitions: int) -> None:
    """Users split into ``partitions`` passes by a hash of their id: each user is counted in
    exactly one pass, so with caps that bind no one the counts, units and user count equal the
    raw ones (text ids: the general path), for any number of passes."""
    users = [f"u{i % 37}" for i in range(400)]
    keys = [f"k{(i * 7) % 11}" for i in range(400)]
    frame = pl.DataFrame({"user": users, "key": keys})
    expect_counts: dict[str, int] = {}
    expect_units: dict[str, set[str]] = {}
    for u, key in zip(users, keys, strict=True):
        expect_counts[key] = expect_counts.get(key, 0) + 1
        expect_units.setdefault(key, set()).add(u)
    out = counting._count_users(frame.lazy(), 11, 400, SeededRandom(4), "frame", partitions)
    got = dict(zip(out.keys.tolist(), out.counts.tolist(), strict=True))
    units = dict(zip(out.keys.tolist(), out.units.tolist(), strict=True))
    assert got == expect_counts
    assert units == {key: len(us) for key, us in expect_units.items()}
    assert out.info["users"] == 37 and out.info["records"] == 400


@pytest.mark.parametrize(
    ("user_span", "codes"),
    [(4, True), (1 << 22, False)],
    ids=["keys spanning 2**40", "codes spanning 2**62"],
)
def test_integer_codes_reach_their_limits_and_no_further(
    monkeypatch: pytest.MonkeyPatch, user_span: int, codes: bool
) -> None:
    """Integer ids are counted by codes ``(user - u0) * R + (key - k0)`` for keys spanning up to
    ``R = 2**40``, in passes of at most ``_CODE_ROWS_PER_PASS`` records (``user_partitions``
    says how many); a user span times ``R`` of ``2**62`` or more goes to the general path, which
    reads a table in one pass. Keys 0 and ``2**40 - 1`` (``R = 2**40``): with 4 users (span 4)
    the codes path counts in ``ceil(24 / 7) = 4`` passes of at most 7 records (a floor would
    give 3); with users 0 and ``2**22 - 1`` the codes span exactly ``2**62`` and the general
    path counts. Either way each user holds both keys with 3 records, and ``k = 1, c = 2``
    keep one key and 2 of its records per user."""
    users = [0, 1, 2, user_span - 1]
    top = (1 << 40) - 1
    frame = pl.DataFrame(
        {"user": [u for u in users for _ in range(6)], "key": [0, top] * 3 * len(users)},
        schema={"user": pl.Int64, "key": pl.Int64},
    )
    # 24 records in passes of at most 7: ceil(24 / 7) = 4 passes (users 0..3, one each)
    monkeypatch.setattr(counting, "_CODE_ROWS_PER_PASS", 7)
    out = count(
        frame,
        key="key",
        user="user",
        max_partitions_contributed=1,
        max_contributions_per_partition=2,
        rng=SeededRandom(5),
        progress=False,
    )
    assert out.units is not None
    assert set(out.keys.tolist()) <= {0, top}
    assert int(out.units.sum()) == 4 and int(out.counts.sum()) == 8
    assert out.counts.tolist() == [2 * u for u in out.units.tolist()]
    assert out.info["users"] == 4 and out.info["users_bounded"] == 4
    assert out.info.get("user_partitions") == (4 if codes else None)


def test_spark_integer_bounding_imports_no_pandas(tmp_path: Path) -> None:
    """The integer path reads and writes Arrow buffers directly: PyArrow's NumPy conversions
    import pandas on first use (about 0.5 CPU s in every new Python worker), so a fresh
    process bounding an integer partition (chunked, sliced, with a null) must not load it.
    Power: one ``to_numpy`` on the same table does."""
    import json
    import subprocess
    import sys

    script = """
import json
import sys
import numpy as np
import pyarrow as pa
from privhist.engines.priorities import PairPriorities
from privhist.engines.spark.bounding import bound_table, FACTS

def column(values):
    v = np.asarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(v), [None, pa.py_buffer(v)])

user = column([9, 1, 1, 1, 2, 2, 3, 3, 3, 3])
key = column([9, 5, 6, 7, 5, 5, 5, 6, 8, 9])
table = pa.Table.from_arrays(
    [pa.chunked_array([user.slice(1, 4), user.slice(5)]),
     pa.chunked_array([key.slice(1, 4), key.slice(5)])], names=["user", "key"])
with_null = pa.Table.from_arrays(
    [pa.concat_arrays([table.column("user").combine_chunks(), pa.nulls(1, pa.int64())]),
     pa.concat_arrays([table.column("key").combine_chunks(), column([4])])],
    names=["user", "key"])
out = bound_table(with_null, PairPriorities(bytes(range(32))), 2, 1, True).to_pydict()
print("pandas" in sys.modules)
rows = [[k, c, u] for k, c, u in zip(out["key"], out["count"], out["units"]) if k is not None]
print(json.dumps({"rows": rows, "facts": {f: out[f][-1] for f in FACTS}}))
if sys.argv[1] == "power":
    table.column("key").to_numpy()
    print("pandas" in sys.modules)
"""
    for mode in ("run", "power"):
        done = subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True
        )
        lines = done.stdout.splitlines()
        assert lines[0] == "False", done.stdout + done.stderr
        got = json.loads(lines[1])
        # user 1 holds keys 5, 6, 7 and user 3 keys 5, 6, 8, 9 (each bounded to 2 of them);
        # user 2 holds key 5 twice (one record, c = 1); the null user's record (key 4) is a null
        assert got["facts"] == {
            "records": 10, "null_keys": 0, "null_users": 1, "users": 3, "users_bounded": 2
        }  # fmt: skip
        rows = {k: (c, u) for k, c, u in got["rows"]}
        assert set(rows) == {5, 6, 7, 8, 9} and rows[5][1] >= 1
        assert sum(c for c, _ in rows.values()) == 5 == sum(u for _, u in rows.values())
        if mode == "power":
            assert lines[2] == "True"
