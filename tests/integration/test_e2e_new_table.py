"""A table added to the pipeline after it started is copied (chunk by chunk between stream
batches: the other tables do not wait for it), then streamed like the others; on DuckDB and on
the Snowflake sink's SQL (fakesnow)."""

from __future__ import annotations

import dataclasses

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from tests.integration.e2e_support import (
    assert_target_equals_source,
    demo_pipeline,
    run,
    warehouse,  # noqa: F401 (the fixture: each test on DuckDB and on fakesnow)
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def test_a_table_added_later_gets_its_own_snapshot(spark, mariadb, mysql_source, fresh_database,
                                                   tmp_path, warehouse):  # noqa: F811
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=15, orders=60, awkward=15)
    target_config, reader = warehouse
    full = demo_pipeline(mysql_source, fresh_database, tmp_path, target_config)
    first_two = dataclasses.replace(full, tables=full.tables[:2])  # customers, orders

    assert run(first_two, spark).snapshot_rows == 15 + 60
    apply_changes(root, fresh_database, rounds=4)  # awkward changes too, not replicated yet
    notices, reports = [], []
    added = run(full, spark, on_notice=notices.append, on_report=reports.append)
    assert 15 <= added.snapshot_rows < 40  # awkward copied now, the others not again
    # Copied without holding up the others: chunk by chunk between stream batches (the
    # recopy's batches), never as a snapshot phase that the stream waits for.
    assert any(f"new table(s) {fresh_database}.awkward: streaming them, and copying them "
               "chunk by chunk" in notice for notice in notices), notices
    kinds = [report.kind for report in reports]
    assert set(kinds) == {"stream", "recopy"}, kinds
    apply_changes(root, fresh_database, rounds=4, seed_value=5, first_new_id=200_000)
    later = run(full, spark)
    assert later.snapshot_rows == 0 and later.changes > 0

    with reader() as target:
        assert_target_equals_source(full, root, target)
    root.close()
