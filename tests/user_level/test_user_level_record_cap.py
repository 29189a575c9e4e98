"""The DP cap on records per user and key (``max_per_partition="auto"``).

* the histogram of users by their most records on one key has sensitivity 1 (adding a user
  adds one to exactly one bucket), checked against a direct count on random neighbours;
* its noise follows the discrete Laplace law (chi-square at alpha = 1e-6, with a power check);
* through the Session and the CLI: one spend of the whole (epsilon, delta), 5% of epsilon per
  chosen cap, the mechanism at the rest, the caps and the composition in the metadata.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import SeededRandom, ValidationError
from privhist.core.budget import Budget
from privhist.engines.local.weighting import LocalWeightedSource
from privhist.mechanisms.user_level.caps import (
    RECORD_CAP_CANDIDATES,
    cap_from_histogram,
    dp_record_cap,
)
from privhist.session import DryRun, Session


def _records(seed: int, users: int, start: int = 0) -> pl.DataFrame:
    """Users holding 1-4 keys with 1-2 records each, one in twenty up to 12 (repeated rows)."""
    g = np.random.default_rng(seed)
    u: list[int] = []
    k: list[str] = []
    for user in range(start, start + users):
        heavy = g.random() < 0.05
        for key in g.choice(6, size=int(g.integers(1, 5)), replace=False):
            reps = int(g.integers(1, 13)) if heavy else int(g.integers(1, 3))
            u.extend([user] * reps)
            k.extend([f"k{key}"] * reps)
    return pl.DataFrame({"user": u, "key": k})


def _direct(frame: pl.DataFrame) -> list[int]:
    """The same histogram counted row by row in Python."""
    per_pair: dict[tuple[Any, Any], int] = {}
    for user, key in frame.iter_rows():
        per_pair[(user, key)] = per_pair.get((user, key), 0) + 1
    most: dict[Any, int] = {}
    for (user, _), n in per_pair.items():
        most[user] = max(most.get(user, 0), n)
    out = [0] * (len(RECORD_CAP_CANDIDATES) + 1)
    for m in most.values():
        i = next((j for j, b in enumerate(RECORD_CAP_CANDIDATES) if m <= b), len(out) - 1)
        out[i] += 1
    return out


@pytest.mark.parametrize("seed", range(5))
def test_records_histogram_counts_each_user_once(seed: int) -> None:
    base = _records(seed, 40)
    extra = _records(100 + seed, 1, start=10_000)
    h = LocalWeightedSource(base).records_histogram(RECORD_CAP_CANDIDATES)
    h2 = LocalWeightedSource(pl.concat([base, extra])).records_histogram(RECORD_CAP_CANDIDATES)
    assert h.tolist() == _direct(base)
    assert h2.tolist() == _direct(pl.concat([base, extra]))
    diff = h2 - h
    # adding one user adds one to exactly one bucket: sensitivity 1 in L1 and L2
    assert diff.min() == 0 and diff.sum() == 1


def test_records_histogram_from_a_file_keeps_multiplicities(tmp_path: Path) -> None:
    frame = _records(7, 60)
    path = tmp_path / "records.csv"
    frame.write_csv(path)
    src = LocalWeightedSource.from_source(path, key="key", user="user")
    assert src.records_histogram(RECORD_CAP_CANDIDATES).tolist() == _direct(frame)
    assert src.pairs.height == frame.unique().height
    with pytest.raises(ValidationError, match="bounds"):
        src.records_histogram([3, 2])


def test_record_cap_noise_is_discrete_laplace_with_power() -> None:
    h = np.array([500, 300, 0, 0, 0, 0, 0, 0, 0], dtype=np.int64)
    eps = 0.5
    draws = np.concatenate(
        [dp_record_cap(h, epsilon=eps, rng=SeededRandom(i)).noisy_histogram - h for i in range(400)]
    )

    def law(e: float) -> tuple[list[float], list[int]]:
        # discrete Laplace pmf prop. to exp(-e |z|), pooled tails beyond +-8
        zs = list(range(-8, 9))
        norm = (1 - np.exp(-e)) / (1 + np.exp(-e))
        pmf = [norm * float(np.exp(-e * abs(z))) for z in zs]
        tail = (1 - sum(pmf)) / 2
        return [tail, *pmf, tail], zs

    p, zs = law(eps)
    obs = np.array([(draws < -8).sum()] + [(draws == z).sum() for z in zs] + [(draws > 8).sum()])
    assert stats.chisquare(obs, np.array(p) * obs.sum()).pvalue > ALPHA
    p_wide, _ = law(0.4)  # power: noise for epsilon 0.4 instead of 0.5 is rejected
    assert stats.chisquare(obs, np.array(p_wide) * obs.sum()).pvalue < ALPHA


def test_record_cap_reads_the_quantile() -> None:
    h = np.zeros(len(RECORD_CAP_CANDIDATES) + 1, dtype=np.int64)
    h[RECORD_CAP_CANDIDATES.index(3)] = 950
    h[RECORD_CAP_CANDIDATES.index(50)] = 50
    assert cap_from_histogram(h, 0.9, RECORD_CAP_CANDIDATES) == 3
    assert dp_record_cap(h, epsilon=1.0, rng=SeededRandom(3)).cap == 3
    with pytest.raises(ValidationError, match="histogram"):
        dp_record_cap(h[:-1], epsilon=1.0)
    with pytest.raises(ValidationError, match="epsilon"):
        dp_record_cap(h, epsilon=0.0)


def _frame() -> pl.DataFrame:
    """12,000 users; 95% hold at most 2 records per key, 5% up to 12. (With 3,000 the noisy
    quantile at 5% of epsilon fell outside (2, 3) in 1.9% of 4,000 draws, a flaky test; with
    12,000, in none.)"""
    return _records(11, 12_000)


@pytest.mark.parametrize(
    ("mechanism", "k_auto"), [("stability", False), ("gaussian-threshold", True)]
)
def test_max_per_partition_auto_one_spend(mechanism: str, k_auto: bool) -> None:
    frame = _frame()
    kwargs: dict[str, Any] = dict(
        key="key",
        user="user",
        mechanism=mechanism,
        max_per_partition="auto",
        max_partitions="auto" if k_auto else 2,
        epsilon=1.0,
        delta=1e-6,
    )
    with Session.in_memory(Budget(1.0, 1e-6), unit="user") as s:
        plan = s.histogram(frame, dry_run=True, **kwargs)
        assert isinstance(plan, DryRun) and plan.cost.epsilon == 1.0 and plan.allowed
        r = s.histogram(frame, **kwargs)
        assert not isinstance(r, DryRun) and r.metadata["mechanism"] == mechanism
        cap = r.metadata["cap"]
        parts = 2 if k_auto else 1
        assert cap["max_per_partition"] in RECORD_CAP_CANDIDATES
        # at most 2 records for 95% of the users: the 0.9 quantile is 2 or the next candidate
        assert cap["max_per_partition"] in (2, 3)
        assert ("max_partitions" in cap) == k_auto
        assert cap["epsilon"] == pytest.approx(0.05 * parts)
        mechanism_part = r.metadata["mechanism_guarantee"]["epsilon"]
        assert mechanism_part == pytest.approx(1.0 - 0.05 * parts)
        assert cap["total"] == {"epsilon": 1.0, "delta": 1e-6}
        assert (r.metadata["guarantee"]["epsilon"], r.metadata["guarantee"]["delta"]) == (1.0, 1e-6)
        st = s.status()
        assert st is not None and len(st.spends) == 1 and st.remaining.epsilon == 0
        # the guarantee of the release is stated for the cap chosen
        nb = r.metadata["guarantee"]["neighbouring"]
        assert f"{cap['max_per_partition']}" in json.dumps(nb)


def test_max_per_partition_auto_is_refused_where_it_has_no_meaning() -> None:
    frame = _frame()
    with pytest.raises(ValidationError, match="max_per_partition"):
        Session().histogram(
            frame,
            key="key",
            user="user",
            mechanism="dp-sips",
            max_per_partition="auto",
            epsilon=1.0,
            delta=1e-6,
        )
    with pytest.raises(ValidationError, match="max_per_partition"):
        Session().histogram(
            frame.to_pandas(), key="key", max_per_partition="auto", epsilon=1.0, delta=1e-6
        )


def test_cli_max_per_partition_auto(tmp_path: Path, capsys: Any) -> None:
    from privhist.cli.main import main

    path = tmp_path / "records.csv"
    _frame().write_csv(path)
    out = tmp_path / "release.json"
    code = main(
        [
            "histogram", str(path), "--key", "key", "--user", "user",
            "--mechanism", "stability", "--max-partitions", "2", "--max-per-partition", "auto",
            "--epsilon", "1", "--delta", "1e-6", "--seed", "3", "--output", str(out),
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    meta = json.loads(out.read_text())["metadata"]
    assert meta["cap"]["max_per_partition"] in (2, 3)
    assert Fraction(meta["mechanism_guarantee"]["epsilon"]).limit_denominator(100) == Fraction(
        19, 20
    )
    assert meta["guarantee"]["epsilon"] == meta["cap"]["total"]["epsilon"] == 1.0


@pytest.mark.parametrize("flag", ["--max-partitions", "--max-per-partition"])
def test_plan_names_the_auto_flag_it_cannot_plan_for(flag: str, capsys: Any) -> None:
    from privhist.cli.main import main

    code = main(["plan", "stability", "--epsilon", "1", "--delta", "1e-6", flag, "auto"])
    err = capsys.readouterr().err
    assert code == 2 and f"({flag})" in err and "'auto'" in err
