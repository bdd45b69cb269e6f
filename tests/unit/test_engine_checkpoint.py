"""The checkpoint directory: start state round trip, 0700, Spark's offset log, epochs."""

from __future__ import annotations

import json
import stat

from replicator.engine.state.checkpoint import (
    BATCHES_RETAINED,
    COPY_SPAN,
    EPOCH_SPAN,
    CheckpointDir,
    StartState,
    copy_done_number,
    epoch_of,
    is_copy_done,
    sink_batch_id,
    snapshot_batch_id,
    snapshot_chunk_number,
)
from replicator.model.changes import BinlogPosition


def test_start_state_round_trip_and_private_directory(tmp_path):
    checkpoint = CheckpointDir(tmp_path / "ckpt" / "pipe")
    assert checkpoint.load_start() is None
    state = StartState(BinlogPosition("mysql-bin.000003", 1234), "pending", epoch=2,
                       chunks_applied={"shop.orders": 3})
    checkpoint.save_start(state)
    assert checkpoint.load_start() == state
    assert stat.S_IMODE(checkpoint.path.stat().st_mode) == 0o700
    state.copied_at = {"shop.orders": BinlogPosition("mysql-bin.000002", 77, gtid="0-1-5")}
    state.kept_copies = ["shop.orders"]
    checkpoint.save_start(state)
    assert checkpoint.load_start().copied_at["shop.orders"].gtid == "0-1-5"
    assert checkpoint.load_start() == state


def _spark_log(directory, batch, offset):
    (directory / "offsets").mkdir(parents=True, exist_ok=True)
    (directory / "commits").mkdir(parents=True, exist_ok=True)
    (directory / "offsets" / str(batch)).write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps(offset)
    )


def test_committed_position_comes_from_spark_logs(tmp_path):
    checkpoint = CheckpointDir(tmp_path)
    checkpoint.save_start(StartState(BinlogPosition("mysql-bin.000001", 4), "done"))
    assert checkpoint.resume_position() == BinlogPosition("mysql-bin.000001", 4)
    _spark_log(checkpoint.stream_dir, 0, {"file": "mysql-bin.000001", "pos": 900})
    _spark_log(checkpoint.stream_dir, 1, {"file": "mysql-bin.000002", "pos": 50})
    (checkpoint.stream_dir / "commits" / "0").write_text("v1\n{}")
    # batch 1 is planned but not committed: resume from the end of batch 0
    assert checkpoint.committed() == (0, BinlogPosition("mysql-bin.000001", 900))
    assert checkpoint.batch_end_offset(1) == {"file": "mysql-bin.000002", "pos": 50}
    assert checkpoint.resume_position() == BinlogPosition("mysql-bin.000001", 900)


def test_epoch_zero_is_the_sink_contract_and_epochs_never_collide():
    assert sink_batch_id(0, 7) == 7 and snapshot_batch_id(0, 0) == -1
    assert snapshot_batch_id(0, 4) == -5
    assert sink_batch_id(1, 0) == EPOCH_SPAN
    assert {epoch_of(sink_batch_id(3, 12)), epoch_of(snapshot_batch_id(3, 12))} == {3}
    assert epoch_of(snapshot_batch_id(0, 10**6)) == 0


def test_a_done_marker_is_told_from_every_other_batch_of_any_copy_and_epoch():
    for epoch in (0, 3):
        for copy in (0, 1, 999):
            assert is_copy_done(snapshot_batch_id(epoch, copy_done_number(copy)))
            # its chunks, the re-copy's begin marker and absent-row delete (engine.recopy)
            for index in (0, 7, COPY_SPAN - 4, COPY_SPAN - 2, COPY_SPAN - 1):
                number = snapshot_chunk_number(copy, index)
                assert not is_copy_done(snapshot_batch_id(epoch, number))
        assert not is_copy_done(sink_batch_id(epoch, COPY_SPAN - 3))  # a stream batch


