"""The initial snapshot: every table's key-range chunks read at once on Spark, into files.

The binlog position is recorded *before* the copy (by the runner); streaming then replays
everything after it. Replayed changes are full-image upserts and deletes, so rows copied
"too late" converge to the source exactly.

All pending chunks of all tables are the tasks of ONE Spark job (no table waits for another,
no wave waits for its slowest chunk). Each task reads its chunk straight into an Arrow change
batch (``source.snapshot.read_chunk_batch``) and writes it as a Parquet file in the landing
zone (layout in ``chunk_path``); nothing but a tiny manifest goes back through Spark. The
driver runs the job in a background thread and, meanwhile, applies the files as they appear:
``APPLY_GROUP`` consecutive chunks of a table per sink batch (one MERGE), staged slice by slice
(``BatchApplier.apply_snapshot_batches``), under the sink batch id of the group's first chunk.
Progress (chunks applied per table) is saved in ``start.json`` after each group, and groups
are aligned to it, so a crash mid-snapshot resumes at the first group not applied with the
same batch ids; a group that did commit before the crash is skipped by the sink's state table.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from replicator.engine import failpoints
from replicator.engine.job.errors import carry_errors, driver_error
from replicator.engine.job.landing import landing_root
from replicator.engine.job.session import spark_context
from replicator.engine.job.stage_put import LandedUpload
from replicator.engine.state.checkpoint import (
    COPY_SPAN,
    SLOT_SPAN,
    CheckpointDir,
    StartState,
    copy_done_number,
    routed_chunk_number,
    snapshot_chunk_number,
)
from replicator.errors import EngineError, ReplicatorError, SinkError
from replicator.model import change_batch as cb
from replicator.model.text import time_text
from replicator.plan.program import fresh_copy
from replicator.plan.pushdown import readers_of, snapshot_predicate
from replicator.source.arrow_types import change_batch_schema
from replicator.source.snapshot import Chunk, plan_chunks, read_chunk_batches
from replicator.verify.compare import SEGMENT_ROWS, TableVerifier
from replicator.verify.normalize import source_parameter
from replicator.verify.report import TableReport

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.engine.apply.applier import BatchApplier
    from replicator.model.catalog import Catalog, SourceTable
    from replicator.model.changes import BinlogPosition
    from replicator.model.pipeline import MySQLSource, Pipeline

CHUNK_ROWS = 20_000
# Chunks per sink batch: one MERGE per ~160k rows at the default chunk size (measured: MERGE
# cost grows far slower than its rows, 25-30x between 1k and 100k changes per MERGE), while a
# crash redoes at most one group. A constant, not a function of the run's options: a resumed
# run must cut the same groups to reuse their batch ids.
APPLY_GROUP = 8
# Rows per slice when a group's files are staged (bounds the driver's memory per slice).
SLICE_ROWS = 50_000
# How often the driver looks for the files of the group it applies next.
POLL_S = 0.1


@dataclass(frozen=True)
class ChunkTask:
    """One chunk to read on an executor, and the file it lands in. Picklable."""

    table: SourceTable
    chunk: Chunk
    path: str
    predicate: str | None = None  # the pushed-down filter (TableCopy.predicate)


def landing_dir(pipeline: Pipeline, checkpoint: CheckpointDir) -> str:
    """The snapshot's part of the landing zone: ``<engine.landing>/snapshot/`` (default
    ``<checkpoint>/landing/snapshot/``), beside the stream's ``stream/`` (``engine.landing``);
    a local path or any URI ``pyarrow.fs`` opens (on a cluster: one every node shares)."""
    return landing_root(pipeline.engine.landing, checkpoint.path).rstrip("/") + "/snapshot"


def chunk_path(root: str, epoch: int, table: str, copy: int, index: int) -> str:
    """``e<epoch>/<db.table>/c<copy>/chunk-<index>.parquet`` (the table name URL-quoted): a
    replayed chunk rewrites the same file; a new copy or epoch never meets an old one."""
    return f"{root}/e{epoch}/{quote(table, safe='')}/c{copy}/chunk-{index:08d}.parquet"


def _filesystem(path: str) -> tuple[Any, str]:
    """The pyarrow file system of a landing path, and the path inside it."""
    from pyarrow import fs

    if "://" in path:
        return fs.FileSystem.from_uri(path)
    return fs.LocalFileSystem(), path


def _exists(path: str) -> bool:
    from pyarrow import fs

    filesystem, inner = _filesystem(path)
    return bool(filesystem.get_file_info(inner).type != fs.FileType.NotFound)


def _remove(path: str) -> None:
    filesystem, inner = _filesystem(path)
    with contextlib.suppress(FileNotFoundError, OSError):
        filesystem.delete_file(inner)


def write_chunk_file(source: MySQLSource, task: ChunkTask, position: BinlogPosition,
                     upload: LandedUpload | None = None) -> int:
    """Executor side: read one chunk into Arrow and land it as Parquet (written under a
    temporary name and moved, so a file the driver sees is whole; on object stores the
    upload itself appears whole). ``upload``: PUT to the stage before the move (the driver
    COPYs a chunk as soon as it sees it), from a scratch folder (PUT keeps base names).
    Returns its rows."""
    import pyarrow.parquet as pq

    if upload is not None and not upload.wants(task.table.name):
        upload = None  # a table only the driver stages: its file is read, never COPYed
    with carry_errors():
        filesystem, target = _filesystem(task.path)
        filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
        folder, name = target.rsplit("/", 1)
        scratch = f"{folder}/_uploading/{name}" if upload is not None else target + ".tmp"
        filesystem.create_dir(scratch.rsplit("/", 1)[0], recursive=True)
        rows = 0
        writer = None
        try:
            # Batch by batch: a keyless table is one chunk, and no task holds it whole.
            for batch in read_chunk_batches(source, task.table, task.chunk, position=position,
                                            predicate=task.predicate):
                if writer is None:
                    writer = pq.ParquetWriter(scratch, batch.schema, compression="lz4",
                                              filesystem=filesystem)
                writer.write_table(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
        if upload is not None:
            upload.put([task.path], local=scratch)
        filesystem.move(scratch, target)
        return rows


class _ReadJob:
    """The Spark job reading every pending chunk, run in a background thread so the driver
    applies finished chunks while the rest are read."""

    GROUP = "replicator-snapshot"

    def __init__(self, spark: Any, source: MySQLSource, tasks: list[ChunkTask],
                 position: BinlogPosition, upload: LandedUpload | None = None) -> None:
        self.spark = spark
        self.failure: BaseException | None = None
        self.done = threading.Event()
        self.upload = upload  # each task PUTs its chunk file (engine.job.stage_put)
        self._thread = threading.Thread(target=self._run, args=(source, tasks, position),
                                        name="snapshot-read", daemon=True)
        self._thread.start()

    def _run(self, source: MySQLSource, tasks: list[ChunkTask], position: BinlogPosition) -> None:
        try:
            if tasks:
                context = spark_context(self.spark)
                context.setJobGroup(self.GROUP, "snapshot chunks", interruptOnCancel=True)
                upload = self.upload
                (context.parallelize(tasks, len(tasks))
                 .map(lambda task: write_chunk_file(source, task, position, upload))
                 .collect())
        except BaseException as failure:  # reported by the driver's loop
            self.failure = failure
        finally:
            self.done.set()

    def cancel(self) -> None:
        with contextlib.suppress(Exception):
            spark_context(self.spark).cancelJobGroup(self.GROUP)
        self._thread.join(timeout=60)

    def raise_failure(self) -> None:
        if self.failure is None:
            return
        if isinstance(self.failure, ReplicatorError):
            raise self.failure
        raise driver_error(self.failure, doing="copying the tables") from None

    def wait_for(self, paths: list[str], should_stop: Callable[[], bool]) -> bool:
        """Until every file exists (True), or a stop is asked (False); raises the job's error."""
        while True:
            if all(_exists(path) for path in paths):
                return True
            if self.done.is_set():
                self.raise_failure()
                if all(_exists(path) for path in paths):
                    return True
                raise EngineError(f"snapshot chunk files missing after the read: {paths[0]}",
                                  hint="check that engine.landing (default: in engine.checkpoint) "
                                  "is writable by the executors (on a cluster: a path every "
                                  "node shares)")
            if should_stop():
                return False
            time.sleep(POLL_S)


