"""`replicator verify` against a DuckDB target: equal after a correct copy, then exactly the
keys we tampered with, through renames, masks, exclusions, soft deletes and a row filter;
tables with transforms (masks, a filter, computed columns, declared types) fall back to
fetching rows and still name the exact keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from decimal import Decimal

import pytest

from replicator.demo.workload import create_schema, seed
from replicator.verify import VerifyError, verify_pipeline
from tests.integration.verify_support import (
    load,
    open_target,
    pipeline_file,
    replicate_by_snapshot,
)

pytestmark = [pytest.mark.mysql]


@pytest.fixture
def replicated(mariadb, fresh_database, tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=40, orders=300, awkward=70)
    path = pipeline_file(tmp_path, fresh_database)
    pipeline = load(path, mariadb)
    sink = open_target(pipeline)
    replicate_by_snapshot(pipeline, sink)
    yield pipeline, sink, root, path
    sink.close()
    root.close()


def _keys(table_report, kind):
    return sorted(d.key["id"] for d in table_report.differences if d.kind == kind)


def test_equal_after_replication_with_counts(replicated):
    pipeline, sink, root, _ = replicated
    report = verify_pipeline(pipeline, sink=sink)
    assert report.equal, "\n".join(report.describe())
    with root.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM `{pipeline.tables[1].source_database}`.orders "
                       "WHERE status <> 'new'")
        (in_scope,) = cursor.fetchone()
    assert report.table("customers").source_rows == 40
    assert report.table("customers").target_rows == 40
    assert report.table("orders").source_rows == in_scope < 300  # the filter is applied
    assert report.table("awkward").target_rows == 70


def test_finds_exactly_the_tampered_keys(replicated):
    pipeline, sink, root, _ = replicated
    database = pipeline.tables[0].source_database
    target = sink.connection
    ids = [row[0] for row in target.execute(
        'SELECT "ID" FROM main."ORDERS_SOFT" WHERE NOT "_DELETED" ORDER BY "ID"').fetchall()]
    target.execute('DELETE FROM main."CUSTOMERS" WHERE "ID" = 3')
    target.execute('INSERT INTO main."CUSTOMERS" ("ID", "FULL_NAME", "EMAIL") '
                   "VALUES (9999, 'ghost', NULL)")
    target.execute('UPDATE main."CUSTOMERS" SET "FULL_NAME" = \'changed\' WHERE "ID" = 5')
    target.execute('UPDATE main."CUSTOMERS" SET "EMAIL" = \'not-a-hash\' WHERE "ID" = 7')
    target.execute('UPDATE main."ORDERS_SOFT" SET "_DELETED" = TRUE WHERE "ID" = ?', [ids[0]])
    target.execute('UPDATE main."AWKWARD" SET "AMOUNT" = "AMOUNT" + 1 WHERE "ID" = 2')
    # A target table without its primary key (CTAS drops it) can hold a key twice.
    target.execute('CREATE TABLE main.awkward_copy AS SELECT * FROM main."AWKWARD"')
    target.execute('DROP TABLE main."AWKWARD"')
    target.execute('ALTER TABLE main.awkward_copy RENAME TO "AWKWARD"')
    target.execute('INSERT INTO main."AWKWARD" SELECT * FROM main."AWKWARD" WHERE "ID" = 6')
    # On the source: a row that leaves the filter must be gone from the target.
    with root.cursor() as cursor:
        cursor.execute(f"UPDATE `{database}`.orders SET status = 'new' WHERE id = %s", [ids[1]])

    report = verify_pipeline(pipeline, sink=sink)
    assert not report.equal
    customers = report.table("customers")
    assert (_keys(customers, "missing"), _keys(customers, "extra")) == ([3], [9999])
    different = {d.key["id"]: d for d in customers.differences if d.kind == "different"}
    assert sorted(different) == [5, 7]
    (name,) = different[5].columns
    assert (name.target_column, name.target_value) == ("FULL_NAME", "changed")
    assert name.source_value != "changed"
    (email,) = different[7].columns
    assert email.target_column == "EMAIL" and email.target_value == "not-a-hash"
    assert len(email.source_value) == 64  # the sha256 the target should hold, not the email
    orders = report.table("orders")
    assert (_keys(orders, "missing"), _keys(orders, "extra")) == ([ids[0]], [ids[1]])
    # The mask and the filter are the transform step's: both tables were fetched, not summed.
    assert (customers.method, orders.method) == ("fetch", "fetch")
    assert orders.fallback == ["a row filter (the transform step decides it)"]
    awkward = report.table("awkward")
    amount, twice = awkward.differences
    assert amount.key == {"id": 2} and amount.columns[0].target_column == "AMOUNT"
    assert (twice.kind, twice.key) == ("duplicate", {"id": 6})
    assert awkward.target_rows == 71
    assert amount.columns[0].target_value - amount.columns[0].source_value == Decimal(1)
    assert (customers.differing_segments, customers.segments) == (1, 1)
    # The target applied everything up to the snapshot; the source moved on (the UPDATE).
    assert orders.lag is not None and orders.lag.head is not None


def test_wait_rechecks_until_replication_catches_up(replicated):
    pipeline, sink, _, _ = replicated
    sink.connection.execute('DELETE FROM main."CUSTOMERS" WHERE "ID" IN (1, 2)')

    def heal() -> None:
        time.sleep(1.0)
        replicate_by_snapshot(pipeline, open_target_shared(sink))

    import threading

    healer = threading.Thread(target=heal)
    healer.start()
    started = time.monotonic()
    report = verify_pipeline(pipeline, sink=sink, tables=["customers"], wait_s=20)
    healer.join()
    assert report.equal, "\n".join(report.describe())
    assert report.table("customers").rechecks >= 1
    assert time.monotonic() - started < 15
    short = verify_pipeline(pipeline, sink=sink, tables=["customers"], wait_s=0)
    assert short.equal


def open_target_shared(sink):
    """The same DuckDB sink, re-applying chunks under fresh batch ids (new epoch)."""

    class Rebatched:
        def __init__(self, inner):
            self.inner = inner

        def prepare(self):
            self.inner.prepare()

        def apply(self, table, batch_id, end_offset, staged, **options):
            return self.inner.apply(table, batch_id - 1_000_000, end_offset, staged, **options)

        def has_rows(self, table):
            return self.inner.has_rows(table)

    return Rebatched(sink)


def test_unknown_table_is_a_could_not_run(replicated):
    pipeline, sink, _, _ = replicated
    with pytest.raises(VerifyError) as caught:
        verify_pipeline(pipeline, sink=sink, tables=["nope"])
    assert caught.value.exit_code == 2 and "customers" in (caught.value.hint or "")


def _cli(path, mariadb, *args):
    env = {**os.environ, **mariadb.environment(), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "replicator", "verify", str(path), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_cli_exit_codes_and_json(replicated, mariadb, tmp_path):
    pipeline, sink, _, path = replicated
    sink.connection.execute('DELETE FROM main."CUSTOMERS" WHERE "ID" = 4')
    sink.close()  # one process per DuckDB file
    different = _cli(path, mariadb, "--format", "json", "--table", "customers")
    assert different.returncode == 1, different.stderr
    data = json.loads(different.stdout)
    assert data["equal"] is False
    (table,) = data["tables"]
    assert table["differences"] == [{"kind": "missing", "key": {"id": 4}}]
    text = _cli(path, mariadb, "--table", "orders")
    assert text.returncode == 0 and "equal" in text.stdout, text.stderr
    equal = _cli(path, mariadb, "-t", "awkward", "-t", "orders", "--format", "json")
    assert equal.returncode == 0 and json.loads(equal.stdout)["equal"] is True
    (tmp_path / "other").mkdir()  # a pipeline whose target was never created
    empty = pipeline_file(tmp_path / "other", pipeline.tables[0].source_database, name="other")
    missing = _cli(empty, mariadb)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "run `replicator run` first" in missing.stderr
    assert "Traceback" not in missing.stderr


# Issue 31's acceptance: tables with transforms fall back to fetching and still name exact
# keys. A computed column and a declared type (values the transform step makes) next to a
# plain table that is checksummed.
TRANSFORMED = """\
  - source: {database}.orders
    columns:
      total_with_tax: {{expression: "round(total * 1.2, 2)", type: "NUMBER(14,2)"}}
  - source: {database}.customers
    columns:
      tier: {{type: VARCHAR}}
  - source: {database}.awkward
