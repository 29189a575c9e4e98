"""Releases on Spark: 10^5-row data with users holding many keys counts and releases (same seed,
NOT private) exactly as on the local engine; the weighted selectors run on Spark unchanged; noise
drawn on the executors equals the local keyed draw and follows each per-key mechanism's analysed
law (goodness of fit at alpha = 1e-6, with a power check); a killed release publishes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import Session
from privhist.accounting.profile import NOT_RELEASED
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Relation
from privhist.core.random import SeededRandom
from privhist.core.requests import Fields, KeyCounts, Reading
from privhist.engines import LocalEngine
from privhist.engines.keyed_noise import (
    PER_KEY_MECHANISMS,
    draw_secret,
    key_blocks,
    release_keyed,
)
from privhist.engines.spark import SparkEngine
from privhist.engines.spark.noise import release_table
from privhist.mechanisms import registry
from privhist.mechanisms.base import Mechanism
from privhist.session import DryRun

ROWS = 100_000


def _visits(seed: int, text: bool) -> pl.DataFrame:
    """10^5 records: 2,000 users, most holding tens of distinct keys (Zipf over 3,000 keys)."""
    g = np.random.default_rng(seed)
    user = g.integers(0, 2000, ROWS)
    key = (g.zipf(1.2, ROWS) - 1) % 3000
    frame = pl.DataFrame({"user": user, "key": key})
    if text:
        frame = frame.select(
            pl.format("u{}", "user").alias("user"), pl.format("k{}", "key").alias("key")
        )
    return frame


@pytest.fixture(scope="module", autouse=True)
def _arrow_transfers(spark: Any) -> Any:
    """pandas tables reach the shared session through Arrow (row by row is slow)."""
    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "true")
    yield
    spark.conf.set(key, before)


@pytest.fixture(scope="module")
def visits(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[pl.DataFrame, Path]]:
    out = {}
    for text in (False, True):
        frame = _visits(3 if text else 4, text)
        path = tmp_path_factory.mktemp("visits") / f"visits-{int(text)}.parquet"
        frame.write_parquet(path)
        out[text] = (frame, path)
    return out


def _same_release(a: Any, b: Any) -> None:
    assert not isinstance(a, DryRun) and not isinstance(b, DryRun)
    assert a.to_polars().equals(b.to_polars())
    assert a.metadata == b.metadata


@pytest.mark.parametrize("text", [False, True])
def test_bounded_counts_and_seeded_releases_equal_the_local_engine(
    spark: Any, visits: dict[bool, tuple[pl.DataFrame, Path]], text: bool
) -> None:
    _frame, path = visits[text]
    request = KeyCounts(
        Fields(key="key", user="user", reading=Reading(key_type="str")),
        max_partitions=4,
        max_per_partition=2,
    )
    local = LocalEngine().count(path, request, SeededRandom(1))
    remote = SparkEngine(spark, driver_rows=0).count(path, request, SeededRandom(1))
    assert local.info["users_bounded"] > 1500  # most users hold more than k keys
    assert remote.keys.tolist() == local.keys.tolist()
    assert remote.counts.tolist() == local.counts.tolist()
    assert remote.units is not None and local.units is not None
    assert remote.units.tolist() == local.units.tolist()
    assert remote.info == {k: local.info[k] for k in remote.info}

    kwargs: dict[str, Any] = dict(
        key="key", user="user", max_partitions=4, max_per_partition=2, epsilon=1.0,
        delta=1e-6, seed=17, key_type="str",
    )  # fmt: skip
    keyed_local = Session(noise_on="executors").histogram(path, **kwargs)
    # the keyed draw on the driver (a table of at most driver_keys keys) and on the executors
    by_default = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(path, **kwargs)
    assert (
        not isinstance(by_default, DryRun) and by_default.diagnostics["noise"] == "driver (keyed)"
    )
    _same_release(by_default, keyed_local)
    assert len(by_default) > 5
    n = by_default.diagnostics["distinct_keys_counted"]
    assert n > 100
    for driver_keys, where in ((n, "driver (keyed)"), (n - 1, "executors"), (0, "executors")):
        engine = SparkEngine(spark, driver_keys=driver_keys, driver_rows=0)
        release = Session(engine=engine).histogram(path, **kwargs)
        assert not isinstance(release, DryRun) and release.diagnostics["noise"] == where
        _same_release(release, keyed_local)
        assert release.diagnostics == by_default.diagnostics | {"noise": where}
    on_driver = Session(engine=SparkEngine(spark, driver_rows=0), noise_on="driver").histogram(
        path, **kwargs
    )
    _same_release(on_driver, Session().histogram(path, **kwargs))


@pytest.mark.parametrize("mechanism", ["wgm", "dp-sips", "cumulative-sips"])
def test_weighted_selectors_on_spark_equal_the_local_engine(
    spark: Any, visits: dict[bool, tuple[pl.DataFrame, Path]], mechanism: str
) -> None:
    """DP-SIPS removes each round's released keys from every user before the next round; the
    Spark weighted source does it with an anti-join and gives the local release, round by
    round, for the same seed."""
    _frame, path = visits[True]
    kwargs: dict[str, Any] = dict(
        key="key", user="user", epsilon=1.0, delta=1e-6, seed=5, mechanism=mechanism
    )
    remote = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(path, **kwargs)
    local = Session().histogram(path, **kwargs)
    _same_release(remote, local)
    assert len(local) > 10


def test_weighted_source_answers_as_the_local_one(spark: Any) -> None:
    """Each of the three questions, with exclusions and bounded users, int and text keys."""
    from privhist.engines.local.weighting import LocalWeightedSource
    from privhist.engines.spark.weighting import SparkWeightedSource

    g = np.random.default_rng(8)
    frame = pl.DataFrame({"user": g.integers(0, 300, 6000), "key": g.integers(0, 80, 6000)})
    for text in (False, True):
        if text:
            frame = frame.select(pl.col("user"), pl.format("k{}", "key").alias("key"))
        ex = ["k3", "k7"] if text else [3, 7]
        sdf = spark.createDataFrame(frame.to_pandas())
        remote = SparkWeightedSource(sdf, SeededRandom(2))
        local = LocalWeightedSource(frame, SeededRandom(2))
        try:
            for exclude in (None, ex):
                a = remote.weighted_sums(5, 1024, exclude)
                b = local.weighted_sums(5, 1024, exclude)
                assert a.keys.tolist() == b.keys.tolist()
                assert a.weights.tolist() == b.weights.tolist()
                assert a.units is not None and b.units is not None
                assert a.units.tolist() == b.units.tolist()
                assert a.info == b.info and a.info["users_bounded"] > 100
            wanted = np.array(ex + (["none"] if text else [999]), dtype=object if text else None)
            ua, ub = remote.unit_counts(wanted, 1), local.unit_counts(wanted, 1)
            assert ua.keys.tolist() == ub.keys.tolist() and ua.counts.tolist() == ub.counts.tolist()
            bounds = [1, 5, 20, 40]
            assert (
                remote.degree_histogram(bounds).tolist() == local.degree_histogram(bounds).tolist()
            )
        finally:
            remote.close()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_driver_keys_is_checked(bad: Any) -> None:
    with pytest.raises(ValidationError, match="driver_keys"):
        SparkEngine(None, driver_keys=bad)


def test_noise_does_not_depend_on_partitioning(spark: Any) -> None:
    g = np.random.default_rng(2)
    sdf = spark.createDataFrame(
        pl.DataFrame(
            {"key": g.zipf(1.4, 20000) % 400, "user": g.integers(0, 900, 20000)}
        ).to_pandas()
    )
    kwargs: dict[str, Any] = dict(
        key="key", user="user", max_partitions=3, epsilon=1.0, delta=1e-6, seed=9
    )
    engine = SparkEngine(spark, driver_keys=0, driver_rows=0)  # noise on the executors
    one = Session(engine=engine).histogram(sdf.repartition(1), **kwargs)
    seven = Session(engine=engine).histogram(sdf.repartition(7, "user"), **kwargs)
    _same_release(one, seven)
    assert len(one) > 5


# -- the mechanism contract through the Spark path -------------------------------------------

# the first contract instance of every per-key mechanism, plus a user-level Gaussian one (a
# joint, PLD-calibrated guarantee whose keys still draw independently): one Spark job each
SPARK_INSTANCES = [
    pytest.param(cls.test_instances()[0], id=name)
    for name, cls in sorted(registry.registry().items())
    if name in PER_KEY_MECHANISMS
] + [
    pytest.param(m, id=f"gaussian-threshold-{i}")
    for i, m in enumerate(registry.registry()["gaussian-threshold"].test_instances())
    if not m.per_key_composable
][:1]

#: keys per count level
KEYS_PER_LEVEL = 3000


def test_every_per_key_mechanism_is_covered() -> None:
    names = {p.values[0].name for p in SPARK_INSTANCES}
    assert names == set(PER_KEY_MECHANISMS)


def _levels(m: Mechanism) -> list[int]:
    rp = m.reporting_probability(200)
    hit = np.nonzero(rp >= 0.5)[0]
    centre = int(hit[0]) if hit.size else 3
    nonzero = np.nonzero(rp > 0)[0]
    first = int(nonzero[0]) if nonzero.size else 1
    return sorted({1, max(1, first), max(1, centre - 1), centre, centre + 2})


def _units(m: Mechanism, count: int) -> int:
    c = m.neighbouring.max_contributions_per_partition
    return -(-count // c)


def _table(m: Mechanism, levels: list[int]) -> tuple[Counts, dict[int, int]]:
    """KEYS_PER_LEVEL keys at each count level; key // KEYS_PER_LEVEL is the level's index."""
    keys = np.arange(len(levels) * KEYS_PER_LEVEL, dtype=np.int64)
    counts = np.repeat(np.array(levels, dtype=np.int64), KEYS_PER_LEVEL)
    user = m.neighbouring.relation is Relation.USER
    units = np.array([_units(m, int(n)) for n in counts]) if user else None
    return Counts.from_arrays(keys, counts, units, neighbouring=m.neighbouring), dict(
        enumerate(levels)
    )


