"""A Griffe extension for the API reference: the library's docstrings mix Google sections with
reStructuredText habits (``:func:`name``` roles, bare ``>>>`` examples). Rendered as Markdown,
a bare doctest's output such as ``[0.0, 0.1]`` reads as a link reference, so this extension
fences each run of ``>>>`` lines as a ``pycon`` block and turns roles into inline code. The
docstrings themselves stay as they are (the doctests run from them)."""

from __future__ import annotations

import re
from typing import Any

import griffe

# Griffe parses a Google "Examples:" section (doctests and text); "Example:" (singular) is not a
# section it knows, so it becomes an admonition whose ">>>" lines Markdown would read as three
# nested quotes: those are fenced like any other doctest.
_EXAMPLES = re.compile(r"^\s*Examples:\s*$")
_HEADER = re.compile(r"^\s*[A-Z][\w ]*:\s*$")
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const)?:`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    """Wrap every run of doctest lines (``>>>`` to the next blank line) in a ``pycon`` fence,
    except inside a Google ``Examples:`` section, which Griffe renders itself (an ``Example:``
    admonition is fenced too)."""
    lines = text.splitlines()
    out: list[str] = []
    section: int | None = None  # indent of an open Examples header
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        if line.strip():
            if section is not None and indent <= section:
                section = None
            if _EXAMPLES.match(line):
                section = indent
        if section is None and line.lstrip().startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            # a blank line before the fence, unless it opens a section's or admonition's body
            if out and out[-1].strip() and not _HEADER.match(out[-1]):
                out.append("")
            pad = " " * indent
            out += [f"{pad}```pycon", *block, f"{pad}```"]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def rewrite(text: str) -> str:
    return fence_doctests(_ROLE.sub(r"`\1`", text))


class DoctestFences(griffe.Extension):
    """Applies :func:`rewrite` to every docstring Griffe loads."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
