"""Shared test settings.

Fixtures that start real components live in ``tests/fixtures/``: the throwaway MariaDB
(``mariadb.py``) and the local Spark session (``spark.py``). Unit tests use neither.
"""

import importlib.util
import os
import sys

import pytest

# Tests must not depend on the developer's terminal.
os.environ.setdefault("NO_COLOR", "1")
# The suite starts ~100 short-lived JVMs (each `replicator run` subprocess, the cluster, the
# bench smoke run). The C1 compiler alone starts them ~3 s (~20%) faster; the peak speed that
# C2 buys never pays off in a test's few seconds. Users' runs keep the JVM's defaults.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")

pytest_plugins = [
    name
    for name in ("tests.fixtures.mariadb", "tests.fixtures.spark", "tests.fixtures.spark_cluster",
                 "tests.fixtures.fakesnow_server", "tests.fixtures.s3_landing")
    if importlib.util.find_spec(name) is not None
]


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/<pipeline>/<dialect>/<table>.sql from the current plans",
    )


def pytest_configure(config):
    """fakesnow 0.12.1 lacks Snowflake's MD5_NUMBER_LOWER64, which verify's range checksums
    call: every fakesnow of the session (in-process or its server) gets it, in the emulator
    only (``bench.fakesnow_run.md5_number_lower64``)."""
    if importlib.util.find_spec("fakesnow") is not None:
        from bench.fakesnow_run import md5_number_lower64

        md5_number_lower64()


def pytest_sessionfinish(session, exitstatus):
    session.config._replicator_exitstatus = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Leave without interpreter finalisation once pytest has reported.

    duckdb's nanobind bindings print hundreds of "leaked instance" lines when the interpreter
    tears down with a connection still referenced (Spark's py4j threads keep some alive);
    they land after pytest's summary and bury the line CI reads. Fixtures have already
    stopped MariaDB and Spark by now, so nothing is lost by skipping the teardown.
    """
    status = getattr(config, "_replicator_exitstatus", None)
    if status is None or os.environ.get("REPLICATOR_TEST_NORMAL_EXIT"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
