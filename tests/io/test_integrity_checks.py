"""Every check of :mod:`privhist.io.integrity` and of the sample reader refuses what it must and
accepts what privhist writes: each refusal branch is reached by a document that fails that check
alone (so a check that stopped failing closed would let it through), and every sealed document,
edited in one byte or one value, is refused."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from privhist.core.errors import InputDataError
from privhist.io.integrity import (
    CSV_TRAILER_PREFIX,
    INTEGRITY_KEY,
    digest,
    seal_csv,
    seal_metadata,
    verify_csv,
    verify_document,
)
from privhist.io.samples import read_sample

ROWS = [
    {"key": "a", "estimate": 2.5, "bias": 0.0, "variance": 1.0},
    {"key": "b", "estimate": 1, "bias": None, "variance": None},
]


def _doc(rows: list[Any] | None = ROWS) -> dict[str, Any]:
    meta = seal_metadata({"mechanism": "pws", "epsilon": 1.0}, rows)
    doc: dict[str, Any] = {"metadata": meta}
    if rows is not None:
        doc["rows"] = copy.deepcopy(rows)
    return doc


# -- the digest -------------------------------------------------------------------------------


def test_digest_is_the_sha256_of_the_canonical_document() -> None:
    meta = {"b": 1, "a": [1, "é"], INTEGRITY_KEY: {"rows": 9, "sha256": "x"}}
    canonical = '{"metadata":{"a":[1,"é"],"b":1},"rows":[{"k":1}]}'
    assert digest(meta, [{"k": 1}]) == hashlib.sha256(canonical.encode()).hexdigest()
    # the integrity entry is left out, every other entry counts
    assert digest(meta, []) == digest({"a": [1, "é"], "b": 1}, None)
    assert digest({**meta, "c": 0}, []) != digest(meta, [])


def test_seal_records_the_row_count() -> None:
    assert seal_metadata({}, ROWS)[INTEGRITY_KEY]["rows"] == 2
    assert seal_metadata({}, None)[INTEGRITY_KEY]["rows"] == 0
    assert seal_metadata({}, None, row_count=7)[INTEGRITY_KEY]["rows"] == 7


# -- JSON documents ---------------------------------------------------------------------------


def test_a_sealed_document_passes() -> None:
    meta, rows = verify_document(_doc(), "f", rows_required=True)
    assert rows == ROWS and meta["mechanism"] == "pws"
    meta, rows = verify_document(_doc(None), "f", rows_required=False)
    assert rows == []


def _refused(doc: Any, match: str, **kw: Any) -> None:
    kw.setdefault("rows_required", True)
    with pytest.raises(InputDataError, match=match):
        verify_document(doc, "f.json", **kw)


def test_documents_of_the_wrong_shape_are_refused() -> None:
    _refused([1], "no 'metadata' object")
    _refused({"metadata": [1]}, "no 'metadata' object")
    _refused({**_doc(), "extra": 1}, "unexpected entries extra")
    _refused(_doc(None), "no 'rows' list")
    _refused({**_doc(), "rows": {"a": 1}}, "not a list of objects")
    _refused({**_doc(), "rows": [{"key": "a"}, 3]}, "not a list of objects")


@pytest.mark.parametrize(
    "check",
    [
        None,
        "text",
        {"rows": 2},
        {"rows": 2, "sha256": "0" * 64, "more": 1},
        {"rows": "2", "sha256": "0" * 64},
        {"rows": True, "sha256": "0" * 64},
        {"rows": -1, "sha256": "0" * 64},
        {"rows": 2, "sha256": 5},
        {"rows": 2, "sha256": "0" * 63},
        {"rows": 2, "sha256": "G" * 64},
    ],
)
def test_malformed_integrity_entries_are_refused(check: Any) -> None:
    doc = _doc()
    doc["metadata"][INTEGRITY_KEY] = check
    _refused(doc, "no valid integrity entry")


def test_a_zero_row_count_is_a_valid_entry() -> None:
    verify_document(_doc([]), "f", rows_required=True)


def test_row_count_and_checksum_mismatches_are_refused() -> None:
    cut = _doc()
    cut["rows"] = cut["rows"][:1]
    _refused(cut, "1 rows where its metadata records 2")
    edited = _doc()
    edited["rows"][0]["estimate"] = 2.6
    _refused(edited, "checksum does not match")
    meta_edited = _doc()
    meta_edited["metadata"]["epsilon"] = 0.5
    _refused(meta_edited, "checksum does not match")


def test_parquet_style_documents_check_the_given_row_count() -> None:
    meta = seal_metadata({"m": 1}, None, row_count=5)
    verify_document({"metadata": meta}, "f", rows_required=False, row_count=5)
    with pytest.raises(InputDataError, match="4 rows where its metadata records 5"):
        verify_document({"metadata": meta}, "f", rows_required=False, row_count=4)


# -- CSV trailers -----------------------------------------------------------------------------

CSV = "key,estimate,bias,variance\na,2.5,0.0,1.0\nb,1,,\n"


def test_csv_seal_and_verify() -> None:
    sealed = seal_csv(CSV)
    body, trailer = sealed[: len(CSV)], sealed[len(CSV) :]
    assert body == CSV
    assert (
        trailer
        == f"{CSV_TRAILER_PREFIX} rows=2 sha256={hashlib.sha256(CSV.encode()).hexdigest()}\n"
    )
    assert verify_csv(sealed.encode(), "f") == CSV.encode()
    # the trailer's own newline may be missing; a text without a final newline gets one
    assert verify_csv(sealed.rstrip("\n").encode(), "f") == CSV.encode()
    assert seal_csv(CSV.rstrip("\n")) == sealed
    assert seal_csv("key\n").endswith(
        "rows=0 sha256=" + hashlib.sha256(b"key\n").hexdigest() + "\n"
    )
    assert seal_csv("") == f"{CSV_TRAILER_PREFIX} rows=0 sha256={hashlib.sha256(b'').hexdigest()}\n"


def test_csv_of_one_empty_line_round_trips() -> None:
    """The body may be a single newline (the trailer then starts at offset 1)."""
    assert verify_csv(seal_csv("\n").encode(), "f") == b"\n"


def test_csv_without_a_trailer_is_refused() -> None:
    for data in (CSV.encode(), b"", b"# privhist integrity: rows=0 sha256=" + b"0" * 64 + b"\n"):
        with pytest.raises(InputDataError, match="no integrity trailer"):
            verify_csv(data, "f")


def test_csv_row_count_and_checksum_mismatches_are_refused() -> None:
    sealed = seal_csv(CSV)
    lines = sealed.splitlines(keepends=True)
    cut = "".join([lines[0], lines[1], lines[-1]])
    with pytest.raises(InputDataError, match="1 rows where its trailer records 2"):
        verify_csv(cut.encode(), "f")
    edited = sealed.replace("2.5", "2.6")
    with pytest.raises(InputDataError, match="checksum does not match"):
        verify_csv(edited.encode(), "f")


def test_every_single_byte_edit_of_a_sealed_csv_is_refused() -> None:
    sealed = bytearray(seal_csv(CSV).encode())
    for i in range(len(CSV)):
        edited = bytearray(sealed)
        edited[i] = ord("9") if edited[i] != ord("9") else ord("8")
        with pytest.raises(InputDataError):
            verify_csv(bytes(edited), "f")


# -- the sample reader ------------------------------------------------------------------------


def test_read_sample_accepts_what_privhist_writes(tmp_path: Path) -> None:
    csv_path = tmp_path / "s.csv"
    csv_path.write_text(seal_csv(CSV))
    rows = read_sample(csv_path)
    assert [r["key"] for r in rows] == ["a", "b"] and rows[1]["bias"] is None
    json_path = tmp_path / "s.JSON"
    json_path.write_text(json.dumps(_doc()))
    assert read_sample(json_path) == ROWS


def _read(tmp_path: Path, name: str, data: bytes | str, match: str) -> None:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    with pytest.raises(InputDataError, match=match):
        read_sample(path)


def test_read_sample_refuses_an_unreadable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.csv"
    path.write_text(seal_csv(CSV))

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(InputDataError, match="cannot be read"):
        read_sample(path)


def test_read_sample_refusals(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="no such file"):
        read_sample(tmp_path / "missing.csv")
    _read(tmp_path, "empty.csv", b"", "is empty")
    _read(tmp_path, "bad.json", b"{not json", "not JSON")
    _read(tmp_path, "bad.json", b"\xff\xfe", "not JSON")
    _read(tmp_path, "cut.csv", CSV, "no integrity trailer")
    _read(
        tmp_path,
        "cols.csv",
        seal_csv("key,estimate\na,1\n"),
        r"lacks columns \['bias', 'variance'\]",
    )
    _read(
        tmp_path,
        "junk.csv",
        seal_csv('key,estimate,bias,variance\n"a,1\n'),
        "not a privhist sample",
    )


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ({"key": None, "estimate": 1, "bias": 0, "variance": 0}, "has no key"),
        ({"key": "a", "estimate": "1", "bias": 0, "variance": 0}, "estimate that is not a number"),
        ({"key": "a", "estimate": True, "bias": 0, "variance": 0}, "estimate that is not a number"),
        ({"key": "a", "estimate": 1, "bias": float("inf"), "variance": 0}, "has bias inf"),
        ({"key": "a", "estimate": 1, "bias": 0, "variance": -0.5}, "has variance -0.5"),
        ({"key": "a", "estimate": 1, "bias": 0}, r"lacks \['variance'\]"),
    ],
)
def test_read_sample_refuses_bad_rows(tmp_path: Path, row: dict[str, Any], match: str) -> None:
    doc = {"metadata": seal_metadata({}, [row]), "rows": [row]}
    _read(tmp_path, "s.json", json.dumps(doc), match)


def test_read_sample_accepts_zero_and_negative_bias(tmp_path: Path) -> None:
    rows = [{"key": "a", "estimate": -1.0, "bias": -2, "variance": 0}]
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"metadata": seal_metadata({}, rows), "rows": rows}))
    assert read_sample(path) == rows