def _slices(paths: list[str]) -> Iterator[Any]:
    """A group's rows in slices of about ``SLICE_ROWS``, in chunk order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in paths:
        filesystem, inner = _filesystem(path)
        with filesystem.open_input_file(inner) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=SLICE_ROWS):
                yield pa.Table.from_batches([batch])


def apply_group(applier: BatchApplier, table_plan: Any, number: int, paths: list[str],
                position: BinlogPosition, *, fresh: bool = False) -> None:
    """One group of chunk files into the target: staged by the warehouse itself where it can
    read them (DuckDB: the transform step runs over the files inside the batch's
    transaction, no row passes through the driver), else slice by slice on the driver.
    ``fresh``: the copy began with the target empty, so the batch inserts (``_fresh``).

    Where the warehouse's statement fails for good (a computed column that overflows, a value
    the target type refuses), the group is applied again the driver's way, which names the
    row and column or, if the failure was the warehouse's alone, applies it."""
    paths = [p.removeprefix("file://") for p in paths]
    staging = applier.warehouse_staging(table_plan, paths)
    if staging is not None:
        try:
            applier.apply_snapshot_files(table_plan, number, paths, staging, position,
                                         fresh=fresh)
            return
        except SinkError as error:
            if error.transient:
                raise
    applier.apply_snapshot_batches(table_plan, number, _slices(paths), position, fresh=fresh)


