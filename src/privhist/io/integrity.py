"""Integrity of the files privhist reads back: a row count and a SHA-256 checksum.

Releases and samples that privhist itself reads again (``privhist estimate`` reads samples,
``privhist compact-query`` reads compact releases) carry a check, so that a file cut short,
corrupted or edited by hand is refused instead of answered from:

* JSON (``{"metadata": {...}, "rows": [...]}``, or ``{"metadata": {...}}`` for a compact
  release): ``metadata["integrity"] = {"rows": N, "sha256": HEX}``, where ``HEX`` is the SHA-256
  of the canonical JSON (sorted keys, no spaces, UTF-8) of ``{"metadata": M, "rows": R}``, with
  ``M`` the metadata without its ``integrity`` entry and ``R`` the rows (``[]`` when absent). So
  the check covers the metadata as well as every row.
* Parquet: the same entry inside the metadata JSON of the file's ``privhist`` key-value entry,
  computed with the rows left out (``R = []``) and ``N`` the table's row count; Parquet's own
  footer and page structure make a cut file unreadable, and the reader compares the row count.
* CSV (``privhist sample``): a last line ``# privhist integrity: rows=N sha256=HEX``, where
  ``HEX`` is the SHA-256 of every byte before that line and ``N`` the number of data lines (the
  header excluded). Most CSV readers can skip it as a comment (Polars: ``comment_prefix="#"``).

A checksum detects accidents and naive edits, not an adversary: anyone who can write the file can
recompute it. The readers also validate the shape of the document (:func:`verify_document`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Final

from privhist.core.errors import InputDataError

__all__ = [
    "CSV_TRAILER_PREFIX",
    "INTEGRITY_KEY",
    "digest",
    "seal_csv",
    "seal_metadata",
    "verify_csv",
    "verify_document",
]

#: the metadata entry holding ``{"rows": N, "sha256": HEX}``
INTEGRITY_KEY: Final[str] = "integrity"

#: how the last line of a sealed CSV file begins
CSV_TRAILER_PREFIX: Final[str] = "# privhist integrity:"

_TRAILER = re.compile(rb"# privhist integrity: rows=(\d{1,18}) sha256=([0-9a-f]{64})\n?\Z")
_HEX = re.compile(r"[0-9a-f]{64}\Z")


def digest(metadata: dict[str, Any], rows: list[Any] | None) -> str:
    """The SHA-256 (hex) of the canonical JSON of ``{"metadata": ..., "rows": ...}``, the
    metadata's ``integrity`` entry left out.

    >>> digest({"a": 1}, []) == digest({"a": 1, "integrity": {"rows": 0}}, None)
    True
    """
    meta = {k: v for k, v in metadata.items() if k != INTEGRITY_KEY}
    canonical = json.dumps(
        {"metadata": meta, "rows": [] if rows is None else rows},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def seal_metadata(
    metadata: dict[str, Any], rows: list[Any] | None, row_count: int | None = None
) -> dict[str, Any]:
    """``metadata`` with its ``integrity`` entry (the row count and :func:`digest`).

    >>> seal_metadata({"m": 1}, [{"key": "a"}])["integrity"]["rows"]
    1
    """
    n = row_count if row_count is not None else 0 if rows is None else len(rows)
    return {**metadata, INTEGRITY_KEY: {"rows": n, "sha256": digest(metadata, rows)}}


def verify_document(
    doc: Any,
    source: str,
    *,
    rows_required: bool,
    row_count: int | None = None,
    kind: str = "a privhist file",
) -> tuple[dict[str, Any], list[Any]]:
    """Check a parsed JSON document (or Parquet metadata, ``{"metadata": ...}`` with the table's
    ``row_count``) against its ``integrity`` entry; return its metadata and rows.

    Raises:
        InputDataError: the document does not have the shape privhist writes, has no integrity
            entry, or its row count or checksum does not match.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise InputDataError(f"{source} is not {kind}: no 'metadata' object")
    if set(doc) - {"metadata", "rows"}:
        extra = ", ".join(sorted(set(doc) - {"metadata", "rows"}))
        raise InputDataError(f"{source} is not {kind}: unexpected entries {extra}")
    metadata: dict[str, Any] = doc["metadata"]
    rows = doc.get("rows")
    if rows is None and rows_required:
        raise InputDataError(f"{source} is not {kind}: no 'rows' list")
    if rows is not None and (
        not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows)
    ):
        raise InputDataError(f"{source} is not {kind}: 'rows' is not a list of objects")
    check = metadata.get(INTEGRITY_KEY)
    if (
        not isinstance(check, dict)
        or set(check) != {"rows", "sha256"}
        or not isinstance(check["rows"], int)
        or isinstance(check["rows"], bool)
        or check["rows"] < 0
        or not isinstance(check["sha256"], str)
        or _HEX.match(check["sha256"]) is None
    ):
        raise InputDataError(
            f"{source} has no valid integrity entry (rows and sha256 in its metadata); it was "
            "not written by this privhist, or it was edited"
        )
    n = row_count if row_count is not None else (0 if rows is None else len(rows))
    if check["rows"] != n:
        raise InputDataError(
            f"{source} fails its integrity check: {n} rows where its metadata records "
            f"{check['rows']} (a cut or edited file)"
        )
    found = digest(metadata, None if row_count is not None else rows)
    if found != check["sha256"]:
        raise InputDataError(
            f"{source} fails its integrity check: its checksum does not match its content "
            "(a corrupted or edited file)"
        )
    return metadata, [] if rows is None else rows


def seal_csv(text: str) -> str:
    """``text`` (CSV with a header line, ending in a newline) with its integrity trailer.

    >>> print(seal_csv("key,n\\na,1\\n"), end="")  # doctest: +ELLIPSIS
    key,n
    a,1
    # privhist integrity: rows=1 sha256=...
    """
    body = text if text.endswith("\n") or not text else text + "\n"
    rows = max(0, body.count("\n") - 1)
    hexd = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return f"{body}{CSV_TRAILER_PREFIX} rows={rows} sha256={hexd}\n"


def verify_csv(data: bytes, source: str) -> bytes:
    """The CSV body of a sealed file (its trailer checked and removed).

    Raises:
        InputDataError: no trailer (a cut file, or one not written by this privhist), or a row
            count or checksum that does not match.
    """
    end = data.rstrip(b"\n").rfind(b"\n")
    body, trailer = data[: end + 1], data[end + 1 :]
    match = _TRAILER.match(trailer)
    if end < 0 or match is None:
        raise InputDataError(
            f"{source} has no integrity trailer ('{CSV_TRAILER_PREFIX} ...' as its last line): "
            "the file is cut short, or was not written by this privhist"
        )
    rows = max(0, body.count(b"\n") - 1)
    if int(match.group(1)) != rows:
        raise InputDataError(
            f"{source} fails its integrity check: {rows} rows where its trailer records "
            f"{int(match.group(1))} (a cut or edited file)"
        )
    if hashlib.sha256(body).hexdigest() != match.group(2).decode("ascii"):
        raise InputDataError(
            f"{source} fails its integrity check: its checksum does not match its content "
            "(a corrupted or edited file)"
        )
    return body
