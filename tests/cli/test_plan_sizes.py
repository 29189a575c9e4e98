"""``privhist plan`` refuses sizes it cannot answer quickly, in one line naming the largest it
accepts; the sizes it accepts are timed by ``benchmarks/bench_plan.py`` (never here). Also: the
size limits' own arithmetic (optimal selection's step count, pure-sparse's precision bound, the
GeoSample bound) and the effective epsilon of ``stability-geometric``."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path

import pytest

from privhist.cli.main import main
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.mechanisms.finite import sparse
from privhist.mechanisms.finite.histograms import (
    StabilityGeometricHistogram,
    histogram_k,
    largest_ratio_k,
)
from privhist.mechanisms.finite.ordsample import precision_for
from privhist.mechanisms.optimal_selection import (
    MAX_STEPS,
    optimal_reporting_grid,
    smallest_epsilon,
)

ONE, D6 = ["--epsilon", "1"], ["--delta", "1e-6"]

OVERSIZE = [
    (["default", *ONE, *D6], "--max-count", "1000001", "1000000"),
    (["stability", *ONE, *D6], "--max-count", "1000001", "1000000"),
    (["optimal-selection", "--keys-only", *D6], "--epsilon", "2.66e-05", "2.67e-05"),
    (["optimal-selection", "--keys-only", "--delta", "1e-300"], "--epsilon", "0.00685", "0.00686"),
    (["sample-and-threshold", *ONE, *D6], "--population", "1000001", "1000000"),
    (["pws", *ONE, *D6], "--max-count", "1000001", "1000000"),
    (["basic-geometric", *ONE], "--count-bound", "33554432", "33554431"),
    (["stability-geometric", *ONE, *D6], "--count-bound", "33554432", "33554431"),
    (["pure-sparse", *ONE], "--count-bound", "33554432", "33554431"),
    (["sparse", *ONE, *D6], "--count-bound", "33554432", "33554431"),
    (["kh-prime", *ONE, *D6], "--count-bound", "33554432", "33554431"),
    (["compact", *ONE, *D6], "--max-keys", "65537", "65536"),
    (["bounded-geometric", *ONE, "--true-count", "5"], "--n", "2046", "2045"),
    (
        ["cpbm", "--dimension", "10", "--m", "10", "--theta", "0.25", *D6],
        "--users",
        "100001",
        "100000",
    ),
    (["wgm", *ONE, *D6], "--max-partitions", "10001", "10000"),
    (["dp-sips", *ONE, *D6], "--max-partitions", "10001", "10000"),
    (["wgm", *ONE, *D6], "--max-count", "1000001", "1000000"),
]


@pytest.mark.parametrize(("args", "flag", "over", "largest"), OVERSIZE, ids=lambda v: str(v))
def test_oversize_is_refused_in_one_line_naming_the_largest(
    capsys: pytest.CaptureFixture[str], args: list[str], flag: str, over: str, largest: str
) -> None:
    assert main(["plan", *args, flag, over, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("privhist: error: ") and flag in err and largest in err, err


def test_optimal_selection_accepts_its_smallest_epsilon() -> None:
    delta = Fraction(1e-6)
    eps = smallest_epsilon(delta)
    bits, nums = optimal_reporting_grid(Fraction(eps), delta)
    assert len(nums) - 1 <= MAX_STEPS and nums[-1] == 1 << bits
    with pytest.raises(ValidationError, match="epsilon"):
        optimal_reporting_grid(Fraction(eps) * Fraction(99, 100), delta)


@pytest.mark.parametrize("n", [1, 7, 300, 2000])
@pytest.mark.parametrize("size", [2**64, 1000, 2**20])
def test_pure_sparse_exact_precision_equals_the_fraction_route(n: int, size: int) -> None:
    eps, beta2 = Fraction(1), Fraction(1, 1000)
    num, den = sparse.mixing_delta_parts(eps, beta2, n, size)
    reference = precision_for(n, size, sparse.mixing_delta(eps, beta2, n, size))
    assert sparse.precision_from_parts(n, size, num, den) == reference


@pytest.mark.parametrize("n", [20_000, 40_000])
@pytest.mark.parametrize("size", [2**64, 999])
def test_pure_sparse_bounded_precision_is_safe_and_close(
    n: int, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    eps, beta2 = Fraction(1, 2), Fraction(1, 1000)
    num, den = sparse.mixing_delta_parts(eps, beta2, n, size)
    exact = sparse.precision_from_parts(n, size, num, den)
    monkeypatch.setattr(sparse, "_EXACT_PRECISION_MAX_N", 10)
    bounded, log2_tv = sparse.pure_sparse_precision(eps, beta2, n, size)
    assert exact <= bounded <= exact + 3  # never below the exact precision: the guarantee holds
    assert log2_tv == pytest.approx(math.log2(num) - math.log2(den), abs=1e-3)


def test_count_bound_refusal_names_the_exact_largest(capsys: pytest.CaptureFixture[str]) -> None:
    for eps in ("1", "0.1"):
        assert (
            main(["plan", "basic-geometric", "--epsilon", eps, "--count-bound", "999999999"]) == 2
        )
        largest = int(re.findall(r"at most (\d+)", capsys.readouterr().err)[0])
        assert (
            main(["plan", "basic-geometric", "--epsilon", eps, "--count-bound", str(largest)]) == 0
        )
        capsys.readouterr()
        assert (
            main(["plan", "basic-geometric", "--epsilon", eps, "--count-bound", str(largest + 1)])
            == 2
        )
        capsys.readouterr()


@pytest.mark.parametrize("l1", [1, 2, 3, 8])
def test_largest_ratio_k_is_the_smallest_k_within_epsilon(l1: int) -> None:
    nb = Neighbouring.user(l1, 1)
    for i in range(1, 200):
        eps = i / 200
        k0 = histogram_k(eps, nb)
        k = largest_ratio_k(eps, nb, k0)
        assert k <= k0
        # independent float check, away from the boundary
        spent = l1 * math.log1p(2.0**-k)
        assert spent <= eps * (1 + 1e-12)
        if k > 0:
            assert l1 * math.log1p(2.0 ** -(k - 1)) > eps * (1 - 1e-12)


def test_stability_geometric_uses_and_states_its_effective_epsilon(
    capsys: pytest.CaptureFixture[str],
) -> None:
    m = StabilityGeometricHistogram(0.9, 1e-6, count_bound=1000)
    # the coarse grid 1 + 2**-K gives ratio 2 (ln 2 <= 0.9, K = 0 < histogram_k); the finer grid
    # 1 + s / 16 gives 39/16 (ln(39/16) = 0.891 <= 0.9 < ln(40/16))
    assert histogram_k(0.9, Neighbouring.add_remove()) > 0
    assert m.ratio == Fraction(39, 16)
    assert m.parameters()["epsilon_effective"] == pytest.approx(math.log(39 / 16))
    assert (
        main(
            [
                "plan",
                "stability-geometric",
                "--epsilon",
                "0.9",
                *D6,
                "--count-bound",
                "1000",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["effective_epsilon"] == pytest.approx(math.log(39 / 16))
    assert (
        main(["plan", "stability-geometric", "--epsilon", "0.9", *D6, "--count-bound", "1000"]) == 0
    )
    assert "effective     epsilon 0.890973 of the requested 0.9" in capsys.readouterr().out
    # a mechanism spending all of its epsilon states nothing extra
    assert main(["plan", "stability", *ONE, *D6, "--json"]) == 0
    assert "effective_epsilon" not in json.loads(capsys.readouterr().out)


def test_release_summary_and_metadata_state_the_effective_epsilon(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "d.csv"
    data.write_text("key\n" + "a\n" * 300 + "b\n")
    out = tmp_path / "r.json"
    argv = ["histogram", str(data), "--key", "key", "--mechanism", "stability-geometric"]
    argv += ["--epsilon", "0.9", *D6, "--count-bound", "1000", "--seed", "1", "-o", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "effective epsilon 0.890973 of the requested 0.9" in err
    meta = json.loads(out.read_text())["metadata"]
    assert meta["parameters"]["epsilon_effective"] == pytest.approx(math.log(39 / 16))
    assert meta["parameters"]["K"] == 4 and meta["parameters"]["ratio"] == "39/16"


def test_a_count_beyond_the_curve_is_said_so(capsys: pytest.CaptureFixture[str]) -> None:
    # stability at (1, 1e-8): released with probability 1/2 from 20, with probability one only
    # further on; a curve cut at 40 shows the first and says the second lies beyond it
    assert (
        main(["plan", "stability", "--epsilon", "1", "--delta", "1e-8", "--max-count", "40"]) == 0
    )
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("50% released"))
    assert line == (
        "50% released from true count 20; always from > 40 (beyond the curve: raise --max-count)"
    )
    assert (
        main(["plan", "stability", "--epsilon", "1", "--delta", "1e-8", "--max-count", "400"]) == 0
    )
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("50% released"))
    assert "None" not in line and "beyond" not in line
