"""Federated frequency estimation under user-level distributed DP: Tables 1, 2, 3, 5, 6 and
Figure 3 of "Bounding Contribution Optimally for Federated Frequency Estimation under User-level
Distributed Differential Privacy".

``privhist experiment federated-frequency`` runs, on simulated devices with the ideal secure sum
(:mod:`privhist.federated.ffe`, :mod:`~privhist.federated.ffe_baselines`):

* **Table 1** (Section 5.1): i.i.d. data, ``n = 10**4``, ``d = 50``, ``m = 30``, ``theta = 0.2``
  and the rows ``d = 1000``, ``m = 10``, ``n = 10**5``: the l2 error of cPBM with ``C`` at the
  exact (non-private) optimal quantile ``C*`` (equation (5)) and at the fixed quantiles
  0.9 ... 0.98 of ``||y_i||``.
* **Table 2 and Table 6** (Section 5.2, Appendix E): TFFE (OcPBM with the DHT quantile,
  ``m = 30``, ``b = 6``, ``m' = 3``, ``theta' = theta``) against Best C* (non-private oracle),
  C_median, CDP, LDP (both at TFFE's epsilon), Normalize, Sample(one), Sample(0.25) and
  Sample(4, 16, 64, 256); ``d = 50, 100``; mean and standard deviation over the runs.
* **Table 3** (Appendix E.1): MFFE with rounds of ``N = 1000`` users, ``m = m' = 15``,
  ``eta = 1``, against Best C* (one fixed oracle threshold), C_small and C_median (both from the
  paper's ``C_1 = 1``); ``n = 10**5`` (or all users of a smaller dataset). OcPBM starts from a
  DHT of the first round's norms (``start="dht"``); "OcPBM (C1 = 1)" is the paper's start.
* **Table 5** (Appendix E): average bin error of DHT, flat and hierarchical-histogram quantiles
  (``d = 100``, ``theta' = 0.2``, ``m' = 30``, ``b = 6``) over the levels 0.80, 0.81, ..., 0.99,
  against the un-noised histogram.
* **Figure 3**: Theorem 1's bound ``E(C; D)`` and the true error (mean of 3 runs) as ``C``
  varies (i.i.d., ``n = 10**4``, ``d = 50``).

Data. Synthetic i.i.d. and heterogeneous users (:mod:`privhist.federated.user_data`). The
paper's real datasets (Foursquare check-ins, Sentiment140 tweets) are not available; we use
``anonymous-msweb.data`` (each user's visited site areas) in place of Foursquare and
``retail.dat`` (each basket a user, its items the items) in place of Sentiment140. The ``d``
items are the ``d`` most frequent ones, chosen from the data non-privately, as the paper does;
real data uses at most ``--max-users`` users (a seeded random subset) to bound the run time.
The public bound ``max_items`` that fixes the quantile range is the largest number of items of a
user (the paper's footnote 4 treats it as known); likewise ``max_count``, the largest count of one
item in a user's vector (1 on msweb and retail, which are sets), tightens the range to
``B = K sqrt(max_items max_count)`` (:func:`privhist.federated.ffe.range_upper`).

Table 2's OcPBM is TFFE's default threshold (the squared form of Theorem 1's bound minimised
over the private DHT histogram, capped at the ``gamma*`` quantile); "OcPBM (eq. 5)" is the
paper's ``gamma*`` quantile. Table 3's "OcPBM (C1 = 1)" starts MFFE at the paper's
``C_1 = 1``: on data whose norms are far above 1 (the i.i.d. norms are about 30) the first
rounds clip almost everything (thresholds 1, 2.6, 7.1, 18.7, then an overshoot to 50 on i.i.d.
``d = 50``). Their bias, with weight ``N / n`` each, is a floor under the mean error (Jensen;
:mod:`privhist.federated.ffe`): 0.88 and 0.85 in two runs of i.i.d. ``d = 50``, computed from
the runs' thresholds and the exact clipped means, above the paper's 0.65, so the paper's number
cannot come from ``C_1 = 1`` on data of this scale (its Normalize column, 27.3, pins
``||x_bar||`` near our 28). Table 3's OcPBM pays a quarter of the first round's frequency
trials for a DHT of that round's norms, starts at TFFE's threshold read from it and keeps the
update at that threshold's estimated level (:func:`privhist.federated.ffe.mffe`,
``start="dht"``); the reported epsilon is unchanged.

Frames: the paper's random orthogonal frame with ``D = 2d`` (which reproduces its epsilons), a
randomised Hadamard frame with ``D = 2048`` for ``d = 1000``
(:func:`privhist.federated.kashin.frame_for`, the choice ``privhist federated-frequency`` makes).

Every estimate comes from the library's protocols: :func:`~privhist.federated.ffe.tffe`,
:func:`~privhist.federated.ffe.mffe` and :func:`~privhist.federated.ffe.frequency_phase` (cPBM at
a given threshold), the baselines of :mod:`privhist.federated.ffe_baselines`, and the encoding and
decoding of :class:`privhist.federated.dht.FederatedQuantile`. Table 5 reads the quantile bins
from the decoded prefix counts directly (:func:`.metrics.nearest_level_bins`), without the
monotone projection a release applies, since it compares the histograms themselves.

Outputs in ``--output-dir``: ``table1.csv``, ``table2.csv`` (Tables 2 and 6), ``table3.csv``,
``table5.csv``, ``figure3.csv``, ``figure3.png``, ``table2.png`` and ``summary.md`` (our numbers
beside the paper's). Everything is computed first; files are written atomically at the end.

The package: :mod:`.settings` (the paper's sizes and the ``--quick`` ones), :mod:`.data`,
:mod:`.metrics`, :mod:`.runner`, :mod:`.claims` (the paper's numbers beside this run's),
:mod:`.plots` and :mod:`.cli` (flags and files).
"""

