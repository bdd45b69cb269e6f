"""The stream: micro-batches the driver cuts from the binlog, Spark decodes and the driver applies.

One loop on the driver, one batch at a time:

1. the batch's end: about ``batching.max_rows`` row changes after the last one's end, at a
   transaction boundary (``BinlogBatches.end_after``), written to the batch log
   (``CheckpointDir.log_batch``) *before* anything of it runs;
2. one Spark job, one task per decode range, lands the range's change batches as Parquet and
   returns their manifest rows (``BinlogBatches.decode``);
3. the applier applies them: per target table staging -> MERGE -> state row, in one
   transaction (``BatchApplier.apply_batch``); then the batch is committed in the log.

Exactly once does not rest on the log: the sink skips a batch id it has recorded. The log makes
a batch that was cut short (a crash between 1 and 3, a stop at once) run again over the *same*
range, so its files and batch id are the same; with ``target.atomic`` off a table may have
committed it and another not.

The pacing is Spark's triggers': ``--until-caught-up`` runs batches back to back up to the head
seen at start (``availableNow``); a run that streams on starts a batch every ``max_delay`` at
most, and only when the binlog has grown (a processing-time trigger without empty batches).
Between batches, and while it waits, the loop runs ``between`` (the lease's renewal, a re-copy's
next chunk) and looks at the stop flag, so a stop asked mid-batch stops after that batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from replicator.engine import failpoints
from replicator.engine.job.binlog_batches import BinlogBatches
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.model.changes import BinlogPosition

# How often a waiting stream looks at the stop flag and runs ``between``.
POLL_S = 0.25


def stream(spark: Any, batches: BinlogBatches, applier: Any, checkpoint: CheckpointDir,
           start: BinlogPosition, *, until_caught_up: bool, interval_ms: int,
           should_stop: Callable[[], bool], between: Callable[[], None]) -> bool:
    """Apply micro-batches from the batch log's last commit (else ``start``) until caught up
    (``until_caught_up``) or asked to stop. True: stopped on request."""
    interval = max(1, interval_ms) / 1000
    if until_caught_up:
        batches.pin_head()
    batch, begin, end = checkpoint.next_batch()
    if batch == 0 and end is None:
        # A new stream records where it starts as an empty batch 0: from then on the log
        # says how far the stream got (``status``, the idle run's check, the next start),
        # whether or not the binlog has grown since.
        checkpoint.log_batch(0, start.to_offset())
        checkpoint.commit_batch(0)
        batch, begin, end = checkpoint.next_batch()
    begin = begin or start.to_offset()
    try:
        while not should_stop():
            started = time.monotonic()
            if end is None:  # nothing cut short to run again: cut the next batch
                position, head = BinlogPosition.from_offset(begin), batches.head()
                if position >= head:
                    if until_caught_up:
                        return False
                    if _wait(started + interval, should_stop, between):
                        return True
                    continue
                end = batches.end_after(position, head)
                checkpoint.log_batch(batch, end)
            reading = time.perf_counter()
            manifest = batches.decode(spark, batches.ranges(begin, end))
            applier.apply_batch(manifest, batch, end, read_seconds=time.perf_counter() - reading)
            # Committed in the sink, not yet in the batch log: a crash here runs it again.
            failpoints.reached("apply.before_spark_commit")
            checkpoint.commit_batch(batch)
            batch, begin, end = batch + 1, end, None
            between()
            if not until_caught_up and _wait(started + interval, should_stop, between):
                return True
        return True
    finally:
        batches.close()


def _wait(until: float, should_stop: Callable[[], bool], between: Callable[[], None]) -> bool:
    """Wait until ``until`` (monotonic), running ``between`` every POLL_S. True: asked to stop."""
    while True:
        if should_stop():
            return True
        left = until - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(POLL_S, left))
        between()