def _spark_release(spark: Any, m: Mechanism, counts: Counts, seed: int) -> Any:
    cols = {"key": counts.keys, "count": counts.counts}
    if counts.units is not None:
        cols["units"] = counts.units
    table = spark.createDataFrame(pl.DataFrame(cols).to_pandas()).repartition(3)
    return release_table(table, counts.neighbouring, m, SeededRandom(seed), {})


def _min_pvalue(m: Mechanism, release: Any, levels: dict[int, int]) -> float:
    """The smallest p-value over the levels: reporting frequency (exact binomial test) and the
    released values (chi-square, bins pooled to expected counts >= 5) against ``m``'s law."""
    worst = 1.0
    level_of = release.keys // KEYS_PER_LEVEL
    for index, count in levels.items():
        dist = m.key_distribution(_units(m, count), count)
        p_release = 1 - float(dist.probabilities.get(NOT_RELEASED, 0))
        here = level_of == index
        n_out = int(here.sum())
        worst = min(
            worst, stats.binomtest(n_out, KEYS_PER_LEVEL, min(max(p_release, 0.0), 1.0)).pvalue
        )
        if release.values is None or n_out <= 50:
            continue
        values = release.values[here]
        support = sorted(k for k in dist.probabilities if k is not NOT_RELEASED)
        p = np.array([float(dist.probabilities[k]) for k in support])
        expected = p / p.sum() * n_out
        observed = np.array([(values == k).sum() for k in support], dtype=float)
        if observed.sum() != n_out:  # a value outside the analysed support
            return 0.0
        bins_o, bins_e, acc_o, acc_e = [], [], 0.0, 0.0
        for o, e in zip(observed, expected, strict=True):
            acc_o, acc_e = acc_o + o, acc_e + e
            if acc_e >= 5:
                bins_o.append(acc_o)
                bins_e.append(acc_e)
                acc_o = acc_e = 0.0
        if bins_e:
            bins_o[-1] += acc_o
            bins_e[-1] += acc_e
        if len(bins_e) > 1:
            e = np.array(bins_e) * (n_out / sum(bins_e))
            worst = min(worst, float(stats.chisquare(bins_o, e).pvalue))
    return worst


