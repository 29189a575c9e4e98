"""The public Session API: typed methods (no ``**kwargs``, a return annotation naming ``Release``
or ``DryRun``), each returning a table-like ``Release``; a closed session refuses every call;
every wrong-typed argument is a ``ValidationError`` naming the method the user called."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import privhist
from privhist import Budget, DryRun, Release, Session
from privhist.core.errors import ValidationError

#: every public release method of the Session
RELEASE_METHODS = (
    "histogram",
    "heavy_hitters",
    "quantiles",
    "range_counts",
    "weighted_sample",
    "federated_frequency",
    "aggregate",
)


def test_the_release_methods_are_all_the_public_ones() -> None:
    public = {
        n
        for n, v in vars(Session).items()
        if callable(v) and not n.startswith("_") and n not in ("in_memory", "close")
    }
    helpers = {"status", "remaining", "release", "count", "check_source"}
    assert public - helpers == set(RELEASE_METHODS)


@pytest.mark.parametrize("name", RELEASE_METHODS)
def test_signatures_are_typed(name: str) -> None:
    sig = inspect.signature(getattr(Session, name))
    kinds = {p.kind for p in sig.parameters.values()}
    assert (
        inspect.Parameter.VAR_KEYWORD not in kinds and inspect.Parameter.VAR_POSITIONAL not in kinds
    )
    assert "Release" in str(sig.return_annotation) and "DryRun" in str(sig.return_annotation)
    assert "Any" not in str(sig.return_annotation)
    # every parameter but the source is keyword-only, so calls say what they pass
    params = list(sig.parameters.values())[2:]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    # the docstring documents every parameter
    doc = inspect.getdoc(getattr(Session, name)) or ""
    for p in params:
        assert p.name in doc, f"{name} does not document {p.name}"


def test_the_package_exports_release_and_dry_run() -> None:
    assert privhist.Release is Release and privhist.DryRun is DryRun
    shown = dir(privhist)
    for hidden in ("Any", "TYPE_CHECKING", "importlib", "annotations"):
        assert hidden not in shown


@pytest.fixture
def data() -> dict[str, Any]:
    g = np.random.default_rng(1)
    n = 20_000
    return {
        "frame": pl.DataFrame(
            {
                "user": g.integers(0, 2000, n),
                "page": [f"p{v}" for v in (g.zipf(1.3, n) % 30).tolist()],
                "code": (g.zipf(1.3, n) % 30).astype(np.int64),
                "age": g.integers(18, 90, n),
            }
        )
    }


CALLS: dict[str, Callable[[Session, pl.DataFrame], Any]] = {
    "histogram": lambda s, f: s.histogram(f, key="page", epsilon=1, delta=1e-8, seed=1),
    "heavy_hitters": lambda s, f: s.heavy_hitters(f, key="page", epsilon=2, delta=1e-6, seed=1),
    "quantiles": lambda s, f: s.quantiles(
        f, column="age", q=[0.25, 0.5], lower=0, upper=128, epsilon=1, delta=1e-8, seed=1
    ),
    "range_counts": lambda s, f: s.range_counts(
        f,
        column="age",
        queries=[(0, 40), (40, 128)],
        lower=0,
        upper=128,
        epsilon=1,
        delta=1e-8,
        seed=1,
    ),
    "weighted_sample": lambda s, f: s.weighted_sample(
        f, key="page", epsilon=1, delta=1e-6, tau=1.0, seed=1
    ),
    "aggregate": lambda s, f: s.aggregate(
        f,
        by="page",
        metrics={"n": __import__("privhist").metrics.count()},
        epsilon=1,
        delta=1e-6,
        seed=1,
    ),
    "federated_frequency": lambda s, f: s.federated_frequency(
        f,
        user="user",
        key="page",
        epsilon=3,
        delta=1e-5,
        domain=[f"p{i}" for i in range(8)],
        seed=1,
    ),
}


@pytest.mark.parametrize("name", RELEASE_METHODS)
def test_every_method_returns_a_table(name: str, data: dict[str, Any], tmp_path: Path) -> None:
    release = CALLS[name](Session(), data["frame"])
    assert isinstance(release, Release) and len(release) > 0
    frame = release.to_pandas()
    assert len(frame) == len(release) and frame.attrs["privhist"] == release.metadata
    assert release.to_polars().height == len(release)
    assert release.to_arrow().num_rows == len(release)
    assert "guarantee" in release.metadata
    out = release.write(tmp_path / "out.json")
    assert out.is_file()


def test_heavy_hitters_of_an_integer_column(data: dict[str, Any]) -> None:
    """As histogram takes integer keys, so do heavy hitters (read as text over the alphabet)."""
    release = Session().heavy_hitters(data["frame"], key="code", epsilon=2, delta=1e-6, seed=3)
    assert isinstance(release, Release) and release.keys.tolist()[:2] == ["0", "1"]


@pytest.mark.parametrize("name", RELEASE_METHODS)
def test_a_closed_session_refuses_every_call(name: str, data: dict[str, Any]) -> None:
    for session in (Session(), Session.in_memory(Budget(5.0, 1e-5))):
        session.close()
        with pytest.raises(ValidationError, match="closed"):
            CALLS[name](session, data["frame"])
        with pytest.raises(ValidationError, match="closed"):
            session.remaining()


def test_a_closed_in_memory_session_releases_nothing(data: dict[str, Any]) -> None:
    s = Session.in_memory(Budget(1.0, 1e-6))
    with s:
        s.histogram(data["frame"], key="page", epsilon=1, delta=1e-8)
    with pytest.raises(ValidationError):  # closed: not uncharged releases without limit
        s.histogram(data["frame"], key="page", epsilon=1, delta=1e-8)


WRONG = [
    ("histogram", {"key": ["page"]}, "key"),
    ("histogram", {"key": "page", "max_partitions": "x", "user": "user"}, "max_partitions"),
    ("histogram", {"key": "page", "max_partitions": 2.5, "user": "user"}, "max_partitions"),
    ("histogram", {"key": "page", "epsilon": "1"}, "epsilon"),
    ("histogram", {"key": "page", "delta": "1e-8"}, "delta"),
    ("histogram", {"key": "page", "domain": None, "user": 3}, "user"),
    ("histogram", {"key": "page", "user": "page"}, "user"),
    ("histogram", {"key": "page", "seed": "1"}, "seed"),
    ("histogram", {"key": "page", "dry_run": "yes"}, "dry_run"),
    ("histogram", {"key": "page", "keys_only": 1}, "keys_only"),
    ("histogram", {"key": "page", "confidence": "0.9"}, "confidence"),
    ("histogram", {"key": "page", "output": 3}, "output"),
    ("histogram", {"key": "page", "options": ["x"]}, "options"),
    ("histogram", {"key": "page", "columns": "a,b"}, "columns"),
    ("histogram", {"key": "page", "key_type": "float"}, "key_type"),
    ("histogram", {"key": "page", "mechanism": 3}, "mechanism"),
    ("quantiles", {"column": "age", "q": "0.5"}, "q"),
    ("quantiles", {"column": "age", "q": [0.5], "lower": "0"}, "lower"),
    ("quantiles", {"column": ["age"], "q": [0.5]}, "column"),
    ("range_counts", {"column": "age", "queries": "0-40"}, "queries"),
    ("range_counts", {"column": "age", "queries": [(0, "40")]}, "queries"),
    ("heavy_hitters", {"key": "page", "levels": "3"}, "levels"),
    ("weighted_sample", {"key": "page", "tau": "1"}, "tau"),
    (
        "federated_frequency",
        {"user": "user", "key": "page", "domain_from_data": 1},
        "domain_from_data",
    ),
]


@pytest.mark.parametrize(("method", "args", "param"), WRONG)
def test_wrong_types_are_validation_errors(
    method: str, args: dict[str, Any], param: str, data: dict[str, Any]
) -> None:
    base: dict[str, Any] = {"epsilon": 1, "delta": 1e-6}
    if method in ("quantiles", "range_counts"):
        base.update(lower=0, upper=128)
    if method == "range_counts":
        base["column"] = "age"
    if method == "weighted_sample":
        base["tau"] = 1.0
    with pytest.raises(ValidationError) as info:
        getattr(Session(), method)(data["frame"], **{**base, **args})
    err = info.value
    assert err.parameter == param, str(err)
    assert err.function.startswith("Session."), str(err)
    for internal in ("LocalWeightedSource", "Ledger.", " of count", "CountRequest"):
        assert internal not in str(err)


def test_a_tuple_for_the_budget_is_refused() -> None:
    with pytest.raises(ValidationError) as info:
        Session.in_memory((1.0, 1e-6))  # type: ignore[arg-type]
    assert info.value.parameter == "total"


def test_an_engine_that_cannot_serve_a_release_is_named_before_reading(tmp_path: Path) -> None:
    from privhist.core.requests import Request
    from privhist.engines.local import LocalEngine

    class CountsOnly(LocalEngine):
        def supports(self, request: Request) -> bool:
            return type(request).__name__ == "KeyCounts"

    missing = tmp_path / "never-read.csv"
    with pytest.raises(ValidationError) as info:
        Session(engine=CountsOnly()).quantiles(
            missing, column="x", q=[0.5], lower=0, upper=1, epsilon=1, delta=1e-8
        )
    assert info.value.parameter == "engine" and "the values of a column" in str(info.value)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "releases"


@pytest.mark.parametrize("name", RELEASE_METHODS)
def test_every_method_has_a_page_with_a_python_example(name: str) -> None:
    """Each method's page calls it in a ``python`` block, which ``tests/docs/test_examples.py``
    runs (its assertions included)."""
    page = DOCS / f"{name.replace('_', '-')}.md"
    text = page.read_text(encoding="utf-8")
    blocks = text.split("```python")[1:]
    assert any(f".{name}(" in b.split("```")[0] for b in blocks), page
    assert any("assert " in b.split("```")[0] for b in blocks), page
