"""The import direction of the package and the absence of import circles, checked on the source.

The layer order is written once, in ``docs/concepts/architecture.md`` (the sentence that begins
"Imports point one way"): this test reads it from there. A module may import its own layer and
the layers below it, never one above, and the import graph of the package's modules (module-level
imports and imports inside functions alike) has no circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "privhist"
ORDER_PAGE = Path(__file__).resolve().parents[1] / "docs" / "concepts" / "architecture.md"


def layers_from_page(text: str) -> dict[str, int]:
    """``{package: rank}`` from the architecture page's "Imports point one way: `a` <- `b`, `c`
    <- ..." sentence (names separated by commas share a rank)."""
    m = re.search(r"Imports point one way:(.*?)\(", text, re.S)
    assert m, "docs/concepts/architecture.md states no layer order"
    ranks: dict[str, int] = {}
    for rank, group in enumerate(m.group(1).split("<-")):
        for name in re.findall(r"`(\w+)`", group):
            ranks[name] = rank
    return ranks


@pytest.fixture(scope="module")
def LAYER() -> dict[str, int]:
    return layers_from_page(ORDER_PAGE.read_text(encoding="utf-8"))


def upward_imports(root: Path, LAYER: dict[str, int]) -> list[str]:
    """``file:line layer -> module`` for every import of a higher layer under ``root``."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if len(parts) < 2:  # the package's own __init__ / __main__ sit above every layer
            continue
        here = parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                bits = module.split(".")
                if bits[0] != "privhist" or len(bits) < 2 or bits[1] not in LAYER:
                    continue
                if LAYER[bits[1]] > LAYER[here]:
                    bad.append(f"{'/'.join(parts)}:{node.lineno} {here} -> {module}")
    return bad


def test_every_subpackage_has_a_layer(LAYER: dict[str, int]) -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYER), f"give these a layer: {sorted(packages - set(LAYER))}"


def test_imports_point_down(LAYER: dict[str, int]) -> None:
    offenders = upward_imports(SRC, LAYER)
    assert offenders == [], f"imports against the layer order: {offenders}"


def test_the_layer_rule_catches_offenders(tmp_path: Path, LAYER: dict[str, int]) -> None:
    # power check: each spelling of an upward import is caught, a downward one is not
    cases = {
        "mechanisms/a.py": "from privhist.engines.local import count\n",
        "federated/b.py": "def f():\n    from privhist.engines.local import count\n",
        "core/c.py": "import privhist.session\n",
        "noise/d.py": "from privhist.accounting import ledger\n",
        "io/e.py": "from privhist.mechanisms.base import Mechanism\n",
        "mechanisms/fine.py": "from privhist.io.release import Release\n",
        "cli/fine.py": "from privhist.session import Session\n",
    }
    for name, text in cases.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    found = {line.split(":")[0] for line in upward_imports(tmp_path, LAYER)}
    assert found == {"mechanisms/a.py", "federated/b.py", "core/c.py", "noise/d.py", "io/e.py"}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports (every import, inside functions too). A package's
    ``__init__`` only re-exports its modules, so an import of it is not an edge (a module that
    imports names through its own package's facade closes no circle of code)."""
    files = {}
    inits = set()
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            inits.add(".".join(parts))
        files[".".join(parts)] = path

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                target = resolve(name) if name.startswith(root.name) else None
                if target is not None and target != module and target not in inits:
                    graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    assert circles(import_graph(SRC)) == []


def test_the_circle_rule_catches_a_circle(tmp_path: Path) -> None:
    # power check: a circle closed by an import inside a function is found; a chain is not
    pkg = tmp_path / "privhist"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from privhist.a.y import f\n")
    (pkg / "a" / "y.py").write_text("def f():\n    from privhist.a.x import g\n")
    (pkg / "a" / "z.py").write_text("import privhist.a.y\n")
    assert circles(import_graph(pkg)) == [["privhist.a.x", "privhist.a.y"]]


#: the layers that work on arrays: they read no files and build no tables
ARRAY_LAYERS = ("noise", "accounting", "mechanisms", "federated", "analytics", "planning")


def table_imports(root: Path) -> list[str]:
    """``file:line module`` for every import of Polars, Spark or the readers in the array layers."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] not in ARRAY_LAYERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                if module.split(".")[0] in ("polars", "pyspark") or module.startswith(
                    "privhist.io.readers"
                ):
                    bad.append(f"{'/'.join(parts)}:{node.lineno} {module}")
    return bad


def test_array_layers_read_no_tables(tmp_path: Path) -> None:
    assert table_imports(SRC) == []
    # power check
    (tmp_path / "mechanisms").mkdir()
    (tmp_path / "mechanisms" / "m.py").write_text("def f():\n    import polars\n")
    assert table_imports(tmp_path) == ["mechanisms/m.py:2 polars"]
