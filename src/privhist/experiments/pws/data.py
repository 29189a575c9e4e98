"""The experiment's data (Section 8): Zipf frequencies, the uniform selection of Figure 5, and the
key counts of the real datasets."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.experiments import _common
from privhist.experiments.pws.settings import I64, UNIFORM_COPIES, UNIFORM_MAX
from privhist.mechanisms.sampling.pws import schemes


def zipf_frequencies(n: int, alpha: float) -> I64:
    """Zipf[alpha] frequencies over ``n`` keys: ``floor((n / k)^alpha)`` for ``k = 1..n``.

    Exact integer arithmetic for ``alpha`` in ``{0.5, 1, 2}`` (``floor(sqrt(n / k)) =
    isqrt(n // k)``); other exponents in floating point.

    >>> zipf_frequencies(4, 1.0).tolist()
    [4, 2, 1, 1]
    >>> zipf_frequencies(4, 2.0).tolist()
    [16, 4, 1, 1]
    >>> zipf_frequencies(9, 0.5).tolist()
    [3, 2, 1, 1, 1, 1, 1, 1, 1]
    """
    fn = "zipf_frequencies"
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= 10**8:
        raise ValidationError("n", fn, "an integer in [1, 10**8]", n)
    a = float(alpha)
    if not math.isfinite(a) or a <= 0 or a > 3:
        raise ValidationError("alpha", fn, "a number in (0, 3]", alpha)
    k = np.arange(1, int(n) + 1, dtype=np.int64)
    nn = np.int64(n)
    if a == 1.0:
        out: I64 = nn // k
    elif a == 2.0:
        if n > 3 * 10**9:  # pragma: no cover - excluded by the bound on n
            raise ValidationError("n", fn, "n**2 within int64", n)
        out = (nn * nn) // (k * k)
    elif a == 0.5:
        out = np.floor(np.sqrt((nn // k).astype(np.float64))).astype(np.int64)
        # correct the float square root to the exact integer one
        out -= (out * out > nn // k).astype(np.int64)
        out += ((out + 1) * (out + 1) <= nn // k).astype(np.int64)
    else:
        out = np.floor((float(n) / k.astype(np.float64)) ** a).astype(np.int64)
    return np.maximum(out, 1)


def uniform_grid_frequencies(max_frequency: int = UNIFORM_MAX, copies: int = UNIFORM_COPIES) -> I64:
    """Each frequency ``1..max_frequency`` exactly ``copies`` times (the expected composition of
    ``max_frequency * copies`` keys with frequencies uniform on ``1..max_frequency``).

    >>> uniform_grid_frequencies(3, 2).tolist()
    [1, 1, 2, 2, 3, 3]
    """
    return np.repeat(np.arange(1, max_frequency + 1, dtype=np.int64), copies)


def frequency_histogram(freqs: npt.ArrayLike) -> tuple[I64, I64]:
    """Distinct frequencies (sorted) and how many keys have each one.

    >>> [a.tolist() for a in frequency_histogram([3, 1, 3, 2, 3])]
    [[1, 2, 3], [1, 1, 3]]
    """
    f = schemes.check_frequencies(freqs, "frequency_histogram")
    if f.size == 0:
        raise ValidationError("frequencies", "frequency_histogram", "at least one key", "none")
    values, counts = np.unique(f, return_counts=True)
    return values.astype(np.int64), counts.astype(np.int64)


def read_key_counts(path: str | Path, fmt: str) -> I64:
    """Per-key record counts (sorted) of a file read with :func:`privhist.io.readers.scan`
    (``fimi``: every item of every basket is one record; ``text``: every word token is one
    record)."""
    _, counts = _common.read_key_counts(path, fmt, "experiment pws")
    return np.sort(counts)