@pytest.mark.parametrize("mech", SPARK_INSTANCES)
def test_contract_through_spark(spark: Any, mech: Mechanism) -> None:
    """Noise drawn on the executors: the analysed per-key law (alpha = 1e-6), canonical order,
    no foreign key, the mechanism's metadata, and exactly the local keyed draw."""
    levels = _levels(mech)
    counts, index = _table(mech, levels)
    release = _spark_release(spark, mech, counts, seed=20261125)
    out = release.keys.tolist()
    assert out == sorted(out) and len(set(out)) == len(out)
    assert set(out) <= set(counts.keys.tolist())
    assert release.metadata["mechanism"] == mech.name
    assert release.metadata["guarantee"]["epsilon"] == mech.guarantee().epsilon
    assert release.metadata["randomness"]["private"] is False
    if release.values is not None:
        assert release.values.dtype == np.int64 and len(release.values) == len(out)
    assert _min_pvalue(mech, release, index) > ALPHA
    local = release_keyed(mech, counts, SeededRandom(20261125))
    assert local.to_polars().equals(release.to_polars())


POWER = [
    ("stability", lambda m: type(m)(m.epsilon * 1.4, m.delta, m.neighbouring)),
    ("pws", lambda m: type(m)(m.epsilon * 1.4, m.delta, m.neighbouring)),
]


