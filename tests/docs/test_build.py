"""``mkdocs build --strict`` passes: every page, generated page, figure, anchor and API
reference resolves (the build turns any warning into an error)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs._pages import REPO, gen_pages

_NEEDED = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
_MISSING = [m for m in _NEEDED if importlib.util.find_spec(m.split(".")[0]) is None]


@pytest.mark.skipif(
    bool(_MISSING),
    reason=f"the docs need {', '.join(_MISSING)} (pip install -e '.[dev]')",
)
def test_strict_build(tmp_path: Path) -> None:
    site = tmp_path / "site"
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
        timeout=900,
        check=False,
    )
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
