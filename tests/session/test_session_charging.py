"""What a Session charges, when, and what it publishes.

Each charged release must record one spend whose event covers every part of the release (the
caps bought with 5 % of epsilon each, and the release at the rest), refuse before any data is
read what the budget, the privacy unit or the arguments forbid, and write an output file only
after the spend (never over the input or the ledger). These tests hold the Session to that
through its public methods and the ledger's record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from privhist import Budget, Session
from privhist.accounting.accountant import guarantee_of
from privhist.accounting.ledger import Ledger
from privhist.core.errors import BudgetExceededError, ValidationError
from privhist.core.requests import Request, UserKeys
from privhist.engines import LocalEngine
from privhist.session import DryRun
from privhist.session._support import _same_file, check_output

EPS, DELTA = 1.0, 1e-6
TOTAL = Budget(4.0, 1e-5)


def _frame() -> pl.DataFrame:
    users = [u for u in range(800) for _ in range(3)]
    keys = [f"k{(u + j) % 30:02d}" for u in range(800) for j in range(3)]
    return pl.DataFrame({"user": users, "key": keys})


def _session(tmp_path: Path, total: Budget = TOTAL) -> Session:
    ledger = Ledger(tmp_path / "ledger.sqlite", create=True)
    ledger.init_dataset("d", total, unit="user")
    return Session(ledger, "d")


def _only_spend(s: Session) -> Any:
    st = s.status()
    assert st is not None
    (spend,) = st.spends
    return spend


# -- the caps chosen inside the spend ---------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "c", "caps"), [("auto", None, 1), (None, "auto", 1), ("auto", "auto", 2)]
)
def test_auto_caps_are_charged_with_the_release_in_one_spend(
    tmp_path: Path, k: Any, c: Any, caps: int
) -> None:
    s = _session(tmp_path)
    rel = s.histogram(
        _frame(),
        key="key",
        user="user",
        mechanism="stability",
        max_partitions=k,
        max_per_partition=c,
        epsilon=EPS,
        delta=DELTA,
    )
    assert not isinstance(rel, DryRun)
    cap = rel.metadata["cap"]
    eps_cap = EPS * 0.05
    assert cap["epsilon"] == pytest.approx(eps_cap * caps, rel=1e-12)
    assert cap["composition"].count(f"{eps_cap:.6g}") == caps
    # the stated composition: each cap's epsilon and the mechanism's, adding up to epsilon
    terms = cap["composition"].removeprefix("basic: (").split(", ")[0].split(" + ")
    assert len(terms) == caps + 1
    assert sum(float(t) for t in terms) == pytest.approx(EPS, rel=1e-5)
    eps_mech = rel.metadata["mechanism_guarantee"]["epsilon"]
    assert rel.metadata["guarantee"]["epsilon"] == rel.metadata["cap"]["total"]["epsilon"]
    # the parts add up to at most the requested epsilon, exactly
    assert Fraction(eps_cap) * caps + Fraction(eps_mech) <= Fraction(EPS)
    assert eps_mech >= EPS - eps_cap * caps - 1e-12
    spend = _only_spend(s)
    charged = guarantee_of(spend.privacy_event)
    assert charged.epsilon <= EPS + 1e-12 and charged.delta <= DELTA
    assert charged.epsilon >= eps_cap * caps + eps_mech - 1e-12
    assert spend.budget == Budget(charged.epsilon, charged.delta)


class _NoUserKeys(LocalEngine):
    """The local engine without users' keys (the request auto caps and selectors make); it
    refuses to read anything, so a refusal here happens before any data is read."""

    def handlers(self) -> Mapping[type[Request], Any]:
        return {t: h for t, h in super().handlers().items() if t is not UserKeys}

    def compute(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the data was read")


def _refused_for_the_engine(tmp_path: Path, **kwargs: Any) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite", create=True)
    ledger.init_dataset("d", TOTAL, unit="user")
    s = Session(ledger, "d", engine=_NoUserKeys())
    args: dict[str, Any] = dict(key="key", user="user", epsilon=EPS, delta=DELTA, **kwargs)
    with pytest.raises(ValidationError, match="users' keys") as err:
        s.histogram(_frame(), **args)
    assert err.value.parameter == "engine"  # type: ignore[attr-defined]
    assert s.status().spends == ()  # type: ignore[union-attr]
    # the engine is not refused a release that needs no users' keys (the refusal is about them)
    fixed = {"mechanism": "stability", "max_partitions": 3, "max_per_partition": 1}
    assert isinstance(s.histogram(_frame(), **{**args, **fixed, "dry_run": True}), DryRun)


def test_auto_caps_need_an_engine_that_can_choose_them(tmp_path: Path) -> None:
    _refused_for_the_engine(tmp_path, mechanism="stability", max_partitions="auto")


# -- weighted selectors -----------------------------------------------------------------------


def test_a_selector_release_is_charged_its_event(tmp_path: Path) -> None:
    s = _session(tmp_path)
    rel = s.histogram(
        _frame(), key="key", user="user", mechanism="dp-sips", epsilon=EPS, delta=DELTA
    )
    assert not isinstance(rel, DryRun) and rel.values is not None  # counts by default
    spend = _only_spend(s)
    event = spend.privacy_event
    params = rel.metadata["parameters"]
    assert event.rho == pytest.approx(params["rho"], rel=1e-12)
    assert spend.neighbouring.max_partitions_contributed == params["max_keys"]
    (tmp_path / "b").mkdir()
    keys_only = _session(tmp_path / "b")
    rel2 = keys_only.histogram(
        _frame(),
        key="key",
        user="user",
        mechanism="dp-sips",
        epsilon=EPS,
        delta=DELTA,
        options={"keys_only": True},
    )
    assert not isinstance(rel2, DryRun) and rel2.values is None


def test_a_selector_with_an_auto_cap_is_charged_the_bound_of_every_cap(tmp_path: Path) -> None:
    from privhist.mechanisms.registry import weighted_registry
    from privhist.mechanisms.user_level.caps import CAP_CANDIDATES

    s = _session(tmp_path)
    rel = s.histogram(
        _frame(),
        key="key",
        user="user",
        mechanism="wgm",
        max_partitions="auto",
        epsilon=EPS,
        delta=DELTA,
    )
    assert not isinstance(rel, DryRun) and "cap" in rel.metadata
    spend = _only_spend(s)
    bound = weighted_registry()["wgm"](EPS, DELTA, counts=True).bound_event()
    assert spend.privacy_event == bound
    assert spend.neighbouring.max_partitions_contributed == max(CAP_CANDIDATES)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"user": None}, "user"),
        ({"max_per_partition": 2}, "max_per_partition"),
        ({"options": {"rounds": 2}}, "rounds"),
        ({"domain": ["k00"]}, "domain"),
    ],
)
def test_selector_arguments_are_refused_before_reading(
    tmp_path: Path, kwargs: dict[str, Any], name: str
) -> None:
    s = _session(tmp_path)
    args: dict[str, Any] = dict(key="key", user="user", mechanism="wgm", epsilon=EPS, delta=DELTA)
    args.update(kwargs)
    with pytest.raises(ValidationError) as err:
        s.histogram(_frame(), **args)
    assert err.value.parameter == name  # type: ignore[attr-defined]
    assert s.status().spends == ()  # type: ignore[union-attr]


def test_a_selector_needs_an_engine_with_a_weighted_source(tmp_path: Path) -> None:
    _refused_for_the_engine(tmp_path, mechanism="wgm")


# -- refusals before any data is read ---------------------------------------------------------


def test_seeded_output_is_never_charged(tmp_path: Path) -> None:
    s = _session(tmp_path)
    with pytest.raises(ValidationError, match="seed"):
        s.histogram(
            _frame(),
            key="key",
            user="user",
            mechanism="stability",
            max_partitions=3,
            epsilon=EPS,
            delta=DELTA,
            seed=1,
        )
    assert s.status().spends == ()  # type: ignore[union-attr]
    # without a ledger, a seed is fine
    rel = Session().histogram(
        _frame(),
        key="key",
        user="user",
        mechanism="stability",
        max_partitions=3,
        epsilon=EPS,
        delta=DELTA,
        seed=1,
    )
    assert not isinstance(rel, DryRun)


def test_over_budget_is_refused_and_a_dry_run_says_so(tmp_path: Path) -> None:
    s = _session(tmp_path, Budget(1.5, 1e-5))
    args: dict[str, Any] = dict(
        key="key", user="user", mechanism="stability", max_partitions=3, delta=DELTA
    )
    plan = s.histogram(_frame(), epsilon=1.0, dry_run=True, **args)
    assert isinstance(plan, DryRun) and plan.allowed
    s.histogram(_frame(), epsilon=1.0, **args)
    plan = s.histogram(_frame(), epsilon=1.0, dry_run=True, **args)
    assert isinstance(plan, DryRun) and not plan.allowed
    with pytest.raises(BudgetExceededError):
        s.histogram(_frame(), epsilon=1.0, **args)
    assert len(s.status().spends) == 1  # type: ignore[union-attr]
    # exactly the rest fits
    rest = s.remaining()
    assert rest is not None
    s.histogram(_frame(), epsilon=rest.epsilon, **args)
    assert len(s.status().spends) == 2  # type: ignore[union-attr]


def test_output_never_overwrites_the_input_or_the_ledger(tmp_path: Path) -> None:
    s = _session(tmp_path)
    data = tmp_path / "data.csv"
    _frame().write_csv(data)
    args: dict[str, Any] = dict(
        key="key", user="user", mechanism="stability", max_partitions=3, epsilon=EPS, delta=DELTA
    )
    for target in (data, tmp_path / "ledger.sqlite"):
        with pytest.raises(ValidationError, match="output"):
            s.histogram(data, output=target, output_format="csv", **args)
    assert s.status().spends == ()  # type: ignore[union-attr]
    out = tmp_path / "out.csv"
    s.histogram(data, output=out, **args)
    assert out.read_text().startswith("key,count")
    assert len(s.status().spends) == 1  # type: ignore[union-attr]


def test_same_file_through_links_and_for_files_not_yet_written(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text("x\n")
    link = tmp_path / "link.csv"
    link.symlink_to(a)
    b = tmp_path / "b.csv"
    b.write_text("x\n")
    assert _same_file(a, link) and _same_file(link, a)
    assert not _same_file(a, b)
    missing = tmp_path / "sub" / ".." / "new.csv"
    assert _same_file(missing, tmp_path / "new.csv")
    assert not _same_file(tmp_path / "new.csv", tmp_path / "other.csv")
    with pytest.raises(ValidationError, match="the budget ledger"):
        check_output(tmp_path / "l.sqlite-wal", "csv", [], tmp_path / "l.sqlite", "histogram")
    assert check_output(tmp_path / "fine.csv", None, [a], None, "histogram") == "csv"


def test_same_file_when_the_system_cannot_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path that cannot be examined (here ``samefile`` refused, as for a file that cannot be
    read, or a link to itself) counts as the protected file: the output is refused rather than
    risk the ledger."""
    ledger = tmp_path / "l.sqlite"
    ledger.write_text("")
    out = tmp_path / "out.csv"
    out.write_text("x\n")

    def refuse(a: Any, b: Any) -> bool:
        raise PermissionError("no access")

    loop = tmp_path / "loop.csv"
    loop.symlink_to(loop)  # resolving it fails (an error, not an answer)
    assert _same_file(loop, ledger)
    monkeypatch.setattr("os.path.samefile", refuse)
    assert _same_file(out, ledger)
    with pytest.raises(ValidationError, match="the budget ledger"):
        check_output(out, "csv", [], ledger, "histogram")


