"""The pws commands: ``plan pws``, ``histogram --mechanism pws``, ``sample`` and ``estimate``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tests.cli_run import run

from privhist.mechanisms.sampling.pws.keys import optimal_reporting_closed_form


def test_plan_pws_no_sampling_matches_lemma_4_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "plan", "pws", "--epsilon", "0.1", "--delta", "0.01", "--max-count", "60", "--json"
    )
    assert code == 0
    rep = json.loads(out)
    want = optimal_reporting_closed_form(0.1, 0.01, 60)
    np.testing.assert_allclose(rep["reporting_probability"], want, atol=1e-12)


def test_plan_pws_with_sampling_and_frequencies(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "pws",
        "--epsilon",
        "0.6931471805599453",
        "--delta",
        "0.1",
        "--sampling",
        "priority",
        "--tau",
        "0.25",
        "--max-count",
        "6",
        "--frequencies",
        "--json",
    )
    assert code == 0
    rep = json.loads(out)
    q = [0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert rep["inclusion_probability"] == q
    # Algorithm 3 by hand with e^eps = 2, delta = 0.1
    pi = [0.0]
    for qi in q[1:]:
        pi.append(min(qi, 2 * pi[-1] + 0.1, 1 + (pi[-1] + 0.1 - 1) / 2))
    np.testing.assert_allclose(rep["reporting_probability"], pi, atol=1e-12)
    fm = rep["frequency_matrix"]
    assert [len(r) for r in fm] == list(range(1, 8))
    for i, row in enumerate(fm):
        assert sum(row[1:]) == pytest.approx(pi[i]) and row[0] == pytest.approx(1 - pi[i])
    assert set(rep["estimator_table"]) >= {"estimate_for_token", "bias", "variance", "mse"}


def test_plan_pws_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys,
        "plan",
        "pws",
        "--epsilon",
        "1",
        "--delta",
        "0.1",
        "--sampling",
        "ppswor",
        "--max-count",
        "5",
    )
    assert code == 2 and "--tau" in err
    code, _, err = run(
        capsys, "plan", "pws", "--epsilon", "1", "--delta", "1.0", "--max-count", "5"
    )
    assert code == 2 and "delta" in err


def test_plan_pws_plot_is_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # --plot is accepted by plan pws as by the other plans of Pr[released]
    pytest.importorskip("matplotlib")
    out = tmp_path / "pws.png"
    argv = ["plan", "pws", "--epsilon", "1", "--delta", "1e-6", "--max-count", "60"]
    code, text, err = run(capsys, *argv, "--sampling", "ppswor", "--tau", "0.1", "--plot", str(out))
    assert code == 0 and f"plot written to {out}" in err
    assert text.startswith("mechanism      pws")  # the plan is printed as without --plot
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("sampling", [[], ["--sampling", "priority", "--tau", "0.05"]])
def test_plan_pws_plot_draws_the_plans_curves(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sampling: list[str],
) -> None:
    import privhist.planning.plot as plot
    from privhist.mechanisms.sampling.pws.mechanism import PWSHistogram

    drawn: dict[str, list[float]] = {}

    def record(curves: list[tuple[str, list[float]]], path: Path, **_: object) -> Path:
        drawn.update((label, list(values)) for label, values in curves)
        return Path(path)

    monkeypatch.setattr(plot, "plot_curves", record)
    argv = ["plan", "pws", "--epsilon", "1", "--delta", "1e-6", "--max-count", "50", "--json"]
    code, out, _ = run(capsys, *argv, *sampling, "--plot", str(tmp_path / "p.svg"))
    assert code == 0
    plan = json.loads(out)
    reported = [v for k, v in drawn.items() if k.startswith("Pr[reported]")]
    assert reported == [plan["reporting_probability"]]
    sampled = [v for k, v in drawn.items() if k.startswith("Pr[sampled]")]
    if sampling:
        assert sampled == [plan["inclusion_probability"]]
        assert "priority, tau 0.05" in next(k for k in drawn if k.startswith("Pr[sampled]"))
    else:
        # no sampling: the one curve is the pws mechanism's own, as plan stability would draw it
        assert sampled == []
        want = PWSHistogram(1.0, 1e-6).reporting_probability(50)
        np.testing.assert_allclose(reported[0], want, atol=1e-12)


def test_histogram_mechanism_pws(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "v.csv"
    data.write_text("page\n" + "home\n" * 500 + "rare\n")
    out = tmp_path / "r.csv"
    code, _, _ = run(
        capsys,
        "histogram",
        str(data),
        "--key",
        "page",
        "--mechanism",
        "pws",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "1",
        "--output",
        str(out),
    )
    assert code == 0
    df = pl.read_csv(out)
    assert df["key"].to_list() == ["home"]  # 'rare' (count 1) is reported w.p. 1e-6
    assert df.columns == ["key", "shifted_count", "estimate"]
    assert 480 <= df["shifted_count"][0] <= 500  # the token is the count minus the shift


@pytest.fixture
def elements(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    freqs = rng.integers(1, 60, size=400)
    rows = ["item"]
    for k, f in enumerate(freqs.tolist()):
        rows += [f"k{k:03d}"] * f
    p = tmp_path / "elems.csv"
    p.write_text("\n".join(rows) + "\n")
    return p


def test_sample_then_estimate(
    capsys: pytest.CaptureFixture[str], elements: Path, tmp_path: Path
) -> None:
    out = tmp_path / "s.csv"
    code, _, err = run(
        capsys,
        "sample",
        str(elements),
        "--key",
        "item",
        "--tau",
        "0.05",
        "--scheme",
        "ppswor",
        "--epsilon",
        "1",
        "--delta",
        "1e-3",
        "--max-frequency",
        "100",
        "--seed",
        "2",
        "--output",
        str(out),
    )
    assert code == 0 and "keys released" in err
    df = pl.read_csv(out)
    assert df.columns == ["key", "token", "estimate", "bias", "variance"]
    assert (df["token"] >= 1).all() and (df["variance"] >= 0).all()
    code, o, _ = run(capsys, "estimate", str(out), "--where", "prefix=k0", "--json")
    rep = json.loads(o)
    sel = df.filter(pl.col("key").str.starts_with("k0"))
    assert rep["keys"] == sel.height
    assert rep["estimate"] == pytest.approx(sel["estimate"].sum())
    assert rep["std"] == pytest.approx(math.sqrt(sel["variance"].sum()))
    assert rep["bias"] == pytest.approx(sel["bias"].sum())
    assert rep["bias_covers"] == "the released rows selected"
    code, o, _ = run(capsys, "estimate", str(out), "--where", "prefix=k0")
    assert code == 0 and "bias: of the released rows selected; selected keys the sample" in o
    code, o, _ = run(capsys, "estimate", str(out), "--where", "regex=^k00[0-4]$", "--json")
    assert json.loads(o)["keys"] == df.filter(pl.col("key").str.contains("^k00[0-4]$")).height
    code, o, _ = run(capsys, "estimate", str(out), "--where", "key=k001,zzz", "--json")
    assert json.loads(o)["keys"] == int("k001" in df["key"].to_list())


def test_sample_json_and_keys_only(
    capsys: pytest.CaptureFixture[str], elements: Path, tmp_path: Path
) -> None:
    out = tmp_path / "s.json"
    code, _, _ = run(
        capsys,
        "sample",
        str(elements),
        "--key",
        "item",
        "--tau",
        "0.05",
        "--epsilon",
        "1",
        "--delta",
        "1e-3",
        "--keys-only",
        "--seed",
        "2",
        "--output",
        str(out),
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["metadata"]["sanitizer"] == "keys" and "NOT private" in doc["metadata"]["warning"]
    assert all(r["token"] == 0 and r["estimate"] is None for r in doc["rows"])


@pytest.mark.parametrize(
    ("extra", "content", "needle"),
    [
        (["--weight", "w"], "key,w\na,3\na,4\n", "more than once"),
        (["--weight", "w"], "key,w\na,2.5\n", "positive integer frequencies"),
        (["--weight", "w"], "key,w\na,0\n", "positive integer frequencies"),
        (["--tau", "0"], "key\na\n", "'tau'"),
        (["--delta", "1"], "key\na\n", "'delta'"),
        (["--key", "nope"], "key\na\n", "got 'nope'"),
    ],
)
def test_sample_bad_input_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], content: str, needle: str
) -> None:
    data = tmp_path / "in.csv"
    data.write_text(content)
    out = tmp_path / "o.csv"
    args = {"--key": "key", "--tau": "0.5", "--epsilon": "1", "--delta": "1e-3"}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        args[flag] = value
    argv = ["sample", str(data), "--output", str(out), "--seed", "1"]
    for flag, value in args.items():
        argv += [flag, value]
    code, _, err = run(capsys, *argv)
    assert code == 2 and needle in err
    assert list(tmp_path.iterdir()) == [data]  # nothing written, no temporary left


def test_sample_aggregate_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "in.csv"
    data.write_text("key,w\na,300\na,400\n")
    code, out, _ = run(
        capsys,
        "sample",
        str(data),
        "--key",
        "key",
        "--weight",
        "w",
        "--aggregate",
        "--tau",
        "1",
        "--epsilon",
        "1",
        "--delta",
        "1e-3",
        "--max-frequency",
        "1000",
        "--seed",
        "1",
    )
    assert code == 0 and out.splitlines()[1].startswith("a,")


def test_estimate_bad_where(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text("key,token,estimate,bias,variance\na,1,2.0,0.1,1.0\n")
    code, _, err = run(capsys, "estimate", str(p), "--where", "colour=red")
    assert code == 2 and "--where" in err
    code, _, err = run(capsys, "estimate", str(p), "--where", "regex=(")
    assert code == 2 and "regex" in err


def test_sample_with_k_uses_a_private_total(
    capsys: pytest.CaptureFixture[str], elements: Path, tmp_path: Path
) -> None:
    """--k: tau = k / (private total), not the data-dependent bottom-k threshold; the total is
    the true sum of frequencies plus discrete Laplace noise of scale 1 / (0.1 epsilon)."""
    true_total = len(elements.read_text().splitlines()) - 1
    out = tmp_path / "s.json"
    code, _, err = run(
        capsys,
        "sample",
        str(elements),
        "--key",
        "item",
        "--k",
        "100",
        "--scheme",
        "priority",
        "--epsilon",
        "1",
        "--delta",
        "1e-3",
        "--max-frequency",
        "100",
        "--seed",
        "5",
        "--no-progress",
        "--output",
        str(out),
    )
    assert code == 0
    meta = json.loads(out.read_text())["metadata"]
    assert abs(meta["private_total"] - true_total) < 300  # noise scale 10: 30 scales
    assert meta["tau"] == pytest.approx(100 / meta["private_total"])
    assert "epsilon 0.1 on the private total, 0.9 on the sample" in meta["guarantee"]
    size = int(err.split("from a sample of ")[1].split()[0])
    assert 60 <= size <= 140  # about k = 100 (sd about 10)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--tau", "0.5", "--k", "10"], "(--tau) of sample must be exactly one of tau and k"),
        (["--k", "10", "--power", "0.5"], "(--power) of sample must be 0, 1 or 2 with k"),
        (["--k", "10", "--k-budget", "1.5"], "--k-budget"),
        (["--tau", "0.5", "--max-frequency", "0"], "--max-frequency"),
        (["--tau", "0.5", "--max-frequency", "9000"], "without --keys-only"),
    ],
)
def test_sample_k_and_bound_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], needle: str
) -> None:
    data = tmp_path / "in.csv"
    data.write_text("key\na\n")
    out = tmp_path / "o.csv"
    argv = ["sample", str(data), "--key", "key", "--epsilon", "1", "--delta", "1e-3"]
    code, _, err = run(capsys, *argv, *extra, "--output", str(out))
    assert code == 2 and needle in err
    assert list(tmp_path.iterdir()) == [data]


def test_keys_only_clamps_to_the_public_bound(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The key sanitiser's work no longer depends on the largest frequency: it is clamped to
    --max-frequency before sampling in every mode."""
    data = tmp_path / "in.csv"
    data.write_text("key,w\nbig,1000000000000\nsmall,1\n")
    code, out, err = run(
        capsys,
        *["sample", str(data), "--key", "key", "--weight", "w", "--tau", "1"],
        *["--scheme", "priority", "--epsilon", "1", "--delta", "1e-3", "--keys-only"],
        *["--seed", "3"],
    )
    assert code == 0 and "1 key clamped" in err
    assert "big" in out


