"""Mechanisms whose privacy comes from sampling.

* :class:`SampleAndThreshold` — Poisson sampling and a threshold (Bharadwaj & Cormode 2022),
  with its exact privacy profile and calibrations in :mod:`.profile` and accuracy analysis
  (reporting probabilities, error, confidence intervals, the error-minimising calibration) in
  :mod:`.accuracy`;
* :class:`FixedSizeCohort` — the paper's fixed-size cohort (Section 3.2): contact
  ``m + c sqrt(m)`` clients instead of Poisson-sampling the whole population.
"""

from privhist.mechanisms.sampling.cohort import CohortDraw, FixedSizeCohort, cohort_histogram
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

__all__ = ["CohortDraw", "FixedSizeCohort", "SampleAndThreshold", "cohort_histogram"]
