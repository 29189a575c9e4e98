"""Private weighted sampling against stability-based histograms: Figures 1-6 of Cohen, Geri,
Sarlos & Stemmer, "Differentially Private Weighted Sampling" (AISTATS 2021).

``privhist experiment pws`` reproduces Section 8 (Performance Analysis) of
``private-weighted-sampling.txt`` with *exact expressions, not simulation*, as the paper does
("We use precise expressions (not simulations) to compute probabilities, bias, variance, and MSE
of the different methods", Section 8). Nothing here draws a random number.

* **Methods.** PWS: the optimal end-to-end reporting probabilities ``pi_i`` of Algorithm 3
  (:func:`privhist.mechanisms.sampling.pws.keys.reporting_probabilities`) and, for estimation,
  the ``pi_(i,j)`` matrix of Algorithm 4 with the MLE of equation (9)
  (:mod:`~privhist.mechanisms.sampling.pws.frequencies`,
  :mod:`~privhist.mechanisms.sampling.pws.estimators`).
  SbH: Algorithm 6 (``Lap(1/eps)`` noise, threshold ``T = (1/eps) ln(1/delta) + 1``) in its
  continuous form, and sampled-SbH (sanitise with SbH, then sample with ``q(w*)``) with the
  estimator (7) (:mod:`privhist.mechanisms.sampling.pws.baselines`). Non-private: the threshold
  sample itself, reporting probability ``q_i`` and the unbiased estimator ``i / q_i`` of equation
  (7), whose variance is ``i^2 (1/q_i - 1)``.
* **Sampled-SbH with ppswor, in closed form.** With ``w* = i + Z``, ``Z ~ Lap(b)``,
  ``lambda = 1/b = eps`` and ``q(x) = 1 - e^(-tau x)``, the reporting probability is
  ``phi_i - I_i`` where ``phi_i = Pr[w* >= T]`` and ``I_i = E[e^(-tau w*); w* >= T]``:
  ``I_i = lambda / (2 (lambda + tau)) e^(-tau T - lambda (T - i))`` for ``i <= T``, and for
  ``i > T``
  ``I_i = lambda / 2 * (e^(-tau i) - e^(lambda (T - i) - tau T)) / (lambda - tau)
  + lambda / (2 (lambda + tau)) e^(-tau i)`` (the first term is ``lambda / 2 (i - T) e^(-tau i)``
  when ``lambda = tau``); two elementary integrals of the Laplace density
  (:func:`privhist.mechanisms.sampling.pws.baselines.sampled_sbh_ppswor_reporting`; the tests
  compare it with the library's quadrature).
* **Large frequencies.** Lemma 4.2 (``q = 1``: ``pi*_i = 1`` for ``i >= 2L + 2``) and Lemma 4.4
  (ppswor, ``f(i) = i``: ``pi_i = q_i`` from the first ``i`` with ``pi*_i > q_i`` on, which is at
  most ``2L + 2``) give ``pi_i`` for every frequency past ``ceil(2L) + 3`` without running the
  recursion that far; :func:`pws_reporting` checks that Algorithm 3 has indeed reached ``q`` there.
* **Data.** ``Zipf[alpha]`` over ``n`` keys: the ``k``-th key has frequency
  ``floor((n / k)^alpha)``, ``k = 1..n`` (the smallest frequency is 1), with ``n = 10**6``; the
  paper does not print ``n`` and the fractions barely move with it (see the summary). The
  selection of Figure 5 is ``2 * 10**5`` keys "with frequencies uniformly drawn between 1 and
  200": we take its expected composition, each of 1..200 exactly 1000 times, so the result is
  exact and needs no seed. Real data: the item counts of ``retail.dat`` (FIMI baskets) and the
  word counts of the Shakespeare text (``--retail``, ``--shakespeare``; skipped with a message
  when absent).
* **Parameters.** Figure 1: no sampling, ``(eps, delta) = (0.1, 0.01), (0.01, 1e-6)``. Figure 2:
  no sampling, ``eps = 0.1``, ``delta = 1`` and ``10^(-k/4)``, ``k = 1..32``, Zipf[1] and
  Zipf[2]. Figures 3-4: ppswor with ``f(i) = i``, ``(eps, delta) = (0.1, 0.001)``; Figure 3 at
  ``tau = 0.1, 0.01, 0.001``, Figure 4 sweeping ``tau = 10^(-k/4)``, ``k = 0..24``, for Zipf[0.5],
  Zipf[1] and Zipf[2]. Figures 5-6 (not stated in the text; these follow the authors' published
  setting): priority sampling, ``delta = 2^-20``, ``eps = 0.5, 0.25, 0.1``.

Outputs in ``--output-dir``: one CSV per figure (``figure1.csv`` ... ``figure6.csv``,
``figure5_nrmse.csv``; columns in :data:`COLUMNS`), ``real_data.csv`` when a dataset was read,
a PNG per figure and ``summary.md``, which quotes the paper's claims next to the numbers of this
run. Everything is computed before any file is written, and each file is written atomically.

The package: :mod:`.settings` (the paper's parameters and the ``--quick`` grids), :mod:`.data`,
:mod:`.exact` (reporting probabilities and estimator moments), :mod:`.runner`, :mod:`.claims`
(the paper's statements beside this run's numbers), :mod:`.plots` and :mod:`.cli` (flags and
files).
"""

