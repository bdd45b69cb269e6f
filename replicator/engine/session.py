"""Starting the Spark session a pipeline runs in: local by default, any master by URL.

Two measured pitfalls of Python data sources decide the environment set here, before the JVM
starts (it inherits the environment once, at launch):

- the driver-side planner of a Python data source is a separate Python process started by the
  JVM; it unpickles our ``DataSource`` class by module path, so ``replicator`` must be on its
  ``PYTHONPATH`` (an editable install is not enough when the code is run from a checkout);
- executors run ``read()`` in Python workers started with ``PYSPARK_PYTHON``: it must be an
  interpreter that has replicator and its dependencies. Locally that is this interpreter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Small shuffles: a micro-batch is thousands to a few hundred thousand rows, not terabytes.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Python workers are reused between tasks, so the per-task import cost is paid once.
    "spark.python.worker.reuse": "true",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    # The streaming query's own metadata logs are small; keep only a few.
    "spark.sql.streaming.minBatchesToRetain": "20",
    # Spark's offset/commit logs under the checkpoint directory: user-only. Hadoop's local
    # file system chmods what it creates to 0666/0777 minus *this* umask (default 022), not
    # the process's.
    "spark.hadoop.fs.permissions.umask-mode": "077",
}


def package_root() -> str:
    """The directory that holds the ``replicator`` package (for PYTHONPATH)."""
    import replicator

    return str(Path(replicator.__file__).resolve().parent.parent)


LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def prepare_environment(master: str = "local[*]") -> None:
    """Make the package importable by Spark's Python processes (see the module docstring),
    keep Spark's log chatter out of the run's output, and keep a local driver on 127.0.0.1."""
    if "PYSPARK_SUBMIT_ARGS" not in os.environ and LOG4J_CONFIG.exists():
        # Read by the launcher before the JVM starts (builder settings come too late).
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f'--driver-java-options "-Dlog4j.configurationFile=file:{LOG4J_CONFIG}" pyspark-shell'
        )
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = package_root()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_session(
    master: str = "local[*]",
    conf: Mapping[str, str] | None = None,
    *,
    app_name: str = "replicator",
    log_level: str = "ERROR",
) -> SparkSession:
    """A Spark session for a pipeline; ``conf`` entries override the defaults."""
    prepare_environment(master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register_sources(spark)
    return spark


def register_sources(spark: SparkSession) -> None:
    from replicator.engine.datasource import BinlogDataSource

    spark.dataSource.register(BinlogDataSource)
