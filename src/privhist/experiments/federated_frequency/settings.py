"""The settings of the federated frequency experiment: the sizes of a full and a ``--quick`` run,
the methods each table compares and the real datasets that stand in for the paper's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from privhist.experiments._common import default_data_path

NAME = "federated-frequency"
HELP = (
    "Tables 1, 2, 3, 5, 6 and Figure 3 of the user-level distributed-DP federated frequency "
    "estimation paper (TFFE, MFFE, OcPBM, DHT)"
)

F64 = npt.NDArray[np.float64]

#: the real datasets: their file names and the paper's dataset each stands in for
REAL_FILES: dict[str, str] = {"msweb": "anonymous-msweb.data", "retail": "retail.dat"}
STAND_IN: dict[str, str] = {"msweb": "Foursquare", "retail": "Sentiment140"}
#: where the real datasets are by default: ``../shared/data`` from the working directory, or
#: beside the source tree's project directory (the other experiments' default)
DATA: Path = default_data_path(REAL_FILES["msweb"]).parent
DATASETS: tuple[str, ...] = ("iid", "hetero", "msweb", "retail")
#: the tables and figure a run can compute (``f3`` is Figure 3)
TABLES: tuple[str, ...] = ("1", "2", "3", "5", "f3")

#: cPBM's ``theta`` (and the quantile's ``theta'``) in every table
THETA = 0.2
#: Table 1: the fixed quantiles of ``||y_i||`` set beside ``C*``
QUANTILES_T1: tuple[float, ...] = (0.9, 0.92, 0.94, 0.96, 0.98)
#: Table 2 (TFFE): ``m``, the quantile's ``m'``, its ``b`` and the delta of the stated epsilon
TFFE_M, TFFE_M_QUANTILE, TFFE_BITS, TFFE_DELTA = 30, 3, 6, 1e-4
#: Table 3 (MFFE): ``m``, ``m'`` and the delta of the stated epsilon
MFFE_M, MFFE_M_QUANTILE, MFFE_DELTA = 15, 15, 1e-5
#: Table 5: ``b`` and ``m'`` of the quantile histograms, and the levels 0.80, 0.81, ..., 0.99
QUANTILE_BITS, QUANTILE_M = 6, 30
QUANTILE_LEVELS: tuple[float, ...] = tuple(round(0.80 + 0.01 * i, 2) for i in range(20))
QUANTILE_SCHEMES: tuple[str, ...] = ("dht", "flat", "hh")
#: Figure 3: ``m``, runs per threshold and thresholds between ``C*/4`` and ``3 C*``
FIGURE3_M, FIGURE3_RUNS, FIGURE3_POINTS, FIGURE3_POINTS_QUICK = 30, 3, 12, 5

T2_METHODS: tuple[str, ...] = (
    "CDP",
    "LDP",
    "Best C*",
    "OcPBM",
    "C_median",
    "Normalize",
    "Sample(one)",
    "Sample(0.25)",
    "Sample(4)",
    "Sample(16)",
    "Sample(64)",
    "Sample(256)",
    "OcPBM (eq. 5)",
)
T3_METHODS: tuple[str, ...] = ("Best C*", "OcPBM", "C_small", "C_median", "OcPBM (C1 = 1)")
#: Table 3: the share of the first round's frequency trials OcPBM spends on its DHT start
MFFE_START_SHARE = 0.25


@dataclass(frozen=True)
class Settings:
    """Sizes of one run (``quick`` shrinks everything for tests)."""

    quick: bool
    seed: int
    runs: int
    n: int
    n_mffe: int
    round_users: int
    dims: tuple[int, ...]
    t1_rows: tuple[tuple[str, int, int, int], ...]  # (label, n, d, m)
    datasets: tuple[str, ...]
    max_users: int
    data_dir: Path
    tables: tuple[str, ...]


def available_datasets(data_dir: Path) -> list[str]:
    """The synthetic datasets and the real ones whose files are in ``data_dir``."""
    return ["iid", "hetero", *(k for k, f in REAL_FILES.items() if (data_dir / f).exists())]


def quick_settings(
    seed: int,
    runs: int | None,
    datasets: tuple[str, ...] | None,
    data_dir: Path,
    tables: tuple[str, ...],
) -> Settings:
    """The ``--quick`` run: ``d = 20`` (60 for Table 1's large-``d`` row), 1,500 users, one run
    per cell and the synthetic datasets unless others are named."""
    return Settings(
        True,
        seed,
        1 if runs is None else runs,
        1500,
        2000,
        500,
        (20,),
        (
            ("default", 1500, 20, 30),
            ("d = 1000", 1500, 60, 30),
            ("m = 10", 1500, 20, 10),
            ("n = 10^5", 3000, 20, 30),
        ),
        tuple(available_datasets(data_dir)[:2]) if datasets is None else datasets,
        1500,
        data_dir,
        tables,
    )


def paper_settings(
    seed: int,
    runs: int | None,
    datasets: tuple[str, ...] | None,
    max_users: int,
    data_dir: Path,
    tables: tuple[str, ...],
) -> Settings:
    """The paper's sizes: ``n = 10**4`` (Table 3: ``10**5`` in rounds of 1,000), ``d = 50, 100``,
    five runs per cell and every dataset whose file is present."""
    return Settings(
        False,
        seed,
        5 if runs is None else runs,
        10_000,
        100_000,
        1000,
        (50, 100),
        (
            ("default", 10_000, 50, 30),
            ("d = 1000", 10_000, 1000, 30),
            ("m = 10", 10_000, 50, 10),
            ("n = 10^5", 100_000, 50, 30),
        ),
        tuple(available_datasets(data_dir)) if datasets is None else datasets,
        max_users,
        data_dir,
        tables,
    )
