"""``privhist federated vdaf-*``: Prio3 (draft-irtf-cfrg-vdaf-20) from the command line.

``vdaf-check FILE.json [FILE.json ...]`` runs the draft's test vectors (its JSON format, the
variant taken from the file name, ``bad_*`` vectors included) and prints one line per file; it
exits 0 only when every value matches and every bad report is rejected.

This module is added to ``privhist federated`` by :mod:`privhist.cli.commands.federated` (its
name starts with ``_`` so that the plug-in loader does not make it a command of its own).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_actions(fs: Any) -> None:
    """Add the ``vdaf-*`` actions to the ``privhist federated`` sub-parsers ``fs``."""
    c = fs.add_parser(
        "vdaf-check", help="run draft-irtf-cfrg-vdaf test vectors (Prio3) and compare"
    )
    c.add_argument("files", nargs="+", metavar="FILE.json", help="test-vector files")
    c.add_argument("--json", action="store_true", help="print one JSON object per file")
    c.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    from privhist.federated.vdaf.vectors import check_file

    failed = 0
    for path in args.files:
        res = check_file(path)
        failed += not res.passed
        if args.json:
            print(
                json.dumps(
                    {
                        "file": path,
                        "variant": res.variant,
                        "passed": res.passed,
                        "operations": res.operations,
                        "rejected": res.rejected,
                        "failures": res.failures,
                    }
                )
            )
        else:
            print(res.line())
    if failed and not args.json:
        print(f"{failed} of {len(args.files)} files failed", file=sys.stderr)
    return 1 if failed else 0
