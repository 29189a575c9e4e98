"""``privhist experiment NAME``: the papers' tables and figures, reproduced.

The experiments are the modules and packages of :mod:`privhist.experiments` that define
``NAME``; each adds its own flags and writes CSV, PNG and a markdown summary.
"""

from __future__ import annotations

import argparse
from typing import Any


def _experiments() -> list[Any]:
    import importlib
    import pkgutil

    import privhist.experiments as pkg

    mods = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"privhist.experiments.{info.name}")
        if hasattr(module, "NAME"):
            mods.append(module)
    return mods


def register(sub: Any) -> None:
    p = sub.add_parser("experiment", help="reproduce a paper's tables and figures")
    inner = p.add_subparsers(dest="experiment", metavar="NAME", required=True, parser_class=type(p))
    for module in _experiments():
        e: argparse.ArgumentParser = inner.add_parser(module.NAME, help=module.HELP)
        module.add_arguments(e)
        e.set_defaults(run=module.run)
