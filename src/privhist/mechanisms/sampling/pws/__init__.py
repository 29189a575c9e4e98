"""Private weighted sampling (PWS): Cohen, Geri, Sarlos & Stemmer, "Differentially Private
Weighted Sampling" (``private-weighted-sampling.txt``).

* :mod:`.schemes` — non-private threshold / bottom-k / streaming samplers (ppswor, priority)
  and inclusion probabilities ``q_i`` (Section 3.1, Algorithm 1);
* :mod:`.keys` — sanitized keys: Algorithm 3 (vectorised), ``L`` (equation 3), the closed form
  of Lemma 4.2, the exact ``2**-62`` grid version;
* :mod:`.frequencies` — sanitized frequencies: Algorithm 4, Lemma 5.2, the certified exact
  shift pmf used on the release path;
* :mod:`.max_separation` — sanitized frequencies with maximum separation: Algorithm 5's
  piecewise-constant PDFs (at most ``3 m`` breakpoints) and their discretisation (Theorem 5.1);
* :mod:`.estimators` — MLE (equation 9), unbiased, biased-down estimators, exact bias / variance
  / MSE, NRMSE of a selection, concordance and expected Kendall tau (Sections 6-7);
* :mod:`.baselines` — stability-based histograms (Algorithm 6) in continuous form, sampled-SbH;
* :mod:`.sanitize` — the sanitisers of Algorithm 2 applied to a sample (exact inclusion, exact
  draws, certified end-to-end rows);
* :mod:`.mechanism` — the ``pws`` histogram mechanism (``q = 1``).
"""

from privhist.mechanisms.sampling.pws.mechanism import PWSHistogram

__all__ = ["PWSHistogram"]
