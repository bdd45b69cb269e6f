"""Shared pieces of the verify tests: a pipeline file over the demo schema with every kind of
mapping, and replication without Spark (snapshot chunks -> transform.stage_batch -> sink.apply)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from replicator.config import load_pipeline
from replicator.context import Context
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import Pipeline

# customers: a rename, a masked and an excluded column; orders: soft deletes and a row
# filter; awkward: every hard-to-carry type, mapped by default.
TABLES = """\
  - source: {database}.customers
    columns:
      name: {{name: FULL_NAME}}
      email: {{mask: sha256}}
      tier: {{exclude: true}}
  - source: {database}.orders
    target: ORDERS_SOFT
    deletes: soft
    filter: "status <> 'new'"
  - source: {database}.awkward
"""


def pipeline_file(tmp_path: Path, database: str, *, name: str = "verify",
                  target: str | None = None, tables: str = TABLES) -> Path:
    """The verify tests' pipeline: ``tables`` (YAML list items, ``{database}`` filled in)
    read by the throwaway server's replicator user into ``target`` (a DuckDB file by
    default)."""
    target = target or f"duckdb: {{path: {tmp_path / 'warehouse.duckdb'}}}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: {name}
        source:
          mysql:
            host: 127.0.0.1
            port: ${{MYSQL_PORT}}
            user: replicator
            password: ${{MYSQL_PASSWORD}}
        target:
          {target}
        engine:
          checkpoint: {tmp_path / 'checkpoint'}
        tables:
        """) + tables.format(database=database))
    return path


def load(path: Path, mariadb: Any) -> Pipeline:
    return load_pipeline(path, environ=mariadb.environment())


def replicate_by_snapshot(pipeline: Pipeline, sink: Any, *, chunk_rows: int = 5000) -> int:
    """Copy every table into the target the way the engine's snapshot does; rows staged."""
    from replicator.source.positions import current_position
    from replicator.source.snapshot import plan_chunks, read_chunk
    from tests.fixtures.row_transforms import stage_events

    context = Context(pipeline)
    catalog, plan = context.catalog, context.plan
    sink.prepare()
    position = current_position(pipeline.source)
    staged_rows = 0
    for table in plan.tables:
        source_table = catalog.table(table.source_database, table.source_table)
        assert source_table is not None
        for chunk in plan_chunks(pipeline.source, source_table, chunk_rows=chunk_rows):
            events = list(read_chunk(pipeline.source, source_table, chunk, position=position))
            staged = stage_events(table, events)
            sink.apply(table, -1 - chunk.index, BinlogPosition.to_offset(position), staged)
            staged_rows += staged.num_rows
    return staged_rows


def open_target(pipeline: Pipeline) -> Any:
    from replicator.sink import open_sink

    plan = Context(pipeline).plan
    return open_sink(pipeline, plan)


def replicate_changes(pipeline: Pipeline, sink: Any, start: Any, *, batch_id: int) -> int:
    """Apply the binlog from ``start`` to the head, one batch per table, as the engine does
    (every change staged; stage_batch compacts what the table's mode compacts)."""
    from replicator.source.binlog import read_changes
    from replicator.source.positions import current_position
    from tests.fixtures.row_transforms import stage_events

    plan = Context(pipeline).plan
    end = current_position(pipeline.source)
    events = [e for e in read_changes(pipeline.source, start=start, end=end,
                                      tables=[t.source_name for t in plan.tables],
                                      server_id=pipeline.server_id)
              if not hasattr(e, "sql")]  # row changes only
    applied = 0
    for table in plan.tables:
        mine = [e for e in events if e.table.lower() == table.source_name.lower()]
        staged = stage_events(table, mine)
        sink.apply(table, batch_id, end.to_offset(), staged)
        applied += len(mine)
    return applied


def drift_behind_the_binlog(root: Any, database: str) -> None:
    """100 rows of ``orders`` changed where replication cannot see (``sql_log_bin = 0``): 60
    totals raised, 40 rows inserted (ids 50001-50040)."""
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute("UPDATE orders SET total = total + 1 WHERE id <= 60")
        assert cursor.rowcount == 60
        cursor.execute("INSERT INTO orders (id, customer_id, status, total, updated_at) "
                       "SELECT seq, 1, 'paid', seq / 100, '2024-05-01 10:00:00.000001' "
                       "FROM seq_50001_to_50040")
        cursor.execute("SET SESSION sql_log_bin = 1")


def fakesnow_sink(pipeline: Pipeline, server: Any, database: str) -> Any:
    """A Snowflake sink of ``pipeline`` on fakesnow's HTTP server (the real connector): a new
    ``database`` with the schema RAW, one transaction at a time as the run opens them."""
    from replicator.sink.snowflake import SnowflakeSink

    with server.connect("", "") as bootstrap:
        bootstrap.cursor().execute(f"CREATE DATABASE {database}")
    connection = server.connect(database, "RAW", paramstyle="qmark", autocommit=False)
    connection.cursor().execute("CREATE SCHEMA IF NOT EXISTS RAW")
    return SnowflakeSink(pipeline, Context(pipeline).plan, connection=connection)


def recreate_database(cursor: Any, database: str, *, charset: str | None = None) -> None:
    """``database`` created afresh for a module (a copy an earlier run left is dropped) and in
    use on ``cursor``; ``charset``: its default character set, else the server's."""
    cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    cursor.execute(f"CREATE DATABASE `{database}`" + (f" CHARACTER SET {charset}" if charset else ""))
    cursor.execute(f"USE `{database}`")
