"""Internal links of the documentation resolve, and a broken one fails the strict build.

The first test reads the Markdown of every page (written and generated) and checks each relative
link and image against the pages and figures the site will have. The strict build
(``test_build.py``) checks anchors and the generated reproduction pages too; the last test here
shows that the build's validation settings really turn a missing page into an error.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs._pages import DOCS, REPO, gen_pages, pages

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE = re.compile(r"^```.*?^```\s*$|`[^`\n]*`", re.M | re.S)


def _targets() -> set[str]:
    gp = gen_pages()
    files = set(pages())
    files |= {str(p.relative_to(DOCS)) for p in DOCS.rglob("*") if p.is_file()}
    files |= {info.figure for info in gp.mechanisms()}
    return files


def _links(text: str) -> list[str]:
    return _LINK.findall(_CODE.sub("", text))


def test_relative_links_resolve() -> None:
    targets = _targets()
    broken = []
    checked = 0
    for page, text in pages().items():
        for link in _links(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith("#"):
                continue
            path = link.split("#", 1)[0]
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page), path))
            checked += 1
            if resolved not in targets:
                broken.append(f"{page}: {link}")
    assert checked > 30, "the link check found almost no links: is the pattern right?"
    assert broken == []


def test_no_absolute_links_into_the_site() -> None:
    absolute = [
        f"{page}: {link}"
        for page, text in pages().items()
        for link in _links(text)
        if link.startswith("/")
    ]
    assert absolute == []


def test_nav_lists_only_pages_that_exist() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with mkdocs (dev extra)")
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())

    def walk(entry: object) -> list[str]:
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, list):
            return [p for e in entry for p in walk(e)]
        if isinstance(entry, dict):
            return [p for v in entry.values() for p in walk(v)]
        return []

    missing = [p for p in walk(config["nav"]) if p not in pages()]
    assert missing == []


def test_every_experiment_has_a_reproduction_page() -> None:
    gp = gen_pages()
    shown = {m.group(1) for text in pages().values() for m in gp.EXPERIMENT_MARKER.finditer(text)}
    assert set(gp.subcommands(["experiment"])) == shown


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (dev extra)"
)
def test_strict_build_fails_on_a_missing_page(tmp_path: Path) -> None:
    """The site's validation settings, on a one-page site with a link to a page that does not
    exist: the strict build must fail and name the link."""
    import yaml

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    (tmp_path / "mkdocs.yml").write_text(
        yaml.safe_dump(
            {"site_name": "check", "docs_dir": "docs", "validation": config["validation"]}
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "missing.md" in done.stderr
