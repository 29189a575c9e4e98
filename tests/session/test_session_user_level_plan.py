"""Vote selection and the user-level plan through the one release path: the Session and the
command line release them from the engine's answers (users' keys, users' votes), charge one
spend, explain the choice in a dry run, and leave vote selection out (or refuse it before
reading) when the engine cannot cast votes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privhist import Budget, Session, ValidationError
from privhist.cli.main import main
from privhist.core.requests import Request, UserVotes
from privhist.engines.local import LocalEngine
from privhist.session import DryRun


def _sparse(seed: int, users: int) -> pd.DataFrame:
    """Users holding one to three of 30 keys, popular keys first (votes to spare)."""
    g = np.random.default_rng(seed)
    rows = []
    for u in range(users):
        for k in set((g.zipf(1.6, int(g.integers(1, 4))) % 30).tolist()):
            rows.append((u, f"p{k}"))
    return pd.DataFrame(rows, columns=["user", "page"])


def _dense(seed: int, users: int) -> pd.DataFrame:
    """Users holding 40 keys each among 300 (votes spread thin: none to spare)."""
    g = np.random.default_rng(seed)
    rows = [(u, f"i{k}") for u in range(users) for k in g.choice(300, 40, replace=False)]
    return pd.DataFrame(rows, columns=["user", "page"])


class NoVotes(LocalEngine):
    """A local engine that cannot cast votes (as an engine whose ``supports`` says so)."""

    def supports(self, request: Request) -> bool:
        return not isinstance(request, UserVotes) and super().supports(request)


def test_vote_selection_through_the_session_and_the_cli(tmp_path: Path) -> None:
    frame = _sparse(1, 4000)
    csv = tmp_path / "visits.csv"
    frame.to_csv(csv, index=False)
    kwargs: dict[str, Any] = dict(
        key="page", user="user", mechanism="vote-selection", epsilon=1.0, delta=1e-6
    )
    r = Session().histogram(frame.astype({"user": str}), seed=5, **kwargs)
    assert not isinstance(r, DryRun) and len(r) > 0 and r.values is not None
    assert int(r.values.min()) >= 1 and "counts" in r.metadata  # clipped, and says what
    out = tmp_path / "r.json"
    argv = ["histogram", str(csv), "--key", "page", "--user", "user"]
    argv += ["--mechanism", "vote-selection", "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--seed", "5", "-o", str(out), "--no-progress"]
    assert main(argv) == 0
    assert json.loads(out.read_text())["rows"] == r.to_polars().to_dicts()
    keys = Session().histogram(frame, seed=5, keys_only=True, **kwargs)
    assert not isinstance(keys, DryRun) and keys.values is None and len(keys) >= len(r)
    with Session.in_memory(Budget(2.0, 1e-5), unit="user") as s:
        plan = s.histogram(frame, dry_run=True, **kwargs)
        assert isinstance(plan, DryRun) and plan.details["vote_cap"] > 0
        s.histogram(frame, **kwargs)
        st = s.status()
        assert st is not None and len(st.spends) == 1
        assert st.spends[0].mechanism == "vote-selection"
    with pytest.raises(ValidationError, match="'max_partitions'"):
        Session().histogram(frame, max_partitions=5, **kwargs)
    with pytest.raises(ValidationError, match="'user'"):
        Session().histogram(frame, key="page", mechanism="vote-selection", epsilon=1, delta=1e-6)


def test_the_user_level_default_decides_inside_one_spend() -> None:
    """Sparse users (every key they hold soon at the vote cap): vote selection; dense users:
    cumulative-sips at the DP cap; both charged once at the request, the choice explained."""
    chosen = {}
    for name, frame in (("sparse", _sparse(2, 6000)), ("dense", _dense(3, 3000))):
        with Session.in_memory(Budget(1.0, 1e-6), unit="user") as s:
            plan = s.histogram(frame, key="page", user="user", epsilon=1, delta=1e-6, dry_run=True)
            assert isinstance(plan, DryRun) and plan.details["mechanism"] == "user-level-default"
            assert "vote-selection" in plan.details["choice"]
            assert plan.details["explanation"]["spend"]["non_voters"]["epsilon"] > 0
            assert ("choice", plan.details["choice"]) in plan.rows()
            r = s.histogram(frame, key="page", user="user", epsilon=1, delta=1e-6)
            assert not isinstance(r, DryRun) and len(r) > 0 and r.values is not None
            assert r.metadata["neighbouring"]["relation"] == "user"
            st = s.status()
            assert st is not None and len(st.spends) == 1
            assert st.spends[0].mechanism == "user-level-default"
            assert st.remaining.epsilon < 1e-9
        # the choice is a DP decision: a seeded (uncharged) release makes it reproducible
        seeded = Session().histogram(frame, key="page", user="user", epsilon=1, delta=1e-6, seed=1)
        assert not isinstance(seeded, DryRun)
        chosen[name] = seeded.metadata["choice"]["mechanism"]
    assert chosen == {"sparse": "vote-selection", "dense": "cumulative-sips"}


def test_only_a_dry_run_ranks_the_mechanisms_for_the_explanation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default plan's ranking is for the dry run to show: a release does not compute it."""
    import privhist.planning.user_level as ul

    calls: list[int] = []
    real = ul.rank_user_level

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["degree"])
        return real(*args, **kwargs)

    monkeypatch.setattr(ul, "rank_user_level", counted)
    frame = _sparse(5, 2000)
    kwargs: dict[str, Any] = dict(key="page", user="user", epsilon=1, delta=1e-6)
    r = Session().histogram(frame, seed=2, **kwargs)
    assert not isinstance(r, DryRun) and len(r) > 0 and calls == []
    plan = Session().histogram(frame, dry_run=True, **kwargs)
    assert isinstance(plan, DryRun) and calls == list(ul.EXPLAIN_DEGREES)
    degrees = [row["degree"] for row in plan.details["explanation"]["ranking"]]
    assert degrees == list(ul.EXPLAIN_DEGREES)
    json.dumps(plan.details)
    # the printed dry run shows the spend and each ranking, in order
    rows = dict(plan.rows())
    assert "non voters epsilon" in rows["spend"] and rows["spend"].count("epsilon") == 3
    for level in plan.details["explanation"]["ranking"]:
        printed = rows[f"users for Pr 1/2 at {level['degree']} keys/user"].split(", ")
        assert [p.rsplit(" ", 1)[0] for p in printed] == [m["mechanism"] for m in level["ranking"]]


