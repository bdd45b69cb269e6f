"""verify on the other replication modes: an SCD2 target is compared by its current versions,
a changelog target by the latest change of each key, a merged table with a log beside it as
usual. Copy, then stream changes (updates, deletes, key changes), then tamper."""

from __future__ import annotations

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.source.positions import current_position
from replicator.verify import verify_pipeline
from tests.integration.verify_support import (
    load,
    open_target,
    pipeline_file,
    replicate_by_snapshot,
    replicate_changes,
)

pytestmark = [pytest.mark.mysql]


def test_scd2_changelog_and_log_table(mariadb, fresh_database, tmp_path):
    with mariadb.root_connection() as root:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=30, orders=150, awkward=30)
    path = pipeline_file(tmp_path, fresh_database, name="modes")
    text = path.read_text()
    text = text.replace("      tier: {exclude: true}\n", "      tier: {exclude: true}\n    mode: scd2\n")
    text = text.replace("    deletes: soft\n    filter: \"status <> 'new'\"\n", "    mode: changelog\n")
    text = text.replace(f"  - source: {fresh_database}.awkward\n",
                        f"  - source: {fresh_database}.awkward\n    log_table: true\n")
    path.write_text(text)
    pipeline = load(path, mariadb)
    modes = {t.source_table: (t.mode, t.log_table) for t in pipeline.tables}
    assert modes == {"customers": ("scd2", False), "orders": ("changelog", False),
                     "awkward": ("merge", True)}
    sink = open_target(pipeline)
    try:
        replicate_by_snapshot(pipeline, sink)
        start = current_position(pipeline.source)
        with mariadb.root_connection() as root:
            apply_changes(root, fresh_database, rounds=20)
            with root.cursor() as cursor:  # a tracked column: new SCD2 versions
                cursor.execute(f"UPDATE `{fresh_database}`.customers SET name = CONCAT(name, '!')"
                               " WHERE id <= 5")
        assert replicate_changes(pipeline, sink, start, batch_id=1) > 20
        report = verify_pipeline(pipeline, sink=sink)
        assert report.equal, "\n".join(report.describe())

        target = sink.connection
        versions = target.execute('SELECT COUNT(*) FROM main."CUSTOMERS"').fetchone()[0]
        assert versions >= 35  # history is kept, and only current versions were compared
        target.execute('UPDATE main."CUSTOMERS" SET "_IS_CURRENT" = FALSE WHERE "ID" = 3')
        # The changelog's latest change of an order decides: drop it, the one before shows.
        (changed,) = target.execute(
            'SELECT "ID" FROM main."ORDERS_SOFT" GROUP BY "ID" HAVING COUNT(*) > 1 '
            'AND NOT bool_or("_DELETED") ORDER BY "ID" LIMIT 1').fetchone()
        target.execute(
            'DELETE FROM main."ORDERS_SOFT" WHERE "ID" = ? AND "_BINLOG_POS" = (SELECT MAX('
            '"_BINLOG_POS") FROM main."ORDERS_SOFT" WHERE "ID" = ?)', [changed, changed])
        report = verify_pipeline(pipeline, sink=sink)
    finally:
        sink.close()
    customers, orders = report.table("customers"), report.table("orders")
    assert [(d.kind, d.key["id"]) for d in customers.differences] == [("missing", 3)]
    assert [(d.kind, d.key["id"]) for d in orders.differences] == [("different", changed)]
    assert report.table("awkward").equal
