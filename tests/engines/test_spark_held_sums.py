"""``SparkWeightedSource.held_sums``: per-key sums over subsets each user holds once per source
and ``max_keys`` (:meth:`privhist.core.weighted.WeightedSource.held_sums`).

* With nobody over the cap it equals the local engine's answer (keys, weights, units, info),
  with and without ``exclude``, for integer and text keys.
* With users over the cap, each of them holds exactly ``max_keys`` keys (keys unique to a user
  make its subset readable from the per-key ``units``); the subset is the same on every call;
  excluded keys are not replaced, and the remaining keys weigh ``isqrt(scale**2 // t)`` with
  ``t`` recounted after the exclusion (a pure-Python reference); one secret is drawn per
  ``max_keys``, at its first call; a seeded run equals the local engine's.
* Bad ``max_keys`` and ``scale`` are refused as ``weighted_sums`` refuses them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest

from privhist.core.errors import ValidationError
from privhist.core.random import SeededRandom
from privhist.core.weighted import WeightedCounts
from privhist.engines.local.weighting import LocalWeightedSource

SCALE = 1000


class CountingRandom(SeededRandom):
    """A seeded source counting the calls for words (one call per priority secret)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.calls = 0

    def uint64(self, n: int) -> Any:
        self.calls += 1
        return super().uint64(n)


def _table(w: WeightedCounts) -> dict[Any, tuple[int, int]]:
    assert w.units is not None
    return {
        k: (int(a), int(b))
        for k, a, b in zip(w.keys.tolist(), w.weights.tolist(), w.units.tolist(), strict=True)
    }


