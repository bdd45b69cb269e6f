"""A pushed-down filter end to end: real MariaDB, real local Spark, the real `run` path, DuckDB.

The filter mixes parts MySQL decides exactly as Spark does (numbers, a string compared as
bytes, a DATETIME bound) with one it cannot (lower()), over rows a collation would confuse
('keep' and 'Keep ' equal 'Keep' under utf8mb4_general_ci, not in Spark). The snapshot reads
only the rows the pushed-down part keeps; the stream then moves rows in and out of the
filter. After each run the target equals, row by row, the source rows this test itself
says the filter keeps, and ``verify`` finds source and target equal.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pytest

from replicator.config import load_pipeline
from replicator.model.pipeline import BatchPolicy, DuckDBTarget, EngineConfig, TargetConfig
from replicator.source.snapshot import chunk_select_preview
from tests.integration.e2e_support import run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

FILTER = "(n >= 10 OR name = 'Keep') AND at >= '2024-01-01' AND lower(name) <> 'skip'"
PIPELINE = f"""
version: 1
name: pushdown
source:
  mysql: {{host: 127.0.0.1, port: 3306, user: replicator}}
target:
  duckdb: {{path: "WAREHOUSE", schema: main}}
tables:
  - source: DB.orders
    key: [id]
    filter: "{FILTER}"
  - source: DB.events
    mode: changelog
    key: [id]
    filter: "n IN (1, 2, 3) AND amount > 0.5"
