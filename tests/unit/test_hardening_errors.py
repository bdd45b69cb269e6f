"""A ReplicatorError crosses Spark's executor boundary as text and comes back whole."""

from __future__ import annotations

import traceback

import pytest

from replicator.engine.job.errors import carried, carry_errors, driver_error, recover
from replicator.engine.runner import _unwrap
from replicator.errors import ConfigError, EngineError, SourceError, TransientSourceError


def _worker_text(error: BaseException) -> str:
    """What PySpark's worker sends to the JVM: the formatted traceback (notes included),
    wrapped in Spark's own text."""
    try:
        with carry_errors():
            raise error
    except BaseException as raised:
        assert raised is error  # re-raised unchanged: callers outside Spark see no difference
        text = "".join(traceback.format_exception(raised))
    return ("org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was "
            f"thrown from the Python worker: {text}\n\tat org.apache.spark.Foo(Foo.scala:1)\n")


def test_class_message_hint_and_transient_come_back():
    original = SourceError("t.at holds a zero date ('0000-00-00'), \"quoted\" {braces}",
                           hint="set source.mysql.zero_dates: as_null; UPDATE t SET at = NULL")
    back = recover(_worker_text(original))
    assert type(back) is SourceError
    assert (back.message, back.hint, back.transient) == (original.message, original.hint, False)


def test_a_transient_error_stays_transient_and_keeps_its_hint_through_the_stream_unwrap():
    original = TransientSourceError("lost the MySQL connection\nsecond line", hint="retrying")
    back = _unwrap(RuntimeError(_worker_text(original)))
    assert type(back) is TransientSourceError and back.transient
    assert (back.message, back.hint) == ("lost the MySQL connection\nsecond line", "retrying")


def test_the_transient_flag_of_an_instance_is_kept():
    original = SourceError("flaky", hint="h")
    original.transient = True
    assert recover(_worker_text(original)).transient is True


def test_config_error_and_unknown_classes_rebuild():
    assert recover(_worker_text(ConfigError("bad", hint="fix it"))).diagnostics == []
    text = 'x replicator-error-payload:{"class": "NoSuchError", "message": "m", "hint": "h"} y'
    back = recover(text)
    assert type(back) is EngineError and (back.message, back.hint) == ("m", "h")


def test_text_without_a_payload_is_a_generic_error_naming_debug():
    assert recover("java.lang.OutOfMemoryError: heap") is None
    error = driver_error(RuntimeError("java.lang.OutOfMemoryError: heap\n\tat x"), doing="copying t")
    assert type(error) is EngineError and error.message == "copying t failed: java.lang.OutOfMemoryError: heap"
    assert "--debug" in (error.hint or "")


def test_the_decorator_carries_from_functions_and_generators():
    @carried
    def call() -> None:
        raise SourceError("from a call", hint="h1")

    @carried
    def generate():
        yield 1
        raise SourceError("from a generator", hint="h2")

    with pytest.raises(SourceError) as raised:
        call()
    assert recover("".join(traceback.format_exception(raised.value))).hint == "h1"
    with pytest.raises(SourceError) as raised:
        list(generate())
    assert recover("".join(traceback.format_exception(raised.value))).hint == "h2"