from __future__ import annotations

from privhist.experiments._common import default_data_path
from privhist.experiments.pws.claims import (
    PAPER_FIGURE4_GAINS,
    PAPER_QUOTES,
    figure4_gain_summary,
    summary_markdown,
)
from privhist.experiments.pws.cli import add_arguments, run, settings_from_args, write_outputs
from privhist.experiments.pws.data import (
    frequency_histogram,
    read_key_counts,
    uniform_grid_frequencies,
    zipf_frequencies,
)
from privhist.experiments.pws.exact import (
    NRMSE,
    EstimationCurves,
    estimation_curves,
    estimation_margin,
    expected_fraction,
    pws_reporting,
    sbh_reporting,
    selection_nrmse,
)
from privhist.experiments.pws.runner import (
    Progress,
    Results,
    figure1_rows,
    figure3_rows,
    fraction_rows_by_delta,
    fraction_rows_by_tau,
    run_experiment,
)
from privhist.experiments.pws.settings import (
    BIAS_TAUS,
    COLUMNS,
    ESTIMATION_DELTA,
    ESTIMATION_EPSILONS,
    ESTIMATION_SPAN,
    FIGURE1_PARAMS,
    FIGURE2_ALPHAS,
    FIGURE2_DELTAS,
    FIGURE2_EPSILON,
    FIGURE3_TAUS,
    FIGURE4_ALPHAS,
    FIGURE4_TAUS,
    HELP,
    NAME,
    NRMSE_TAUS,
    QUICK,
    RETAIL_FILE,
    SAMPLED_DELTA,
    SAMPLED_EPSILON,
    SHAKESPEARE_FILE,
    UNIFORM_COPIES,
    UNIFORM_MAX,
    VARIANCE_TAUS,
    ZIPF_KEYS,
    Settings,
)
from privhist.mechanisms.sampling.pws.baselines import sampled_sbh_ppswor_reporting

__all__ = [
    "BIAS_TAUS",
    "COLUMNS",
    "ESTIMATION_DELTA",
    "ESTIMATION_EPSILONS",
    "ESTIMATION_SPAN",
    "FIGURE1_PARAMS",
    "FIGURE2_ALPHAS",
    "FIGURE2_DELTAS",
    "FIGURE2_EPSILON",
    "FIGURE3_TAUS",
    "FIGURE4_ALPHAS",
    "FIGURE4_TAUS",
    "HELP",
    "NAME",
    "NRMSE",
    "NRMSE_TAUS",
    "PAPER_FIGURE4_GAINS",
    "PAPER_QUOTES",
    "QUICK",
    "RETAIL_FILE",
    "SAMPLED_DELTA",
    "SAMPLED_EPSILON",
    "SHAKESPEARE_FILE",
    "UNIFORM_COPIES",
    "UNIFORM_MAX",
    "VARIANCE_TAUS",
    "ZIPF_KEYS",
    "EstimationCurves",
    "Progress",
    "Results",
    "Settings",
    "add_arguments",
    "default_data_path",
    "estimation_curves",
    "estimation_margin",
    "expected_fraction",
    "figure1_rows",
    "figure3_rows",
    "figure4_gain_summary",
    "fraction_rows_by_delta",
    "fraction_rows_by_tau",
    "frequency_histogram",
    "pws_reporting",
    "read_key_counts",
    "run",
    "run_experiment",
    "sampled_sbh_ppswor_reporting",
    "sbh_reporting",
    "selection_nrmse",
    "settings_from_args",
    "summary_markdown",
    "uniform_grid_frequencies",
    "write_outputs",
    "zipf_frequencies",
]
