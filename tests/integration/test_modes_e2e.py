"""Replication modes end to end: real MariaDB, real local Spark, the real `run` path, into
DuckDB and into the Snowflake sink's SQL on fakesnow.

``pipelines/modes.yaml`` pointed at a fresh database: snapshot, then a workload that updates a
customer several times (tracked and untracked columns), deletes and re-inserts it; changes
orders and their events; deletes a product. Small batches (``max_rows: 3``) spread the changes
of one key over several batches. After the run every target table is checked exactly, and a
second run applies nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
from decimal import Decimal
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.model.pipeline import (
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    TargetConfig,
)
from replicator.plan import DUCKDB, SNOWFLAKE
from replicator.plan.statements.names import log_name, target_name
from tests.integration.e2e_support import fakesnow_warehouse, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

SCHEMA = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id BIGINT, status VARCHAR(20), "
    "amount DECIMAL(12,2))",
    "CREATE TABLE order_events (id BIGINT PRIMARY KEY, order_id BIGINT, note TEXT, payload JSON)",
    "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(100), email VARCHAR(255), "
    "tier VARCHAR(10), city VARCHAR(50))",
    "CREATE TABLE products (sku VARCHAR(32) PRIMARY KEY, title VARCHAR(200), price DECIMAL(10,2))",
)
SEED = (
    "INSERT INTO orders VALUES (1, 7, 'new', 10.50)",
    "INSERT INTO order_events VALUES (1, 1, 'created', '{\"by\": \"web\"}')",
    "INSERT INTO customers VALUES (1, 'Ann', 'ann@x', 'gold', 'Oslo'), (2, 'Bo', 'bo@x', 'basic', 'Rome')",
    "INSERT INTO products VALUES ('A-1', 'lamp', 9.99)",
)
WORKLOAD = (
    "UPDATE customers SET name = 'Anna' WHERE id = 1",  # untracked: in place
    "UPDATE customers SET tier = 'silver' WHERE id = 1",  # tracked: a new version
    "INSERT INTO order_events VALUES (2, 1, 'paid', NULL)",
    "UPDATE order_events SET note = 'paid twice' WHERE id = 2",
    "UPDATE orders SET status = 'paid' WHERE id = 1",
    "DELETE FROM customers WHERE id = 1",
    "INSERT INTO orders VALUES (2, 8, 'new', 3.00)",
    "DELETE FROM order_events WHERE id = 1",
    "INSERT INTO customers VALUES (1, 'Ann', 'ann@x', 'bronze', 'Oslo')",  # re-insert
    "DELETE FROM orders WHERE id = 1",
    "UPDATE customers SET city = 'Bergen' WHERE id = 1",  # tracked
    "UPDATE customers SET email = 'a@y' WHERE id = 1",  # untracked
    "DELETE FROM products WHERE sku = 'A-1'",
    "INSERT INTO products VALUES ('B-2', 'desk', 120.00)",
)


def _pipeline(mysql_source, database, tmp_path, warehouse):
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml", environ={})
    return dataclasses.replace(
        pipeline,
        source=mysql_source,
        target=TargetConfig(warehouse),
        tables=tuple(dataclasses.replace(t, source_database=database) for t in pipeline.tables),
        batching=BatchPolicy(max_rows=3, max_delay_ms=500),
        engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint")),
    )


def _execute(root, database, statements):
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        for statement in statements:
            cursor.execute(statement)


def _rows(connection, sql):
    cursor = connection.cursor()
    try:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]
    finally:
        cursor.close()


def _contents(connection, pipeline, dialect):
    from replicator.context import Context

    plan = Context(pipeline).plan
    orders, events, customers, products = (
        plan.table(n) for n in ("orders", "order_events", "customers", "products"))
    return {
        "orders": _rows(connection, f'SELECT "ID", "STATUS", "AMOUNT", "_OP" FROM '
                                    f'{target_name(orders, dialect)} ORDER BY "ID"'),
        "orders_log": _rows(connection, f'SELECT "ID", "STATUS", "_OP", "_DELETED" FROM '
                                        f'{log_name(orders, dialect)} ORDER BY "_BINLOG_FILE", '
                                        '"_BINLOG_POS", "_TRANSACTION_ORDER"'),
        "order_changes": _rows(connection, f'SELECT "ID", "NOTE", "_OP", "_DELETED" FROM '
                                           f'{target_name(events, dialect)} ORDER BY "_BINLOG_FILE", '
                                           '"_BINLOG_POS", "_TRANSACTION_ORDER"'),
        "customers": _rows(connection, f'SELECT "ID", "NAME", "TIER", "CITY", "_OP", "_IS_CURRENT", '
                                       f'"_VALID_FROM", "_VALID_TO" FROM '
                                       f'{target_name(customers, dialect)} ORDER BY "ID", "_CHANGE_SEQ"'),
        "products": _rows(connection, f'SELECT "SKU", "TITLE", "_DELETED", "_DELETED_AT" IS NOT NULL '
                                      f'FROM {target_name(products, dialect)} ORDER BY "SKU"'),
    }


def _check(contents):
    assert contents["orders"] == [(2, "new", Decimal("3.00"), "c")]
    assert contents["orders_log"] == [
        (1, "new", "r", False), (1, "paid", "u", False), (2, "new", "c", False),
        (1, "paid", "d", True)]
    assert contents["order_changes"] == [
        (1, "created", "r", False), (2, "paid", "c", False), (2, "paid twice", "u", False),
        (1, "created", "d", True)]
    history = contents["customers"]
    assert [row[:6] for row in history] == [
        (1, "Anna", "gold", "Oslo", "u", False),  # snapshot version, renamed in place
        (1, "Anna", "silver", "Oslo", "u", False),  # ended by the delete
        (1, "Ann", "bronze", "Oslo", "c", False),  # re-inserted
        (1, "Ann", "bronze", "Bergen", "u", True),  # email changed in place
        (2, "Bo", "basic", "Rome", "r", True),
    ]
    one = history[:4]
    for earlier, later in itertools.pairwise(one):
        assert earlier[7] is not None and earlier[6] <= earlier[7] <= later[6]
    assert one[0][7] == one[1][6] and one[2][7] == one[3][6]  # a new version starts as one ends
    assert one[3][7] is None and history[4][7] is None
    assert contents["products"] == [("A-1", "lamp", True, True), ("B-2", "desk", False, False)]


def _scenario(spark, root, database, pipeline, connect):
    _execute(root, database, SCHEMA + SEED)
    first = run(pipeline, spark)
    assert first.snapshot_rows == 1 + 1 + 2 + 1
    _execute(root, database, WORKLOAD)
    second = run(pipeline, spark)
    assert second.changes == len(WORKLOAD) and second.batches >= 4
    with connect() as connection:
        contents = _contents(connection, pipeline, DUCKDB if isinstance(
            pipeline.target.warehouse, DuckDBTarget) else SNOWFLAKE)
    _check(contents)
    again = run(pipeline, spark)
    assert (again.changes, again.rows) == (0, 0)
    with connect() as connection:
        assert _contents(connection, pipeline, DUCKDB if isinstance(
            pipeline.target.warehouse, DuckDBTarget) else SNOWFLAKE) == contents


def test_modes_end_to_end_into_duckdb(spark, mariadb, mysql_source, fresh_database, tmp_path):
    import duckdb

    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = _pipeline(mysql_source, fresh_database, tmp_path,
                         DuckDBTarget(str(warehouse), schema="main"))
    root = mariadb.root_connection()
    try:
        _scenario(spark, root, fresh_database, pipeline,
                  lambda: duckdb.connect(str(warehouse), read_only=True))
    finally:
        root.close()


def test_modes_end_to_end_into_snowflake_sql(spark, mariadb, mysql_source, fresh_database,
                                             tmp_path, monkeypatch):
    root = mariadb.root_connection()
    try:
        with fakesnow_warehouse(tmp_path, monkeypatch) as (target, connect):
            pipeline = _pipeline(mysql_source, fresh_database, tmp_path, target)
            _scenario(spark, root, fresh_database, pipeline, connect)
    finally:
        root.close()
