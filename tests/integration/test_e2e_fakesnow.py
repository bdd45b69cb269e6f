"""End to end with the Snowflake sink's SQL, on fakesnow (DuckDB underneath).

The Snowflake sink runs on the Spark driver, so ``fakesnow.patch()`` in this (driver) process
is enough: executors only read the binlog. Same scenario as the DuckDB test, smaller.
"""

from __future__ import annotations

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.model.pipeline import SnowflakeTarget
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

fakesnow = pytest.importorskip("fakesnow")


def test_snapshot_and_stream_into_snowflake_sql(spark, mariadb, mysql_source, fresh_database,
                                                tmp_path, monkeypatch):
    for name in list(__import__("os").environ):
        if name.startswith("SNOWFLAKE_"):
            monkeypatch.delenv(name)
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=20, orders=120, awkward=40)
    target = SnowflakeTarget(database="ANALYTICS", schema="RAW", account="fake", user="fake",
                             password="fake")
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, target, name="e2e-snow")
    (tmp_path / "fakesnow").mkdir()
    with fakesnow.patch(db_path=str(tmp_path / "fakesnow")):
        import snowflake.connector

        first = run(pipeline, spark)
        assert first.snapshot_rows == 20 + 120 + 40
        apply_changes(root, fresh_database, rounds=10)
        with root.cursor() as cursor:
            cursor.execute(f"ALTER TABLE `{fresh_database}`.orders ADD COLUMN note VARCHAR(50)")
            cursor.execute(f"UPDATE `{fresh_database}`.orders SET note = 'it''s new' WHERE id < 30")
        second = run(pipeline, spark)
        assert second.changes > 0 and second.rows > 0
        connection = snowflake.connector.connect(
            account="fake", user="fake", password="fake", database="ANALYTICS", schema="RAW"
        )
        try:
            assert_target_equals_source(pipeline, root, connection)
        finally:
            connection.close()
        again = run(pipeline, spark)
        assert (again.changes, again.rows) == (0, 0)
    root.close()
