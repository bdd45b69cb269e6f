"""verify's checksum SQL for Snowflake, run on fakesnow's HTTP server (DuckDB underneath;
the unmodified connector over HTTP, as users connect): the same verdicts as on DuckDB, the
same checksums as MariaDB's.

fakesnow 0.12.1 lacks ``MD5_NUMBER_LOWER64`` (it translates the call to a DuckDB function
``m_d5_number_lower64`` that does not exist); the test server defines that one function as
a DuckDB macro with Snowflake's documented meaning (the low 64 bits of the MD5, read
big-endian, unsigned: ``bench.fakesnow_run.md5_number_lower64``,
https://docs.snowflake.com/en/sql-reference/functions/md5_number_lower64).
Every other function of the Snowflake SQL (TO_VARCHAR, DATE_PART(EPOCH_MICROSECOND),
DATEDIFF, CASE, HEX_ENCODE, LENGTH, CONCAT_WS, FLOOR) runs as fakesnow translates it."""

from __future__ import annotations

import pytest

from replicator.context import Context
from replicator.demo.workload import create_schema, seed
from replicator.verify import verify_pipeline
from replicator.verify.compare import TableVerifier
from tests.integration.verify_checksum_support import checksum_pipeline, create_types
from tests.integration.verify_support import (
    fakesnow_sink,
    load,
    open_target,
    pipeline_file,
    replicate_by_snapshot,
)

pytestmark = [pytest.mark.mysql, pytest.mark.slow]


def _checksums(pipeline, sink, name, target_kind):
    context = Context(pipeline)
    table = context.plan.table(name)
    source_table = context.catalog.table(table.source_database, table.source_table)
    verifier = TableVerifier(pipeline, source_table, table, sink.connection,
                             end_transaction=target_kind == "snowflake", target_kind=target_kind)
    try:
        plan = verifier.checksum_plan()
        assert not isinstance(plan, list), plan
        params = [-(2**63), 2**66, -(2**63), 2**65]  # one bucket: the whole key space
        return ([tuple(int(v) for v in r) for r in verifier.source.query(plan.source_sql, params)],
                [tuple(int(v) for v in r) for r in verifier.target.query(plan.target_sql, params)])
    finally:
        verifier.close()


