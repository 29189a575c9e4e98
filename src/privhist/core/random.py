"""``RandomSource``: the only way randomness enters privhist.

* :class:`SecureRandom` reads the operating system's CSPRNG (``os.urandom``, i.e. ``getrandom``
  on Linux). It is the default for every release.
* :class:`SeededRandom` is reproducible (NumPy's PCG64 seeded by the caller) for simulations,
  experiments and tests. Releases drawn with it are marked ``private = False``.

Everything else is built on :meth:`RandomSource.uint64`, a vector of independent uniform 64-bit
words, so both sources share one exact implementation of uniform integers and bits. Code under
``noise/``, ``mechanisms/`` and ``federated/`` takes a ``RandomSource`` argument and never imports
``random`` or ``numpy.random`` (a test enforces this).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

_TWO64 = 1 << 64


class RandomSource(ABC):
    """Abstract source of uniform random 64-bit words."""

    #: whether releases drawn from this source may be called differentially private
    private: bool = False

    @abstractmethod
    def uint64(self, n: int) -> U64:
        """``n`` independent uniform words in [0, 2**64)."""

    @property
    @abstractmethod
    def description(self) -> str:
        """A short description for release metadata."""

    # -- derived, exact helpers -------------------------------------------------------------

    def bits(self, n: int) -> npt.NDArray[np.bool_]:
        """``n`` independent fair bits."""
        words = self.uint64((n + 63) // 64)
        return np.unpackbits(words.view(np.uint8))[:n].astype(np.bool_)

    def uniform_below(self, bound: int | npt.ArrayLike, size: int | None = None) -> I64:
        """Uniform integers in ``[0, bound)``, exactly, by rejection (no modulo bias).

        ``bound`` is a positive int below 2**63 or an array of them (one draw per entry; then
        ``size`` must be None). Words below ``2**64 mod bound`` are rejected, so the accepted range
        is a whole number of copies of ``[0, bound)`` (the OpenBSD ``arc4random_uniform`` rule).
        """
        if np.ndim(bound) == 0:
            b_int = int(bound)  # type: ignore[arg-type]
            if b_int < 1 or b_int >= 1 << 63:
                raise ValidationError("bound", "uniform_below", "an integer in [1, 2**63)", bound)
            n = 1 if size is None else int(size)
            b = np.full(n, b_int, dtype=np.uint64)
        else:
            if size is not None:
                raise ValidationError("size", "uniform_below", "None when bound is an array", size)
            arr = np.asarray(bound)
            if arr.size and (arr.min() < 1 or arr.max() >= 1 << 63):
                raise ValidationError(
                    "bound",
                    "uniform_below",
                    "integers in [1, 2**63)",
                    f"range {arr.min()}..{arr.max()}",
                )
            b = arr.astype(np.uint64)
        out = np.empty(b.shape[0], dtype=np.uint64)
        # 2**64 mod b, computed in uint64 as (-b) mod b
        with np.errstate(over="ignore"):
            low = (np.uint64(0) - b) % b
        todo = np.arange(b.shape[0])
        while todo.size:
            w = self.uint64(todo.size)
            ok = w >= low[todo]
            idx = todo[ok]
            out[idx] = w[ok] % b[idx]
            todo = todo[~ok]
        return out.astype(np.int64)

    def randbelow(self, bound: int) -> int:
        """One exact uniform integer in ``[0, bound)`` for a Python int of any size."""
        if bound < 1:
            raise ValidationError("bound", "randbelow", "an integer >= 1", bound)
        nbits = max(1, (bound - 1).bit_length())
        nwords = (nbits + 63) // 64
        excess = nwords * 64 - nbits
        while True:
            words = self.uint64(nwords)
            value = 0
            for w in words.tolist():
                value = (value << 64) | int(w)
            value >>= excess
            if value < bound:
                return value

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.description, "private": self.private}


class SecureRandom(RandomSource):
    """The operating system's CSPRNG (``os.urandom``). The default for every release."""

    private = True

    def uint64(self, n: int) -> U64:
        if n <= 0:
            return np.zeros(0, dtype=np.uint64)
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()

    @property
    def description(self) -> str:
        return "SecureRandom (os.urandom)"


class SeededRandom(RandomSource):
    """A reproducible source (NumPy PCG64). Its releases are marked not private.

    >>> a, b = SeededRandom(7), SeededRandom(7)
    >>> bool((a.uint64(4) == b.uint64(4)).all())
    True
    """

    private = False

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValidationError("seed", "SeededRandom", "an integer >= 0", seed)
        self.seed = int(seed)
        self._bitgen = np.random.PCG64(self.seed)

    def uint64(self, n: int) -> U64:
        if n <= 0:
            return np.zeros(0, dtype=np.uint64)
        return np.asarray(self._bitgen.random_raw(n), dtype=np.uint64)

    @property
    def description(self) -> str:
        return f"SeededRandom(seed={self.seed}) - reproducible, NOT private"


def default_source(seed: int | None = None) -> RandomSource:
    """``SecureRandom()`` unless a seed is given (then ``SeededRandom(seed)``)."""
    return SecureRandom() if seed is None else SeededRandom(seed)
