"""Spark's Python worker daemon for a local run, with the decode stack imported before it forks.

Spark starts one daemon per executor (``python -m pyspark.daemon``), which forks a worker for
each task slot; each worker then imports ``pyspark.worker``, and the first task imports what
decoding a binlog range needs (pyarrow, numpy, PyMySQL, the compiled decoder). Measured
(docs/decisions/spark-context-and-warm-workers.md): ~0.37 s of CPU per worker, paid again in
every forked worker. ``spark.python.daemon.module`` names this module instead: it imports all of
that once, in the daemon, and every worker forked from it starts with it in memory.

pyspark's own daemon imports nothing heavy on purpose: a thread running at ``fork()`` leaves
its locks held in the child. Two of the libraries start one when imported (numpy's OpenBLAS
pool, the jemalloc background thread of pyarrow's allocator), so their settings that keep
them from starting one are set first; neither is used by decoding (BLAS never; the run's
Arrow pool is the system allocator: ``session.ARROW_POOL``), and a user's own setting of
either wins. A test checks that the daemon is one thread when it forks.
"""

from __future__ import annotations

import contextlib
import importlib
import os

from pyspark.daemon import manager

# What a decode task imports (engine.job.landing and source.fast, most of it inside functions
# so that the CLI's commands start without it), in the order a task meets it. By name: PyMySQL
# is imported here, never used (only source/ uses the MySQL drivers: .importlinter).
DECODE_STACK = (
    "pyspark.worker", "numpy", "pyarrow", "pyarrow.compute", "pyarrow.fs", "pyarrow.parquet",
    "pymysql", "replicator.engine.job.landing", "replicator.source.fast.native",
    "replicator.source.fast.stream",
)


def preload() -> None:
    """Import ``DECODE_STACK`` into this process, keeping it one thread (module docstring)."""
    # Read by the libraries when they load, so before they are imported.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    for name in DECODE_STACK:
        # One not installed (PyMySQL without the mysql extra) or failing here fails again in
        # the task that imports it, which reports it as any task failure; a daemon that died
        # here would fail every Python task, those that never need it too.
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


if __name__ == "__main__":
    preload()
    manager()