def test_files_replicator_writes_are_user_only_under_umask_022(tmp_path):
    import os

    from replicator.engine.apply.prometheus import PipelineMetrics
    from replicator.engine.job.session import DEFAULT_CONF

    previous = os.umask(0o022)
    try:
        checkpoint = CheckpointDir(tmp_path / "pipe")
        checkpoint.create()
        checkpoint.start_file.write_text("{}")  # an older, looser file is replaced
        os.chmod(checkpoint.start_file, 0o644)
        checkpoint.save_start(StartState(BinlogPosition("mysql-bin.000001", 4), "pending"))
        checkpoint.save_chunks("shop.orders", [1, 2])
        with checkpoint.lock("pipe"):
            pass
        metrics = tmp_path / "metrics.prom"
        PipelineMetrics("pipe").write_file(metrics)
    finally:
        os.umask(previous)
    paths = [checkpoint.path, *checkpoint.path.rglob("*"), metrics]
    assert {p.name for p in paths} >= {"start.json", "run.lock", "snapshot",
                                        "shop.orders.chunks.pickle", "metrics.prom"}
    loose = [(p.name, oct(stat.S_IMODE(p.stat().st_mode))) for p in paths
             if stat.S_IMODE(p.stat().st_mode) & 0o077]
    assert loose == []
    # Spark's own logs under the checkpoint: Hadoop applies its umask setting, not ours.
    assert DEFAULT_CONF["spark.hadoop.fs.permissions.umask-mode"] == "077"


def test_the_batch_log_replays_a_batch_cut_short_over_its_logged_range(tmp_path):
    checkpoint = CheckpointDir(tmp_path / "pipe")
    assert checkpoint.next_batch() == (0, None, None)  # a new stream: from its start
    first, second = ({"file": "mysql-bin.000001", "pos": p, "gtid": f"0-1-{p}"} for p in (300, 900))
    checkpoint.log_batch(0, first)
    assert checkpoint.next_batch() == (0, None, first)  # logged, not committed: run it again
    checkpoint.commit_batch(0)
    assert checkpoint.next_batch() == (1, first, None)  # committed: the next one starts there
    checkpoint.log_batch(1, second)
    assert checkpoint.next_batch() == (1, first, second)
    assert checkpoint.committed() == (0, BinlogPosition.from_offset(first))
    checkpoint.commit_batch(1)
    assert checkpoint.resume_position() == BinlogPosition.from_offset(second)
    # No scratch file is left behind, and what is written is the user's only.
    for log in ("offsets", "commits"):
        names = sorted(p.name for p in (checkpoint.stream_dir / log).iterdir())
        assert names == ["0", "1"]
        assert stat.S_IMODE((checkpoint.stream_dir / log / "1").stat().st_mode) == 0o600


def test_the_batch_log_reads_a_checkpoint_spark_wrote_and_keeps_the_newest_entries(tmp_path):
    checkpoint = CheckpointDir(tmp_path / "pipe")
    for batch in range(3):
        _spark_log(checkpoint.stream_dir, batch, {"file": "mysql-bin.000002", "pos": 100 + batch})
    for batch in range(2):  # Spark's batch 2 was cut short
        (checkpoint.stream_dir / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert checkpoint.next_batch() == (2, {"file": "mysql-bin.000002", "pos": 101},
                                       {"file": "mysql-bin.000002", "pos": 102})
    checkpoint.commit_batch(2)
    for batch in range(3, 3 + BATCHES_RETAINED + 5):
        checkpoint.log_batch(batch, {"file": "mysql-bin.000002", "pos": 100 + batch})
        checkpoint.commit_batch(batch)
    last = 2 + BATCHES_RETAINED + 5
    for log in ("offsets", "commits"):
        kept = sorted(int(p.name) for p in (checkpoint.stream_dir / log).iterdir())
        assert kept == list(range(last - BATCHES_RETAINED + 1, last + 1))
    assert checkpoint.next_batch() == (last + 1, {"file": "mysql-bin.000002", "pos": 100 + last},
                                       None)
