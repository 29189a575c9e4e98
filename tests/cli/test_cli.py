"""The ``privhist`` command end to end (in-process, plus the console script once)."""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
from tests.cli_run import run

from privhist.cli.main import main


@pytest.fixture
def visits(tmp_path: Path) -> Path:
    rows = ["page,user"]
    for i in range(3000):
        rows.append(f"home,u{i}")
    for i in range(600):
        rows.append(f"about,u{i % 300}")
    rows += ["secret,u1", "secret,u2"]
    rows += [",u5", ",u6"]  # two null keys
    path = tmp_path / "visits.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_histogram_csv_to_stdout(capsys: pytest.CaptureFixture[str], visits: Path) -> None:
    code, out, err = run(
        capsys,
        "histogram",
        str(visits),
        "--key",
        "page",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--seed",
        "1",
    )
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0] == "key,count,lower,upper"
    keys = [ln.split(",")[0] for ln in lines[1:]]
    assert keys == ["about", "home"]  # sorted; 'secret' (count 2) is below the threshold
    home = int(lines[2].split(",")[1])
    assert abs(home - 3000) < 30
    assert "released 2 keys" in err and "2 records with a null key were dropped" in err
    assert "NOT private" in err and err.count("\n") == 1


def test_histogram_user_level_and_formats(
    capsys: pytest.CaptureFixture[str], visits: Path, tmp_path: Path
) -> None:
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"rel.{fmt}"
        code, _, err = run(
            capsys,
            "histogram",
            str(visits),
            "--key",
            "page",
            "--user",
            "user",
            "--max-partitions",
            "2",
            "--max-per-partition",
            "1",
            "--epsilon",
            "1",
            "--delta",
            "1e-8",
            "--output",
            str(out),
            "--seed",
            "2",
        )
        assert code == 0, err
        assert "user-level (max_partitions_contributed=2" in err
    rel = json.loads((tmp_path / "rel.json").read_text())
    assert rel["metadata"]["neighbouring"]["relation"] == "user"
    assert [r["key"] for r in rel["rows"]] == ["about", "home"]
    frame = pl.read_parquet(tmp_path / "rel.parquet")
    assert frame["key"].to_list() == ["about", "home"]
    # 300 users hold 'about' (2 records each, bounded to 1 per key)
    about = (tmp_path / "rel.csv").read_text().splitlines()[1].split(",")
    assert abs(int(about[1]) - 300) < 40


def test_text_and_fimi_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = tmp_path / "book.txt"
    text.write_text(("The cat and the dog. " * 400) + "rare\n")
    code, out, _ = run(
        capsys,
        "histogram",
        str(text),
        "--text",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "3",
    )
    assert code == 0
    assert [ln.split(",")[0] for ln in out.splitlines()[1:]] == ["and", "cat", "dog", "the"]
    fimi = tmp_path / "baskets.dat"
    fimi.write_text("1 2 3 \n" * 500 + "4 \n")
    code, out, err = run(
        capsys,
        "histogram",
        str(fimi),
        "--user",
        "basket",
        "--max-partitions",
        "3",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "4",
    )
    assert code == 0, err
    assert [ln.split(",")[0] for ln in out.splitlines()[1:]] == ["1", "2", "3"]


