"""The release pipeline: one Session over files and tables, charged atomically, nothing lost."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from privhist import Budget, BudgetExceededError, Session, ValidationError
from privhist.accounting.ledger import Ledger
from privhist.cli.main import main
from privhist.core.requests import Fields, KeyCounts
from privhist.engines import Engine, LocalEngine
from privhist.session import DryRun

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")


def _words(n_a: int = 60, n_b: int = 25, n_c: int = 2) -> list[str]:
    return ["a"] * n_a + ["b"] * n_b + ["c"] * n_c + ["=SUM(A1)"] * 40


@pytest.fixture
def data_csv(tmp_path: Path) -> Path:
    p = tmp_path / "words.csv"
    p.write_text("word\n" + "\n".join(_words()) + "\n")
    return p


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path / "ledger.sqlite")
    led.init_dataset("d", Budget(2.0, 1e-6))
    return led


def _spends(led: Ledger) -> int:
    return len(led.show("d").spends)


def _sources(path: Path) -> dict[str, Any]:
    words = _words()
    return {
        "file": path,
        "polars": pl.DataFrame({"word": words}),
        "lazy": pl.DataFrame({"word": words}).lazy(),
        "pandas": pd.DataFrame({"word": words}),
        "arrow": pa.table({"word": words}),
    }


@pytest.mark.parametrize("kind", ["file", "polars", "lazy", "pandas", "arrow"])
def test_every_source_gives_the_cli_numbers(kind: str, data_csv: Path, tmp_path: Path) -> None:
    """Seeded (NOT private) runs: the same release from each source type and from the CLI."""
    out = tmp_path / "cli.json"
    code = main(
        [
            "histogram",
            str(data_csv),
            "--key",
            "word",
            "--epsilon",
            "1",
            "--delta",
            "1e-8",
            "--seed",
            "7",
            "-o",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    cli_rows = json.loads(out.read_text())["rows"]
    release = Session().histogram(
        _sources(data_csv)[kind], key="word", epsilon=1, delta=1e-8, seed=7
    )
    assert not isinstance(release, DryRun)
    assert release.to_polars().to_dicts() == cli_rows
    assert not release.private and "NOT private" in release.metadata["warning"]
    assert {"a", "b", "=SUM(A1)"} <= set(release.keys.tolist())  # 40+ records: released


def test_conversions_and_write(tmp_path: Path) -> None:
    r = Session().histogram(pl.DataFrame({"k": _words()}), key="k", epsilon=1, delta=1e-8, seed=1)
    assert not isinstance(r, DryRun)
    assert r.to_pandas()["key"].tolist() == r.keys.tolist()
    assert r.to_pandas().attrs["privhist"]["mechanism"] == "stability"
    table = r.to_arrow()
    assert table.column("count").to_pylist() == r.values.tolist()  # type: ignore[union-attr]
    assert json.loads(table.schema.metadata[b"privhist"])["mechanism"] == "stability"
    for fmt in ("csv", "json", "parquet"):
        path = r.write(tmp_path / f"r.{fmt}")
        assert Path(path).stat().st_size > 0
    back = pl.read_parquet(tmp_path / "r.parquet")
    assert back["key"].to_list() == r.keys.tolist()  # raw keys in Parquet
    csv = (tmp_path / "r.csv").read_text()
    assert "'=SUM(A1)" in csv and "\n=SUM" not in csv  # escaped in CSV
    raw = r.write(tmp_path / "raw.csv", escape_formulas=False)
    assert "\n=SUM(A1)," in Path(raw).read_text()


def test_charge_is_atomic_with_the_draw(data_csv: Path, ledger: Ledger, tmp_path: Path) -> None:
    s = Session(ledger.path, "d")
    out = tmp_path / "out.csv"
    s.histogram(data_csv, key="word", epsilon=1, delta=1e-8, output=out)
    assert out.exists() and _spends(ledger) == 1
    assert s.remaining() is not None and s.remaining().epsilon == pytest.approx(1.0)  # type: ignore[union-attr]
    # a release that does not fit is refused before reading: no spend, no file
    out2 = tmp_path / "out2.csv"
    with pytest.raises(BudgetExceededError):
        s.histogram(data_csv, key="word", epsilon=1.5, delta=1e-8, output=out2)
    assert not out2.exists() and _spends(ledger) == 1


class _Boom(Exception):
    pass


class _FailingEngine(LocalEngine):
    """Counts fine; the mechanism then fails inside the ledger transaction (see the test)."""


def test_exception_in_the_draw_leaves_no_spend_and_no_file(
    data_csv: Path, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privhist.mechanisms.stability import StabilityHistogram

    def boom(self: Any, counts: Any, rng: Any = None) -> Any:
        raise _Boom("draw failed")

    monkeypatch.setattr(StabilityHistogram, "release", boom)
    s = Session(ledger.path, "d")
    out = tmp_path / "out.parquet"
    with pytest.raises(_Boom):
        s.histogram(data_csv, key="word", epsilon=1, delta=1e-8, output=out)
    assert _spends(ledger) == 0
    assert sorted(os.listdir(tmp_path)) == sorted(["words.csv", "ledger.sqlite"])


def test_nothing_is_on_disk_before_the_spend_commits(
    data_csv: Path, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release is encoded in memory inside the transaction and written after the commit, so
    a kill before the commit can leave no (unpaid) release file, hidden or not."""
    seen: list[list[str]] = []
    committed: list[int] = []
    from privhist.session import Session as S

    real = S._charge

    def spy(self: Any, cost: Any, mechanism: Any, nb: Any, *event: Any) -> Any:
        class _CM:
            def __enter__(inner: Any) -> None:
                inner.cm = real(self, cost, mechanism, nb, *event)
                inner.cm.__enter__()

            def __exit__(inner: Any, *exc: Any) -> Any:
                # just before the commit (SQLite's own journal aside)
                seen.append(sorted(f for f in os.listdir(tmp_path) if "journal" not in f))
                r = inner.cm.__exit__(*exc)
                committed.append(_spends(ledger))
                return r

        return _CM()

    monkeypatch.setattr(S, "_charge", spy)
    out = tmp_path / "out.csv"
    Session(ledger.path, "d").histogram(data_csv, key="word", epsilon=1, delta=1e-8, output=out)
    assert seen == [sorted(["words.csv", "ledger.sqlite"])]
    assert committed == [1] and out.exists()


