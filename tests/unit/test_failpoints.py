"""Failpoints parse strictly and fire once (replicator.engine.failpoints)."""

from __future__ import annotations

import pytest

from replicator.engine import failpoints


def test_parse_reads_each_named_sleep():
    assert failpoints._parse("a.b=sleep(30); c = sleep( 0.5 )") == {"a.b": 30.0, "c": 0.5}
    assert failpoints._parse("") == {}


@pytest.mark.parametrize("text", ["a.b", "a=crash", "a=sleep()", "a=sleep(x)"])
def test_parse_refuses_anything_else(text):
    with pytest.raises(ValueError, match="REPLICATOR_FAILPOINTS"):
        failpoints._parse(text)


def test_an_armed_failpoint_fires_once_and_says_so(monkeypatch, capsys):
    slept: list[float] = []
    monkeypatch.setattr(failpoints, "_ARMED", {"here": 2.0})
    monkeypatch.setattr(failpoints.time, "sleep", slept.append)
    failpoints.reached("elsewhere")
    failpoints.reached("here")
    failpoints.reached("here")
    assert slept == [2.0]
    assert capsys.readouterr().err == "failpoint here: sleeping 2 s\n"
