"""The protocol's messages: typed, versioned, schema-checked JSON (never pickle).

Every message is one JSON object ``{"v": 2, "type": ..., "round": ..., "sender": ..., ...}``;
byte strings travel as base64; the masked vector travels as raw bytes after the JSON object and
one NUL byte (the object gives its length), fixed-width little-endian integers of
``ceil(bitlen(q - 1) / 8)`` bytes each. :func:`decode` checks, before anything else reads the
message, its total size, the version, the type, the exact set of fields and each field's kind
and range; anything else raises :class:`~privhist.core.errors.ProtocolError`. JSON nested
deeper than :data:`MAX_DEPTH` is refused before it is parsed (:func:`loads`). Whether a message
is expected *now* (stage, sender, replay) is the state machines' check
(:mod:`privhist.federated.secagg.server`).

The message flow is that of Bonawitz et al. (CCS 2017), Section 4 (rounds 0-4):

=============  =========  ============================================================
type           direction  content
=============  =========  ============================================================
``advertise``  C -> S     round 0: public keys ``c_u^PK`` (encryption), ``s_u^PK`` (masks)
``roster``     S -> C     the advertised keys of the client's neighbours
``shares``     C -> S     round 1: ``AE`` ciphertexts of the Shamir shares, one per neighbour,
                          and a commitment to every share (the client's own included)
``forward``    S -> C     the ciphertexts addressed to the client, with their commitments
``masked``     C -> S     round 2: the masked input ``y_u``
``survivors``  S -> C     round 3: the members of ``U_3`` in the client's closed neighbourhood
``ack``        C -> S     the client's SHA-256 of that list (consistency check)
``unmask_req`` S -> C     round 4: the members of ``U_4`` in the client's closed neighbourhood
``unmask``     C -> S     shares of ``s_v^SK`` (``v`` dropped) and of ``b_v`` (``v`` in ``U_3``)
``done``       S -> C     the round is over (``ok`` true) or aborted (``ok`` false, ``reason``)
=============  =========  ============================================================
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ProtocolError
from privhist.federated.secagg.crypto import COMMIT_BYTES, SEED_BYTES
from privhist.federated.secagg.shamir import PRIME, SHARE_BYTES

I64 = npt.NDArray[np.int64]

VERSION = 2
#: the gRPC service that carries the messages (:mod:`privhist.federated.secagg.runtime`)
SERVICE = "privhist.federated.v1.SecAgg"
#: bound on a JSON control request (``Join``, ``NextRound``)
MAX_CONTROL_BYTES = 1 << 12
#: deepest JSON nesting any message or control request may have
MAX_DEPTH = 8
#: server's sender id in messages it sends
SERVER = -1
#: default bound on one message's size in bytes
MAX_MESSAGE_BYTES = 64 << 20
#: bound on client ids
MAX_CLIENTS = 1 << 20
#: bound on a ciphertext's size (nonce + two 33-byte shares + ids + tag, with room)
MAX_CIPHERTEXT = 256


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if type(value) is not int or not lo <= value <= hi:
            raise ProtocolError(f"expected an integer in [{lo}, {hi}]")
        return value

    return check


def _b64(value: Any, max_len: int, exact: int | None = None) -> bytes:
    if not isinstance(value, str) or len(value) > 4 * (max_len // 3 + 2):
        raise ProtocolError("expected a base64 string of bounded length")
    try:
        raw = binascii.a2b_base64(value.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ProtocolError("expected base64") from None
    if exact is not None and len(raw) != exact:
        raise ProtocolError(f"expected {exact} bytes; got {len(raw)}")
    if len(raw) > max_len:
        raise ProtocolError(f"expected at most {max_len} bytes")
    return raw


def _key(value: Any) -> bytes:
    return _b64(value, SEED_BYTES, SEED_BYTES)


def _list(value: Any, item: Callable[[Any], Any], max_items: int = MAX_CLIENTS) -> list[Any]:
    if not isinstance(value, list) or len(value) > max_items:
        raise ProtocolError("expected a list of bounded length")
    return [item(v) for v in value]


def _tuple(value: Any, *items: Callable[[Any], Any]) -> tuple[Any, ...]:
    if type(value) is not list or len(value) != len(items):
        raise ProtocolError(f"expected a list of {len(items)} entries")
    return tuple([f(v) for f, v in zip(items, value, strict=True)])


_cid = _int(0, MAX_CLIENTS - 1)


def _ids(value: Any) -> list[int]:
    if not isinstance(value, list) or len(value) > MAX_CLIENTS:
        raise ProtocolError("expected a list of bounded length")
    if not all(type(v) is int for v in value) or (
        value and not 0 <= min(value) <= max(value) < MAX_CLIENTS
    ):
        raise ProtocolError(f"expected client ids in [0, {MAX_CLIENTS - 1}]")
    if len(set(value)) != len(value):
        raise ProtocolError("client ids repeat")
    return list(value)


def _unique_first(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    firsts = [r[0] for r in rows]
    if len(set(firsts)) != len(firsts):
        raise ProtocolError("a client id repeats")
    return rows


def _keys(value: Any) -> list[tuple[Any, ...]]:
    return _unique_first(_list(value, lambda r: _tuple(r, _cid, _key, _key)))


def _ct(value: Any) -> bytes:
    return _b64(value, MAX_CIPHERTEXT)


def _commitment(value: Any) -> bytes:
    return _b64(value, COMMIT_BYTES, COMMIT_BYTES)


def _cts(value: Any) -> list[tuple[Any, ...]]:
    return _unique_first(_list(value, lambda r: _tuple(r, _cid, _ct)))


def _commitments(value: Any) -> list[tuple[Any, ...]]:
    return _unique_first(_list(value, lambda r: _tuple(r, _cid, _commitment, _commitment)))


def _inbox(value: Any) -> list[tuple[Any, ...]]:
    return _unique_first(_list(value, lambda r: _tuple(r, _cid, _ct, _commitment, _commitment)))


def _share(value: Any) -> int:
    y = int.from_bytes(_b64(value, SHARE_BYTES, SHARE_BYTES), "big")
    if y >= PRIME:
        raise ProtocolError("a share lies outside the field")
    return y


def _shares(value: Any) -> list[tuple[Any, ...]]:
    return _unique_first(_list(value, lambda r: _tuple(r, _cid, _share)))


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ProtocolError("expected true or false")
    return value


def _reason(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 500:
        raise ProtocolError("expected a short string")
    return value


def _vector(value: Any) -> bytes:
    if not isinstance(value, bytes):  # only ever set by decode from the attachment
        raise ProtocolError("expected the attached bytes")
    return value


def _digest(value: Any) -> bytes:
    return _b64(value, 32, 32)


#: fields carried as raw bytes after the JSON head and a NUL byte (JSON text never holds a raw
#: NUL), the head giving their length: the masked vector, so it costs its own size on the wire
ATTACHED = frozenset({"y"})
_WITH_ATTACHMENT = frozenset({"masked"})

#: the fields of every message type and the check of each (decoded values)
SCHEMA: dict[str, dict[str, Callable[[Any], Any]]] = {
    "advertise": {"c_pk": _key, "s_pk": _key},
    "roster": {"keys": _keys},
    "shares": {"ciphertexts": _cts, "commitments": _commitments},
    "forward": {"inbox": _inbox},
    "masked": {"y": _vector},
    "survivors": {"ids": _ids},
    "ack": {"digest": _digest},
    "unmask_req": {"ids": _ids},
    "unmask": {"key_shares": _shares, "seed_shares": _shares},
    "done": {"ok": _bool, "reason": _reason},
}


def _b64s(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


_ENCODERS: dict[str, Callable[[Any], Any]] = {
    "c_pk": lambda b: base64.b64encode(b).decode(),
    "s_pk": lambda b: base64.b64encode(b).decode(),
    "keys": lambda rows: [
        [i, base64.b64encode(c).decode(), base64.b64encode(s).decode()] for i, c, s in rows
    ],
    "ciphertexts": lambda rows: [[i, base64.b64encode(ct).decode()] for i, ct in rows],
    "commitments": lambda rows: [
        [i, base64.b64encode(k).decode(), base64.b64encode(s).decode()] for i, k, s in rows
    ],
    "inbox": lambda rows: [
        [i, base64.b64encode(ct).decode(), base64.b64encode(k).decode(), _b64s(s)]
        for i, ct, k, s in rows
    ],
    "ids": list,
    "digest": lambda b: base64.b64encode(b).decode(),
    "key_shares": lambda rows: [
        [i, base64.b64encode(y.to_bytes(SHARE_BYTES, "big")).decode()] for i, y in rows
    ],
    "seed_shares": lambda rows: [
        [i, base64.b64encode(y.to_bytes(SHARE_BYTES, "big")).decode()] for i, y in rows
    ],
    "ok": bool,
    "reason": str,
}


@dataclass(frozen=True)
class Message:
    """A decoded message: its type, round, sender (``-1`` for the server) and fields."""

    type: str
    round: int
    sender: int
    body: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The message's wire form (checked against :data:`SCHEMA`)."""
        spec = SCHEMA.get(self.type)
        if spec is None or set(self.body) != set(spec):
            raise ProtocolError(f"encode: message '{self.type}' does not match its schema")
        obj: dict[str, Any] = {
            "v": VERSION,
            "type": self.type,
            "round": self.round,
            "sender": self.sender,
        }
        attached = b""
        for name, value in self.body.items():
            if name in ATTACHED:
                attached = bytes(value)
                obj[name] = len(attached)
            else:
                obj[name] = _ENCODERS[name](value)
        head = json.dumps(obj, separators=(",", ":")).encode()
        return head + b"\x00" + attached if self.type in _WITH_ATTACHMENT else head


