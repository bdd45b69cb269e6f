"""A transient warehouse failure at EACH statement of a batch program, on DuckDB and on the
Snowflake connector over fakesnow: the sink rolls back, waits its (configurable) retry delay
and runs the program again with the same batch id, and the batch lands exactly once.

The failure is the driver's own transient error (duckdb.IOException, the connector's
OperationalError), raised by a wrapper around the real connection either instead of the
statement or right after it ran (the response lost: for the final COMMIT this means the batch
IS committed, and the retry's lookup must find it and skip). A changelog table proves
exactly-once: every applied batch appends its rows, so a batch applied twice shows."""

from __future__ import annotations

from typing import Any

import pytest

from replicator.errors import SinkError
from replicator.plan import build_plan, offline_catalog
from replicator.plan import program as programs
from replicator.plan.program import BatchKey
from replicator.sink.duckdb import DuckDBSink
from replicator.sink.session import RETRY_DELAYS_S, retry_delays
from replicator.sink.snowflake import SnowflakeSink
from tests.fixtures.row_transforms import stage_events
from tests.fixtures.sink_sample import sample_events
from tests.integration.test_sink_program import count, modes_pipeline

pytestmark = pytest.mark.slow  # ~70 s: every statement of every mode, twice, on two targets


class _Injector:
    """Fails the ``at``-th statement executed after ``arm`` (0-based), once."""

    def __init__(self, error: Any) -> None:
        self.error, self.at, self.after, self.seen, self.fired = error, None, False, 0, 0

    def arm(self, at: int, *, after: bool) -> None:
        self.at, self.after, self.seen = at, after, 0

    def execute(self, inner: Any, sql: str, params: Any) -> None:
        hit = self.at is not None and self.seen == self.at
        self.seen += 1
        if hit and not self.after:
            self.at, self.fired = None, self.fired + 1
            raise self.error()
        if params is None:
            inner.execute(sql)
        else:
            inner.execute(sql, params)
        if hit:
            self.at, self.fired = None, self.fired + 1
            raise self.error()


class _Cursor:
    def __init__(self, inner: Any, injector: _Injector) -> None:
        self._inner, self._injector = inner, injector

    def execute(self, sql: str, params: Any = None) -> _Cursor:
        self._injector.execute(self._inner, sql, params)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Connection:
    def __init__(self, inner: Any, injector: _Injector) -> None:
        self.inner, self._injector = inner, injector

    def cursor(self) -> _Cursor:
        return _Cursor(self.inner.cursor(), self._injector)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(params=["duckdb", "snowflake"])
def failing(request, tmp_path):
    """(dialect, warehouse, sink_for(pipeline, plan, injector), transient driver error)"""
    if request.param == "duckdb":
        import duckdb

        from replicator.model.pipeline import DuckDBTarget
        from replicator.plan import DUCKDB

        path = str(tmp_path / "w.duckdb")

        def sink_for(pipeline, plan, injector):
            return DuckDBSink(pipeline, plan,
                              connection=_Connection(duckdb.connect(path), injector))

        yield DUCKDB, DuckDBTarget(path=path, schema="RAW"), sink_for, \
            lambda: duckdb.IOException("injected: connection to the disk lost")
        return
    fakesnow = pytest.importorskip("fakesnow")
    from bench.fakesnow_run import merge_keeps_transaction

    merge_keeps_transaction()  # as Snowflake's, a MERGE does not commit its transaction
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        import snowflake.connector
        from snowflake.connector import errors

        from replicator.model.pipeline import SnowflakeTarget
        from replicator.plan import SNOWFLAKE

        def sink_for(pipeline, plan, injector):
            connection = snowflake.connector.connect(
                account="fake", user="fake", password="fake", database="ANALYTICS",
                schema="RAW", paramstyle="qmark", autocommit=False)
            return SnowflakeSink(pipeline, plan, connection=_Connection(connection, injector))

        yield SNOWFLAKE, SnowflakeTarget(database="ANALYTICS", schema="RAW", account="fake",
                                         user="fake", password="fake"), sink_for, \
            lambda: errors.OperationalError(msg="injected: connection reset by peer",
                                            errno=250003)


