"""Recovery paths: a snapshot interrupted mid-copy resumes without redoing applied chunks; a DDL
the engine cannot follow stops the run with the remedy, and the remedy works."""

from __future__ import annotations

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine import snapshot
from replicator.errors import EngineError
from replicator.model.pipeline import DuckDBTarget
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def _target(path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)


def test_interrupted_snapshot_resumes_at_the_first_group_not_applied(
    spark, mariadb, mysql_source, fresh_database, tmp_path, monkeypatch
):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=30, orders=200, awkward=30)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))

    applied: list[tuple[str, int]] = []
    original = snapshot.apply_group

    def crash_on_the_fourth_chunk(applier, table_plan, chunk_index, paths, position, **options):
        if len(applied) == 3:
            raise RuntimeError("simulated crash mid-snapshot")
        applied.append((table_plan.source_name, chunk_index))
        return original(applier, table_plan, chunk_index, paths, position, **options)

    monkeypatch.setattr(snapshot, "apply_group", crash_on_the_fourth_chunk)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(pipeline, spark, chunk_rows=5)
    assert len(applied) == 3
    before_crash = list(applied)

    def record(applier, table_plan, chunk_index, paths, position, **options):
        applied.append((table_plan.source_name, chunk_index))
        return original(applier, table_plan, chunk_index, paths, position, **options)

    monkeypatch.setattr(snapshot, "apply_group", record)
    apply_changes(root, fresh_database, rounds=5)  # changes during the interruption
    resumed = run(pipeline, spark, chunk_rows=5)
    # The groups of chunks applied before the crash were not copied again (200 orders in
    # chunks of 5 are 5 groups of APPLY_GROUP chunks); the copy went on from there.
    after_crash = applied[3:]
    assert after_crash and not set(before_crash) & set(after_crash)
    assert len(set(applied)) == len(applied) and resumed.snapshot_rows > 0
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
    root.close()


def test_unfollowable_ddl_stops_with_the_remedy_and_snapshot_always_recovers(
    spark, mariadb, mysql_source, fresh_database, tmp_path
):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=20, awkward=10)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    run(pipeline, spark)

    with root.cursor() as cursor:
        # TRUNCATE stops by default (`schema_changes: {truncate: stop}`); the rows come back
        # right after it, so only a re-copy can tell what the target should hold.
        cursor.execute(f"CREATE TABLE `{fresh_database}`.kept AS SELECT * FROM `{fresh_database}`.orders")
        cursor.execute(f"TRUNCATE TABLE `{fresh_database}`.orders")
        cursor.execute(f"INSERT INTO `{fresh_database}`.orders SELECT * FROM `{fresh_database}`.kept")
        cursor.execute(f"UPDATE `{fresh_database}`.orders SET status = 'after' WHERE id < 5")
    with pytest.raises(EngineError) as stopped:
        run(pipeline, spark)
    assert "TRUNCATE" in stopped.value.message
    assert "--snapshot always" in (stopped.value.hint or "")

    # The remedy: copy again and start a new epoch; the old state rows do not get in the way.
    again = run(pipeline, spark, snapshot="always")
    assert again.snapshot_rows == 10 + 20 + 10
    with root.cursor() as cursor:
        cursor.execute(f"UPDATE `{fresh_database}`.customers SET name = 'later' WHERE id = 1")
    later = run(pipeline, spark)
    assert later.changes == 1 and later.rows == 1
    with _target(warehouse) as target:
        names = target.execute('SELECT "NAME" FROM main."CUSTOMERS" WHERE "ID" = 1').fetchone()
        assert names == ("later",)
        statuses = target.execute('SELECT COUNT(*) FROM main."ORDERS" WHERE "STATUS" = \'after\'')
        assert statuses.fetchone() == (4,)
    root.close()