@pytest.mark.parametrize(("name", "weaker"), POWER)
def test_the_spark_goodness_of_fit_has_power(spark: Any, name: str, weaker: Any) -> None:
    """The same test rejects (p < 1e-6) Spark releases of a mechanism whose epsilon is 1.4x the
    one whose law is tested."""
    mech = registry.registry()[name].test_instances()[0]
    other = weaker(mech)
    counts, index = _table(mech, _levels(mech))
    release = _spark_release(spark, other, counts, seed=3)
    assert _min_pvalue(mech, release, index) < ALPHA
    assert _min_pvalue(other, release, index) > ALPHA


def test_blocks_are_spread_and_keys_keep_their_block() -> None:
    """Text and integer keys fall in every block (the Spark expression computes the same
    blocks, checked through the equalities above)."""
    ints = key_blocks(np.arange(6400))
    texts = key_blocks(np.array([f"k{i}" for i in range(6400)], dtype=object))
    for blocks in (ints, texts):
        assert np.bincount(blocks, minlength=64).min() > 50
    assert stats.chisquare(np.bincount(texts, minlength=64)).pvalue > ALPHA
    assert len(draw_secret(SeededRandom(1))) == 32


def test_driver_mechanisms_refuse_keyed_release() -> None:
    from privhist.core.errors import ValidationError
    from privhist.mechanisms import DenseHistogram

    counts = Counts.from_arrays(["a"], [3])
    with pytest.raises(ValidationError, match="per-key mechanism"):
        release_keyed(DenseHistogram(1.0, domain=["a"]), counts, SeededRandom(0))


def test_spark_session_runs_driver_mechanisms_after_a_distributed_count(spark: Any) -> None:
    """``pure-sparse`` is not per-key: it draws on the driver, the local release for the seed."""
    g = np.random.default_rng(5)
    frame = pl.DataFrame({"key": g.zipf(1.5, 4000) % 50})  # its universe: integers
    kwargs: dict[str, Any] = dict(key="key", epsilon=1.0, seed=4, mechanism="pure-sparse")
    remote = Session(engine=SparkEngine(spark, driver_rows=0)).histogram(
        spark.createDataFrame(frame.to_pandas()), **kwargs
    )
    _same_release(remote, Session().histogram(frame, **kwargs))
    assert not isinstance(remote, DryRun) and remote.diagnostics["noise"] == "driver"
