"""`replicator status` without a server: who holds the run lock, what run.json records, and
the health verdict (exit 0 healthy / 1 degraded / 2 down) from those facts."""

from __future__ import annotations

import json
import os

from replicator.cli.status import DEGRADED, DOWN, HEALTHY, _health, _run_state
from replicator.engine.apply.metrics import BatchReport, TableReport
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.engine.state.runstate import STALE_S, RunStateWriter, lock_holder, read_run_state
from replicator.errors import BinlogGoneError


def test_the_lock_holder_is_seen_and_run_json_is_written_only_under_the_lock(tmp_path):
    checkpoint = CheckpointDir(tmp_path / "cp")
    assert lock_holder(checkpoint.path) is None  # never run: no lock file
    writer = RunStateWriter(checkpoint.path, "shop", clock=lambda: 1_000.0)
    writer.update(phase="snapshot")
    assert read_run_state(checkpoint.path) is None  # not holding the lock: writes nothing
    with checkpoint.lock("shop"):
        # flock is per open file: the probe's own descriptor sees the lock as taken.
        assert lock_holder(checkpoint.path) == os.getpid()
        writer.batch(BatchReport("snapshot", -1, None, [TableReport("shop.orders", 70, 70)],
                                 finished_at=990.0), estimates={"shop.orders": 100})
        writer.batch(BatchReport("stream", 1, {"file": "mysql-bin.000002", "pos": 77},
                                 [TableReport("shop.orders", 5, 4, last_ts_ms=995_000,
                                              unrouted=1)], seconds=0.25, finished_at=996.0))
    assert lock_holder(checkpoint.path) is None  # released with the run
    writer.error(BinlogGoneError("binlog gone", hint="run --snapshot always"), transient=False)
    state = read_run_state(checkpoint.path)
    assert state["phase"] == "failed" and state["pid"] == os.getpid()
    assert state["snapshot"] == {"shop.orders": {"rows": 70, "estimate": 100}}
    assert state["tables"]["shop.orders"] == {"changes": 75, "rows": 74, "unrouted": 1}
    assert state["last_batch"]["position"] == "mysql-bin.000002:77"
    assert state["last_change_ts_ms"] == 995_000
    assert state["last_error"]["code"] == "BinlogGoneError"
    assert state["last_error"]["hint"] == "run --snapshot always"
    assert oct((checkpoint.path / "run.json").stat().st_mode & 0o777) == "0o600"
    assert json.loads((checkpoint.path / "run.json").read_text()) == state


def test_a_second_run_does_not_overwrite_the_first_runs_record(tmp_path):
    checkpoint = CheckpointDir(tmp_path / "cp")
    checkpoint.create()
    (checkpoint.path / "run.lock").write_text("999999\n")  # another process's PID
    RunStateWriter(checkpoint.path, "shop").update(phase="failed")
    assert read_run_state(checkpoint.path) is None


def _status(**fields):
    status = {"running": True, "state": "running (streaming)", "last_error": None,
              "heartbeat_age_s": 2.0, "lag_seconds": 1.0, "problems": [],
              "spark_log": "/cp/spark.log"}
    status.update(fields)
    return status


def test_health_verdicts():
    assert _health(_status(), max_lag_s=300, stopped_ok=False) == (HEALTHY, [])
    code, why = _health(_status(state="running (retrying)",
                                last_error={"message": "server gone"}),
                        max_lag_s=300, stopped_ok=False)
    assert code == DEGRADED and "server gone" in why[0]
    code, why = _health(_status(heartbeat_age_s=STALE_S + 1), max_lag_s=300, stopped_ok=False)
    assert code == DEGRADED and "stuck" in why[0]
    code, why = _health(_status(lag_seconds=301.0), max_lag_s=300, stopped_ok=False)
    assert code == DEGRADED and "--max-lag" in why[0]
    code, why = _health(_status(problems=["source: connection refused"]), max_lag_s=300,
                        stopped_ok=False)
    assert code == DEGRADED and why == ["source: connection refused"]
    # A busy DuckDB file (its one writer is the run) is shown, not counted.
    assert _health(_status(problems=["target: database is locked"]), max_lag_s=300,
                   stopped_ok=False) == (HEALTHY, [])
    stopped = _status(running=False, state="caught_up", heartbeat_age_s=None)
    assert _health(stopped, max_lag_s=300, stopped_ok=False)[0] == DOWN
    assert _health(stopped, max_lag_s=300, stopped_ok=True) == (HEALTHY, [])
    failed = _status(running=False, state="failed", last_error={"message": "binlog gone"})
    assert _health(failed, max_lag_s=300, stopped_ok=True) == (DOWN, [
        "the last run failed: binlog gone"])
    assert _health(_status(running=False, state="never started"), max_lag_s=300,
                   stopped_ok=True)[0] == DOWN


def test_run_state_names():
    assert _run_state(None, {}, False) == "never started"
    assert _run_state(None, {"phase": "streaming"}, False) == "died"  # killed: no end written
    assert _run_state(None, {"phase": "failed"}, False) == "failed"
    assert _run_state(42, {"phase": "snapshot", "pid": 42}, True) == "running (snapshot)"
    assert _run_state(42, {"phase": "failed", "pid": 7}, False) == "running (starting)"


def test_a_binlog_about_to_be_purged_degrades_and_a_lease_elsewhere_is_running():
    soon = {"file": "mysql-bin.000007", "expire_s": 86_400, "seconds_left": 5_400,
            "text": "mysql-bin.000007 may be purged in 1.5 h (expiry 24 h)"}
    code, why = _health(_status(retention=soon), max_lag_s=300, stopped_ok=False)
    assert code == DEGRADED and "may be purged in 1.5 h" in why[0]
    later = {**soon, "seconds_left": 3 * 86_400}
    assert _health(_status(retention=later), max_lag_s=300, stopped_ok=False) == (HEALTHY, [])
    # Not running here: down, unless a run elsewhere holds the target's lease.
    stopped = _status(running=False, state="stopped")
    assert _health(stopped, max_lag_s=300, stopped_ok=False)[0] == DOWN
    lease = {"holder": "db-2/pid 7", "held": True}
    assert _health({**stopped, "lease": lease}, max_lag_s=300, stopped_ok=False) == (HEALTHY, [])
