"""Keyed pseudorandom priorities for (user, key) pairs: the same in every engine.

Contribution bounding keeps, for a user holding more than ``k`` keys, the ``k`` keys of smallest
priority (:mod:`privhist.engines.local.counting`). The priorities must be i.i.d. uniform and
independent of the data; they must also not depend on how an engine splits the data into
partitions, chunks or passes, or on the order in which rows arrive. Both hold when the priority of a
pair is a pseudorandom function of the pair under a secret drawn once per release:

    priority(user, key) = first 64 bits of AES-256_s( code(user) || code(key) )

* ``s`` is 256 bits drawn from the release's :class:`~privhist.core.random.RandomSource` (the
  operating system's CSPRNG for a private release) on the driver, before anything else is drawn;
  executors receive ``s`` and nothing else. A seeded (NOT private) run draws ``s`` from its seed, so
  every engine computes the same priorities and, with the same counts, the same release.
* ``code`` maps an id to 64 bits injectively for integer ids (the int64 value itself) and, for text
  ids, as the first 8 bytes of BLAKE2b keyed with ``s`` over the UTF-8 bytes (a collision between
  two ids of one user, probability about ``m**2 / 2**65`` for a user with ``m`` keys, gives their
  pairs the same priority; a tie is broken by key order).
* AES is a pseudorandom permutation of 128-bit blocks, so on distinct blocks its outputs are
  indistinguishable from distinct uniform values (the PRP/PRF switching lemma bounds the difference
  from i.i.d. uniform by ``q**2 / 2**129`` for ``q`` pairs); their first 64 bits are then
  indistinguishable from i.i.d. uniform 64-bit priorities, for a computationally bounded observer.
  AES runs in ECB mode over a packed array of blocks (AES-NI, ~0.02 microseconds a pair), which
  here is exactly the block-wise PRF evaluation, not a mode of encryption of a message.

The choice for one user depends only on that user's pairs and ``s``, so removing or adding a user
leaves everyone else's choices unchanged: the sensitivity argument of contribution bounding is the
same as with fresh random priorities.

Records within a (user, group) pair (aggregations keep at most ``c`` of them) are named by
:func:`record_codes`: a fixed public 64-bit mixing of the group's code, the record's values and its
rank among the user's identical records, which then takes the place of ``code(key)`` above. Any
function of a user's own records would keep the guarantee; this one keeps the choice uniform (two
distinct records of a user share a name with probability about ``m**2 / 2**65``, and share a
priority then) and is the same in every engine, computed on whole arrays.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource

if TYPE_CHECKING:  # Polars loads where a column is coded: the executors' workers rarely need it
    import polars as pl

U64 = npt.NDArray[np.uint64]

#: bytes of the secret
SECRET_BYTES: Final[int] = 32

#: pairs encrypted per call of the cipher (two 256 KiB buffers)
_CHUNK: Final[int] = 1 << 14


_GOLDEN: Final = np.uint64(0x9E3779B97F4A7C15)
_MIX1: Final = np.uint64(0xBF58476D1CE4E5B9)
_MIX2: Final = np.uint64(0x94D049BB133111EB)
#: a value's code when the cell is empty
_NULL: Final = np.uint64(0xD6E8FEB86659FD93)


def _splitmix(x: U64) -> U64:
    """SplitMix64's output function (Steele, Lea & Flood 2014) on every word (wrapping)."""
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    out: U64 = z ^ (z >> np.uint64(31))
    return out