def test_one_local_release_reads_the_users_keys_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default plan asks for the users' keys, then casts votes on the same distinct pairs:
    inside one release (``Engine.reading``) the local engine reads them once, and keeps nothing
    after. Power: with ``reading`` keeping nothing, the same release reads them twice, to the
    same seeded table."""
    import contextlib

    from privhist.engines.local.weighting import LocalWeightedSource

    reads: list[int] = []
    real = LocalWeightedSource.from_source.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(LocalWeightedSource, "from_source", classmethod(counted))
    frame = _sparse(6, 3000)
    kwargs: dict[str, Any] = dict(key="page", user="user", epsilon=1, delta=1e-6, seed=4)
    engine = LocalEngine()
    first = Session(engine=engine).histogram(frame, **kwargs)
    assert not isinstance(first, DryRun) and first.metadata["choice"]["mechanism"]
    assert reads == [1] and engine._kept == {}
    second = Session(engine=engine).histogram(frame, **kwargs)
    assert reads == [1, 1] and not isinstance(second, DryRun)
    assert first.to_polars().equals(second.to_polars())

    forgetful = LocalEngine()
    forgetful.reading = lambda source: contextlib.nullcontext()  # type: ignore[method-assign]
    reads.clear()
    third = Session(engine=forgetful).histogram(frame, **kwargs)
    assert reads == [1, 1] and not isinstance(third, DryRun)
    assert third.to_polars().equals(first.to_polars())


def test_a_cap_ranks_the_selectors_too() -> None:
    """With a cap and no mechanism named, the key selectors are ranked (the per-key
    mechanisms only beside them), and the dry run says which and why."""
    frame = _dense(4, 800)
    kwargs: dict[str, Any] = dict(key="page", user="user", epsilon=1, delta=1e-6)
    plan = Session().histogram(frame, max_partitions=50, keys_only=True, dry_run=True, **kwargs)
    assert isinstance(plan, DryRun) and "fewest users" in plan.details["choice"]
    ranked = [r["mechanism_name"] for r in plan.details["explanation"]["ranking"]]
    assert "optimal-selection" in ranked and "cumulative-sips" in ranked
    rows = dict(plan.rows())
    assert rows["spend"].endswith("a single release")  # no DP statistics are bought
    printed = rows["users for Pr 1/2 at 50 keys/user"].split(", ")
    assert [p.rsplit(" ", 1)[0] for p in printed] == ranked
    r = Session().histogram(frame, max_partitions=50, keys_only=True, seed=1, **kwargs)
    assert not isinstance(r, DryRun)
    assert r.metadata["choice"]["mechanism"] in ("vote-selection", "cumulative-sips", "dp-sips")
    assert r.metadata["mechanism"] == r.metadata["choice"]["mechanism"]


def test_an_engine_without_votes(tmp_path: Path) -> None:
    """The plan leaves vote selection out; naming it is refused before any data is read."""
    frame = _sparse(5, 3000)
    kwargs: dict[str, Any] = dict(key="page", user="user", epsilon=1, delta=1e-6)
    plan = Session(engine=NoVotes()).histogram(frame, dry_run=True, **kwargs)
    assert (
        isinstance(plan, DryRun)
        and "vote-selection" not in plan.details["explanation"]["candidates"]
    )
    assert "cannot cast" in plan.details["choice"]
    r = Session(engine=NoVotes()).histogram(frame, seed=2, **kwargs)
    assert not isinstance(r, DryRun) and r.metadata["choice"]["mechanism"] == "cumulative-sips"
    with pytest.raises(ValidationError) as info:
        Session(engine=NoVotes()).histogram(
            tmp_path / "never-read.csv", mechanism="vote-selection", **kwargs
        )
    assert info.value.parameter == "engine" and "votes" in str(info.value)
