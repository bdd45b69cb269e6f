"""The lease's holder names the run (host/pid) and, on Snowflake, its session."""

from __future__ import annotations

import os
import socket

from replicator.engine.state.lease import describe, holder_name, holder_session


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


class _Sink:
    """The lease's side of a sink: a lease last held by this very process (an earlier run in
    it) in warehouse session 77; aborting what that session left open fails."""

    def __init__(self, abort) -> None:
        import datetime as dt

        now = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
        self.row = (3, holder_name("77"), now, now, now)
        self.abort, self.taken = abort, []

    def session_id(self):
        return "88"

    def lease_statement(self, name, params):
        if name == "read":
            return self.row
        self.taken.append((name, params))
        return 1

    def abort_transactions_of(self, session):
        return self.abort(session)


def test_taking_a_lease_aborts_the_old_sessions_transactions_and_goes_on_if_it_cannot():
    from replicator.engine.state.lease import take_lease
    from replicator.errors import SinkError

    asked, notices = [], []
    sink = _Sink(lambda session: asked.append(session) or ["1000077"])
    lease = take_lease(sink, "p", notice=notices.append)
    assert asked == ["77"] and lease.generation == 4
    assert sink.taken == [("take", [holder_name("88"), "p", 3])]
    assert "aborted 1 transaction(s) (1000077)" in notices[0]

    def refused(session):
        raise SinkError("Snowflake failed to abort the transactions of session 77: denied")

    notices.clear()
    sink = _Sink(refused)
    assert take_lease(sink, "p", notice=notices.append).generation == 4  # taken all the same
    assert "could not abort" in notices[0] and "five idle minutes" in notices[0]