def group_code(key: Any) -> int:
    """A group's 64-bit code in a record's name: an integer's int64 bits, a text's first 8 bytes
    of (unkeyed) BLAKE2b over its UTF-8 bytes."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return int(np.int64(key).view(np.uint64))
    digest = hashlib.blake2b(str(key).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def record_codes(
    groups: U64, values: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]], ranks: Any
) -> U64:
    """64-bit names of records (module notes): the group codes (:func:`group_code`) mixed with
    each value column (``(values, is_null)``) and the rank among the user's identical records.

    >>> import numpy as np
    >>> g = np.array([group_code("fr")] * 2, dtype=np.uint64)
    >>> v = [(np.array([3, 3]), np.array([False, False]))]
    >>> a, b = record_codes(g, v, np.array([0, 1]))
    >>> bool(a != b)
    True
    """
    with np.errstate(over="ignore"):
        h = _splitmix(np.asarray(groups, dtype=np.uint64))
        for column, null in values:
            word = _splitmix(np.asarray(column, dtype=np.int64).view(np.uint64))
            h = _splitmix(h ^ np.where(np.asarray(null, dtype=bool), _NULL, word))
        out: U64 = _splitmix(h ^ np.asarray(ranks, dtype=np.int64).view(np.uint64))
    return out


class PairPriorities:
    """The keyed priority function of one release (see the module notes).

    Example:
        >>> import numpy as np
        >>> from privhist.core.random import SeededRandom
        >>> f = PairPriorities.draw(SeededRandom(1))
        >>> p = f(np.array([1, 1, 2]), np.array([5, 6, 5]))
        >>> p.dtype, len(set(p.tolist())), (f(np.array([1]), np.array([6])) == p[1]).all()
        (dtype('uint64'), 3, np.True_)
    """

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
            raise ValidationError("secret", "PairPriorities", f"{SECRET_BYTES} bytes", secret)
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        self._secret = secret
        self._cipher = Cipher(algorithms.AES(secret), modes.ECB())

    @classmethod
    def draw(cls, rng: RandomSource) -> PairPriorities:
        """A new secret from ``rng`` (four 64-bit words, little-endian)."""
        return cls(rng.uint64(SECRET_BYTES // 8).astype("<u8").tobytes())

    @property
    def secret(self) -> bytes:
        """The secret, for shipping to an engine's workers (never to be published)."""
        return self._secret

    def codes(self, values: npt.ArrayLike) -> U64:
        """64-bit codes of ids: integers as their int64 bits, text by keyed BLAKE2b."""
        arr = np.asarray(values)
        if arr.dtype.kind in "iu":
            return arr.astype(np.int64, copy=False).view(np.uint64)
        if arr.size == 0:
            return np.zeros(0, dtype=np.uint64)
        # each distinct text hashed once, looked up by a dict (no sort of Python objects)
        seen: dict[str, int] = {}
        code = self._text_code

        def one(text: str) -> int:
            c = seen.get(text)
            if c is None:
                c = seen[text] = code(text)
            return c

        out: U64 = np.fromiter(
            (one(v) for v in map(str, arr.reshape(-1).tolist())), dtype=np.uint64, count=arr.size
        )
        return out.reshape(arr.shape)

    def _text_code(self, text: str) -> int:
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=self._secret).digest()
        return int.from_bytes(digest, "little")

    def __call__(self, users: npt.ArrayLike, keys: npt.ArrayLike) -> U64:
        """The priorities of the pairs ``(users[i], keys[i])``."""
        u = self.codes(users)
        k = self.codes(keys)
        if u.shape != k.shape:
            raise ValidationError("keys", "PairPriorities", f"shape {u.shape}", k.shape)
        n = int(u.shape[0])
        result: U64 = np.empty(n, dtype=np.uint64)
        if n == 0:
            return result
        # in chunks: buffers that stay in cache instead of arrays of 16 bytes a pair (and are
        # not zero-filled: the cipher overwrites them)
        size = min(n, _CHUNK)
        blocks = np.empty((size, 2), dtype="<u8")
        out = np.empty(16 * size + 15, dtype=np.uint8)
        words = out[: 16 * size].view("<u8")
        encryptor: Any = self._cipher.encryptor()
        for start in range(0, n, size):
            stop = min(n, start + size)
            m = stop - start
            blocks[:m, 0] = u[start:stop]
            blocks[:m, 1] = k[start:stop]
            encryptor.update_into(blocks[:m].view(np.uint8).reshape(-1), out)
            result[start:stop] = words[0 : 2 * m : 2]
        return result


class LazyPriorities:
    """Draws the secret from ``rng`` on first use only, so that a count in which no user holds
    more than ``k`` keys draws no randomness (and every pass of a count shares one secret).
    Threads may share one instance: the first use draws under a lock, exactly once."""

    def __init__(self, rng: RandomSource) -> None:
        self.rng = rng
        self._f: PairPriorities | None = None
        self._lock = threading.Lock()

    def _function(self) -> PairPriorities:
        f = self._f
        if f is None:
            with self._lock:
                if self._f is None:
                    self._f = PairPriorities.draw(self.rng)
                f = self._f
        return f

    def codes(self, values: npt.ArrayLike) -> U64:
        """:meth:`PairPriorities.codes` under the secret (drawn now if not yet)."""
        return self._function().codes(values)

    def __call__(self, users: npt.ArrayLike, keys: npt.ArrayLike) -> U64:
        return self._function()(users, keys)


def _per_distinct(series: pl.Series, codes_of: Any) -> U64:
    """``codes_of(distinct)`` (64-bit codes of a table's distinct values) for every row, each
    distinct value coded once."""
    import polars as pl

    distinct = series.unique()
    codes = pl.Series(np.asarray(codes_of(distinct), dtype=np.uint64), dtype=pl.UInt64)
    out: U64 = series.replace_strict(distinct, codes, return_dtype=pl.UInt64).to_numpy()
    return out


def column_codes(prio: PairPriorities | LazyPriorities, series: pl.Series) -> npt.NDArray[np.int64]:
    """The codes :meth:`PairPriorities.codes` gives a column's values (integers as themselves,
    text under the secret), as int64, hashing each distinct text once; passing them to the
    priority function gives the priorities the values would."""
    if series.dtype.is_integer():
        out: npt.NDArray[np.int64] = series.to_numpy().astype(np.int64, copy=False)
        return out
    codes = _per_distinct(series, lambda d: prio.codes(d.to_numpy().astype(object)))
    return codes.view(np.int64)


def group_codes(series: pl.Series) -> U64:
    """:func:`group_code` of every key of a column (integers as their int64 bits), each distinct
    text once."""
    if series.dtype.is_integer():
        import polars as pl

        out: U64 = series.cast(pl.Int64).to_numpy().view(np.uint64)
        return out
    return _per_distinct(series, lambda d: [group_code(k) for k in d.to_list()])
