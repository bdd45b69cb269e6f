"""A primary key changed in MySQL (`schema_changes.key_change`, issue 18), on the real MariaDB,
Spark, and DuckDB or the Snowflake sink's SQL on fakesnow:

- `recopy` (the default), while no run followed it and while streaming: the stream restarts
  with the new key at the batch holding the DDL, the target gets the new key (DuckDB, which
  enforces it, is rebuilt under it; Snowflake's declared key is dropped and added in place:
  fakesnow enforces it as DuckDB does, so a stale one fails the load) and the table is
  copied again while the others stream; ids shared
  under the new key, and updates that move a row along a new key column, end equal to the
  source row by row;
- `stop`: the run stops, and the remedy it names, `run --snapshot always`, re-copies the
  table into a target rebuilt under the new key.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from replicator.config import load_pipeline
from replicator.errors import ReplicatorError
from replicator.model.pipeline import TargetConfig
from tests.integration.e2e_support import (
    assert_target_equals_source,
    run,
    warehouse,  # noqa: F401 (the fixture: each test on DuckDB and on fakesnow)
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

PIPELINE = """\
version: 1
name: rekey
source:
  mysql: {{host: {host}, port: {port}, user: {user}, password: "{password}"}}
target:
  duckdb: {{path: "{warehouse}"}}
batching: {{max_rows: 500, max_delay: 200ms}}
engine:
  master: local[1]
  checkpoint: {checkpoint}
{policy}tables:
  - source: {database}.items
  - source: {database}.other
"""


def _setup(mariadb, mysql_source, database, tmp_path, warehouse, policy=""):  # noqa: F811
    root = mariadb.root_connection(database)
    with root.cursor() as cursor:
        for table in ("items", "other"):
            cursor.execute(f"CREATE TABLE {table} (id INT NOT NULL, grp INT NOT NULL, "
                           "note VARCHAR(40), PRIMARY KEY (id)) CHARACTER SET utf8mb4")
            cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)",
                               [(n, 1, f"it's {n} 🚀") for n in range(1, 31)])
    path = tmp_path / "rekey.yaml"
    path.write_text(PIPELINE.format(
        host=mysql_source.host, port=mysql_source.port, user=mysql_source.user,
        password=mysql_source.password or "", warehouse=tmp_path / "warehouse.duckdb",
        checkpoint=tmp_path / "checkpoint", database=database, policy=policy))
    target, reader = warehouse
    pipeline = load_pipeline(path, environ={})
    return root, dataclasses.replace(pipeline, target=TargetConfig(target)), reader


def _change_the_key(cursor):
    cursor.execute("ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (id, grp)")
    cursor.executemany("INSERT INTO items VALUES (%s, 2, %s)",
                       [(n, f"second \\ {n}") for n in range(1, 11)])  # ids shared now
    cursor.execute("DELETE FROM items WHERE id = 30")
    # A row moved along a column of the new key: a delete of (5, 1) and an insert of (5, 3).
    cursor.execute("UPDATE items SET grp = 3, note = 'moved' WHERE id = 5 AND grp = 1")
    cursor.execute("UPDATE other SET note = 'other after the key change' WHERE id < 5")


def _move_along_the_new_key(cursor):
    cursor.execute("UPDATE items SET grp = 4 WHERE id = 6 AND grp = 2")
    cursor.execute("INSERT INTO items VALUES (5, 9, 'a third 5')")


def _declared_key(target):
    """The target's declared PRIMARY KEY of ITEMS: DuckDB's catalog, Snowflake's SHOW."""
    if target.kind == "duckdb":
        return target.execute("SELECT constraint_column_names FROM duckdb_constraints() WHERE "
                              "table_name = 'ITEMS' AND constraint_type = 'PRIMARY KEY'"
                              ).fetchone()[0]
    return [row[4] for row in target.execute('SHOW PRIMARY KEYS IN TABLE "ITEMS"').fetchall()]


