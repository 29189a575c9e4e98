"""mkdocs hooks: add the generated pages and figures to the site (see ``gen_pages.py`` and
``gen_figures.py`` beside this file)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
if str(DOCS) not in sys.path:
    sys.path.insert(0, str(DOCS))

import gen_figures  # noqa: E402
import gen_pages  # noqa: E402

_outputs: dict[str, Path] = {}


def _section(nav: list[Any], title: str) -> list[Any] | None:
    for entry in nav:
        if isinstance(entry, dict):
            for key, value in entry.items():
                if key == title and isinstance(value, list):
                    return value
                if isinstance(value, list):
                    found = _section(value, title)
                    if found is not None:
                        return found
    return None


def on_config(config: Any) -> Any:
    for title, entries in gen_pages.nav_additions().items():
        section = _section(config["nav"], title)
        if section is None:
            raise ValueError(f"mkdocs.yml has no nav section {title!r} for the generated pages")
        section.extend(e for e in entries if e not in section)
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in gen_pages.generated_markdown().items():
        files.append(File.generated(config, path, content=text))
    for path, data in gen_pages.generated_figures().items():
        files.append(File.generated(config, path, content=data))
    _outputs.clear()
    _outputs.update(gen_figures.experiment_outputs())
    for name, directory in _outputs.items():
        for png in sorted(directory.glob("*.png")):
            path = gen_pages.figure_path(name, png.name)
            files.append(File.generated(config, path, content=png.read_bytes()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return gen_pages.expand_outputs(gen_pages.expand_experiments(markdown, _outputs))
