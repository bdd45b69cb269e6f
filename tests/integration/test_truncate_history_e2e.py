"""`schema_changes.truncate: follow` in tables that keep history (issue 18), on the real
MariaDB, local Spark, and DuckDB or the Snowflake sink's SQL on fakesnow: in a changelog table
a TRUNCATE is one delete row per key live before it, at its binlog position; in an scd2 table
every version current at it ends at its commit time. Recorded in the transaction of the batch
that holds it: the batch's changes before the TRUNCATE are kept in the history, the ones after
it follow it (a key inserted again after it, with the very values it had before, is a new
insert in the changelog and a new version in scd2); a run again over the same binlog records
nothing twice.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from replicator.demo.workload import create_schema, seed
from replicator.model.pipeline import DuckDBTarget, SchemaChangePolicy
from replicator.plan import DUCKDB, SNOWFLAKE
from replicator.plan.statements.names import target_name
from tests.integration.e2e_support import demo_pipeline, fakesnow_warehouse, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

MODES = {"orders": "changelog", "customers": "scd2"}


def history_pipeline(mysql_source, database, tmp_path, warehouse):
    pipeline = demo_pipeline(mysql_source, database, tmp_path, warehouse, max_rows=5000)
    return dataclasses.replace(pipeline, tables=tuple(
        dataclasses.replace(t, mode=MODES[t.source_table], metadata=(),
                            schema_changes=SchemaChangePolicy(truncate="follow"))
        for t in pipeline.tables if t.source_table in MODES))


def history_names(pipeline):
    """(ORDERS, CUSTOMERS) as the target names them."""
    from replicator.context import Context

    plan = Context(pipeline).plan
    dialect = DUCKDB if isinstance(pipeline.target.warehouse, DuckDBTarget) else SNOWFLAKE
    return tuple(target_name(next(t for t in plan.tables if t.source_table == name), dialect)
                 for name in ("orders", "customers"))


def rows(connect, sql):
    with connect() as connection:
        cursor = connection.cursor()
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]


def truncate_in_one_batch(root, database):
    """One batch: changes before, both TRUNCATEs, changes after (keys inserted again, some
    with the values they had before). Returns the binlog file of the TRUNCATEs."""
    db = f"`{database}`"
    with root.cursor() as cursor:
        cursor.execute(f"UPDATE {db}.orders SET status = 'before' WHERE id <= 5")
        cursor.execute(f"DELETE FROM {db}.orders WHERE id = 6")
        cursor.execute(f"INSERT INTO {db}.orders (id, customer_id, status, total, updated_at) "
                       "VALUES (500, 1, 'new before', 1.0, '2024-05-01 00:00:00')")
        cursor.execute(f"UPDATE {db}.customers SET name = 'renamed before' WHERE id = 2")
        time.sleep(1.1)  # binlog times are seconds: the TRUNCATEs' is later than the changes'
        cursor.execute(f"TRUNCATE TABLE {db}.orders")
        cursor.execute("SHOW MASTER STATUS")
        truncate_file = cursor.fetchone()[0]
        cursor.execute("SET FOREIGN_KEY_CHECKS = 0")  # (orders refer to customers)
        cursor.execute(f"TRUNCATE TABLE {db}.customers")
        time.sleep(1.1)  # ... and earlier than the changes after them
        cursor.execute(f"INSERT INTO {db}.customers (id, name, email) VALUES (3, 'back', NULL)")
        # inserted again as they were just before the TRUNCATE: new versions all the same
        cursor.execute(f"INSERT INTO {db}.customers (id, name, email, tier) VALUES "
                       "(2, 'renamed before', 'c2@example.com', 'enterprise'), "
                       "(4, 'customer 4 O''Brien', NULL, 'pro')")
        cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
        for n in (1, 2, 700):
            cursor.execute(f"INSERT INTO {db}.orders (id, customer_id, status, total, "
                           "updated_at) VALUES (%s, 3, 'after', 2.0, NOW(6))", (n,))
        cursor.execute(f"INSERT INTO {db}.orders (id, customer_id, status, total, updated_at) "
                       "VALUES (500, 1, 'new before', 1.0, '2024-05-01 00:00:00')")
    return truncate_file


def check_history(connect, pipeline, truncate_file):
    """The changelog and scd2 tables after ``truncate_in_one_batch``; returns every row of
    both, to compare after another run."""
    orders, customers = history_names(pipeline)
    # changelog: the TRUNCATE's delete rows, one per key live before it (40 seeded, 6
    # deleted, 500 inserted: 40 keys), at one position in the TRUNCATE's file.
    deletes = rows(connect, f'SELECT "_BINLOG_FILE", "_BINLOG_POS", count(*), '
                            f'count(DISTINCT "ID"), min("_TS_MS"), max("_TS_MS") FROM {orders} '
                            f'WHERE "_OP" = \'d\' AND "ID" <> 6 GROUP BY 1, 2')
    assert len(deletes) == 1, deletes
    file, pos, count, keys, ts, last_ts = deletes[0]
    assert (file, count, keys) == (truncate_file, 40, 40) and ts == last_ts > 0
    # Their images are the rows as they were: the changes before it are in them.
    assert rows(connect, f'SELECT count(*) FROM {orders} WHERE "_OP" = \'d\' AND '
                         f'"_BINLOG_POS" = {pos} AND "STATUS" = \'before\'') == [(5,)]
    # Key 500: inserted, deleted by the TRUNCATE, inserted again with the same values.
    assert rows(connect, f'SELECT "_OP", "STATUS", "_DELETED", "_BINLOG_POS" = {pos} FROM '
                         f'{orders} WHERE "ID" = 500 ORDER BY "_BINLOG_FILE", "_BINLOG_POS", '
                         '"_TRANSACTION_ORDER"') == [
        ("c", "new before", False, False), ("d", "new before", True, True),
        ("c", "new before", False, False)]
    # The latest change per key is the source: 1, 2, 500, 700 live, every other key deleted.
    live = rows(connect, f'SELECT "ID", "STATUS" FROM {orders} QUALIFY ROW_NUMBER() OVER '
                         '(PARTITION BY "ID" ORDER BY "_BINLOG_FILE" DESC, "_BINLOG_POS" DESC, '
                         '"_TRANSACTION_ORDER" DESC) = 1 AND NOT "_DELETED" ORDER BY "ID"')
    assert live == [(1, "after"), (2, "after"), (500, "new before"), (700, "after")]

    # scd2: key 10, untouched by the batch, tells the TRUNCATE's position and time.
    [(at, at_seq)] = rows(connect, f'SELECT "_VALID_TO", "_CHANGE_SEQ" FROM {customers} '
                                   'WHERE "ID" = 10')
    assert at is not None and at_seq.startswith(f"{int(truncate_file.rsplit('.', 1)[1]):010d}.")
    assert int(at_seq.split(".")[1]) > pos  # after the orders' TRUNCATE
    # Every key had a version current at it, and it ended there.
    assert rows(connect, f'SELECT count(DISTINCT "ID"), count(*) FROM {customers} WHERE '
                         f'"_CHANGE_SEQ" = \'{at_seq}\'') == [(20, 20)]
    assert rows(connect, f'SELECT count(*) FROM {customers} WHERE "_CHANGE_SEQ" = '
                         f'\'{at_seq}\' AND ("_IS_CURRENT" OR "_VALID_TO" IS NULL)') == [(0,)]

    def versions(key):
        return rows(connect, f'SELECT "NAME", "_VALID_FROM", "_VALID_TO", "_IS_CURRENT", '
                             f'"_CHANGE_SEQ" FROM {customers} WHERE "ID" = {key} '
                             'ORDER BY "_CHANGE_SEQ"')

    # key 2: renamed before the TRUNCATE, inserted again with the same columns after it
    old, renamed, again = versions(2)
    renamed_at = renamed[1]
    assert old == ("customer 2 O'Brien", old[1], renamed_at, False, old[4]) and renamed_at < at
    assert renamed == ("renamed before", renamed_at, at, False, at_seq)
    assert again[0] == "renamed before" and again[1] > at and again[2:4] == (None, True)
    assert again[4] > at_seq
    # key 4: untouched before it, inserted again as it was: its old version ends at it
    old, again = versions(4)
    assert old == ("customer 4 O'Brien", old[1], at, False, at_seq) and old[1] < at
    assert again == ("customer 4 O'Brien", again[1], None, True, again[4]) and again[1] > at
    # key 3: inserted again with other columns
    old, again = versions(3)
    assert old[2:] == (at, False, at_seq)
    assert again[0] == "back" and again[2:4] == (None, True)
    assert rows(connect, f'SELECT "ID", "NAME" FROM {customers} WHERE "_IS_CURRENT" ORDER BY '
                         '"ID"') == [(2, "renamed before"), (3, "back"), (4, "customer 4 O'Brien")]
    return (rows(connect, f'SELECT * FROM {orders} ORDER BY "_BINLOG_FILE", "_BINLOG_POS", '
                          '"_TRANSACTION_ORDER"'),
            rows(connect, f'SELECT * FROM {customers} ORDER BY "ID", "_CHANGE_SEQ"'))


def scenario(spark, root, database, pipeline, connect):
    create_schema(root, database)
    seed(root, database, customers=20, orders=40, awkward=5)
    run(pipeline, spark)
    with root.cursor() as cursor:
        cursor.execute(f"UPDATE `{database}`.orders SET status = 'streaming' WHERE id = 1")
    run(pipeline, spark)
    truncate_file = truncate_in_one_batch(root, database)
    notices: list[str] = []
    result = run(pipeline, spark, on_notice=notices.append)
    assert result.batches == 1, result  # the TRUNCATEs and the changes around them
    assert sum("TRUNCATE followed" in n for n in notices) == 2, notices
    contents = check_history(connect, pipeline, truncate_file)
    # Another run over the same binlog (from the checkpoint): nothing twice.
    again = run(pipeline, spark)
    assert again.rows == 0
    assert check_history(connect, pipeline, truncate_file) == contents


def test_truncate_is_recorded_in_changelog_and_scd2_tables(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    import contextlib

    import duckdb

    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = history_pipeline(mysql_source, fresh_database, tmp_path,
                                DuckDBTarget(str(warehouse)))
    root = mariadb.root_connection()
    try:
        scenario(spark, root, fresh_database, pipeline,
                 lambda: contextlib.closing(duckdb.connect(str(warehouse), read_only=True)))
    finally:
        root.close()


def test_truncate_is_recorded_in_changelog_and_scd2_tables_on_snowflake(
        spark, mariadb, mysql_source, fresh_database, tmp_path, monkeypatch):
    root = mariadb.root_connection()
    try:
        with fakesnow_warehouse(tmp_path, monkeypatch) as (target, connect):
            pipeline = history_pipeline(mysql_source, fresh_database, tmp_path, target)
            scenario(spark, root, fresh_database, pipeline, connect)
    finally:
        root.close()
