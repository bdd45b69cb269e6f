"""The runner turns Spark's wrapped failures back into errors a user (and the retry) can act on."""

from __future__ import annotations

from replicator.engine.runner import _unwrap
from replicator.errors import BinlogGoneError, EngineError, TransientSourceError

SPARK_TEXT = """[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function.
Traceback (most recent call last):
  File "/work/replicator/source/binlog.py", line 210, in read_changes
pyspark.errors.exceptions.base.PySparkRuntimeError: [PYTHON_DATA_SOURCE_ERROR] failed
replicator.errors.TransientSourceError: the binlog connection to 127.0.0.1:3306 dropped
"""


class _Applier:
    failure = None


def test_an_executor_side_replicator_error_keeps_its_class():
    error = _unwrap(RuntimeError(SPARK_TEXT), _Applier())
    assert isinstance(error, TransientSourceError) and error.transient
    assert error.message == "the binlog connection to 127.0.0.1:3306 dropped"


def test_a_driver_side_error_is_the_one_the_applier_kept():
    applier = _Applier()
    applier.failure = BinlogGoneError("gone", hint="--snapshot always")
    assert _unwrap(RuntimeError("anything"), applier) is applier.failure


def test_anything_else_is_an_engine_error_naming_debug():
    error = _unwrap(RuntimeError("java.lang.OutOfMemoryError: heap"), _Applier())
    assert type(error) is EngineError and "--debug" in (error.hint or "")
    assert not error.transient
