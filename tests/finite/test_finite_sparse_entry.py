"""KH' (``kh-prime``) and KH'' / SparseHistogram (``sparse``) from the CLI, ``plan`` and the
Session: registration, the delta -> ``tv_delta`` rule of Theorem 6.5, and clear refusals."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import privhist.mechanisms.registry as registry
from privhist import Session, ValidationError
from privhist.cli.main import main
from privhist.mechanisms.finite.sparse import KHPrime, SparseHistogram

NAMES = ["kh-prime", "sparse"]


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def keys_csv(tmp_path: Path) -> Path:
    rows = ["key"] + ["7"] * 400 + ["1099511627776"] * 300 + ["5"] * 2
    path = tmp_path / "keys.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_both_are_registered_with_their_classes() -> None:
    assert registry.get("kh-prime") is KHPrime
    assert registry.get("sparse") is SparseHistogram


@pytest.mark.parametrize("eps", [0.25, 0.5, 1.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 3.7e-9])
def test_tv_delta_is_the_largest_one_over_k_within_delta(eps: float, delta: float) -> None:
    m = KHPrime(eps, delta, universe_bits=64, count_bound=50)
    e = Fraction(eps)
    factor = 2 + e + e * e
    assert m.tv_delta is not None and m.tv_delta.numerator == 1
    k = m.tv_delta.denominator
    assert factor / k <= Fraction(delta) < factor / (k - 1)  # the largest such 1/k
    g = m.guarantee()
    assert g.delta <= delta and Fraction(g.delta) >= factor / k  # stated, not rounded below


def test_an_explicit_tv_delta_above_the_request_is_refused() -> None:
    with pytest.raises(ValidationError, match="parameter 'tv_delta'"):
        SparseHistogram(1.0, 1e-9, universe_bits=64, count_bound=50, tv_delta="1/1000")
    ok = SparseHistogram(1.0, 1e-3, universe_bits=64, count_bound=50, tv_delta="1/10000")
    assert ok.guarantee().delta == pytest.approx(4e-4) and ok.guarantee().delta <= 1e-3


@pytest.mark.parametrize("name", NAMES)
def test_exact_order_statistics_on_a_huge_universe_are_refused_naming_delta(name: str) -> None:
    cls = registry.get(name)
    with pytest.raises(ValidationError, match=r"parameter 'delta'.*pure-sparse"):
        cls(1.0, 0.0, universe_bits=64, count_bound=50)
    small = cls(1.0, 0.0, universe_bits=10, count_bound=50)  # 1024 x 51 <= 2**21: exact
    assert small.guarantee().delta == 0 and small.tv_delta is None


@pytest.mark.parametrize("name", NAMES)
def test_cli_histogram_releases_heavy_keys(capsys: Any, keys_csv: Path, name: str) -> None:
    argv = ["histogram", str(keys_csv), "--key", "key", "--key-type", "int"]
    argv += ["--mechanism", name, "--epsilon", "1", "--delta", "1e-6", "--count-bound", "300"]
    code, out, err = _run(capsys, *argv, "--seed", "3")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("key,count")
    rows = {int(ln.split(",")[0]): int(ln.split(",")[1]) for ln in lines[1:]}
    assert 7 in rows and 1099511627776 in rows  # counts 400 (clamped to 300) and 300
    assert abs(rows[7] - 300) <= 20 and abs(rows[1099511627776] - 300) <= 20
    assert len(rows) <= 300  # at most n bins


@pytest.mark.parametrize("name", NAMES)
def test_cli_without_delta_on_a_huge_universe_is_a_one_line_error(
    capsys: Any, keys_csv: Path, name: str
) -> None:
    argv = ["histogram", str(keys_csv), "--key", "key", "--key-type", "int"]
    code, out, err = _run(capsys, *argv, "--mechanism", name, "--epsilon", "1")
    assert code == 2 and out == ""
    assert "--delta" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", NAMES)
def test_plan_states_the_derived_tv_delta(capsys: Any, name: str) -> None:
    argv = ["plan", name, "--epsilon", "0.5", "--delta", "1e-8", "--count-bound", "100"]
    code, out, err = _run(capsys, *argv, "--max-count", "50", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["mechanism"] == name and 0 < rep["delta"] <= 1e-8
    bits = rep["parameters"]["precision_bits"]
    assert isinstance(bits, int) and bits > math.log2(1e8)
    # an option of another mechanism is refused by the sub-parser
    code, _, err = _run(capsys, *argv, "--max-count", "5", "--beta2", "1/10")
    assert code == 2 and "--beta2" in err


def test_plan_exact_kh_double_prime_on_a_small_universe(capsys: Any) -> None:
    argv = ["plan", "sparse", "--epsilon", "0.5", "--universe-bits", "10"]
    code, out, err = _run(capsys, *argv, "--count-bound", "20", "--max-count", "5", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["delta"] == 0 and rep["parameters"]["precision_bits"] is None


@pytest.mark.parametrize("name", NAMES)
def test_session_histogram_with_the_mechanism(name: str) -> None:
    frame = pl.DataFrame({"key": [7] * 400 + [2**40] * 300 + [5] * 2})
    rel = Session().histogram(
        frame,
        key="key",
        key_type="int",
        epsilon=1.0,
        delta=1e-6,
        mechanism=name,
        options={"count_bound": 300},
        seed=5,
    )
    assert rel.metadata["mechanism"] == name
    assert {7, 2**40} <= set(rel.keys.tolist())
    assert rel.metadata["guarantee"]["delta"] <= 1e-6
    tv = rel.metadata["parameters"]["precision_bits"]
    assert tv is not None
