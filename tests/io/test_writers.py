"""Writers: CSV/JSON/Parquet round trips, JSON-safe metadata, and atomic replacement."""

from __future__ import annotations

import json
import os
import stat
from enum import Enum
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import SeededRandom
from privhist.io import (
    PARQUET_METADATA_KEY,
    metadata_to_json,
    release_to_csv,
    release_to_frame,
    release_to_json,
    write_release,
)
from privhist.io.release import Release


class Colour(Enum):
    RED = "red"


def rich_metadata() -> dict[str, Any]:
    return {
        "mechanism": "demo",
        "epsilon": Fraction(1, 3),
        "delta": np.float64(1e-9),
        "threshold": np.int64(17),
        "scales": np.array([1.5, 2.5]),
        "neighbouring": Neighbouring.user(3, 2),
        "randomness": SeededRandom(4).to_dict(),
        "source": SeededRandom(5),
        "colour": Colour.RED,
        "path": Path("/data/x.csv"),
        "pair": (1, 2),
        "tags": {"b", "a"},
        "unbounded": float("inf"),
        "flags": [np.bool_(True)],
        "nested": {"k": np.uint8(3), 7: None},
    }


def values_only() -> Release:
    return Release(
        keys=np.array(["b", "a,c", 'q"t'], dtype=object),
        values=np.array([4, 2, 9], dtype=np.int64),
        metadata=rich_metadata(),
    )


def with_intervals() -> Release:
    return Release(
        keys=np.array([10, 3, 7], dtype=np.int64),
        values=np.array([12, 5, 0], dtype=np.int64),
        lower=np.array([10.5, 3.0, 0.0]),
        upper=np.array([13.5, 7.25, np.inf]),
        metadata={"mechanism": "demo", "confidence": 0.95},
    )


# -- CSV --------------------------------------------------------------------------------------


def test_csv_header_is_key_count_for_values_only(tmp_path: Path) -> None:
    out = write_release(values_only(), tmp_path / "r.csv")
    lines = out.read_text().splitlines()
    assert lines[0] == "key,count"
    back = pl.read_csv(out)
    # one row per released key, in the release's order
    assert back["key"].to_list() == ["b", "a,c", 'q"t']
    assert back["count"].to_list() == [4, 2, 9]


def test_csv_with_intervals(tmp_path: Path) -> None:
    out = write_release(with_intervals(), tmp_path / "r.csv")
    assert out.read_text().splitlines()[0] == "key,count,lower,upper"
    back = pl.read_csv(out)
    assert back["key"].to_list() == [10, 3, 7]
    assert back["lower"].to_list() == [10.5, 3.0, 0.0]
    assert back["upper"].to_list()[:2] == [13.5, 7.25]
    assert back["upper"][2] == float("inf")


def test_csv_with_estimates_and_intervals(tmp_path: Path) -> None:
    r = Release(
        keys=np.array(["x"], dtype=object),
        values=np.array([3]),
        estimates=np.array([2.5]),
        lower=np.array([1.0]),
        upper=np.array([4.0]),
    )
    out = write_release(r, tmp_path / "r.csv")
    assert out.read_text() == "key,count,estimate,lower,upper\nx,3,2.5,1.0,4.0\n"


def test_release_to_csv_matches_the_file(tmp_path: Path) -> None:
    out = write_release(with_intervals(), tmp_path / "r.csv")
    assert release_to_csv(with_intervals()) == out.read_text()


def test_empty_release_writes_a_header(tmp_path: Path) -> None:
    r = Release(keys=np.array([], dtype=object), values=np.array([], dtype=np.int64))
    out = write_release(r, tmp_path / "r.csv")
    assert out.read_text().splitlines() == ["key,count"]
    assert json.loads(release_to_json(r))["rows"] == []


# -- JSON -------------------------------------------------------------------------------------


def test_json_document_and_metadata_are_serialisable(tmp_path: Path) -> None:
    out = write_release(values_only(), tmp_path / "r.json")
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert set(doc) == {"metadata", "rows"}
    assert doc["rows"] == [
        {"key": "b", "count": 4},
        {"key": "a,c", "count": 2},
        {"key": 'q"t', "count": 9},
    ]
    meta = doc["metadata"]
    assert meta["epsilon"] == "1/3"
    assert meta["delta"] == 1e-9
    assert meta["threshold"] == 17
    assert meta["scales"] == [1.5, 2.5]
    assert meta["neighbouring"]["relation"] == "user"
    assert meta["neighbouring"]["max_contributions_per_partition"] == 2
    assert meta["source"] == SeededRandom(5).to_dict()
    assert meta["colour"] == "red"
    assert meta["path"] == "/data/x.csv"
    assert meta["pair"] == [1, 2]
    assert meta["tags"] == ["a", "b"]
    assert meta["unbounded"] == "inf"
    assert meta["flags"] == [True]
    assert meta["nested"] == {"k": 3, "7": None}
    # a file carries a row count and checksum (privhist.io.integrity); the string form does not
    assert doc["metadata"].pop("integrity")["rows"] == len(doc["rows"])
    assert doc == json.loads(release_to_json(values_only()))


