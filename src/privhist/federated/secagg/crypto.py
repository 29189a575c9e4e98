"""Cryptographic primitives of the secure aggregation protocol, all from ``cryptography``.

* key agreement: X25519 (RFC 7748), the ``KA`` of Bonawitz et al. (CCS 2017), Section 4
  ("Cryptographic primitives", Diffie-Hellman key agreement composed with a hash);
* key derivation: HKDF-SHA256 (RFC 5869) binds every agreed secret to the round and its purpose;
* authenticated encryption: AES-256-GCM, the ``AE`` used for the Shamir shares that travel
  through the server (Bonawitz et al., Section 4, "Authenticated encryption");
* the mask generator ``PRG``: AES-256 in counter mode expands a 32-byte seed into 64-bit words,
  each cut to ``w = bitlen(q - 1)`` bits and kept only when below ``q`` (rejection sampling), so
  every mask entry is uniform on ``[0, q)`` with no modulo bias, for any modulus ``q >= 2``
  (cPBM's ``n m + 1`` included). An accepted ``w``-bit word is below ``q`` with probability
  ``q / 2**w > 1/2``.

Randomness for keys and seeds comes from a :class:`~privhist.core.random.RandomSource`
(``SecureRandom`` in real use), never from ``os.urandom`` directly.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import RandomSource

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

#: bytes of seeds, keys and agreed secrets
SEED_BYTES = 32
#: bytes of an AES-GCM nonce
NONCE_BYTES = 12
#: largest supported modulus (sums of two residues stay inside int64)
MAX_MODULUS = 1 << 62

_MASK_INFO = b"privhist/secagg/v1/mask"
_ENC_INFO = b"privhist/secagg/v1/share-encryption"
_COMMIT_INFO = b"privhist/secagg/v2/share-commitment"
#: bytes of a share commitment (a truncated SHA-256: binding needs second preimages only)
COMMIT_BYTES = 16
#: a fixed private key used only to test advertised public keys for small order
_PROBE = X25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


def random_bytes(rng: RandomSource, n: int) -> bytes:
    """``n`` bytes from ``rng`` (whole 64-bit words, truncated)."""
    return rng.uint64((n + 7) // 8).tobytes()[:n]


class KeyPair:
    """An X25519 key pair whose private part is drawn from a :class:`RandomSource`.

    The private key object is built once (building it costs as much as one exchange)."""

    def __init__(self, rng: RandomSource) -> None:
        self.private_bytes = random_bytes(rng, SEED_BYTES)
        self.key = X25519PrivateKey.from_private_bytes(self.private_bytes)
        self.public_bytes = self.key.public_key().public_bytes_raw()

    def agree(self, public: bytes, info: bytes, round_id: int) -> bytes:
        """``KA.agree`` followed by HKDF-SHA256 bound to ``info`` and the round."""
        return agree(self.key, public, info, round_id)


class Agreements:
    """A memo of agreed keys, keyed by the two public keys, the purpose and the round.

    One client keeps its own (the key it derives with a neighbour to encrypt shares also
    decrypts the neighbour's shares). An in-process simulation of honest clients may share one
    among all of them (``shared=True``): both ends of a pair derive the same key (``KA`` is
    symmetric), so it is computed once per pair, and so is what the two ends compute from it
    alike: the AES-GCM key schedule of a stage (both ends encrypt, then both decrypt) and the
    pair's mask ``PRG(s_{u,v})``, expanded by whichever end needs it first and handed to the
    other. A shared memo forgets each entry at its last expected use (so a round holds only
    what is in flight); a later request computes it again. The messages are the same bytes
    either way.
    """

    def __init__(self, *, shared: bool = False) -> None:
        self.shared = shared
        self._memo: dict[tuple[bytes, bytes, bytes, int], bytes] = {}
        self._peers: dict[bytes, X25519PublicKey] = {}
        self._ciphers: dict[tuple[bytes, bytes, int, str], AESGCM] = {}
        self._masks: dict[tuple[bytes, bytes, int, int, int], I64] = {}

    def _peer(self, public: bytes) -> X25519PublicKey:
        peer = self._peers.get(public)
        if peer is None:  # parsed once per peer key (each is agreed with k neighbours)
            peer = self._peers[public] = _public_key_object(public)
        return peer

    def agree(self, own: KeyPair, public: bytes, info: bytes, round_id: int) -> bytes:
        a, b = own.public_bytes, public
        memo_key = (a, b, info, round_id) if a <= b else (b, a, info, round_id)
        key = self._memo.pop(memo_key, None) if self.shared else self._memo.get(memo_key)
        if key is None:
            key = self._memo[memo_key] = _exchange(own.key, self._peer(public), info, round_id)
        return key

    def mask_key(self, own: KeyPair, public: bytes, round_id: int) -> bytes:
        """:func:`mask_key` through the memo."""
        return self.agree(own, public, _MASK_INFO, round_id)

    def encryption_key(self, own: KeyPair, public: bytes, round_id: int) -> bytes:
        """:func:`encryption_key` through the memo."""
        return self.agree(own, public, _ENC_INFO, round_id)

    def cipher(self, own: KeyPair, public: bytes, round_id: int, use: str) -> AESGCM | bytes:
        """What :func:`encrypt` (``use="encrypt"``) or :func:`decrypt` (``"decrypt"``) takes
        for the pair's :meth:`encryption_key`: in a shared memo one AES-GCM object per pair
        and use, built by the first end and taken by the other."""
        if not self.shared:
            return self.encryption_key(own, public, round_id)
        a = own.public_bytes
        pair = (a, public, round_id, use) if a <= public else (public, a, round_id, use)
        aead = self._ciphers.pop(pair, None)
        if aead is None:  # the pair's first end in this use: the key's first or last use
            aead = self._ciphers[pair] = AESGCM(self.encryption_key(own, public, round_id))
        return aead

    def masks(
        self, own: KeyPair, publics: list[bytes], round_id: int, modulus: int, size: int
    ) -> I64:
        """``PRG(s_{own, v})`` for the owner of each of ``publics``, one row each
        (:func:`prg_uniform_many` on the pairs' mask keys)."""
        if not self.shared:
            seeds = [self.mask_key(own, pk, round_id) for pk in publics]
            return prg_uniform_many(seeds, modulus, size)
        out = np.empty((len(publics), size), dtype=np.int64)
        todo: list[tuple[int, tuple[bytes, bytes, int, int, int]]] = []
        a = own.public_bytes
        for i, b in enumerate(publics):
            pair = (a, b, round_id, modulus, size) if a <= b else (b, a, round_id, modulus, size)
            row = self._masks.pop(pair, None)
            if row is None:
                todo.append((i, pair))
            else:
                out[i] = row
        if todo:
            seeds = [
                _exchange(own.key, self._peer(publics[i]), _MASK_INFO, round_id) for i, _ in todo
            ]
            fresh = prg_uniform_many(seeds, modulus, size)
            for (i, pair), row in zip(todo, fresh, strict=True):
                out[i] = self._masks[pair] = row
        return out


def usable_public_key(public: bytes) -> bool:
    """Whether ``public`` is a 32-byte X25519 key of large order (a key of small order gives
    every peer the all-zero secret, so a client advertising one is refused at once)."""
    if not isinstance(public, bytes) or len(public) != SEED_BYTES:
        return False
    try:
        _PROBE.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:
        return False
    return True


def private_key(private: bytes) -> X25519PrivateKey:
    """The X25519 private key object of 32 bytes (build it once to agree with many peers)."""
    return X25519PrivateKey.from_private_bytes(private)


def public_key(private: bytes) -> bytes:
    """The X25519 public key of a 32-byte private key."""
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes_raw()


def check_public_key(public: bytes, function: str) -> bytes:
    """A 32-byte X25519 public key (raises :class:`ProtocolError` otherwise)."""
    if not isinstance(public, bytes) or len(public) != SEED_BYTES:
        raise ProtocolError(f"{function}: a public key must be {SEED_BYTES} bytes")
    return public


def agree(private: bytes | X25519PrivateKey, public: bytes, info: bytes, round_id: int) -> bytes:
    """The 32-byte key shared by the owner of ``private`` and the owner of ``public``.

    Raises :class:`ProtocolError` for a malformed or low-order public key (X25519 then yields
    the all-zero secret, which ``cryptography`` refuses).
    """
    key = X25519PrivateKey.from_private_bytes(private) if isinstance(private, bytes) else private
    return _exchange(key, _public_key_object(public), info, round_id)


def _public_key_object(public: bytes) -> X25519PublicKey:
    check_public_key(public, "agree")
    return X25519PublicKey.from_public_bytes(public)


def _exchange(key: X25519PrivateKey, peer: X25519PublicKey, info: bytes, round_id: int) -> bytes:
    """:func:`agree` on parsed keys."""
    try:
        secret = key.exchange(peer)
    except ValueError as exc:
        raise ProtocolError(f"agree: unusable public key ({exc})") from None
    return HKDF(
        algorithm=hashes.SHA256(),
        length=SEED_BYTES,
        salt=None,
        info=info + round_id.to_bytes(8, "big"),
    ).derive(secret)


def mask_key(private: bytes | X25519PrivateKey, public: bytes, round_id: int) -> bytes:
    """The pairwise mask seed ``s_{u,v}`` (Bonawitz et al., Section 4, round 2)."""
    return agree(private, public, _MASK_INFO, round_id)


def encryption_key(private: bytes | X25519PrivateKey, public: bytes, round_id: int) -> bytes:
    """The key ``c_{u,v}`` that encrypts the shares ``u`` sends ``v`` (round 1)."""
    return agree(private, public, _ENC_INFO, round_id)


def encrypt(
    key: bytes | AESGCM,
    plaintext: bytes,
    associated: bytes,
    rng: RandomSource,
    nonce: bytes | None = None,
) -> bytes:
    """AES-256-GCM: ``nonce || ciphertext || tag`` (``key``: 32 bytes or an ``AESGCM``;
    ``nonce``: drawn from ``rng`` unless given, e.g. by :func:`nonces`)."""
    if nonce is None:
        nonce = random_bytes(rng, NONCE_BYTES)
    elif len(nonce) != NONCE_BYTES:
        raise ValidationError("nonce", "encrypt", f"{NONCE_BYTES} bytes", len(nonce))
    aead = AESGCM(key) if isinstance(key, bytes) else key
    return nonce + aead.encrypt(nonce, plaintext, associated)


def nonces(rng: RandomSource, count: int) -> list[bytes]:
    """``count`` fresh AES-GCM nonces drawn from ``rng`` at once (as :func:`encrypt` draws one:
    the first 12 bytes of two 64-bit words each).

    >>> from privhist.core.random import SeededRandom
    >>> [len(n) for n in nonces(SeededRandom(1), 3)]
    [12, 12, 12]
    """
    raw = rng.uint64(2 * count).tobytes()
    return [raw[16 * i : 16 * i + NONCE_BYTES] for i in range(count)]


def decrypt(key: bytes | AESGCM, blob: bytes, associated: bytes) -> bytes:
    """Inverse of :func:`encrypt`; a forged, truncated or misdirected ciphertext raises
    :class:`ProtocolError`."""
    if len(blob) < NONCE_BYTES + 16:
        raise ProtocolError("decrypt: ciphertext too short")
    aead = AESGCM(key) if isinstance(key, bytes) else key
    try:
        return aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated)
    except InvalidTag:
        raise ProtocolError("decrypt: ciphertext failed authentication") from None


def commitment(kind: bytes, round_id: int, dealer: int, holder: int, share: bytes) -> bytes:
    """The commitment to one Shamir share that its dealer publishes to the server: a truncated
    SHA-256 of the share bound to the round, the dealer, the holder and the secret (``b"k"``:
    the key ``s^SK``, ``b"s"``: the seed ``b``).

    A share is uniform in the field given fewer than ``t`` others, so its hash hides it; the
    holder checks the share it decrypted against the hash before going on, so a holder who
    later reveals another value is caught by the server (a second preimage of 128 bits)."""
    data = b"".join(
        (
            _COMMIT_INFO,
            kind,
            round_id.to_bytes(8, "big"),
            dealer.to_bytes(4, "big"),
            holder.to_bytes(4, "big"),
            share,
        )
    )
    return hashlib.sha256(data).digest()[:COMMIT_BYTES]


class Committer:
    """:func:`commitment` for one secret of one dealer: the hash of the common prefix (purpose,
    secret, round, dealer) is computed once and copied for each holder (same bytes).

    >>> c = Committer(b"k", 3, 5)
    >>> c(7, b"share") == commitment(b"k", 3, 5, 7, b"share")
    True
    """

    def __init__(self, kind: bytes, round_id: int, dealer: int) -> None:
        self._base = hashlib.sha256(
            b"".join((_COMMIT_INFO, kind, round_id.to_bytes(8, "big"), dealer.to_bytes(4, "big")))
        )

    def __call__(self, holder: int, share: bytes) -> bytes:
        h = self._base.copy()
        h.update(holder.to_bytes(4, "big"))
        h.update(share)
        return h.digest()[:COMMIT_BYTES]


def check_modulus(modulus: int, function: str) -> int:
    """A modulus in ``[2, 2**62]``."""
    if isinstance(modulus, bool) or not isinstance(modulus, int | np.integer):
        raise ValidationError("modulus", function, "an integer in [2, 2**62]", modulus)
    q = int(modulus)
    if q < 2 or q > MAX_MODULUS:
        raise ValidationError("modulus", function, "an integer in [2, 2**62]", modulus)
    return q


class KeyStream:
    """AES-256-CTR keystream of a 32-byte seed, read as little-endian 64-bit words."""

    def __init__(self, seed: bytes) -> None:
        if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            raise ValidationError("seed", "KeyStream", f"{SEED_BYTES} bytes", type(seed).__name__)
        self._enc = Cipher(algorithms.AES(seed), modes.CTR(b"\x00" * 16)).encryptor()

    def words(self, n: int) -> U64:
        """The next ``n`` words of the stream."""
        return np.frombuffer(self._enc.update(bytes(8 * n)), dtype=np.uint64)

    def read(self, zeros: bytes) -> bytes:
        """The next ``len(zeros)`` bytes of the stream (``zeros``: that many zero bytes)."""
        return self._enc.update(zeros)


def prg_words(seed: bytes, n: int) -> U64:
    """The first ``n`` 64-bit words of the seed's stream (for tests of the generator)."""
    return KeyStream(seed).words(n)


def prg_uniform(seed: bytes, modulus: int, size: int) -> I64:
    """``size`` integers uniform on ``[0, modulus)`` expanded from ``seed``, without bias.

    Each 64-bit word keeps its low ``w = bitlen(modulus - 1)`` bits; values ``>= modulus`` are
    rejected and the stream continues, so the output is a deterministic function of the seed
    whose entries are independent and exactly uniform if the stream is.

    >>> a = prg_uniform(bytes(32), 10, 5)
    >>> bool(((a >= 0) & (a < 10)).all()) and a.tolist() == prg_uniform(bytes(32), 10, 5).tolist()
    True
    """
    q = check_modulus(modulus, "prg_uniform")
    n = int(size)
    if n < 0:
        raise ValidationError("size", "prg_uniform", ">= 0", size)
    w = max(1, (q - 1).bit_length())
    mask = np.uint64((1 << w) - 1)
    stream = KeyStream(seed)
    if q == 1 << w:  # a power of two: every word is kept
        return (stream.words(n) & mask).astype(np.int64)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    # expected draws n 2**w / q < 2 n; ask for a little more so one pass usually suffices
    accept = q / float(1 << w)
    while filled < n:
        need = n - filled
        batch = int(need / accept * 1.02) + 64
        vals = stream.words(batch) & mask
        ok = vals[vals < np.uint64(q)]
        take = min(ok.shape[0], need)
        out[filled : filled + take] = ok[:take].astype(np.int64)
        filled += take
    return out


def first_batch(size: int, accept: float) -> int:
    """Words read per row in :func:`prg_uniform_many`'s first pass: a little above the
    expected ``size / accept``, so that a row rarely needs more of its stream."""
    return int(size / accept * 1.02) + 64


def prg_uniform_many(seeds: list[bytes], modulus: int, size: int) -> I64:
    """:func:`prg_uniform` of each seed, one row each (the same values), with the masking and
    the rejection done once for all rows.

    >>> seeds = [bytes(32), bytes(range(32))]
    >>> rows = prg_uniform_many(seeds, 10, 5)
    >>> [r.tolist() for r in rows] == [prg_uniform(s, 10, 5).tolist() for s in seeds]
    True
    """
    q = check_modulus(modulus, "prg_uniform_many")
    n = int(size)
    if n < 0:
        raise ValidationError("size", "prg_uniform_many", ">= 0", size)
    m = len(seeds)
    w = max(1, (q - 1).bit_length())
    mask = np.uint64((1 << w) - 1)
    streams = [KeyStream(seed) for seed in seeds]
    if q == 1 << w:
        zeros = bytes(8 * n)
        raw = b"".join([s.read(zeros) for s in streams])
        return (np.frombuffer(raw, dtype=np.uint64).reshape(m, n) & mask).astype(np.int64)
    out = np.empty((m, n), dtype=np.int64)
    batch = first_batch(n, q / float(1 << w))
    zeros = bytes(8 * batch)
    raw = b"".join([s.read(zeros) for s in streams])
    vals = np.frombuffer(raw, dtype=np.uint64).reshape(m, batch) & mask
    ok = vals < np.uint64(q)
    rank = np.cumsum(ok, axis=1)
    full = rank[:, -1] >= n
    pick = ok & (rank <= n) & full[:, None]
    out[full] = vals[pick].reshape(-1, n).astype(np.int64)
    for i in np.flatnonzero(~full).tolist():  # rare: the row needs more of its stream
        got = vals[i][ok[i]].astype(np.int64)
        filled = got.shape[0]
        out[i, :filled] = got
        while filled < n:
            more = streams[i].words(batch) & mask
            more = more[more < np.uint64(q)][: n - filled].astype(np.int64)
            out[i, filled : filled + more.shape[0]] = more
            filled += more.shape[0]
    return out
