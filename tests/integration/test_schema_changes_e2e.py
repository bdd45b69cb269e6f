"""DDL that changes nothing replicated never stops the pipeline (issue 18, item 1), on the
real MariaDB, the real local Spark and DuckDB.

A writer's changes interleave with index, key, constraint, default, comment, table-option,
rebuild and partitioning DDL on a replicated table; one ALTER adds a column beside an index.
The run streams through all of it, says what it ignored, and the target ends equal to the
source row by row (awkward values included). A DROP PARTITION -- rows removed without row
events -- still stops the run, with the documented message, never a traceback.
"""

from __future__ import annotations

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.errors import EngineError
from replicator.model.pipeline import DuckDBTarget
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

HARMLESS = [
    "ALTER TABLE {t} ADD INDEX idx_status (status)",
    "CREATE INDEX idx_total ON {t} (total)",
    "ALTER TABLE {t} ALGORITHM=INPLACE, LOCK=NONE, ADD UNIQUE KEY uq_total_id (total, id)",
    "ALTER TABLE {t} ALTER COLUMN status SET DEFAULT 'new'",
    "ALTER TABLE {t} COMMENT = 'orders, with a comment'",
    "ALTER TABLE {t} RENAME INDEX idx_status TO idx_status_2",
    "ALTER TABLE {t} DROP INDEX idx_status_2",
    "DROP INDEX idx_total ON {t}",
    "ALTER TABLE {t} ADD CONSTRAINT chk_total CHECK (total > -1000000)",
    "ALTER TABLE {t} DROP CONSTRAINT chk_total",
    "ALTER TABLE {t} FORCE",
    "ALTER TABLE {t} ENGINE=InnoDB",
    "OPTIMIZE TABLE {t}",
    "ANALYZE TABLE {t}",
]


def _target(path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)


def test_ddl_that_changes_nothing_replicated_streams_on(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection()
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=20, orders=100, awkward=30)
        warehouse = tmp_path / "warehouse.duckdb"
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path,
                                 DuckDBTarget(str(warehouse)), max_rows=40)
        run(pipeline, spark)

        orders = f"`{fresh_database}`.orders"
        with root.cursor() as cursor:
            for n, statement in enumerate(HARMLESS):
                # The writer keeps going (fresh ids each time).
                apply_changes(root, fresh_database, rounds=2, seed_value=n,
                              first_new_id=100_000 + 100 * n)
                cursor.execute(statement.format(t=orders))
            # A column added beside an index: followed (re-plan, ALTER the target).
            cursor.execute(f"ALTER TABLE {orders} ADD COLUMN channel VARCHAR(16) NULL, "
                           "ADD KEY idx_channel (channel)")
            cursor.execute(f"UPDATE {orders} SET channel = 'web \"q\" 🚀' WHERE id % 3 = 0")
        root.commit()
        apply_changes(root, fresh_database, rounds=3, seed_value=99, first_new_id=200_000)

        notices: list[str] = []
        streamed = run(pipeline, spark, on_notice=notices.append)
        assert streamed.changes > 0 and not streamed.stopped
        ignored = [n for n in notices if "changes nothing replicated" in n]
        assert len(ignored) == len(HARMLESS) - 2, notices  # OPTIMIZE/ANALYZE are not DDL events
        assert any("adds an index" in n for n in ignored) and any("FORCE" in n for n in ignored)
        with _target(warehouse) as target:
            assert_target_equals_source(pipeline, root, target)
            columns = [row[0] for row in target.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'ORDERS'"
            ).fetchall()]
        assert "CHANNEL" in columns

        # Rows removed without row events: stop, with the message and the fix.
        with root.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {orders} PARTITION BY HASH (id) PARTITIONS 2")
            cursor.execute(f"INSERT INTO {orders} (id, customer_id, status, total, updated_at) "
                           "VALUES (900001, 1, 'new', 1.00, '2024-01-01 00:00:00.5')")
            cursor.execute(f"ALTER TABLE {orders} TRUNCATE PARTITION p0")
        root.commit()
        with pytest.raises(EngineError, match="TRUNCATE PARTITION changes rows without row events"):
            run(pipeline, spark)
    finally:
        root.close()
