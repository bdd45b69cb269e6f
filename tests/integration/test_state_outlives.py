"""State that outlives the machine: a run whose checkpoint directory is gone (a container
restarted without its volume) resumes from the target's state table instead of copying every
table again, and the target still equals the source row by row."""

from __future__ import annotations

import shutil

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.model.pipeline import DuckDBTarget
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def _target(path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)


def test_a_lost_checkpoint_resumes_from_the_target_state_without_a_copy(
    spark, mariadb, mysql_source, fresh_database, tmp_path
):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=20, orders=50, awkward=30)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)),
                             max_rows=50)
    run(pipeline, spark)
    apply_changes(root, fresh_database, rounds=8, seed_value=3)
    run(pipeline, spark)  # several stream batches (max_rows=50)

    shutil.rmtree(tmp_path / "checkpoint")  # the volume is gone; the warehouse is not
    apply_changes(root, fresh_database, rounds=8, seed_value=4, first_new_id=300_000)
    notices: list[str] = []
    resumed = run(pipeline, spark, on_notice=notices.append)
    assert resumed.snapshot_rows == 0, notices
    assert resumed.changes > 0
    assert any("resuming from the target's state table" in line for line in notices), notices
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
    root.close()
