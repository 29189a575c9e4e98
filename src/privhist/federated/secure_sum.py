"""Secure summation as an interface: the server sees only the modular sum of the devices' vectors.

The paper (Section 2, "SecAgg/SecSum") treats the protocol ``P`` as a black box that returns
``sum_i Z_i mod M`` for reports ``Z_i`` in ``Z_M^D`` and leaks nothing else. Protocols in
:mod:`privhist.federated` talk to a :class:`SecureAggregator`:

* devices hand their encoded vectors to :meth:`SecureAggregator.aggregate` (as an iterable of
  batches, so that millions of devices never sit in memory at once);
* the server receives only the returned modular sum.

:class:`IdealSecureSum` is the ideal functionality computed in-process (what a correct protocol
outputs). A cryptographic protocol (e.g. pairwise masking, Bonawitz et al. 2017; Bell et al.
2020) subclasses :class:`SecureAggregator`, keeps the same ``modulus``/``dimension`` contract and
returns the same sum, so the protocols that call ``aggregate`` do not change.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, UnsupportedError, ValidationError
from privhist.core.validation import check_positive_int

I64 = npt.NDArray[np.int64]

#: ``(modulus, dimension) -> SecureAggregator``
AggregatorFactory = Callable[[int, int], "SecureAggregator"]
#: most ``clients x dimension`` entries :func:`secure_histogram` expands in-process
MAX_HISTOGRAM_ENTRIES = 1 << 26


class SecureAggregator(ABC):
    """A secure sum over ``Z_M^D``.

    Args:
        modulus: ``M`` (at least 2, at most ``2**62``).
        dimension: ``D``, the length of every device's vector.
    """

    def __init__(self, modulus: int, dimension: int) -> None:
        fn = type(self).__name__
        self.modulus = check_positive_int(modulus, fn, "modulus", minimum=2)
        if self.modulus > 1 << 62:
            raise ValidationError("modulus", fn, "at most 2**62", modulus)
        self.dimension = check_positive_int(dimension, fn, "dimension")

    @abstractmethod
    def aggregate(self, shares: Iterable[Any]) -> I64:
        """``sum_i Z_i mod M`` over every device vector in ``shares``.

        Args:
            shares: An iterable of arrays of shape ``(devices, D)`` or ``(D,)`` with entries in
                ``[0, M)``.

        Returns:
            int64 array of length ``D`` in ``[0, M)``; nothing else about the inputs.
        """

    def _check_batch(self, batch: Any) -> I64:
        arr = np.asarray(batch)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        fn = f"{type(self).__name__}.aggregate"
        if arr.ndim != 2 or arr.shape[1] != self.dimension:
            raise InputDataError(
                f"{fn}: every share must have {self.dimension} entries; got shape {arr.shape}"
            )
        if arr.dtype.kind not in "iu":
            raise InputDataError(f"{fn}: shares must be integers; got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= self.modulus):
            raise InputDataError(f"{fn}: share entries must lie in [0, {self.modulus})")
        return arr.astype(np.int64, copy=False)


class IdealSecureSum(SecureAggregator):
    """The ideal functionality: the exact modular sum, computed in-process.

    Batches are reduced modulo ``M`` as they arrive (partial sums stay below ``2**63`` for
    batches of up to ``2**62 / M`` devices; larger batches are split), so the result is exact.

    >>> agg = IdealSecureSum(modulus=7, dimension=2)
    >>> agg.aggregate([[[3, 6], [5, 1]], [4, 0]]).tolist()
    [5, 0]
    >>> agg.contributors
    3
    """

    def __init__(self, modulus: int, dimension: int) -> None:
        super().__init__(modulus, dimension)
        #: how many device vectors the last :meth:`aggregate` summed (public in SecAgg)
        self.contributors = 0

    def aggregate(self, shares: Iterable[Any]) -> I64:
        total = np.zeros(self.dimension, dtype=np.int64)
        count = 0
        step = max(1, (1 << 62) // self.modulus)
        for batch in shares:
            arr = self._check_batch(batch)
            for start in range(0, arr.shape[0], step):
                part = arr[start : start + step].sum(axis=0, dtype=np.int64) % self.modulus
                total = (total + part) % self.modulus
            count += arr.shape[0]
        self.contributors = count
        return total


def centred(total: Any, modulus: int) -> I64:
    """Read a modular sum as an integer in ``[0, M)`` (cPBM sums never wrap, so this is the
    true sum; helper for decoders).

    >>> centred([3, 9], 10).tolist()
    [3, 9]
    """
    arr = np.asarray(total, dtype=np.int64)
    m = check_positive_int(modulus, "centred", "modulus", minimum=2)
    return np.asarray(np.mod(arr, m), dtype=np.int64)


def secure_histogram(
    counts: Any,
    aggregator: AggregatorFactory,
    *,
    positions: Any = None,
    dimension: int | None = None,
    zero_clients: int = 0,
) -> I64:
    """A histogram computed the federated way: every client sends the one-hot vector of its key
    through the secure sum, and the server sees only the summed histogram.

    ``counts[i]`` clients hold the key at ``positions[i]`` of a public domain of ``dimension``
    keys (identity positions by default); ``zero_clients`` more clients (e.g. the abstaining
    members of a fixed-size cohort) send all-zero vectors. The modulus is the number of clients
    plus one, so the sum never wraps. The domain must be public (a dictionary known before the
    round), as in Bharadwaj & Cormode (2022), Section 2, where the aggregator sees a histogram.
    With no client at all no protocol runs (an all-zero histogram); a single client is refused
    by a real secure sum (:class:`~privhist.core.errors.ProtocolAbort`), since the sum would be
    its input.

    >>> secure_histogram([2, 0, 1], IdealSecureSum).tolist()
    [2, 0, 1]
    """
    fn = "secure_histogram"
    c = np.asarray(counts, dtype=np.int64).reshape(-1)
    if c.size and c.min() < 0:
        raise ValidationError("counts", fn, "non-negative", int(c.min()))
    pos = np.arange(c.size) if positions is None else np.asarray(positions, dtype=np.int64)
    dim = c.size if dimension is None else int(dimension)
    if pos.shape != c.shape or (pos.size and (pos.min() < 0 or pos.max() >= dim)) or dim < 1:
        raise ValidationError("positions", fn, f"one position in [0, {dim}) per count", pos.size)
    clients = int(c.sum()) + int(zero_clients)
    if clients * dim > MAX_HISTOGRAM_ENTRIES:
        raise UnsupportedError(
            f"{fn}: {clients} clients x {dim} keys is too large to run the secure sum "
            "in-process; use the ideal secure sum"
        )
    if clients == 0:  # nobody sends: the histogram is empty and no protocol needs to run
        return np.zeros(dim, dtype=np.int64)
    owner = np.repeat(pos, c)

    def batches() -> Iterator[I64]:
        step = 4096
        for start in range(0, owner.size, step):
            part = owner[start : start + step]
            rows = np.zeros((part.size, dim), dtype=np.int64)
            rows[np.arange(part.size), part] = 1
            yield rows
        for start in range(0, int(zero_clients), step):
            yield np.zeros((min(step, int(zero_clients) - start), dim), dtype=np.int64)

    agg = aggregator(max(2, clients + 1), dim)
    return agg.aggregate(batches())
