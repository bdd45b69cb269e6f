"""`replicator run` without --until-caught-up: streams, rides out a MySQL restart (the query is
restarted after the transient failure), and stops cleanly when asked."""

from __future__ import annotations

import threading
import time

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine.runner import RunOptions, run_pipeline
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.model.pipeline import DuckDBTarget
from replicator.source.positions import current_position
from replicator.source.throwaway import ThrowawayMariaDB
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def _wait_caught_up(checkpoint: CheckpointDir, source, timeout: float) -> None:
    head = current_position(source)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        committed = checkpoint.committed()
        if committed and committed[1] >= head:
            return
        time.sleep(0.3)
    raise AssertionError(f"not caught up with {head} within {timeout} s: {checkpoint.committed()}")


def test_streams_through_a_server_restart_and_stops_on_request(spark, tmp_path):
    with ThrowawayMariaDB(workdir=str(tmp_path / "mariadb")) as server:
        root = server.root_connection()
        create_schema(root, "shop")
        seed(root, "shop", customers=10, orders=30, awkward=10)
        warehouse = tmp_path / "warehouse.duckdb"
        pipeline = demo_pipeline(server.source(), "shop", tmp_path, DuckDBTarget(str(warehouse)))
        checkpoint = CheckpointDir(pipeline.checkpoint_dir)
        stop, notices, outcome = threading.Event(), [], []
        options = RunOptions(stop=stop, handle_signals=False, on_notice=notices.append)

        def forever():
            try:
                outcome.append(run_pipeline(pipeline, options, spark=spark))
            except BaseException as exc:  # reported by the assertions below
                outcome.append(exc)

        runner = threading.Thread(target=forever, daemon=True)
        runner.start()
        try:
            apply_changes(root, "shop", rounds=3)
            _wait_caught_up(checkpoint, server.source(), 180)
            root.close()
            server.stop()  # the datadir (and binlog) stay: workdir is ours
            time.sleep(3)  # triggers meet a refused connection
            server.start()
            root = server.root_connection()
            apply_changes(root, "shop", rounds=3, seed_value=7, first_new_id=300_000)
            _wait_caught_up(checkpoint, server.source(), 180)
        finally:
            stop.set()
            runner.join(120)
        assert outcome, "the run did not stop within 120 s of the request"
        result = outcome[0]
        assert not isinstance(result, BaseException), repr(result)
        assert result.stopped and result.changes > 0
        assert any("transient error" in notice for notice in notices), notices

        import duckdb

        with duckdb.connect(str(warehouse), read_only=True) as target:
            assert_target_equals_source(pipeline, root, target)
        root.close()
