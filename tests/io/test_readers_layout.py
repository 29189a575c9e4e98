"""Headerless CSV files (``columns``) and separators (``separator``, tabs from a header)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from privhist.core.errors import InputDataError, ValidationError
from privhist.io import FileFormat, parse_separator, scan

ADULT_LIKE = "39,State-gov,77516\n50,Self-emp,83311\n38,Private,215646\n39,Private,1\n"
ADULT_COLUMNS = ["age", "workclass", "fnlwgt"]


def _keys(path: Path, **kw: object) -> list[object]:
    return sorted(scan(path, **kw).collect()["key"].to_list())  # type: ignore[arg-type]


def test_a_headerless_file_loses_no_record_with_columns(tmp_path: Path) -> None:
    path = tmp_path / "adult.data"
    path.write_text(ADULT_LIKE)
    keys = _keys(path, format="csv", columns=ADULT_COLUMNS, key="age")
    assert keys == ["38", "39", "39", "50"]  # the first line is a record
    # without columns its first record is the header: a record lost, a column called '39'
    with pytest.raises(InputDataError, match=r"'39', 'State-gov', '77516'\); got 'age'"):
        scan(path, format="csv", key="age")
    assert _keys(path, format="csv", key="39") == ["38", "39", "50"]
    users = scan(path, format="csv", columns=ADULT_COLUMNS, key="workclass", user="age")
    assert sorted(users.collect().rows()) == [
        ("Private", "38"),
        ("Private", "39"),
        ("Self-emp", "50"),
        ("State-gov", "39"),
    ]


def test_columns_in_a_file_format_value(tmp_path: Path) -> None:
    path = tmp_path / "adult.data"
    path.write_text(ADULT_LIKE)
    spec = FileFormat("csv", tuple(ADULT_COLUMNS))
    assert _keys(path, format=spec, key="age") == ["38", "39", "39", "50"]
    assert FileFormat.of(spec, columns=ADULT_COLUMNS) == spec  # the same choice twice
    with pytest.raises(ValidationError, match="parameter 'columns' of scan"):
        scan(path, format=spec, columns=["a", "b", "c"], key="a")
    with pytest.raises(ValidationError, match="parameter 'separator' of scan"):
        scan(path, format=FileFormat("csv", separator=";"), separator=",", key="age")
    assert spec.to_dict() == {"format": "csv", "columns": ADULT_COLUMNS, "separator": None}


def test_the_number_of_names_must_be_the_number_of_fields(tmp_path: Path) -> None:
    path = tmp_path / "adult.data"
    path.write_text(ADULT_LIKE)
    for names in (["age", "workclass"], [*ADULT_COLUMNS, "extra"]):
        with pytest.raises(InputDataError) as info:
            scan(path, format="csv", columns=names, key="age")
        assert str(info.value) == (
            f"parameter 'columns' of scan must name every column of {str(path)!r}, which has 3 "
            f"field(s) in its first line split by ','; got {len(names)} name(s)"
        )


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        ("age,workclass", "a list of column names"),
        ([], "a non-empty list of non-empty column names"),
        (["age", ""], "a non-empty list of non-empty column names"),
        (["age", 3], "a non-empty list of non-empty column names"),
        (["age", "age", "x"], "distinct column names; got 'age more than once'"),
    ],
)
def test_bad_columns_are_refused(tmp_path: Path, columns: object, expected: str) -> None:
    path = tmp_path / "a.csv"
    path.write_text(ADULT_LIKE)
    with pytest.raises(ValidationError, match=f"parameter 'columns' of count must be {expected}"):
        scan(path, columns=columns, key="age", function="count")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "text"),
    [("a.parquet", None), ("a.ndjson", '{"k": 1}\n'), ("a.txt", "w\n"), ("a.dat", "1 2\n")],
)
def test_columns_and_separator_are_for_csv_and_tsv_only(
    tmp_path: Path, name: str, text: str | None
) -> None:
    path = tmp_path / name
    if text is None:
        import polars as pl

        pl.DataFrame({"k": [1]}).write_parquet(path)
    else:
        path.write_text(text)
    for kw in ({"columns": ["k"]}, {"separator": ";"}):
        param = next(iter(kw))
        with pytest.raises(ValidationError, match=rf"parameter '{param}' of scan must be None"):
            scan(path, key="k", **kw)  # type: ignore[arg-type]


def test_a_tab_separated_dat_file_read_as_csv(tmp_path: Path) -> None:
    # the case: a tab-separated file named .dat read with --input-format csv
    path = tmp_path / "visits.dat"
    path.write_text("page\tuser\nhome\t1\nabout\t2\nhome\t2\n")
    rows = sorted(scan(path, format="csv", key="page", user="user").collect().rows())
    assert rows == [("about", "2"), ("home", "1"), ("home", "2")]
    # the same with the separator given, and for a headerless copy (never sniffed)
    assert sorted(scan(path, format="csv", separator="\t", key="page").collect()["key"]) == [
        "about",
        "home",
        "home",
    ]
    bare = tmp_path / "bare.dat"
    bare.write_text("home\t1\nabout\t2\n")
    kw = {"format": "csv", "columns": ["page", "user"], "key": "page"}
    with pytest.raises(InputDataError, match="which has 1 field"):
        scan(bare, **kw)  # type: ignore[arg-type]
    assert _keys(bare, separator="\t", **kw) == ["about", "home"]


def test_tabs_are_detected_from_the_header_only(tmp_path: Path) -> None:
    # a header with tabs and no comma: tab-separated (also gzipped)
    gz = tmp_path / "t.csv.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("k\tu\nx\t1\ny\t2\n")
    assert _keys(gz, key="k") == ["x", "y"]
    # a header with a comma is comma-separated, whatever the records hold
    path = tmp_path / "c.csv"
    path.write_text("k,u\nx\ty,1\n")
    assert _keys(path, key="k") == ["x\ty"]
    # a headerless file whose first record holds a tab is not switched to tabs
    bare = tmp_path / "bare.csv"
    bare.write_text("x\ty\nz\n")
    assert _keys(bare, columns=["k"], key="k") == ["x\ty", "z"]


def test_tsv_and_other_separators(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv"
    path.write_text("k;u\nx;1\n")
    assert _keys(path, key="k;u") == ["x;1"]  # TSV splits at tabs only
    assert _keys(path, separator=";", key="k") == ["x"]
    semi = tmp_path / "b.csv"
    semi.write_text("x;1\ny;2\n")
    assert _keys(semi, columns=["k", "u"], separator=";", key="k") == ["x", "y"]


@pytest.mark.parametrize("bad", ["", ";;", "\n", "\r", '"', "é", 9])
def test_bad_separators_are_refused(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "a.csv"
    path.write_text("k\nx\n")
    with pytest.raises(ValidationError, match="parameter 'separator' of scan must be one ASCII"):
        scan(path, key="k", separator=bad)  # type: ignore[arg-type]


def test_separators_as_a_command_line_spells_them() -> None:
    assert [parse_separator(t) for t in ("\\t", "TAB", "comma", ";", "|")] == [
        "\t",
        "\t",
        ",",
        ";",
        "|",
    ]
    with pytest.raises(ValidationError, match="parameter 'separator' of histogram"):
        parse_separator("tabs", "histogram")


def test_file_format_describes_itself() -> None:
    spec = FileFormat("csv", ("a", "b"), "\t")
    assert spec.describe() == "csv, no header, columns 'a', 'b', separator '\\t'"
    assert FileFormat(columns=["a"]).columns == ("a",)  # lists become tuples (hashable)
    assert hash(FileFormat("tsv")) == hash(FileFormat("tsv"))
    with pytest.raises(ValidationError, match="parameter 'columns' of FileFormat"):
        FileFormat(columns="a,b")  # type: ignore[arg-type]


def test_real_adult_data(shared_data: Path) -> None:
    path = shared_data / "adult.data"
    if not path.is_file():
        pytest.skip("adult.data is not in the shared data")
    names = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status"]
    names += ["occupation", "relationship", "race", "sex", "capital-gain", "capital-loss"]
    names += ["hours-per-week", "native-country", "income"]
    ages = scan(path, format="csv", columns=names, key="age").collect()["key"]
    records = sum(1 for line in path.read_text().splitlines() if line.strip())
    assert ages.drop_nulls().len() == records  # every record, the first one too
    assert ages[0] == "39"
