"""Keyed noise streams: per-key mechanisms drawn the same way on any engine, in any partitioning.

A per-key mechanism (each key's output depends on that key's counts and independent noise only;
:meth:`privhist.mechanisms.base.Mechanism.key_budget`) can run where the data is: on Spark
executors, over Arrow batches of ``(key, count, units)``. Its randomness must then stay
cryptographic and must not depend on how the engine splits the keys. :func:`release_keyed` does
this, and every engine that draws per-key noise away from the driver computes exactly it:

1. a 256-bit noise secret ``s`` is drawn on the driver from the release's
   :class:`~privhist.core.random.RandomSource` (the operating system's CSPRNG for a private release;
   a seeded run, NOT private, derives it from the seed, so every engine draws the same ``s``);
2. every key falls in one of :data:`NOISE_BLOCKS` blocks by a public function of the key alone
   (:func:`key_blocks`: integer keys modulo the block count, text keys by the first 32 bits of
   SHA-256 of their UTF-8 bytes), so a block's keys do not depend on partitioning;
3. block ``b`` is released by the mechanism's own exact samplers
   (:meth:`~privhist.mechanisms.base.Mechanism.release` on the block's keys in canonical order)
   reading the words of :class:`KeyedStream` ``(s, b)``: the AES-256-CTR keystream under ``s``
   from the counter block ``b * 2**64``;
4. the released rows of all blocks, put in canonical key order, are the release.

Why this is the mechanism's law. AES-256 is a pseudorandom permutation, so the counter blocks
``b * 2**64 + i`` (distinct for distinct ``(b, i)`` while a block reads fewer than ``2**64``
blocks) encrypt to outputs that a computationally bounded observer cannot tell from independent
uniform 128-bit words (PRP/PRF switching, advantage at most ``q**2 / 2**129`` for ``q`` blocks).
Each block's sampler therefore reads what are, computationally, i.i.d. uniform 64-bit words, and
the samplers are exact given uniform words, so each block's output has exactly the mechanism's
law; distinct blocks read disjoint counter ranges, so they are independent. A per-key mechanism
treats keys independently, so releasing the blocks separately has the same joint law as one
release of the whole table, and the privacy proof of the mechanism (the per-key analysis of its
module, checked by the exact hockey-stick tests) carries over unchanged. The block of a key is
public and data-independent; only ``s`` is secret, and it is never published.

Which keys land in a block, and thus which keystream positions a key reads, changes the values
drawn, not their law. The same secret and the same per-key table give the same release on every
engine: the local function :func:`release_keyed` and the Spark executors
(:mod:`privhist.engines.spark.noise`) run the same block function on the same blocks.

Example:
    >>> from privhist.core.data import Counts
    >>> from privhist.core.random import SeededRandom
    >>> from privhist.mechanisms import StabilityHistogram
    >>> counts = Counts.from_arrays(["a", "b", "c"], [500, 2, 900])
    >>> release_keyed(StabilityHistogram(1.0, 1e-6), counts, SeededRandom(3)).keys.tolist()
    ['a', 'c']
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import RandomSource
from privhist.io.release import Release

#: the number of noise blocks (public, fixed: a block's keys never depend on the data's layout)
NOISE_BLOCKS: Final[int] = 64

#: bytes of the noise secret
SECRET_BYTES: Final[int] = 32

#: the mechanisms whose output for a key depends only on that key's counts and its own noise
#: (sparse, no public domain, no joint step): they run per block, on executors where the engine
#: has them; every other mechanism runs on the driver after a distributed count
PER_KEY_MECHANISMS: Final[frozenset[str]] = frozenset(
    {
        "stability",
        "gaussian-threshold",
        "stability-geometric",
        "optimal-selection",
        "pws",
        "sample-and-threshold",
    }
)

#: the Release columns a block can carry, in order
COLUMNS: Final[tuple[str, ...]] = ("values", "estimates", "lower", "upper")


def runs_per_key(mechanism: Any) -> bool:
    """Whether ``mechanism`` is released block by block (see :data:`PER_KEY_MECHANISMS`).

    What matters is that keys draw independently: a mechanism whose guarantee comes from a
    joint analysis of the touched keys (``per_key_composable`` False, e.g. Gaussian noise under
    PLD composition) still draws each key's noise independently, so its joint law is the same
    whether the keys are drawn in one call or in blocks."""
    return getattr(mechanism, "name", None) in PER_KEY_MECHANISMS


def draw_secret(rng: RandomSource) -> bytes:
    """A 256-bit noise secret from ``rng`` (four 64-bit words, little-endian), on the driver."""
    if not isinstance(rng, RandomSource):
        raise ValidationError("rng", "draw_secret", "a RandomSource", type(rng).__name__)
    return rng.uint64(SECRET_BYTES // 8).astype("<u8").tobytes()


class KeyedStream(RandomSource):
    """The AES-256-CTR keystream of block ``block`` under ``secret``, as uniform 64-bit words.

    Example:
        >>> a = KeyedStream(bytes(32), 5).uint64(3)
        >>> b = KeyedStream(bytes(32), 5)
        >>> (b.uint64(1).tolist() + b.uint64(2).tolist()) == a.tolist()
        True
    """

    def __init__(self, secret: bytes, block: int, *, private: bool = False) -> None:
        if not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
            raise ValidationError("secret", "KeyedStream", f"{SECRET_BYTES} bytes", secret)
        if not 0 <= int(block) < 1 << 63:
            raise ValidationError("block", "KeyedStream", "an integer in [0, 2**63)", block)
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        self.block = int(block)
        self.private = bool(private)
        nonce = self.block.to_bytes(8, "big") + bytes(8)  # counter block = block * 2**64
        self._encryptor: Any = Cipher(algorithms.AES(secret), modes.CTR(nonce)).encryptor()

    def uint64(self, n: int) -> npt.NDArray[np.uint64]:
        if n <= 0:
            return np.zeros(0, dtype=np.uint64)
        raw = self._encryptor.update(bytes(8 * int(n)))
        return np.frombuffer(raw, dtype="<u8").astype(np.uint64)

    @property
    def description(self) -> str:
        return f"AES-256-CTR keyed noise stream, block {self.block}"


def key_blocks(keys: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The noise block of each key: integers modulo :data:`NOISE_BLOCKS` (of their 64-bit
    two's-complement value), text by the first 32 bits of SHA-256 of the UTF-8 bytes.

    Example:
        >>> key_blocks([3, -1, 130]).tolist(), key_blocks(["a"]).tolist()
        ([3, 63, 2], [18])
    """
    arr = np.asarray(keys)
    if arr.dtype.kind in "iu":
        out: npt.NDArray[np.int64] = (
            arr.astype(np.int64).view(np.uint64) % np.uint64(NOISE_BLOCKS)
        ).astype(np.int64)
        return out
    return np.fromiter(
        (text_block(str(k)) for k in arr.tolist()), dtype=np.int64, count=int(arr.size)
    )


