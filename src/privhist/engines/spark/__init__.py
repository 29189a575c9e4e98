"""The Spark engine (:mod:`privhist.engines.spark.engine`): counting, contribution bounding, the
weighted source of the weighted selectors (:mod:`privhist.engines.spark.weighting`) and per-key
noise on the executors (:mod:`privhist.engines.spark.noise`)."""

from privhist.engines.spark.engine import SPARK_FORMATS, SparkEngine

__all__ = ["SPARK_FORMATS", "SparkEngine"]
