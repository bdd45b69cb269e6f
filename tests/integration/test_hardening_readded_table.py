"""A table removed from the YAML and added back later is copied again: the changes made while
it was out (deletes included) are in the target afterwards, not silently missing."""

from __future__ import annotations

import dataclasses

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.model.pipeline import DuckDBTarget
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def test_a_table_added_back_is_copied_again(spark, mariadb, mysql_source, fresh_database,
                                            tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=15, orders=60, awkward=15)
    warehouse = tmp_path / "warehouse.duckdb"
    full = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    without_awkward = dataclasses.replace(full, tables=full.tables[:2])
    awkward = f"{fresh_database}.awkward"

    assert run(full, spark).snapshot_rows == 15 + 60 + 15
    notices: list[str] = []
    run(without_awkward, spark, on_notice=notices.append)
    assert any(f"{awkward} no longer in the pipeline" in n for n in notices), notices
    state = CheckpointDir(tmp_path / "checkpoint").load_start()
    assert state is not None and not state.covers(awkward)

    # awkward changes (inserts, updates, deletes) while nothing applies them
    apply_changes(root, fresh_database, rounds=4)
    with root.cursor() as cursor:
        cursor.execute(f"DELETE FROM `{fresh_database}`.awkward ORDER BY id LIMIT 3")
    back = run(full, spark)
    assert back.snapshot_rows > 0  # awkward copied again (its chunks not skipped as applied)
    state = CheckpointDir(tmp_path / "checkpoint").load_start()
    assert state is not None and state.covers(awkward) and state.copies[awkward.lower()] == 2

    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as target:
        assert_target_equals_source(full, root, target)
    root.close()
