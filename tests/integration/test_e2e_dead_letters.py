"""Poison rows end to end (issue 19.5): the CLI replicates a MariaDB table into Snowflake
(fakesnow's server, the real connector) where one LONGTEXT value is over Snowflake's 16 MB
VARCHAR limit, in the snapshot and again in the stream.

``on_error: fail`` (the default): the run stops naming table, key and column, and nothing of
the batch is applied. ``on_error: dead_letter``: the row is set aside in
_REPLICATOR_DEAD_LETTERS with the error and its batch's binlog position, every other row
arrives (compared with the source row by row), the pipeline goes on, and `status` counts the
dead letters per table."""

from __future__ import annotations

import json

import pytest

from tests.integration.e2e_support import cli_environment, ok, replicator

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

BIG = 17 * 1024 * 1024  # bytes: over 16,777,216


def _yaml(database: str, on_error: str) -> str:
    return (
        "version: 1\nname: dead-letters\nsource:\n  mysql:\n    host: ${MYSQL_HOST}\n"
        "    port: ${MYSQL_PORT}\n    user: ${MYSQL_USER}\n    password: ${MYSQL_PASSWORD}\n"
        'target:\n  snowflake: {connection: fakesnow, database: "${TARGET_DATABASE}", '
        "schema: RAW}\nbatching: {max_rows: 300, max_delay: 500ms}\n"
        "engine:\n  master: local[2]\n  checkpoint: ${WORKDIR}/checkpoint\n"
        '  conf: {spark.sql.shuffle.partitions: "2"}\n'
        f"tables:\n  - source: {database}.notes\n    on_error: {on_error}\n"
    )


def _rows(fakesnow_server, database):
    with fakesnow_server.connect(database, "RAW") as connection:
        cursor = connection.cursor()
        cursor.execute('SELECT "ID", "BODY" FROM "RAW"."NOTES" ORDER BY "ID"')
        rows = cursor.fetchall()
        try:
            cursor.execute('SELECT "TABLE", "KEY", "COLUMN", "ERROR", "BINLOG_FILE", '
                           '"BINLOG_POS" FROM "RAW"."_REPLICATOR_DEAD_LETTERS" ORDER BY "KEY"')
            dead = cursor.fetchall()
        except Exception:  # not created: the table has no dead letters setting
            dead = None
    return rows, dead


@pytest.fixture
def notes(mariadb, fresh_database):
    with mariadb.root_connection() as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@global.max_allowed_packet")
        if cursor.fetchone()[0] < 64 * 1024 * 1024:
            cursor.execute("SET GLOBAL max_allowed_packet = 67108864")
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE notes (id INT PRIMARY KEY, body LONGTEXT)")
        cursor.execute("INSERT INTO notes VALUES (1, 'it''s fine 😀'), (2, REPEAT('x', %s)), "
                       "(3, '')", [BIG])
    return fresh_database


def test_fail_names_table_key_and_column(fakesnow_server, fakesnow_database, mysql_source,
                                         notes, tmp_path):
    pipeline_file = tmp_path / "notes.yaml"
    pipeline_file.write_text(_yaml(notes, "fail"))
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)
    result = replicator("run", str(pipeline_file), "--until-caught-up", env=env)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output
    assert "the value of BODY in the row with key ID=2 is 17,825,792 bytes" in output, output[-3000:]
    assert "on_error: dead_letter" in output
    rows, _ = _rows(fakesnow_server, fakesnow_database)
    assert rows == []  # nothing of the batch


def test_dead_letter_sets_the_row_aside_and_goes_on(fakesnow_server, fakesnow_database, mariadb,
                                                     mysql_source, notes, tmp_path):
    pipeline_file = tmp_path / "notes.yaml"
    pipeline_file.write_text(_yaml(notes, "dead_letter"))
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))  # the snapshot
    rows, dead = _rows(fakesnow_server, fakesnow_database)
    assert rows == [(1, "it's fine 😀"), (3, "")]
    assert [(t, json.loads(k), c) for t, k, c, *_ in dead] == [("NOTES", {"ID": 2}, "BODY")]
    assert "17,825,792 bytes" in dead[0][3] and dead[0][4]  # the error, a binlog file

    # The stream: a second poison row, and ordinary changes around it.
    with mariadb.root_connection(notes) as connection, connection.cursor() as cursor:
        cursor.execute("UPDATE notes SET body = 'changed' WHERE id = 1")
        cursor.execute("INSERT INTO notes VALUES (4, REPEAT('y', %s)), (5, 'five')", [BIG])
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
    rows, dead = _rows(fakesnow_server, fakesnow_database)
    assert rows == [(1, "changed"), (3, ""), (5, "five")]
    assert sorted(json.loads(k)["ID"] for _, k, *_ in dead) == [2, 4]
    stream_dead = next(d for d in dead if json.loads(d[1]) == {"ID": 4})
    assert stream_dead[4] and stream_dead[5] > 4  # the stream batch's binlog end

    status = json.loads(ok(replicator("status", str(pipeline_file), "--format", "json",
                                      "--stopped-ok", env=env)).stdout)
    assert [t["dead_letters"] for t in status["tables"]] == [2]