def test_a_transient_failure_at_each_statement_lands_the_batch_once(failing):
    dialect, warehouse, sink_for, error = failing
    pipeline = modes_pipeline(warehouse)
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    injector = _Injector(error)
    sink = sink_for(pipeline, plan, injector)
    slept: list[float] = []
    notices: list[str] = []
    sink.retry_delays = (0.25, 0.5)
    sink.sleep = slept.append  # the delays are asked for, not slept
    sink.on_retry = notices.append
    try:
        sink.prepare()
        for table in plan.tables:
            source = catalog.table(table.source_database, table.source_table)
            staged = stage_events(table, sample_events(table, source))
            # Batch 1: no failure; its rows are what each later batch adds (changelog) or
            # leaves as they are (merge, scd2: the same changes converge).
            assert not sink.apply(table, 1, {"pos": 1}, iter([staged])).skipped
            first = count(sink, table, dialect)
            assert first > 0, table.label  # else exactly-once below would prove nothing
            statements = len(programs.batch_program(
                table, dialect, BatchKey(pipeline.name, table.target_table, 1, {"pos": 1}),
                ["f.parquet"], "folder"))
            batch = 1
            for at in range(statements):
                for after in (False, True):
                    batch += 1
                    injector.arm(at, after=after)
                    fired, retried = injector.fired, len(notices)
                    result = sink.apply(table, batch, {"pos": batch}, iter([staged]))
                    where = f"{table.label}: statement {at} ({'after' if after else 'instead'})"
                    assert injector.fired == fired + 1, where
                    assert len(notices) == retried + 1 and f"batch {batch} again" in notices[-1]
                    # Only a failure after the final COMMIT leaves the batch committed: the
                    # retry finds it and skips.
                    assert result.skipped == (after and at == statements - 1), where
                    expected = first * batch if table.mode == "changelog" else first
                    assert count(sink, table, dialect) == expected, where
                    assert sink.last_applied(table)["batch_id"] == batch, where
        assert slept and set(slept) == {0.25}
    finally:
        sink.close()


def test_a_transient_failure_at_each_statement_of_an_atomic_batch_lands_it_once(failing):
    """target.atomic: the whole transaction of all tables again, with the same batch id."""
    from replicator.sink.protocol import TableBatch

    dialect, warehouse, sink_for, error = failing
    pipeline = modes_pipeline(warehouse)
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    tables = list(plan.tables)
    staged = [stage_events(t, sample_events(t, catalog.table(t.source_database,
                                                               t.source_table))) for t in tables]
    injector = _Injector(error)
    sink = sink_for(pipeline, plan, injector)
    notices: list[str] = []
    sink.retry_delays, sink.sleep, sink.on_retry = (0.25,), (lambda _: None), notices.append

    def apply(batch):
        return sink.apply_atomic([TableBatch(t, iter([s])) for t, s in zip(tables, staged, strict=True)],
                                 batch, {"pos": batch})

    try:
        sink.prepare()
        assert not any(r.skipped for r in apply(1))
        first = [count(sink, t, dialect) for t in tables]
        assert all(first), first  # else exactly-once below would prove nothing
        statements = len(programs.atomic_program(
            [programs.AtomicPart(t, BatchKey(pipeline.name, t.target_table, 1, {"pos": 1}),
                                 ["f.parquet"], "folder") for t in tables], dialect))
        batch = 1
        for at in range(statements):
            for after in (False, True):
                batch += 1
                injector.arm(at, after=after)
                fired, retried = injector.fired, len(notices)
                results = apply(batch)
                where = f"statement {at} ({'after' if after else 'instead'})"
                assert injector.fired == fired + 1, where
                assert len(notices) == retried + 1 and f"batch {batch} again" in notices[-1]
                # Only a failure after the one COMMIT leaves the batch committed: the retry
                # finds every table's state row and skips.
                last = after and at == statements - 1
                assert [r.skipped for r in results] == [last] * len(tables), where
                assert [count(sink, t, dialect) for t in tables] == [
                    f * batch if t.mode == "changelog" else f
                    for t, f in zip(tables, first, strict=True)], where
                assert all(sink.last_applied(t)["batch_id"] == batch for t in tables), where
    finally:
        sink.close()


def test_a_failure_that_persists_ends_after_the_delays_with_nothing_applied(failing):
    dialect, warehouse, sink_for, error = failing
    pipeline = modes_pipeline(warehouse)
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    table = next(t for t in plan.tables if t.mode == "changelog")
    source = catalog.table(table.source_database, table.source_table)
    staged = stage_events(table, sample_events(table, source))

    class _Always(_Injector):
        def execute(self, inner, sql, params):
            if "MERGE" in sql.upper() or ("INSERT INTO" in sql.upper() and "STATE" in sql.upper()):
                self.fired += 1
                raise self.error()
            super().execute(inner, sql, params)

    injector = _Always(error)
    sink = sink_for(pipeline, plan, injector)
    slept: list[float] = []
    sink.retry_delays, sink.sleep = (0.0, 1.5, 3.0), slept.append
    try:
        sink.prepare()
        with pytest.raises(SinkError) as excinfo:
            sink.apply(table, 1, {"pos": 1}, iter([staged]))
        assert excinfo.value.transient  # the engine restarts with backoff from here
        assert "injected" in excinfo.value.message and "apply batch 1" in excinfo.value.message
        assert slept == [0.0, 1.5, 3.0] and injector.fired == 4
        assert count(sink, table, dialect) == 0 and sink.last_applied(table) is None
    finally:
        sink.close()


def test_retry_delays_come_from_the_environment():
    assert retry_delays({}) == RETRY_DELAYS_S
    assert retry_delays({"REPLICATOR_SINK_RETRY_DELAYS": "0, 0.5,2"}) == (0.0, 0.5, 2.0)
    assert retry_delays({"REPLICATOR_SINK_RETRY_DELAYS": ""}) == ()
    with pytest.raises(SinkError, match="not a list of seconds"):
        retry_delays({"REPLICATOR_SINK_RETRY_DELAYS": "1s"})

