"""Every statement a real sink executes is exactly the program `replicator plan` prints.

A DB-API wrapper around the real driver connection (DuckDB, or the Snowflake connector on
fakesnow) records each ``execute``; the sink runs the setup and batches of every mode (merge
with a log table, changelog, scd2, soft deletes, and the awkward sample tables), loaded from
Arrow slices and from Parquet files, and a replay. The recording must equal
``plan.program``'s statements for that batch, parameters included; the rows the batch left
prove the program did its work.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.model.pipeline import DuckDBTarget, SchemaChangePolicy, SnowflakeTarget
from replicator.plan import DUCKDB, SNOWFLAKE, build_plan, offline_catalog
from replicator.plan import program as programs
from replicator.plan.program import BatchKey
from replicator.plan.statements.names import log_name, target_name
from replicator.sink import open_sink
from replicator.sink.duckdb import DuckDBSink
from replicator.sink.snowflake import SnowflakeSink
from tests.fixtures.row_transforms import stage_events
from tests.fixtures.sink_sample import CATALOG, sample_events, sample_pipeline

ROOT = Path(__file__).resolve().parents[2]


class RecordingCursor:
    def __init__(self, inner: Any, log: list[tuple[str, tuple[Any, ...]]],
                 everything: list[str]) -> None:
        self._inner, self._log, self._everything = inner, log, everything

    def execute(self, sql: str, params: Any = None) -> RecordingCursor:
        self._log.append((sql, tuple(params) if params is not None else ()))
        self._everything.append(sql)
        if params is None:
            self._inner.execute(sql)
        else:
            self._inner.execute(sql, params)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingConnection:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.log: list[tuple[str, tuple[Any, ...]]] = []
        self.everything: list[str] = []  # every statement's text, never taken

    def cursor(self) -> RecordingCursor:
        return RecordingCursor(self.inner.cursor(), self.log, self.everything)

    def take(self) -> list[tuple[str, tuple[Any, ...]]]:
        taken, self.log[:] = list(self.log), []
        return taken

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _assert_the_wire_saw_what_was_recorded(sink_for: Any, recorder: Any) -> None:
    """Through fakesnow's HTTP server, what went over the wire is what the sink recorded
    (the tests' own count reads left out); nothing to compare in-process."""
    server = getattr(sink_for, "server", None)
    if server is not None:
        received = [sql for sql in server.queries if not sql.startswith("SELECT count(*)")]
        assert _without_upload_requests(received) == recorder.everything


def _without_upload_requests(received: list[str]) -> list[str]:
    """The server's log less the connector's own second request of each PUT (it sends the
    statement, then asks again with the bare file name while it uploads the file)."""
    kept: list[str] = []
    for sql in received:
        again = re.match(r"PUT 'file://([^/']+)' ", sql)
        if again and kept and re.match(rf"PUT 'file://\S*/{re.escape(again.group(1))}' ", kept[-1]):
            continue
        kept.append(sql)
    return kept


def as_recorded(statements: list[programs.Statement]) -> list[tuple[str, tuple[Any, ...]]]:
    return [(s.sql, tuple(s.params)) for s in statements]


def loaded_files(dialect, recorded) -> tuple[list[str], str]:
    """The Parquet files (and Snowflake stage folder) a batch loaded, read off its recording:
    the sink names its scratch files, so the expected program is completed with them."""
    if dialect.load_through_stage:
        puts = [re.match(r"PUT 'file://(.*?)' @\S+?/([^/]+)/ ", sql) for sql, _ in recorded]
        found = [m for m in puts if m]
        return [m.group(1) for m in found], (found[0].group(2) if found else "")
    loads = [params for sql, params in recorded if "read_parquet" in sql]
    return (list(loads[0][0]) if loads else []), ""


def modes_pipeline(warehouse: Any):
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml")
    return dataclasses.replace(
        pipeline, target=dataclasses.replace(pipeline.target, warehouse=warehouse))


@pytest.fixture(params=["duckdb", "snowflake", "snowflake-server"])
def target(request, tmp_path):
    """(dialect, open_sink(pipeline, plan) -> sink on a recording connection, count rows)

    ``snowflake-server``: the unmodified connector over HTTP to fakesnow's server, so the PUT
    really uploads the files and the server itself must have received exactly the recorded
    statements (nothing the connector or the sink adds behind the DB-API)."""
    if request.param == "snowflake-server":
        server = request.getfixturevalue("fakesnow_server")
        database = request.getfixturevalue("fakesnow_database")
        with server.connect("", "") as bootstrap:  # the test's own database, as users have it
            bootstrap.cursor().execute(f"CREATE DATABASE {database}")

        def sink_for(pipeline, plan):
            connection = server.connect(database, "RAW", paramstyle="qmark", autocommit=False)
            connection.cursor().execute("CREATE SCHEMA IF NOT EXISTS RAW")
            server.queries.clear()  # from here on: the sink's statements only
            return SnowflakeSink(pipeline, plan, connection=RecordingConnection(connection))

        sink_for.server = server  # type: ignore[attr-defined]
        # another session, as a reader of the warehouse has
        sink_for.reader = lambda sink: server.connect(  # type: ignore[attr-defined]
            database, "RAW", paramstyle="qmark")
        yield SNOWFLAKE, SnowflakeTarget(database=database, schema="RAW", account=server.account,
                                         user=server.user, password=server.password), sink_for
        return
    if request.param == "duckdb":
        import duckdb

        path = str(tmp_path / "w.duckdb")

        def sink_for(pipeline, plan):
            return DuckDBSink(pipeline, plan, connection=RecordingConnection(duckdb.connect(path)))

        # another connection to the database, with a transaction of its own
        sink_for.reader = lambda sink: sink.connection.inner.cursor()  # type: ignore[attr-defined]

        yield DUCKDB, DuckDBTarget(path=path, schema="RAW"), sink_for
        return
    fakesnow = pytest.importorskip("fakesnow")
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        import snowflake.connector

        def sink_for(pipeline, plan):
            connection = snowflake.connector.connect(
                account="fake", user="fake", password="fake", database="ANALYTICS",
                schema="RAW", paramstyle="qmark", autocommit=False)
            return SnowflakeSink(pipeline, plan, connection=RecordingConnection(connection))

        yield SNOWFLAKE, SnowflakeTarget(database="ANALYTICS", schema="RAW", account="fake",
                                         user="fake", password="fake"), sink_for


def count(sink, table, dialect) -> int:
    cursor = sink.connection.inner.cursor()
    cursor.execute(f"SELECT count(*) FROM {target_name(table, dialect)}")
    return cursor.fetchone()[0]


@pytest.mark.parametrize("pipeline_kind", ["modes", "sample"])
def test_a_run_executes_exactly_the_planned_program(target, pipeline_kind, tmp_path):
    dialect, warehouse, sink_for = target
    if pipeline_kind == "modes":
        pipeline = modes_pipeline(warehouse)
        catalog = offline_catalog(pipeline)
    else:
        pipeline = dataclasses.replace(
            sample_pipeline(), target=dataclasses.replace(sample_pipeline().target,
                                                          warehouse=warehouse))
        catalog = CATALOG
    plan = build_plan(pipeline, catalog)
    sink = sink_for(pipeline, plan)
    recorder = sink.connection
    try:
        sink.prepare()
        expected = []
        for table in plan.tables:
            expected += [*programs.setup_program(table, dialect), *programs.setup_end(dialect)]
        assert recorder.take() == as_recorded(expected)

        for table in plan.tables:
            source = catalog.table(table.source_database, table.source_table)
            staged = stage_events(table, sample_events(table, source))
            # 1. Arrow slices (the second empty, as a drained slice source may end).
            key = BatchKey(pipeline.name, table.target_table, 7, {"file": "f", "pos": 7})
            result = sink.apply(table, 7, dict(key.end_offset), iter([staged, staged.slice(0, 0)]))
            recorded = recorder.take()
            files, folder = loaded_files(dialect, recorded)
            assert len(files) == 1 and result.rows == staged.num_rows
            assert recorded == as_recorded(
                programs.batch_program(table, dialect, key, files, folder)), table.label
            rows = count(sink, table, dialect)
            assert rows == {"changelog": 4, "scd2": 2}.get(table.mode, 1), table.label

            # 2. A replay: the lookup finds the state row, ROLLBACK, nothing else.
            assert sink.apply(table, 7, dict(key.end_offset), staged).skipped
            head = programs.batch_head(table, dialect, key)
            skip_at = next(i for i, s in enumerate(head) if s.role == "skip")
            assert recorder.take() == as_recorded([*head[: skip_at + 1], *programs.ON_SKIP])

            # 3. Parquet files handed in (the landing zone's), two of them, as a new batch.
            import pyarrow.parquet as pq

            given = []
            half = staged.num_rows // 2
            for part, piece in enumerate((staged.slice(0, half), staged.slice(half))):
                path = tmp_path / f"{table.staging_table}-part-{part}.parquet"
                pq.write_table(piece, path)
                given.append(str(path))
            key = BatchKey(pipeline.name, table.target_table, 8, {"file": "f", "pos": 8})
            result = sink.apply(table, 8, dict(key.end_offset), given)
            recorded = recorder.take()
            _, folder = loaded_files(dialect, recorded)
            assert recorded == as_recorded(
                programs.batch_program(table, dialect, key, given, folder)), table.label
            assert result.rows == staged.num_rows and not result.skipped
            # The same changes again: merge-like modes converge, a changelog appends them.
            after = count(sink, table, dialect)
            assert after == {"changelog": 8, "scd2": 2}.get(table.mode, 1), table.label
        _assert_the_wire_saw_what_was_recorded(sink_for, recorder)
    finally:
        sink.close()


def loads_of(dialect, recorded) -> list[tuple[list[str], str]]:
    """(files, stage folder) of every staging load in a recording, in order: an atomic batch
    loads one staging table per table."""
    if dialect.load_through_stage:
        loads: list[tuple[list[str], str]] = []
        for sql, _ in recorded:
            put = re.match(r"PUT 'file://(.*?)' @\S+?/([^/]+)/ ", sql)
            if put and loads and loads[-1][1] == put.group(2):
                loads[-1][0].append(put.group(1))
            elif put:
                loads.append(([put.group(1)], put.group(2)))
        return loads
    return [(list(params[0]), "") for sql, params in recorded if "read_parquet" in sql]


def test_an_atomic_batch_executes_exactly_the_planned_program(target):
    """target.atomic: every table of a batch in ONE transaction, exactly the statements of
    `plan`'s atomic program; a replay runs every lookup and stops; a table recorded already
    (a batch a per-table run half applied) is left out."""
    dialect, warehouse, sink_for = target
    pipeline = modes_pipeline(warehouse)
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    sink = sink_for(pipeline, plan)
    recorder = sink.connection
    tables = list(plan.tables)
    staged = {t.target_table: stage_events(t, sample_events(
        t, catalog.table(t.source_database, t.source_table))) for t in tables}
    from replicator.sink.protocol import TableBatch

    def apply(batch_id, chosen):
        return sink.apply_atomic([TableBatch(t, staged[t.target_table]) for t in chosen],
                                 batch_id, {"file": "f", "pos": batch_id})

    def keyed(batch_id, chosen):
        return [programs.AtomicPart(t, BatchKey(pipeline.name, t.target_table, batch_id,
                                                {"file": "f", "pos": batch_id})) for t in chosen]

    def parts(batch_id, chosen, recorded):
        """The program's parts completed with the files the sink named (read off the
        recording)."""
        return [dataclasses.replace(part, files=files, folder=folder) for part, (files, folder)
                in zip(keyed(batch_id, chosen), loads_of(dialect, recorded), strict=True)]

    try:
        sink.prepare()
        recorder.take()
        results = apply(9, tables)
        recorded = recorder.take()
        assert recorded == as_recorded(programs.atomic_program(parts(9, tables, recorded),
                                                               dialect))
        assert [r.rows for r in results] == [staged[t.target_table].num_rows for t in tables]
        assert [count(sink, t, dialect) for t in tables] == [
            {"changelog": 4, "scd2": 2}.get(t.mode, 1) for t in tables]

        # A replay: every lookup finds its state row; ROLLBACK, nothing else.
        assert all(r.skipped for r in apply(9, tables))
        assert recorder.take() == as_recorded(
            [*programs.atomic_head(keyed(9, tables), dialect), *programs.ON_SKIP])

        # Batch 10 applied to the first table alone before: the others only.
        first, rest = tables[0], tables[1:]
        sink.apply(first, 10, {"file": "f", "pos": 10}, staged[first.target_table])
        recorder.take()
        results = apply(10, tables)
        recorded = recorder.take()
        planned = programs.atomic_program(parts(10, rest, recorded), dialect)
        head = programs.atomic_head(keyed(10, tables), dialect)
        assert recorded == as_recorded(
            [*head, *planned[len(programs.atomic_head(keyed(10, rest), dialect)):]])
        assert results[0].skipped and not any(r.skipped for r in results[1:])
        _assert_the_wire_saw_what_was_recorded(sink_for, recorder)
    finally:
        sink.close()


def test_a_followed_truncate_is_recorded_in_the_batch_transaction(target):
    """A batch of a changelog and an scd2 table holding a followed TRUNCATE: its records run
    in the batch's ONE transaction after the tables' changes, exactly as the program says
    (atomic, and table by table with no change at all), the hook before the first record
    of each table; positions compare by the binlog file's number (a seventh digit), not as
    text. Values are bound, never in the SQL text (scd2 binds its commit time)."""
    from replicator.model.change_batch import change_seq_at
    from replicator.model.changes import BinlogPosition
    from replicator.plan.program import TruncateAt
    from replicator.sink.protocol import TableBatch

    dialect, warehouse, sink_for = target
    pipeline = modes_pipeline(warehouse)
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    chosen = [t for t in plan.tables if t.mode in ("changelog", "scd2")]
    assert {t.mode for t in chosen} == {"changelog", "scd2"}
    sink = sink_for(pipeline, plan)
    recorder = sink.connection

    def truncate(pos):
        return TruncateAt("mysql-bin.1000000", 1_000_000, pos, 1_700_000_100_000 + pos,
                          change_seq_at(1_000_000, pos))

    staged = {t.target_table: stage_events(t, [
        dataclasses.replace(e, position=BinlogPosition("mysql-bin.999999", e.position.pos))
        for e in sample_events(t, catalog.table(t.source_database, t.source_table))])
        for t in chosen}
    fired: list[str] = []

    def counted(table, where):
        cursor = sink.connection.inner.cursor()
        cursor.execute(f"SELECT count(*) FROM {target_name(table, dialect)} WHERE {where}")
        return cursor.fetchone()[0]

    try:
        sink.prepare()
        recorder.take()
        at = truncate(4)
        sink.apply_atomic([TableBatch(t, staged[t.target_table], truncates=[at])
                           for t in chosen], 12, {"file": "f", "pos": 12},
                          at_truncate=lambda table: fired.append("atomic"))
        recorded = recorder.take()
        parts = [programs.AtomicPart(t, BatchKey(pipeline.name, t.target_table, 12,
                                                 {"file": "f", "pos": 12}),
                                     files, folder, truncates=[at])
                 for t, (files, folder) in zip(chosen, loads_of(dialect, recorded), strict=True)]
        assert recorded == as_recorded(programs.atomic_program(parts, dialect))
        assert fired == ["atomic", "atomic"]
        changelog, scd2 = (next(t for t in chosen if t.mode == m) for m in ("changelog", "scd2"))
        # the one key live before it (the other was deleted) gets its delete row, at it
        assert counted(changelog, '"_OP" = \'d\' AND "_BINLOG_FILE" = \'mysql-bin.1000000\' '
                                  'AND "_BINLOG_POS" = 4 AND "_DELETED"') == 1
        assert counted(changelog, "TRUE") == 5
        assert counted(scd2, '"_IS_CURRENT"') == 0
        assert counted(scd2, f'"_CHANGE_SEQ" = \'{at.change_seq}\' AND "_VALID_TO" IS NOT '
                             'NULL') == 1

        # A later batch of the tables, one at a time, a TRUNCATE and no change: recorded
        # with nothing live before it, it adds nothing.
        later = truncate(90)
        for table in chosen:
            key = BatchKey(pipeline.name, table.target_table, 13, {"file": "f", "pos": 13})
            result = sink.apply(table, 13, dict(key.end_offset), [], truncates=[later],
                                at_truncate=lambda table: fired.append("one"))
            assert not result.skipped and result.rows == 0
            assert recorder.take() == as_recorded(programs.batch_program(
                table, dialect, key, [], truncates=[later]))
        assert fired[2:] == ["one", "one"]
        assert counted(changelog, "TRUE") == 5 and counted(scd2, '"_IS_CURRENT"') == 0
        assert counted(scd2, f'"_CHANGE_SEQ" = \'{later.change_seq}\'') == 0
        _assert_the_wire_saw_what_was_recorded(sink_for, recorder)
    finally:
        sink.close()


def test_a_followed_truncate_of_merged_tables_runs_before_their_merge(target):
    """A batch of two merged tables (one with a log table, one soft-deleting) holding a
    followed TRUNCATE and a change after it: the DELETE (soft: the UPDATE marking every row
    deleted) runs in the batch's ONE transaction before the MERGE, exactly as the program and
    `plan --ddl "TRUNCATE TABLE ..."` say, the hook between them; a reader on another
    connection sees the target as it was until the COMMIT (neither the emptied table nor the
    new row); then the table holds what a TRUNCATE and the change leave. A table whose batch
    holds only the TRUNCATE runs it too (atomic: false, the table's own transaction)."""
    from replicator.cli.plan_ddl import preview_ddl
    from replicator.model.change_batch import change_seq_at
    from replicator.model.changes import BinlogPosition
    from replicator.plan.program import TruncateAt
    from replicator.sink.protocol import TableBatch
    from tests.fixtures.sink_sample import _History, sample_value

    dialect, warehouse, sink_for = target
    pipeline = dataclasses.replace(modes_pipeline(warehouse),
                                   schema_changes=SchemaChangePolicy(truncate="follow"))
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    chosen = [t for t in plan.tables if t.mode == "merge"]
    assert {(bool(t.log_table), t.deletes) for t in chosen} == {(True, "hard"), (False, "soft")}
    sink = sink_for(pipeline, plan)
    recorder = sink.connection
    reader = getattr(sink_for, "reader", None)  # None: fakesnow in-process shares one session

    def source_of(table):
        return catalog.table(table.source_database, table.source_table)

    def inserted(table, n):
        """A change after the TRUNCATE: a row inserted (key n)."""
        row = {c.name: sample_value(c.mysql_type, n) for c in source_of(table).columns}
        events = _History().txn(("c", None, row), table=table.source_name)
        return [dataclasses.replace(e, position=BinlogPosition("mysql-bin.000009", 7))
                for e in events]

    def rows(connection, table, where="TRUE"):
        cursor = connection.cursor() if hasattr(connection, "commit") else connection
        cursor.execute(f"SELECT count(*) FROM {target_name(table, dialect)} WHERE {where}")
        return cursor.fetchone()[0]

    def deleted(table):
        flag = next(c.target_column for c in table.columns if c.role == "soft_delete")
        return f'"{flag}"'

    at = TruncateAt("mysql-bin.000009", 9, 4, 1_700_000_100_000, change_seq_at(9, 4))
    seen: list[tuple[str, Any]] = []
    try:
        sink.prepare()
        # batch 11: key 1 live (key 2 inserted and deleted in it: never in the target)
        for table in chosen:
            sink.apply(table, 11, {"file": "f", "pos": 11},
                       stage_events(table, sample_events(table, source_of(table))))
        before = {t.target_table: rows(sink.connection.inner, t) for t in chosen}
        assert before == {t.target_table: 1 for t in chosen}
        recorder.take()

        def at_truncate(table):
            """After the table's TRUNCATE, before its MERGE: the batch is not visible."""
            seen.append(("hook", table.target_table))
            if reader is not None:
                other = reader(sink)
                try:
                    seen.append((table.target_table, rows(other, table)))
                finally:
                    other.close()

        results = sink.apply_atomic([TableBatch(t, stage_events(t, inserted(t, 3)),
                                                truncates=[at]) for t in chosen],
                                    12, {"file": "f", "pos": 12}, at_truncate=at_truncate)
        recorded = recorder.take()
        parts = [programs.AtomicPart(t, BatchKey(pipeline.name, t.target_table, 12,
                                                 {"file": "f", "pos": 12}),
                                     files, folder, truncates=[at])
                 for t, (files, folder) in zip(chosen, loads_of(dialect, recorded), strict=True)]
        program = programs.atomic_program(parts, dialect)
        assert recorded == as_recorded(program)
        assert [r.rows for r in results] == [1, 1]
        for table in chosen:
            # the TRUNCATE's statement right before the table's MERGE, as `plan --ddl` shows it
            (effect,) = preview_ddl(pipeline, catalog, plan, f"TRUNCATE TABLE "
                                    f"{table.source_name}", dialect)
            assert effect.action == "follow"
            (sql,) = effect.statements
            number = next(n for n, s in enumerate(program) if s.role == "truncate"
                          and target_name(table, dialect) in s.sql)
            assert program[number].sql == sql and not program[number].params
            assert program[number + 1].sql.startswith("MERGE INTO "
                                                      + target_name(table, dialect))
        expected_seen = [("hook", t.target_table) for t in chosen]
        if reader is not None:  # another connection saw each table as before the batch
            expected_seen = [x for t in chosen for x in (("hook", t.target_table),
                                                         (t.target_table,
                                                          before[t.target_table]))]
        assert seen == expected_seen
        orders, products = (next(t for t in chosen if t.deletes == d) for d in ("hard", "soft"))
        # hard: only the row inserted after the TRUNCATE; its log has every change of the
        # batches (4 + 1) and nothing for the TRUNCATE
        assert rows(sink.connection.inner, orders) == 1
        assert rows(sink.connection.inner, orders, f'"{orders.key_columns[0].target_column}" '
                    "= 3") == 1
        log = log_name(orders, dialect)
        cursor = sink.connection.inner.cursor()
        cursor.execute(f"SELECT count(*) FROM {log}")
        assert cursor.fetchone()[0] == 5
        # soft: the row before it marked deleted, the new one live
        assert rows(sink.connection.inner, products) == 2
        assert rows(sink.connection.inner, products, f"NOT {deleted(products)}") == 1

        # batch 13: only the TRUNCATE, table by table (each its own transaction)
        seen.clear()
        for table in chosen:
            key = BatchKey(pipeline.name, table.target_table, 13, {"file": "f", "pos": 13})
            result = sink.apply(table, 13, dict(key.end_offset), [], truncates=[at],
                                at_truncate=at_truncate)
            assert not result.skipped and result.rows == 0
            assert recorder.take() == as_recorded(programs.batch_program(
                table, dialect, key, [], truncates=[at]))
        assert [x for x in seen if x[0] == "hook"] == [("hook", t.target_table) for t in chosen]
        assert rows(sink.connection.inner, orders) == 0
        assert rows(sink.connection.inner, products, f"NOT {deleted(products)}") == 0
        _assert_the_wire_saw_what_was_recorded(sink_for, recorder)
    finally:
        sink.close()


def test_prepare_on_a_grown_plan_runs_the_planned_alters(target):
    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import STRING

    dialect, warehouse, sink_for = target
    pipeline = modes_pipeline(warehouse)
    plan = build_plan(pipeline, offline_catalog(pipeline))
    sink = sink_for(pipeline, plan)
    sink.prepare()
    orders = plan.table("shop.orders")
    added = PlannedColumn(target_column="NOTE", target_type=STRING, source_column="note")
    grown_table = dataclasses.replace(orders, columns=(*orders.columns, added),
                                      log_columns=(*orders.log_columns, added))
    grown = dataclasses.replace(plan, tables=(grown_table,))
    grown_sink = type(sink)(pipeline, grown, connection=sink.connection)
    sink.connection.take()
    grown_sink.prepare()
    recorded = sink.connection.take()
    sink.close()
    existing = {"target": {c.target_column for c in orders.columns}}
    if orders.log_table:
        existing["log"] = {c.target_column for c in orders.log_columns}
    if not dialect.staging_per_batch:
        existing["staging"] = {"stale layout"}
    changes = programs.column_changes(grown_table, dialect, existing)
    alters = [s.sql for s in changes if s.sql.startswith("ALTER")]
    assert len(alters) == 1 + bool(orders.log_table) and all('"NOTE"' in a for a in alters)
    assert recorded == as_recorded([*programs.setup_program(grown_table, dialect), *changes,
                                    *programs.setup_end(dialect)])


def test_open_sink_picks_the_sql_sink_of_the_target():
    from replicator.sink.sql import SQLSink

    pipeline = sample_pipeline()
    sink = open_sink(pipeline, build_plan(pipeline, CATALOG))
    try:
        assert isinstance(sink, SQLSink) and sink.dialect is DUCKDB
    finally:
        sink.close()
