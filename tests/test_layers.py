"""The import direction of the package (the arrows of the design notes), checked on the source.

Layers, lowest first: ``core`` <- ``noise`` <- ``accounting`` <- ``mechanisms`` <- ``federated``,
``analytics``, ``planning`` <- ``engines``, ``io`` <- ``session`` <- ``audit``, ``experiments``,
``cli``. A module may import its own layer and the layers below it, never one above: reading
files and counting records (``engines``, ``io``) stay out of the mechanisms and protocols, which
work on aggregated arrays only. Every import is checked, module-level or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "privhist"

LAYER = {
    "core": 0,
    "noise": 1,
    "accounting": 2,
    "mechanisms": 3,
    "federated": 4,
    "analytics": 4,
    "planning": 4,
    "engines": 5,
    "io": 5,
    "session": 6,
    "audit": 7,
    "experiments": 7,
    "cli": 7,
}

#: The one sanctioned upward call: ``Release.to_polars`` / ``to_arrow`` / ``write`` are
#: conveniences on the release object that delegate to :mod:`privhist.io.writers` at call time
#: (the writers are the implementation; the release itself stays a plain value object).
ALLOWED = {("core/release.py", "privhist.io.writers")}


def upward_imports(root: Path) -> list[str]:
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
                if LAYER[bits[1]] > LAYER[here] and ("/".join(parts), module) not in ALLOWED:
                    bad.append(f"{'/'.join(parts)}:{node.lineno} {here} -> {module}")
    return bad


def test_every_subpackage_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYER), f"give these a layer: {sorted(packages - set(LAYER))}"


def test_imports_point_down() -> None:
    offenders = upward_imports(SRC)
    assert offenders == [], f"imports against the layer order: {offenders}"


def test_the_layer_rule_catches_offenders(tmp_path: Path) -> None:
    # power check: each spelling of an upward import is caught, a downward one is not
    cases = {
        "mechanisms/a.py": "from privhist.io.readers import scan\n",
        "federated/b.py": "def f():\n    from privhist.engines.local import count\n",
        "core/c.py": "import privhist.session\n",
        "noise/d.py": "from privhist.accounting import ledger\n",
        "io/fine.py": "from privhist.mechanisms.base import Mechanism\n",
        "cli/fine.py": "from privhist.session import Session\n",
    }
    for name, text in cases.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    found = {line.split(":")[0] for line in upward_imports(tmp_path)}
    assert found == {"mechanisms/a.py", "federated/b.py", "core/c.py", "noise/d.py"}
