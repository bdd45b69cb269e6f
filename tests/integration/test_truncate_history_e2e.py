"""`schema_changes.truncate: follow` in tables that keep history (issue 18), on the real
MariaDB, local Spark and DuckDB: in a changelog table a TRUNCATE is one delete row per key
live before it, at its binlog position; in an scd2 table every current version ends at its
commit time. Changes before the TRUNCATE in its batch are kept in the history; changes after
it follow it; a run again over the same binlog records nothing twice.
"""

from __future__ import annotations

import dataclasses

import pytest

from replicator.demo.workload import create_schema, seed
from replicator.model.pipeline import DuckDBTarget, SchemaChangePolicy
from tests.integration.e2e_support import demo_pipeline, run
from tests.integration.test_schema_policies_e2e import Streaming, _target

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def test_truncate_is_recorded_in_changelog_and_scd2_tables(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection()
    streaming = None
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=20, orders=40, awkward=5)
        warehouse = tmp_path / "warehouse.duckdb"
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path,
                                 DuckDBTarget(str(warehouse)), max_rows=5000)
        modes = {"orders": "changelog", "customers": "scd2"}
        pipeline = dataclasses.replace(pipeline, tables=tuple(
            dataclasses.replace(t, mode=modes[t.source_table], metadata=(),
                                schema_changes=SchemaChangePolicy(truncate="follow"))
            for t in pipeline.tables if t.source_table in modes))
        run(pipeline, spark)
        db = f"`{fresh_database}`"
        streaming = Streaming(pipeline, spark, root)
        with root.cursor() as cursor:
            cursor.execute(f"UPDATE {db}.orders SET status = 'streaming' WHERE id = 1")
        streaming.caught_up()
        with root.cursor() as cursor:
            # In one batch: changes before (kept in the history), the TRUNCATEs, changes after.
            cursor.execute(f"UPDATE {db}.orders SET status = 'before' WHERE id <= 5")
            cursor.execute(f"DELETE FROM {db}.orders WHERE id = 6")
            cursor.execute(f"INSERT INTO {db}.orders (id, customer_id, status, total, "
                           "updated_at) VALUES (500, 1, 'new before', 1.0, NOW(6))")
            cursor.execute(f"UPDATE {db}.customers SET name = 'renamed before' WHERE id = 2")
            cursor.execute(f"TRUNCATE TABLE {db}.orders")
            cursor.execute("SHOW MASTER STATUS")
            truncate_file = cursor.fetchone()[0]
            cursor.execute("SET FOREIGN_KEY_CHECKS = 0")  # (orders refer to customers)
            cursor.execute(f"TRUNCATE TABLE {db}.customers")
            cursor.execute(f"INSERT INTO {db}.customers (id, name, email) VALUES (3, 'back', NULL)")
            cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
            for n in (1, 2, 700):
                cursor.execute(f"INSERT INTO {db}.orders (id, customer_id, status, total, "
                               "updated_at) VALUES (%s, 3, 'after', 2.0, NOW(6))", (n,))
        streaming.caught_up()
        streaming.close()
        streaming = None

        with _target(warehouse) as target:
            # changelog: the TRUNCATE's delete rows, one per key live before it (40 seeded,
            # 6 deleted, 500 inserted: 40 keys), at one position in the TRUNCATE's file.
            deletes = target.execute(
                "SELECT _BINLOG_FILE, _BINLOG_POS, count(*), count(DISTINCT ID), min(_TS_MS) "
                "FROM ORDERS WHERE _OP = 'd' AND ID <> 6 GROUP BY ALL").fetchall()
            assert len(deletes) == 1, deletes
            file, pos, rows, keys, ts = deletes[0]
            assert (file, rows, keys) == (truncate_file, 40, 40) and ts > 0
            # Their images are the rows as they were: the changes before it are in them.
            assert target.execute(f"SELECT count(*) FROM ORDERS WHERE _OP = 'd' AND "
                                  f"_BINLOG_POS = {pos} AND STATUS = 'before'"
                                  ).fetchone() == (5,)
            assert target.execute(f"SELECT STATUS FROM ORDERS WHERE _BINLOG_POS = {pos} AND "
                                  "ID = 500").fetchone() == ("new before",)
            # The latest change per key is the source: 1, 2, 700 live, every other key deleted.
            live = target.execute(
                "SELECT ID, STATUS FROM ORDERS QUALIFY ROW_NUMBER() OVER (PARTITION BY ID "
                "ORDER BY _BINLOG_FILE DESC, _BINLOG_POS DESC, _TRANSACTION_ORDER DESC) = 1 "
                "AND NOT _DELETED ORDER BY ID").fetchall()
            assert live == [(1, "after"), (2, "after"), (700, "after")]
            # scd2: the delete ended every version (nothing current but the re-inserted key)
            current = target.execute("SELECT ID, NAME FROM CUSTOMERS WHERE _IS_CURRENT"
                                     ).fetchall()
            assert current == [(3, "back")]
            assert target.execute("SELECT count(*) FROM CUSTOMERS WHERE NAME = 'renamed "
                                  "before' AND NOT _IS_CURRENT AND _VALID_TO IS NOT NULL"
                                  ).fetchone() == (1,)
            # ... at the TRUNCATE's position and commit time (key 3, inserted again after it
            # in the same second, was ended by that version: the same _VALID_TO)
            at = target.execute("SELECT _VALID_TO FROM CUSTOMERS WHERE NOT _IS_CURRENT AND "
                                "_CHANGE_SEQ = (SELECT max(_CHANGE_SEQ) FROM CUSTOMERS WHERE "
                                "NOT _IS_CURRENT) GROUP BY ALL").fetchall()
            assert len(at) == 1, at
            assert target.execute("SELECT count(DISTINCT ID) FROM CUSTOMERS WHERE NOT "
                                  "_IS_CURRENT AND _VALID_TO = ?", [at[0][0]]).fetchone() == (20,)
            scd2_pos = int(target.execute("SELECT max(_CHANGE_SEQ) FROM CUSTOMERS WHERE NOT "
                                          "_IS_CURRENT").fetchone()[0].split(".")[1])
            orders_rows = target.execute("SELECT count(*) FROM ORDERS").fetchone()[0]
            customer_rows = target.execute("SELECT count(*), count(_VALID_TO) FROM CUSTOMERS"
                                           ).fetchone()

        # Another run, and each statement run again as a replayed batch would: nothing twice.
        run(pipeline, spark)
        import duckdb

        from replicator.context import Context
        from replicator.plan import get_dialect
        from replicator.plan.statements.ddl import truncate_history, truncate_history_params
        from replicator.sink.versions import change_seq_at

        plan = Context(pipeline).plan
        with duckdb.connect(str(warehouse)) as target:
            for table in plan.tables:
                mode_pos = pos if table.mode == "changelog" else scd2_pos
                sql = truncate_history(table, get_dialect("duckdb"))
                params = truncate_history_params(table, truncate_file, mode_pos, ts,
                                                 change_seq_at(int(truncate_file.rsplit(".", 1)[1]),
                                                               mode_pos))
                target.execute(sql, list(params))
            assert target.execute("SELECT count(*) FROM ORDERS").fetchone()[0] == orders_rows
            assert target.execute("SELECT count(*), count(_VALID_TO) FROM CUSTOMERS"
                                  ).fetchone() == customer_rows
    finally:
        if streaming is not None:
            streaming.stop.set()
            streaming.thread.join(timeout=300)
        root.close()