def text_block(key: str) -> int:
    """The block of one text key (what Spark computes as ``conv(substr(sha2(key, 256), 1, 8),
    16, 10) % NOISE_BLOCKS``)."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % NOISE_BLOCKS


def release_block(
    mechanism: Any,
    keys: npt.ArrayLike,
    counts: npt.ArrayLike,
    units: npt.ArrayLike | None,
    neighbouring: Neighbouring,
    secret: bytes,
    block: int,
    private: bool,
) -> Release:
    """Release the keys of one block with the keystream of ``(secret, block)``: the
    mechanism's sampling step alone (its ``_draw``, the per-key hook; parameters were checked
    on the driver by :func:`check_mechanism`), without metadata."""
    part = Counts.from_arrays(keys, counts, units, neighbouring=neighbouring, function="release")
    out_keys, columns = mechanism._draw(part, KeyedStream(secret, block, private=private))
    columns.pop("info", None)
    return Release(keys=out_keys, **columns)


def check_mechanism(mechanism: Any, neighbouring: Neighbouring, function: str) -> None:
    """A typed error unless ``mechanism`` is per-key and its relation covers ``neighbouring``
    (what :meth:`~privhist.mechanisms.base.Mechanism.release` checks, done once on the driver)."""
    if not runs_per_key(mechanism):
        raise ValidationError(
            "mechanism",
            function,
            f"a per-key mechanism ({', '.join(sorted(PER_KEY_MECHANISMS))})",
            getattr(mechanism, "name", type(mechanism).__name__),
        )
    empty = Counts.from_arrays(
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int64) if neighbouring.relation is Relation.USER else None,
        neighbouring=neighbouring,
    )
    mechanism.release(empty, KeyedStream(bytes(SECRET_BYTES), 0))  # validation only


def assemble(
    mechanism: Any,
    parts: list[Release],
    rng: RandomSource,
    info: dict[str, Any],
    template: Counts | None = None,
) -> Release:
    """One release from the blocks' releases: rows in canonical key order, the mechanism's
    metadata (with how the noise was drawn), the count's facts in the diagnostics."""
    present = [p for p in parts if len(p.keys)]
    if present:
        keys = np.concatenate([p.keys for p in present])
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        cols: dict[str, Any] = {}
        for name in COLUMNS:
            arrays = [getattr(p, name) for p in present]
            if all(a is not None for a in arrays):
                cols[name] = np.concatenate(arrays)[order]
    else:
        empty = template.keys[:0] if template is not None else np.zeros(0, dtype=np.int64)
        keys = empty
        probe = parts[0] if parts else None
        cols = {}
        for name in COLUMNS:
            col = getattr(probe, name, None) if probe is not None else None
            if col is not None:
                cols[name] = col[:0]
    return finish(mechanism, keys, cols, rng, info)


