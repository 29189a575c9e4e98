"""Regression tests for the defects of the fault-injection and bad-input run (issue 17).

Group 1 (an unpaid release survives a kill) is ``test_kill.py``. Here: group 2 (tracebacks instead
of one-line errors), group 3 (silent acceptance of cut, edited or mislabelled files), group 4
(side effects of a refusal) and group 5 (exact input facts beside releases and in errors).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from tests.cli_run import run

from privhist.accounting.ledger import Ledger
from privhist.core.budget import Budget
from privhist.core.errors import InputDataError
from privhist.io.integrity import seal_csv, seal_metadata, verify_csv, verify_document
from privhist.io.samples import read_sample


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must fail closed: exit 2, one stderr line, nothing on stdout."""
    code, out, err = run(capsys, *argv)
    assert code == 2, err
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("privhist: error: "), err
    return err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rows = ["user,key,value"] + [f"u{i},{'abcab'[i % 5]},{i % 100}" for i in range(3000)]
    path = tmp_path / "data.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite"
    Ledger(path).init_dataset("d", Budget(10.0, 1e-4))
    return path


def sample_files(capsys: pytest.CaptureFixture[str], data: Path) -> tuple[Path, Path]:
    out = []
    for suffix in (".csv", ".json"):
        path = data.parent / f"sample{suffix}"
        code, _, err = run(capsys, "sample", str(data), "--key", "key", "--tau", "0.5",
                           "--epsilon", "1", "--delta", "1e-6", "-o", str(path), "--seed", "2",
                           "--no-progress")  # fmt: skip
        assert code == 0, err
        out.append(path)
    return out[0], out[1]


def compact_file(capsys: pytest.CaptureFixture[str], data: Path) -> Path:
    path = data.parent / "compact.json"
    code, _, err = run(capsys, "histogram", str(data), "--key", "value", "--key-type", "int",
                       "--mechanism", "compact", "--universe-bits", "8", "--max-keys", "128",
                       "--count-bound", "100", "--epsilon", "1", "-o", str(path), "--seed", "3",
                       "--no-progress")  # fmt: skip
    assert code == 0, err
    return path


# -- group 2: one line, never a traceback ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["histogram", "{data}", "--key", "key", "--delta", "1e-6"],
        ["heavy-hitters", "{data}", "--key", "key", "--delta", "1e-6"],
        [
            "quantiles",
            "{data}",
            "--column",
            "value",
            "--range",
            "0",
            "100",
            "--q",
            "0.5",
            "--delta",
            "1e-6",
        ],
        [
            "range",
            "{data}",
            "--column",
            "value",
            "--range",
            "0",
            "100",
            "--query",
            "0",
            "50",
            "--delta",
            "1e-6",
        ],
        ["sample", "{data}", "--key", "key", "--tau", "1", "--delta", "1e-6"],
        [
            "federated-frequency",
            "{data}",
            "--user",
            "user",
            "--key",
            "key",
            "--domain-from-data",
            "--delta",
            "1e-6",
        ],
    ],
    ids=lambda a: a[0],
)
def test_huge_epsilon_is_refused_by_every_release(
    capsys: pytest.CaptureFixture[str], data: Path, argv: list[str]
) -> None:
    args = [a.replace("{data}", str(data)) for a in argv]
    err = refused(capsys, *args, "--epsilon", "1e6", "--no-progress")
    assert "'epsilon' (--epsilon)" in err and "<= 100" in err


def test_non_utf8_inputs_and_domains(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"user,key\n\xff\xfe,a\nu2,\xc3\x28\n")
    domain = tmp_path / "domain.txt"
    domain.write_bytes(b"a\n\xff\nc\n")
    err = refused(capsys, "federated-frequency", str(bad), "--user", "user", "--key", "key",
                  "--domain-from-data", "--epsilon", "1", "--delta", "1e-6")  # fmt: skip
    assert "utf-8" in err.lower()
    for cmd in (
        ["federated-frequency", str(data), "--user", "user", "--key", "key"],
        ["histogram", str(data), "--key", "key"],
    ):
        err = refused(capsys, *cmd, "--domain", str(domain), "--epsilon", "1", "--delta", "1e-6")
        assert "not UTF-8" in err