def test_json_rows_write_non_finite_numbers_as_null() -> None:
    doc = json.loads(release_to_json(with_intervals()))
    assert doc["rows"][2] == {"key": 7, "count": 0, "lower": 0.0, "upper": None}
    assert doc["metadata"] == {"mechanism": "demo", "confidence": 0.95}


def test_metadata_to_json_is_plain() -> None:
    meta = metadata_to_json(values_only())
    assert json.loads(json.dumps(meta, allow_nan=False)) == meta


# -- Parquet ----------------------------------------------------------------------------------


def test_parquet_round_trip_with_metadata(tmp_path: Path) -> None:
    r = with_intervals()
    out = write_release(r, tmp_path / "r.parquet")
    back = pl.read_parquet(out)
    assert back.columns == ["key", "count", "lower", "upper"]
    assert back.equals(release_to_frame(r))
    kv = pl.read_parquet_metadata(out)
    meta = json.loads(kv[PARQUET_METADATA_KEY])
    assert meta.pop("integrity")["rows"] == back.height
    assert meta == {"mechanism": "demo", "confidence": 0.95}


def test_parquet_string_keys(tmp_path: Path) -> None:
    out = write_release(values_only(), tmp_path / "r.pq")
    back = pl.read_parquet(out)
    assert back["key"].to_list() == ["b", "a,c", 'q"t']
    assert back.schema == pl.Schema({"key": pl.String, "count": pl.Int64})
    meta = json.loads(pl.read_parquet_metadata(out)[PARQUET_METADATA_KEY])
    assert meta.pop("integrity")["rows"] == back.height
    assert meta == metadata_to_json(values_only())


def test_explicit_format_overrides_the_extension(tmp_path: Path) -> None:
    out = write_release(with_intervals(), tmp_path / "r.out", format="json")
    assert json.loads(out.read_text())["rows"][0]["key"] == 10


# -- errors and atomicity -----------------------------------------------------------------------


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_unknown_format_and_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="parameter 'format' of write_release"):
        write_release(values_only(), tmp_path / "r.xlsx")
    with pytest.raises(ValidationError, match="parameter 'format' of write_release"):
        write_release(values_only(), tmp_path / "r.csv", format="excel")
    with pytest.raises(ValidationError, match="parameter 'path' of write_release"):
        write_release(values_only(), tmp_path / "missing" / "r.csv")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("name", ["r.json", "r.parquet"])
def test_unserialisable_metadata_leaves_no_file(tmp_path: Path, name: str) -> None:
    r = Release(keys=np.array([1]), values=np.array([1]), metadata={"bad": {"x": object()}})
    with pytest.raises(ValidationError, match=r"object at metadata\['bad'\]\['x'\]"):
        write_release(r, tmp_path / name)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("name", ["r.json", "r.parquet"])
def test_unserialisable_metadata_keeps_an_existing_file(tmp_path: Path, name: str) -> None:
    dest = tmp_path / name
    write_release(with_intervals(), dest)
    before = dest.read_bytes()
    r = Release(keys=np.array([1]), values=np.array([1]), metadata={"bad": object()})
    with pytest.raises(ValidationError):
        write_release(r, dest)
    assert dest.read_bytes() == before
    assert leftovers(tmp_path) == [name]


def test_failure_mid_write_keeps_an_existing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "r.csv"
    dest.write_text("old contents\n")

    def half_then_fail(self: pl.DataFrame, file: Any, **kwargs: Any) -> None:
        file.write(b"key,count\nb,")
        raise OSError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_csv", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_release(values_only(), dest)
    assert dest.read_text() == "old contents\n"
    assert leftovers(tmp_path) == ["r.csv"]


def test_failure_mid_write_leaves_no_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half_then_fail(self: pl.DataFrame, file: Any, **kwargs: Any) -> None:
        file.write(b"PAR1")
        raise RuntimeError("interrupted")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", half_then_fail)
    with pytest.raises(RuntimeError):
        write_release(with_intervals(), tmp_path / "r.parquet")
    assert leftovers(tmp_path) == []


def test_replacing_keeps_permissions(tmp_path: Path) -> None:
    dest = tmp_path / "r.csv"
    dest.write_text("old\n")
    os.chmod(dest, 0o640)
    write_release(values_only(), dest)
    assert stat.S_IMODE(dest.stat().st_mode) == 0o640
    assert dest.read_text().startswith("key,count\n")


def test_new_file_gets_ordinary_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = write_release(values_only(), tmp_path / "r.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
