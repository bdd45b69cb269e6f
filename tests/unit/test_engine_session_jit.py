"""A run that ends once caught up starts its local JVM with the C1 compiler alone; a stream,
a cluster master or the user's own JDK_JAVA_OPTIONS keep theirs."""

from __future__ import annotations

import os

import pytest

from replicator.engine.session import BOUNDED_JAVA_OPTIONS, prepare_environment


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
