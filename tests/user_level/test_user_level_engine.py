"""The local engine's weighting: exact weights, uniform kept subsets, exclusion, unit counts."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import polars as pl
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import SeededRandom, ValidationError
from privhist.core.weighted import WeightedCounts, WeightedSource
from privhist.engines.local.weighting import LocalWeightedSource, unit_counts, weighted_sums


def _pairs(rows: dict[int, list[str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "user": [u for u, ks in rows.items() for _ in ks],
            "key": [k for ks in rows.values() for k in ks],
        }
    )


def test_weights_are_floor_scale_over_sqrt_kept_and_sum_per_key() -> None:
    rows = {1: ["a"], 2: ["a", "b"], 3: ["a", "b", "c"], 4: ["c", "d", "e", "f", "g"]}
    w = weighted_sums(_pairs(rows), 10, 1000, SeededRandom(1))
    got = dict(zip(w.keys.tolist(), w.weights.tolist(), strict=True))
    expected: Counter[str] = Counter()
    for ks in rows.values():
        for k in ks:
            expected[k] += math.isqrt(1000**2 // len(ks))
    assert got == dict(expected)
    assert w.units is not None and dict(zip(w.keys.tolist(), w.units.tolist(), strict=True)) == {
        "a": 3,
        "b": 2,
        "c": 2,
        "d": 1,
        "e": 1,
        "f": 1,
        "g": 1,
    }
    # every user's weight vector has L2 norm at most scale
    for ks in rows.values():
        assert len(ks) * math.isqrt(1000**2 // len(ks)) ** 2 <= 1000**2


def test_users_above_the_cap_keep_a_uniform_subset() -> None:
    """A user holding 4 keys with cap 2 keeps each of the 6 pairs with probability 1/6."""
    keys = ["a", "b", "c", "d"]
    n_users = 6000
    pairs = _pairs({u: keys for u in range(n_users)})
    w = weighted_sums(pairs, 2, 100, SeededRandom(3))
    per_key = dict(
        zip(w.keys.tolist(), (w.units if w.units is not None else []).tolist(), strict=True)
    )
    assert sum(per_key.values()) == 2 * n_users
    assert set(w.weights.tolist()) == {per_key[k] * math.isqrt(100**2 // 2) for k in per_key}
    # the joint law of a user's kept pair: draw users one at a time through the engine
    src = LocalWeightedSource(_pairs({0: keys}), SeededRandom(9))
    seen: Counter[tuple[str, ...]] = Counter()
    for _ in range(1200):
        seen[tuple(src.weighted_sums(2, 100).keys.tolist())] += 1
    subsets = list(itertools.combinations(keys, 2))
    obs = np.array([seen[s] for s in subsets])
    assert obs.sum() == 1200
    assert stats.chisquare(obs).pvalue > ALPHA
    # power: the same test rejects a selection that favours the first key a little
    biased = obs.astype(float).copy()
    biased[:3] += 60  # pairs containing "a" over-represented by ~30%
    biased[3:] -= 60
    assert stats.chisquare(biased).pvalue < ALPHA


def test_exclude_removes_keys_before_users_choose() -> None:
    rows = {1: ["a", "b"], 2: ["b"], 3: ["c"]}
    w = weighted_sums(_pairs(rows), 1, 16, SeededRandom(1), exclude=np.array(["b"]))
    assert w.keys.tolist() == ["a", "c"] and w.weights.tolist() == [16, 16]
    # an empty exclusion changes nothing: the same choice as no exclusion, seed for seed
    for seed in range(4):
        none = weighted_sums(_pairs(rows), 1, 16, SeededRandom(seed))
        empty = weighted_sums(_pairs(rows), 1, 16, SeededRandom(seed), exclude=[])
        assert empty.keys.tolist() == none.keys.tolist()
        assert empty.weights.tolist() == none.weights.tolist()


def test_unit_counts_counts_users_on_the_given_keys_only() -> None:
    rows = {1: ["a", "b", "c"], 2: ["a"], 3: ["z"]}
    c = unit_counts(_pairs(rows), np.array(["a", "b", "q"]), 2, SeededRandom(0))
    assert c.keys.tolist() == ["a", "b", "q"] and c.counts.tolist() == [2, 1, 0]
    assert c.neighbouring.max_partitions_contributed == 2
    one = unit_counts(_pairs(rows), np.array(["a", "b", "c"]), 1, SeededRandom(0))
    assert int(one.counts.sum()) == 2  # user 1 is counted on one of its three keys


def test_keys_of_another_type_are_read_as_the_pairs_keys() -> None:
    """Excluded keys and the keys of a unit count are cast to the pairs' key type before they
    are compared (Polars refuses to look floats up among integers, or integers among texts):
    float 2.0 excludes the integer key 2, integer 2 the text key "2", and floats count integer
    keys."""
    ints = pl.DataFrame({"user": [1, 1, 2, 3], "key": [1, 2, 1, 3]})
    w = weighted_sums(ints, 1, 16, SeededRandom(1), exclude=np.array([2.0]))
    assert w.keys.tolist() == [1, 3] and w.weights.tolist() == [32, 16]
    texts = ints.with_columns(pl.col("key").cast(pl.String))
    w = weighted_sums(texts, 1, 16, SeededRandom(1), exclude=np.array([2]))
    assert w.keys.tolist() == ["1", "3"] and w.weights.tolist() == [32, 16]
    c = unit_counts(ints, np.array([1.0, 2.0, 5.0]), 2, SeededRandom(0))
    assert c.counts.tolist() == [2, 1, 0]


def test_unit_counts_of_integer_keys_among_texts_land_on_their_keys() -> None:
    """Integer keys asked of text pairs are counted at their own positions, though "10" sorts
    before "9" as text; a float that is no integer counts nobody (Polars casts 1.5 to 1)."""
    texts = pl.DataFrame({"user": [1, 1, 2, 3, 4, 5], "key": ["1", "2", "1", "10", "9", "10"]})
    c = unit_counts(texts, np.array([10, 1, 9, 2, 5]), 2, SeededRandom(0))
    assert c.keys.tolist() == [1, 2, 5, 9, 10]
    assert c.counts.tolist() == [2, 1, 0, 1, 2]
    ints = pl.DataFrame({"user": [1, 1, 2, 3], "key": [1, 2, 1, 3]})
    c = unit_counts(ints, np.array([1.0, 1.5, 2.0]), 2, SeededRandom(0))
    assert c.counts.tolist() == [2, 0, 1]


def test_unit_counts_refuse_keys_that_are_not_a_list() -> None:
    """The keys of a unit count are one-dimensional: a table of keys is refused, not
    flattened."""
    pairs = pl.DataFrame({"user": [1, 1, 2], "key": [1, 2, 1]})
    with pytest.raises(ValidationError, match="one-dimensional"):
        unit_counts(pairs, np.array([[1, 2], [3, 4]]), 2, SeededRandom(0))


def test_local_source_reads_files_and_implements_the_protocol(
    tmp_path: pytest.TempPathFactory,
) -> None:
    path = tmp_path / "baskets.dat"  # type: ignore[operator]
    path.write_text("1 2 3 \n2 3\n3\n")
    src = LocalWeightedSource.from_source(path, format="fimi", rng=SeededRandom(1))
    assert isinstance(src, WeightedSource)
    w = src.weighted_sums(3, 100)
    assert isinstance(w, WeightedCounts)
    assert w.keys.tolist() == [1, 2, 3] and w.weights.tolist() == [57, 57 + 70, 57 + 70 + 100]
    assert src.degree_histogram([1, 2, 3]).tolist() == [1, 1, 1, 0]
    with pytest.raises(ValidationError, match="parameter 'bounds'"):
        src.degree_histogram([2, 1])


def test_bad_inputs_fail_closed() -> None:
    pairs = _pairs({1: ["a"]})
    with pytest.raises(ValidationError, match="parameter 'max_keys'"):
        weighted_sums(pairs, 0, 10, SeededRandom(1))
    with pytest.raises(ValidationError, match="parameter 'scale'"):
        weighted_sums(pairs, 1, 2**30, SeededRandom(1))
    with pytest.raises(ValidationError, match="parameter 'pairs'"):
        weighted_sums(pl.DataFrame({"x": [1]}), 1, 10, SeededRandom(1))
    with pytest.raises(ValidationError, match="parameter 'pairs'"):
        LocalWeightedSource(pl.DataFrame({"user": [1]}))
    with pytest.raises(ValidationError, match="parameter 'weights'"):
        WeightedCounts.from_arrays(["a"], [-1], scale=2, max_keys=1)


@pytest.mark.parametrize("dtype", [pl.Int64, pl.Int32, pl.UInt16])
def test_integer_pairs_by_codes_equal_the_polars_route(
    dtype: pl.DataType, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Integer ids are deduplicated by one sort of a code per record: the pairs, the weighted
    sums, the records histogram and the null facts equal those of the two-column Polars route
    (forced by making the codes unavailable), from a table and from a file."""
    import privhist.engines.local.weighting as weighting

    g = np.random.default_rng(4)
    n = 4000
    users: list[object] = g.integers(0, 300, n).tolist()
    keys: list[object] = (g.zipf(1.4, n) % 500).tolist()
    users[3], keys[8], users[9], keys[9] = None, None, None, None
    users[10] = users[11] = 7
    keys[10] = keys[11] = None  # two null-key records of one user: one null pair
    frame = pl.DataFrame({"user": users, "key": keys}, schema={"user": dtype, "key": dtype})
    path = tmp_path / "pairs.parquet"  # type: ignore[operator]
    frame.write_parquet(path)
    null_groups = {(u, k) for u, k in zip(users, keys, strict=True) if u is None or k is None}

    def facts(src: LocalWeightedSource) -> tuple[object, ...]:
        w = src.weighted_sums(5, 1000)
        return (
            src.pairs.rows(),
            w.keys.tolist(),
            w.weights.tolist(),
            w.units.tolist(),
            sorted(src.max_records.tolist()),
            src.records_histogram([1, 2, 3]).tolist(),
        )

    def sources() -> list[LocalWeightedSource]:
        return [
            LocalWeightedSource(frame, SeededRandom(2)),
            LocalWeightedSource.from_source(frame, user="user", rng=SeededRandom(2)),
            LocalWeightedSource.from_source(path, user="user", key_type="int", rng=SeededRandom(2)),
        ]

    by_codes = sources()
    with monkeypatch.context() as patch:
        patch.setattr(weighting, "_sorted_pairs", lambda u, k: None)
        by_polars = sources()
        polars_facts = [facts(s) for s in by_polars]
    code_facts = [facts(s) for s in by_codes]
    assert code_facts == polars_facts
    assert code_facts[0] == code_facts[1]
    assert by_codes[0].pairs.schema == by_polars[0].pairs.schema == frame.schema
    nulls = {
        "null_keys": sum(k is None for k in keys),
        "null_users": sum(u is None for u in users),
    }
    for src in (*by_codes[1:], *by_polars[1:]):
        assert src.null_pairs == len(null_groups)
        assert src.null_records == nulls  # records, as the record-level count states them
        assert {k: src.weighted_sums(5, 1000).info[k] for k in nulls} == nulls
        assert {k: src.held_sums(5, 1000).info[k] for k in nulls} == nulls


def test_a_user_level_release_states_the_records_it_left_out() -> None:
    """Records with a null key or user are stated in the release's input facts, whichever
    user-level mechanism releases (the votes and the weighted selectors read them alike)."""
    from privhist import Session

    frame = pl.DataFrame(
        {"user": [*range(300), None, None, 5], "page": ["a"] * 300 + ["a", None, None]},
        schema={"user": pl.Int64, "page": pl.String},
    )
    for kwargs in ({}, {"mechanism": "wgm", "max_partitions": 2}, {"keys_only": True}):
        r = Session().histogram(
            frame, key="page", user="user", epsilon=1, delta=1e-6, seed=3, **kwargs
        )
        assert r.diagnostics["null_keys"] == 2 and r.diagnostics["null_users"] == 2, kwargs
