"""The settings of the private weighted sampling experiment: the parameters of Figures 1-6
(Section 8 of Cohen, Geri, Sarlos & Stemmer 2021), the ``--quick`` grids and the CSV columns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

NAME = "pws"
HELP = (
    "Cohen, Geri, Sarlos & Stemmer, Figures 1-6: private weighted sampling vs stability-based "
    "histograms (exact computation)"
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

# -- the paper's settings -----------------------------------------------------------------------

FIGURE1_PARAMS: tuple[tuple[float, float], ...] = ((0.1, 0.01), (0.01, 1e-6))
FIGURE2_EPSILON = 0.1
FIGURE2_ALPHAS: tuple[float, ...] = (1.0, 2.0)
FIGURE2_DELTAS: tuple[float, ...] = (1.0, *(10 ** (-k / 4) for k in range(1, 33)))
SAMPLED_EPSILON = 0.1
SAMPLED_DELTA = 0.001
FIGURE3_TAUS: tuple[float, ...] = (0.1, 0.01, 0.001)
FIGURE4_ALPHAS: tuple[float, ...] = (0.5, 1.0, 2.0)
FIGURE4_TAUS: tuple[float, ...] = tuple(10 ** (-k / 4) for k in range(0, 25))
ZIPF_KEYS = 10**6
ESTIMATION_DELTA = 2.0**-20
ESTIMATION_EPSILONS: tuple[float, ...] = (0.5, 0.25, 0.1)
BIAS_TAUS: tuple[float, ...] = (1.0, 0.1, 0.01, 0.001, 0.0001, 1e-5, 1e-6)
VARIANCE_TAUS: tuple[float, ...] = (1.0, 0.01, 0.0001)
NRMSE_TAUS: tuple[float, ...] = (1.0, 0.1, 0.01, 0.001, 0.0001, 1e-5, 1e-6)
UNIFORM_MAX = 200
UNIFORM_COPIES = 1000
#: estimation curves run to this multiple of the SbH threshold ``T``
ESTIMATION_SPAN = 4.0


#: the columns of every CSV file
COLUMNS: dict[str, tuple[str, ...]] = {
    "figure1.csv": ("epsilon", "delta", "frequency", "pws", "sbh", "ratio"),
    "figure2.csv": ("dataset", "epsilon", "delta", "pws", "sbh", "ratio"),
    "figure3.csv": ("epsilon", "delta", "tau", "frequency", "non_private", "pws", "sampled_sbh"),
    "figure4.csv": (
        "dataset",
        "epsilon",
        "delta",
        "tau",
        "non_private",
        "pws",
        "sampled_sbh",
        "gain",
    ),
    "figure5.csv": ("epsilon", "delta", "tau", "frequency", "pws_mle", "sbh"),
    "figure5_nrmse.csv": ("epsilon", "delta", "tau", "non_private", "pws_mle", "sampled_sbh"),
    "figure6.csv": (
        "epsilon",
        "delta",
        "tau",
        "frequency",
        "non_private",
        "pws_mle",
        "sampled_sbh",
    ),
    "real_data.csv": (
        "dataset",
        "keys",
        "epsilon",
        "delta",
        "tau",
        "non_private",
        "pws",
        "sbh",
        "ratio",
    ),
}

RETAIL_FILE = "retail.dat"
SHAKESPEARE_FILE = "shakespeare_pg100.txt.gz"

QUICK: dict[str, Any] = {
    "zipf_keys": 10**4,
    "figure2_deltas": (1.0, *(10 ** (-k / 2) for k in range(1, 17))),
    "figure4_taus": tuple(10 ** (-k / 2) for k in range(0, 9)),
    "estimation_epsilons": (0.5,),
    "bias_taus": (1.0, 0.01),
    "variance_taus": (1.0, 0.01),
    "nrmse_taus": (1.0, 0.01, 0.0001),
}


@dataclass(frozen=True)
class Settings:
    """What one run computes."""

    zipf_keys: int = ZIPF_KEYS
    figure2_deltas: tuple[float, ...] = FIGURE2_DELTAS
    figure4_taus: tuple[float, ...] = FIGURE4_TAUS
    estimation_epsilons: tuple[float, ...] = ESTIMATION_EPSILONS
    bias_taus: tuple[float, ...] = BIAS_TAUS
    variance_taus: tuple[float, ...] = VARIANCE_TAUS
    nrmse_taus: tuple[float, ...] = NRMSE_TAUS
    retail: Path | None = None
    shakespeare: Path | None = None
    quick: bool = False
