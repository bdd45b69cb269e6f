"""One run per pipeline: a second `run` of the same pipeline fails at once, naming the PID of
the process that holds the pipeline's lock; the lock goes with the process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator.engine.runner import RunOptions, run_pipeline
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.errors import EngineError
from replicator.model.pipeline import (
    DuckDBTarget,
    EngineConfig,
    MySQLSource,
    Pipeline,
    TablePipeline,
    TargetConfig,
)

HOLDER = """
import sys, time
from replicator.engine.state.checkpoint import CheckpointDir
with CheckpointDir(sys.argv[1]).lock("shop"):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_a_second_lock_fails_naming_the_holder_and_is_free_after(tmp_path: Path):
    checkpoint = CheckpointDir(tmp_path / "ckpt")
    with checkpoint.lock("shop"):
        with pytest.raises(EngineError) as held, CheckpointDir(tmp_path / "ckpt").lock("shop"):
            pass
        assert f"PID {os.getpid()} holds" in held.value.message
        assert "one process per pipeline" in (held.value.hint or "")
    with CheckpointDir(tmp_path / "ckpt").lock("shop"):  # released on exit
        pass


def test_a_second_run_in_another_process_fails_at_once(tmp_path: Path):
    checkpoint = tmp_path / "ckpt"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(checkpoint)],
                              stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        pipeline = Pipeline(
            name="shop",
            # Nothing listens here: the run must stop at the lock, before connecting.
            source=MySQLSource(host="127.0.0.1", port=9, connect_timeout_s=1),
            target=TargetConfig(DuckDBTarget(str(tmp_path / "w.duckdb"))),
            tables=(TablePipeline("shop", "orders"),),
            engine=EngineConfig(checkpoint=str(checkpoint)),
        )
        started = time.monotonic()
        with pytest.raises(EngineError) as second:
            run_pipeline(pipeline, RunOptions(until_caught_up=True, handle_signals=False))
        assert time.monotonic() - started < 1
        assert second.value.message == (
            f"pipeline shop is already running (PID {holder.pid} holds {checkpoint / 'run.lock'})")
        assert not (tmp_path / "w.duckdb").exists()
    finally:
        holder.kill()
        holder.wait()
    # The holder died: the lock died with it (no stale lock file to remove).
    with CheckpointDir(checkpoint).lock("shop"):
        pass
