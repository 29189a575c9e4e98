"""Readers: every format on tiny files, key normalisation, and typed errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from privhist.core.errors import InputDataError, ValidationError
from privhist.io import infer_format, resolve_format, scan, select_records


def rows(lf: pl.LazyFrame) -> list[tuple[object, ...]]:
    return sorted(lf.collect().rows(), key=repr)


# -- tabular formats --------------------------------------------------------------------------


def test_csv_keys_and_users_are_text_and_only_needed_columns_are_selected(
    tmp_path: Path,
) -> None:
    f = tmp_path / "d.csv"
    f.write_text("id,item,other\n1,10,x\n1,20,y\n2,10,z\n")
    lf = scan(f, key="item", user="id")
    assert isinstance(lf, pl.LazyFrame)
    assert lf.collect_schema() == pl.Schema({"key": pl.String, "user": pl.String})
    assert rows(lf) == [("10", "1"), ("10", "2"), ("20", "1")]
    lf = scan(f, key="item", user="id", key_type="int")
    assert lf.collect_schema() == pl.Schema({"key": pl.Int64, "user": pl.String})
    assert rows(lf) == [(10, "1"), (10, "2"), (20, "1")]


def test_csv_string_keys_and_no_user(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text('word\nfoo\n"b,ar"\nfoo\n')
    lf = scan(f, key="word")
    assert lf.collect_schema() == pl.Schema({"key": pl.String})
    assert lf.collect()["key"].to_list() == ["foo", "b,ar", "foo"]


def test_csv_float_keys_become_strings(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("k\n1.5\n2.0\n")
    assert scan(f, key="k").collect()["key"].to_list() == ["1.5", "2.0"]


def test_csv_empty_cells_are_null_keys(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("k,u\na,1\n,2\n")
    assert scan(f, key="k", user="u").collect()["key"].to_list() == ["a", None]


def test_tsv(tmp_path: Path) -> None:
    f = tmp_path / "d.tsv"
    f.write_text("k\tu\nx y\t1\nz\t2\n")
    assert rows(scan(f, key="k", user="u")) == [("x y", "1"), ("z", "2")]


def test_gzipped_csv(tmp_path: Path) -> None:
    f = tmp_path / "d.csv.gz"
    f.write_bytes(gzip.compress(b"k\na\nb\na\n"))
    assert scan(f, key="k").collect()["key"].to_list() == ["a", "b", "a"]


def test_parquet_integer_keys_follow_key_type(tmp_path: Path) -> None:
    f = tmp_path / "d.parquet"
    pl.DataFrame(
        {"k": pl.Series([3, 4, 3], dtype=pl.Int16), "u": ["p", "q", "p"], "x": [0.1, 0.2, 0.3]}
    ).write_parquet(f)
    lf = scan(f, key="k", user="u")
    assert lf.collect_schema() == pl.Schema({"key": pl.String, "user": pl.String})
    assert rows(lf) == [("3", "p"), ("3", "p"), ("4", "q")]
    lf = scan(f, key="k", user="u", key_type="int")
    assert lf.collect_schema() == pl.Schema({"key": pl.Int64, "user": pl.String})
    assert rows(lf) == [(3, "p"), (3, "p"), (4, "q")]


def test_parquet_int_key_type_casts_each_value_on_its_own(tmp_path: Path) -> None:
    f = tmp_path / "d.parquet"
    pl.DataFrame(
        {
            "s": ["007", "7", "zzz", None, "-3"],
            "big": pl.Series([1, 2**63, 2, 3, 4], dtype=pl.UInt64),
            "f": [1.5, 2.0, None, 3.0, -1.0],
            "u": pl.Series([7, 7, 8, 9, 10], dtype=pl.Int32),
        }
    ).write_parquet(f)
    assert scan(f, key="s", key_type="int").collect()["key"].to_list() == [7, 7, None, None, -3]
    # an integer outside the Int64 range is not an Int64 key: a null key, not an error
    assert scan(f, key="big", key_type="int").collect()["key"].to_list() == [1, None, 2, 3, 4]
    assert scan(f, key="big").collect()["key"].to_list() == ["1", str(2**63), "2", "3", "4"]
    # non-integer types go through their text, so a float is never truncated into an integer
    assert scan(f, key="f", key_type="int").collect()["key"].to_list() == [None] * 5
    assert scan(f, key="f").collect()["key"].to_list() == ["1.5", "2.0", None, "3.0", "-1.0"]
    # users are compared as text in every file format; a file's integer user column stays an
    # integer column (equal as integers exactly when equal as decimal text, and far cheaper)
    lf = scan(f, key="s", user="u")
    assert lf.collect_schema() == pl.Schema({"key": pl.String, "user": pl.Int64})
    assert lf.collect()["user"].to_list() == [7, 7, 8, 9, 10]
    # unsigned 64-bit ids may not fit in Int64: those go through their text
    big = scan(f, key="s", user="big")
    assert big.collect_schema()["user"] == pl.String
    assert big.collect()["user"].to_list() == ["1", str(2**63), "2", "3", "4"]


def test_parquet_categorical_and_boolean_keys_become_strings(tmp_path: Path) -> None:
    f = tmp_path / "d.parquet"
    pl.DataFrame(
        {"c": pl.Series(["a", "b"], dtype=pl.Categorical), "b": [True, False]}
    ).write_parquet(f)
    assert scan(f, key="c").collect()["key"].to_list() == ["a", "b"]
    assert scan(f, key="b").collect()["key"].to_list() == ["true", "false"]


@pytest.mark.parametrize("name", ["d.ndjson", "d.jsonl"])
def test_ndjson(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    f.write_text('{"k": "a", "u": 1}\n{"k": "b", "u": 2}\n{"u": 3}\n')
    assert rows(scan(f, key="k", user="u")) == [("a", "1"), ("b", "2"), (None, "3")]


def test_ndjson_values_are_read_as_their_json_text(tmp_path: Path) -> None:
    f = tmp_path / "d.ndjson"
    f.write_text(
        '{"k": 7, "u": "007", "x": 1}\n{"k": "007", "u": 7, "x": "other"}\n'
        '{"k": true, "u": 1.5}\n{"k": "zzz", "u": null}\n'
    )
    lf = scan(f, key="k", user="u")
    assert lf.collect_schema() == pl.Schema({"key": pl.String, "user": pl.String})
    assert lf.collect().rows() == [("7", "007"), ("007", "7"), ("true", "1.5"), ("zzz", None)]
    got = scan(f, key="k", user="u", key_type="int").collect()
    assert got["key"].to_list() == [7, 7, None, None]
    assert got["user"].to_list() == ["007", "7", "1.5", None]


def test_ndjson_missing_field_lists_the_fields(tmp_path: Path) -> None:
    f = tmp_path / "d.ndjson"
    f.write_text('{"a": 1, "b": "x"}\n')
    with pytest.raises(InputDataError, match=r"parameter 'key' of scan .*'a', 'b'.*got 'k'"):
        scan(f, key="k")
    with pytest.raises(InputDataError, match="parameter 'user' of count"):
        scan(f, key="a", user="u", function="count")


@pytest.mark.parametrize("name", ["d.csv", "d.ndjson"])
def test_key_type_is_chosen_never_inferred(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    values = ["007", "7"] * 6_000 + ["zzz"]  # integers well past any inference window, then not
    if name.endswith(".csv"):
        f.write_text("k,u\n" + "".join(f"{v},{v}\n" for v in values))
    else:
        f.write_text("".join(f'{{"k": "{v}", "u": "{v}"}}\n' for v in values))
    text = scan(f, key="k", user="u").collect()
    assert text["key"].to_list() == values and text["user"].to_list() == values
    as_int = scan(f, key="k", user="u", key_type="int").collect()
    assert as_int["key"].to_list() == [7] * 12_000 + [None]
    assert as_int["user"].to_list() == values  # users stay text whatever the key type


def test_key_type_must_be_str_or_int(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("k\n1\n")
    for bad in ("float", "INT", 1):
        with pytest.raises(ValidationError, match="parameter 'key_type' of scan must be one of"):
            scan(f, key="k", key_type=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'key_type' of scan"):
        select_records(pl.DataFrame({"k": [1]}), key="k", key_type="auto")


def test_select_records_keeps_the_table_type_unless_key_type_is_given() -> None:
    df = pl.DataFrame({"k": pl.Series([7, 12], dtype=pl.UInt8), "s": ["007", "x"], "u": [1, 2]})
    assert select_records(df, key="k").collect()["key"].to_list() == [7, 12]
    assert select_records(df, key="k", key_type="str").collect()["key"].to_list() == ["7", "12"]
    assert select_records(df, key="s", key_type="int").collect()["key"].to_list() == [7, None]
    lf = select_records(df, key="s", user="u")
    assert lf.collect_schema() == pl.Schema({"key": pl.String, "user": pl.Int64})


def test_header_only_csv_is_zero_records_not_an_error(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("k,u\n")
    assert scan(f, key="k", user="u").collect().height == 0


# -- plain text -------------------------------------------------------------------------------


TEXT = "\ufeffThe cat's HAT, the end.\n\n  'Tis 42 -- ' naïve\n"


def test_text_words_are_lower_cased_records(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text(TEXT, encoding="utf-8")
    words = scan(f).collect()["key"].to_list()
    # a lone quote mark is not a word; non-ASCII letters separate words
    assert words == ["the", "cat's", "hat", "the", "end", "'tis", "42", "na", "ve"]


def test_text_lines_are_users(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text(TEXT, encoding="utf-8")
    lf = scan(f, user=True)
    assert lf.collect_schema() == pl.Schema({"key": pl.String, "user": pl.Int64})
    got = lf.collect()
    assert got.filter(pl.col("key") == "the")["user"].to_list() == [1, 1]
    assert set(got["user"].to_list()) == {1, 3}  # the blank line holds no words


def test_gzipped_text(tmp_path: Path) -> None:
    f = tmp_path / "t.txt.gz"
    f.write_bytes(gzip.compress(TEXT.encode("utf-8")))
    plain = tmp_path / "t.txt"
    plain.write_text(TEXT, encoding="utf-8")
    assert scan(f).collect().equals(scan(plain).collect())


def test_text_tokens_are_strings_unless_key_type_int(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text("agent 007 and 7\n")
    assert scan(f).collect()["key"].to_list() == ["agent", "007", "and", "7"]
    assert scan(f, key_type="int").collect()["key"].to_list() == [None, 7, None, 7]


def test_text_format_given_explicitly(tmp_path: Path) -> None:
    f = tmp_path / "book"
    f.write_text("a b a\n")
    assert scan(f, format="text").collect()["key"].to_list() == ["a", "b", "a"]


# -- FIMI baskets -----------------------------------------------------------------------------


def test_fimi_baskets_with_trailing_spaces(tmp_path: Path) -> None:
    f = tmp_path / "r.dat"
    f.write_text("0 1 2 \n3 4 \n\n1  5\t\n")
    lf = scan(f, user=True)
    assert lf.collect_schema() == pl.Schema({"key": pl.Int64, "user": pl.Int64})
    assert lf.collect().rows() == [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (1, 4), (5, 4)]
    assert scan(f).collect()["key"].to_list() == [0, 1, 2, 3, 4, 1, 5]


def test_fimi_non_integer_item_is_a_null_key_on_its_own(tmp_path: Path) -> None:
    f = tmp_path / "r.fimi"
    f.write_text("1 2\n3 x 007\n")
    assert scan(f).collect()["key"].to_list() == [1, 2, 3, None, 7]
    assert scan(f, user=True).collect()["user"].to_list() == [1, 1, 2, 2, 2]
    assert scan(f, key_type="str").collect()["key"].to_list() == ["1", "2", "3", "x", "007"]


# -- errors -----------------------------------------------------------------------------------


def test_missing_column_lists_the_available_columns(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("alpha,beta\n1,2\n")
    with pytest.raises(InputDataError) as err:
        scan(f, key="gamma")
    msg = str(err.value)
    assert "parameter 'key' of scan" in msg and "'alpha'" in msg and "'beta'" in msg
    assert "'gamma'" in msg
    with pytest.raises(InputDataError, match="parameter 'user' of scan"):
        scan(f, key="alpha", user="delta")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="parameter 'path' of scan must be an existing file"):
        scan(tmp_path / "nope.csv", key="k")


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    d = tmp_path / "d.csv"
    d.mkdir()
    with pytest.raises(InputDataError, match="must be a file"):
        scan(d, key="k")


@pytest.mark.parametrize("name", ["e.csv", "e.parquet", "e.txt", "e.dat", "e.ndjson"])
def test_empty_file(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    f.write_bytes(b"")
    with pytest.raises(InputDataError, match="is empty"):
        scan(f, key="k")


def test_empty_gzip_and_corrupt_gzip(tmp_path: Path) -> None:
    empty = tmp_path / "e.txt.gz"
    empty.write_bytes(gzip.compress(b""))
    with pytest.raises(InputDataError, match="is empty"):
        scan(empty)
    bad = tmp_path / "b.txt.gz"
    bad.write_bytes(b"this is not gzip")
    with pytest.raises(InputDataError, match="cannot read"):
        scan(bad)


def test_corrupt_parquet(tmp_path: Path) -> None:
    f = tmp_path / "bad.parquet"
    f.write_bytes(b"definitely not parquet")
    with pytest.raises(InputDataError, match="cannot read"):
        scan(f, key="k")


def test_unknown_format(tmp_path: Path) -> None:
    f = tmp_path / "d.xlsx"
    f.write_text("k\n1\n")
    with pytest.raises(ValidationError, match="parameter 'input_format' of scan"):
        scan(f, key="k")
    with pytest.raises(ValidationError, match="parameter 'input_format' of scan must be one of"):
        scan(f, key="k", format="excel")
    with pytest.raises(ValidationError):
        infer_format("d.parquet.gz")  # Parquet compresses itself


def test_format_inference_and_aliases() -> None:
    assert infer_format("A.CSV") == "csv"
    assert infer_format("x.tsv.gz") == "tsv"
    assert infer_format("retail.dat") == "fimi"
    assert infer_format("x.pq") == "parquet"
    assert resolve_format("whatever", "TXT") == "text"
    assert resolve_format("whatever", "jsonl") == "ndjson"


def test_user_must_be_a_column_name_for_tables(tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("k,u\na,1\n")
    with pytest.raises(ValidationError, match="parameter 'user' of scan"):
        scan(f, key="k", user=True)
    with pytest.raises(ValidationError, match="parameter 'user' of scan"):
        scan(f, key="k", user="k")


def test_select_records_rejects_nested_keys() -> None:
    df = pl.DataFrame({"k": [[1, 2], [3]], "u": [1, 2]})
    with pytest.raises(InputDataError, match="scalar values"):
        select_records(df, key="k", user="u")


def test_error_names_the_calling_function(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="of count"):
        scan(tmp_path / "x.csv", key="k", function="count")
