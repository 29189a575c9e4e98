"""Central histogram mechanisms and the mechanism registry.

Importing this package registers the built-in mechanisms (``dense``, ``stability``,
``optimal-selection``, ``pws``, the finite-computer histograms and ``compact``); later packages
register theirs the same way (see :mod:`privhist.mechanisms.registry`).
"""

from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.dense import DenseHistogram
from privhist.mechanisms.finite import compact as _compact  # noqa: F401
from privhist.mechanisms.finite import histograms as _finite  # noqa: F401  (registers them)
from privhist.mechanisms.optimal_selection import OptimalSelection
from privhist.mechanisms.registry import get, names, register
from privhist.mechanisms.sampling import SampleAndThreshold as SampleAndThreshold
from privhist.mechanisms.sampling.pws import PWSHistogram as _PWS  # noqa: F401
from privhist.mechanisms.stability import StabilityHistogram
from privhist.mechanisms.user_level import GaussianThresholdHistogram

__all__ = [
    "DenseHistogram",
    "GaussianThresholdHistogram",
    "KeyDistribution",
    "Mechanism",
    "OptimalSelection",
    "Option",
    "StabilityHistogram",
    "get",
    "names",
    "register",
]
