"""``privhist federated client``: a thin wrapper of :mod:`privhist.federated.secagg.client`
(the process ``privhist federated run`` starts is that module itself)."""

from __future__ import annotations

import argparse

from privhist.federated.secagg import client as _client
from privhist.federated.secagg.protocol import STAGES

STAGE_NAMES = list(STAGES)
add_arguments = _client.add_arguments
main = _client.main


def run(args: argparse.Namespace) -> int:
    """Run one client from the parsed flags of ``privhist federated client``."""
    return _client.run(args)
