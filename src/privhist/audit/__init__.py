"""Audits of differential privacy: exact (white box) and statistical (black box).

* :mod:`privhist.audit.exact` — the exact privacy profile of a privhist mechanism (or of the
  variant a user runs, with hand-set parameters) on enumerated neighbouring inputs, both
  directions, against the guarantee it claims.
* :mod:`privhist.audit.statistical` — for any sampler of outputs (a privhist mechanism, a peer
  library, a user's function), a searched neighbouring pair and Clopper-Pearson lower bounds on
  epsilon and delta from ``N`` draws per side.
* :mod:`privhist.audit.variants` — hand-set parameters and deliberately broken variants.
* :mod:`privhist.audit.peers` — adapters for OpenDP and PipelineDP (skipped when not installed).
"""

from privhist.audit.sampling import (
    CallableSampler,
    MechanismSampler,
    NeighbouringPair,
    audit_sampler,
)
from privhist.audit.statistical import StatisticalAudit, audit_statistical, candidate_pairs
from privhist.audit.stats import PairAudit, audit_samples
from privhist.audit.variants import broken_variants, with_parameters

__all__ = [
    "CallableSampler",
    "MechanismSampler",
    "NeighbouringPair",
    "PairAudit",
    "StatisticalAudit",
    "audit_sampler",
    "audit_samples",
    "audit_statistical",
    "broken_variants",
    "candidate_pairs",
    "with_parameters",
]
