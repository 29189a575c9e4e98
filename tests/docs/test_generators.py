"""The generated pages follow the code: every registered mechanism, every command and every
subpackage has its page, and the API reference's docstring rewriting keeps doctests intact."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.docs._pages import DOCS, gen_pages, pages


def test_every_registered_mechanism_has_a_page_and_an_index_row() -> None:
    import privhist.mechanisms.registry as registry

    names = set(registry.registry()) | set(registry.weighted_registry())
    assert names, "the registry is empty: the pages would be too"
    index = pages()["mechanisms/index.md"]
    for name in names:
        page = pages()[f"mechanisms/{name}.md"]
        assert page.startswith(f"# `{name}`")
        assert f"]({name}.md)" in index
        for heading in ("## Paper and section", "## Guarantee", "## Options", "## Examples"):
            assert heading in page, (name, heading)


def test_every_planner_gets_a_reporting_curve() -> None:
    gp = gen_pages()
    planned = set(gp.subcommands(["plan"]))
    figures = set(gp.generated_figures())
    for info in gp.mechanisms():
        page = pages()[info.path]
        assert ("## Reporting curve" in page) == (info.name in planned), info.name
        if info.name not in planned:
            continue
        curve = gp.plan_json(info)["reporting_probability"]
        assert len(curve) == gp.LARGEST_COUNT + 1
        finite = [p for p in curve if p == p]
        # a curve, or none at all (NaN: the release of a key depends on the other keys)
        assert len(finite) in (0, len(curve)), info.name
        assert all(0.0 <= p <= 1.0 for p in finite), info.name
        assert (info.figure in figures) == bool(finite), info.name
        assert (f"](figures/{info.name}.png)" in page) == bool(finite), info.name
    assert figures, "no mechanism has a reporting curve"


def test_cli_reference_shows_every_command_and_flag() -> None:
    gp = gen_pages()
    cli = pages()["reference/cli.md"]
    paths = gp.commands()
    assert len(paths) > 20
    for path in paths:
        assert f"`privhist {' '.join(path)}`".replace(" `", "`") in cli, path
    parser = gp._parser()
    flags = {f for a in parser._actions for f in a.option_strings}
    assert all(f in cli for f in flags)


def test_api_reference_covers_every_subpackage() -> None:
    import pkgutil

    import privhist

    gp = gen_pages()
    public = {m.name for m in pkgutil.iter_modules(privhist.__path__) if not m.name.startswith("_")}
    documented = {p.split(".", 1)[1] for p in gp.api_packages() if "." in p}
    assert public - documented == {"cli"}  # the command line has its own reference


def test_doctests_are_fenced_outside_google_example_sections() -> None:
    sys.path.insert(0, str(DOCS))
    try:
        from griffe_docstrings import rewrite
    finally:
        sys.path.remove(str(DOCS))
    text = "See :func:`privhist.noise.binomial`.\n\n>>> x = [0.1, 0.2]\n>>> x\n[0.1, 0.2]\n"
    text += "\nExamples:\n    >>> y = 1\n\nExample:\n    >>> z = 2\n    >>> z\n    2\n"
    out = rewrite(text)
    assert "`privhist.noise.binomial`" in out and ":func:" not in out
    assert "```pycon\n>>> x = [0.1, 0.2]\n>>> x\n[0.1, 0.2]\n```" in out
    assert "Examples:\n    >>> y = 1" in out  # Griffe renders Examples sections itself
    # an "Example:" admonition is not such a section: unfenced, its ">>>" would read as quotes
    assert "Example:\n    ```pycon\n    >>> z = 2\n    >>> z\n    2\n    ```" in out


def test_getting_started_opens_with_the_readmes_two_commands() -> None:
    from tests.docs._pages import REPO, blocks

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first_readme = next(b for b in blocks("README.md", readme) if b.language == "bash")
    page = "getting-started/index.md"
    first_page = next(b for b in blocks(page, pages()[page]) if b.language == "bash")
    assert first_page.code == first_readme.code
    assert first_page.skip_reason  # they install the package: shown, not run


def test_concurrent_builds_share_the_figure_cache_safely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two builds at once: the experiments run once each (the second build waits on the lock
    and reuses them), into directories of their own, renamed into place complete; the first
    build says in its log that it runs them."""
    import logging
    import threading

    sys.path.insert(0, str(DOCS))
    try:
        import gen_figures
    finally:
        sys.path.remove(str(DOCS))
    runs = tmp_path / "runs.log"
    fake = (
        "import pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[2])\n"
        "assert out.is_dir() and not any(out.iterdir())\n"
        "with open(sys.argv[3], 'a') as log: log.write(sys.argv[1] + '\\n')\n"
        "time.sleep(0.5)\n"
        "(out / 'figure.png').write_bytes(b'png')\n"
        "(out / 'summary.md').write_text('# ' + sys.argv[1])\n"
    )
    script = tmp_path / "fake_experiment.py"
    script.write_text(fake)

    def command(name: str) -> list[str]:
        # gen_figures appends "--output-dir DIR": the fake takes NAME DIR RUNS_LOG
        return [sys.executable, "-c", f"import sys, runpy; sys.argv = [sys.argv[0], {name!r}, "
                f"sys.argv[2], {str(runs)!r}]; runpy.run_path({str(script)!r})"]  # fmt: skip

    monkeypatch.setattr(gen_figures, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(gen_figures, "source_hash", lambda: "h-now")
    monkeypatch.setattr(gen_figures, "experiment_command", command)
    for old in ("h-1", "h-2", "h-3"):  # caches of older sources, oldest first
        (tmp_path / "cache" / old).mkdir(parents=True)
        time.sleep(0.01)
    results: list[dict[str, Path]] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(gen_figures.experiment_outputs(["a", "b"]))
        except BaseException as e:
            errors.append(e)

    caplog.set_level(logging.INFO, logger="mkdocs.privhist.figures")
    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(results) == 2 and results[0] == results[1]
    assert sorted(runs.read_text().split()) == ["a", "b"]  # once each, not once per build
    for name, directory in results[0].items():
        assert (directory / "summary.md").read_text() == f"# {name}"
    root = tmp_path / "cache" / "h-now"
    assert sorted(p.name for p in root.iterdir()) == ["a", "b"]  # no partial directory left
    # the KEEP most recently used caches stay (this one and the two newest others)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()) == [
        "h-2",
        "h-3",
        "h-now",
    ]
    said = [
        r.getMessage() for r in caplog.records if "running `privhist experiment" in r.getMessage()
    ]
    assert len(said) == 1 and "a, b" in said[0] and "several minutes" in said[0]