def finish(
    mechanism: Any, keys: Any, cols: dict[str, Any], rng: RandomSource, info: dict[str, Any]
) -> Release:
    """The release of sorted ``keys`` and columns, with metadata (shared by every engine)."""
    meta = mechanism.metadata(rng)
    meta["released_keys"] = len(keys)
    meta["noise"] = {
        "streams": "AES-256-CTR under a 256-bit secret drawn from the release's source",
        "blocks": NOISE_BLOCKS,
    }
    return Release(keys=keys, metadata=meta, diagnostics=dict(info), **cols)


def release_keyed(mechanism: Any, counts: Counts, rng: RandomSource) -> Release:
    """Release ``counts`` with ``mechanism`` block by block from keyed streams (module notes).

    Refuses mechanisms that are not per-key (:func:`runs_per_key`).
    """
    fn = "release_keyed"
    if not isinstance(counts, Counts):
        raise ValidationError("counts", fn, "a privhist Counts object", type(counts).__name__)
    check_mechanism(mechanism, counts.neighbouring, fn)
    secret = draw_secret(rng)
    blocks = key_blocks(counts.keys)
    units = counts.units
    parts = []
    for b in np.unique(blocks).tolist():
        rows = np.flatnonzero(blocks == b)
        parts.append(
            release_block(
                mechanism,
                counts.keys[rows],
                counts.counts[rows],
                None if units is None else units[rows],
                counts.neighbouring,
                secret,
                int(b),
                rng.private,
            )
        )
    if not parts:  # no key: the mechanism's empty draw gives the column layout
        parts.append(
            release_block(
                mechanism,
                counts.keys,
                counts.counts,
                units,
                counts.neighbouring,
                secret,
                0,
                rng.private,
            )
        )
    return assemble(mechanism, parts, rng, counts.info, counts)
