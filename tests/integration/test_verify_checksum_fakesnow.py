"""verify's checksum SQL for Snowflake, run on fakesnow (DuckDB underneath): the same
verdicts as on DuckDB, the same checksums as MariaDB's.

fakesnow 0.12.1 lacks ``MD5_NUMBER_LOWER64`` (it translates the call to a DuckDB function
``m_d5_number_lower64`` that does not exist); the test defines that one function as a
DuckDB macro with Snowflake's documented meaning (the low 64 bits of the MD5, read
big-endian, unsigned): https://docs.snowflake.com/en/sql-reference/functions/md5_number_lower64.
Every other function of the Snowflake SQL (TO_VARCHAR, DATE_PART(EPOCH_MICROSECOND),
DATEDIFF, IFF, HEX_ENCODE, LENGTH, CONCAT_WS, FLOOR) runs as fakesnow translates it."""

from __future__ import annotations

import os

import pytest

from replicator.context import Context
from replicator.demo.workload import create_schema, seed
from replicator.verify import verify_pipeline
from replicator.verify.compare import TableVerifier
from tests.integration.verify_checksum_support import checksum_pipeline, create_types
from tests.integration.verify_support import load, open_target, replicate_by_snapshot

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

fakesnow = pytest.importorskip("fakesnow")

LOWER64 = ("CREATE OR REPLACE TEMP MACRO m_d5_number_lower64(t) AS "
           "CAST(('0x' || substr(md5(t), 17, 16)) AS UBIGINT)")


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


def test_same_checksums_and_verdicts_as_duckdb(mariadb, fresh_database, tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("SNOWFLAKE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SNOWFLAKE_PASSWORD", "fake")
    with mariadb.root_connection() as root:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=10, orders=60, awkward=40)
        create_types(root, fresh_database)
    path = checksum_pipeline(
        tmp_path, fresh_database, name="checksum-snow",
        target="snowflake: {database: ANALYTICS, schema: RAW, account: fake, user: fake}")
    pipeline = load(path, mariadb)
    duck_pipeline = load(checksum_pipeline(tmp_path, fresh_database, name="checksum-duck"),
                         mariadb)
    duck = open_target(duck_pipeline)
    replicate_by_snapshot(duck_pipeline, duck)
    (tmp_path / "fakesnow").mkdir()
    verdicts = {}
    with fakesnow.patch(db_path=str(tmp_path / "fakesnow")):
        sink = open_target(pipeline)
        try:
            replicate_by_snapshot(pipeline, sink)
            sink.connection._duck_conn.execute(LOWER64)
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
        ("types", -5, "different", ("DBL",)), ("types", 8, "different", ("TS3", "FLT"))]
    assert all(t.method == "checksum" for t in verdicts["snowflake"].tables[1:4])
