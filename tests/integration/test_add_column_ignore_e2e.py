"""`schema_changes.add_column: ignore` end to end (issue 18), on the real MariaDB, local Spark
and DuckDB, with writes before and after every DDL: a column added in MySQL while the run
streams, and one added while it is stopped, never reach the target; the other columns stream
on; `verify` finds no difference; a restart keeps them out (the checkpoint's record, and the
target lacking them); a later DROP COLUMN of an ignored column changes nothing; `plan --ddl`
says the column is ignored.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from replicator.context import IGNORED_COLUMNS_FILE, Context
from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.model.pipeline import DuckDBTarget, SchemaChangePolicy
from tests.integration.e2e_support import (
    assert_target_equals_source,
    demo_pipeline,
    run,
    warehouse,  # noqa: F401 (the fixture: each test on DuckDB and on fakesnow)
)
from tests.integration.test_schema_policies_e2e import Streaming

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def test_added_columns_are_ignored_while_streaming_while_stopped_and_after_a_restart(
        spark, mariadb, mysql_source, fresh_database, tmp_path, warehouse):  # noqa: F811
    from replicator.cli.plan_ddl import preview_ddl
    from replicator.plan import get_dialect
    from replicator.verify.compare import verify_pipeline

    target_config, _target = warehouse
    root = mariadb.root_connection()
    streaming = None
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=30, orders=120, awkward=10)
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, target_config,
                                 max_rows=5000)
        pipeline = dataclasses.replace(pipeline,
                                       schema_changes=SchemaChangePolicy(add_column="ignore"))
        run(pipeline, spark)
        db = f"`{fresh_database}`"

        # While streaming: the ADD COLUMN arrives with rows before and after it in one batch.
        streaming = Streaming(pipeline, spark, root)
        with root.cursor() as cursor:
            cursor.execute(f"UPDATE {db}.orders SET status = 'streaming' WHERE id = 1")
        streaming.caught_up()
        with root.cursor() as cursor:
            apply_changes(root, fresh_database, rounds=2, seed_value=1, first_new_id=10_000)
            cursor.execute(f"ALTER TABLE {db}.orders ADD COLUMN secret INT NOT NULL DEFAULT 5")
            cursor.execute(f"UPDATE {db}.orders SET secret = 9, status = 'after add' "
                           "WHERE id % 4 = 0")
            apply_changes(root, fresh_database, rounds=2, seed_value=2, first_new_id=20_000)
        streaming.caught_up()
        streaming.close()
        notices, streaming = streaming.notices, None
        assert any("adds column secret" in n and "ignored" in n for n in notices), notices
        with _target() as target:
            assert "SECRET" not in target.columns("ORDERS")
            assert target.execute("SELECT count(*) FROM ORDERS WHERE STATUS = 'after add'"
                                  ).fetchone()[0] > 0
            assert_target_equals_source(pipeline, root, target)
        recorded = json.loads((tmp_path / "checkpoint" / IGNORED_COLUMNS_FILE).read_text())
        assert recorded == {f"{fresh_database}.orders": ["secret"]}

        # While stopped: the next run finds the column at start-up and leaves it out.
        with root.cursor() as cursor:
            cursor.execute(f"UPDATE {db}.orders SET status = 'while stopped' WHERE id < 20")
            cursor.execute(f"ALTER TABLE {db}.orders ADD COLUMN later VARCHAR(10) DEFAULT 'x'")
            cursor.execute(f"UPDATE {db}.orders SET later = 'y', status = 'after later' "
                           "WHERE id % 3 = 0")
            cursor.execute(f"INSERT INTO {db}.orders (id, customer_id, status, total, "
                           "updated_at, secret, later) VALUES (30001, 1, 'new', 1.5, NOW(6), "
                           "3, 'z')")
        result = run(pipeline, spark)
        assert result.changes > 0
        with _target() as target:
            columns = target.columns("ORDERS")
            assert "SECRET" not in columns and "LATER" not in columns
            assert target.execute("SELECT STATUS FROM ORDERS WHERE ID = 30001").fetchone() \
                == ("new",)
            assert_target_equals_source(pipeline, root, target)
        assert verify_pipeline(pipeline).equal

        # `plan` (no target connection) and `plan --ddl` know them.
        context = Context(pipeline)
        orders = next(t for t in context.plan.tables if t.source_table == "orders")
        assert orders.ignored == ("secret", "later")
        effects = preview_ddl(pipeline, context.catalog, context.plan,
                              f"ALTER TABLE {fresh_database}.orders ADD COLUMN more INT",
                              get_dialect("duckdb" if isinstance(target_config, DuckDBTarget)
                                          else "snowflake"))
        assert [e.action for e in effects] == ["ignore"], effects
        assert "ignored" in effects[0].what and not effects[0].statements

        # A restart, a DROP COLUMN of an ignored column (nothing to follow), and more writes.
        with root.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {db}.orders DROP COLUMN secret")
            cursor.execute(f"UPDATE {db}.orders SET status = 'after drop', later = 'w' "
                           "WHERE id % 5 = 0")
            cursor.execute(f"DELETE FROM {db}.orders WHERE id = 30001")
        run(pipeline, spark)
        with _target() as target:
            columns = target.columns("ORDERS")
            assert "SECRET" not in columns and "LATER" not in columns
            assert target.execute("SELECT count(*) FROM ORDERS WHERE STATUS = 'after drop'"
                                  ).fetchone()[0] > 0
            assert_target_equals_source(pipeline, root, target)
        assert verify_pipeline(pipeline).equal
    finally:
        if streaming is not None:
            streaming.stop.set()
            streaming.thread.join(timeout=300)
        root.close()


def test_a_lost_checkpoint_record_is_recovered_from_the_target(
        spark, mariadb, mysql_source, fresh_database, tmp_path, warehouse):  # noqa: F811
    """The target is the other memory: without the checkpoint's record, a column the target
    lacks on a table whose policy is ignore stays ignored (verify finds it so, read-only), and
    switching the table to `add_column: follow` brings it in."""
    from replicator.verify.compare import verify_pipeline

    target_config, _target = warehouse
    root = mariadb.root_connection()
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=10, orders=30, awkward=5)
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, target_config,
                                 max_rows=5000)
        ignoring = dataclasses.replace(pipeline,
                                       schema_changes=SchemaChangePolicy(add_column="ignore"))
        run(ignoring, spark)
        db = f"`{fresh_database}`"
        with root.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {db}.customers ADD COLUMN nick VARCHAR(20) DEFAULT 'n'")
        # verify before any run: the target lacks it, the policy ignores it; nothing recorded
        assert verify_pipeline(ignoring).equal
        assert not (tmp_path / "checkpoint" / IGNORED_COLUMNS_FILE).exists()
        run(ignoring, spark)
        record = tmp_path / "checkpoint" / IGNORED_COLUMNS_FILE
        assert json.loads(record.read_text()) == {f"{fresh_database}.customers": ["nick"]}
        record.unlink()
        with root.cursor() as cursor:
            cursor.execute(f"UPDATE {db}.customers SET name = 'again', nick = 'q' WHERE id = 2")
        run(ignoring, spark)
        with _target() as target:
            assert "NICK" not in target.columns("CUSTOMERS")
            assert_target_equals_source(ignoring, root, target)
        # The policy decides each time: follow adds the column (its DEFAULT for old rows).
        run(pipeline, spark)
        with _target() as target:
            assert "NICK" in target.columns("CUSTOMERS")
            assert target.execute("SELECT count(*) FROM CUSTOMERS WHERE NICK = 'n'"
                                  ).fetchone()[0] >= 9
    finally:
        root.close()
