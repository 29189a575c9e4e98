"""``privhist plan``: one sub-parser per mechanism, each with only its own options."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest

import privhist.mechanisms.registry as registry
from privhist.cli.main import main


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cpbm_computes_epsilon_without_being_given_one(capsys: Any) -> None:
    argv = ["plan", "cpbm", "--users", "10000", "--dimension", "64", "--m", "30"]
    code, out, err = _run(capsys, *argv, "--theta", "0.2", "--delta", "1e-5", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert 0 < report["epsilon"] < 100 and "target_epsilon" not in report
    code, out, _ = _run(
        capsys, *argv, "--theta", "0.2", "--delta", "1e-5", "--json", "--epsilon", "1"
    )
    with_target = json.loads(out)
    assert code == 0 and with_target["epsilon"] == report["epsilon"]
    assert with_target["meets_target"] is (report["epsilon"] <= 1)


@pytest.mark.parametrize(
    ("target", "foreign"),
    [
        ("stability", ["--strict-time"]),  # a finite-computers option
        ("stability", ["--users", "10"]),  # a cpbm planner option
        ("cpbm", ["--keys-only"]),
        ("dense", ["--max-keys", "3"]),  # compact's
    ],
)
def test_a_mechanism_refuses_other_mechanisms_options(
    target: str, foreign: list[str], capsys: Any
) -> None:
    code, _, err = _run(capsys, "plan", target, "--epsilon", "1", "--delta", "1e-8", *foreign)
    assert code == 2 and "unrecognized arguments" in err and err.count("\n") == 1


def test_every_registered_mechanism_has_its_own_plan_parser(capsys: Any) -> None:
    for name in registry.names():
        code, out, err = _run(capsys, "plan", name, "--help")
        assert code == 0 and f"privhist plan {name}" in out, (name, err)
        own = {o.flag for o in registry.get(name).options}
        others = {
            o.flag for cls in registry.registry().values() for o in cls.options if o.flag not in own
        }
        assert all(flag in out for flag in own), name
        shown = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", out))
        assert not shown & others, (name, shown & others)


@pytest.mark.parametrize("name", ["wgm", "dp-sips"])
def test_weighted_selectors_have_a_plan(name: str, capsys: Any) -> None:
    code, out, err = _run(
        capsys, "plan", name, "--epsilon", "1", "--delta", "1e-8", "--max-count", "150", "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    p = report["reporting_probability"]
    assert len(p) == 151 and p[0] < 1e-8 and p[-1] > 0.99
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(p))
    assert report["users_at_half"] < report["users_at_99"] <= 150
    assert report["parameters"]["max_keys"] == 20  # the documented default cap


def test_former_calibration_spelling_is_accepted_on_the_command_line(capsys: Any) -> None:
    base = ("plan", "sample-and-threshold", "--epsilon", "1", "--delta", "1e-8", "--json")
    code_old, out_old, _ = _run(capsys, *base, "--calibration", "theorem1")
    code_new, out_new, _ = _run(capsys, *base, "--calibration", "chernoff")
    assert code_old == code_new == 0
    assert out_old == out_new
    assert json.loads(out_new)  # a plan was printed
    code_bad, _, err = _run(capsys, *base, "--calibration", "theorem2")
    assert code_bad != 0 and "calibration" in err


def test_plan_help_lines_read_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    """Each planner's line in privhist plan --help: no reST markup, no repeated command name,
    and a line cut from a longer sentence says so."""
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out and "privhist plan" not in out.split("\n", 1)[1]
    # "BasicHistogram ... a noisy count in [0, n] for every" goes on in its docstring
    assert "for every ..." in " ".join(out.split())
