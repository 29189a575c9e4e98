"""``privhist federated client``: a thin wrapper of :mod:`privhist.federated.secagg.client`
(the process ``privhist federated run`` starts is that module itself). It is imported when the
command line is built, so it loads the client (and NumPy) only when the command runs."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def add_arguments(c: argparse.ArgumentParser) -> None:
    """The client's flags (:func:`privhist.federated.secagg.client.add_arguments`)."""
    from privhist.federated.secagg import client

    client.add_arguments(c)


def run(args: argparse.Namespace) -> int:
    """Run one client from the parsed flags of ``privhist federated client``."""
    from privhist.federated.secagg import client

    return client.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """``privhist federated client`` as a function (one line on stderr on errors)."""
    from privhist.federated.secagg import client

    return client.main(argv)
