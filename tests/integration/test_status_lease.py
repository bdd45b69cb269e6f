"""`status` reads the target's lease: a pipeline whose run holds the lease on another host is
running (healthy, "running elsewhere", the holder named), not down; a released lease, one not
renewed within the timeout, or one held by a process of this host that is gone, is free."""

from __future__ import annotations

import pytest

from replicator.cli.status import collect_status
from replicator.context import Context
from replicator.demo.workload import create_schema
from replicator.engine.state import lease as lease_module
from replicator.engine.state.lease import take_lease
from replicator.model.pipeline import DuckDBTarget
from replicator.sink import open_sink
from tests.integration.e2e_support import demo_pipeline

pytestmark = [pytest.mark.mysql]


def test_status_names_a_run_elsewhere_by_its_lease(mariadb, mysql_source, fresh_database,
                                                   tmp_path, monkeypatch):
    with mariadb.root_connection() as root:
        create_schema(root, fresh_database)
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path,
                             DuckDBTarget(str(tmp_path / "warehouse.duckdb")))
    status = collect_status(pipeline)
    assert status["lease"] is None and status["health"] == 2  # never started anywhere

    sink = open_sink(pipeline, Context(pipeline).plan)
    sink.prepare()
    held = take_lease(sink, pipeline.name, holder="db-host-2/pid 4242")
    sink.close()
    status = collect_status(pipeline)
    assert status["lease"]["holder"] == "db-host-2/pid 4242" and status["lease"]["held"]
    assert status["lease"]["generation"] == 1
    assert not status["running"] and (status["health"], status["reasons"]) == (0, [])

    # Not renewed within the timeout: the host is gone, the lease free, the pipeline down.
    monkeypatch.setattr(lease_module, "LEASE_TIMEOUT_S", 0.0)
    status = collect_status(pipeline)
    assert status["lease"]["holder"] == "db-host-2/pid 4242" and not status["lease"]["held"]
    assert status["health"] == 2
    monkeypatch.undo()

    # Released by its run: free.
    sink = open_sink(pipeline, Context(pipeline).plan)
    held.sink = sink
    held.release()
    sink.close()
    status = collect_status(pipeline)
    assert status["lease"]["holder"] is None and not status["lease"]["held"]
    assert status["health"] == 2


def test_a_lease_of_a_dead_process_of_this_host_is_free():
    import datetime as dt

    now = dt.datetime(2026, 11, 24, 3, 0, 0)
    gone = f"{lease_module.socket.gethostname()}/pid 999999999"
    assert not lease_module.describe((3, gone, now, now, now))["held"]
    assert lease_module.describe((3, "elsewhere/pid 1", now, now, now))["held"]
    assert lease_module.describe(None) is None
