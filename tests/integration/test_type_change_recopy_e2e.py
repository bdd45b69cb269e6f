"""A type change the target cannot do in place (`schema_changes.type_change`, issue 18), on the
real MariaDB, the real local Spark, and DuckDB or the Snowflake sink's SQL on fakesnow, with
writes before, at and after the DDL:

- while streaming: INT -> VARCHAR and a DECIMAL's scale up: the target columns are re-created
  in the new types and the table is copied again chunk by chunk while the other tables stream
  on; the pipeline never stops and the target ends equal to the source row by row;
- while no run followed it (the next run's plan already has the new type, so the DDL's batch
  finds nothing to change): the start-up finds the target column of another kind and does
  the same, or stops naming both types under `type_change: stop`.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.errors import EngineError
from replicator.model.pipeline import DuckDBTarget, SchemaChangePolicy
from tests.integration.e2e_support import (
    assert_target_equals_source,
    demo_pipeline,
    run,
    warehouse,  # noqa: F401 (the fixture: each test on DuckDB and on fakesnow)
)
from tests.integration.test_schema_policies_e2e import Streaming

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

MODIFY = ("ALTER TABLE {db}.orders MODIFY customer_id VARCHAR(40) NOT NULL, "
          "MODIFY total DECIMAL(14,4) NOT NULL")
# The target's types of orders' customer_id and total: before the DDL, and after it.
BEFORE = {"duckdb": ("INTEGER", "DECIMAL(12,2)"), "snowflake": ("NUMBER(10,0)", "NUMBER(12,2)")}
AFTER = {"duckdb": ("VARCHAR", "DECIMAL(14,4)"), "snowflake": ("TEXT", "NUMBER(14,4)")}


def _after_the_ddl(cursor, db):
    """Values only the new types hold, quotes and emoji included."""
    cursor.execute(f"UPDATE {db}.orders SET customer_id = CONCAT('c-', customer_id, ' ''q'' 🚀'), "
                   "total = total + 0.0001 WHERE id % 3 = 0")
    cursor.execute(f"INSERT INTO {db}.orders (id, customer_id, status, total, updated_at) "
                   "VALUES (70001, 'x\\\\y', 'after', 1.2345, NOW(6))")


def _wait_for(streaming, text, timeout=600.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if streaming.failure is not None:
            raise streaming.failure
        if any(text in notice for notice in streaming.notices):
            return
        time.sleep(0.5)
    raise AssertionError(f"no notice with {text!r}: {streaming.notices}")


def _types(target):
    types = target.types("ORDERS")
    return types["CUSTOMER_ID"], types["TOTAL"]


def test_a_type_change_while_streaming_re_creates_the_column_and_copies_the_table(
        spark, mariadb, mysql_source, fresh_database, tmp_path, warehouse):  # noqa: F811
    root = mariadb.root_connection()
    streaming = None
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=30, orders=300, awkward=10)
        target_config, _target = warehouse
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, target_config,
                                 max_rows=5000)
        run(pipeline, spark)

        streaming = Streaming(pipeline, spark, root)
        db = f"`{fresh_database}`"
        with root.cursor() as cursor:
            cursor.execute(f"UPDATE {db}.orders SET status = 'streaming' WHERE id = 1")
        streaming.caught_up()
        with root.cursor() as cursor:
            # Changes before the DDL land in its batch (max_rows is large): the copy, not
            # their old-typed images, brings those rows to the target.
            apply_changes(root, fresh_database, rounds=3, seed_value=1, first_new_id=10_000)
            cursor.execute(f"DELETE FROM {db}.orders WHERE id IN (2, 3)")
            cursor.execute(MODIFY.format(db=db))
            _after_the_ddl(cursor, db)
            apply_changes(root, fresh_database, rounds=3, seed_value=2, first_new_id=20_000)
        _wait_for(streaming, f"re-copy of {fresh_database}.orders done")
        with root.cursor() as cursor:  # the others streamed on; the copied table does too
            apply_changes(root, fresh_database, rounds=2, seed_value=3, first_new_id=30_000)
        streaming.caught_up()
        streaming.close()

        notices = streaming.notices
        assert any("column(s) CUSTOMER_ID, TOTAL re-created in the new type" in n
                   for n in notices), notices
        kinds = [report.kind for report in streaming.reports]
        assert "recopy" in kinds and kinds[kinds.index("recopy"):].count("stream") >= 1, kinds
        with _target() as target:
            assert _types(target) == AFTER[target.kind]
            assert_target_equals_source(pipeline, root, target)
            assert target.execute("SELECT CUSTOMER_ID FROM ORDERS WHERE ID = 70001"
                                  ).fetchone() == ("x\\y",)
            assert target.execute("SELECT count(*) FROM ORDERS WHERE CUSTOMER_ID LIKE "
                                  "'c-% ''q'' 🚀'").fetchone()[0] >= 90
    finally:
        if streaming is not None:  # a failed assertion must not leave the query running
            streaming.stop.set()
            streaming.thread.join(timeout=300)
        root.close()


@pytest.mark.parametrize("policy", ["recopy", "stop"])
def test_a_type_change_while_no_run_followed_it_is_found_at_start_up(
        spark, mariadb, mysql_source, fresh_database, tmp_path, policy, warehouse):  # noqa: F811
    root = mariadb.root_connection()
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=15, orders=120, awkward=5)
        target_config, _target = warehouse
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, target_config)
        pipeline = dataclasses.replace(
            pipeline, schema_changes=SchemaChangePolicy(type_change=policy))
        run(pipeline, spark)
        db = f"`{fresh_database}`"
        with root.cursor() as cursor:
            apply_changes(root, fresh_database, rounds=2, seed_value=1, first_new_id=10_000)
            cursor.execute(MODIFY.format(db=db))
            _after_the_ddl(cursor, db)

        notices: list[str] = []
        if policy == "stop":
            with pytest.raises(EngineError) as stopped:
                run(pipeline, spark, on_notice=notices.append)
            described = "INTEGER" if isinstance(target_config, DuckDBTarget) else "NUMBER(10,0)"
            assert ("column customer_id changed type while no run followed it: target column "
                    f"CUSTOMER_ID is {described}, the plan's string is not a widening the "
                    "target can do in place") in stopped.value.message
            assert "`type_change: recopy`" in (stopped.value.hint or "")
            with _target() as target:  # nothing changed in the target
                assert _types(target) == BEFORE[target.kind]
            return
        again = run(pipeline, spark, on_notice=notices.append)
        assert again.snapshot_rows >= 120, notices
        assert any("column(s) CUSTOMER_ID, TOTAL re-created in the new type" in n
                   for n in notices), notices
        with _target() as target:
            assert _types(target) == AFTER[target.kind]
            assert_target_equals_source(pipeline, root, target)
    finally:
        root.close()
