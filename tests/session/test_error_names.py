"""An error about the data names the public method that was called and its parameter, not the
engine step that found it (``count``, ``LocalWeightedSource``): the release path restates a
:class:`~privhist.core.errors.MissingInputError` or a :class:`ValidationError` for it."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from privhist import InputDataError, Session
from privhist.core.errors import MissingInputError, ValidationError

FRAME = pl.DataFrame({"user": [1, 2, 3] * 20, "page": ["a", "b", "c"] * 20, "x": [1.0] * 60})
HISTOGRAM: dict[str, Any] = dict(epsilon=1, delta=1e-6, seed=1)


@pytest.mark.parametrize(
    ("kwargs", "parameter", "wrong"),
    [
        (dict(key="pag"), "key", "pag"),  # record level: the count
        (dict(key="pag", user="user"), "key", "pag"),  # the default user-level plan
        (dict(key="page", user="usr"), "user", "usr"),
        (dict(key="pag", user="user", mechanism="stability", max_partitions=2), "key", "pag"),
        (dict(key="pag", user="user", mechanism="wgm", max_partitions=2), "key", "pag"),
    ],
)
def test_a_missing_column_is_the_methods(
    kwargs: dict[str, Any], parameter: str, wrong: str
) -> None:
    with pytest.raises(MissingInputError) as info:
        Session().histogram(FRAME, **kwargs, **HISTOGRAM)
    message = str(info.value)
    assert message.startswith(f"parameter '{parameter}' of histogram must be one of the columns")
    assert message.endswith(f"got {wrong!r}") and "'page'" in message
    assert isinstance(info.value, InputDataError)  # what callers catch stays the same


def test_a_missing_file_is_the_methods(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.csv")
    for kwargs in (dict(key="page"), dict(key="page", user="user")):
        with pytest.raises(MissingInputError, match=r"^parameter 'path' of histogram must be an"):
            Session().histogram(missing, **kwargs, **HISTOGRAM)
    with pytest.raises(MissingInputError, match=r"^parameter '\w+' of quantiles must be"):
        Session().quantiles(missing, column="x", q=0.5, lower=0, upper=1, epsilon=1, delta=1e-6)


def test_the_restated_error_keeps_its_parts_and_crosses_processes() -> None:
    found = MissingInputError("key", "count", "be one of the columns of t ('a')", "'b'")
    restated = found.for_function("histogram")
    assert (
        str(restated)
        == "parameter 'key' of histogram must be one of the columns of t ('a'); got 'b'"
    )
    again = pickle.loads(pickle.dumps(restated))
    assert type(again) is MissingInputError and str(again) == str(restated)
    assert (again.parameter, again.function) == ("key", "histogram")


def test_a_missing_column_is_named_by_the_methods_parameter(tmp_path: Path) -> None:
    # quantiles and range read their values as the key of the engine's request
    path = tmp_path / "v.csv"
    FRAME.write_csv(path)
    for call in (
        lambda: Session().quantiles(
            str(path), column="y", q=0.5, lower=0, upper=1, epsilon=1, delta=1e-6
        ),
        lambda: Session().range_counts(
            str(path), column="y", queries=[(0, 1)], lower=0, upper=1, epsilon=1, delta=1e-6
        ),
    ):
        with pytest.raises(MissingInputError, match=r"^parameter 'column' of (quantiles|range) "):
            call()


@pytest.mark.parametrize(
    ("method", "kwargs", "parameter"),
    [
        ("range_counts", dict(queries=[(0, 2)]), "queries"),  # beyond upper
        ("range_counts", dict(queries=[(-1, 0.5)]), "queries"),  # below lower
        ("range_counts", dict(queries=[(0.6, 0.2)]), "queries"),  # A > B
        ("range_counts", dict(queries=[(0, 1)], upper=0), "upper"),
        ("quantiles", dict(q=0.5, lower=1, upper=1), "upper"),
        ("quantiles", dict(q=0.5, lower=float("nan")), "lower"),
    ],
)
def test_a_range_is_named_by_the_methods_parameters(
    method: str, kwargs: dict[str, Any], parameter: str
) -> None:
    # the hierarchy calls the ends of the range lo and hi and a query's ends value: a caller
    # of the method gave lower, upper and queries
    args: dict[str, Any] = dict(column="x", lower=0, upper=1, epsilon=1, delta=1e-6) | kwargs
    with pytest.raises(ValidationError) as info:
        getattr(Session(), method)(FRAME, **args)
    err = info.value
    assert (err.parameter, err.function) == (parameter, f"Session.{method}"), str(err)


def test_a_missing_or_bad_weight_column_is_named_weight() -> None:
    # the local engine reads the weight column as a key column: its errors said 'key'
    frame = FRAME.with_columns(w=pl.Series([1.5, 2.0, 1.0] * 20))
    sample: dict[str, Any] = dict(key="page", tau=1.0, epsilon=1, delta=1e-6, aggregate=True)
    with pytest.raises(MissingInputError) as missing:
        Session().weighted_sample(frame, weight="wt", **sample)
    assert missing.value.parameter == "weight" and "got 'wt'" in str(missing.value)
    with pytest.raises(ValidationError) as fraction:
        Session().weighted_sample(frame, weight="w", **sample)
    assert fraction.value.parameter == "weight" and "positive integer" in str(fraction.value)
