"""A value the warehouse refuses by size (Snowflake: VARCHAR/VARIANT 16 MB, BINARY 8 MB) stops
the batch before the load, naming the table, the row's key and the column, with the fixes;
nothing of the batch is applied. On the Snowflake connector over fakesnow (whose DuckDB would
take the value: the check is replicator's, as the real warehouse's COPY would refuse it), and
DuckDB (no such limit) applies the same batch."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from replicator.errors import SinkError
from replicator.plan import SNOWFLAKE, build_plan
from replicator.sink.limits import check_value_sizes
from tests.fixtures.row_transforms import stage_events
from tests.fixtures.sink_sample import CATALOG, sample_events, sample_pipeline

pytestmark = pytest.mark.slow  # 17 MB values through fakesnow

BIG_TEXT = "é" * (8 * 1024 * 1024 + 1)  # 16 MiB + 2 bytes in UTF-8, 8 Mi characters


def _with_big_value(table, source, column, value):
    """The sample's update of the row that remains (key 1) carries ``value``: the staged row
    (the last change per key) holds it."""
    events = sample_events(table, source)
    index = next(i for i, e in enumerate(events) if e.op == "u")
    update = events[index]
    return [*events[:index], dataclasses.replace(update, after={**update.after, column: value}),
            *events[index + 1:]]


def _order_items(target):
    pipeline = sample_pipeline(target) if target == "snowflake" else sample_pipeline()
    plan = build_plan(pipeline, CATALOG)
    table = next(t for t in plan.tables if t.source_table == "Order Items")
    return pipeline, plan, table, CATALOG.table(table.source_database, table.source_table)


def test_snowflake_refuses_an_oversize_text_naming_table_key_and_column():
    fakesnow = pytest.importorskip("fakesnow")
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        import snowflake.connector

        from replicator.sink.snowflake import SnowflakeSink

        pipeline, plan, table, source = _order_items("snowflake")
        connection = snowflake.connector.connect(
            account="fake", user="fake", password="fake", database=pipeline.target.warehouse.database,
            schema=pipeline.target.warehouse.schema, paramstyle="qmark", autocommit=False)
        sink = SnowflakeSink(pipeline, plan, connection=connection)
        sink.retry_delays = ()
        try:
            sink.prepare()
            for column, value, kind in (("Mixed Case", BIG_TEXT, "VARCHAR"),
                                        ("payload", b"\x00" * (8 * 1024 * 1024 + 1), "BINARY")):
                staged = stage_events(table, _with_big_value(table, source, column, value))
                with pytest.raises(SinkError) as excinfo:
                    sink.apply(table, 1, {"pos": 1}, iter([staged]))
                message = str(excinfo.value)
                assert table.label in message and "key ID=1" in message, message
                target_column = next(c.target_column for c in table.columns
                                     if c.source_column == column)
                assert f"the value of {target_column} " in message and kind in message
                assert "{exclude: true}" in excinfo.value.hint and "truncate" in excinfo.value.hint
                assert not excinfo.value.transient  # a retry cannot help
                assert count_rows(sink, table) == 0 and sink.last_applied(table) is None
            # Under the limit the same batch applies.
            staged = stage_events(table, sample_events(table, source))
            assert not sink.apply(table, 1, {"pos": 1}, iter([staged])).skipped
            assert count_rows(sink, table) == 1
        finally:
            sink.close()


def count_rows(sink, table):
    from replicator.plan.statements.names import target_name

    cursor = sink.connection.cursor()
    cursor.execute(f"SELECT count(*) FROM {target_name(table, SNOWFLAKE)}")
    (rows,) = cursor.fetchone()
    cursor.execute("ROLLBACK")
    return rows


def test_duckdb_takes_the_same_value(tmp_path):
    from replicator.plan import DUCKDB
    from replicator.sink.duckdb import DuckDBSink

    pipeline, plan, table, source = _order_items("duckdb")
    sink = DuckDBSink(pipeline, plan)
    try:
        sink.prepare()
        staged = stage_events(table, _with_big_value(table, source, "Mixed Case", BIG_TEXT))
        assert not sink.apply(table, 1, {"pos": 1}, iter([staged])).skipped
        from replicator.plan.statements.names import target_name

        column = next(c.target_column for c in table.columns if c.source_column == "Mixed Case")
        stored = sink.connection.execute(
            f'SELECT strlen("{column}") FROM {target_name(table, DUCKDB)}').fetchall()
        assert stored == [(len(BIG_TEXT.encode()),)]
    finally:
        sink.close()


def test_exactly_at_the_limit_passes():
    _pipeline, _plan, table, _source = _order_items("snowflake")
    column = next(c for c in table.staged_columns if c.source_column == "Mixed Case")
    limit = SNOWFLAKE.max_value_bytes["string"]
    names = [c.staging_name for c in table.staged_columns]
    for size, refused in ((limit, False), (limit + 1, True)):
        piece = pa.table({name: pa.array(["x" * size if name == column.staging_name else None])
                          for name in names})
        if refused:
            with pytest.raises(SinkError, match=f"{size:,} bytes"):
                check_value_sizes(table, SNOWFLAKE, piece)
        else:
            assert check_value_sizes(table, SNOWFLAKE, piece) == (piece, [])


def test_dead_letter_sets_the_row_aside_and_applies_the_rest_once():
    """on_error: dead_letter: the refused row goes to _REPLICATOR_DEAD_LETTERS (key, column,
    error, the batch's binlog end) in the batch's transaction, the other row is applied, a
    replay of the batch adds nothing, and the sink counts the dead letters (what `status`
    shows)."""
    fakesnow = pytest.importorskip("fakesnow")
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        import json

        import snowflake.connector

        from replicator.plan import program as programs
        from replicator.plan.statements.bookkeeping import dead_letter_name
        from replicator.sink.snowflake import SnowflakeSink

        base = sample_pipeline("snowflake")
        pipeline = dataclasses.replace(base, tables=tuple(
            dataclasses.replace(t, on_error="dead_letter") for t in base.tables))
        plan = build_plan(pipeline, CATALOG)
        table = next(t for t in plan.tables if t.source_table == "Order Items")
        source = CATALOG.table(table.source_database, table.source_table)
        assert any(s.sql.startswith("INSERT INTO") and "_REPLICATOR_DEAD_LETTERS" in s.sql
                   for s in programs.batch_program(table, SNOWFLAKE))  # `plan` shows it
        connection = snowflake.connector.connect(
            account="fake", user="fake", password="fake", database="ANALYTICS", schema="RAW",
            paramstyle="qmark", autocommit=False)
        sink = SnowflakeSink(pipeline, plan, connection=connection)
        sink.retry_delays = ()
        try:
            sink.prepare()
            assert sink.dead_letters(table) == 0
            # Rows 1 and 2 both stay (the sample's delete of row 2 is left out); row 2
            # carries the oversize value.
            events = [e for e in sample_events(table, source) if e.op != "d"]
            index = next(i for i, e in enumerate(events) if e.op == "c" and e.after["id"] == 2)
            events[index] = dataclasses.replace(
                events[index], after={**events[index].after, "Mixed Case": BIG_TEXT})
            staged = stage_events(table, events)
            assert staged.num_rows == 2
            offset = {"file": "mysql-bin.000042", "pos": 1234}
            result = sink.apply(table, 5, offset, iter([staged]))
            assert not result.skipped and result.rows == 1
            assert count_rows(sink, table) == 1
            assert sink.dead_letters(table) == 1
            cursor = sink.connection.cursor()
            cursor.execute(f'SELECT "PIPELINE", "TABLE", "BATCH_ID", "KEY", "COLUMN", "ERROR", '
                           f'"BINLOG_FILE", "BINLOG_POS" FROM {dead_letter_name(table, SNOWFLAKE)}')
            (row,) = cursor.fetchall()
            cursor.execute("ROLLBACK")
            target_column = next(c.target_column for c in table.columns
                                 if c.source_column == "Mixed Case")
            assert row[:3] == ("sample", table.target_table, 5)
            assert json.loads(row[3]) == {"ID": "2"} or json.loads(row[3]) == {"ID": 2}
            assert row[4] == target_column and "16,777,218 bytes" in row[5]
            assert (row[6], row[7]) == ("mysql-bin.000042", 1234)
            # A replay (the batch id is recorded): nothing applied, no second dead letter.
            assert sink.apply(table, 5, offset, iter([staged])).skipped
            assert count_rows(sink, table) == 1 and sink.dead_letters(table) == 1
        finally:
            sink.close()
