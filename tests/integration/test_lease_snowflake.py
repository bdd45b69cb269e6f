"""The lease statements on fakesnow: take, refuse, take over, and a batch of the run that
lost the lease rolls back (the target and the state table keep nothing of it)."""

from __future__ import annotations

import pytest

from replicator.engine.state.lease import take_lease
from replicator.errors import LeaseError
from replicator.plan import build_plan
from replicator.sink import open_sink
from tests.fixtures.row_transforms import stage_events
from tests.fixtures.sink_sample import CATALOG, sample_pipeline, scenario

fakesnow = pytest.importorskip("fakesnow")


def test_the_lease_fences_a_batch_on_snowflake():
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        pipeline = sample_pipeline("snowflake")
        plan = build_plan(pipeline, CATALOG)
        first = open_sink(pipeline, plan)
        first.prepare()
        lease = take_lease(first, pipeline.name, holder="other-host/pid 4242")
        table = plan.table("shop.regions")
        batches, _ = scenario()
        batch_id, by_table = batches[0]
        assert not first.apply(table, batch_id, {"file": "f", "pos": 1},
                               stage_events(table, by_table["shop.regions"])).skipped

        second = open_sink(pipeline, plan)
        with pytest.raises(LeaseError) as refused:
            take_lease(second, pipeline.name)
        assert f"{lease.holder} holds its lease since" in refused.value.message
        taken = take_lease(second, pipeline.name, take_over=True)
        assert taken.generation == lease.generation + 1

        batch_id, by_table = batches[2]
        with pytest.raises(LeaseError, match="another run took the lease"):
            first.apply(table, batch_id, {"file": "f", "pos": 3},
                        stage_events(table, by_table["shop.regions"]))
        assert first.last_applied(table)["batch_id"] == 1  # nothing of batch 3 recorded
        assert not second.apply(table, batch_id, {"file": "f", "pos": 3},
                                stage_events(table, by_table["shop.regions"])).skipped
        assert second.last_applied(table)["batch_id"] == batch_id
        taken.release()
        again = take_lease(first, pipeline.name)  # released: free at once
        assert again.generation == taken.generation + 1
        first.close()
        second.close()


def test_a_lease_of_a_dead_process_on_this_host_is_free():
    import os
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    assert dead_pid != os.getpid()
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        pipeline = sample_pipeline("snowflake")
        sink = open_sink(pipeline, build_plan(pipeline, CATALOG))
        sink.prepare()
        killed = take_lease(sink, pipeline.name, holder=f"{socket.gethostname()}/pid {dead_pid}")
        # kill -9 leaves the lease held; a restart on the same host takes it at once
        restarted = take_lease(sink, pipeline.name)
        assert restarted.generation == killed.generation + 1
        sink.close()
