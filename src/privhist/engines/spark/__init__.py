"""The Spark engine (:mod:`privhist.engines.spark.engine`): counting, contribution bounding, the
weighted source of the weighted selectors (:mod:`privhist.engines.spark.weighting`) and per-key
noise on the executors (:mod:`privhist.engines.spark.noise`).

The names below load on first use: the executors' Python workers import the modules of the
functions they run (:mod:`privhist.engines.spark.bounding` and its like), and each worker would
otherwise also import the driver's engine, the session and Polars (about 0.5 CPU s a worker)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["SPARK_FORMATS", "SparkEngine"]

if TYPE_CHECKING:
    from privhist.engines.spark.engine import SPARK_FORMATS, SparkEngine


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'privhist.engines.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module("privhist.engines.spark.engine"), name)
    globals()[name] = value  # later look-ups skip this function
    return value
