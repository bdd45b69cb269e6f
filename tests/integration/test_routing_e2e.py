"""Routing end to end: sharded databases merged into one target, real MariaDB, real local Spark,
the real `run` path, into DuckDB and into the Snowflake sink's SQL on fakesnow (there with every
batch read on the driver, the large-batch path).

``pipelines/sharded.yaml`` with its patterns pointed at this test's shard databases:

1. three shards (shop_0 excluded) with the SAME ids; shop_2 has a column the others lack;
   the first run copies shop_1 and shop_2 (never shop_0);
2. a run that streams while: a transaction updates one key three times and moves another key
   (id 2 -> 20); shop_2 gets the same ids as shop_1; shop_0 changes (never arrive); a new shard
   database is created with CREATE TABLE ... LIKE, another with CREATE TABLE ... SELECT, and
   their rows stream without a restart; a table renamed into the selection is copied by the
   running pipeline before it streams on;
3. while stopped, another shard is created with rows: the next run copies it (and only it);
4. after each step the target equals the union of the selected sources (+ _SOURCE_TABLE)
   exactly, `verify` says equal per source table, and a further run applies nothing;
5. rows changed outside the binlog: `--snapshot always` re-copies every shard (new epoch,
   a chunk slot per shard) and removes the rows a shard lost, only from its _SOURCE_TABLE.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.engine.runner import RunOptions, run_pipeline
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.model.pipeline import (
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    SchemaChangePolicy,
    TargetConfig,
)
from replicator.model.selection import TableSelection
from replicator.source.positions import current_position
from tests.integration.e2e_support import fakesnow_warehouse, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = "id, customer, amount, status, created_at"
TABLE = ("CREATE TABLE `{db}`.orders (id BIGINT PRIMARY KEY, customer VARCHAR(64), "
         "amount DECIMAL(12,2), status ENUM('new','paid','shipped'), created_at DATETIME(6){extra})")


@pytest.fixture
def shards(mariadb):
    """A prefix for this test's shard databases (dropped afterwards)."""
    prefix = f"rt{os.getpid() % 10000}_{uuid.uuid4().hex[:6]}"
    yield prefix
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE %s",
                       (prefix + "%",))
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP DATABASE `{name}`")


def _pipeline(mysql_source, prefix: str, tmp_path: Path, warehouse: Any, **engine: Any):
    pipeline = load_pipeline(ROOT / "pipelines" / "sharded.yaml", environ={})
    (table,) = pipeline.tables
    assert table.selection == TableSelection(("shop_[0-9]+\\.orders",), ("shop_0\\.orders",))
    selection = TableSelection((f"{prefix}_shop_[0-9]+\\.orders",), (f"{prefix}_shop_0\\.orders",))
    return dataclasses.replace(
        pipeline,
        source=mysql_source,
        target=TargetConfig(warehouse),
        tables=(dataclasses.replace(table, selection=selection),),
        batching=BatchPolicy(max_rows=50, max_delay_ms=300),
        engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint"), **engine),
    )


def _execute(root, statements) -> None:
    with root.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    root.commit()


def _setup(root, prefix: str) -> None:
    statements = []
    for n in (0, 1, 2):
        db = f"{prefix}_shop_{n}"
        statements += [f"CREATE DATABASE `{db}`",
                       TABLE.format(db=db, extra=", region VARCHAR(8)" if n == 2 else "")]
        for i in (1, 2, 3):
            region = ", 'eu'" if n == 2 else ""
            statements.append(f"INSERT INTO `{db}`.orders VALUES ({i}, 'c{n}-{i}', {n}{i}.50, "
                              f"'new', '2024-0{n + 1}-0{i} 10:00:00.12345{i}'{region})")
    # Not selected: another table of a shard; a staging table renamed into a shard later.
    statements += [f"CREATE TABLE `{prefix}_shop_1`.customers (id INT PRIMARY KEY)",
                   f"INSERT INTO `{prefix}_shop_1`.customers VALUES (1)",
                   f"CREATE DATABASE `{prefix}_staging`",
                   TABLE.format(db=f"{prefix}_staging", extra=""),
                   f"INSERT INTO `{prefix}_staging`.orders VALUES (1, 'c5-1', 51.00, 'new', NULL), "
                   "(2, 'c5-2', 52.00, 'new', NULL)"]
    _execute(root, statements)