def _assert_rekeyed(pipeline, root, reader, rows):
    with reader() as target:
        assert_target_equals_source(pipeline, root, target)
        assert _declared_key(target) == ["ID", "GRP"]
        assert target.execute('SELECT COUNT(*) FROM "ITEMS"').fetchone()[0] == rows
        notes = target.execute('SELECT GRP, NOTE FROM "ITEMS" WHERE ID = 5').fetchall()
        assert {(2, "second \\ 5"), (3, "moved")} <= set(notes), notes


def _assert_old_key(reader):
    with reader() as target:
        assert _declared_key(target) == ["ID"]


def test_a_key_changed_while_no_run_followed_it_is_streamed_on_and_copied_again(
        spark, mariadb, mysql_source, fresh_database, tmp_path, warehouse):  # noqa: F811
    root, pipeline, reader = _setup(mariadb, mysql_source, fresh_database, tmp_path, warehouse)
    try:
        run(pipeline, spark)
        _assert_old_key(reader)
        with root.cursor() as cursor:
            _change_the_key(cursor)
        notices: list[str] = []
        run(pipeline, spark, on_notice=notices.append)
        assert any("primary key changed: streaming on with the new key" in n
                   for n in notices), notices
        assert any(f"re-copy of {fresh_database}.items done" in n for n in notices), notices
        _assert_rekeyed(pipeline, root, reader, 39)
        with root.cursor() as cursor:  # and streams by the new key from then on
            _move_along_the_new_key(cursor)
        run(pipeline, spark)
        _assert_rekeyed(pipeline, root, reader, 40)
    finally:
        root.close()


def test_a_key_changed_while_streaming_restarts_the_stream_and_copies_the_table(
        spark, mariadb, mysql_source, fresh_database, tmp_path, warehouse):  # noqa: F811
    root, pipeline, reader = _setup(mariadb, mysql_source, fresh_database, tmp_path, warehouse)
    notices: list[str] = []
    stop, failure = threading.Event(), []

    def stream():
        try:
            run(pipeline, spark, until_caught_up=False, stop=stop, on_notice=notices.append)
        except BaseException as exc:  # reported below
            failure.append(exc)

    try:
        run(pipeline, spark)
        thread = threading.Thread(target=stream, daemon=True)
        thread.start()
        with root.cursor() as cursor:
            cursor.execute("UPDATE items SET note = 'before the key change' WHERE id = 7")
            _change_the_key(cursor)
        deadline = time.monotonic() + 300
        while not any(f"re-copy of {fresh_database}.items done" in n for n in notices):
            assert not failure, failure
            assert time.monotonic() < deadline, notices
            time.sleep(0.5)
        # Right after the copy: the first transaction after the source's head at the key
        # change (the copy covers every change before it, not this one).
        with root.cursor() as cursor:
            _move_along_the_new_key(cursor)
        time.sleep(3)
        stop.set()
        thread.join(timeout=300)
        assert not failure, failure
        run(pipeline, spark)  # whatever the stop left, caught up
        assert any("primary key changed: streaming on with the new key" in n
                   for n in notices), notices
        _assert_rekeyed(pipeline, root, reader, 40)
    finally:
        stop.set()
        root.close()


def test_key_change_stop_stops_and_the_named_remedy_re_copies_under_the_new_key(
        spark, mariadb, mysql_source, fresh_database, tmp_path, warehouse):  # noqa: F811
    root, pipeline, reader = _setup(mariadb, mysql_source, fresh_database, tmp_path, warehouse,
                                    policy="schema_changes: {key_change: stop}\n")
    try:
        run(pipeline, spark)
        with root.cursor() as cursor:
            _change_the_key(cursor)
        with pytest.raises(ReplicatorError) as stopped:
            run(pipeline, spark)
        assert "key_change" in stopped.value.message + (stopped.value.hint or "")
        assert "--snapshot always" in (stopped.value.hint or "")
        run(pipeline, spark, snapshot="always")
        _assert_rekeyed(pipeline, root, reader, 39)
    finally:
        root.close()
