"""``mkdocs build --strict`` passes: every page, generated page, figure, anchor and API
reference resolves (the build turns any warning into an error); and the built pages, opened in a
headless browser, render their examples as code, not as nested quotes."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docs._pages import REPO, gen_pages

_NEEDED = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
_MISSING = [m for m in _NEEDED if importlib.util.find_spec(m.split(".")[0]) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"the docs need {', '.join(_MISSING)} (pip install -e '.[dev]')",
)

#: the headless browser (Debian's ``chromium``; .ci/run installs it)
CHROMIUM = os.environ.get("PRIVHIST_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One strict build of the site for the tests of this module."""
    site = tmp_path_factory.mktemp("docs") / "site"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["MPLBACKEND"] = "Agg"
    env["NO_MKDOCS_2_WARNING"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", str(site)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    return done, site


def test_strict_build(built: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, site = built
    assert done.returncode == 0, done.stderr[-5000:]

    # what the generators promise is really in the site
    gp = gen_pages()
    for info in gp.mechanisms():
        page = site / "mechanisms" / info.name / "index.html"
        assert page.is_file(), info.name
        if gp.has_curve(gp.plan_json(info)):
            assert (site / info.figure).stat().st_size > 1000, info.figure
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for path in gp.commands():
        assert "privhist " + " ".join(path) in cli, path
    for package in gp.api_packages():
        assert (site / "reference" / "api" / package / "index.html").is_file(), package
    for name in gp.subcommands(["experiment"]):
        html = (site / "reproductions" / name / "index.html").read_text()
        assert "<!-- experiment:" not in html
        assert list((site / "reproductions" / "figures" / name).glob("*.png")), name


@pytest.fixture(scope="module")
def browser(built: tuple[subprocess.CompletedProcess[str], Path]) -> Iterator[Any]:
    """A headless Chromium page (Playwright driving the system's browser)."""
    if built[0].returncode != 0:
        pytest.skip("the site did not build (test_strict_build says why)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]'")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no headless browser at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium.new_page(viewport={"width": 1280, "height": 900})
        finally:
            chromium.close()


#: the API pages whose Example sections rendered as nested quotes, and how many each had
EXAMPLE_PAGES = {"privhist.session": 1, "privhist.io": 4, "privhist.engines": 17}


def test_examples_render_as_code_in_a_browser(
    built: tuple[subprocess.CompletedProcess[str], Path], browser: Any
) -> None:
    """No page has a quote inside a quote (``>>>`` read as Markdown), and every Example
    admonition and Examples section of the API reference is a code block; a screenshot of each
    page's first example is kept (``PRIVHIST_DOCS_SCREENSHOTS=DIR`` copies them there)."""
    _, site = built
    shots = site.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    nested: dict[str, int] = {}
    for html in sorted(site.rglob("*.html")):
        browser.goto(html.as_uri())
        count = browser.locator("blockquote blockquote").count()
        if count:
            nested[str(html.relative_to(site))] = count
    assert nested == {}, nested
    for package, at_least in EXAMPLE_PAGES.items():
        browser.goto((site / "reference" / "api" / package / "index.html").as_uri())
        examples = browser.locator("details.example")
        assert examples.count() >= at_least, package
        for i in range(examples.count()):
            example = examples.nth(i)
            assert example.locator("blockquote").count() == 0, (package, i)
            assert example.locator("pre code").count() >= 1, (package, i)
            assert ">>> " in example.locator("pre code").first.inner_text(), (package, i)
        first = examples.first
        first.scroll_into_view_if_needed()
        path = shots / f"{package}-example.png"
        first.screenshot(path=str(path))
        box = first.bounding_box()
        assert box is not None and box["height"] > 60 and path.stat().st_size > 2000
    target = os.environ.get("PRIVHIST_DOCS_SCREENSHOTS")
    if target:
        shutil.copytree(shots, target, dirs_exist_ok=True)


def test_home_page_shows_install_table_and_python(
    built: tuple[subprocess.CompletedProcess[str], Path], browser: Any
) -> None:
    _, site = built
    browser.goto((site / "index.html").as_uri())
    text = browser.locator("article").inner_text()
    assert "python3 -m pip install ." in text
    # the plan command's real output, under the sentence that describes it
    assert "Pr[released]" in text and text.index("Pr[released]") < text.index("That table is")
    code = [browser.locator("article pre code").nth(i).inner_text() for i in range(3)]
    assert code[0].startswith("privhist plan stability")
    assert "count  Pr[released]" in code[1]
    assert "Session.in_memory" in code[2]
    browser.locator("article").screenshot(path=str(site.parent / "home.png"))