def _streamed_workload(root, prefix: str) -> None:
    s0, s1, s2 = (f"`{prefix}_shop_{n}`.orders" for n in (0, 1, 2))
    with root.cursor() as cursor:
        cursor.execute("BEGIN")
        for amount in ("1.01", "1.02", "1.03"):  # one key updated three times in one batch
            cursor.execute(f"UPDATE {s1} SET amount = {amount}, status = 'paid' WHERE id = 1")
        cursor.execute(f"UPDATE {s1} SET id = 20 WHERE id = 2")  # a key moves
        cursor.execute(f"DELETE FROM {s1} WHERE id = 3")
        cursor.execute(f"INSERT INTO {s1} VALUES (4, 'c1-4', 4.00, 'new', NULL)")
        cursor.execute("COMMIT")
    _execute(root, [
        f"INSERT INTO {s2} VALUES (4, 'c2-4', 24.00, 'shipped', NULL, 'us')",  # id 4 as in shop_1
        f"UPDATE {s2} SET region = NULL, customer = 'c2-1 \"quoted\" é' WHERE id = 1",
        f"DELETE FROM {s2} WHERE id = 2",
        # The excluded shard: none of this may arrive.
        f"INSERT INTO {s0} VALUES (9, 'c0-9', 9.00, 'new', NULL)",
        f"UPDATE {s0} SET amount = 0 WHERE id = 1",
        f"DELETE FROM {s0} WHERE id = 2",
        # New shards while streaming: LIKE (empty, rows follow) and ... SELECT (rows logged
        # after the CREATE in a ROW binlog).
        f"CREATE DATABASE `{prefix}_shop_3`",
        f"CREATE TABLE `{prefix}_shop_3`.orders LIKE {s1}",
        f"INSERT INTO `{prefix}_shop_3`.orders VALUES (1, 'c3-1', 31.00, 'new', NULL), "
        "(2, 'c3-2', 32.00, 'new', '2024-03-03 00:00:00')",
        f"UPDATE `{prefix}_shop_3`.orders SET status = 'paid' WHERE id = 2",
        f"CREATE DATABASE `{prefix}_shop_4`",
        f"CREATE TABLE `{prefix}_shop_4`.orders (PRIMARY KEY (id)) SELECT {COLUMNS} FROM {s1} "
        "WHERE id IN (1, 4)",
        f"DELETE FROM `{prefix}_shop_4`.orders WHERE id = 4",
        # Renamed into the selection: its rows were written under another name, so the run
        # copies it before streaming on.
        f"CREATE DATABASE `{prefix}_shop_5`",
        f"RENAME TABLE `{prefix}_staging`.orders TO `{prefix}_shop_5`.orders",
        f"UPDATE `{prefix}_shop_5`.orders SET status = 'paid' WHERE id = 1",
    ])


def _source_union(root, prefix: str) -> list[tuple]:
    """What the target must hold: every selected shard's rows, keyed by their table."""
    rows = []
    with root.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = "
                       "'orders' AND TABLE_SCHEMA LIKE %s AND TABLE_SCHEMA <> %s",
                       (prefix + "\\_shop\\_%", f"{prefix}_shop_0"))
        databases = sorted(str(db) for (db,) in cursor.fetchall())
        for db in databases:
            cursor.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA "
                           "= %s AND TABLE_NAME = 'orders' AND COLUMN_NAME = 'region'", (db,))
            region = "region" if cursor.fetchone()[0] else "NULL"
            cursor.execute(f"SELECT {COLUMNS}, {region} FROM `{db}`.orders ORDER BY id")
            rows += [(f"{db}.orders", *row) for row in cursor.fetchall()]
    return sorted(rows, key=lambda r: (r[0], r[1]))


