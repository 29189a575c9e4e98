"""Secure aggregation: SecAgg (Bonawitz et al., CCS 2017) and SecAgg+ (Bell et al., CCS 2020).

* :mod:`~privhist.federated.secagg.crypto`: X25519, HKDF-SHA256, AES-GCM, the mask PRG;
* :mod:`~privhist.federated.secagg.shamir`: Shamir sharing over ``GF(2**256 + 297)``;
* :mod:`~privhist.federated.secagg.graph`: complete and Harary graphs;
* :mod:`~privhist.federated.secagg.messages`: the versioned, schema-checked wire format;
* :mod:`~privhist.federated.secagg.protocol`: client and server state machines and the threat
  model;
* :mod:`~privhist.federated.secagg.aggregator`: :class:`SecAggregator`, the in-process run.

The networked runtime (:mod:`privhist.federated.secagg.runtime`, the server;
:mod:`privhist.federated.secagg.client`, a client process; :mod:`privhist.federated.secagg.
credentials`, the deployment's CA and certificates) is imported on demand, since it needs
``grpcio``. Its threat model: docs/federated/threat-model.md.
"""

from privhist.federated.secagg.aggregator import (
    RoundOutcome,
    SecAggregator,
    aggregator_factory,
    run_in_process,
)
from privhist.federated.secagg.protocol import RoundConfig, SecAggClient, SecAggServer

__all__ = [
    "RoundConfig",
    "RoundOutcome",
    "SecAggClient",
    "SecAggServer",
    "SecAggregator",
    "aggregator_factory",
    "run_in_process",
]
