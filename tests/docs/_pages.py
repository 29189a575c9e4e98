"""The documentation's pages and their fenced code blocks, for the docs tests.

Pages are the Markdown files under ``docs/`` plus the pages ``docs/gen_pages.py`` generates (one
per mechanism, the CLI and API references). A block is skipped only when the line just before its
fence is ``<!-- skip: REASON -->``.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
RUN_LANGUAGES = ("python", "pycon", "bash")

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
_SKIP = re.compile(r"<!--\s*skip:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    skip_reason: str | None


def gen_pages() -> Any:
    if str(DOCS) not in sys.path:
        sys.path.insert(0, str(DOCS))
    import gen_pages as module

    return module


@functools.cache
def pages() -> dict[str, str]:
    """Every page's Markdown, by its path under ``docs/``."""
    out = {
        str(p.relative_to(DOCS)): p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md"))
    }
    generated = gen_pages().generated_markdown()
    clash = set(out) & set(generated)
    assert not clash, f"generated pages would overwrite written ones: {sorted(clash)}"
    out.update(generated)
    return out


def blocks(page: str, text: str) -> list[Block]:
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = _SKIP.search(before)
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, match.start()) + 1,
                language=match.group(1),
                code=match.group(2),
                skip_reason=skip.group(1) if skip else None,
            )
        )
    return found


def runnable_pages() -> list[str]:
    """Pages with at least one block in a language the tests run."""
    return [
        name
        for name, text in pages().items()
        if any(b.language in RUN_LANGUAGES and b.skip_reason is None for b in blocks(name, text))
    ]
