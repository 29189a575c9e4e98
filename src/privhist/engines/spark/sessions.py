"""The Spark session privhist starts when it is given none: quiet, and on a local master running
its Python workers with this interpreter.

* ``spark.ui.showConsoleProgress=false``: Spark's console progress bar redraws itself on stderr
  for every stage; piped or logged, that is hundreds of lines around privhist's one summary line.
* On a ``local`` master, ``PYSPARK_PYTHON`` (in this process's environment, which PySpark reads
  when it starts its context): the interpreter running privhist (``sys.executable``). PySpark
  otherwise starts ``python3`` from ``PATH`` for its workers, which outside an activated virtual
  environment is another interpreter, without privhist installed, and the first task fails with
  ``No module named ...``. A ``PYSPARK_PYTHON`` already set is kept, and a cluster's workers are
  left to the cluster's configuration.

A session built elsewhere (``SparkEngine(spark)``) is used as it is.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["QUIET_CONFIG", "spark_session"]

#: settings of every session :func:`spark_session` builds
QUIET_CONFIG: dict[str, str] = {"spark.ui.showConsoleProgress": "false"}


def spark_session(master: str = "local[*]") -> Any:
    """``SparkSession.builder.master(master)`` with :data:`QUIET_CONFIG` and, on a local
    master, the workers' interpreter set (module notes); Spark returns the active session if
    there is one.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master)
    for key, value in QUIET_CONFIG.items():
        builder = builder.config(key, value)
    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    return builder.getOrCreate()
