"""A groups x cells table of integer counts kept by its non-zero cells.

A quantile tree has ``16 + 16**2 + 16**3 + 16**4 = 69,904`` nodes per group; dense, 1,200 groups
take 670 MB, although a group of ``n`` records fills at most ``4 n`` of them. :class:`SparseCounts`
keeps only the non-zero cells, by their flat index ``row * columns + column`` in increasing order,
and answers the reads a release makes: arbitrary cells (a tree descent reads ``16`` children of a
node per group and level) and one row's non-zero cells from a column on (the leaves).
``numpy.asarray`` gives the dense table (for tests and small tables).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError

I64 = npt.NDArray[np.int64]


class SparseCounts:
    """Counts by non-zero cell (see the module notes)."""

    def __init__(self, shape: tuple[int, int], flat: Any, values: Any) -> None:
        rows, columns = int(shape[0]), int(shape[1])
        flat_a = np.asarray(flat, dtype=np.int64).reshape(-1)
        values_a = np.asarray(values, dtype=np.int64).reshape(-1)
        if flat_a.shape != values_a.shape:
            raise ValidationError("values", "SparseCounts", "one value per cell", values_a.size)
        if flat_a.size and (
            flat_a[0] < 0 or flat_a[-1] >= rows * columns or (np.diff(flat_a) <= 0).any()
        ):
            raise ValidationError("flat", "SparseCounts", "increasing cells inside the table", 0)
        keep = values_a != 0
        self.shape = (rows, columns)
        self.flat: I64 = flat_a[keep]
        self.values: I64 = values_a[keep]

    @classmethod
    def from_cells(
        cls, shape: tuple[int, int], rows: Any, columns: Any, values: Any
    ) -> SparseCounts:
        """From ``(row, column, value)`` triples (a cell given twice has its values added)."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        c = np.asarray(columns, dtype=np.int64).reshape(-1)
        v = np.asarray(values, dtype=np.int64).reshape(-1)
        flat = r * int(shape[1]) + c
        unique, inverse = np.unique(flat, return_inverse=True)
        summed = np.zeros(unique.shape[0], dtype=np.int64)
        np.add.at(summed, inverse.reshape(-1), v)
        return cls(shape, unique, summed)

    @classmethod
    def from_dense(cls, array: Any) -> SparseCounts:
        a = np.asarray(array, dtype=np.int64)
        if a.ndim != 2:
            raise ValidationError("array", "SparseCounts", "a 2-dimensional table", a.ndim)
        flat = np.flatnonzero(a)
        return cls((a.shape[0], a.shape[1]), flat, a.reshape(-1)[flat])

    @property
    def nnz(self) -> int:
        return int(self.flat.shape[0])

    def __len__(self) -> int:
        return self.shape[0]

    def cells(self, rows: Any, columns: Any) -> I64:
        """The counts at ``(rows[i], columns[i])`` (0 where none is kept)."""
        q = np.asarray(rows, dtype=np.int64) * self.shape[1] + np.asarray(columns, dtype=np.int64)
        if self.flat.size == 0:
            return np.zeros(q.shape, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.flat, q), self.flat.size - 1)
        out: I64 = np.where(self.flat[pos] == q, self.values[pos], 0)
        return out

    def take_rows(self, rows: Any) -> SparseCounts:
        """The table of the rows at the increasing positions ``rows``, in that order."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        width = self.shape[1]
        if r.size == 0:
            return SparseCounts((0, width), np.zeros(0, np.int64), np.zeros(0, np.int64))
        of = self.flat // width
        at = np.minimum(np.searchsorted(r, of), r.size - 1)
        keep = r[at] == of
        flat = at[keep] * width + self.flat[keep] % width
        return SparseCounts((int(r.size), width), flat, self.values[keep])

    def row(self, i: int, start: int = 0) -> tuple[I64, I64]:
        """Row ``i``'s non-zero cells from column ``start`` on: ``(columns, counts)``."""
        base = int(i) * self.shape[1]
        lo, hi = np.searchsorted(self.flat, [base + start, base + self.shape[1]])
        return self.flat[lo:hi] - base, self.values[lo:hi]

    def __array__(self, dtype: Any = None, copy: Any = None) -> npt.NDArray[Any]:
        out = np.zeros(self.shape[0] * self.shape[1], dtype=np.int64)
        out[self.flat] = self.values
        dense = out.reshape(self.shape)
        return dense if dtype is None else dense.astype(dtype)

    def tolist(self) -> list[Any]:
        result: list[Any] = np.asarray(self).tolist()
        return result
