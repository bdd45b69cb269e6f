"""The lease's holder names the run (host/pid) and, on Snowflake, its session."""

from __future__ import annotations

import os
import socket

from replicator.engine.lease import describe, holder_name, holder_session


def test_a_holder_names_its_session_and_reads_back():
    assert holder_name() == f"{socket.gethostname()}/pid {os.getpid()}"
    named = holder_name("4711")
    assert named == f"{socket.gethostname()}/pid {os.getpid()} session 4711"
    assert holder_session(named) == "4711"
    assert holder_session(holder_name()) is None
    assert holder_session("db-2/pid 7") is None  # a lease taken before sessions were named
    assert holder_session("") is None


def test_a_holder_with_a_session_is_still_this_process_or_a_dead_one():
    """The session does not hide the pid: a lease of this very process (an earlier run in
    it) is free, one of another host is held."""
    row = (3, holder_name("4711"), "2026-11-27", 0, 0)
    assert describe(row)["held"] is False
    elsewhere = (3, "elsewhere/pid 1 session 9", "2026-11-27", 0, 0)
    assert describe(elsewhere)["held"] is True
