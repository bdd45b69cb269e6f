"""``verify --repair`` end to end: 100 rows of ``orders`` drifted behind the binlog's back
(``sql_log_bin = 0``) are found by checksum, copied again by the pipeline's re-copy while a
writer keeps changing the table, and a second verify says equal."""

from __future__ import annotations

import threading

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine.recopy import request, requested
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.model.pipeline import DuckDBTarget
from replicator.verify import verify_pipeline
from replicator.verify.repair import repair_requests
from tests.integration.e2e_support import demo_pipeline, run
from tests.integration.verify_support import drift_behind_the_binlog

pytestmark = [pytest.mark.mysql, pytest.mark.spark]


def test_repair_copies_the_drifted_rows_under_a_live_writer(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=300, awkward=20)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    run(pipeline, spark)
    drift_behind_the_binlog(root, fresh_database)
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    asked = []

    def repair(report, plan, catalog):  # what `verify --repair` does (cli/verify.py)
        for wanted in repair_requests(report, plan, catalog):
            asked.append(wanted)
            request(checkpoint, wanted.source_table, wanted.where)

    report = verify_pipeline(pipeline, tables=["orders"], on_compared=repair)
    orders = report.table("orders")
    assert orders.method == "checksum"
    assert (orders.count("different"), orders.count("missing"), orders.count("extra")) == (
        60, 40, 0)
    (wanted,) = asked
    assert wanted.keys == 100 and wanted.where.startswith("`id` IN (1, 2, 3,")
    assert requested(checkpoint) == [f"{fresh_database}.orders"]

    # The run takes the request while a writer keeps changing orders (and the others).
    writer = threading.Thread(target=apply_changes, args=(
        mariadb.root_connection(fresh_database), fresh_database),
        kwargs={"rounds": 30, "seed_value": 5, "first_new_id": 100_000})
    writer.start()
    notices: list[str] = []
    run(pipeline, spark, on_notice=notices.append)
    writer.join()
    run(pipeline, spark)  # the writer's last changes
    assert requested(checkpoint) == []
    assert any("re-copy of" in n and "done" in n for n in notices), notices
    after = verify_pipeline(pipeline)
    assert after.equal, "\n".join(after.describe())
    # What Spark replicated (JSON, DOUBLE, every awkward value) hashes alike on both sides:
    # every range agreed, no row was fetched.
    awkward = after.table("awkward")
    assert (awkward.method, awkward.fetched_rows) == ("checksum", 0), awkward.fallback
    root.close()