def _target(connection) -> list[tuple]:
    cursor = connection.cursor()
    try:
        cursor.execute('SELECT "_SOURCE_TABLE", "ID", "CUSTOMER", "AMOUNT", "STATUS", '
                       '"CREATED_AT", "REGION" FROM "ORDERS" ORDER BY 1, 2')
        return [tuple(row) for row in cursor.fetchall()]
    finally:
        cursor.close()


def _assert_equal(pipeline, root, connect) -> list[tuple]:
    from replicator.verify import verify_pipeline

    expected = _source_union(root, pipeline_prefix(pipeline))
    with connect() as connection:
        assert _target(connection) == expected
    report = verify_pipeline(pipeline)
    assert report.equal, "\n".join(report.describe())
    assert sorted(t.source_table for t in report.tables) == sorted({r[0] for r in expected})
    assert all(t.source_rows == t.target_rows > 0 for t in report.tables)
    return expected


def pipeline_prefix(pipeline) -> str:
    return pipeline.tables[0].selection.include[0].split("_shop_")[0]


def _wait_caught_up(pipeline, timeout: float = 240) -> None:
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    head = current_position(pipeline.source)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        committed = checkpoint.committed()
        if committed and committed[1] >= head:
            return
        time.sleep(0.3)
    raise AssertionError(f"not caught up with {head} within {timeout} s")


def _scenario(spark, root, prefix: str, pipeline, connect) -> None:
    _setup(root, prefix)
    first = run(pipeline, spark)
    assert first.snapshot_rows == 6  # shop_1 and shop_2; shop_0 is excluded
    snapshot = _assert_equal(pipeline, root, connect)
    assert {r[0] for r in snapshot} == {f"{prefix}_shop_1.orders", f"{prefix}_shop_2.orders"}
    assert [r[1] for r in snapshot] == [1, 2, 3, 1, 2, 3]  # equal ids, distinct rows

    # Streaming, without --until-caught-up: new shards appear while the run is going.
    stop, notices, outcome = threading.Event(), [], []
    options = RunOptions(stop=stop, handle_signals=False, on_notice=notices.append)

    def forever() -> None:
        try:
            outcome.append(run_pipeline(pipeline, options, spark=spark))
        except BaseException as exc:  # reported by the assertions below
            outcome.append(exc)

    runner = threading.Thread(target=forever, daemon=True)
    runner.start()
    try:
        time.sleep(2)  # let the query start first: the new shards must arrive mid-stream
        _streamed_workload(root, prefix)
        _wait_caught_up(pipeline)
    finally:
        stop.set()
        runner.join(180)
    assert outcome, "the run did not stop within 180 s of the request"
    streamed = outcome[0]
    assert not isinstance(streamed, BaseException), repr(streamed)
    # The renamed table only: shop_4 (CREATE ... SELECT, whose CREATE MariaDB logs inside the
    # transaction of its rows, unseen by the DDL filter) streams from its first rows.
    assert streamed.snapshot_rows == 2, notices
    assert any("match a `sources:` selection" in n and f"{prefix}_shop_3.orders" in n
               for n in notices), notices
    assert any("renamed into a `sources:` selection" in n and f"{prefix}_shop_5.orders" in n
               for n in notices), notices
    rows = _assert_equal(pipeline, root, connect)
    by_key = {(r[0].split(".")[0][len(prefix) + 1:], r[1]): r for r in rows}
    assert by_key[("shop_1", 1)][3] == Decimal("1.03") and ("shop_1", 20) in by_key
    assert ("shop_1", 2) not in by_key and ("shop_2", 2) not in by_key
    assert by_key[("shop_2", 4)][2] == "c2-4" and by_key[("shop_1", 4)][2] == "c1-4"
    assert by_key[("shop_3", 2)][4] == "paid" and set(k for k in by_key if k[0] == "shop_4") == {
        ("shop_4", 1)}
    assert by_key[("shop_5", 1)][4] == "paid" and ("shop_5", 2) in by_key
    assert not any(k[0] == "shop_0" for k in by_key)

    # A shard created while the pipeline is stopped is copied by the next run, and only it.
    _execute(root, [
        f"CREATE DATABASE `{prefix}_shop_6`",
        TABLE.format(db=f"{prefix}_shop_6", extra=""),
        f"INSERT INTO `{prefix}_shop_6`.orders VALUES (1, 'c6-1', 61.00, 'new', NULL), "
        "(2, 'c6-2', 62.00, 'shipped', NULL)",
        f"UPDATE `{prefix}_shop_1`.orders SET status = 'shipped' WHERE id = 20",
    ])
    restarted = run(pipeline, spark)
    assert restarted.snapshot_rows == 2
    _assert_equal(pipeline, root, connect)
    again = run(pipeline, spark)
    assert (again.snapshot_rows, again.changes, again.rows) == (0, 0, 0)

    # Rows that change without a trace in the binlog: `--snapshot always` copies every shard
    # again and removes, per _SOURCE_TABLE, the rows its source no longer has.
    with root.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"DELETE FROM `{prefix}_shop_2`.orders WHERE id = 1")
        cursor.execute(f"INSERT INTO `{prefix}_shop_1`.orders VALUES (7, 'c1-7', 7.00, 'new', NULL)")
        root.commit()
        cursor.execute("SET SESSION sql_log_bin = 1")
    recopied = run(pipeline, spark, snapshot="always")
    final = _assert_equal(pipeline, root, connect)
    assert recopied.snapshot_rows == len(final) + 1  # every row copied, one lost row deleted
    keys = {(r[0].split(".")[0][len(prefix) + 1:], r[1]) for r in final}
    assert ("shop_2", 1) not in keys and {("shop_1", 1), ("shop_3", 1), ("shop_1", 7)} <= keys