def test_spent_and_remaining_after_a_release(tmp_path: Path) -> None:
    s = _session(tmp_path, Budget(2.0, 1e-5))
    s.histogram(
        _frame(),
        key="key",
        user="user",
        mechanism="stability",
        max_partitions=3,
        epsilon=0.7,
        delta=3e-6,
    )
    st = s.status()
    assert st is not None and st.spent.epsilon == 0.7 and st.spent.delta == 3e-6
    rest = s.remaining()
    assert rest is not None
    exact = Fraction(2.0) - Fraction(0.7)
    assert Fraction(rest.epsilon) <= exact < Fraction(math.nextafter(rest.epsilon, math.inf))


def test_session_refuses_outputs_a_release_cannot_be_written_to(tmp_path: Path) -> None:
    """Checked before any data is read: a compact polynomial needs a JSON or Parquet file (no
    file, a CSV file, or an engine's URI are refused, and nothing is written), and a format
    without an output is refused for any release."""
    frame = pl.DataFrame({"id": [1, 5, 5, 99]})
    compact = dict(key="id", mechanism="compact", options={"max_keys": 4}, epsilon=1.0, seed=3)
    with pytest.raises(ValidationError, match="CSV rows cannot hold"):
        Session().histogram(frame, **compact)  # type: ignore[arg-type]
    csv_out = tmp_path / "rel.csv"
    with pytest.raises(ValidationError, match="json or parquet"):
        Session().histogram(frame, output=csv_out, **compact)  # type: ignore[arg-type]
    assert not csv_out.exists()
    with pytest.raises(ValidationError, match="a plain path"):
        Session().histogram(frame, output="hdfs://nn/rel.json", **compact)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="given with output"):
        Session().histogram(frame, key="id", epsilon=1.0, delta=1e-6, output_format="csv")
    written = tmp_path / "rel.json"
    Session().histogram(frame, output=written, **compact)  # type: ignore[arg-type]
    assert written.exists()
