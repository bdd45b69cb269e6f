"""A finished copy is a resume point: a run that lost its checkpoint before any stream batch
keeps the tables whose copy the target's state table records as finished (their done
markers), copies only the others, and streams from the earliest copy's position, leaving out
each table's changes up to its own copy's (issue 29).

- The first run (`replicator run`, a subprocess) is killed right after its snapshot
  (failpoint ``snapshot.done``); the checkpoint directory is deleted and the source changes
  (the demo's awkward values among them). The next run copies nothing, says where it
  resumes, and the target equals MySQL row by row.
- Mixed, in-process, every mode (`pipelines/modes.yaml`): three tables copied by a first run,
  a fourth added to the YAML while the checkpoint is lost. Only the fourth, a changelog
  table, is copied, at a later position than the others; the stream replays from the earlier
  one, and the fourth's changes before its own copy (a TRUNCATE among them, which the
  default policy would stop at) are left out: every history holds each change once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine.state.checkpoint import epoch_of, is_copy_done
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import BatchPolicy, DuckDBTarget, EngineConfig, TargetConfig
from tests.integration.e2e_support import (
    DEMO_TABLES,
    assert_target_equals_source,
    demo_pipeline_yaml,
    kill_at_failpoint,
    run,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _target(warehouse: Path) -> Any:
    import duckdb

    return contextlib.closing(duckdb.connect(str(warehouse), read_only=True))


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with _target(warehouse) as target:
        return [tuple(row) for row in target.execute(sql).fetchall()]


def _state(warehouse: Path) -> list[tuple[str, int, BinlogPosition]]:
    """(target table, batch id, end offset) of every state row."""
    return [(table, batch_id, BinlogPosition.from_offset(json.loads(offset)))
            for table, batch_id, offset in _rows(
                warehouse, 'SELECT "TABLE", "BATCH_ID", "END_OFFSET" FROM '
                           'main."_REPLICATOR_STATE"')]


def _resumed_line(notices: list[str]) -> str:
    lines = [line for line in notices if "resuming from the target's state:" in line]
    assert len(lines) == 1, notices
    return lines[0]


def _copied(reports: list[Any]) -> set[str]:
    """The tables a run copied (its snapshot batches), as ``db.table``."""
    return {table.table for report in reports if report.kind != "stream"
            for table in report.tables}


def test_a_run_killed_after_its_copy_resumes_from_it_without_copying_again(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection()
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=20, orders=60, awkward=40)
        pipeline_file = tmp_path / "resume.yaml"
        pipeline_file.write_text(demo_pipeline_yaml("resume", fresh_database))
        env = {**os.environ, "MYSQL_HOST": mysql_source.host,
               "MYSQL_PORT": str(mysql_source.port), "MYSQL_USER": mysql_source.user,
               "MYSQL_PASSWORD": mysql_source.password or "", "WORKDIR": str(tmp_path),
               "NO_COLOR": "1"}
        kill_at_failpoint(pipeline_file, env, tmp_path / "first.log", "snapshot.done")

        # What the kill left: each table's copy finished and recorded, no stream batch.
        warehouse = tmp_path / "warehouse.duckdb"
        state = _state(warehouse)
        assert all(batch_id < 0 for _, batch_id, _ in state), state
        done = {table: at for table, batch_id, at in state if is_copy_done(batch_id)}
        assert sorted(done) == sorted(table.upper() for table in DEMO_TABLES)
        (copied_at,) = set(done.values())

        shutil.rmtree(tmp_path / "checkpoint")  # the volume is gone; the warehouse is not
        apply_changes(root, fresh_database, rounds=8, seed_value=5, first_new_id=300_000)
        pipeline = load_pipeline(pipeline_file, environ=env)
        notices: list[str] = []
        reports: list[Any] = []
        resumed = run(pipeline, spark, on_notice=notices.append, on_report=reports.append)

        assert _resumed_line(notices) == (
            f"no checkpoint in {tmp_path / 'checkpoint'}: resuming from the target's state: "
            f"3 table(s) copied at {copied_at}, streaming from {copied_at} as epoch 1, "
            "without copying them again")
        # Nothing copied: no snapshot batch reported; the new epoch records no chunk, only
        # the kept copies (their done markers again, at the copy's position).
        assert resumed.snapshot_rows == 0 and resumed.changes > 0
        assert _copied(reports) == set() and reports
        kept = [(table, is_copy_done(batch_id), at) for table, batch_id, at in _state(warehouse)
                if batch_id < 0 and epoch_of(batch_id) == 1]
        assert sorted(kept) == sorted((table, True, copied_at) for table in done), kept
        with _target(warehouse) as target:
            assert_target_equals_source(pipeline, root, target)  # the awkward values too
    finally:
        root.close()


SCHEMA = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id BIGINT, status VARCHAR(20), "
    "amount DECIMAL(12,2))",
    "CREATE TABLE order_events (id BIGINT PRIMARY KEY, order_id BIGINT, note TEXT, payload JSON)",
    "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(100), email VARCHAR(255), "
    "tier VARCHAR(10), city VARCHAR(50))",
    "CREATE TABLE products (sku VARCHAR(32) PRIMARY KEY, title VARCHAR(200), price DECIMAL(10,2))",
    "INSERT INTO orders VALUES (1, 7, 'new', 10.50)",
    "INSERT INTO order_events VALUES (1, 1, 'created', '{\"by\": \"web\"}')",
    "INSERT INTO customers VALUES (1, 'Ann', 'ann@x', 'gold', 'Oslo'), "
    "(2, 'Bo', 'bo@x', 'basic', 'Rome')",
    "INSERT INTO products VALUES ('A-1', 'lamp', 9.99)",
)
# While no checkpoint exists: changes to the copied tables (after their copies), and to
# order_events before its copy, which the copy holds and the stream must leave out.
BEFORE_ITS_COPY = (
    "UPDATE customers SET tier = 'silver' WHERE id = 1",  # scd2: a new version
    "INSERT INTO order_events VALUES (2, 1, 'paid', NULL)",
    "UPDATE order_events SET note = 'paid twice' WHERE id = 2",
    "UPDATE orders SET status = 'paid' WHERE id = 1",
    "TRUNCATE order_events",  # `truncate: stop` by default: stopped at, if not left out
    "INSERT INTO order_events VALUES (3, 1, 'refunded', '{\"why\": \"late ✓\"}')",
)
AFTER = (
    "DELETE FROM order_events WHERE id = 3",
    "INSERT INTO order_events VALUES (4, 2, 'new', NULL)",
    "DELETE FROM products WHERE sku = 'A-1'",
    "UPDATE customers SET city = 'Bergen' WHERE id = 2",
)


def _execute(root: Any, database: str, statements: tuple[str, ...]) -> None:
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        for statement in statements:
            cursor.execute(statement)


def _modes_pipeline(mysql_source: Any, database: str, tmp_path: Path, *, events: bool) -> Any:
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml", environ={})
    return dataclasses.replace(
        pipeline, source=mysql_source,
        target=TargetConfig(DuckDBTarget(str(tmp_path / "warehouse.duckdb"), schema="main")),
        tables=tuple(dataclasses.replace(t, source_database=database) for t in pipeline.tables
                     if events or t.source_table != "order_events"),
        batching=BatchPolicy(max_rows=3, max_delay_ms=500),  # a key's changes over batches
        engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint")))


def test_only_the_tables_without_a_finished_copy_are_copied(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection()
    warehouse = tmp_path / "warehouse.duckdb"
    try:
        _execute(root, fresh_database, SCHEMA)
        first = run(_modes_pipeline(mysql_source, fresh_database, tmp_path, events=False), spark)
        assert first.snapshot_rows == 1 + 2 + 1
        state = _state(warehouse)
        assert all(batch_id < 0 for _, batch_id, _ in state)  # a quiet source: no stream batch
        (copied_at,) = {at for _, batch_id, at in state if is_copy_done(batch_id)}

        _execute(root, fresh_database, BEFORE_ITS_COPY)
        shutil.rmtree(tmp_path / "checkpoint")
        pipeline = _modes_pipeline(mysql_source, fresh_database, tmp_path, events=True)
        notices: list[str] = []
        reports: list[Any] = []
        second = run(pipeline, spark, on_notice=notices.append, on_report=reports.append)

        line = _resumed_line(notices)
        events = f"{fresh_database}.order_events"
        assert line.startswith(
            f"no checkpoint in {tmp_path / 'checkpoint'}: resuming from the target's state: "
            f"3 table(s) copied at {copied_at}, streaming from {copied_at} as epoch 1, "
            f"without copying them again; copying 1 table(s) ({events}) at "), line
        # Epoch 1 records every table's copy: the three kept (at their position, where its
        # stream started) and order_events' (later), so a checkpoint lost again places it.
        done = {table: at for table, batch_id, at in _state(warehouse)
                if is_copy_done(batch_id) and epoch_of(batch_id) == 1}
        events_at = done.pop("ORDER_CHANGES")
        assert done == dict.fromkeys(("ORDERS", "CUSTOMERS", "PRODUCTS"), copied_at)
        assert events_at > copied_at and line.endswith(f" at {events_at} first")
        assert _copied(reports) == {events}
        assert second.snapshot_rows == 1  # order 3's event, the only one left to copy
        # The copy holds the event's changes before it; none of them is in the history.
        assert _rows(warehouse, 'SELECT "ID", "NOTE", "_OP", "_DELETED" FROM '
                                'main."ORDER_CHANGES"') == [(3, "refunded", "r", False)]

        _execute(root, fresh_database, AFTER)
        run(pipeline, spark)
        assert _rows(warehouse, 'SELECT "ID", "STATUS", "AMOUNT", "_OP" FROM main."ORDERS"') \
            == [(1, "paid", Decimal("10.50"), "u")]
        assert _rows(warehouse, 'SELECT "ID", "STATUS", "_OP" FROM main."ORDERS_LOG" ORDER BY '
                                '"_BINLOG_FILE", "_BINLOG_POS", "_TRANSACTION_ORDER"') \
            == [(1, "new", "r"), (1, "paid", "u")]
        assert _rows(warehouse, 'SELECT "ID", "NOTE", "_OP", "_DELETED" FROM '
                                'main."ORDER_CHANGES" ORDER BY "_BINLOG_FILE", "_BINLOG_POS", '
                                '"_TRANSACTION_ORDER"') == [
            (3, "refunded", "r", False), (3, "refunded", "d", True), (4, "new", "c", False)]
        assert _rows(warehouse, 'SELECT "ID", "TIER", "CITY", "_IS_CURRENT" FROM '
                                'main."CUSTOMERS" ORDER BY "ID", "_CHANGE_SEQ"') == [
            (1, "gold", "Oslo", False), (1, "silver", "Oslo", True),
            (2, "basic", "Rome", False), (2, "basic", "Bergen", True)]
        assert _rows(warehouse, 'SELECT "SKU", "_DELETED" FROM main."PRODUCTS"') \
            == [("A-1", True)]
        assert _rows(warehouse, 'SELECT count(*) FROM (SELECT "TABLE", "BATCH_ID" FROM '
                                'main."_REPLICATOR_STATE" GROUP BY 1, 2 HAVING count(*) > 1)') \
            == [(0,)]
    finally:
        root.close()
