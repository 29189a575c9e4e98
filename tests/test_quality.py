"""Static checks that are part of the test suite: ruff, mypy --strict, the randomness rule."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "privhist"
GUARDED = ("noise", "mechanisms", "federated")


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)


def test_ruff_passes() -> None:
    res = _run(sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks", "scripts")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format_is_clean() -> None:
    res = _run(
        sys.executable, "-m", "ruff", "format", "--check", "src", "tests", "benchmarks", "scripts"
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict_on_src() -> None:
    if shutil.which("mypy") is None and _run(sys.executable, "-m", "mypy", "--version").returncode:
        pytest.fail("mypy is not installed: install the [dev] extra")
    res = _run(sys.executable, "-m", "mypy")
    assert res.returncode == 0, res.stdout + res.stderr


def direct_random_imports(root: Path) -> list[str]:
    """Files under ``root`` that import ``random`` or ``numpy.random`` (in any spelling)."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id in ("np", "numpy") and node.attr == "random":
                    names = ["numpy.random"]
            if any(n == "random" or n.startswith(("random.", "numpy.random")) for n in names):
                bad.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}")
    return bad


def test_no_direct_randomness_in_release_code() -> None:
    offenders = [f for d in GUARDED if (SRC / d).is_dir() for f in direct_random_imports(SRC / d)]
    assert offenders == [], f"import randomness through RandomSource instead: {offenders}"


def test_the_randomness_rule_catches_offenders(tmp_path: Path) -> None:
    # power check of the rule itself: each spelling must be caught
    for i, line in enumerate(
        [
            "import random",
            "from random import randint",
            "import numpy.random as npr",
            "from numpy.random import default_rng",
            "import numpy as np\nx = np.random.rand()",
            "from numpy import random",
        ]
    ):
        (tmp_path / f"m{i}.py").write_text(line + "\n")
    assert len({f.split(":")[0] for f in direct_random_imports(tmp_path)}) == 6