def test_dry_run_reads_nothing_and_spends_nothing(ledger: Ledger, tmp_path: Path) -> None:
    s = Session(ledger.path, "d")
    missing = tmp_path / "not-there.csv"  # a dry run never opens the source
    plan = s.histogram(missing, key="word", epsilon=1, delta=1e-8, dry_run=True)
    assert isinstance(plan, DryRun)
    assert plan.cost == Budget(1.0, 1e-8) and plan.allowed
    assert plan.remaining is not None and plan.remaining.epsilon == 2.0
    curve = plan.reporting_curve(60)
    assert curve[0] == 0.0 and curve[-1] > 0.99 and curve == sorted(curve)
    assert plan.to_dict()["plan"]["mechanism"] == "stability"
    too_much = s.histogram(missing, key="word", epsilon=3, delta=1e-8, dry_run=True)
    assert isinstance(too_much, DryRun) and not too_much.allowed
    assert _spends(ledger) == 0


def test_in_memory_session_composes_and_cleans_up() -> None:
    df = pl.DataFrame({"k": _words()})
    with Session.in_memory(Budget(1.0, 1e-6)) as s:
        path = s.ledger_path
        assert path is not None and path.exists()
        s.histogram(df, key="k", epsilon=0.5, delta=1e-8)
        s.histogram(df, key="k", epsilon=0.5, delta=1e-8)
        with pytest.raises(BudgetExceededError):
            s.histogram(df, key="k", epsilon=0.1, delta=1e-8)
        st = s.status()
        assert st is not None and len(st.spends) == 2
    assert not path.exists()


