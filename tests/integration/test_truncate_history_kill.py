"""A followed TRUNCATE of changelog and scd2 tables survives SIGKILL between the batch's
changes and the TRUNCATE's record (issue 18): a real run (`python -m replicator run`, a
subprocess) stops at the failpoint ``apply.before_truncate_record`` (inside the batch's
transaction, its changes written, the record not yet) and is killed there. Nothing of the
batch is visible then; the resumed run applies it once: the history holds the TRUNCATE
exactly once, at its place among the batch's changes (``check_history``: the same target as
a run never killed), and every batch is recorded once per table. `target.atomic` true and
false (the table's own transaction).

Merged tables (hard deletes, with a log table; soft deletes) the same way: the run stops at
``apply.after_truncate``, the table's rows deleted (marked deleted) in the batch's
transaction and its MERGE of the changes after the TRUNCATE not run yet, and is killed there:
the target still holds every row it had before the batch, unchanged; the resumed run applies
the batch once and the target equals the source row by row (`replicator verify`).

The first copy and the last run (nothing left to apply) run in-process; the killed run and
the resumed one are the CLI, as users run it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import create_schema, seed
from tests.integration.e2e_support import ok, replicator, run
from tests.integration.test_e2e_atomic import _kill_between_tables
from tests.integration.test_truncate_history_e2e import (
    check_history,
    history_names,
    rows,
    truncate_in_one_batch,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

FAILPOINT = "apply.before_truncate_record"


HISTORY_TABLES = ("  - source: {database}.customers\n    mode: scd2\n    metadata: []\n"
                  "  - source: {database}.orders\n    mode: changelog\n")
MERGED_TABLES = ("  - source: {database}.customers\n    deletes: soft\n"
                 "  - source: {database}.orders\n    log_table: true\n")


def _pipeline_file(tmp_path: Path, database: str, atomic: bool,
                   tables: str = HISTORY_TABLES) -> Path:
    path = tmp_path / "truncate.yaml"
    path.write_text(
        "version: 1\nname: truncate-kill\nsource:\n  mysql:\n    host: ${MYSQL_HOST}\n"
        "    port: ${MYSQL_PORT}\n    user: ${MYSQL_USER}\n    password: ${MYSQL_PASSWORD}\n"
        'target:\n  duckdb: {path: "${WORKDIR}/warehouse.duckdb"}\n'
        f"  atomic: {str(atomic).lower()}\n"
        "batching: {max_rows: 5000, max_delay: 500ms}\n"
        "engine:\n  master: local[2]\n  checkpoint: ${WORKDIR}/checkpoint\n"
        '  conf: {spark.sql.shuffle.partitions: "2"}\n'
        "schema_changes: {truncate: follow}\n"
        "tables:\n" + tables.format(database=database))
    return path


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "per-table"])
def test_a_kill_before_the_truncate_record_leaves_it_recorded_once(
        spark, mariadb, mysql_source, fresh_database, tmp_path, atomic):
    import contextlib

    import duckdb

    root = mariadb.root_connection()
    pipeline_file = _pipeline_file(tmp_path, fresh_database, atomic)
    env = {**os.environ, "MYSQL_HOST": mysql_source.host, "MYSQL_PORT": str(mysql_source.port),
           "MYSQL_USER": mysql_source.user, "MYSQL_PASSWORD": mysql_source.password or "",
           "WORKDIR": str(tmp_path)}
    path = str(tmp_path / "warehouse.duckdb")

    def connect():
        return contextlib.closing(duckdb.connect(path, read_only=True))

    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=20, orders=40, awkward=5)
        run(load_pipeline(pipeline_file, environ=env), spark)  # in-process: one JVM start less
        pipeline = load_pipeline(pipeline_file, environ=env)
        orders, customers = history_names(pipeline)
        truncate_file = truncate_in_one_batch(root, fresh_database)
        _kill_between_tables(pipeline_file, env, tmp_path, failpoint=FAILPOINT)
        # Killed inside the batch's transaction (the first table's): nothing of it shows.
        assert rows(connect, f"SELECT count(*) FROM {orders} WHERE \"STATUS\" = 'before' "
                             "OR \"_OP\" = 'd'") == [(0,)]
        assert rows(connect, f"SELECT count(*) FROM {customers} WHERE NOT \"_IS_CURRENT\" "
                             "OR \"NAME\" = 'renamed before'") == [(0,)]

        ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
        contents = check_history(connect, pipeline, truncate_file)
        assert rows(connect, 'SELECT count(*) FROM (SELECT "TABLE", "BATCH_ID" FROM '
                             'main."_REPLICATOR_STATE" GROUP BY 1, 2 HAVING count(*) > 1)'
                    ) == [(0,)]
        run(load_pipeline(pipeline_file, environ=env), spark)  # in-process: one JVM start less
        assert check_history(connect, pipeline, truncate_file) == contents
    finally:
        root.close()


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "per-table"])
def test_a_kill_between_the_truncate_and_the_merge_shows_nothing_of_the_batch(
        spark, mariadb, mysql_source, fresh_database, tmp_path, atomic):
    import contextlib

    import duckdb

    root = mariadb.root_connection()
    pipeline_file = _pipeline_file(tmp_path, fresh_database, atomic, MERGED_TABLES)
    env = {**os.environ, "MYSQL_HOST": mysql_source.host, "MYSQL_PORT": str(mysql_source.port),
           "MYSQL_USER": mysql_source.user, "MYSQL_PASSWORD": mysql_source.password or "",
           "WORKDIR": str(tmp_path)}
    path = str(tmp_path / "warehouse.duckdb")

    def connect():
        return contextlib.closing(duckdb.connect(path, read_only=True))

    def contents():
        return {name: rows(connect, f'SELECT * FROM main."{name}" ORDER BY ALL')
                for name in ("CUSTOMERS", "ORDERS", "ORDERS_LOG")}

    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=20, orders=40, awkward=5)
        run(load_pipeline(pipeline_file, environ=env), spark)  # in-process: one JVM start less
        before = contents()
        assert [len(before[n]) for n in ("CUSTOMERS", "ORDERS")] == [20, 40]
        truncate_in_one_batch(root, fresh_database)
        _kill_between_tables(pipeline_file, env, tmp_path, failpoint="apply.after_truncate")
        # Killed inside the transaction, after the DELETE (soft: the UPDATE), before the
        # MERGE: every row is still there as it was, nothing of the batch is.
        assert contents() == before

        ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
        ok(replicator("verify", str(pipeline_file), env=env))  # exit 0: every table equal
        # hard: only the rows inserted after the TRUNCATE; soft: every row before it marked
        # deleted, the keys inserted again after it live
        assert rows(connect, 'SELECT "ID", "STATUS" FROM main."ORDERS" ORDER BY 1') == [
            (1, "after"), (2, "after"), (500, "new before"), (700, "after")]
        assert rows(connect, 'SELECT count(*), count(*) FILTER (WHERE NOT "_DELETED") FROM '
                             'main."CUSTOMERS"') == [(20, 3)]
        # The log table: the batch's changes after the TRUNCATE; neither a row for the
        # TRUNCATE nor the changes before it (cut with them from the batch).
        assert rows(connect, 'SELECT count(*) FROM main."ORDERS_LOG" WHERE "STATUS" = '
                             "'before' OR \"_OP\" = 'd'") == [(0,)]
        assert len(contents()["ORDERS_LOG"]) == len(before["ORDERS_LOG"]) + 4
        assert rows(connect, 'SELECT count(*) FROM (SELECT "TABLE", "BATCH_ID" FROM '
                             'main."_REPLICATOR_STATE" GROUP BY 1, 2 HAVING count(*) > 1)'
                    ) == [(0,)]
        after = contents()
        run(load_pipeline(pipeline_file, environ=env), spark)  # in-process: one JVM start less
        assert contents() == after
    finally:
        root.close()