from __future__ import annotations

from privhist.engines.local.federated_data import read_msweb
from privhist.experiments.federated_frequency.claims import (
    PAPER_T1,
    PAPER_T2,
    PAPER_T3,
    PAPER_T5,
    summary_markdown,
)
from privhist.experiments.federated_frequency.cli import (
    add_arguments,
    run,
    settings_from_args,
    write_outputs,
)
from privhist.experiments.federated_frequency.data import experiment_frame, load
from privhist.experiments.federated_frequency.metrics import l2_error, nearest_level_bins
from privhist.experiments.federated_frequency.runner import (
    PARTS,
    Results,
    bound_against_error_rows,
    clip_quantile_rows,
    multi_round_rows,
    quantile_bin_rows,
    run_experiment,
    steps,
    two_round_rows,
)
from privhist.experiments.federated_frequency.settings import (
    DATA,
    DATASETS,
    HELP,
    NAME,
    QUANTILES_T1,
    REAL_FILES,
    STAND_IN,
    T2_METHODS,
    T3_METHODS,
    TABLES,
    Settings,
    paper_settings,
    quick_settings,
)

__all__ = [
    "DATA",
    "DATASETS",
    "HELP",
    "NAME",
    "PAPER_T1",
    "PAPER_T2",
    "PAPER_T3",
    "PAPER_T5",
    "PARTS",
    "QUANTILES_T1",
    "REAL_FILES",
    "STAND_IN",
    "T2_METHODS",
    "T3_METHODS",
    "TABLES",
    "Results",
    "Settings",
    "add_arguments",
    "bound_against_error_rows",
    "clip_quantile_rows",
    "experiment_frame",
    "l2_error",
    "load",
    "multi_round_rows",
    "nearest_level_bins",
    "paper_settings",
    "quantile_bin_rows",
    "quick_settings",
    "read_msweb",
    "run",
    "run_experiment",
    "settings_from_args",
    "steps",
    "summary_markdown",
    "two_round_rows",
    "write_outputs",
]