"""


def test_transformed_tables_fall_back_and_name_exact_keys(mariadb, fresh_database, tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=20, orders=120, awkward=30)
    pipeline = load(pipeline_file(tmp_path, fresh_database, tables=TRANSFORMED), mariadb)
    sink = open_target(pipeline)
    try:
        replicate_by_snapshot(pipeline, sink)
        target = sink.connection
        target.execute('UPDATE main."ORDERS" SET "TOTAL_WITH_TAX" = "TOTAL_WITH_TAX" + 0.01 '
                       'WHERE "ID" = 17')  # a wrong computed value
        target.execute('UPDATE main."ORDERS" SET "TOTAL" = "TOTAL" + 1 WHERE "ID" = 40')
        target.execute('DELETE FROM main."ORDERS" WHERE "ID" = 99')
        target.execute('UPDATE main."CUSTOMERS" SET "TIER" = \'gold\' WHERE "ID" = 6')
        report = verify_pipeline(pipeline, sink=sink)
    finally:
        sink.close()
        root.close()
    orders, customers, awkward = (report.table(n) for n in ("orders", "customers", "awkward"))
    assert (orders.method, customers.method, awkward.method) == ("fetch", "fetch", "checksum")
    assert orders.fallback == ["TOTAL_WITH_TAX is computed by the transform step"]
    assert customers.fallback == ["TIER has a declared type:, converted by the transform step"]
    assert [(d.kind, d.key["id"], [c.target_column for c in d.columns])
            for d in orders.differences] == [("different", 17, ["TOTAL_WITH_TAX"]),
                                             ("different", 40, ["TOTAL"]),
                                             ("missing", 99, [])]
    (tier,) = customers.differences
    assert (tier.key, tier.columns[0].target_column, tier.columns[0].target_value) == (
        {"id": 6}, "TIER", "gold")
    assert awkward.equal and awkward.fetched_rows == 0
