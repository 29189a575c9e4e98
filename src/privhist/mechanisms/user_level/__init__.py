"""User-level histograms: Gaussian thresholding and weighted key selection.

* :class:`GaussianThresholdHistogram` (``gaussian-threshold``, a registered ``Counts``
  mechanism): discrete Gaussian counts with L2 sensitivity ``c sqrt(k)`` and a threshold.
* Weighted selectors, registered with
  :func:`privhist.mechanisms.registry.register_weighted`; they release from a
  :class:`privhist.core.weighted.WeightedSource` with ``release_weighted(source, rng)``:
  :class:`WeightedGaussianSelection` (``wgm``), :class:`DPSIPS` (``dp-sips``) and
  :class:`CumulativeSIPS` (``cumulative-sips``, :mod:`.cumulative`: DP-SIPS deciding on the
  evidence of all rounds so far).

The certified (epsilon, delta) of every one of them is explained in
:mod:`privhist.mechanisms.user_level._gauss`.
"""

from privhist.mechanisms.user_level.cumulative import CumulativeSIPS
from privhist.mechanisms.user_level.gaussian_threshold import GaussianThresholdHistogram
from privhist.mechanisms.user_level.selectors import (
    DPSIPS,
    WeightedGaussianSelection,
    WeightedSelector,
)

__all__ = [
    "DPSIPS",
    "CumulativeSIPS",
    "GaussianThresholdHistogram",
    "WeightedGaussianSelection",
    "WeightedSelector",
]
