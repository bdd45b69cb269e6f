"""End to end into DuckDB: real MariaDB, real local Spark, the real `run` path.

Snapshot of existing rows, then a workload (inserts, updates, deletes, one key updated several
times in one batch, primary key changes, multi-table transactions, every awkward value), an
added column mid-stream; after each `--until-caught-up` run the target equals the source row
by row, and a run with nothing new applies nothing.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from replicator.demo.workload import BIGINT_UNSIGNED_MAX, apply_changes, create_schema, seed
from replicator.model.pipeline import DuckDBTarget
from tests.integration.e2e_support import (
    assert_target_equals_source,
    demo_pipeline,
    differences,
    run,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def _target(path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)


def test_snapshot_stream_schema_change_and_idempotent_rerun(
    spark, mariadb, mysql_source, fresh_database, tmp_path
):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=40, orders=300, awkward=70)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(
        mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)), max_rows=100
    )

    first = run(pipeline, spark)
    assert first.snapshot_rows == 40 + 300 + 70
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)

    made = apply_changes(root, fresh_database, rounds=25)
    with _target(warehouse) as target:  # the comparison sees what is not replicated yet
        assert len(differences(pipeline, root, target)) == 3
    second = run(pipeline, spark)
    # Some statements of the workload touch no row; max_rows=100 splits the work in batches.
    assert second.changes >= made * 0.7 and second.batches >= 2
    assert second.snapshot_rows == 0
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
        # Spot checks of values that are easy to mangle, beyond the generic comparison.
        ids = {row[0] for row in target.execute('SELECT "ID" FROM main."AWKWARD"').fetchall()}
        assert Decimal(BIGINT_UNSIGNED_MAX - 7) in ids or BIGINT_UNSIGNED_MAX - 7 in ids
        notes = {row[0] for row in target.execute('SELECT "NOTE" FROM main."AWKWARD"').fetchall()}
        assert None in notes and "None" in notes

    with root.cursor() as cursor:
        cursor.execute(f"ALTER TABLE `{fresh_database}`.customers ADD COLUMN loyalty INT NULL")
        cursor.execute(f"UPDATE `{fresh_database}`.customers SET loyalty = id * 10 WHERE id < 20")
        cursor.execute(f"INSERT INTO `{fresh_database}`.customers (id, name, loyalty) "
                       "VALUES (1000, 'after the ALTER', 7)")
    third = run(pipeline, spark)
    assert third.changes >= 20
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
        loyalty = target.execute('SELECT "LOYALTY" FROM main."CUSTOMERS" WHERE "ID" = 1000').fetchone()
        assert loyalty == (7,)

    again = run(pipeline, spark)
    assert (again.changes, again.rows, again.snapshot_rows) == (0, 0, 0)
    root.close()


def test_parallel_decode_partitions_keep_the_global_order(spark, mariadb, mysql_source,
                                                          fresh_database, tmp_path):
    import dataclasses

    from replicator.model.pipeline import EngineConfig

    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=5, orders=5, awkward=5)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    pipeline = dataclasses.replace(
        pipeline, engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint"), decode_partitions=3)
    )
    run(pipeline, spark)
    with root.cursor() as cursor:  # one key changed in 150 transactions spread over partitions
        for step in range(150):
            cursor.execute(f"UPDATE `{fresh_database}`.customers SET name = %s WHERE id = 1",
                           (f"step {step}",))
            if step % 50 == 49:
                cursor.execute(f"DELETE FROM `{fresh_database}`.customers WHERE id = 2")
                cursor.execute(f"INSERT INTO `{fresh_database}`.customers (id, name) "
                               "VALUES (2, %s)", (f"reborn {step}",))
    result = run(pipeline, spark)
    assert result.changes == 150 + 2 * 3
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
        assert target.execute('SELECT "NAME" FROM main."CUSTOMERS" WHERE "ID" = 1').fetchone() == (
            "step 149",
        )
    root.close()


def test_by_default_a_full_batch_is_decoded_by_one_task_per_core(spark, mariadb, mysql_source,
                                                                 fresh_database, tmp_path):
    """engine.decode_partitions: auto on the suite's local[2] session: a batch of 10,000 row
    changes is cut into two ranges, each decoded by a task of its own (a landing directory
    each), and the target still equals the source."""
    import dataclasses

    from replicator.model.pipeline import BatchPolicy

    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=5, orders=5, awkward=5)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    pipeline = dataclasses.replace(pipeline, batching=BatchPolicy(max_rows=10_000,
                                                                  max_delay_ms=500))
    assert pipeline.engine.decode_partitions == "auto"
    run(pipeline, spark)
    # 20 transactions of 500 single-row INSERTs (one rows event each: the range's cuts count
    # rows by event, binlog_ranges)
    with root.cursor() as cursor:
        for txn in range(20):
            cursor.execute("BEGIN")
            for n in range(500):
                cursor.execute(f"INSERT INTO `{fresh_database}`.customers (id, name) "
                               "VALUES (%s, %s)", (1000 + txn * 500 + n, f"bulk {txn}/{n}"))
            cursor.execute("COMMIT")
    result = run(pipeline, spark)
    assert result.changes == 10_000
    landed = [path for path in (tmp_path / "checkpoint" / "landing" / "stream").glob("*/*")
              if path.is_dir()]
    assert len(landed) > result.batches, (result.batches, sorted(p.name for p in landed))
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
    root.close()