def test_user_level_from_a_dataframe() -> None:
    df = pd.DataFrame({"user": np.repeat(np.arange(300), 3), "item": np.tile(["x", "y", "z"], 300)})
    r = Session().histogram(
        df, key="item", user="user", max_partitions=3, epsilon=1, delta=1e-6, seed=3
    )
    assert not isinstance(r, DryRun)
    assert r.metadata["neighbouring"]["relation"] == "user"
    assert r.keys.tolist() == ["x", "y", "z"]
    assert r.diagnostics["users"] == 300


@pytest.mark.parametrize("target", ["input", "ledger", "link"])
def test_output_that_is_an_input_or_the_ledger_is_refused(
    target: str, data_csv: Path, ledger: Ledger, tmp_path: Path
) -> None:
    before = data_csv.read_bytes()
    if target == "input":
        out = data_csv
    elif target == "ledger":
        out = ledger.path
    else:
        out = tmp_path / "alias.csv"
        out.symlink_to(data_csv)
    s = Session(ledger.path, "d")
    with pytest.raises(ValidationError, match=r"'output'.*other than"):
        s.histogram(data_csv, key="word", epsilon=1, delta=1e-8, output=out, output_format="csv")
    assert data_csv.read_bytes() == before and _spends(ledger) == 0
    sqlite3.connect(ledger.path).execute("SELECT * FROM spends").fetchall()  # intact


