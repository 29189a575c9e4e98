"""A mechanism option refused on the command line: one line naming the parameter, its flag and
the command that built the mechanism (not the Python class), with what the option accepts; and
``--help`` states what each option accepts (from the declared constraints)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli_run import run


@pytest.fixture
def words(tmp_path: Path) -> Path:
    path = tmp_path / "words.csv"
    path.write_text("word\na\nb\na\n")
    return path


def test_plan_names_the_command_and_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "stability-geometric", "--epsilon", "0.5", "--delta", "1e-6"]
    code, out, err = run(capsys, *argv, "--count-bound", "0")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert (
        "parameter 'count_bound' (--count-bound) of plan stability-geometric must be an integer "
        "in [1, 2**62)"
    ) in err
    assert "StabilityGeometricHistogram" not in err


def test_histogram_names_the_command_and_the_mechanism(
    capsys: pytest.CaptureFixture[str], words: Path
) -> None:
    argv = ["histogram", str(words), "--key", "word", "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--mechanism", "optimal-selection", "--selection-fraction", "1.5"]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert (
        "parameter 'selection_fraction' (--selection-fraction) of histogram --mechanism "
        "optimal-selection must be a finite number in (0, 1); got 1.5"
    ) in err


def test_relational_checks_use_the_same_template(capsys: pytest.CaptureFixture[str]) -> None:
    # the threshold must be reachable below the count bound: a check between two parameters
    argv = ["plan", "stability-geometric", "--epsilon", "0.5", "--delta", "1e-6"]
    code, _, err = run(capsys, *argv, "--count-bound", "3")
    assert code == 2
    assert "parameter 'count_bound' (--count-bound) of plan stability-geometric must be >= " in err


def test_help_states_what_options_accept(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "plan", "sample-and-threshold", "--help")
    out = " ".join(capsys.readouterr().out.split())
    assert "count is at least this (an integer >= 1)" in out
    assert "(a rational number in (0, 1])" in out  # --alpha


def test_a_weighted_selector_cap_is_named_by_its_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the selectors call the cap max_keys; the user gave --max-partitions (not compact's
    # --max-keys)
    data = tmp_path / "users.csv"
    data.write_text("user,word\n1,a\n2,b\n")
    argv = ["histogram", str(data), "--key", "word", "--user", "user", "--epsilon", "1"]
    code, _, err = run(
        capsys, *argv, "--delta", "1e-6", "--mechanism", "wgm", "--max-partitions", "0"
    )
    assert code == 2
    assert "parameter 'max_partitions' (--max-partitions) of histogram must be" in err, err
    assert "--max-keys" not in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["plan", "aggregate", "--pub", "--epsilon", "1", "--metric", "count"], "--pub"),
        (["histogram", "w.csv", "--key", "word", "--epsilon", "1", "--mech", "wgm"], "--mech"),
        (["histogram", "w.csv", "--key", "word", "--epsilon", "1", "--del", "1e-6"], "--del"),
    ],
)
def test_abbreviated_options_are_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    # argparse would read "--pub" as "--public" and "--del" as "--delta"
    with pytest.raises(SystemExit) as exited:
        run(capsys, *argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == "" and err.count("\n") == 1
    assert "unrecognized arguments" in err and flag in err


@pytest.mark.parametrize("value", ["-1e-6", "-1E-6", "-.5", "-2"])
def test_a_negative_number_is_refused_by_its_option(
    capsys: pytest.CaptureFixture[str], words: Path, value: str
) -> None:
    # argparse took "-1e-6" for an option and said "--delta: expected one argument"
    argv = ["histogram", str(words), "--key", "word", "--epsilon", "1", "--delta", value]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "parameter 'delta' (--delta) of histogram must be a finite number in [0, 1)" in err


def test_plan_aggregate_takes_the_user_column_as_aggregate_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the flag copied from privhist aggregate: a user column makes the plan user-level
    argv = ["plan", "aggregate", "--epsilon", "1", "--delta", "1e-6", "--metric", "count", "--json"]
    plans = {}
    for extra in ([], ["--user", "uid"], ["--user-level"]):
        code, out, err = run(capsys, *argv, *extra)
        assert code == 0, err
        plans[" ".join(extra)] = out
    assert plans["--user uid"] == plans["--user-level"] != plans[""]
    assert "user-level" in plans["--user uid"]


RANGE = ["--column", "v", "--epsilon", "1", "--delta", "1e-6"]
PUBLIC = ["--epsilon", "1", "--product", "v=5"]  # public groups: no delta needed


@pytest.mark.parametrize(
    ("argv", "message", "internal"),
    [
        (
            ["range", "--range", "0", "10", "--query", "0", "20", *RANGE],
            "parameter 'queries' (--query) of range must be ranges (A, B) with 0 <= A <= B <= 10",
            "'value'",
        ),
        (
            ["range", "--range", "10", "0", "--query", "5", "2", *RANGE],
            "parameter 'upper' (--range) of range must be greater than the lower end, 10",
            "'hi'",
        ),
        (
            ["quantiles", "--range", "5", "5", "--q", "0.5", *RANGE],
            "parameter 'upper' (--range) of quantiles must be greater than the lower end, 5",
            "'hi'",
        ),
        (
            ["range", "--range", "nan", "10", "--query", "0", "2", *RANGE],
            "parameter 'lower' (--range) of range must be a finite number",
            "'lo'",
        ),
        (
            ["heavy-hitters", "--key", "v", "--epsilon", "1", "--delta", "1e-6", "--seed", "1"],
            "parameter 'alphabet' (--alphabet) of heavy-hitters must be a string holding every "
            "character of the items ('X', in the item 'aX', is not in it), or given with "
            "--drop-unknown to drop such items",
            "drop_unknown",
        ),
        (
            ["aggregate", "--by", "v", "--metric", "sum(v,10,0)", "--epsilon", "1"],
            "parameter '--metric' of aggregate must be a sum metric whose upper is > lower (10.0); "
            "got 'sum(v,10,0)'",
            "metrics.sum",
        ),
        (
            ["aggregate", "--by", "v", "--metric", "count", *PUBLIC, "--weight", "typo=2"],
            "parameter 'weights' (--weight) of aggregate must be names among count, groups",
            "'weights' of aggregate",
        ),
        (
            ["sample", "--key", "v", "--weight", "x", "--tau", "1", *RANGE[2:]],
            "parameter 'weight' (--weight) of sample must be one of the columns of",
            "'key'",
        ),
        (
            ["sample", "--key", "v", "--weight", "w", "--tau", "1", *RANGE[2:]],
            "parameter 'weight' (--weight) of sample must be positive integer frequencies",
            "'frequencies'",
        ),
        (
            ["histogram", "--key", "v", "--user", "u", *RANGE[2:]],
            "parameter 'user' (--user) of histogram must be one of the columns of",
            "'user' of",
        ),
    ],
)
def test_errors_name_the_flag_the_user_typed(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    message: str,
    internal: str,
) -> None:
    # the library names its own parameters (the hierarchy's lo, hi and value, TrieHH's
    # drop_unknown, a metric's check, the sampler's frequencies, the weight column read as a
    # key): the command line names the flag given
    data = tmp_path / "v.csv"
    data.write_text("v,w\nab,1.5\naX,2\n5,1\n")
    code, out, err = run(capsys, argv[0], str(data), *argv[1:])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert message in err, err
    assert internal not in err


@pytest.mark.parametrize("sizes", ["0,10", "-5", "100,0"])
def test_plan_aggregate_refuses_group_sizes_below_one(
    sizes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A group of 0 records has no relative error (it was a ZeroDivisionError traceback) and a
    negative one gave negative errors: refused in one line naming the flag."""
    argv = ["plan", "aggregate", "--epsilon", "1", "--delta", "1e-6", "--metric", "sum(x,0,10)"]
    code, out, err = run(capsys, *argv, f"--sizes={sizes}")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "'--sizes' of plan aggregate must be group sizes >= 1" in err


def test_the_aggregate_plan_refuses_group_sizes_below_one() -> None:
    from privhist import metrics as m
    from privhist.analytics.aggregate import Aggregation, plan
    from privhist.core.errors import ValidationError

    agg = Aggregation({"s": m.sum("x", 0, 10)}, ("g",), 1.0, 1e-6, False, 1, 1, None)
    assert set(plan(agg, [1, 50])["metrics"]) == {"s"}
    with pytest.raises(ValidationError, match="sizes"):
        plan(agg, [10, 0])


def test_public_groups_given_as_values_are_named_by_their_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--partitions`` takes a CSV file; values typed in its place (``--partitions fr,de``)
    were read as a file name and refused in Polars' words, naming no option."""
    data = tmp_path / "orders.csv"
    data.write_text("customer,country\n1,fr\n2,de\n")
    argv = ["aggregate", str(data), "--by", "country", "--user", "customer", "--epsilon", "1"]
    argv += ["--delta", "1e-6", "--metric", "count()"]
    code, out, err = run(capsys, *argv, "--partitions", "fr,de")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "parameter '--partitions' of aggregate must be a CSV file" in err
    assert "--product country=fr,de" in err and "got 'fr,de'" in err
