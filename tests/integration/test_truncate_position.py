"""After a TRUNCATE the pipeline follows (`schema_changes: {truncate: follow}`), the position a
run records is the binlog head it caught up with, as after any other change: `status` shows
no lag and the next run reads nothing again (a report had it 2,086 bytes short at start-up).
The real MariaDB, the real local Spark, a DuckDB target."""

from __future__ import annotations

import dataclasses

import duckdb
import pytest

from replicator.cli.status import collect_status
from replicator.demo.workload import create_schema, seed
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import DuckDBTarget, SchemaChangePolicy
from tests.integration.e2e_support import demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def _head(root) -> BinlogPosition:
    with root.cursor() as cursor:
        cursor.execute("SHOW MASTER STATUS")
        file, pos = cursor.fetchone()[:2]
    return BinlogPosition(file, int(pos))


def test_after_a_followed_truncate_the_recorded_position_is_the_binlog_head(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection()
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=10, orders=40, awkward=5)
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path,
                                 DuckDBTarget(str(tmp_path / "warehouse.duckdb")), max_rows=5000)
        pipeline = dataclasses.replace(pipeline, tables=tuple(
            dataclasses.replace(t, schema_changes=SchemaChangePolicy(truncate="follow"))
            for t in pipeline.tables))
        run(pipeline, spark)
        checkpoint = CheckpointDir(pipeline.engine.checkpoint)
        head = _head(root)
        assert checkpoint.resume_position() == head  # the run before: caught up, no lag

        db = f"`{fresh_database}`"
        # A batch of the TRUNCATE alone, then one with changes before and after it.
        for statements in ([f"TRUNCATE TABLE {db}.orders"],
                           [f"UPDATE {db}.customers SET name = 'before' WHERE id < 5",
                            f"TRUNCATE TABLE {db}.customers",
                            *(f"INSERT INTO {db}.orders (id, customer_id, status, total, updated_at) "
                              f"VALUES ({n}, 1, 'after', 2.50, NOW(6))" for n in range(1, 11)),
                            f"DELETE FROM {db}.orders WHERE id = 3"]):
            with root.cursor() as cursor:
                for sql in statements:
                    cursor.execute(sql)
            head = _head(root)
            notices: list[str] = []
            followed = run(pipeline, spark, on_notice=notices.append)
            assert any("TRUNCATE followed" in n for n in notices), notices
            assert (followed.end, checkpoint.resume_position()) == (head, head), notices
            status = collect_status(pipeline)
            assert (status["position"], status["head"], status["lag_bytes"]) == (
                str(head), str(head), 0)

            again = run(pipeline, spark)  # from the head: nothing read, nothing followed twice
            assert (again.changes, again.end, checkpoint.resume_position()) == (0, head, head)
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as target:
            assert target.execute("SELECT count(*) FROM CUSTOMERS").fetchone() == (0,)
            assert target.execute("SELECT count(*) FROM ORDERS").fetchone() == (9,)
    finally:
        root.close()