def test_cli_refuses_to_overwrite_its_input(data_csv: Path, capsys: Any) -> None:
    before = data_csv.read_bytes()
    code = main(
        [
            "histogram",
            str(data_csv),
            "--key",
            "word",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "-o",
            str(data_csv),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "other than an input file" in err
    assert data_csv.read_bytes() == before


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epsilon", "1e308"], "'epsilon' (--epsilon) of histogram must be <= 100"),
        (["--epsilon", "1e6"], "must be <= 100 (the largest accepted)"),
        (["--epsilon", "1", "--format", "csv", "-o", "OUT.json"], "as the file name"),
        (["--epsilon", "1", "--delta", "1e-320"], "(the smallest accepted)"),
        (["--epsilon", "1e-300"], "noise scale 1/epsilon is at most 2**40"),
        (["--epsilon", "1", "--user", "w", "--max-partitions", "10" * 10], "at most 2**40"),
    ],
)
def test_absurd_numbers_are_typed_errors(
    extra: list[str], message: str, data_csv: Path, tmp_path: Path, capsys: Any
) -> None:
    args = [a.replace("OUT", str(tmp_path / "out")) for a in extra]
    code = main(["histogram", str(data_csv), "--key", "word", "--delta", "1e-6", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out.json").exists()


def test_plan_with_a_huge_max_count_is_refused(capsys: Any) -> None:
    code = main(
        ["plan", "stability", "--epsilon", "1", "--delta", "1e-8", "--max-count", "100000000000"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "<= 1000000" in err and err.count("\n") == 1


def test_cli_csv_escaping_and_its_off_switch(tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "k.csv"
    src.write_text("k\n" + '"=HYPERLINK(""http://x"")"\n' * 80 + "@cmd\n" * 80 + "-2\n" * 80)
    base = ["histogram", str(src), "--key", "k", "--epsilon", "1", "--delta", "1e-8", "--seed", "2"]
    assert main(base) == 0
    out = capsys.readouterr().out
    rows = [ln.split(",")[0] for ln in out.splitlines()[1:]]
    assert sorted(rows) == sorted(["'-2", "'@cmd", '"\'=HYPERLINK(""http://x"")"'])
    assert main([*base, "--no-csv-escape"]) == 0
    raw = [ln.split(",")[0] for ln in capsys.readouterr().out.splitlines()[1:]]
    assert sorted(raw) == sorted(["-2", "@cmd", '"=HYPERLINK(""http://x"")"'])
    out_json = tmp_path / "r.json"
    assert main([*base, "-o", str(out_json)]) == 0
    keys = sorted(r["key"] for r in json.loads(out_json.read_text())["rows"])
    assert keys == sorted(["-2", "@cmd", '=HYPERLINK("http://x")'])


def test_the_local_engine_implements_the_protocol() -> None:
    eng = LocalEngine()
    assert isinstance(eng, Engine)
    c = eng.count(
        pl.DataFrame({"u": [1, 1, 2, None], "k": ["a", "b", "a", "a"]}),
        KeyCounts(Fields(key="k", user="u"), max_partitions=2),
        rng=__import__("privhist").SeededRandom(0),
    )
    assert c.keys.tolist() == ["a", "b"] and c.units is not None
    assert c.units.tolist() == [2, 1] and c.info["null_users"] == 1
    with pytest.raises(ValidationError, match="'engine'"):
        Session(engine=object())  # type: ignore[arg-type]


def test_a_seeded_release_is_never_charged(data_csv: Path, ledger: Ledger) -> None:
    with pytest.raises(ValidationError, match="'seed'"):
        Session(ledger.path, "d").histogram(data_csv, key="word", epsilon=1, delta=1e-8, seed=1)
    assert _spends(ledger) == 0


@pytest.mark.parametrize("delta", [1e-45, 1e-120, 1e-300])
def test_stability_threshold_for_tiny_delta(delta: float) -> None:
    """Deltas below 2**-128 once looped forever (the bounds had 128 bits); the threshold is now
    the smallest T with Pr[1 + Z >= T] <= delta, checked with 600-digit arithmetic."""
    from fractions import Fraction

    import mpmath

    from privhist.mechanisms.stability import stability_threshold

    t = stability_threshold(Fraction(1), 1, Fraction(delta))
    with mpmath.workdps(600):
        d = mpmath.mpf(Fraction(delta).numerator) / Fraction(delta).denominator

        def tail(m: int) -> Any:  # Pr[Z >= m], discrete Laplace of scale 1
            return mpmath.exp(-m) / (1 + mpmath.exp(-1))

        assert tail(t - 1) <= d < tail(t - 2)


def test_every_release_method_has_a_dry_run(ledger: Ledger, tmp_path: Path) -> None:
    s = Session(ledger.path, "d")
    missing = tmp_path / "never-read.csv"
    hh = s.heavy_hitters(missing, key="w", epsilon=1, delta=1e-8, dry_run=True)
    assert isinstance(hh, DryRun) and 0.9 < hh.cost.epsilon <= 1.0  # composed over levels
    curve = hh.reporting_curve(200)
    assert curve[0] == 0.0 and max(curve) > 0.5  # one trie level's sample-and-threshold
    q = s.quantiles(
        missing, column="x", q=[0.5], lower=0, upper=1, epsilon=1, delta=1e-8, dry_run=True
    )
    assert isinstance(q, DryRun) and q.reporting_curve() == [] and q.allowed
    r = s.range_counts(
        missing,
        column="x",
        queries=[(0, 0.5)],
        lower=0,
        upper=1,
        epsilon=3,
        delta=1e-8,
        dry_run=True,
    )
    assert isinstance(r, DryRun) and not r.allowed  # more than the dataset's total
    w = s.weighted_sample(missing, key="k", epsilon=1, delta=1e-6, tau=2.0, dry_run=True)
    assert isinstance(w, DryRun) and w.cost == Budget(1.0, 1e-6)
    assert _spends(ledger) == 0 and not missing.exists()


def test_heavy_hitters_and_quantiles_from_tables() -> None:
    words = ["hello"] * 3000 + ["hey"] * 2000 + ["hi"] * 1000 + ["zz"]
    hh = Session().heavy_hitters(pl.DataFrame({"w": words}), key="w", epsilon=1, delta=1e-8, seed=4)
    assert not isinstance(hh, DryRun)
    assert set(hh.keys.tolist()) == {"hello", "hey", "hi"} and not hh.private
    values = pd.DataFrame({"x": np.linspace(0, 999, 50_001)})
    out = Session().quantiles(
        values, column="x", q=[0.5], lower=0, upper=1000, epsilon=1, delta=1e-8, seed=2
    )
    assert not isinstance(out, DryRun)
    assert out.diagnostics["rows"] == 50_001 and abs(out.estimates[0] - 500) < 50
    assert out.to_pandas().columns.tolist()[:2] == ["q", "value"]


def test_cli_dry_run(ledger: Ledger, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "never.csv"
    argv = ["histogram", str(tmp_path / "absent.csv"), "--key", "w", "--epsilon", "0.5"]
    argv += ["--delta", "1e-8", "--ledger", str(ledger.path), "--dataset", "d", "--dry-run"]
    assert main([*argv, "-o", str(out)]) == 0
    table = capsys.readouterr().out
    assert "cost" in table and "epsilon 0.5" in table and "always released from count" in table
    assert main([*argv, "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cost"] == {"epsilon": 0.5, "delta": 1e-8} and report["allowed"]
    assert report["remaining"]["epsilon"] == 2.0 and report["plan"]["mechanism"] == "stability"
    assert not out.exists() and _spends(ledger) == 0


def _baskets(seed: int, users: int) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    rows = []
    for u in range(users):
        for k in set((g.zipf(1.4, 8) % 50).tolist()):
            rows.append((u, f"item{k}"))
    return pd.DataFrame(rows, columns=["user", "item"])


@pytest.mark.parametrize("mechanism", ["wgm", "dp-sips", "cumulative-sips"])
def test_weighted_selectors_through_the_session_and_the_cli(
    mechanism: str, tmp_path: Path, capsys: Any
) -> None:
    """The weighted selectors release from a DataFrame (Session) and from a file (CLI) with the
    same rows for the same seed, are charged to a user-level dataset, and take keys_only."""
    frame = _baskets(1, 3000)
    csv = tmp_path / "baskets.csv"
    frame.to_csv(csv, index=False)
    kwargs: dict[str, Any] = dict(
        key="item", user="user", mechanism=mechanism, epsilon=1.0, delta=1e-6
    )
    r = Session().histogram(frame.astype({"user": str}), seed=5, **kwargs)
    assert not isinstance(r, DryRun) and len(r) > 0 and r.values is not None
    out = tmp_path / "r.json"
    argv = ["histogram", str(csv), "--key", "item", "--user", "user", "--mechanism", mechanism]
    argv += ["--epsilon", "1", "--delta", "1e-6", "--seed", "5", "-o", str(out), "--no-progress"]
    assert main(argv) == 0
    assert json.loads(out.read_text())["rows"] == r.to_polars().to_dicts()
    keys = Session().histogram(frame, seed=5, options={"keys_only": True}, **kwargs)
    assert not isinstance(keys, DryRun) and keys.values is None and len(keys) > 0
    with Session.in_memory(Budget(2.0, 1e-5), unit="user") as s:
        s.histogram(frame, **kwargs)
        st = s.status()
        assert st is not None and len(st.spends) == 1 and st.spends[0].mechanism == mechanism
    with pytest.raises(ValidationError, match="'user'"):
        Session().histogram(frame, key="item", mechanism=mechanism, epsilon=1, delta=1e-6)


def test_user_level_default_is_the_plan_and_a_cap_ranks_the_selectors() -> None:
    frame = _baskets(2, 2000)
    base: dict[str, Any] = dict(key="item", user="user", epsilon=1, delta=1e-6, seed=1)
    r = Session().histogram(frame, **base)
    assert not isinstance(r, DryRun)
    assert r.metadata["choice"]["mechanism"] in ("vote-selection", "cumulative-sips")
    capped = Session().histogram(frame, max_partitions=1, **base)
    assert not isinstance(capped, DryRun)
    assert capped.metadata["choice"]["rule"].startswith(capped.metadata["mechanism"])
    plan = Session().histogram(
        frame, dry_run=True, **{k: v for k, v in base.items() if k != "seed"}
    )
    assert isinstance(plan, DryRun) and plan.details["mechanism"] == "user-level-default"


def test_max_partitions_auto_spends_one_budget_for_cap_and_release() -> None:
    from privhist.mechanisms.user_level.caps import CAP_CANDIDATES

    frame = _baskets(3, 3000)
    with Session.in_memory(Budget(1.0, 1e-6), unit="user") as s:
        r = s.histogram(
            frame,
            key="item",
            user="user",
            mechanism="cumulative-sips",
            max_partitions="auto",
            epsilon=1.0,
            delta=1e-6,
        )
        assert not isinstance(r, DryRun) and r.metadata["mechanism"] == "cumulative-sips"
        assert r.metadata["cap"]["max_partitions"] in CAP_CANDIDATES
        st = s.status()
        assert st is not None and len(st.spends) == 1 and st.remaining.epsilon == 0


@pytest.mark.parametrize("mechanism", ["stability", "gaussian-threshold"])
def test_max_partitions_auto_for_per_key_mechanisms(mechanism: str) -> None:
    """5% of epsilon on a DP cap (discrete Laplace), the mechanism at the rest: one spend of the
    whole (epsilon, delta), the cap and the composition in the metadata."""
    from privhist.mechanisms.user_level.caps import CAP_CANDIDATES

    frame = _baskets(4, 3000)
    with Session.in_memory(Budget(1.0, 1e-6), unit="user") as s:
        plan = s.histogram(
            frame,
            key="item",
            user="user",
            mechanism=mechanism,
            max_partitions="auto",
            epsilon=1.0,
            delta=1e-6,
            dry_run=True,
        )
        assert isinstance(plan, DryRun) and plan.cost.epsilon == 1.0 and plan.allowed
        r = s.histogram(
            frame,
            key="item",
            user="user",
            mechanism=mechanism,
            max_partitions="auto",
            epsilon=1.0,
            delta=1e-6,
        )
        assert not isinstance(r, DryRun) and r.metadata["mechanism"] == mechanism
        cap = r.metadata["cap"]
        assert cap["max_partitions"] in CAP_CANDIDATES and cap["epsilon"] == pytest.approx(0.05)
        # the release states the whole spend (as the ledger charges it), the mechanism its part
        assert r.metadata["mechanism_guarantee"]["epsilon"] == pytest.approx(0.95)
        assert cap["total"] == {"epsilon": 1.0, "delta": 1e-6}
        assert (r.metadata["guarantee"]["epsilon"], r.metadata["guarantee"]["delta"]) == (1.0, 1e-6)
        st = s.status()
        assert st is not None and len(st.spends) == 1 and st.remaining.epsilon == 0


def _session_error(call: Any) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        call(Session())
    return info.value


def test_session_errors_name_the_method_the_user_called(tmp_path: Path, capsys: Any) -> None:
    frame = pl.DataFrame({"k": ["a", "b"]})
    own = _session_error(lambda s: s.histogram(frame, key="k", epsilon=-1))
    assert own.function == "Session.histogram", str(own)
    assert str(own).startswith("parameter 'epsilon' of Session.histogram must be ")
    # a mechanism's option error names the method and the mechanism, not the class
    option = _session_error(
        lambda s: s.histogram(
            frame,
            key="k",
            epsilon=1,
            delta=1e-6,
            mechanism="optimal-selection",
            options={"selection_fraction": 2.0},
        )
    )
    assert option.function == "Session.histogram with mechanism optimal-selection", str(option)
    assert "OptimalSelection" not in str(option)
    # the error the method received is the cause (the command line shows that one)
    assert isinstance(option.__cause__, ValidationError)
    assert option.__cause__.function == "OptimalSelection"
    weighted = _session_error(
        lambda s: s.histogram(frame, key="k", epsilon=1, delta=1e-6, mechanism="wgm")
    )
    assert weighted.function == "Session.histogram with mechanism wgm", str(weighted)
    quantiles = _session_error(
        lambda s: s.quantiles(frame, column="k", q=[0.5], lower=0, upper=1, epsilon=-1, delta=0)
    )
    assert quantiles.function == "Session.quantiles", str(quantiles)
    # the command line still names its command (and the mechanism by its registered name)
    csv = tmp_path / "k.csv"
    frame.write_csv(csv)
    code = main(
        [
            *("histogram", str(csv), "--key", "k", "--epsilon", "1", "--delta", "1e-6"),
            *("--mechanism", "optimal-selection", "--selection-fraction", "2"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "of histogram --mechanism optimal-selection must be" in err, err
    assert "Session" not in err


@pytest.mark.parametrize("noise_on", ["driver", "executors"])
def test_per_key_noise_is_drawn_where_the_session_says(noise_on: str) -> None:
    """With the noise on the executors a record-level histogram (one key-count request) asks
    the engine for a keyed draw, made where the data lives; with the noise on the driver the
    engine only counts, and the mechanism draws on the driver."""
    from privhist.core.requests import KeyedDraw

    frame = pl.DataFrame({"key": ["a", "b", "c", "a", "b", "a"] * 50, "user": list(range(300))})
    session = Session(noise_on=noise_on)  # type: ignore[arg-type]
    asked: list[Any] = []
    compute = session.engine.compute

    def spy(source: Any, request: Any, rng: Any, **kw: Any) -> Any:
        asked.append(request)
        return compute(source, request, rng, **kw)

    session.engine.compute = spy  # type: ignore[method-assign]
    out = session.histogram(frame, key="key", epsilon=1, delta=1e-6, seed=3)
    assert not isinstance(out, DryRun)
    keyed = [r for r in asked if isinstance(r, KeyedDraw)]
    counted = [r for r in asked if type(r) is KeyCounts]
    if noise_on == "executors":
        assert len(keyed) == 1 and not counted
    else:
        assert len(counted) == 1 and not keyed


def test_the_local_engine_refuses_a_remote_output_before_reading(tmp_path: Path) -> None:
    """A URI (``s3://...``) is not a path the local engine can write: refused as ``output``,
    before any data is read, and nothing is written under the working directory."""
    frame = pl.DataFrame({"key": ["a", "b", "a"] * 10})
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(ValidationError) as err:
            Session().histogram(
                frame, key="key", epsilon=1, delta=1e-6, seed=1, output="s3://bucket/out.csv"
            )
    finally:
        os.chdir(cwd)
    assert err.value.parameter == "output"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("with_output", [False, True])
def test_the_release_path_passes_its_checkpoints_in_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, with_output: bool
) -> None:
    """The session's steps of the release path (privhist.core.faults): read, drawn, then
    encoded only when there is an output to write, then committed; the file is written after."""
    import privhist.session as session_module

    steps: list[str] = []
    monkeypatch.setattr(session_module, "checkpoint", steps.append)
    frame = pl.DataFrame({"key": ["a", "b", "a"] * 10})
    out = tmp_path / "out.csv"
    Session().histogram(
        frame, key="key", epsilon=1, delta=1e-6, seed=1, output=out if with_output else None
    )
    if with_output:
        assert steps == ["read", "drawn", "encoded", "committed"]
        assert out.exists()
    else:
        assert steps == ["read", "drawn", "committed"]
        assert list(tmp_path.iterdir()) == []
