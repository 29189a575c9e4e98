"""The sparse count table the engines answer trees with: every read against the dense table."""

from __future__ import annotations

import numpy as np
import pytest

from privhist.core.errors import ValidationError
from privhist.core.sparse import SparseCounts


def test_reads_match_the_dense_table() -> None:
    g = np.random.default_rng(1)
    dense = np.where(g.random((7, 50)) < 0.2, g.integers(1, 100, (7, 50)), 0)
    sparse = SparseCounts.from_dense(dense)
    assert sparse.nnz == int((dense != 0).sum())
    assert (np.asarray(sparse) == dense).all() and sparse.tolist() == dense.tolist()
    rows, cols = g.integers(0, 7, 500), g.integers(0, 50, 500)
    assert (sparse.cells(rows, cols) == dense[rows, cols]).all()
    for i in range(7):
        for start in (0, 13, 49):
            c, v = sparse.row(i, start)
            want = np.flatnonzero(dense[i, start:]) + start
            assert c.tolist() == want.tolist() and v.tolist() == dense[i, want].tolist()


def test_cells_given_twice_add_up_and_zeros_are_dropped() -> None:
    s = SparseCounts.from_cells((2, 3), [1, 0, 1, 1], [2, 0, 2, 0], [4, 0, 5, 1])
    assert s.tolist() == [[0, 0, 0], [1, 0, 9]] and s.nnz == 2
    empty = SparseCounts.from_cells((2, 3), [], [], [])
    assert empty.cells([0, 1], [2, 2]).tolist() == [0, 0] and empty.row(1)[0].size == 0


def test_bad_tables_are_refused() -> None:
    with pytest.raises(ValidationError):
        SparseCounts((2, 2), [3, 1], [1, 1])
    with pytest.raises(ValidationError):
        SparseCounts((2, 2), [4], [1])
    with pytest.raises(ValidationError):
        SparseCounts.from_dense(np.zeros(3))


def test_take_rows_keeps_the_rows_asked_in_their_order() -> None:
    dense = np.array([[0, 3, 0], [1, 0, 0], [0, 0, 0], [5, 0, 7]])
    s = SparseCounts.from_dense(dense)
    for rows in ([0, 3], [1, 2], [3], [0, 1, 2, 3], []):
        got = s.take_rows(np.array(rows, dtype=np.int64))
        assert got.shape == (len(rows), 3)
        assert np.asarray(got).tolist() == dense[rows].tolist()
