"""Regenerate the papers' reproduction figures and summaries shown in the docs.

Runs ``privhist experiment NAME --quick`` for every experiment the command line knows, each in
its own process from the repository root (so ``../shared/data`` is found when it is there), into
``build/docs-cache/<hash>/NAME``. The hash covers the library's source and this script, so a
change to an experiment (or to anything it uses) regenerates its figures, and an unchanged tree
reuses them. The mkdocs hook calls :func:`experiment_outputs`; run this file to do it by hand::

    python docs/gen_figures.py            # prints the directory of each experiment's outputs

The quick runs use reduced sizes, so their numbers are not the paper's; the reproduction pages
say so and give the full-run command. They still take minutes (455 s on two cores for all three),
so a build that runs them says so in its log first; every later build of the same source reuses
them.

Builds at the same time are safe: the generation holds an exclusive lock on
``build/docs-cache/.lock`` (a second build waits, then reuses what the first made), each run
writes into its own temporary directory and renames it into place only when complete, and only
caches of other sources that no build has used recently are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
CACHE = REPO / "build" / "docs-cache"
#: caches of this many most recently used sources are kept (a build in progress uses one)
KEEP = 3

log = logging.getLogger("mkdocs.privhist.figures")


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


def experiment_command(name: str) -> list[str]:
    """The command that runs one experiment's quick run (``--output-dir DIR`` is appended)."""
    return [sys.executable, "-m", "privhist", "experiment", name, "--quick", "--no-progress"]


def _run(name: str, out: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("MPLBACKEND", "Agg")
    # a directory of this run's own: nothing else writes into it or renames it
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}.partial-", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would stay on the cache once renamed
    try:
        t0 = time.monotonic()
        done = subprocess.run(
            [*experiment_command(name), "--output-dir", str(tmp)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"`privhist experiment {name} --quick` failed:\n{done.stderr[-2000:]}"
            )
        try:
            tmp.rename(out)  # atomic; fails if another run put it there first
        except OSError:
            if not (out / "summary.md").is_file():
                raise
        log.info("privhist docs: experiment %s done in %.0f s", name, time.monotonic() - t0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """An exclusive lock on the cache (``fcntl``; without it, on platforms that lack it, builds
    still cannot corrupt each other's runs, only repeat them)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    with open(CACHE / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("privhist docs: waiting for another build to finish the experiment figures")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def experiment_outputs(names: list[str] | None = None) -> dict[str, Path]:
    """The output directory of each experiment's quick run, generated when missing."""
    root = CACHE / source_hash()
    wanted = names if names is not None else experiment_names()
    out = {name: root / name for name in wanted}
    with _locked():
        missing = [name for name in wanted if not (out[name] / "summary.md").is_file()]
        root.mkdir(parents=True, exist_ok=True)
        os.utime(root)  # used now: kept by other builds' clean-up
        if missing:
            log.info(
                "privhist docs: running `privhist experiment NAME --quick` for %s to make the "
                "reproduction figures (several minutes: about 455 s on two cores for all "
                "three); they are cached in %s and reused until the source changes",
                ", ".join(missing),
                root,
            )
            # one process per experiment, as many at a time as there are cores
            workers = max(1, min(len(missing), os.cpu_count() or 1))
            with ThreadPoolExecutor(max_workers=workers) as ex:
                list(ex.map(lambda name: _run(name, out[name]), missing))
        # caches of older sources, least recently used first, beyond the KEEP most recent
        others = sorted(
            (d for d in CACHE.iterdir() if d.is_dir() and d != root),
            key=lambda d: d.stat().st_mtime,
            reverse=True,
        )
        for stale in others[KEEP - 1 :]:
            shutil.rmtree(stale, ignore_errors=True)
    return out


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for experiment, directory in experiment_outputs().items():
        print(f"{experiment}: {directory}")
