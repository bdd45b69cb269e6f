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

from replicator.engine.checkpoint import CheckpointDir, StartState
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
    for table_plan in applier.plan.tables:
        name = table_plan.source_name
        if wanted and name.lower() not in wanted:
            continue
        source_table = catalog.table(table_plan.source_database, table_plan.source_table)
        if source_table is None:
            raise EngineError(
                f"source table {name} does not exist",
                hint="create it, or remove it from the pipeline's tables",
            )
        chunks = checkpoint.load_chunks(name)
        if chunks is None:
            chunks = plan_chunks(source, source_table, chunk_rows=chunk_rows)
            checkpoint.save_chunks(name, chunks)
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
                applier.apply_snapshot_chunk(table_plan, index, events, position)
                state.chunks_applied[name] = index + 1
                checkpoint.save_start(state)
    state.snapshot = "done"
    state.tables = sorted({*state.tables, *(t.source_name for t in applier.plan.tables)})
    state.snapshot_tables = []
    state.snapshot_position = None
    checkpoint.save_start(state)
    return True