def _reference(
    held: dict[int, set[Any]], exclude: set[Any], scale: int
) -> dict[Any, tuple[int, int]]:
    """Per key (sum of isqrt(scale**2 // t), users) over the held subsets minus ``exclude``."""
    out: dict[Any, list[int]] = {}
    for keys in held.values():
        left = keys - exclude
        for key in left:
            entry = out.setdefault(key, [0, 0])
            entry[0] += math.isqrt(scale * scale // len(left))
            entry[1] += 1
    return {k: (w, u) for k, (w, u) in out.items()}


def _source(spark: Any, frame: pl.DataFrame, rng: Any) -> Any:
    from privhist.engines.spark.weighting import SparkWeightedSource

    return SparkWeightedSource(spark.createDataFrame(frame.to_pandas()), rng)


def test_held_sums_without_bounding_equal_the_local_ones(spark: Any) -> None:
    users = [1, 1, 1, 2, 2, 3, 4, 4, 4, 5, 1, 2]  # the last two rows repeat pairs
    keys = [1, 2, 3, 1, 4, 2, 2, 3, 5, 6, 1, 4]
    for text in (False, True):
        frame = pl.DataFrame({"user": users, "key": keys})
        exclude: list[Any] = [2, 6]
        if text:
            frame = frame.select("user", pl.format("k{}", "key").alias("key"))
            exclude = ["k2", "k6"]
        rng = CountingRandom(3)
        remote = _source(spark, frame, rng)
        local = LocalWeightedSource(frame, SeededRandom(3))
        try:
            answers: dict[bool, dict[Any, tuple[int, int]]] = {}
            for ex in (None, exclude):
                a = remote.held_sums(3, SCALE, ex)
                b = local.held_sums(3, SCALE, ex)
                assert a.keys.tolist() == b.keys.tolist()
                assert a.weights.tolist() == b.weights.tolist()
                assert a.units is not None and b.units is not None
                assert a.units.tolist() == b.units.tolist()
                assert a.info == b.info
                assert a.info["users_bounded"] == 0 and a.info["users"] == 5
                assert (a.scale, a.max_keys) == (SCALE, 3)
                answers[ex is None] = _table(a)
            # users 3 and 5 held only excluded keys: nothing of them is left; t falls to 2
            after = answers[False]
            key = (lambda k: f"k{k}") if text else (lambda k: k)
            assert after[key(1)] == (math.isqrt(SCALE * SCALE // 2) * 2, 2)
            assert after[key(5)] == (math.isqrt(SCALE * SCALE // 2), 1)
            assert after[key(4)] == (math.isqrt(SCALE * SCALE // 2), 1)
            assert after[key(3)] == (math.isqrt(SCALE * SCALE // 2) * 2, 2)
            assert set(after) == {key(1), key(3), key(4), key(5)}
            assert rng.calls == 0  # nobody bounded: no secret drawn
            # every key excluded: an empty answer
            everything = remote.held_sums(3, SCALE, sorted({key(k) for k in keys}))
            assert len(everything) == 0 and everything.info["pairs_kept"] == 0
        finally:
            remote.close()


def _bounded_frame() -> tuple[pl.DataFrame, dict[int, set[int]]]:
    """Users 1 and 2 hold more than 3 keys, each key only its own; users 3 and 4 share 1, 2."""
    own = {1: set(range(10, 16)), 2: set(range(20, 25)), 3: {1, 2}, 4: {1, 2, 3}}
    rows = [(u, k) for u, ks in own.items() for k in sorted(ks)]
    rows += [(1, 10), (2, 24)]  # repeated records
    return pl.DataFrame({"user": [u for u, _ in rows], "key": [k for _, k in rows]}), own


def test_held_subsets_are_drawn_once_and_never_refilled(spark: Any) -> None:
    frame, own = _bounded_frame()
    rng = CountingRandom(11)
    src = _source(spark, frame, rng)
    try:
        first = src.held_sums(3, SCALE)
        assert rng.calls == 1  # one secret, for the users over the cap
        table = _table(first)
        held = {u: {k for k in own[u] if k in table} for u in own}
        held[3], held[4] = own[3], own[4]
        # each bounded user holds exactly max_keys of its own (unique) keys, once each
        assert len(held[1]) == 3 and len(held[2]) == 3
        assert all(table[k][1] == 1 for k in held[1] | held[2])
        assert first.units is not None and int(first.units.sum()) == 3 + 3 + 2 + 3
        assert table == _reference(held, set(), SCALE)
        nulls = {"null_keys": 0, "null_users": 0}
        assert first.info == {
            "users": 4, "users_bounded": 2, "pairs_held": 11, "pairs_kept": 11, **nulls
        }  # fmt: skip

        # the same subsets on later calls: excluded keys are not replaced by the unheld ones
        ex = {min(held[1]), max(held[2]), 3}
        later = src.held_sums(3, SCALE, sorted(ex))
        got = _table(later)
        unheld = (own[1] - held[1]) | (own[2] - held[2])
        assert not unheld & set(got) and not ex & set(got)
        # two keys left for users 1, 2 and 4: t recounted to 2
        assert got == _reference(held, ex, SCALE)
        assert got[min(held[1] - ex)] == (math.isqrt(SCALE * SCALE // 2), 1)
        assert got[1] == (2 * math.isqrt(SCALE * SCALE // 2), 2)
        assert later.info == {
            "users": 4, "users_bounded": 2, "pairs_held": 11, "pairs_kept": 8, **nulls
        }  # fmt: skip
        # a finer scale and no exclusion: the first subsets again, no new secret
        again = src.held_sums(3, 7 * SCALE)
        assert _table(again) == _reference(held, set(), 7 * SCALE)
        assert rng.calls == 1

        # another max_keys draws its own subsets (one more secret), leaving the first ones
        four = _table(src.held_sums(4, SCALE))
        assert rng.calls == 2
        assert sum(1 for k in own[1] if k in four) == 4 and sum(1 for k in own[2] if k in four) == 4
        assert all(k in four for k in own[3] | own[4])
        assert _table(src.held_sums(3, SCALE, sorted(ex))) == got
        assert rng.calls == 2
    finally:
        src.close()


def test_seeded_held_sums_with_bounding_equal_the_local_ones(spark: Any) -> None:
    g = np.random.default_rng(5)
    frame = pl.DataFrame({"user": g.integers(0, 8, 60), "key": g.integers(0, 12, 60)})
    remote = _source(spark, frame, SeededRandom(4))
    local = LocalWeightedSource(frame, SeededRandom(4))
    try:
        for k, ex in ((2, None), (2, [0, 1, 2]), (3, [5]), (2, [7])):
            a, b = remote.held_sums(k, SCALE, ex), local.held_sums(k, SCALE, ex)
            assert _table(a) == _table(b) and a.info == b.info
            assert a.info["users_bounded"] > 0
    finally:
        remote.close()


def test_bad_parameters_are_refused(spark: Any) -> None:
    frame, _ = _bounded_frame()
    rng = CountingRandom(1)
    src = _source(spark, frame, rng)
    bad = [
        (0, SCALE, "max_keys"),
        (-2, SCALE, "max_keys"),
        (1.5, SCALE, "max_keys"),
        (True, SCALE, "max_keys"),
        ("3", SCALE, "max_keys"),
        (None, SCALE, "max_keys"),
        (3, 0, "scale"),
        (3, 2**24 + 1, "scale"),
        (3, 2.5, "scale"),
    ]
    try:
        for max_keys, scale, parameter in bad:
            with pytest.raises(ValidationError) as err:
                src.held_sums(max_keys, scale)
            assert err.value.parameter == parameter and err.value.function == "held_sums"
            with pytest.raises(ValidationError) as twin:
                src.weighted_sums(max_keys, scale)
            assert twin.value.parameter == parameter
        assert rng.calls == 0  # nothing drawn, nothing held
        assert src.held_sums(3, 2**24).scale == 2**24  # the largest scale is accepted
        assert src.held_sums(3.0, SCALE).max_keys == 3  # an integral float is an integer
    finally:
        src.close()
