"""Regenerate the papers' reproduction figures and summaries shown in the docs.

Runs ``privhist experiment NAME --quick`` for every experiment the command line knows, each in
its own process from the repository root (so ``../shared/data`` is found when it is there), into
``build/docs-cache/<hash>/NAME``. The hash covers the library's source and this script, so a
change to an experiment (or to anything it uses) regenerates its figures, and an unchanged tree
reuses them. The mkdocs hook calls :func:`experiment_outputs`; run this file to do it by hand::

    python docs/gen_figures.py            # prints the directory of each experiment's outputs

The quick runs use reduced sizes, so their numbers are not the paper's; the reproduction pages
say so and give the full-run command.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
CACHE = REPO / "build" / "docs-cache"


def source_hash() -> str:
    """SHA-256 of every Python file of the library, and of this script."""
    digest = hashlib.sha256()
    files = [*sorted((REPO / "src" / "privhist").rglob("*.py")), Path(__file__).resolve()]
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def experiment_names() -> list[str]:
    sys.path.insert(0, str(DOCS))
    try:
        from gen_pages import subcommands
    finally:
        sys.path.remove(str(DOCS))
    return subcommands(["experiment"])


def _run(name: str, out: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("MPLBACKEND", "Agg")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, "-m", "privhist", "experiment", name, "--quick", "--no-progress"]
    done = subprocess.run(
        [*cmd, "--output-dir", str(tmp)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"`privhist experiment {name} --quick` failed:\n{done.stderr[-2000:]}")
    tmp.rename(out)


def experiment_outputs(names: list[str] | None = None) -> dict[str, Path]:
    """The output directory of each experiment's quick run, generated when missing."""
    root = CACHE / source_hash()
    wanted = names if names is not None else experiment_names()
    out = {name: root / name for name in wanted}
    missing = [name for name in wanted if not (out[name] / "summary.md").is_file()]
    if missing:
        root.mkdir(parents=True, exist_ok=True)
        # one process per experiment, as many at a time as there are cores
        with ThreadPoolExecutor(max_workers=max(1, min(len(missing), os.cpu_count() or 1))) as ex:
            list(ex.map(lambda name: _run(name, out[name]), missing))
    # older caches belong to older sources
    if CACHE.is_dir():
        for stale in CACHE.iterdir():
            if stale != root:
                shutil.rmtree(stale, ignore_errors=True)
    return out


if __name__ == "__main__":
    for experiment, directory in experiment_outputs().items():
        print(f"{experiment}: {directory}")
