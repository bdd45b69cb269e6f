"""How a run's Spark session starts (``engine.job.session``): a run that ends once caught up starts
its local JVM with the C1 compiler alone (a stream, a cluster master or the user's own
JDK_JAVA_OPTIONS keep theirs); ``SessionStart`` starts Spark in a thread while the driver's
start-up goes on, with the environment the JVM must inherit, and its failure reaches the
caller unchanged; without Spark SQL (``sql=False``) the context is ready alone, and a session
is built on it only when asked."""

from __future__ import annotations

import os
import threading

import pytest

from replicator.engine.job import python_workers, session
from replicator.engine.job.session import BOUNDED_JAVA_OPTIONS, prepare_environment


@pytest.fixture
def environ(monkeypatch):
    """prepare_environment writes os.environ: here a copy, so the JVMs other tests of this
    process start are not touched."""
    copy = {k: v for k, v in os.environ.items() if k != "JDK_JAVA_OPTIONS"}
    monkeypatch.setattr(os, "environ", copy)
    return copy


@pytest.mark.parametrize(("master", "bounded", "expected"), [
    ("local[2]", True, BOUNDED_JAVA_OPTIONS),
    ("local[2]", False, None),  # a stream that may run for days keeps the JVM's default
    ("spark://master:7077", True, None),  # spark-submit starts that driver, not this process
])
def test_only_a_bounded_local_run_asks_for_c1(environ, master, bounded, expected):
    prepare_environment(master, bounded=bounded)
    assert environ.get("JDK_JAVA_OPTIONS") == expected


def test_the_users_own_jdk_java_options_win(environ):
    environ["JDK_JAVA_OPTIONS"] = "-Xmx2g"
    prepare_environment("local[1]", bounded=True)
    assert environ["JDK_JAVA_OPTIONS"] == "-Xmx2g"


def test_the_session_starts_beside_the_caller_with_the_jvms_environment(environ, monkeypatch):
    release = threading.Event()
    seen = {}

    def starting(master, settings, app_name, log_level, output):
        seen.update(thread=threading.current_thread().name, master=master,
                    app_name=app_name, java=os.environ.get("JDK_JAVA_OPTIONS"),
                    daemon=settings.get(python_workers.DAEMON_MODULE_KEY), x=settings["spark.x"])
        release.wait(10)
        return "the context"

    def on(context, settings):
        seen.update(session_thread=threading.current_thread().name, on=context)
        return "the session"

    monkeypatch.setattr(session, "_context", starting)
    monkeypatch.setattr(session, "_session", on)
    start = session.SessionStart("local[2]", {"spark.x": "1"}, app_name="replicator-p",
                                 bounded=True)
    # The caller is not held while Spark starts ...
    assert start._thread.is_alive()
    release.set()
    # ... and gets the session once it asks, built in the start's thread.
    assert start.session() == "the session"
    assert seen == {"thread": "replicator-spark-start", "master": "local[2]",
                    "app_name": "replicator-p", "java": session.BOUNDED_JAVA_OPTIONS,
                    "daemon": "replicator.engine.job.python_daemon", "x": "1",
                    "session_thread": "replicator-spark-start", "on": "the context"}


def test_without_sql_the_context_is_ready_first_and_a_session_is_built_once_on_it(
        environ, monkeypatch):
    built = []

    def on(context, settings):
        built.append((threading.current_thread().name, context))
        return f"session {len(built)}"

    monkeypatch.setattr(session, "_context", lambda *args: "the context")
    monkeypatch.setattr(session, "_session", on)
    start = session.SessionStart("local[2]", sql=False)
    assert start.context() == "the context"
    assert built == []  # RDD jobs never pay for Spark SQL
    askers = [threading.Thread(target=start.session) for _ in range(4)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    assert start.session() == "session 1"
    assert len(built) == 1 and built[0][1] == "the context"


def test_a_failed_start_is_raised_where_the_session_is_asked_for(environ, monkeypatch):
    failure = RuntimeError("Java gateway process exited before sending its port number")

    def starting(*args):
        raise failure

    monkeypatch.setattr(session, "_context", starting)
    start = session.SessionStart("local[1]", sql=False)
    for ask in (start.context, start.session):
        with pytest.raises(RuntimeError) as raised:
            ask()
        assert raised.value is failure