def decode(data: bytes, max_bytes: int = MAX_MESSAGE_BYTES) -> Message:
    """Parse and check one message; any deviation raises :class:`ProtocolError`."""
    if not isinstance(data, bytes | bytearray):
        raise ProtocolError("decode: a message must be bytes")
    if len(data) > max_bytes:
        raise ProtocolError(f"decode: message of {len(data)} bytes exceeds {max_bytes}")
    raw = bytes(data)
    head, nul, attached = raw.partition(b"\x00")
    obj = loads(head, "decode")
    if not isinstance(obj, dict):
        raise ProtocolError("decode: a message is a JSON object")
    if obj.get("v") != VERSION:
        raise ProtocolError(f"decode: unsupported version {obj.get('v')!r}")
    kind = obj.get("type")
    spec = SCHEMA.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise ProtocolError(f"decode: unknown message type {kind!r}")
    expected = {"v", "type", "round", "sender", *spec}
    if set(obj) != expected:
        raise ProtocolError(f"decode: fields of '{kind}' must be {sorted(expected)}")
    if bool(nul) != (kind in _WITH_ATTACHMENT):
        raise ProtocolError(f"decode: '{kind}' {'needs' if not nul else 'takes no'} attachment")
    rnd = _int(0, (1 << 63) - 1)(obj["round"])
    sender = _int(SERVER, MAX_CLIENTS - 1)(obj["sender"])
    for name in ATTACHED & set(spec):
        if type(obj[name]) is not int or obj[name] != len(attached):
            raise ProtocolError(f"decode: field '{name}' must give the attachment's length")
        obj[name] = attached
    body = {}
    for name, check in spec.items():
        try:
            body[name] = check(obj[name])
        except ProtocolError as exc:
            raise ProtocolError(f"decode: field '{name}' of '{kind}': {exc}") from None
    return Message(str(kind), rnd, sender, body)


