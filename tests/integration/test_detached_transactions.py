"""A run killed mid-batch leaves its Snowflake transaction open ("detached"), holding its
locks; the next run must not wait behind it.

Against fakesnow's server through the real connector: its sessions have ids, a killed
client's open transaction stays open, SHOW TRANSACTIONS lists it and
SYSTEM$ABORT_TRANSACTION ends it, and a write it blocks fails with Snowflake's lock error
(000625) at once (``tests.fixtures.fakesnow_server``). Without the abort, each test below
fails on that error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from replicator.engine.state.lease import holder_session, take_lease
from replicator.model.pipeline import SnowflakeTarget
from replicator.plan import build_plan
from replicator.plan.dialects import SNOWFLAKE
from replicator.plan.statements import bookkeeping, names
from replicator.sink.snowflake import SnowflakeSink
from tests.fixtures.row_transforms import stage_events
from tests.fixtures.sink_sample import CATALOG, sample_pipeline, scenario

pytestmark = pytest.mark.usefixtures("fakesnow_server")


def _pipeline(server: Any, database: str, **target: Any) -> Any:
    with server.connect("", "") as bootstrap:
        bootstrap.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {database}")
        bootstrap.cursor().execute(f"CREATE SCHEMA IF NOT EXISTS {database}.RAW")
    pipeline = sample_pipeline("snowflake")
    warehouse = SnowflakeTarget(database=database, schema="RAW", **target)
    return dataclasses.replace(pipeline, target=dataclasses.replace(pipeline.target,
                                                                    warehouse=warehouse))


def _sink(server: Any, database: str, pipeline: Any, plan: Any) -> SnowflakeSink:
    connection = server.connect(database, "RAW", paramstyle="qmark", autocommit=False)
    return SnowflakeSink(pipeline, plan, connection=connection)


def _batch(plan: Any, number: int) -> tuple[Any, int, Any]:
    table = plan.table("shop.regions")
    batch_id, by_table = scenario()[0][number]
    return table, batch_id, stage_events(table, by_table["shop.regions"])


def test_the_next_run_aborts_what_the_killed_run_left_open_and_applies_at_once(
        fakesnow_server, fakesnow_database, monkeypatch):
    monkeypatch.setenv("REPLICATOR_SINK_RETRY_DELAYS", "")  # a lock error fails at once
    pipeline = _pipeline(fakesnow_server, fakesnow_database, account="fake", user="u",
                         password="p")
    plan = build_plan(pipeline, CATALOG)
    killed = _sink(fakesnow_server, fakesnow_database, pipeline, plan)
    killed.prepare()
    lease = take_lease(killed, pipeline.name)
    assert holder_session(lease.holder) == killed.session_id() is not None

    # The killed run's last batch, cut after its writes and before COMMIT: staging cleared,
    # the lease row fenced. The process is gone; its session and transaction are not.
    table, batch_id, staged = _batch(plan, 0)
    cursor = killed.connection.cursor()
    cursor.execute(f"DELETE FROM {names.staging_name(table, SNOWFLAKE)}")
    cursor.execute(bookkeeping.lease_renew(table, SNOWFLAKE), [pipeline.name, lease.generation])
    open_transactions = [row for row in _show_transactions(fakesnow_server, fakesnow_database)
                         if str(row[2]) == killed.session_id()]
    assert len(open_transactions) == 1

    restarted = _sink(fakesnow_server, fakesnow_database, pipeline, plan)
    aborted_before = len(fakesnow_server.sessions.aborted)
    notices: list[str] = []
    taken = take_lease(restarted, pipeline.name, notice=notices.append)
    assert taken.generation == lease.generation + 1
    assert fakesnow_server.sessions.aborted[aborted_before:] == [int(open_transactions[0][0])]
    assert any(f"left open in warehouse session {killed.session_id()}" in n for n in notices)
    assert not restarted.apply(table, batch_id, {"file": "f", "pos": 1}, staged).skipped
    assert restarted.last_applied(table)["batch_id"] == batch_id
    taken.release()
    restarted.close()


def _show_transactions(server: Any, database: str) -> list[tuple[Any, ...]]:
    with server.connect(database, "RAW") as reader:
        return reader.cursor().execute("SHOW TRANSACTIONS").fetchall()


def _records_the_batch(sql: str) -> bool:
    return sql.startswith("INSERT INTO") and '_REPLICATOR_STATE"' in sql


class _Unreachable:
    """The run's first connection, once the network to it is gone: every call fails as the
    connector fails then, and so does closing it (the session lives on in Snowflake)."""

    def __init__(self, inner: Any, fail_on: Any) -> None:
        self.inner, self.fail_on, self.down = inner, fail_on, False

    def cursor(self) -> Any:
        outer = self

        class Cursor:
            def __init__(self, cursor: Any) -> None:
                self._cursor = cursor

            def execute(self, sql: str, *args: Any) -> Any:
                outer.down = outer.down or outer.fail_on(sql)
                if outer.down:
                    from snowflake.connector.errors import OperationalError

                    raise OperationalError(msg="could not reach the server", errno=251012)
                return self._cursor.execute(sql, *args)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._cursor, name)

        return Cursor(self.inner.cursor())

    def close(self) -> None:
        if self.down:
            from snowflake.connector.errors import OperationalError

            raise OperationalError(msg="could not reach the server", errno=251012)
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_batch_retried_on_a_new_session_aborts_the_lost_sessions_transaction(
        fakesnow_server, fakesnow_database, monkeypatch):
    """The network to the run's session goes after the MERGE, before the state row: the sink
    opens a new session for the retry, ends the old one's open transaction (whose locks the
    retry needs) and names the new session in the lease."""
    import snowflake.connector

    pipeline = _pipeline(fakesnow_server, fakesnow_database, account="fake", user="u",
                         password="p")
    plan = build_plan(pipeline, CATALOG)
    real_connect = snowflake.connector.connect
    opened: list[Any] = []

    def connect(**parameters: Any) -> Any:  # the sink's own parameters, this server's address
        connection = real_connect(**{**parameters, **fakesnow_server.settings(
            fakesnow_database, "RAW")})
        opened.append(_Unreachable(connection, _records_the_batch) if not opened else connection)
        return opened[-1]

    monkeypatch.setattr(snowflake.connector, "connect", connect)
    sink = SnowflakeSink(pipeline, plan)
    sink.retry_delays, sink.sleep = (0.0,), lambda seconds: None
    sink.prepare()
    lease = take_lease(sink, pipeline.name)
    aborted_before = len(fakesnow_server.sessions.aborted)
    first_session = sink.session_id()
    table, batch_id, staged = _batch(plan, 0)
    assert not sink.apply(table, batch_id, {"file": "f", "pos": 1}, staged).skipped

    assert len(opened) == 2 and sink.session_id() != first_session
    assert [t - fakesnow_server.sessions.TRANSACTION_BASE
            for t in fakesnow_server.sessions.aborted[aborted_before:]] == [int(first_session)]
    assert sink.last_applied(table)["batch_id"] == batch_id
    row = sink.lease_statement("read", [pipeline.name])
    assert holder_session(row[1]) == sink.session_id()
    lease.release()
    sink.close()


def test_the_sink_a_replan_opens_is_fenced_and_named_in_the_lease(
        fakesnow_server, fakesnow_database):
    """A DDL re-plan opens a new sink (a new session) mid-run: it applies under the run's
    lease, and the lease names its session from then on, so a kill during its batch leaves
    the next run the right session to clean up (``Lease.fence``)."""
    pipeline = _pipeline(fakesnow_server, fakesnow_database)
    plan = build_plan(pipeline, CATALOG)
    first = _sink(fakesnow_server, fakesnow_database, pipeline, plan)
    first.prepare()
    lease = take_lease(first, pipeline.name)
    replanned = lease.fence(_sink(fakesnow_server, fakesnow_database, pipeline, plan))

    assert replanned.generation == lease.generation
    row = replanned.lease_statement("read", [pipeline.name])
    assert holder_session(row[1]) == replanned.session_id() != first.session_id()
    table, batch_id, staged = _batch(plan, 0)
    assert not replanned.apply(table, batch_id, {"file": "f", "pos": 1}, staged).skipped
    assert replanned.last_applied(table)["batch_id"] == batch_id
    lease.release()
    replanned.close()
    first.close()
