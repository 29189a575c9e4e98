"""Reading and writing compact histogram releases (:mod:`privhist.mechanisms.finite.compact`).

A compact release is a polynomial over GF(2^m) in the release metadata; these functions move it
to and from files (JSON with integrity checksums, or the metadata of a Parquet release) so that
the mechanism module itself never touches a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from privhist.core.errors import InputDataError, ValidationError
from privhist.io.integrity import seal_metadata, verify_document
from privhist.io.release import Release
from privhist.io.writers import metadata_to_json, write_text_atomic

__all__ = ["read_compact", "write_compact"]


def read_compact(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The compact payload (``metadata["compact"]``) of a compact JSON file, a release written
    as JSON, or one written as Parquet, its integrity checked; query it with
    ``privhist.mechanisms.finite.compact.CompactCounts(read_compact(path))``."""
    p = Path(path)
    if not p.is_file():
        raise InputDataError(f"compact release '{path}' does not exist")
    if p.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(p).metadata
            raw = (parquet.metadata or {}).get(b"privhist")
            if raw is None:
                raise InputDataError(f"'{path}' has no privhist metadata")
            meta = json.loads(raw)
        except (OSError, ValueError) as err:  # pyarrow's errors, bad JSON and bad UTF-8
            raise InputDataError(f"'{path}' is not a privhist Parquet release ({err})") from None
        metadata, _ = verify_document(
            {"metadata": meta},
            f"'{path}'",
            rows_required=False,
            row_count=parquet.num_rows,
            kind="a compact histogram release",
        )
    else:
        try:
            doc = json.loads(p.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise InputDataError(
                f"'{path}' is not JSON ({err}); a compact release is written as JSON or "
                "Parquet, not CSV"
            ) from None
        metadata, _ = verify_document(
            doc, f"'{path}'", rows_required=False, kind="a compact histogram release"
        )
    compact = metadata.get("compact")
    if not isinstance(compact, dict):
        raise InputDataError(f"'{path}' is not a compact histogram release (no 'compact')")
    return compact


def write_compact(release: Release, path: str | os.PathLike[str]) -> Path:
    """Write the compact payload of ``release`` (with its metadata) to ``path`` as JSON,
    atomically (:func:`privhist.io.writers.write_text_atomic`: a hidden temporary file beside
    ``path`` renamed over it when complete; nothing is left on failure)."""
    fn = "write_compact"
    if not isinstance(release, Release) or "compact" not in release.metadata:
        raise ValidationError("release", fn, "a compact release", type(release).__name__)
    dest = Path(path)
    if not dest.parent.is_dir() or dest.is_dir():
        raise ValidationError("path", fn, "a file in an existing directory", str(dest))
    meta = seal_metadata(metadata_to_json(release, fn), None)  # privhist.io.integrity
    text = json.dumps({"metadata": meta}, indent=1) + "\n"
    return write_text_atomic(dest, text)