def test_sharded_tables_into_duckdb(spark, mariadb, mysql_source, shards, tmp_path):
    import duckdb

    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = _pipeline(mysql_source, shards, tmp_path, DuckDBTarget(str(warehouse), schema="main"))
    root = mariadb.root_connection()
    try:
        _scenario(spark, root, shards, pipeline,
                  lambda: duckdb.connect(str(warehouse), read_only=True))
    finally:
        root.close()


def test_sharded_tables_into_snowflake_sql(spark, mariadb, mysql_source, shards, tmp_path,
                                           monkeypatch):
    root = mariadb.root_connection()
    try:
        with fakesnow_warehouse(tmp_path, monkeypatch) as (target, connect):
            pipeline = _pipeline(mysql_source, shards, tmp_path, target)
            _scenario(spark, root, shards, pipeline, connect)
    finally:
        root.close()


def _truncate_one_shard(root, prefix: str) -> None:
    """In one batch: changes of both shards, a TRUNCATE of shop_1, then changes of both
    again."""
    s1, s2 = (f"`{prefix}_shop_{n}`.orders" for n in (1, 2))
    _execute(root, [
        f"UPDATE {s1} SET status = 'paid' WHERE id = 1",  # emptied by the TRUNCATE
        f"UPDATE {s2} SET status = 'paid', customer = 'before' WHERE id = 1",  # kept
        f"TRUNCATE TABLE {s1}",
        f"INSERT INTO {s1} VALUES (2, 'c1-2 again', 2.00, 'new', NULL), "
        "(5, 'c1-5', 5.00, 'shipped', NULL)",
        f"UPDATE {s2} SET amount = 99.99 WHERE id = 2",
    ])