def _fresh(applier: BatchApplier, copy: TableCopy) -> bool:
    """Whether this copy may insert instead of merge: its one reader is a merged table
    (``program.fresh_copy``) whose target holds no row as the copy begins. Chunks hold
    disjoint key ranges and the stream waits for the snapshot, so no batch of the copy can
    meet a row already there; a resumed copy keeps the answer (``StartState.fresh``): its
    target holds the groups applied before, which no later group touches."""
    if len(copy.readers) != 1 or not fresh_copy(copy.readers[0]):
        return False
    return not applier.sink.has_rows(copy.readers[0])


def remove_absent_rows(
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
    keys = [{name: source_parameter(value) for name, value in difference.key.items()}
            for difference in report.differences if difference.kind == "extra"]
    if keys:
        applier.apply_snapshot_batches(table_plan, chunk_number,
                                       [absent_rows(source_table, keys, position)], position)
    return len(keys)


def absent_rows(source_table: SourceTable, keys: list[dict[str, Any]],
                position: BinlogPosition) -> pa.Table:
    """Target rows the source no longer has, as a change batch of deletes of their ``keys``
    at the copy's ``position`` (``model.change_batch``; each key's other columns NULL): the
    transform step stages them as it stages every batch."""
    import datetime as dt

    import pyarrow as pa

    schema = change_batch_schema(source_table, before=False)
    fsp = {column.name: column.mysql_type.fsp or 0 for column in source_table.columns}
    constants = {cb.OP: "d", cb.FILE: position.file, cb.FILE_SEQ: position.sequence,
                 cb.POS: position.pos, cb.TS_MS: 0, cb.TRANSACTION_ID: str(position),
                 cb.TABLE: source_table.name}

    def cell(name: str, value: Any) -> Any:  # a TIME is MySQL's text in a change batch
        return time_text(value, fsp[name]) if isinstance(value, dt.timedelta) else value

    arrays = []
    for field in schema:
        if field.name == cb.ROW_INDEX:
            arrays.append(pa.array(range(len(keys)), field.type))
        elif field.name in constants:
            arrays.append(pa.array([constants[field.name]] * len(keys), field.type))
        elif field.name in keys[0]:
            arrays.append(pa.array([cell(field.name, key[field.name]) for key in keys],
                                   field.type))
        else:
            arrays.append(pa.nulls(len(keys), field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass
class TableCopy:
    """One source table being copied: its readers (plans), chunks and batch numbering."""

    name: str
    source_table: SourceTable
    readers: list[Any]
    chunks: list[Chunk]
    copy: int
    numbers: dict[int, Callable[[int], int]]
    done: int  # chunks applied before this run
    # The readers' filters as far as MySQL decides them exactly (plan.pushdown): every chunk
    # is read with it, so rows no reader keeps are never read. None: every row is read.
    predicate: str | None = None

    def groups(self) -> list[range]:
        starts = range(self.done, len(self.chunks), APPLY_GROUP)
        return [range(start, min(start + APPLY_GROUP, len(self.chunks))) for start in starts]


def prepare_copy(applier: BatchApplier, catalog: Catalog, checkpoint: CheckpointDir,
                 state: StartState, name: str, chunk_rows: int) -> TableCopy:
    # Every plan reading this source table (the routes of an outbox; a routed target and a
    # named one) gets each chunk; progress is per source table, so a chunk counts as applied
    # once all of them have it.
    readers = readers_of(applier.plan.tables, name)
    source_table = next((t for t in catalog.tables if t.name.lower() == name.lower()), None)
    if source_table is None:
        raise EngineError(
            f"source table {name} does not exist",
            hint="create it, or remove it from the pipeline's tables",
        )
    chunks = checkpoint.load_chunks(name)
    if chunks is None:
        chunks = plan_chunks(applier.pipeline.source, source_table, chunk_rows=chunk_rows)
        checkpoint.save_chunks(name, chunks)
    copy = state.copy_number(name)
    numbers: dict[int, Callable[[int], int]] = {}
    for reader in readers:
        if reader.routed:
            # Many sources, one target's state rows: this copy's chunks get a slot of their
            # own in that target (checkpoint.SLOT_SPAN), saved before any chunk is applied.
            if len(chunks) >= SLOT_SPAN - 1:
                raise EngineError(
                    f"{name}: {len(chunks)} snapshot chunks, more than a routed copy holds",
                    hint="copy with larger chunks (run --chunk-rows N)",
                )
            slot = state.routed_slot(".".join(reader.target_parts), name)
            numbers[id(reader)] = lambda index, slot=slot: routed_chunk_number(slot, index)
        else:
            numbers[id(reader)] = lambda index, copy=copy: snapshot_chunk_number(copy, index)
    return TableCopy(name, source_table, readers, chunks, copy, numbers,
                      state.chunks_applied.get(name, 0), snapshot_predicate(readers, source_table))


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
    position = state.snapshot_position or state.position
    wanted = {name.lower() for name in state.snapshot_tables}
    copies: list[TableCopy] = []
    for name in applier.plan.source_names():
        if (wanted and name.lower() not in wanted) or any(
                c.name.lower() == name.lower() for c in copies):
            continue
        copies.append(prepare_copy(applier, catalog, checkpoint, state, name, chunk_rows))
    for copy in copies:
        key = copy.name.lower()
        if copy.done == 0:  # decided before the copy's first group, kept on resume
            state.fresh = [name for name in state.fresh if name != key]
            if _fresh(applier, copy):
                state.fresh.append(key)
    checkpoint.save_start(state)
    root = landing_dir(applier.pipeline, checkpoint)

    def path(copy: TableCopy, index: int) -> str:
        return chunk_path(root, state.epoch, copy.name, copy.copy, index)

    tasks = []
    for copy in copies:
        for index in range(copy.done, len(copy.chunks)):
            # A file left by a run that stopped is from before this read: this run's task
            # rewrites it, and the driver must not take the old one for the new.
            _remove(path(copy, index))
            tasks.append(ChunkTask(copy.source_table, copy.chunks[index], path(copy, index),
                                   copy.predicate))
    job = _ReadJob(spark, applier.pipeline.source, tasks, position,
                   LandedUpload.of(applier.pipeline, applier.plan))
    try:
        for copy in copies:
            for group in copy.groups():
                paths = [path(copy, index) for index in group]
                if not job.wait_for(paths, should_stop):
                    return False
                # The group's files are landed (with target.snowflake.stage: on the stage, or
                # PUT there by their tasks) and nothing of it is loaded: the crash tests'
                # window between a chunk's PUT and its COPY.
                failpoints.reached("snapshot.before_load")
                for reader in copy.readers:
                    apply_group(applier, reader, copy.numbers[id(reader)](group[0]), paths,
                                position, fresh=copy.name.lower() in state.fresh)
                state.chunks_applied[copy.name] = group[-1] + 1
                checkpoint.save_start(state)
                for done in paths:
                    _remove(done)
            if state.epoch > 0 or copy.copy > 0:
                for reader in copy.readers:
                    last = SLOT_SPAN - 1 if reader.routed else COPY_SPAN - 1
                    remove_absent_rows(applier, copy.source_table, reader, position,
                                        copy.numbers[id(reader)](last))
            for reader in copy.readers:
                # The table is whole in the target: said in the state table too, so a run
                # that lost the checkpoint before any stream batch keeps this copy
                # (engine.start). A routed target's copies are not told apart there.
                if not reader.routed:
                    applier.record_copy_done(reader, copy_done_number(copy.copy), position)
        job.done.wait()
        job.raise_failure()
    finally:
        if not job.done.is_set():
            job.cancel()
    state.snapshot = "done"
    for copy in copies:
        key = copy.name.lower()
        state.copies[key] = state.copies.get(key, 0) + 1
        state.forget_slots(key)
        state.fresh = [name for name in state.fresh if name != key]
    state.tables = sorted({*state.tables, *applier.plan.source_names()})
    state.snapshot_tables = []
    state.snapshot_position = None
    checkpoint.save_start(state)
    # Every table copied, its done marker committed and the copy saved; no stream batch yet.
    failpoints.reached("snapshot.done")
    return True
