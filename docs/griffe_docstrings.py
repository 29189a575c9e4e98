"""A Griffe extension for the API reference: the library's docstrings mix Google sections with
reStructuredText habits (``:func:`name``` roles, bare ``>>>`` examples). Rendered as Markdown,
a bare doctest's output such as ``[0.0, 0.1]`` reads as a link reference, so this extension
fences each run of ``>>>`` lines as a ``pycon`` block and turns roles into inline code. The
docstrings themselves stay as they are (the doctests run from them)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLES = re.compile(r"^\s*Examples?:\s*$")
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const)?:`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    """Wrap every run of doctest lines (``>>>`` to the next blank line) in a ``pycon`` fence,
    except inside a Google ``Example:``/``Examples:`` section, which Griffe renders itself."""
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
            if out and out[-1].strip():
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
