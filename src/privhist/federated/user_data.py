"""Per-user count vectors over a domain of ``d`` items, stored sparsely (CSR arrays).

The paper (Section 2) has user ``i`` hold ``x_i`` in ``R^d`` with ``x_i[j]`` the number of item
``j`` the user holds. :class:`UserCounts` stores all users as three arrays (``indptr``,
``items``, ``counts``; user ``i`` is ``items[indptr[i]:indptr[i+1]]``), never one object per user.

Sources:

* :func:`from_records`: ``(user, item)`` arrays;
  :func:`privhist.engines.local.federated_data.read_user_counts`: any file :func:`privhist.io.scan`
  reads, with a user column (``top_d`` keeps the ``d`` most frequent items, as the paper
  builds its real-data histograms; that choice looks at the data and is not private, exactly
  as in the paper's experiments).
* :func:`generate_iid` and :func:`generate_heterogeneous`: the paper's synthetic data
  (Section 5, "Common setup", following Liu et al. 2022). Our reading of the heterogeneous
  recipe: ``kappa ~ Dirichlet(2, ..., 2)`` over the ``n`` users; user ``i`` holds
  ``N_i ~ Poisson(items_per_user * n * kappa_i)`` items (``n kappa_i`` has mean 1, so the mean
  is ``items_per_user``; users drawn with 0 items are redrawn, since a user holds at least one
  item), drawn i.i.d. from ``p_i ~ Dirichlet(p / 2)`` with ``p_j`` proportional to ``1 / j``.

Randomness comes only from a :class:`~privhist.core.random.RandomSource` (floats are fine: this
is simulation, not a release path).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError
from privhist.core.random import RandomSource
from privhist.core.validation import check_positive_int
from privhist.federated.kashin import standard_normal, uniform01

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class UserCounts:
    """Sparse per-user count vectors (CSR). Build with :meth:`from_arrays` (validated).

    Attributes:
        indptr: ``n + 1`` non-decreasing offsets.
        items: Item indices in ``[0, d)``, sorted within each user, no repeats.
        counts: Positive counts, aligned with ``items``.
        dimension: ``d``.
        labels: Optional item labels (length ``d``), e.g. the keys of a file.
    """

    indptr: I64
    items: I64
    counts: I64
    dimension: int
    labels: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_arrays(
        cls,
        indptr: Any,
        items: Any,
        counts: Any,
        dimension: int,
        labels: Any = None,
        *,
        allow_empty: bool = False,
    ) -> UserCounts:
        """Validate CSR arrays: ``d >= 1``, every user non-empty, counts > 0, items in range.

        ``allow_empty=True`` accepts users holding no item (the zero vector): a user of a public
        population whose records all lie outside a public domain still takes part, so that the
        number of contributors does not depend on her data (:func:`from_file` with ``domain``).

        >>> u = UserCounts.from_arrays([0, 2, 3], [0, 4, 1], [2, 1, 5], dimension=5)
        >>> u.n_users, u.dense().tolist()
        (2, [[2.0, 0.0, 0.0, 0.0, 1.0], [0.0, 5.0, 0.0, 0.0, 0.0]])
        """
        fn = "UserCounts"
        d = check_positive_int(dimension, fn, "dimension")
        ptr = np.asarray(indptr, dtype=np.int64)
        it = np.asarray(items, dtype=np.int64)
        ct = np.asarray(counts)
        if ptr.ndim != 1 or ptr.size < 2 or ptr[0] != 0 or ptr[-1] != it.size:
            raise InputDataError(f"{fn}: indptr must start at 0 and end at len(items)")
        if it.shape != ct.shape:
            raise InputDataError(f"{fn}: items and counts must have the same length")
        sizes = np.diff(ptr)
        if (sizes < 0).any():
            raise InputDataError(f"{fn}: indptr must be non-decreasing")
        if not allow_empty and (sizes == 0).any():
            raise InputDataError(
                f"{fn}: user {int(np.argmax(sizes == 0))} holds no items (empty users are refused)"
            )
        if ct.size and (ct.dtype.kind not in "iu" or (ct <= 0).any()):
            raise InputDataError(f"{fn}: counts must be positive integers")
        if it.size and (it.min() < 0 or it.max() >= d):
            raise InputDataError(f"{fn}: items must lie in [0, {d})")
        return cls(ptr, it, ct.astype(np.int64), d, labels)

    @property
    def n_users(self) -> int:
        return int(self.indptr.size - 1)

    def user_of_entry(self) -> I64:
        """The user index of every stored entry."""
        return np.repeat(np.arange(self.n_users), np.diff(self.indptr))

    def dense(self, start: int = 0, stop: int | None = None) -> F64:
        """Users ``start:stop`` as a dense float array ``(users, d)``."""
        stop = self.n_users if stop is None else min(stop, self.n_users)
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        out = np.zeros((stop - start, self.dimension))
        rows = np.repeat(np.arange(stop - start), np.diff(self.indptr[start : stop + 1]))
        out[rows, self.items[lo:hi]] = self.counts[lo:hi]
        return out

    def batches(self, size: int) -> Iterator[F64]:
        """Dense blocks of at most ``size`` users, in order."""
        s = check_positive_int(size, "UserCounts.batches", "size")
        for start in range(0, self.n_users, s):
            yield self.dense(start, start + s)

    def l1_norms(self) -> F64:
        return np.asarray(np.add.reduceat(self.counts, self.indptr[:-1]), dtype=np.float64)

    def l2_norms(self) -> F64:
        sq = np.add.reduceat(self.counts.astype(np.float64) ** 2, self.indptr[:-1])
        return np.asarray(np.sqrt(sq))

    def mean_vector(self) -> F64:
        """``x_bar = (1/n) sum_i x_i``, the target of estimation (Section 2)."""
        tot = np.bincount(self.items, weights=self.counts, minlength=self.dimension)
        return np.asarray(tot / self.n_users)

    def subset(self, users: Any) -> UserCounts:
        """The given users (indices), in that order."""
        idx = np.asarray(users, dtype=np.int64)
        sizes = np.diff(self.indptr)[idx]
        starts = self.indptr[idx]
        ptr = np.concatenate([[0], np.cumsum(sizes)])
        gather = np.repeat(starts - ptr[:-1], sizes) + np.arange(int(ptr[-1]))
        return UserCounts(ptr, self.items[gather], self.counts[gather], self.dimension, self.labels)


def from_records(
    users: Any, items: Any, dimension: int | None = None, labels: Any = None
) -> UserCounts:
    """Aggregate ``(user, item)`` records (item indices in ``[0, d)``) into :class:`UserCounts`.

    Users are ordered by first sorted id; ``dimension`` defaults to ``max(item) + 1``.

    >>> u = from_records(["b", "a", "b", "b"], [3, 0, 3, 1])
    >>> u.indptr.tolist(), u.items.tolist(), u.counts.tolist(), u.dimension
    ([0, 1, 3], [0, 1, 3], [1, 1, 2], 4)
    """
    fn = "from_records"
    us = np.asarray(users)
    it = np.asarray(items)
    if us.shape != it.shape or us.ndim != 1:
        raise InputDataError(f"{fn}: users and items must be 1-d arrays of the same length")
    if us.size == 0:
        raise InputDataError(f"{fn}: no records")
    if it.dtype.kind not in "iu" or it.min() < 0:
        raise InputDataError(f"{fn}: items must be non-negative integer indices")
    d = int(it.max()) + 1 if dimension is None else check_positive_int(dimension, fn, "dimension")
    _, uidx = np.unique(us, return_inverse=True)
    return _aggregate(uidx.astype(np.int64), it.astype(np.int64), d, labels)


def _aggregate(
    uidx: I64, items: I64, d: int, labels: Any = None, n_users: int | None = None
) -> UserCounts:
    """CSR arrays from ``(user index, item)`` pairs; with ``n_users`` every user
    ``0..n_users-1`` is kept, those without a pair as empty (zero) vectors."""
    if items.size and items.max() >= d:
        raise InputDataError(f"from_records: items must lie in [0, {d})")
    code = uidx * d + items
    codes, counts = np.unique(code, return_counts=True)
    u = codes // d
    n = (int(u.max()) + 1 if u.size else 0) if n_users is None else n_users
    ptr = np.concatenate([[0], np.cumsum(np.bincount(u, minlength=n))]).astype(np.int64)
    return UserCounts.from_arrays(
        ptr, codes % d, counts, d, labels, allow_empty=n_users is not None
    )


# --------------------------------------------------------------------------------------------
# synthetic data (Section 5)


def zipf_probabilities(d: int) -> F64:
    """``p_j`` proportional to ``1 / j``, ``j = 1..d``."""
    w = 1.0 / np.arange(1, check_positive_int(d, "zipf_probabilities", "d") + 1)
    return np.asarray(w / w.sum())


def _categorical(cdf: F64, rng: RandomSource, size: int) -> I64:
    idx = np.searchsorted(cdf, uniform01(rng, size), side="right")
    return np.asarray(np.minimum(idx, cdf.size - 1), dtype=np.int64)


def generate_iid(n: int, d: int, rng: RandomSource, *, items_per_user: int = 100) -> UserCounts:
    """Each user draws ``items_per_user`` items i.i.d. from ``p_j`` proportional to ``1 / j``.

    >>> from privhist.core.random import SeededRandom
    >>> u = generate_iid(20, 10, SeededRandom(0))
    >>> u.n_users, int(u.l1_norms().min()), int(u.l1_norms().max())
    (20, 100, 100)
    """
    fn = "generate_iid"
    n = check_positive_int(n, fn, "n")
    d = check_positive_int(d, fn, "d")
    k = check_positive_int(items_per_user, fn, "items_per_user")
    cdf = np.cumsum(zipf_probabilities(d))
    items = _categorical(cdf, rng, n * k)
    return _aggregate(np.repeat(np.arange(n, dtype=np.int64), k), items, d)


def gamma_variates(shape: Any, rng: RandomSource) -> F64:
    """``log`` of Gamma(``shape_i``, 1) variates (Marsaglia and Tsang 2000 for shape ``+ 1``,
    then ``G(a) = G(a + 1) U^(1/a)``), in log space so tiny shapes do not underflow."""
    a = np.asarray(shape, dtype=np.float64).ravel()
    b = a + 1.0
    dd = b - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * dd)
    out = np.empty(a.size)
    todo = np.arange(a.size)
    while todo.size:
        z = standard_normal(rng, todo.size)
        u = 1.0 - uniform01(rng, todo.size)
        v = (1.0 + c[todo] * z) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = (v > 0) & (
                np.log(u) < 0.5 * z * z + dd[todo] - dd[todo] * v + dd[todo] * np.log(v)
            )
        out[todo[ok]] = np.log(dd[todo[ok]] * v[ok])
        todo = todo[~ok]
    u = 1.0 - uniform01(rng, a.size)
    return np.asarray(out + np.log(u) / a)


def generate_heterogeneous(
    n: int,
    d: int,
    rng: RandomSource,
    *,
    items_per_user: int = 100,
    batch: int = 4096,
) -> UserCounts:
    """The paper's heterogeneous data (module notes give our reading of Section 5).

    >>> from privhist.core.random import SeededRandom
    >>> u = generate_heterogeneous(50, 10, SeededRandom(0))
    >>> u.n_users, bool(u.l1_norms().min() >= 1)
    (50, True)
    """
    from scipy import special, stats  # here: scipy is slow to import

    fn = "generate_heterogeneous"
    n = check_positive_int(n, fn, "n")
    d = check_positive_int(d, fn, "d")
    k = check_positive_int(items_per_user, fn, "items_per_user")
    p = zipf_probabilities(d)
    log_g = gamma_variates(np.full(n, 2.0), rng)
    kappa = np.exp(log_g - special.logsumexp(log_g))  # Dirichlet(2, ..., 2)
    mean = k * n * kappa
    sizes = np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:  # zero-truncated Poisson: redraw users with no item
        sizes[todo] = stats.poisson.ppf(uniform01(rng, todo.size), mean[todo]).astype(np.int64)
        todo = todo[sizes[todo] == 0]
    users: list[I64] = []
    items: list[I64] = []
    alpha = p / 2
    for start in range(0, n, batch):
        stop = min(n, start + batch)
        m = stop - start
        lg = gamma_variates(np.tile(alpha, m), rng).reshape(m, d)
        probs = np.exp(lg - special.logsumexp(lg, axis=1, keepdims=True))  # Dirichlet(p / 2)
        cdf = np.cumsum(probs, axis=1)
        cdf /= cdf[:, -1:]
        cnt = sizes[start:stop]
        owner = np.repeat(np.arange(m), cnt)
        flat = (owner + uniform01(rng, owner.size) * (1 - 1e-12)).astype(np.float64)
        offset_cdf = (cdf * (1 - 1e-12) + np.arange(m)[:, None]).ravel()
        idx = np.searchsorted(offset_cdf, flat, side="right")
        items.append(np.minimum(idx - owner * d, d - 1).astype(np.int64))
        users.append(owner.astype(np.int64) + start)
    return _aggregate(np.concatenate(users), np.concatenate(items), d)