@pytest.mark.parametrize("kind", ["duckdb", "snowflake"])
def test_a_truncated_shard_empties_only_its_rows_of_the_shared_target(
        spark, mariadb, mysql_source, shards, tmp_path, monkeypatch, kind):
    """`truncate: follow` on a routed target: the shard's rows go (its
    `_SOURCE_TABLE`), the other shards' rows and their changes before the TRUNCATE in the
    same batch stay, and the shard's changes after it land."""
    import contextlib

    import duckdb

    root = mariadb.root_connection()
    try:
        with contextlib.ExitStack() as stack:
            if kind == "duckdb":
                warehouse = tmp_path / "warehouse.duckdb"
                target: Any = DuckDBTarget(str(warehouse), schema="main")
                connect = lambda: duckdb.connect(str(warehouse), read_only=True)  # noqa: E731
            else:
                target, connect = stack.enter_context(fakesnow_warehouse(tmp_path, monkeypatch))
            pipeline = dataclasses.replace(_pipeline(mysql_source, shards, tmp_path, target),
                                           schema_changes=SchemaChangePolicy(truncate="follow"))
            _setup(root, shards)
            run(pipeline, spark)
            _truncate_one_shard(root, shards)
            notices: list[str] = []
            run(pipeline, spark, on_notice=notices.append)
            assert any(f"{shards}_shop_1.orders: TRUNCATE followed" in n for n in notices), notices
            rows = _assert_equal(pipeline, root, connect)
            shop_1 = [r[1] for r in rows if r[0] == f"{shards}_shop_1.orders"]
            shop_2 = {r[1]: r for r in rows if r[0] == f"{shards}_shop_2.orders"}
            assert shop_1 == [2, 5] and sorted(shop_2) == [1, 2, 3]
            assert shop_2[1][2] == "before" and shop_2[2][3] == Decimal("99.99")
    finally:
        root.close()


@pytest.mark.parametrize("mode", ["changelog", "scd2"])
def test_a_truncated_shard_is_recorded_for_its_keys_only(
        spark, mariadb, mysql_source, shards, tmp_path, mode):
    """A routed target that keeps history: the TRUNCATE ends (scd2) or records a delete of
    (changelog) the truncated shard's live keys only, at its position; the other shard's
    history is untouched, and its change after the TRUNCATE is a new version / row."""
    import duckdb

    from replicator.verify import verify_pipeline

    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = _pipeline(mysql_source, shards, tmp_path, DuckDBTarget(str(warehouse), schema="main"))
    (table,) = pipeline.tables
    pipeline = dataclasses.replace(pipeline, tables=(dataclasses.replace(table, mode=mode),),
                                   schema_changes=SchemaChangePolicy(truncate="follow"))
    root = mariadb.root_connection()
    try:
        _setup(root, shards)
        run(pipeline, spark)
        _truncate_one_shard(root, shards)
        run(pipeline, spark)
        report = verify_pipeline(pipeline)
        assert report.equal, "\n".join(report.describe())
        s1, s2 = f"{shards}_shop_1.orders", f"{shards}_shop_2.orders"
        with duckdb.connect(str(warehouse), read_only=True) as target:
            if mode == "scd2":
                current = target.execute(
                    'SELECT "_SOURCE_TABLE", "ID" FROM main."ORDERS" WHERE "_IS_CURRENT" '
                    "ORDER BY 1, 2").fetchall()
                assert current == [(s1, 2), (s1, 5), (s2, 1), (s2, 2), (s2, 3)]
                ended = target.execute(
                    'SELECT "ID", COUNT(*) FROM main."ORDERS" WHERE "_SOURCE_TABLE" = ? '
                    'AND NOT "_IS_CURRENT" GROUP BY 1 ORDER BY 1', [s1]).fetchall()
                assert ended == [(1, 2), (2, 1), (3, 1)]  # id 1: its update, then the end
                assert target.execute(
                    'SELECT COUNT(*) FROM main."ORDERS" WHERE "_SOURCE_TABLE" = ? '
                    'AND NOT "_IS_CURRENT"', [s2]).fetchone() == (2,)  # ids 1, 2 changed
            else:
                deletes = target.execute(
                    'SELECT "_SOURCE_TABLE", "ID" FROM main."ORDERS" WHERE "_OP" = \'d\' '
                    "ORDER BY 1, 2").fetchall()
                assert deletes == [(s1, 1), (s1, 2), (s1, 3)]
    finally:
        root.close()
