"""Carrying a ``ReplicatorError`` across Spark's executor boundary, and back.

Python code that Spark runs in a worker process (snapshot chunk reads, the binlog data
source's ``read`` and planner) can only hand an exception to the driver as *text*: PySpark
formats the worker's traceback into the JVM's error, which the driver gets as a
``PythonException`` or ``StreamingQueryException``. The class, the hint and the transient flag
are lost on the way, and the text is a Java stack with a Python traceback inside.

So the worker side attaches the error as one line to the exception's notes (PEP 678; the
traceback text PySpark sends includes notes): ``MARKER`` + JSON of class, message, hint and
transient. The exception itself is re-raised unchanged, so code called outside Spark sees the
same error as before. The driver side (``recover``) finds the line in any failure's text and
rebuilds the error: same class, message, hint and transient flag.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import replicator.errors as errors
from replicator.engine.job.session import spark_context
from replicator.errors import EngineError, ReplicatorError

MARKER = "replicator-error-payload:"
P = ParamSpec("P")
R = TypeVar("R")


def payload(error: ReplicatorError) -> str:
    """The one-line note that carries ``error``."""
    return MARKER + json.dumps({
        "class": type(error).__name__,
        "message": error.message,
        "hint": error.hint,
        "transient": bool(error.transient),
    })


@contextlib.contextmanager
def carry_errors() -> Iterator[None]:
    """Worker side: wrap code whose ReplicatorError must reach the driver intact."""
    try:
        yield
    except ReplicatorError as error:
        note = payload(error)
        if note not in getattr(error, "__notes__", ()):
            error.add_note(note)
        raise


def recover(text: str) -> ReplicatorError | None:
    """Driver side: the ReplicatorError carried in a failure's text, or None."""
    decoder = json.JSONDecoder()
    start = text.find(MARKER)
    while start >= 0:
        try:
            data, _ = decoder.raw_decode(text, start + len(MARKER))
            return _rebuild(data)
        except (ValueError, KeyError, TypeError):
            start = text.find(MARKER, start + len(MARKER))
    return None


def _rebuild(data: dict[str, object]) -> ReplicatorError:
    kind = getattr(errors, str(data["class"]), None)
    if not (isinstance(kind, type) and issubclass(kind, ReplicatorError)):
        kind = EngineError  # a class this driver does not know (another version): keep the text
    message = str(data["message"])
    hint = data.get("hint")
    error = kind.__new__(kind)
    ReplicatorError.__init__(error, message, None if hint is None else str(hint))
    if isinstance(error, errors.ConfigError):
        error.diagnostics = []
    transient = bool(data.get("transient"))
    if transient != kind.transient:
        error.transient = transient
    return error


def driver_error(failure: BaseException, *, doing: str) -> ReplicatorError:
    """The user-facing error behind a failure Spark raised on the driver."""
    if isinstance(failure, ReplicatorError):
        return failure
    text = str(failure)
    carried = recover(text)
    if carried is not None:
        return carried
    first = text.strip().splitlines()[0][:500] if text.strip() else type(failure).__name__
    return EngineError(
        f"{doing} failed: {first}",
        hint="run again with --debug for the full Spark error; the run resumes from the last "
        "applied batch (or snapshot chunk)",
    )


def carried(function: Callable[P, R]) -> Callable[P, R]:
    """``carry_errors`` as a decorator, for worker-side methods (generators included)."""
    if inspect.isgeneratorfunction(function):
        @functools.wraps(function)
        def generate(*args: P.args, **kwargs: P.kwargs) -> Any:
            with carry_errors():
                yield from function(*args, **kwargs)

        return generate

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        with carry_errors():
            return function(*args, **kwargs)

    return call


# The loggers through which Spark reports a failed task or job, each with the full Java stack
# (and the Python traceback inside it). The run raises that same failure as one
# ReplicatorError, so they only repeat it; ``--debug`` keeps them.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
)


def quiet_task_failures(spark: Any) -> None:
    """Silence Spark's own report of task and job failures (log4j2, at runtime)."""
    jvm = getattr(spark_context(spark), "_jvm", None)
    if jvm is None:  # Spark Connect: no JVM here, the server logs on its side
        return
    with contextlib.suppress(Exception):  # only logging: never fail a run over it
        log4j = jvm.org.apache.logging.log4j
        for name in TASK_FAILURE_LOGGERS:
            log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