def test_estimate_refuses_empty_binary_and_non_finite_samples(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    empty, binary = tmp_path / "empty.csv", tmp_path / "binary.json"
    empty.write_bytes(b"")
    binary.write_bytes(bytes(range(256)))
    assert "is empty" in refused(capsys, "estimate", str(empty))
    assert "not a privhist sample" in refused(capsys, "estimate", str(binary))
    # a sample whose checksum is right but which holds nan or -inf (as another writer could
    # produce): the value check refuses it
    _, sample = sample_files(capsys, data)
    doc = json.loads(sample.read_text())
    for bad in (float("nan"), float("-inf")):
        rows = [dict(r) for r in doc["rows"]]
        rows[0]["estimate"] = bad
        meta = {k: v for k, v in doc["metadata"].items() if k != "integrity"}
        spoiled = tmp_path / "spoiled.json"
        spoiled.write_text(json.dumps({"metadata": seal_metadata(meta, rows), "rows": rows}))
        assert "finite numbers" in refused(capsys, "estimate", str(spoiled))


@pytest.mark.parametrize("offset", [5, 30, 43, 60])
def test_ledger_with_flipped_bytes_is_one_line(
    capsys: pytest.CaptureFixture[str], data: Path, ledger: Path, offset: int
) -> None:
    raw = bytearray(ledger.read_bytes())
    at = raw.find(b"CREATE TABLE spends")
    raw[at + offset] ^= 0x80  # the schema text is no longer UTF-8 (was a UnicodeDecodeError)
    ledger.write_bytes(bytes(raw))
    before = digest(ledger)
    err = refused(capsys, "budget", "show", "--ledger", str(ledger))
    assert f"ledger {ledger}" in err
    err = refused(capsys, "histogram", str(data), "--key", "key", "--epsilon", "1",
                  "--delta", "1e-6", "--ledger", str(ledger), "--dataset", "d")  # fmt: skip
    assert f"ledger {ledger}" in err
    assert digest(ledger) == before


def test_compact_query_with_an_undecodable_key(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    release = data.parent / "compact-text.json"
    code, _, err = run(capsys, "histogram", str(data), "--key", "key", "--mechanism", "compact",
                       "--key-encoding", "utf8", "--universe-bits", "64", "--max-keys", "8",
                       "--count-bound", "100", "--epsilon", "1", "-o", str(release), "--seed", "3",
                       "--no-progress")  # fmt: skip
    assert code == 0, err
    code, out, _ = run(capsys, "compact-query", str(release), "a", "--json")
    assert code == 0 and set(json.loads(out)) == {"a"}
    # bytes that are not UTF-8 on the command line arrive as surrogates
    for path in (compact_file(capsys, data), release):
        err = refused(capsys, "compact-query", str(path), os.fsdecode(b"\xff\xfe"))
        assert "parameter 'keys'" in err


# -- group 3: no silent acceptance -----------------------------------------------------------------


def test_estimate_refuses_a_sample_cut_in_half(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    csv_sample, json_sample = sample_files(capsys, data)
    code, out, _ = run(capsys, "estimate", str(csv_sample), "--json")
    assert code == 0 and json.loads(out)["keys"] >= 1  # the whole file answers
    lines = csv_sample.read_bytes().splitlines(keepends=True)
    half = tmp_path / "half.csv"
    half.write_bytes(b"".join(lines[: len(lines) // 2]))  # cut at a line boundary
    assert "no integrity trailer" in refused(capsys, "estimate", str(half))
    text = json_sample.read_bytes()
    half_json = tmp_path / "half.json"
    half_json.write_bytes(text[: len(text) // 2])
    assert "not a privhist sample" in refused(capsys, "estimate", str(half_json))
    # rows removed from a JSON sample that still parses: the row count disagrees
    doc = json.loads(text)
    doc["rows"] = doc["rows"][: len(doc["rows"]) // 2]
    half_json.write_text(json.dumps(doc))
    assert "integrity check" in refused(capsys, "estimate", str(half_json))


def test_compact_query_refuses_tampered_metadata(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    release = compact_file(capsys, data)
    code, out, _ = run(capsys, "compact-query", str(release), "3", "--json")
    assert code == 0 and set(json.loads(out)) == {"3"}
    doc = json.loads(release.read_text())
    doc["metadata"]["compact"]["count_bound"] += 1  # still a well-formed compact payload
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(doc))
    assert "integrity check" in refused(capsys, "compact-query", str(tampered), "3")
    del doc["metadata"]["integrity"]
    tampered.write_text(json.dumps(doc))
    assert "no valid integrity entry" in refused(capsys, "compact-query", str(tampered), "3")


def test_format_contradicting_the_suffix_is_refused(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    for name, fmt in (("out.json", "csv"), ("out.csv", "parquet")):
        err = refused(capsys, "histogram", str(data), "--key", "key", "--epsilon", "1",
                      "--delta", "1e-6", "-o", str(tmp_path / name), "--format", fmt)  # fmt: skip
        assert "(--format)" in err
        assert not (tmp_path / name).exists()


def test_integrity_round_trip_and_detection() -> None:
    body = "key,estimate\na,1.5\nb,2\n"
    sealed = seal_csv(body).encode()
    assert verify_csv(sealed, "s") == body.encode()
    for spoiled in (
        sealed.replace(b"1.5", b"1.6"),  # a cell changed
        sealed.replace(b"b,2\n", b""),  # a row removed
        sealed[: sealed.index(b"# privhist")],  # the trailer cut off
    ):
        with pytest.raises(InputDataError):
            verify_csv(spoiled, "s")
    rows = [{"key": "a", "estimate": 1.5}]
    meta = seal_metadata({"mechanism": "m"}, rows)
    assert verify_document({"metadata": meta, "rows": rows}, "d", rows_required=True)[1] == rows
    with pytest.raises(InputDataError, match="integrity check"):
        verify_document({"metadata": {**meta, "mechanism": "x"}, "rows": rows}, "d",
                        rows_required=True)  # fmt: skip


def test_read_sample_accepts_what_sample_writes(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    csv_sample, json_sample = sample_files(capsys, data)
    a, b = read_sample(csv_sample), read_sample(json_sample)
    assert len(a) >= 1 and [r["key"] for r in a] == [r["key"] for r in b]


# -- group 4: a refusal has no side effect ---------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [("nan", "0"), ("inf", "0"), ("1e-400", "0"), ("1", "1"), ("-1", "0"), ("1", "nan")],
)
def test_budget_init_refusal_creates_no_ledger(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, epsilon: str, delta: str
) -> None:
    path = tmp_path / "l.sqlite"
    refused(capsys, "budget", "init", "--dataset", "d", "--epsilon", epsilon, "--delta", delta,
            "--ledger", str(path))  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_budget_init_creates_no_directories_and_cleans_up(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nested = tmp_path / "nodir" / "l.sqlite"
    err = refused(capsys, "budget", "init", "--dataset", "d", "--epsilon", "1",
                  "--ledger", str(nested))  # fmt: skip
    assert "(--ledger)" in err
    refused(capsys, "budget", "init", "--dataset", "", "--epsilon", "1",
            "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    code, _, err = run(capsys, "budget", "init", "--dataset", "d", "--epsilon", "1",
                       "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    assert code == 0, err
    # registering it again is refused, and the existing ledger is kept unchanged
    before = digest(tmp_path / "l.sqlite")
    refused(capsys, "budget", "init", "--dataset", "d", "--epsilon", "2",
            "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    assert digest(tmp_path / "l.sqlite") == before


def test_budget_show_refuses_an_empty_dataset_id(
    capsys: pytest.CaptureFixture[str], ledger: Path
) -> None:
    assert "(--dataset)" in refused(capsys, "budget", "show", "--dataset", "", "--ledger",
                                    str(ledger))  # fmt: skip


# -- group 5: exact input facts on stderr only, marked, never in an error about a parameter --


def test_heavy_hitters_prints_the_client_count_on_stderr_only(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    code, out, err = run(capsys, "heavy-hitters", str(data), "--key", "key", "--one-shot",
                         "--epsilon", "1", "--delta", "1e-6", "--no-progress")  # fmt: skip
    assert code == 0, err
    # the exact client count is an input fact: never on stdout (the table's clients_lower /
    # clients_upper columns are released intervals, not the count)
    assert "3000" not in out
    assert not any(line.split()[:1] == ["clients"] for line in out.splitlines())
    assert "3000 clients" in err and "not private" in err


def test_error_messages_do_not_state_the_number_of_users(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    domain = tmp_path / "domain.txt"
    domain.write_text("a\nb\nc\n")
    base = ["federated-frequency", str(data), "--user", "user", "--key", "key", "--domain",
            str(domain), "--delta", "1e-6", "--max-items", "1", "--no-progress"]  # fmt: skip
    for extra in (["--epsilon", "0.01"], ["--epsilon", "1", "--protocol", "mffe",
                                          "--rounds", "5000"]):  # fmt: skip
        err = refused(capsys, *base, *extra)
        assert "3000" not in err and "0.0917" not in err, err


def test_unwritable_output_is_refused_before_the_spend_without_temporary_names(
    capsys: pytest.CaptureFixture[str], data: Path, ledger: Path
) -> None:
    place = Path("/sys/privhist-out.csv")  # a read-only file system in most environments
    if not place.parent.is_dir() or (os.access(place.parent, os.W_OK) and _writable(place.parent)):
        pytest.skip("no unwritable directory here")
    before = digest(ledger)
    err = refused(capsys, "histogram", str(data), "--key", "key", "--epsilon", "1",
                  "--delta", "1e-6", "-o", str(place), "--ledger", str(ledger),
                  "--dataset", "d")  # fmt: skip
    assert ".tmp" not in err and ".probe" not in err and str(place) in err
    assert digest(ledger) == before  # refused before anything was spent


def _writable(directory: Path) -> bool:
    try:
        probe = directory / ".privhist-probe"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def test_compact_query_refuses_tampered_parquet_metadata(
    capsys: pytest.CaptureFixture[str], data: Path, tmp_path: Path
) -> None:
    import polars as pl

    release = tmp_path / "compact.parquet"
    code, _, err = run(capsys, "histogram", str(data), "--key", "value", "--key-type", "int",
                       "--mechanism", "compact", "--universe-bits", "8", "--max-keys", "128",
                       "--count-bound", "100", "--epsilon", "1", "-o", str(release), "--seed", "3",
                       "--no-progress")  # fmt: skip
    assert code == 0, err
    code, out, _ = run(capsys, "compact-query", str(release), "3")
    assert code == 0 and out.startswith("3\t")
    meta = json.loads(pl.read_parquet_metadata(release)["privhist"])
    meta["compact"]["count_bound"] += 1
    tampered = tmp_path / "tampered.parquet"
    pl.read_parquet(release).write_parquet(tampered, metadata={"privhist": json.dumps(meta)})
    assert "integrity check" in refused(capsys, "compact-query", str(tampered), "3")
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(release.read_bytes()[: release.stat().st_size // 2])
    assert "not a privhist Parquet release" in refused(capsys, "compact-query", str(cut), "3")