def test_same_checksums_and_verdicts_as_duckdb(mariadb, fresh_database, tmp_path,
                                               fakesnow_server, fakesnow_database):
    with mariadb.root_connection() as root:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=10, orders=60, awkward=40)
        create_types(root, fresh_database)
    path = checksum_pipeline(
        tmp_path, fresh_database, name="checksum-snow",
        target=f"snowflake: {{database: {fakesnow_database}, schema: RAW, "
               f"account: {fakesnow_server.account}, user: {fakesnow_server.user}}}")
    pipeline = load(path, mariadb)
    duck_pipeline = load(checksum_pipeline(tmp_path, fresh_database, name="checksum-duck"),
                         mariadb)
    duck = open_target(duck_pipeline)
    replicate_by_snapshot(duck_pipeline, duck)
    verdicts = {}
    sink = fakesnow_sink(pipeline, fakesnow_server, fakesnow_database)  # its own database
    try:
        replicate_by_snapshot(pipeline, sink)
        for name in ("orders", "awkward", "types"):  # docs: JSON, fetched
            source, snow = _checksums(pipeline, sink, name, "snowflake")
            assert snow == source, name
            assert _checksums(duck_pipeline, duck, name, "duckdb")[1] == source, name
        report = verify_pipeline(pipeline, sink=sink)
        assert report.equal, "\n".join(report.describe())
        assert [t.method for t in report.tables] == ["fetch", "checksum", "checksum",
                                                     "checksum", "fetch"]
        assert any("DOC is JSON: snowflake re-serialises" in reason
                   for reason in report.tables[-1].fallback)
        cursor = sink.connection.cursor()
        cursor.execute('DELETE FROM "RAW"."ORDERS" WHERE "ID" = 7')
        cursor.execute('UPDATE "RAW"."TYPES" SET "TS3" = NULL WHERE "ID" = 8')
        cursor.execute('UPDATE "RAW"."TYPES" SET "BOOL_WIDE" = NULL WHERE "ID" = 0')  # FALSE
        cursor.execute('UPDATE "RAW"."TYPES" SET "DBL" = 1e-323 WHERE "ID" = -5')
        cursor.execute('UPDATE "RAW"."TYPES" SET "FLT" = 1234570 WHERE "ID" = 8')
        cursor.execute('UPDATE "RAW"."AWKWARD" SET "RAW" = TO_BINARY(\'00\', \'HEX\') '
                       'WHERE "ID" = 3')
        sink.connection.commit()
        verdicts["snowflake"] = verify_pipeline(pipeline, sink=sink)
    finally:
        sink.close()
    duck.connection.execute('DELETE FROM main."ORDERS" WHERE "ID" = 7')
    duck.connection.execute('UPDATE main."TYPES" SET "TS3" = NULL WHERE "ID" = 8')
    duck.connection.execute('UPDATE main."TYPES" SET "BOOL_WIDE" = NULL WHERE "ID" = 0')
    duck.connection.execute('UPDATE main."TYPES" SET "DBL" = 1e-323 WHERE "ID" = -5')
    duck.connection.execute('UPDATE main."TYPES" SET "FLT" = 1234570 WHERE "ID" = 8')
    duck.connection.execute('UPDATE main."AWKWARD" SET "RAW" = \'\\x00\'::BLOB WHERE "ID" = 3')
    verdicts["duckdb"] = verify_pipeline(duck_pipeline, sink=duck)
    duck.close()
    found = {kind: sorted((t.source_table.rsplit(".", 1)[-1], int(d.key["id"]), d.kind,
                           tuple(c.target_column for c in d.columns))
                          for t in report.tables for d in t.differences)
             for kind, report in verdicts.items()}
    assert found["snowflake"] == found["duckdb"] == [
        ("awkward", 3, "different", ("RAW",)), ("orders", 7, "missing", ()),
        ("types", -5, "different", ("DBL",)), ("types", 0, "different", ("BOOL_WIDE",)),
        ("types", 8, "different", ("TS3", "FLT"))]
    assert all(t.method == "checksum" for t in verdicts["snowflake"].tables[1:4])
    # The checksums crossed the connector's HTTP protocol (the server logs every statement).
    assert any("MD5_NUMBER_LOWER64" in query for query in fakesnow_server.queries)


def test_a_float_tie_costs_a_fetch_on_snowflake_never_a_verdict(
        mariadb, fresh_database, tmp_path, fakesnow_server, fakesnow_database):
    """Replication writes a FLOAT's shortest decimal (0.001234565, a tie at 7 digits) where
    MySQL prints 0.00123457; Snowflake has no 4-byte float to round it back to, so the
    bucket's checksum differs, and the fetch of its rows says equal."""
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute(f"USE `{fresh_database}`")
        cursor.execute("CREATE TABLE floats (id INT PRIMARY KEY, f FLOAT NULL)")
        cursor.executemany("INSERT INTO floats VALUES (%s, %s)",
                           [(1, 0.001234565), (2, 5.652365e16), (3, 0.1), (4, None)])
        cursor.execute("COMMIT")
    path = pipeline_file(
        tmp_path, fresh_database, name="float-ties", tables="  - source: {database}.floats\n",
        target=f"snowflake: {{database: {fakesnow_database}, schema: RAW, "
               f"account: {fakesnow_server.account}, user: {fakesnow_server.user}}}")
    pipeline = load(path, mariadb)
    sink = fakesnow_sink(pipeline, fakesnow_server, fakesnow_database)
    try:
        replicate_by_snapshot(pipeline, sink)
        (floats,) = verify_pipeline(pipeline, sink=sink).tables
    finally:
        sink.close()
    assert floats.equal, [d.describe() for d in floats.differences]
    assert (floats.method, floats.source_rows) == ("checksum", 4)
    assert floats.fetched_rows > 0  # the tie's bucket was fetched and found equal
