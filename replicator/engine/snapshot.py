"""The initial snapshot: copy each table in key-range chunks, read in parallel on Spark.

The binlog position is recorded *before* the copy (by the runner); streaming then replays
everything after it. Replayed changes are full-image upserts and deletes, so rows copied
"too late" converge to the source exactly.

Chunks are read on executors (``source.snapshot.read_chunk``, one connection per chunk) and
applied on the driver in chunk order, each under its own negative sink batch id. Progress
(chunks applied per table) is saved in ``start.json`` after each chunk, and the chunk plan is
saved once per table, so a crash mid-snapshot resumes at the first chunk not applied; the
one chunk that may be in flight is skipped by the sink's state table if it did commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from replicator.engine.checkpoint import (
    COPY_SPAN,
    SLOT_SPAN,
    CheckpointDir,
    StartState,
    routed_chunk_number,
    snapshot_chunk_number,
)
from replicator.errors import EngineError, ReplicatorError

if TYPE_CHECKING:
    from replicator.engine.transform import BatchApplier
    from replicator.model.catalog import Catalog, SourceTable
    from replicator.model.changes import BinlogPosition, ChangeEvent
    from replicator.model.pipeline import MySQLSource

CHUNK_ROWS = 20_000


def read_chunk_events(
    source: MySQLSource, table: SourceTable, item: tuple[int, Any], position: BinlogPosition
) -> tuple[int, list[ChangeEvent]]:
    """Executor side: one chunk's rows as ChangeEvents (pickled back exactly)."""
    from replicator.engine.errors import carry_errors
    from replicator.source.snapshot import read_chunk

    index, chunk = item
    with carry_errors():
        return index, list(read_chunk(source, table, chunk, position=position))


def _collect(chunks: Any, table: str) -> list[tuple[int, list[ChangeEvent]]]:
    """Run the chunk reads; an executor's error comes back as the ReplicatorError it was
    (message, hint, transient), not as Spark's PythonException with a Java stack."""
    from replicator.engine.errors import driver_error

    try:
        return list(chunks.collect())
    except ReplicatorError:
        raise
    except Exception as failure:  # Py4J/PySpark wrap whatever the executor raised
        raise driver_error(failure, doing=f"copying {table}") from None


def _remove_absent_rows(
    applier: BatchApplier, source_table: SourceTable, table_plan: Any, position: BinlogPosition,
    chunk_number: int,
) -> int:
    """After a copy into a target that had a life before (``--snapshot always``, a table added
    back): delete the target rows whose keys the source no longer has. The copy upserted every
    row the source has; rows deleted while nothing followed the binlog would otherwise stay.

    The keys come from the same source/target comparison as ``replicator verify`` (key order,
    soft deletes, SCD2 and changelog targets handled there); they are applied as delete
    changes through the normal path, so each mode records a delete its own way, in one sink
    transaction under a batch id of its own (exactly once; a crash before it commits leaves
    the keys for the resumed run to find again). The stream resumes from before the copy, so
    a key deleted here that comes back in the binlog is re-inserted by its replay.
    """
    from replicator.model.changes import ChangeEvent
    from replicator.verify.compare import SEGMENT_ROWS, TableVerifier
    from replicator.verify.normalize import source_parameter
    from replicator.verify.report import TableReport

    if not table_plan.source_key or any(c.mask for c in table_plan.key_columns):
        return 0  # no key to compare by, or a hashed key that cannot be mapped back
    if table_plan.outbox is not None:
        return 0  # an outbox route's rows come from events, not from rows still in the source
    # A routed target: only the rows of this source table (its _SOURCE_TABLE) are compared.
    verifier = TableVerifier(applier.pipeline, source_table, table_plan, applier.sink.connection,
                             end_transaction=applier.plan.target_kind == "snowflake",
                             source_name=source_table.name if table_plan.routed else None)
    try:
        report = TableReport(table_plan.source_name, "")
        verifier.compare(report, SEGMENT_ROWS)
    finally:
        verifier.close()
    events = [
        ChangeEvent(table=source_table.name, op="d", position=position, row_index=index,
                    ts_ms=0, before={k: source_parameter(v) for k, v in difference.key.items()})
        for index, difference in enumerate(d for d in report.differences if d.kind == "extra")
    ]
    if events:
        applier.apply_snapshot_chunk(table_plan, chunk_number, events, position)
    return len(events)


