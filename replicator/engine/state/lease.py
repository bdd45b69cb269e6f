"""The pipeline's lease in the target: one run applies batches, wherever it runs.

The local run lock (``CheckpointDir.lock``) stops a second run on the same machine only; two
hosts (a scheduler retry, a blue/green deploy) could both apply the same batch into
Snowflake, whose state table does not enforce its key. So a run takes a lease row in the
target (``<state table>_LEASE``: pipeline, generation, holder host/pid, since, renewed_at)
and every batch transaction updates that row *where the generation is still its own*, last
before COMMIT (the "fence" statement of ``plan.program.batch_tail``): once another run has taken the lease (generation + 1),
the old run's next batch updates no row, rolls back and the run stops (``LeaseError``, exit
3). The UPDATE also orders a take-over after a batch in flight (both update one row).

A lease is free when released (a run that ends clears its holder), when its holder is a
process of this host that is gone (kill -9, then a restart here), when not renewed for
``LEASE_TIMEOUT_S`` (a host that died: runs renew every ``RENEW_EVERY_S`` and at every
batch), or with ``replicator run --take-over``.

The holder also names the warehouse session the run applies batches on (``host/pid N session
S``; Snowflake only), kept current when the run opens another one (``Lease.fence``, and the
sink after a lost connection). A run killed mid-batch leaves that session's transaction open
in Snowflake, holding its locks ("detached"): the next run's first write would wait for
it until Snowflake gives up on it (five idle minutes, by its documented rule). Taking a free
lease therefore aborts the transactions still open in the old holder's session first.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from replicator.errors import LeaseError, SinkError

LEASE_TIMEOUT_S = 300.0
RENEW_EVERY_S = 60.0
TAKE_ATTEMPTS = 3


_SESSION = " session "


def holder_name(session: str | None = None) -> str:
    """This run as the lease names it: host/pid, and the warehouse session when there is one."""
    return _with_session(f"{socket.gethostname()}/pid {os.getpid()}", session)


def _with_session(run: str, session: str | None) -> str:
    return f"{run}{_SESSION}{session}" if session else run


def holder_session(held_by: str) -> str | None:
    """The warehouse session a holder named (None: none, or a run from before sessions were
    named)."""
    _, found, session = held_by.partition(_SESSION)
    return session.strip() or None if found else None


def _dead_here(held_by: str) -> bool:
    """The holder is a process of this host that no longer runs (a run killed with -9 here,
    restarted here), or this very process (an earlier run in it): its lease is free."""
    host, _, pid = held_by.partition(_SESSION)[0].rpartition("/pid ")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def _seconds_between(earlier: Any, later: Any) -> float:
    if isinstance(earlier, dt.datetime) and isinstance(later, dt.datetime):
        if (earlier.tzinfo is None) != (later.tzinfo is None):
            earlier, later = earlier.replace(tzinfo=None), later.replace(tzinfo=None)
        return (later - earlier).total_seconds()
    return 0.0


def describe(row: Any, *, timeout_s: float | None = None) -> dict[str, Any] | None:
    """The lease row as ``status`` shows it (None: no run ever took one). ``held``: a run
    holds it now (the same rule ``take_lease`` applies: not released, renewed within the
    timeout, and not a process of this host that is gone)."""
    if row is None:
        return None
    timeout_s = LEASE_TIMEOUT_S if timeout_s is None else timeout_s
    generation, held_by, since, renewed_at, now = row
    idle = _seconds_between(renewed_at, now)
    return {
        "holder": str(held_by) if held_by else None,
        "generation": int(generation),
        "since": str(since) if since is not None else None,
        "renewed_s_ago": round(idle, 1),
        "held": bool(held_by) and idle < timeout_s and not _dead_here(str(held_by)),
    }


class Lease:
    def __init__(self, sink: Any, pipeline_name: str, generation: int, holder: str) -> None:
        self.sink = sink
        self.pipeline_name = pipeline_name
        self.generation = generation
        self.holder = holder
        self._renewed = time.monotonic()

    def fence(self, sink: Any) -> Any:
        """``sink`` checks this lease in every batch transaction (sinks opened later too), and
        the lease names its session from now on: a run killed while this sink's transaction
        was open leaves the next run the session to clean up (``take_lease``)."""
        sink.generation = self.generation
        sink.lease_holder = functools.partial(_with_session, self.holder.partition(_SESSION)[0])
        if sink is not self.sink:
            sink.claim_lease()
        return sink

    def renew_if_due(self) -> None:
        """Between batches: LeaseError when another run took the lease."""
        if time.monotonic() - self._renewed < RENEW_EVERY_S:
            return
        if self.sink.lease_statement("renew", [self.pipeline_name, self.generation]) != 1:
            raise LeaseError(
                f"pipeline {self.pipeline_name}: another run took the lease over "
                f"(generation {self.generation} is no longer current)",
                hint="this run stops; `replicator status PIPELINE.yaml` names the holder")
        self._renewed = time.monotonic()

    def release(self) -> None:
        """Give the lease up, then let go of the sink: Spark's callback server keeps the
        applier, and through its ``open_sink`` this lease, alive until the JVM stops; a sink
        still referenced at exit makes DuckDB print ~50 "nanobind: leaked" lines."""
        with contextlib.suppress(Exception):  # a lost session: the timeout frees it
            self.sink.lease_statement("release", [self.pipeline_name, self.generation])
        self.sink = None


def take_lease(sink: Any, pipeline_name: str, *, take_over: bool = False,
               timeout_s: float = LEASE_TIMEOUT_S, holder: str | None = None,
               notice: Callable[[str], None] = lambda message: None) -> Lease:
    """The lease for this run, or LeaseError naming the run that holds it and since when.
    ``holder``: this run's name (default host/pid)."""
    holder = holder or holder_name(sink.session_id())
    for _ in range(TAKE_ATTEMPTS):
        row = sink.lease_statement("read", [pipeline_name])
        if row is None:
            if sink.lease_statement("insert", [pipeline_name, holder]) == 1:
                lease = Lease(sink, pipeline_name, 1, holder)
                lease.fence(sink)
                return lease
            continue  # another run inserted it first: read it again
        generation, held_by, since, renewed_at, now = row
        idle = _seconds_between(renewed_at, now)
        if held_by and not take_over and idle < timeout_s and not _dead_here(str(held_by)):
            raise LeaseError(
                f"pipeline {pipeline_name} is running elsewhere: {held_by} holds its lease "
                f"since {since} (generation {generation}, renewed {idle:.0f} s ago)",
                hint=f"stop that run first; if its host is gone the lease is free "
                f"{max(0.0, timeout_s - idle):.0f} s from now (after {timeout_s:.0f} s without "
                "renewal), or take it at once with `replicator run PIPELINE.yaml --take-over` "
                "(that run's next batch then rolls back and it stops)")
        _abort_detached(sink, str(held_by or ""), notice)
        if sink.lease_statement("take", [holder, pipeline_name, generation]) == 1:
            if held_by:
                notice(f"took the lease of pipeline {pipeline_name} over from {held_by} "
                       f"(renewed {idle:.0f} s ago); its batches are fenced from now on")
            lease = Lease(sink, pipeline_name, int(generation) + 1, holder)
            lease.fence(sink)
            return lease
    raise LeaseError(f"pipeline {pipeline_name}: other runs keep taking the lease",
                     hint="run one process per pipeline")


def _abort_detached(sink: Any, held_by: str, notice: Callable[[str], None]) -> None:
    """Abort the transactions a run that lost the lease left open in its session (a kill -9
    mid-batch): their locks would hold this run's first writes. Uncommitted, so nothing of
    them was applied; this run replays their batch under the same id."""
    session = holder_session(held_by)
    if session is None or session == sink.session_id():
        return
    try:
        aborted = sink.abort_transactions_of(session)
    except SinkError as error:  # best effort: Snowflake ends them itself in time
        notice(f"could not abort what {held_by.partition(_SESSION)[0]} left open in "
               f"warehouse session {session} ({error.message}); this run's first write may "
               "wait until Snowflake ends it (after about five idle minutes)")
        return
    if aborted:
        notice(f"aborted {len(aborted)} transaction(s) ({', '.join(aborted)}) that "
               f"{held_by.partition(_SESSION)[0]} left open in warehouse session {session}; "
               "their batch is applied again")
