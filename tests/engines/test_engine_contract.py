"""The engine contract: every request kind, over every engine, equals the brute-force reference
engine (``tests/engines/reference.py``) for a seed -- tables and files, record-level and
user-level data with users far above the caps, nulls, text and integer keys.

An engine that cannot answer a request must say so in ``supports`` (then the release path refuses
before reading data); every request it claims is checked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.engines.reference import ReferenceEngine

from privhist.core.neighbouring import Neighbouring
from privhist.core.random import SeededRandom
from privhist.core.requests import (
    ColumnValues,
    Fields,
    KeyCounts,
    KeyedDraw,
    KeyWeights,
    Reading,
    Request,
    UserItems,
    UserKeys,
    UserVotes,
)
from privhist.engines.base import Engine
from privhist.engines.local import LocalEngine
from privhist.mechanisms import StabilityHistogram

SEED = 11


def _data() -> pl.DataFrame:
    g = np.random.default_rng(5)
    n = 3000
    users = g.integers(0, 120, n)
    keys = g.zipf(1.5, n) % 40
    # three users holding 100 keys each, far above every cap (caps above 64 take their own path)
    users = np.concatenate([users, np.repeat([500, 501, 502], 100)])
    keys = np.concatenate([keys, np.tile(np.arange(100, 200), 3)])
    n = users.shape[0]
    frame = pl.DataFrame(
        {
            "user": users,
            "ki": keys,
            "ks": [f"k{v}" for v in keys.tolist()],
            "x": [f"{v:.3f}" for v in g.normal(50, 20, n).tolist()],
            "w": g.integers(1, 9, n),
        }
    )
    # nulls: a few keys, a few users, a few non-numbers
    return frame.with_columns(
        pl.when(pl.int_range(n) % 97 == 0).then(None).otherwise(pl.col("ks")).alias("ks"),
        pl.when(pl.int_range(n) % 89 == 0).then(None).otherwise(pl.col("user")).alias("user"),
        pl.when(pl.int_range(n) % 83 == 0).then(pl.lit("n/a")).otherwise(pl.col("x")).alias("x"),
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    frame = _data()
    path = tmp_path_factory.mktemp("contract") / "records.csv"
    frame.write_csv(path)
    return {"table": frame, "file": path}


def _source(engine: str, form: str, data: dict[str, Any], spark: Any) -> Any:
    if form == "file":
        return str(data["file"])
    frame = data["table"]
    if engine == "spark":
        return spark.createDataFrame(frame.to_arrow())
    return frame


def _answer(engine: Engine, source: Any, request: Request) -> Any:
    return engine.compute(source, request, SeededRandom(SEED))


REQUESTS = {
    "record counts, text keys": KeyCounts(Fields("ks")),
    "record counts, integer keys": KeyCounts(Fields("ki", reading=Reading(key_type="int"))),
    "user counts k=2 c=1": KeyCounts(Fields("ks", "user"), 2, 1),
    "user counts k=3 c=2": KeyCounts(Fields("ki", "user", Reading(key_type="int")), 3, 2),
    "user counts k=70 c=3 (above 64)": KeyCounts(Fields("ks", "user"), 70, 3),
    "values of a column": ColumnValues(Fields("x")),
    "records per key": KeyWeights(Fields("ki")),
}


@pytest.fixture(scope="module", params=["local", "spark", "spark, small sources on the driver"])
def engine(request: pytest.FixtureRequest) -> tuple[str, Engine, Any]:
    """Each engine; the Spark engine counting every source on its executors, and with its
    default ``driver_rows``, under which these small sources are counted on the driver."""
    if request.param == "local":
        return "local", LocalEngine(), None
    spark = request.getfixturevalue("spark")
    from privhist.engines.spark import SparkEngine

    driver_rows = 0 if request.param == "spark" else 2**22
    return "spark", SparkEngine(spark, driver_rows=driver_rows), spark


def _same_counts(a: Any, b: Any) -> None:
    assert a.keys.tolist() == b.keys.tolist()
    assert a.counts.tolist() == b.counts.tolist()
    if b.units is not None:
        assert a.units is not None and a.units.tolist() == b.units.tolist()
    assert a.neighbouring == b.neighbouring


@pytest.mark.parametrize("form", ["table", "file"])
@pytest.mark.parametrize("name", list(REQUESTS))
def test_each_request_equals_the_reference(
    engine: tuple[str, Engine, Any], form: str, name: str, data: dict[str, Any]
) -> None:
    label, eng, spark = engine
    request = REQUESTS[name]
    ref = ReferenceEngine()
    if form == "table" and request.fields.reading.key_type == "int":
        request = KeyCounts(
            Fields(request.fields.key, request.fields.user), *_bounds(request)
        )  # a table's integer column is integer by its type
    assert eng.supports(request)
    got = _answer(eng, _source(label, form, data, spark), request)
    want = _answer(ref, data[form], request)
    if isinstance(request, KeyCounts):
        _same_counts(got, want)
        if request.fields.user_level:
            assert got.info["users_bounded"] > 0  # users far above the cap
    elif isinstance(request, ColumnValues):
        assert got.values.tolist() == want.values.tolist()
        assert got.facts == want.facts
    else:
        assert got.keys.tolist() == want.keys.tolist()
        assert got.values.tolist() == want.values.tolist()


def _bounds(request: Any) -> tuple[int | None, int | None]:
    return request.max_partitions, request.max_per_partition


def test_weights_from_a_column(engine: tuple[str, Engine, Any], data: dict[str, Any]) -> None:
    label, eng, spark = engine
    frame = data["table"].drop_nulls("ks").group_by("ks").agg(pl.col("w").sum()).sort("ks")
    source: Any = frame
    if label == "spark":
        source = spark.createDataFrame(frame.to_arrow())
    request = KeyWeights(Fields("ks"), weight="w")
    got = _answer(eng, source, request)
    want = _answer(ReferenceEngine(), frame, request)
    assert got.keys.tolist() == want.keys.tolist() and got.values.tolist() == want.values.tolist()


@pytest.mark.parametrize("form", ["table", "file"])
def test_users_keys_answer_every_round_as_the_reference(
    engine: tuple[str, Engine, Any], form: str, data: dict[str, Any]
) -> None:
    """The weighted selectors' rounds: weighted sums (fresh subsets, with keys removed), sums
    over held subsets (the same subsets, keys removed without replacement), users of released
    keys, degree and records histograms -- the same calls in the same order on each engine."""
    label, eng, spark = engine
    request = UserKeys(Fields("ks", "user"))
    got = _answer(eng, _source(label, form, data, spark), request)
    want = _answer(ReferenceEngine(), data[form], request)
    try:
        excluded = np.array(["k1", "k2"], dtype=object)
        src_a, src_b = got, want
        if True:
            for args in ((5, 64, None), (5, 64, excluded), (2, 100, None)):
                a, b = src_a.weighted_sums(*args), src_b.weighted_sums(*args)
                assert a.keys.tolist() == b.keys.tolist()
                assert a.weights.tolist() == b.weights.tolist()
                assert a.units.tolist() == b.units.tolist()
            for exclude in (None, excluded, np.array(["k1", "k2", "k3"], dtype=object)):
                a, b = src_a.held_sums(3, 64, exclude), src_b.held_sums(3, 64, exclude)
                assert a.keys.tolist() == b.keys.tolist()
                assert a.weights.tolist() == b.weights.tolist()
            wanted = np.array(["k0", "k1", "k5", "nobody"], dtype=object)
            ua, ub = src_a.unit_counts(wanted, 1), src_b.unit_counts(wanted, 1)
            assert ua.keys.tolist() == ub.keys.tolist() and ua.counts.tolist() == ub.counts.tolist()
            bounds = [1, 2, 5, 10, 20]
            assert (
                src_a.degree_histogram(bounds).tolist() == src_b.degree_histogram(bounds).tolist()
            )
            assert (
                src_a.records_histogram(bounds).tolist() == src_b.records_histogram(bounds).tolist()
            )
    finally:
        close = getattr(got, "close", None)
        if close is not None:
            close()


@pytest.mark.parametrize("form", ["table", "file"])
def test_users_votes_equal_the_reference(
    engine: tuple[str, Engine, Any], form: str, data: dict[str, Any]
) -> None:
    """Vote selection's votes: each engine's rule (vectorised on the driver) equals the rule
    written out user by user, with caps that leave keys at the cap, non-voters, and top-cap
    votes."""
    label, eng, spark = engine
    for key_type in (None, "int"):
        column = "ks" if key_type is None else "ki"
        request = UserVotes(Fields(column, "user", Reading(key_type=key_type)), cap=3, top_cap=5)
        if form == "table" and key_type == "int":
            request = UserVotes(Fields(column, "user"), cap=3, top_cap=5)
        assert eng.supports(request)
        got = _answer(eng, _source(label, form, data, spark), request)
        want = _answer(ReferenceEngine(), data[form], request)
        assert got.keys.tolist() == want.keys.tolist()
        assert got.votes.tolist() == want.votes.tolist()
        assert got.non_voters == want.non_voters > 0
        assert int(got.votes.max()) > 3 and int((got.votes == 3).sum()) > 0  # top-cap votes
        # every user with a key votes once, or finds all its keys at the top cap
        users = data["table"].drop_nulls(["user", column])["user"].n_unique()
        assert int(got.votes.sum()) <= users <= int(got.votes.sum()) + got.non_voters


@pytest.mark.parametrize("form", ["table", "file"])
def test_keyed_draws_equal_the_reference(
    engine: tuple[str, Engine, Any], form: str, data: dict[str, Any]
) -> None:
    label, eng, spark = engine
    for request in (
        KeyedDraw(Fields("ks"), mechanism=StabilityHistogram(1.0, 1e-6)),
        KeyedDraw(
            Fields("ks", "user"), 3, 2, StabilityHistogram(8.0, 1e-6, Neighbouring.user(3, 2))
        ),
    ):
        assert eng.supports(request) and ReferenceEngine().supports(request)
        got = _answer(eng, _source(label, form, data, spark), request)()
        want = _answer(ReferenceEngine(), data[form], request)()
        assert got.keys.tolist() == want.keys.tolist() and len(got) > 0
        assert got.values.tolist() == want.values.tolist()


def test_user_items_equal_the_reference(data: dict[str, Any]) -> None:
    domain = ("k0", "k1", "k2", "k9", "absent")
    request = UserItems(Fields("ks", "user"), domain=domain)
    for form in ("table", "file"):
        got = _answer(LocalEngine(), data[form], request)
        want = _answer(ReferenceEngine(), data[form], request)
        assert got.n_users == want.n_users and got.dimension == want.dimension == len(domain)
        assert got.indptr.tolist() == want.indptr.tolist()
        assert got.items.tolist() == want.items.tolist()
        assert got.counts.tolist() == want.counts.tolist()


def test_an_engine_says_what_it_cannot_answer(spark: Any) -> None:
    from privhist.engines.spark import SparkEngine

    request = UserItems(Fields("ks", "user"), domain=("k0",))
    assert not SparkEngine(spark).supports(request)
    not_per_key = KeyedDraw(Fields("ks"), mechanism=object())
    for eng in (LocalEngine(), SparkEngine(spark), ReferenceEngine()):
        assert not eng.supports(not_per_key)


def test_the_reference_catches_a_wrong_engine(data: dict[str, Any]) -> None:
    """Power check: an engine keeping one key too many per user disagrees with the oracle."""
    request = KeyCounts(Fields("ks", "user"), 2, 1)
    loose = LocalEngine().compute(
        data["table"], KeyCounts(Fields("ks", "user"), 3, 1), SeededRandom(SEED)
    )
    want = _answer(ReferenceEngine(), data["table"], request)
    assert loose.counts.tolist() != want.counts.tolist()
    assert Path(data["file"]).is_file()


def _specs() -> tuple[Any, ...]:
    from privhist.core.requests import ValueSpec

    return (
        ValueSpec("s", "x", 0, 10_000, 0.01, 5_000),
        ValueSpec("v", "x", -2_000, 12_000, 0.01, 5_000, squares=True),
        ValueSpec("q", "x", 0, 99, 1.0, 49, tree=(2, 4)),
    )


AGGREGATES = {
    "record level, one group column": (Fields("ks"), None, None, None),
    "record level, two group columns": (
        Fields(None, None, Reading(), ("ks", "ki")),
        None,
        None,
        None,
    ),
    "user level k=2 c=1": (Fields("ks", "user"), 2, 1, None),
    "user level k=70 c=2, two columns": (
        Fields(None, "user", Reading(), ("ks", "ki")),
        70,
        2,
        None,
    ),
    "user level k=3 c=3, public groups": (Fields("ks", "user"), 3, 3, ("k0", "k1", "k5", "absent")),
}


@pytest.mark.parametrize("form", ["table", "file"])
@pytest.mark.parametrize("name", list(AGGREGATES))
def test_group_aggregates_equal_the_reference(
    engine: tuple[str, Engine, Any], form: str, name: str, data: dict[str, Any]
) -> None:
    from privhist.core.requests import GroupAggregates

    label, eng, spark = engine
    fields, k, c, groups = AGGREGATES[name]
    request = GroupAggregates(fields, k, c, groups, _specs())
    assert eng.supports(request)
    got = _answer(eng, _source(label, form, data, spark), request)
    want = _answer(ReferenceEngine(), data[form], request)
    assert got.keys.tolist() == want.keys.tolist() and len(got) > 3
    assert got.records.tolist() == want.records.tolist()
    assert got.users.tolist() == want.users.tolist()
    assert got.by_types == want.by_types
    for spec in _specs():
        for part, values in want.values[spec.name].items():
            assert got.values[spec.name][part].tolist() == values.tolist(), (spec.name, part)
    if fields.user_level:
        assert got.facts["users_bounded"] + got.facts["pairs_bounded"] > 0
    if groups is not None:
        assert got.records[got.keys.tolist().index("absent")] == 0


@pytest.mark.parametrize("form", ["table", "file"])
def test_value_ranges_equal_the_reference(
    engine: tuple[str, Engine, Any], form: str, data: dict[str, Any]
) -> None:
    from privhist.core.requests import ValueRange

    label, eng, spark = engine
    grid = (-8.0, 0.0, 16.0, 32.0, 64.0, 128.0)
    for fields in (Fields("x"), Fields("x", "user")):
        request = ValueRange(fields, grid)
        got = _answer(eng, _source(label, form, data, spark), request)
        want = _answer(ReferenceEngine(), data[form], request)
        assert [a.tolist() for a in got] == [b.tolist() for b in want]
        assert sum(got[0]) > 0


@pytest.mark.parametrize("form", ["table", "file"])
def test_selection_over_two_group_columns_equals_the_reference(
    engine: tuple[str, Engine, Any], form: str, data: dict[str, Any]
) -> None:
    label, eng, spark = engine
    fields = Fields(None, "user", Reading(), ("ks", "ki"))
    for request in (
        KeyCounts(fields, 2, 1),
        KeyCounts(Fields(None, None, Reading(), ("ks", "ki"))),
    ):
        got = _answer(eng, _source(label, form, data, spark), request)
        want = _answer(ReferenceEngine(), data[form], request)
        _same_counts(got, want)
    got = _answer(eng, _source(label, form, data, spark), UserKeys(fields))
    want = _answer(ReferenceEngine(), data[form], UserKeys(fields))
    a, b = got.held_sums(3, 64), want.held_sums(3, 64)
    assert a.keys.tolist() == b.keys.tolist() and a.weights.tolist() == b.weights.tolist()
