"""The data universe of the sparse histograms (Algorithms 5, 7 and 8 of Balcer & Vadhan):
the integers ``[0, 2**B)`` or a public domain of keys."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource
from privhist.mechanisms._domain import check_domain
from privhist.mechanisms.finite.geometric import _check_int


class Universe:
    """The data universe ``X``: ``[0, 2**bits)`` or a sorted domain of keys. Elements are
    identified by their index ``0..size-1`` (for ``bits``, the integer itself)."""

    def __init__(self, bits: int | None, domain: npt.ArrayLike | None, function: str) -> None:
        if domain is not None:
            self.domain: npt.NDArray[Any] | None = check_domain(domain, function)
            self.bits: int | None = None
            self.size = int(self.domain.shape[0])
            return
        if bits is None:
            raise ValidationError(
                "universe_bits", function, "an integer in [1, 64] (or a domain)", bits
            )
        self.domain = None
        self.bits = _check_int(bits, function, "universe_bits", 1, 64)
        self.size = 1 << self.bits

    def describe(self) -> str:
        return f"[0, 2**{self.bits})" if self.bits is not None else f"domain of {self.size} keys"

    def key_array(self, elements: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Keys of the element indices (sorted indices give sorted keys)."""
        if self.domain is not None:
            return self.domain[elements.astype(np.int64)]
        dtype = np.uint64 if self.bits is not None and self.bits > 62 else np.int64
        return np.asarray(elements, dtype=dtype)

    def elements(self, keys: npt.NDArray[Any], function: str) -> npt.NDArray[np.uint64]:
        """Element indices of data keys; keys outside the universe raise InputDataError."""
        if keys.shape[0] == 0:
            return np.zeros(0, dtype=np.uint64)
        if self.domain is not None:
            try:
                pos = np.searchsorted(self.domain, keys)
            except TypeError:
                raise InputDataError(
                    f"{function}: the data's keys are not of the universe's type"
                ) from None
            pos_c = np.minimum(pos, self.size - 1)
            inside = (pos < self.size) & (self.domain[pos_c] == keys)
            if not inside.all():
                raise InputDataError(
                    f"{function}: {int((~inside).sum())} data keys lie outside the universe "
                    f"({self.describe()})"
                )
            return pos_c.astype(np.uint64)
        assert self.bits is not None
        if keys.dtype.kind not in "iuO":
            raise InputDataError(
                f"{function}: keys must be integers; these lie outside the universe "
                f"{self.describe()}"
            )
        ok = True
        try:
            as_int = [int(k) for k in keys.tolist()]
        except (TypeError, ValueError):
            ok = False
        if ok:
            ok = all(0 <= k < self.size for k in as_int)
        if not ok:
            raise InputDataError(
                f"{function}: data keys lie outside the universe {self.describe()}"
            )
        return np.array(as_int, dtype=np.uint64)

    def draw(self, rng: RandomSource, count: int) -> npt.NDArray[np.uint64]:
        """``count`` uniform elements (with replacement), exact."""
        if count == 0:
            return np.zeros(0, dtype=np.uint64)
        if self.bits is not None:
            return np.asarray(rng.uint64(count) >> np.uint64(64 - self.bits), dtype=np.uint64)
        return np.asarray(rng.uniform_below(self.size, count), dtype=np.uint64)