_STRUCTURE = re.compile(rb'[\[\]{}"\\]')
_PLAIN_STRING = re.compile(rb'"[^"\\]*"')
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def check_depth(data: bytes, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`ProtocolError` when the JSON text ``data`` nests arrays and objects deeper
    than ``limit`` (checked on the brackets outside strings, before any parsing, so a deeply
    nested message never reaches the recursive parser)."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return
    bare = _PLAIN_STRING.sub(b"", data)
    if b'"' not in bare:  # no string with escapes: what is left outside strings is structure
        brackets = np.frombuffer(bare.translate(None, _NOT_BRACKETS), dtype=np.uint8)
        steps = np.where((brackets == 0x5B) | (brackets == 0x7B), 1, -1)
        if steps.size and int(np.cumsum(steps).max()) > limit:
            raise ProtocolError(f"JSON nested deeper than {limit} levels")
        return
    depth, in_string, skip = 0, False, -1
    for match in _STRUCTURE.finditer(data):
        pos = match.start()
        if pos == skip:
            continue
        c = data[pos]
        if in_string:
            if c == 0x5C:  # backslash: the next character is escaped
                skip = pos + 1
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                raise ProtocolError(f"JSON nested deeper than {limit} levels")
        elif c in (0x5D, 0x7D):
            depth -= 1


def loads(data: bytes, where: str) -> Any:
    """``json.loads`` after :func:`check_depth`; malformed input raises
    :class:`ProtocolError`."""
    check_depth(data)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ProtocolError(f"{where}: not a JSON message") from None


def width(modulus: int) -> int:
    """Bytes per packed entry of a vector mod ``modulus``."""
    return max(1, ((modulus - 1).bit_length() + 7) // 8)


def pack_vector(values: I64, modulus: int) -> bytes:
    """Fixed-width little-endian bytes of entries in ``[0, modulus)``."""
    w = width(modulus)
    raw = np.ascontiguousarray(values, dtype="<u8").view(np.uint8).reshape(-1, 8)
    return raw[:, :w].tobytes()


def unpack_vector(data: bytes, modulus: int, dimension: int) -> I64:
    """Inverse of :func:`pack_vector`; wrong length or an entry ``>= modulus`` raises
    :class:`ProtocolError`."""
    w = width(modulus)
    if len(data) != w * dimension:
        raise ProtocolError(
            f"masked vector must be {w * dimension} bytes ({dimension} entries); got {len(data)}"
        )
    raw = np.zeros((dimension, 8), dtype=np.uint8)
    raw[:, :w] = np.frombuffer(data, dtype=np.uint8).reshape(dimension, w)
    vals = raw.view("<u8").reshape(-1)
    if dimension and int(vals.max()) >= modulus:
        raise ProtocolError(f"masked vector has an entry outside [0, {modulus})")
    return vals.astype(np.int64)


def digest_ids(ids: Sequence[int]) -> bytes:
    """SHA-256 of a sorted id list (what the consistency check acknowledges)."""
    return hashlib.sha256(json.dumps(sorted(ids)).encode()).digest()