def test_tab_separated_file_with_another_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--input-format tsv`` reads a tab-separated file whose name does not say so, as the
    readers, ``aggregate`` and ``quantiles`` do."""
    data = tmp_path / "visits.log"
    data.write_text("page\tclicks\n" + "home\t1\n" * 400 + "faq\t2\n" * 300)
    code, out, err = run(
        capsys,
        "histogram",
        str(data),
        "--input-format",
        "tsv",
        "--key",
        "page",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "5",
    )
    assert code == 0, err
    assert sorted(ln.split(",")[0] for ln in out.splitlines()[1:]) == ["faq", "home"]


def test_dense_with_domain_and_keys_only(
    capsys: pytest.CaptureFixture[str], visits: Path, tmp_path: Path
) -> None:
    dom = tmp_path / "domain.txt"
    dom.write_text("about\nhome\nnever\n")
    code, out, _ = run(
        capsys,
        "histogram",
        str(visits),
        "--key",
        "page",
        "--domain",
        str(dom),
        "--epsilon",
        "1",
        "--seed",
        "5",
    )
    assert code == 0
    assert [ln.split(",")[0] for ln in out.splitlines()[1:]] == ["about", "home", "never"]
    code, out, _ = run(
        capsys,
        "histogram",
        str(visits),
        "--key",
        "page",
        "--keys-only",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "6",
    )
    assert code == 0
    assert out.splitlines() == ["key", "about", "home"]


def test_plan_known_answer(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "optimal-selection",
        "--keys-only",
        "--epsilon",
        "0.6931471805599453",
        "--delta",
        "0.1",
        "--max-count",
        "6",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["reporting_probability"] == pytest.approx(
        [0, 0.1, 0.3, 0.7, 0.9, 1, 1], abs=1e-12
    )
    for field in ("mechanism", "epsilon", "delta", "neighbouring", "parameters"):
        assert field in report


def test_plan_readable_and_stability_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "stability", "--epsilon", "1", "--delta", "1e-8")
    assert code == 0 and "threshold" in out and "Pr[released]" in out
    code, out, _ = run(
        capsys,
        "plan",
        "stability",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--max-count",
        "30",
        "--json",
    )
    rep = json.loads(out)
    t = rep["parameters"]["threshold"]
    # closed form: Pr[1 + Z >= T] = e^-(T-1) / (1 + e^-1) <= 1e-8 at T, > 1e-8 at T - 1
    import math

    assert math.exp(-(t - 1)) / (1 + math.exp(-1)) <= 1e-8 < math.exp(-(t - 2)) / (1 + math.exp(-1))
    assert rep["reporting_probability"][1] <= 1e-8


def test_budget_ledger_flow(
    capsys: pytest.CaptureFixture[str], visits: Path, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    assert (
        run(
            capsys,
            "budget",
            "init",
            "--dataset",
            "web",
            "--epsilon",
            "1.5",
            "--delta",
            "1e-6",
            "--ledger",
            ledger,
        )[0]
        == 0
    )
    args = [
        "histogram",
        str(visits),
        "--key",
        "page",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--ledger",
        ledger,
        "--dataset",
        "web",
    ]
    out1 = tmp_path / "one.csv"
    assert run(capsys, *args, "-o", str(out1))[0] == 0 and out1.exists()
    out2 = tmp_path / "two.csv"
    code, _, err = run(capsys, *args, "-o", str(out2))
    assert code != 0 and "refused" in err and err.count("\n") == 1
    assert not out2.exists()
    code, out, _ = run(capsys, "budget", "show", "--ledger", ledger, "--json")
    (row,) = json.loads(out)
    assert row["releases"] == 1 and row["spent"]["epsilon"] == pytest.approx(1.0)


def test_failed_write_records_nothing(
    capsys: pytest.CaptureFixture[str], visits: Path, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "web",
        "--epsilon",
        "5",
        "--delta",
        "1e-6",
        "--ledger",
        ledger,
    )
    code, _, err = run(
        capsys,
        "histogram",
        str(visits),
        "--key",
        "page",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--ledger",
        ledger,
        "--dataset",
        "web",
        "-o",
        str(tmp_path / "no" / "dir" / "x.csv"),
    )
    assert code != 0 and "x.csv" in err
    code, out, _ = run(capsys, "budget", "show", "--ledger", ledger, "--json")
    assert json.loads(out)[0]["releases"] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epsilon", "0", "--delta", "1e-8"], "parameter 'epsilon'"),
        (["--epsilon", "-1", "--delta", "1e-8"], "parameter 'epsilon'"),
        (["--epsilon", "nan", "--delta", "1e-8"], "parameter 'epsilon'"),
        (["--epsilon", "inf", "--delta", "1e-8"], "parameter 'epsilon'"),
        (["--epsilon", "abc"], "invalid float value"),
        (["--epsilon", "1", "--delta", "1"], "parameter 'delta'"),
        (["--epsilon", "1", "--delta", "-0.5"], "parameter 'delta'"),
        (["--epsilon", "1"], "parameter 'delta'"),  # sparse release needs delta > 0
        (
            ["--epsilon", "1", "--delta", "1e-8", "--max-partitions", "3"],
            "(--max-partitions) of histogram must be given together with a user",
        ),
        (
            ["--epsilon", "1", "--delta", "1e-8", "--user", "user", "--max-partitions", "0"],
            "max_partitions",
        ),
        (["--epsilon", "1", "--delta", "1e-8", "--mechanism", "nope"], "invalid choice"),
        (["--epsilon", "1", "--delta", "1e-8", "--mechanism", "dense"], "parameter 'domain'"),
    ],
)
def test_bad_parameters_one_line(
    capsys: pytest.CaptureFixture[str],
    visits: Path,
    tmp_path: Path,
    extra: list[str],
    message: str,
) -> None:
    out_file = tmp_path / "out.csv"
    with pytest.raises(SystemExit) if "invalid" in message else contextlib.nullcontext():
        code, _, err = run(
            capsys, "histogram", str(visits), "--key", "page", *extra, "-o", str(out_file)
        )
        assert code != 0
        assert message in err and err.count("\n") == 1, err
    if "invalid" in message:
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert not out_file.exists()


@pytest.mark.parametrize(
    ("content", "key", "message"),
    [
        (None, "page", "must be an existing file"),
        ("", "page", "empty"),
        ("page,user\nhome,u1\n", "nosuch", "nosuch"),
    ],
)
def test_bad_inputs_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: str | None,
    key: str,
    message: str,
) -> None:
    path = tmp_path / "in.csv"
    if content is not None:
        path.write_text(content)
    code, out, err = run(
        capsys, "histogram", str(path), "--key", key, "--epsilon", "1", "--delta", "1e-8"
    )
    assert code != 0 and out == ""
    assert message in err and err.count("\n") == 1, err


def test_locked_and_corrupted_ledgers(
    capsys: pytest.CaptureFixture[str], visits: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    code, _, err = run(capsys, "budget", "show", "--ledger", str(bad))
    assert code != 0 and "ledger" in err and err.count("\n") == 1
    good = str(tmp_path / "ok.sqlite")
    run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "d",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--ledger",
        good,
    )
    from privhist.accounting.ledger import Ledger

    holder = sqlite3.connect(good)
    holder.execute("BEGIN IMMEDIATE")
    try:
        import privhist.accounting.ledger as ledger_mod

        original = ledger_mod.Ledger.__init__

        def short_timeout(
            self: Ledger, path: object = None, *, timeout: float = 0.2, create: bool = True
        ) -> None:
            original(self, path, timeout=0.2, create=create)  # type: ignore[arg-type]

        mp = pytest.MonkeyPatch()
        mp.setattr(ledger_mod.Ledger, "__init__", short_timeout)
        out = tmp_path / "o.csv"
        code, _, err = run(
            capsys,
            "histogram",
            str(visits),
            "--key",
            "page",
            "--epsilon",
            "0.5",
            "--delta",
            "1e-8",
            "--ledger",
            good,
            "--dataset",
            "d",
            "-o",
            str(out),
        )
        mp.undo()
    finally:
        holder.rollback()
        holder.close()
    assert code != 0 and "locked" in err and not out.exists()


def test_demo_small(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "demo", "--records", "20000", "--distinct", "1000", "--top", "5")
    assert code == 0
    assert "true count" in out and "Guarantee: (1, 1e-08)-DP" in out


def test_console_script_and_module(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "privhist",
            "plan",
            "stability",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["parameters"]["threshold"] == 15
    res = subprocess.run(
        [sys.executable, "-m", "privhist"], capture_output=True, text=True, check=False
    )
    assert res.returncode != 0


def test_plan_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "plan.png"
    code, _, err = run(
        capsys,
        "plan",
        "default",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--max-count",
        "40",
        "--plot",
        str(out),
    )
    assert code == 0 and "plot written" in err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "default", "--epsilon", "1", "--delta", "1e-8"],
        ["plan", "pws", "--epsilon", "1", "--delta", "1e-8"],
        ["audit", "exact", "stability", "--epsilon", "1", "--delta", "1e-6"],
    ],
)
def test_plot_file_format_is_checked_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    # a name matplotlib cannot write was a traceback after the work; now one line, nothing written
    out = tmp_path / "plan.xyz"
    code, text, err = run(capsys, *argv, "--plot", str(out))
    assert code == 2 and text == "" and err.count("\n") == 1
    assert "parameter '--plot' of " in err and "must be a .png, .svg or .pdf file" in err
    assert not out.exists()


def test_release_is_charged_before_it_reaches_stdout(
    capsys: pytest.CaptureFixture[str],
    visits: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "d",
        "--epsilon",
        "5",
        "--delta",
        "1e-6",
        "--ledger",
        ledger,
    )

    class Broken:
        def write(self, text: str) -> int:
            raise BrokenPipeError

        def flush(self) -> None:
            raise BrokenPipeError

        def fileno(self) -> int:
            return sys.__stdout__.fileno() if sys.__stdout__ else 1

    monkeypatch.setattr(sys, "stdout", Broken())
    monkeypatch.setattr("os.dup2", lambda *a: None)
    main(
        [
            "histogram",
            str(visits),
            "--key",
            "page",
            "--epsilon",
            "1",
            "--delta",
            "1e-8",
            "--ledger",
            ledger,
            "--dataset",
            "d",
        ]
    )
    monkeypatch.undo()
    code, out, _ = run(capsys, "budget", "show", "--ledger", ledger, "--json")
    assert code == 0
    assert json.loads(out)[0]["releases"] == 1  # the noise may have escaped: it is charged


def test_outputs_carry_no_exact_input_statistics(
    capsys: pytest.CaptureFixture[str], visits: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    code, _, err = run(
        capsys,
        "histogram",
        str(visits),
        "--key",
        "page",
        "--user",
        "user",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "-o",
        str(out),
    )
    assert code == 0
    text = out.read_text()
    for leak in ("records", "distinct_keys", "null_keys", "users"):
        assert f'"{leak}"' not in text
    assert "exact, not private, not in the output" in err


def test_ledger_privacy_unit_and_seed_rules(
    capsys: pytest.CaptureFixture[str], visits: Path, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    run(
        capsys,
        "budget",
        "init",
        "--dataset",
        "people",
        "--unit",
        "user",
        "--epsilon",
        "5",
        "--delta",
        "1e-6",
        "--ledger",
        ledger,
    )
    base = [
        "histogram",
        str(visits),
        "--key",
        "page",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--ledger",
        ledger,
        "--dataset",
        "people",
    ]
    code, _, err = run(capsys, *base)  # record-level release against a user-level total
    assert code != 0 and "user" in err
    code, _, err = run(capsys, *base, "--user", "user", "--seed", "3")
    assert code != 0 and "--seed" in err
    code, _, _ = run(capsys, *base, "--user", "user", "--max-partitions", "2")
    assert code == 0


def test_budget_show_does_not_create_a_ledger(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "none.sqlite"
    code, _, err = run(capsys, "budget", "show", "--ledger", str(path))
    assert code != 0 and "no ledger" in err and not path.exists()


def test_fimi_baskets_are_users_and_key_type(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fimi = tmp_path / "b.dat"
    fimi.write_text("1 2 3 \n" * 500)
    code, _, err = run(
        capsys,
        "histogram",
        str(fimi),
        "--max-partitions",
        "3",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "1",
    )
    assert code == 0 and "user-level (max_partitions_contributed=3" in err
    csv = tmp_path / "k.csv"
    csv.write_text("k\n" + "007\n" * 300 + "7\n" * 300 + "x\n")
    _, out_str, _ = run(
        capsys,
        "histogram",
        str(csv),
        "--key",
        "k",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "2",
    )
    assert [ln.split(",")[0] for ln in out_str.splitlines()[1:]] == ["007", "7"]
    _, out_int, err = run(
        capsys,
        "histogram",
        str(csv),
        "--key",
        "k",
        "--key-type",
        "int",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "2",
    )
    assert [ln.split(",")[0] for ln in out_int.splitlines()[1:]] == ["7"]
    assert "1 record with a null key was dropped" in err


def test_output_problems_are_found_before_reading(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the input does not exist either: the output error must come first
    code, _, err = run(
        capsys,
        "histogram",
        str(tmp_path / "missing.csv"),
        "--key",
        "k",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "-o",
        str(tmp_path / "x.txt"),
    )
    assert code != 0 and "format" in err


def test_plan_bounded_geometric_is_checkable_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "bounded-geometric",
        "--epsilon",
        "1",
        "--n",
        "3",
        "--true-count",
        "1",
        "--json",
    )
    assert code == 0
    rep = json.loads(out)
    k = rep["parameters"]["K"]
    assert k == 1  # ceil(log2(2 / eps))
    d = rep["denominator"]
    cdf = rep["scaled_cdf"]
    assert cdf[-1] == d and all(a <= b for a, b in itertools.pairwise(cdf))
    pmf = [Fraction(x) for x in rep["pmf"]]
    assert sum(pmf) == 1
    assert [Fraction(b - a, d) for a, b in itertools.pairwise([0, *cdf])] == pmf
    code, _, err = run(capsys, "plan", "bounded-geometric", "--epsilon", "1", "--n", "3")
    assert code != 0 and "--true-count" in err


def test_compact_release_needs_a_file_that_keeps_the_polynomial(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "ids.csv"
    data.write_text("id\n1\n5\n5\n99\n")
    base = ["histogram", str(data), "--key", "id", "--key-type", "int", "--mechanism", "compact"]
    base += ["--max-keys", "4", "--epsilon", "1", "--seed", "3"]
    code, out, err = run(capsys, *base)
    assert code == 2 and out == "" and "json or parquet" in err
    csv_out = tmp_path / "rel.csv"
    code, out, err = run(capsys, *base, "-o", str(csv_out))
    assert code == 2 and "(--format)" in err and not csv_out.exists()
    json_out = tmp_path / "rel.json"
    code, out, err = run(capsys, *base, "-o", str(json_out))
    assert code == 0 and "degree-4 polynomial" in err
    assert len(json.loads(json_out.read_text())["metadata"]["compact"]["coefficients"]) == 5


def test_domain_goes_to_mechanisms_that_take_one_and_is_refused_elsewhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "k.csv"
    data.write_text("key\n3\n3\n5\n")
    domain = tmp_path / "dom.txt"
    domain.write_text("".join(f"{k}\n" for k in range(3, 100, 2)))
    common = ["histogram", str(data), "--key", "key", "--domain", str(domain), "--epsilon", "1"]
    code, out, err = run(
        capsys, *common, "--key-type", "int", "--mechanism", "pure-sparse", "--count-bound", "4"
    )
    assert code == 0, err
    released = {int(line.split(",")[0]) for line in out.strip().splitlines()[1:]}
    assert released <= set(range(3, 100, 2))  # only domain members, never e.g. 4 or 101
    code, out, err = run(capsys, *common, "--mechanism", "stability", "--delta", "1e-6")
    assert code == 2 and "takes no domain" in err and out == ""
