"""Populations of clients: aggregation, scale, the Zipf apportionment, files, empty input."""

from __future__ import annotations

import numpy as np
import pytest

from privhist.core.errors import InputDataError, ValidationError
from privhist.engines.local.federated_data import read_population
from privhist.federated.population import Population


def test_from_counts_merges_sorts_and_drops_zero() -> None:
    pop = Population.from_counts(["b", "a", "b", "c"], [2, 5, 3, 0])
    assert pop.items.tolist() == ["a", "b"]
    assert pop.counts.tolist() == [5, 5]
    assert pop.size == 10 and len(pop) == 2
    assert pop.count_of("b") == 5 and pop.count_of("zz") == 0


def test_from_items_and_iterable_agree_with_unique() -> None:
    words = ["x", "y", "x", "z", "x", "y"] * 50
    expected = dict(zip(*np.unique(words, return_counts=True), strict=True))
    a = Population.from_items(words)
    b = Population.from_iterable((w for w in words), chunk_size=7)  # many chunks and merges
    for pop in (a, b):
        assert dict(zip(pop.items.tolist(), pop.counts.tolist(), strict=True)) == expected
        assert pop.size == len(words)


def test_zipf_apportionment_sums_exactly_and_follows_the_weights() -> None:
    n, b, s = 10**9, 1000, 1.1
    pop = Population.zipf(n, b, s)
    assert pop.size == n  # exact, no per-client objects
    w = np.array([(i + 1) ** -s for i in range(b)])
    exact = n * w / w.sum()
    assert np.all(np.abs(pop.counts - exact) < 1.0)  # largest remainder: within one client


def test_zipf_small_by_hand() -> None:
    # weights 1, 1/2, 1/3 of 11/6: 6 clients -> 3.27, 1.64, 1.09 -> floors 3,1,1 + 1 to item 1
    assert Population.zipf(6, 3, 1.0).counts.tolist() == [3, 2, 1]


def test_from_file_counts_records(tmp_path) -> None:
    f = tmp_path / "clients.csv"
    f.write_text("word\nhi\nhey\nhi\n\n")
    pop = read_population(f, key="word")
    assert pop.items.tolist() == ["hey", "hi"] and pop.counts.tolist() == [1, 2]


def test_empty_populations_are_errors(tmp_path) -> None:
    with pytest.raises(InputDataError, match="empty"):
        Population.from_counts(["a"], [0])
    with pytest.raises(InputDataError, match="empty"):
        Population.from_counts([], [])
    with pytest.raises(InputDataError, match="empty"):
        Population.from_items([])
    with pytest.raises(InputDataError, match="empty"):
        Population.from_iterable(iter(()))
    f = tmp_path / "empty.csv"
    f.write_text("word\n")
    with pytest.raises(InputDataError):
        read_population(f, key="word")


def test_bad_arguments_are_typed() -> None:
    with pytest.raises(ValidationError, match="parameter 'counts'"):
        Population.from_counts(["a"], [-1])
    with pytest.raises(ValidationError, match="parameter 'counts'"):
        Population.from_counts(["a", "b"], [1])
    with pytest.raises(ValidationError, match="parameter 'clients'"):
        Population.zipf(0, 10)
    with pytest.raises(ValidationError, match="parameter 'exponent'"):
        Population.zipf(10, 10, -1.0)
    with pytest.raises(ValidationError, match="parameter 'items'"):
        Population.from_iterable(["a", None])
