"""GTID failover: the primary dies (kill -9) mid-stream, the replica is promoted, writes go
on there, and the running pipeline follows the writer and resumes by GTID; the target ends
equal to the new primary row by row (the demo's awkward values included). Also: a server
whose history lacks the last applied transaction is refused, and `start: {gtid: ...}` works.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.errors import SourceError
from replicator.model.pipeline import DuckDBTarget, StartPosition
from replicator.source.positions import current_position
from tests.fixtures.replicated import gtid_binlog_pos, promote, replicated_pair, wait_replicated
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

CATCH_UP_TIMEOUT_S = 60.0


def _target(path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)


def _wait_applied(checkpoint: CheckpointDir, server, failed: list) -> None:
    """Until the pipeline's committed offset reaches ``server``'s head (or the run failed)."""
    head = current_position(server.source())
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while True:
        assert not failed, failed
        committed = checkpoint.committed()
        if committed is not None and committed[1].file == head.file and committed[1] >= head:
            return
        assert time.monotonic() < deadline, f"not caught up with {head}: {committed}"
        time.sleep(0.2)


def test_the_run_follows_a_promoted_replica_by_gtid(spark, tmp_path):
    with replicated_pair() as (primary, replica):
        root = primary.root_connection()
        create_schema(root, "shop")
        seed(root, "shop", customers=20, orders=60, awkward=30)
        both = primary.source(host=f"127.0.0.1:{primary.port},127.0.0.1:{replica.port}")
        warehouse = tmp_path / "warehouse.duckdb"
        pipeline = demo_pipeline(both, "shop", tmp_path, DuckDBTarget(str(warehouse)),
                                 max_rows=100)
        checkpoint = CheckpointDir(pipeline.checkpoint_dir)
        run(pipeline, spark)  # snapshot + stream, on the primary

        notices: list[str] = []
        failed: list[BaseException] = []
        stop = threading.Event()

        def forever() -> None:
            try:
                run(pipeline, spark, until_caught_up=False, stop=stop,
                    on_notice=notices.append)
            except BaseException as exc:
                failed.append(exc)

        runner = threading.Thread(target=forever, daemon=True)
        runner.start()
        apply_changes(root, "shop", rounds=10, seed_value=3, first_new_id=200_000)
        _wait_applied(checkpoint, primary, failed)
        applied_on_primary = checkpoint.committed()
        assert applied_on_primary is not None and applied_on_primary[1].gtid
        wait_replicated(primary, replica)
        root.close()

        primary._kill()  # kill -9: no clean shutdown, the stream's connection just drops
        promote(replica)
        new_root = replica.root_connection()
        apply_changes(new_root, "shop", rounds=10, seed_value=4, first_new_id=300_000)
        _wait_applied(checkpoint, replica, failed)
        stop.set()
        runner.join(timeout=60)
        assert not runner.is_alive() and not failed, failed

        assert any("the writable server is now" in line for line in notices), notices
        assert any("resuming by GTID" in line for line in notices), notices
        resumed = checkpoint.committed()
        assert resumed is not None and resumed[1].file.startswith("replica-bin.")
        with _target(warehouse) as target:
            assert_target_equals_source(pipeline, new_root, target)
        new_root.close()


def test_a_server_without_the_last_applied_transaction_is_refused(spark, tmp_path):
    with replicated_pair() as (primary, replica):
        root = primary.root_connection()
        create_schema(root, "shop")
        seed(root, "shop", customers=5, orders=10, awkward=5)
        wait_replicated(primary, replica)
        # The replica stops receiving: what the pipeline applies next, it never gets.
        with replica.root_connection() as connection, connection.cursor() as cursor:
            cursor.execute("STOP SLAVE")
        warehouse = tmp_path / "warehouse.duckdb"
        pipeline = demo_pipeline(primary.source(), "shop", tmp_path,
                                 DuckDBTarget(str(warehouse)))
        run(pipeline, spark)
        apply_changes(root, "shop", rounds=3, seed_value=5, first_new_id=200_000)
        run(pipeline, spark)
        root.close()
        primary._kill()
        promote(replica)
        on_replica = dataclasses.replace(pipeline, source=replica.source())
        with pytest.raises(SourceError) as refused:
            run(on_replica, spark)
        assert "has not got the last transaction this pipeline applied" in refused.value.message
        assert gtid_binlog_pos(replica) in refused.value.message
        assert "--snapshot always" in (refused.value.hint or "")


def test_start_at_a_gtid_streams_the_transactions_after_it(spark, mariadb, fresh_database,
                                                         tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    with root.cursor() as cursor:
        cursor.execute("SELECT @@gtid_binlog_pos")
        before = str(cursor.fetchone()[0])
    seed(root, fresh_database, customers=10, orders=20, awkward=15)
    apply_changes(root, fresh_database, rounds=3)
    source = dataclasses.replace(mariadb.source(), start=StartPosition("gtid", gtid=before))
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    result = run(pipeline, spark, snapshot="never")
    assert result.snapshot_rows == 0 and result.changes > 0
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
    root.close()
