"""A table renamed into a `sources:` selection is copied whatever the batch split (issue 21).

The run re-plans from the LIVE catalog, which is ahead of the binlog it applies. Here the
workload runs on the server right after the run has planned (before its stream applies a
batch), so when the run applies the CREATE of a new shard, the catalog already shows the
table that a later RENAME brings into the selection. Before the fix that table was taken as "streamed from its creation", and the
rows it got under its old name never reached the target; on a loaded machine the
test_routing_e2e scenario hit this by timing.

Each case forces another split around the RENAME -- one batch for everything, a batch per
transaction, the RENAME and the renamed table's rows in separate runs, and a stop requested
while the renamed table is being copied -- and ends with the target equal to the source row
by row (awkward values included) and `verify` equal.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.model.pipeline import BatchPolicy, DuckDBTarget, EngineConfig, TargetConfig
from replicator.model.selection import TableSelection
from tests.integration.e2e_support import run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TABLE = ("CREATE TABLE `{db}`.orders (id BIGINT PRIMARY KEY, customer VARCHAR(64), "
         "amount DECIMAL(12,2), status ENUM('new','paid','shipped'), created_at DATETIME(6))")
AWKWARD = [  # rows written under the staging name, before the RENAME
    "(1, 'it''s \"q\" \\\\ back', 1.50, 'new', '2024-01-01 10:00:00.123456')",
    "(2, 'None', 2.50, 'paid', NULL)",
    "(3, NULL, 3.50, 'shipped', '2024-02-29 23:59:59.999999')",
    "(4, '🚀 émoji', 4.50, 'new', NULL)",
]


@pytest.fixture
def prefix(mariadb):
    name = f"rr{os.getpid() % 10000}_{uuid.uuid4().hex[:6]}"
    yield name
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE %s",
                       (name + "%",))
        for (database,) in cursor.fetchall():
            cursor.execute(f"DROP DATABASE `{database}`")


def _pipeline(mysql_source, prefix: str, tmp_path: Path, max_rows: int):
    pipeline = load_pipeline(ROOT / "pipelines" / "sharded.yaml", environ={})
    (table,) = pipeline.tables
    selection = TableSelection((f"{prefix}_shop_[0-9]+\\.orders",), ())
    return dataclasses.replace(
        pipeline,
        source=mysql_source,
        target=TargetConfig(DuckDBTarget(str(tmp_path / "warehouse.duckdb"), schema="main")),
        tables=(dataclasses.replace(table, selection=selection),),
        batching=BatchPolicy(max_rows=max_rows, max_delay_ms=200),
        engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint")),
    )


def _execute(root, *statements: str) -> None:
    with root.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    root.commit()


def _before_rename(prefix: str) -> list[str]:
    return [f"CREATE DATABASE `{prefix}_shop_3`",  # a new shard: streamed from its CREATE
            f"CREATE TABLE `{prefix}_shop_3`.orders LIKE `{prefix}_shop_1`.orders",
            f"INSERT INTO `{prefix}_shop_3`.orders VALUES (1, 'c3', 31.00, 'new', NULL)",
            f"UPDATE `{prefix}_shop_1`.orders SET status = 'paid' WHERE id = 1",
            f"CREATE DATABASE `{prefix}_shop_5`",
            f"RENAME TABLE `{prefix}_staging`.orders TO `{prefix}_shop_5`.orders"]


def _after_rename(prefix: str) -> list[str]:
    return [f"UPDATE `{prefix}_shop_5`.orders SET status = 'paid', amount = 1.75 WHERE id = 1",
            f"INSERT INTO `{prefix}_shop_5`.orders VALUES (9, 'c5-9', 9.00, 'new', NULL)",
            f"DELETE FROM `{prefix}_shop_5`.orders WHERE id = 3",
            f"INSERT INTO `{prefix}_shop_3`.orders VALUES (2, 'c3-2', 32.00, 'paid', NULL)"]


def _after_planning(monkeypatch, root, statements: list[str]) -> None:
    """Run ``statements`` once the next run has planned (and covered the tables it found),
    before its stream applies anything: the binlog it then applies is behind the catalog."""
    from replicator.context import Context

    plan_first = Context.plan

    def plan(context):
        planned = plan_first.fget(context)
        monkeypatch.setattr(Context, "plan", plan_first)
        _execute(root, *statements)
        return planned

    monkeypatch.setattr(Context, "plan", property(plan))


def _source_union(root, prefix: str) -> list[tuple]:
    rows = []
    with root.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = "
                       "'orders' AND TABLE_SCHEMA LIKE %s", (prefix + "\\_shop\\_%",))
        for database in sorted(str(db) for (db,) in cursor.fetchall()):
            cursor.execute(f"SELECT id, customer, amount, status, created_at FROM `{database}`."
                           "orders ORDER BY id")
            rows += [(f"{database}.orders", *row) for row in cursor.fetchall()]
    return sorted(rows, key=lambda r: (r[0], r[1]))


def _assert_target_equals_source(pipeline, root, prefix: str) -> None:
    import duckdb

    from replicator.verify import verify_pipeline

    expected = _source_union(root, prefix)
    with duckdb.connect(pipeline.target.warehouse.path, read_only=True) as connection:
        target = [tuple(row) for row in connection.execute(
            'SELECT "_SOURCE_TABLE", "ID", "CUSTOMER", "AMOUNT", "STATUS", "CREATED_AT" '
            'FROM "ORDERS" ORDER BY 1, 2').fetchall()]
    assert target == expected
    assert {r[0] for r in expected} == {f"{prefix}_shop_{n}.orders" for n in (1, 3, 5)}
    report = verify_pipeline(pipeline)
    assert report.equal, "\n".join(report.describe())


@pytest.mark.parametrize(("max_rows", "split"), [
    (1000, "one run"),   # CREATE, RENAME and the renamed table's rows in one batch
    (1, "one run"),      # a batch per transaction: the RENAME's batch, then its rows' batches
    (1000, "two runs"),  # the RENAME applied by one run, the renamed table's rows by the next
    (1, "stop mid-copy"),  # a stop requested while the renamed table is being copied
])
def test_a_table_renamed_into_a_selection_is_copied_whatever_the_split(
        spark, mariadb, mysql_source, prefix, tmp_path, monkeypatch, max_rows, split):
    root = mariadb.root_connection()
    try:
        _execute(root, f"CREATE DATABASE `{prefix}_shop_1`", TABLE.format(db=f"{prefix}_shop_1"),
                 f"INSERT INTO `{prefix}_shop_1`.orders VALUES (1, 'c1', 11.00, 'new', NULL)",
                 f"CREATE DATABASE `{prefix}_staging`", TABLE.format(db=f"{prefix}_staging"),
                 f"INSERT INTO `{prefix}_staging`.orders VALUES {', '.join(AWKWARD)}")
        pipeline = _pipeline(mysql_source, prefix, tmp_path, max_rows)
        assert run(pipeline, spark).snapshot_rows == 1  # shop_1; staging is not selected

        notices: list[str] = []
        stop = threading.Event()

        def notice(message: str) -> None:
            notices.append(message)
            if split == "stop mid-copy" and "copying before streaming on" in message:
                stop.set()  # the copy checks it between chunks: it stops before finishing

        if split == "two runs":
            _after_planning(monkeypatch, root, _before_rename(prefix))
            first = run(pipeline, spark, on_notice=notice)
            assert first.snapshot_rows == len(AWKWARD)  # the renamed table, copied at once
            _execute(root, *_after_rename(prefix))
            run(pipeline, spark)
        else:
            _after_planning(monkeypatch, root, _before_rename(prefix) + _after_rename(prefix))
            streamed = run(pipeline, spark, on_notice=notice, stop=stop,
                           chunk_rows=1 if split == "stop mid-copy" else None)
            if split == "stop mid-copy":
                assert streamed.stopped
                resumed = run(pipeline, spark)  # the next run finishes the copy, then streams
                assert resumed.snapshot_rows > 0
            else:
                # The renamed table's 4 rows; shop_3 streams from its CREATE (no copy).
                assert streamed.snapshot_rows == len(AWKWARD), notices
        assert any("renamed into a `sources:` selection" in n and f"{prefix}_shop_5.orders" in n
                   for n in notices), notices
        _assert_target_equals_source(pipeline, root, prefix)
        rows = {(r[0].split(".")[0][len(prefix) + 1:], r[1]): r for r in _source_union(root, prefix)}
        assert rows[("shop_5", 1)][3] == Decimal("1.75") and ("shop_5", 2) in rows
        again = run(pipeline, spark)
        assert (again.snapshot_rows, again.changes) == (0, 0)
    finally:
        root.close()