def run_snapshot(
    spark: Any,
    applier: BatchApplier,
    catalog: Catalog,
    checkpoint: CheckpointDir,
    state: StartState,
    *,
    chunk_rows: int = CHUNK_ROWS,
    should_stop: Callable[[], bool] = lambda: False,
) -> bool:
    """Copy every table not yet copied; True when the snapshot is complete."""
    from replicator.source.snapshot import plan_chunks

    source = applier.pipeline.source
    position = state.snapshot_position or state.position
    parallelism = max(1, int(spark.sparkContext.defaultParallelism))
    wanted = {name.lower() for name in state.snapshot_tables}
    copied: set[str] = set()
    for name in applier.plan.source_names():
        if (wanted and name.lower() not in wanted) or name.lower() in copied:
            continue
        copied.add(name.lower())
        # Every plan reading this source table (the routes of an outbox; a routed target and
        # a named one) gets each chunk; progress is per source table, so a chunk counts as
        # applied once all of them have it.
        readers = [t for t in applier.plan.tables
                   if any(n.lower() == name.lower() for n in t.source_names)]
        source_table = next((t for t in catalog.tables if t.name.lower() == name.lower()), None)
        if source_table is None:
            raise EngineError(
                f"source table {name} does not exist",
                hint="create it, or remove it from the pipeline's tables",
            )
        chunks = checkpoint.load_chunks(name)
        if chunks is None:
            chunks = plan_chunks(source, source_table, chunk_rows=chunk_rows)
            checkpoint.save_chunks(name, chunks)
        copy = state.copy_number(name)
        numbers: dict[int, Callable[[int], int]] = {}
        for reader in readers:
            if reader.routed:
                # Many sources, one target's state rows: this copy's chunks get a slot of
                # their own in that target (checkpoint.SLOT_SPAN), saved before any chunk is
                # applied under it.
                if len(chunks) >= SLOT_SPAN - 1:
                    raise EngineError(
                        f"{name}: {len(chunks)} snapshot chunks, more than a routed copy holds",
                        hint="copy with larger chunks (run --chunk-rows N)",
                    )
                slot = state.routed_slot(".".join(reader.target_parts), name)
                numbers[id(reader)] = lambda index, slot=slot: routed_chunk_number(slot, index)
            else:
                numbers[id(reader)] = lambda index, copy=copy: snapshot_chunk_number(copy, index)
        checkpoint.save_start(state)
        done = state.chunks_applied.get(name, 0)
        pending = list(range(done, len(chunks)))
        for wave_start in range(0, len(pending), parallelism):
            if should_stop():
                return False
            wave = [(index, chunks[index]) for index in pending[wave_start : wave_start + parallelism]]
            results = _collect(
                spark.sparkContext.parallelize(wave, len(wave))
                .map(lambda item, t=source_table: read_chunk_events(source, t, item, position)),
                name,
            )
            for index, events in sorted(results, key=lambda result: result[0]):
                for reader in readers:
                    applier.apply_snapshot_chunk(reader, numbers[id(reader)](index), events,
                                                 position)
                state.chunks_applied[name] = index + 1
                checkpoint.save_start(state)
        if state.epoch > 0 or copy > 0:
            for reader in readers:
                last = SLOT_SPAN - 1 if reader.routed else COPY_SPAN - 1
                _remove_absent_rows(applier, source_table, reader, position,
                                    numbers[id(reader)](last))
    state.snapshot = "done"
    for key in copied:
        state.copies[key] = state.copies.get(key, 0) + 1
        state.forget_slots(key)
    state.tables = sorted({*state.tables, *applier.plan.source_names()})
    state.snapshot_tables = []
    state.snapshot_position = None
    checkpoint.save_start(state)
    return True
