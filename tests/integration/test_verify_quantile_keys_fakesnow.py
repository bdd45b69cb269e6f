"""verify's quantile-key checksums in Snowflake's SQL, on fakesnow's HTTP server (the
unmodified connector, ``?`` parameters): a CHAR(36) UUID key and a BINARY(16) key, equal
tables cost no fetched row, a changed and a missing row are named exactly."""

from __future__ import annotations

import pytest

from replicator.verify import verify_pipeline
from tests.integration.verify_support import (
    fakesnow_sink,
    load,
    pipeline_file,
    replicate_by_snapshot,
)

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

ROWS = 300
SMALL = {"factor": 4, "leaf_rows": 8, "query_rows": 64}


def test_string_and_binary_keys_by_checksum_on_snowflake(mariadb, fresh_database, tmp_path,
                                                         fakesnow_server, fakesnow_database):
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute(f"USE `{fresh_database}`")
        cursor.execute("CREATE TABLE uuids (id CHAR(36) PRIMARY KEY, v INT)")
        cursor.execute(f"INSERT INTO uuids SELECT UUID(), seq FROM seq_1_to_{ROWS}")
        cursor.execute("CREATE TABLE hashed (id BINARY(16) PRIMARY KEY, v INT)")
        cursor.execute(f"INSERT INTO hashed SELECT UNHEX(MD5(seq)), seq FROM seq_1_to_{ROWS}")
    path = pipeline_file(
        tmp_path, fresh_database, name="quantiles-snow",
        target=f"snowflake: {{database: {fakesnow_database}, schema: RAW, "
               f"account: {fakesnow_server.account}, user: {fakesnow_server.user}}}",
        tables="  - source: {database}.uuids\n  - source: {database}.hashed\n")
    pipeline = load(path, mariadb)
    sink = fakesnow_sink(pipeline, fakesnow_server, fakesnow_database)
    try:
        replicate_by_snapshot(pipeline, sink)
        equal = verify_pipeline(pipeline, sink=sink, walk=SMALL)
        cursor = sink.connection.cursor()
        cursor.execute('SELECT "ID" FROM "RAW"."UUIDS" WHERE "V" IN (100, 200) ORDER BY "V"')
        changed, missing = [row[0] for row in cursor.fetchall()]
        cursor.execute('UPDATE "RAW"."UUIDS" SET "V" = -1 WHERE "ID" = ?', [changed])
        cursor.execute('DELETE FROM "RAW"."UUIDS" WHERE "ID" = ?', [missing])
        cursor.execute('SELECT "ID" FROM "RAW"."HASHED" WHERE "V" = 123')
        (binary,) = cursor.fetchone()
        cursor.execute('UPDATE "RAW"."HASHED" SET "V" = -1 WHERE "ID" = ?', [binary])
        sink.connection.commit()
        drifted = verify_pipeline(pipeline, sink=sink, walk=SMALL)
    finally:
        sink.close()
    assert equal.equal, "\n".join(equal.describe())
    assert [(t.method, t.fetched_rows, t.source_rows) for t in equal.tables] == [
        ("checksum", 0, ROWS), ("checksum", 0, ROWS)]
    uuids, hashed = drifted.tables
    assert sorted((d.kind, d.key["id"]) for d in uuids.differences) == sorted(
        [("different", changed), ("missing", missing)])
    assert [(d.kind, bytes(d.key["id"])) for d in hashed.differences] == [
        ("different", bytes(binary))]
    assert uuids.fetched_rows < ROWS and hashed.fetched_rows <= 2 * 8
