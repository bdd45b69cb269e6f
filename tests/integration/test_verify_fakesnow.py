"""verify against the Snowflake sink's tables on fakesnow: VARIANT JSON, NUMBER(20,0) for
BIGINT UNSIGNED, TIMESTAMP_TZ, BINARY all compare equal after a copy; tampering is found."""

from __future__ import annotations

import os

import pytest

from replicator.demo.workload import create_schema, seed
from replicator.verify import verify_pipeline
from tests.integration.verify_support import (
    load,
    open_target,
    pipeline_file,
    replicate_by_snapshot,
)

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

fakesnow = pytest.importorskip("fakesnow")


def test_equal_then_tampered_on_fakesnow(mariadb, fresh_database, tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("SNOWFLAKE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SNOWFLAKE_PASSWORD", "fake")
    with mariadb.root_connection() as root:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=20, orders=120, awkward=40)
    path = pipeline_file(
        tmp_path, fresh_database, name="verify-snow",
        target="snowflake: {database: ANALYTICS, schema: RAW, account: fake, user: fake}",
    )
    pipeline = load(path, mariadb)
    (tmp_path / "fakesnow").mkdir()
    with fakesnow.patch(db_path=str(tmp_path / "fakesnow")):
        sink = open_target(pipeline)
        try:
            replicate_by_snapshot(pipeline, sink)
            report = verify_pipeline(pipeline, sink=sink)
            assert report.equal, "\n".join(report.describe())
            assert report.table("awkward").source_rows == 40

            cursor = sink.connection.cursor()
            cursor.execute('DELETE FROM "RAW"."CUSTOMERS" WHERE "ID" = 2')
            cursor.execute('UPDATE "RAW"."CUSTOMERS" SET "EMAIL" = \'x\' WHERE "ID" = 4')
            cursor.execute('UPDATE "RAW"."AWKWARD" SET "PAYLOAD" = PARSE_JSON(\'{"z": 1}\') '
                           'WHERE "ID" = 3')
            sink.connection.commit()
            report = verify_pipeline(pipeline, sink=sink)
        finally:
            sink.close()
    found = sorted((t.source_table.rsplit(".", 1)[-1], d.key["id"], d.kind,
                    tuple(c.target_column for c in d.columns))
                   for t in report.tables for d in t.differences)
    assert found == [("awkward", 3, "different", ("PAYLOAD",)),
                     ("customers", 2, "missing", ()),
                     ("customers", 4, "different", ("EMAIL",))]
