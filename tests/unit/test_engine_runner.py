"""The runner turns a failed decode job's wrapped error back into one a user (and the retry)
can act on."""

from __future__ import annotations

from replicator.engine.runner import _unwrap
from replicator.errors import EngineError, TransientSourceError

# What a decode task's uncarried error looks like from the driver: py4j's error around Spark's
# job failure around the worker's Python traceback.
SPARK_TEXT = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 7) (127.0.0.1 executor driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/replicator/engine/job/binlog_batches.py", line 214, in land
  File "/work/replicator/source/fast/stream.py", line 210, in read_changes
replicator.errors.TransientSourceError: the binlog connection to 127.0.0.1:3306 dropped
"""


def test_an_executor_side_replicator_error_keeps_its_class():
    error = _unwrap(RuntimeError(SPARK_TEXT))
    assert isinstance(error, TransientSourceError) and error.transient
    assert error.message == "the binlog connection to 127.0.0.1:3306 dropped"


def test_anything_else_is_an_engine_error_naming_debug():
    error = _unwrap(RuntimeError("java.lang.OutOfMemoryError: heap"))
    assert type(error) is EngineError and "--debug" in (error.hint or "")
    assert not error.transient
