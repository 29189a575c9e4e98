"""Differential privacy on finite computers (Balcer & Vadhan).

Counting queries with integer arithmetic only and strictly bounded running time, and the
histograms built on them:

* :class:`GeoSample` (Theorem 4.5) and :class:`FastSample` (Theorem 4.6), in
  :mod:`privhist.mechanisms.finite.geometric`;
* Lemma 3.1's mixing with a uniform output, :mod:`privhist.mechanisms.finite.mixing`;
* ``basic-geometric`` (Algorithm 3, Theorem 5.1) and ``stability-geometric`` (Theorem 1.3),
  registered histogram mechanisms in :mod:`privhist.mechanisms.finite.histograms`, and
  :func:`~privhist.mechanisms.finite.histograms.keep_heavy` (Algorithm 4 as post-processing).

Not here (yet): ``KH'``/``KH''`` and OrdSample (Algorithms 5-7), SparseHistogram and
PureSparseHistogram (Theorem 6.5, Algorithm 8), CompactHistogram (Algorithm 9, Theorem 7.2).
"""

from privhist.mechanisms.finite.geometric import (
    BoundedGeometricNoise,
    CountingSampler,
    FastSample,
    GeoSample,
    counting_k,
    fast_sample_width,
)
from privhist.mechanisms.finite.mixing import (
    UniformMixture,
    mixing_delta_bound,
    mixture_pmf,
    satisfies_inequality_1,
    total_variation,
)

__all__ = [
    "BoundedGeometricNoise",
    "CountingSampler",
    "FastSample",
    "GeoSample",
    "UniformMixture",
    "counting_k",
    "fast_sample_width",
    "mixing_delta_bound",
    "mixture_pmf",
    "satisfies_inequality_1",
    "total_variation",
]
