"""engine.recopy.queue: a table swap's batch applied again does not start its copy over."""

from __future__ import annotations

from replicator.engine.recopy import queue
from replicator.engine.state.checkpoint import CheckpointDir, StartState
from replicator.model.changes import BinlogPosition


def _state() -> StartState:
    return StartState(BinlogPosition("mysql-bin.000001", 4), "done",
                      copies={"shop.orders": 1})


def test_the_swap_batch_applied_again_leaves_its_copy_under_way(tmp_path):
    checkpoint = CheckpointDir(tmp_path)
    state = _state()
    assert queue(state, checkpoint, ["shop.orders"], afresh=True, by=7) == ["shop.orders"]
    state.chunks_applied["shop.orders"] = 3  # begun: chunks 0-2 applied under copy 1
    checkpoint.save_chunks("shop.orders", ["a", "b", "c", "d"])
    # Batch 7 replayed (a crash between its sink commit and Spark's): nothing changes.
    assert queue(state, checkpoint, ["shop.orders"], afresh=True, by=7) == []
    assert (state.recopies, state.chunks_applied, state.copies) == (
        ["shop.orders"], {"shop.orders": 3}, {"shop.orders": 1})
    assert checkpoint.load_chunks("shop.orders") == ["a", "b", "c", "d"]
    checkpoint.save_start(state)
    assert checkpoint.load_start().recopy_queued_by == {"shop.orders": 7}
    # A swap in a later batch: the copy starts over, under the next copy number.
    assert queue(state, checkpoint, ["shop.orders"], afresh=True, by=9) == ["shop.orders"]
    assert (state.chunks_applied, state.copies, state.recopy_queued_by) == (
        {}, {"shop.orders": 2}, {"shop.orders": 9})
    assert checkpoint.load_chunks("shop.orders") is None


def test_a_copy_queued_afresh_for_another_cause_forgets_the_swap_batch(tmp_path):
    checkpoint = CheckpointDir(tmp_path)
    state = _state()
    queue(state, checkpoint, ["shop.orders"], afresh=True, by=7)
    state.chunks_applied["shop.orders"] = 1
    # A type change re-created a column (at start-up, no batch): started over; batch 7
    # replayed after that is not recognised and starts it over once more (more work, never
    # less: safe).
    assert queue(state, checkpoint, ["shop.orders"], afresh=True) == ["shop.orders"]
    assert state.recopy_queued_by == {}
    assert queue(state, checkpoint, ["shop.orders"], afresh=True, by=7) == ["shop.orders"]