"""
SCHEMA = ("CREATE TABLE {} (id INT PRIMARY KEY, n INT, amount DECIMAL(10,2), name VARCHAR(20), "
          "at DATETIME(6)) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
ROWS = [
    (1, 10, "1.00", "Keep", "2024-01-01 00:00:00"),
    (2, 1, "0.51", "Keep", "2024-06-01 00:00:00"),  # n < 10, but the name keeps it
    (3, 2, "0.50", "keep", "2024-06-01 00:00:00"),  # 'keep' <> 'Keep' in Spark
    (4, 3, "9.99", "Keep ", "2024-06-01 00:00:00"),  # trailing space: not 'Keep' in Spark
    (5, 11, "2.00", "Skip", "2024-06-01 00:00:00"),  # lower() drops it after the read
    (6, 12, "3.00", "x", "2023-12-31 23:59:59.999999"),  # before the bound
    (7, None, "1.00", None, "2024-02-29 12:00:00"),  # NULL n and name: dropped
    (8, 100, None, "😀", "2024-01-01 00:00:00.000001"),
    (9, 1, "0.60", "Keep", None),  # NULL at: dropped
    (10, 10, "1.00", "Keep", "2024-03-01 00:00:00"),
]
WORKLOAD = [
    "UPDATE {t} SET name = 'Keep' WHERE id = 3",  # now kept
    "UPDATE {t} SET n = 0 WHERE id = 1",  # 'Keep' still keeps it
    "UPDATE {t} SET at = '2020-01-01' WHERE id = 10",  # leaves the filter
    "INSERT INTO {t} VALUES (11, 50, 5.00, 'new', '2025-01-01 00:00:00')",
    "DELETE FROM {t} WHERE id = 8",
]


def _orders_keep(row: tuple) -> bool:
    """The filter, as this test reads it (Spark: case- and space-sensitive, NULL fails)."""
    _, n, _, name, at = row
    if at is None or at < dt.datetime(2024, 1, 1) or name is None or name.lower() == "skip":
        return False
    return (n is not None and n >= 10) or name == "Keep"


NARROW = "n >= 10 AND at >= '2024-01-01' AND lower(name) <> 'skip'"


def _narrow_keep(row: tuple) -> bool:
    return _orders_keep(row) and row[1] is not None and row[1] >= 10


def _events_keep(row: tuple) -> bool:
    _, n, amount, _, _ = row
    return n in (1, 2, 3) and amount is not None and amount > Decimal("0.5")


def _source(root, database, table):
    with root.cursor() as cursor:
        cursor.execute("SET SESSION time_zone = '+00:00'")
        cursor.execute(f"SELECT id, n, amount, name, at FROM `{database}`.`{table}` ORDER BY id")
        return [tuple(row) for row in cursor.fetchall()]


def _target(warehouse, table):
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as connection:
        rows = connection.execute(f'SELECT "ID", "N", "AMOUNT", "NAME", "AT" '
                                  f'FROM main."{table}" ORDER BY "ID"').fetchall()
    return [tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in row)
            for row in rows]


def test_a_pushed_down_filter_copies_and_streams_exactly_the_kept_rows(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    from replicator.context import Context
    from replicator.verify import verify_pipeline

    warehouse = tmp_path / "warehouse.duckdb"
    path = tmp_path / "pushdown.yaml"
    path.write_text(PIPELINE.replace("DB.", f"{fresh_database}.")
                    .replace("WAREHOUSE", str(warehouse)))
    pipeline = dataclasses.replace(
        load_pipeline(path, environ={}), source=mysql_source,
        target=TargetConfig(DuckDBTarget(str(warehouse), schema="main")),
        batching=BatchPolicy(max_rows=3, max_delay_ms=500),
        engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint")))
    root = mariadb.root_connection()
    try:
        with root.cursor() as cursor:
            cursor.execute(f"USE `{fresh_database}`")
            for table in ("orders", "events"):
                cursor.execute(SCHEMA.format(table))
                cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)", ROWS)
        root.commit()

        context = Context(pipeline)
        plan, catalog = context.plan, context.catalog
        pushed = {t.source_table: chunk_select_preview(plan.tables, t, catalog)[1]
                  for t in plan.tables}
        assert pushed == {
            "orders": "((`n` >= 10) OR (CAST(`name` AS BINARY) = x'4b656570')) "
                      "AND (`at` >= '2024-01-01 00:00:00.000000')",
            "events": "(`n` IN (1, 2, 3)) AND (`amount` > 0.5)",
        }

        first = run(pipeline, spark)
        orders = [r for r in _source(root, fresh_database, "orders") if _orders_keep(r)]
        events = [r for r in _source(root, fresh_database, "events") if _events_keep(r)]
        # Read: ids 1, 2, 5, 8, 10 of orders (5 is dropped by lower() after the read, a
        # delete of a key the target lacks), ids 2, 4, 9 of events; without the pushdown
        # every row of both tables would have been read and staged (orders' as deletes).
        assert first.snapshot_rows == 5 + 3
        assert _target(warehouse, "ORDERS") == orders
        assert [r[0] for r in orders] == [1, 2, 8, 10]
        assert [r[0] for r in events] == [2, 4, 9]
        assert _target(warehouse, "EVENTS") == events

        with root.cursor() as cursor:
            for table in ("orders", "events"):
                for statement in WORKLOAD:
                    cursor.execute(statement.format(t=table))
        root.commit()
        second = run(pipeline, spark)
        assert second.changes == 2 * len(WORKLOAD)
        orders = [r for r in _source(root, fresh_database, "orders") if _orders_keep(r)]
        assert [r[0] for r in orders] == [1, 2, 3, 11]
        assert _target(warehouse, "ORDERS") == orders
        report = verify_pipeline(pipeline)
        assert report.equal, "\n".join(report.describe())

        # A narrower filter, copied again (--snapshot always): ids 1-3 (n < 10) are no longer
        # read at all, so nothing stages their deletes; the copy's end removes them
        # (engine.snapshot.remove_absent_rows compares by key, filter applied).
        narrowed = dataclasses.replace(pipeline, tables=tuple(
            dataclasses.replace(t, filter=NARROW) if t.source_table == "orders" else t
            for t in pipeline.tables))
        run(narrowed, spark, snapshot="always")
        orders = [r for r in _source(root, fresh_database, "orders") if _narrow_keep(r)]
        assert [r[0] for r in orders] == [11]
        assert _target(warehouse, "ORDERS") == orders
        report = verify_pipeline(narrowed)
        assert report.equal, "\n".join(report.describe())
    finally:
        root.close()
