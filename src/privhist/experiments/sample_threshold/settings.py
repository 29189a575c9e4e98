"""The settings of the sample-and-threshold experiment: the paper's grid (Section 5 of Bharadwaj &
Cormode 2022), the ``--quick`` grid, the mechanisms compared and the columns of every CSV file."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

NAME = "sample-threshold"
HELP = "Bharadwaj & Cormode 2022, Figures 1-2: per-bucket error and top-k recall vs epsilon"

DATASETS = ("binomial", "geometric", "shakespeare")
FIGURE1_BUCKETS = (2**6, 2**10, 2**14)
FIGURE2_BUCKETS = (2**8, 2**12)
EPSILONS = tuple(round(0.1 * i, 1) for i in range(1, 11))
POPULATION = 10**6
DELTA = 1e-8
ALPHA = Fraction(1, 6)
PAPER_THRESHOLD = 20
REPETITIONS = 10
#: the reduced run of ``--quick``
QUICK = {
    "population": 10**5,
    "reps": 2,
    "epsilons": (0.1, 0.5, 1.0),
    "figure1": (2**6, 2**10),
    "figure2": (2**8,),
}
SHAKESPEARE_FILE = "shakespeare_pg100.txt.gz"

#: the paper's baselines (:mod:`privhist.federated.baselines`)
BASELINES = ("central", "shuffle", "hadamard")
#: mechanism ids, in plotting order, with their labels
MECHANISMS = {
    "st-paper": f"sample-and-threshold, tau = {PAPER_THRESHOLD} (paper)",
    "st-exact": "sample-and-threshold, exact tau",
    "central": "central discrete Laplace",
    "shuffle": "shuffle Bernoulli",
    "hadamard": "Hadamard response (LDP)",
}
COLUMNS = (
    "dataset",
    "buckets",
    "figure",
    "population",
    "epsilon",
    "delta",
    "mechanism",
    "sampling_rate",
    "threshold",
    "reps",
    "mae_mean",
    "mae_se",
    "recall_mean",
    "recall_se",
    "k",
    "released_fraction_mean",
    "zero_mae",
    "kth_fraction",
)
THRESHOLD_COLUMNS = (
    "epsilon",
    "delta",
    "alpha",
    "sampling_rate",
    "threshold_paper",
    "delta_exact_paper",
    "threshold_theorem1",
    "threshold_exact",
    "delta_exact_exact",
)

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Settings:
    """What to run (defaults: the paper's full grid)."""

    population: int = POPULATION
    reps: int = REPETITIONS
    seed: int = 0
    epsilons: tuple[float, ...] = EPSILONS
    figure1: tuple[int, ...] = FIGURE1_BUCKETS
    figure2: tuple[int, ...] = FIGURE2_BUCKETS
    delta: float = DELTA
    workers: int = 1
    shakespeare: Path | None = None
    heavy_hitters: bool = True


HH_EPSILON = 1.0
HH_LEVELS = 10
HH_TOP = (10, 50, 100, 500)
HH_COLUMNS = (
    "method",
    "epsilon",
    "delta",
    "levels",
    "composition",
    "guarantee_epsilon",
    "sampling_rate",
    "threshold",
    "k",
    "reps",
    "recall_mean",
    "recall_se",
    "items_found_mean",
    "seconds_per_run",
)
