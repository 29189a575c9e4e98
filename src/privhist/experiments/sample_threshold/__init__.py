"""Sample-and-threshold against its baselines: Figures 1 and 2 of Bharadwaj & Cormode (2022).

``privhist experiment sample-threshold`` reproduces Section 5 of "Sample and Threshold
Differential Privacy: Histograms and applications" (AISTATS 2022):

* **Data** (Section 5, second paragraph). A population of ``n = 10**6`` clients, each holding one
  bucket of ``B``: *Binomial* — each client draws Binomial(B, 1/2); *Geometric* — each client draws
  Geometric(1/sqrt(B)) (number of failures before the first success); both conditioned on landing
  in ``0..B-1`` (the paper does not say what happens outside; the mass there is below ``2**-B``
  and ``e**-sqrt(B)`` respectively). *Shakespeare* — every word token of the complete works
  (lower-cased runs of letters, digits and apostrophes, :data:`privhist.io.readers.WORD_PATTERN`)
  is a client, and each distinct word is mapped consistently to a bucket by a fixed hash
  (BLAKE2b, 64 bits, modulo ``B``); the population is the ~9.1 * 10**5 tokens of the file.
* **Privacy** ``delta = 1e-8``, ``alpha = 1/6``, ``epsilon`` from 0.1 to 1 in steps of 0.1,
  add/remove-one-client neighbours. Every mechanism sees the same Poisson sample of the clients,
  drawn at the sample-and-threshold rate ``p = alpha (1 - e^-eps)`` (Section 3.1), so all sample
  the same expected number of clients (end of Section 3.3).
* **Mechanisms.** Sample-and-threshold with the paper's ``tau = 20`` (Section 3.1: ``C_alpha =
  0.935``, ``tau = ln(1/delta) / C_alpha``) and with the smallest ``tau`` that the exact privacy
  profile allows (:mod:`privhist.mechanisms.sampling.profile`), both at rate ``p``; and the
  paper's three baselines at ``(eps, delta)`` on the sampled clients
  (:mod:`privhist.federated.baselines`): central discrete Laplace noise, Hadamard-response local
  DP (Acharya, Sun & Zhang 2019) and shuffle-model Bernoulli noise (Balcer & Cheu 2020). Every
  estimate of a population count is the mechanism's estimate on the sample divided by ``p``.
* **Metrics.** Figure 1: the mean absolute error per bucket, as a fraction of ``n``
  (:func:`mean_absolute_error`), for ``B = 2**6, 2**10, 2**14``. Figure 2: the recall of the true
  top ``k = B/10`` buckets among the ``k`` largest reported estimates (:func:`top_k_recall`),
  for ``B = 2**8, 2**12``. Both metrics are computed for all five ``B`` and written to the CSV.
  Means and standard errors over 10 repetitions of the mechanisms on a fixed population.

The sample-and-threshold path here is the mechanism's own: its exact rate, its sampling step
:func:`privhist.mechanisms.sampling.sample_threshold.sample_units` (the exact binomial sampler on
the per-bucket counts, which
:meth:`~privhist.mechanisms.sampling.SampleAndThreshold.release` calls too) and its threshold.
The experiment does not call ``release`` itself only so that both thresholds and the baselines
see one sample; a test checks that it draws exactly what ``release`` draws from the same seed.

With the Shakespeare words the experiment also runs heavy hitters: TrieHH++
(:mod:`privhist.federated.triehh`, Section 4.1) at total ``(1, 1e-8)`` over 10 levels, and one
sample-and-threshold histogram of whole words at the same budget, and reports the recall of the
true top 10, 50, 100 and 500 words (not in ``--quick`` runs).

Outputs in ``--output-dir``: ``results.csv`` (one row per dataset, ``B``, ``epsilon`` and
mechanism), ``thresholds.csv`` (the calibration per ``epsilon``), ``figure1.png``,
``figure2.png``, ``summary.md`` (the paper's claims next to what this run measured) and, with
TrieHH++, ``heavy_hitters.csv``. Everything is computed before any file is written.

The package: :mod:`.settings` (the paper's grid and the ``--quick`` one), :mod:`.data`,
:mod:`.metrics`, :mod:`.runner`, :mod:`.claims` (the paper's statements beside this run's),
:mod:`.plots` and :mod:`.cli` (flags and files).
"""

from __future__ import annotations

from privhist.experiments.sample_threshold.claims import Claim, claims, summary_markdown
from privhist.experiments.sample_threshold.cli import (
    add_arguments,
    run,
    settings_from_args,
    write_outputs,
)
from privhist.experiments.sample_threshold.data import (
    Words,
    bucket_distribution,
    default_shakespeare,
    read_words,
    sample_histogram,
    word_hash,
)
from privhist.experiments.sample_threshold.metrics import mean_absolute_error, top_k_recall
from privhist.experiments.sample_threshold.plots import plot_figure
from privhist.experiments.sample_threshold.runner import (
    Calibration,
    Cell,
    Results,
    Task,
    calibrate,
    cell_rows,
    heavy_hitter_recall,
    population_counts,
    run_cell,
    run_experiment,
)
from privhist.experiments.sample_threshold.settings import (
    ALPHA,
    BASELINES,
    COLUMNS,
    DATASETS,
    DELTA,
    EPSILONS,
    FIGURE1_BUCKETS,
    FIGURE2_BUCKETS,
    HELP,
    HH_COLUMNS,
    HH_EPSILON,
    HH_LEVELS,
    HH_TOP,
    MECHANISMS,
    NAME,
    PAPER_THRESHOLD,
    POPULATION,
    QUICK,
    REPETITIONS,
    SHAKESPEARE_FILE,
    THRESHOLD_COLUMNS,
    Settings,
)

__all__ = [
    "ALPHA",
    "BASELINES",
    "COLUMNS",
    "DATASETS",
    "DELTA",
    "EPSILONS",
    "FIGURE1_BUCKETS",
    "FIGURE2_BUCKETS",
    "HELP",
    "HH_COLUMNS",
    "HH_EPSILON",
    "HH_LEVELS",
    "HH_TOP",
    "MECHANISMS",
    "NAME",
    "PAPER_THRESHOLD",
    "POPULATION",
    "QUICK",
    "REPETITIONS",
    "SHAKESPEARE_FILE",
    "THRESHOLD_COLUMNS",
    "Calibration",
    "Cell",
    "Claim",
    "Results",
    "Settings",
    "Task",
    "Words",
    "add_arguments",
    "bucket_distribution",
    "calibrate",
    "cell_rows",
    "claims",
    "default_shakespeare",
    "heavy_hitter_recall",
    "mean_absolute_error",
    "plot_figure",
    "population_counts",
    "read_words",
    "run",
    "run_cell",
    "run_experiment",
    "sample_histogram",
    "settings_from_args",
    "summary_markdown",
    "top_k_recall",
    "word_hash",
    "write_outputs",
]