def test_a_sample_on_stdout_is_the_file_and_says_it_is_seeded(
    capsys: pytest.CaptureFixture[str], elements: Path, tmp_path: Path
) -> None:
    """Without --output the sample goes to stdout as its file would be written (sealed, so
    privhist estimate reads it back; JSON with --json), and the summary on stderr states the
    guarantee and that seeded randomness is not private."""
    argv = ["sample", str(elements), "--key", "item", "--tau", "0.05", "--epsilon", "1"]
    argv += ["--delta", "1e-3", "--max-frequency", "100", "--seed", "2"]
    code, out, err = run(capsys, *argv)
    assert code == 0 and "guarantee (1.0, 0.001)-DP" in err and "NOT private" in err
    piped = tmp_path / "piped.csv"
    piped.write_text(out)
    written = tmp_path / "written.csv"
    assert run(capsys, *argv, "--output", str(written))[0] == 0
    assert piped.read_bytes() == written.read_bytes()
    code, o, _ = run(capsys, "estimate", str(piped), "--json")
    assert code == 0 and json.loads(o)["keys"] == pl.read_csv(written, comment_prefix="#").height
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and json.loads(out)["metadata"]["mechanism"] == "pws sample"


def test_a_key_above_the_bound_is_released_as_a_key_at_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The bias (and estimate, variance) of a clamped key are those of its clamped frequency:
    keys of weight 900 and keys of weight 500 (the bound) give the same rows for a seed, so no
    column could say what clamping lost (900 - 500 here)."""
    rows = {}
    for w in (900, 500):
        data = tmp_path / f"w{w}.csv"
        data.write_text("key,w\n" + "".join(f"k{i},{w}\n" for i in range(200)))
        argv = ["sample", str(data), "--key", "key", "--weight", "w", "--tau", "0.002"]
        argv += ["--epsilon", "1", "--delta", "1e-6", "--max-frequency", "500", "--seed", "4"]
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert f"{200 if w == 900 else 0} keys clamped" in err
        rows[w] = out
    assert rows[900] == rows[500]
    table = pl.read_csv(rows[500].encode(), comment_prefix="#")
    assert 0 < table.height < 200 and table["bias"].is_not_null().all()
