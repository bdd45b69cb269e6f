"""The batch applier (``BatchApplier``): a micro-batch's manifest -> per target table, its
landed change files -> staging rows -> the sink, exactly once.

Runs on the driver, inside ``foreachBatch`` (and for each snapshot chunk). The stream's rows
are the manifest of what the executors landed (``engine.landing``): one row per Parquet file
of one table's changes and per schema change. For a micro-batch: follow the schema changes
first (added columns re-plan and ALTER; anything else stops with the remedy; routing's tables
come and go), then for every target table read the files of the source tables it reads and
hand them, as change batches, to ``replicator.transform.stage_batch`` (key-update split,
compaction or every change per mode, filter, mapping, masks, computed and metadata columns),
whose staging rows go to ``sink.apply`` with the batch id, exactly once through the sink's
state table. With ``target.atomic`` (the default) a batch that changed several tables hands
them all to ``sink.apply_atomic``: one target transaction, so a source transaction over
several tables is never visible half applied (``apply_atomic``).

A batch never splits a transaction, so one huge transaction is one huge batch; it reaches
the driver as files (the executor spilled it in row groups while decoding) and is staged in
slices of ``SLICE_ROWS`` inside ONE sink transaction, so no process holds it whole
(``apply_files``; the reasoning and the measurements are in docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from replicator.context import Context
from replicator.engine import failpoints
from replicator.engine.checkpoint import CheckpointDir, sink_batch_id, snapshot_batch_id
from replicator.engine.ddl_rows import after_position, default_fills, fill_defaults
from replicator.engine.landing import FileFacts, key_moves, landing_root, local_facts
from replicator.engine.metrics import BatchReport, TableReport
from replicator.engine.schema_changes import DdlEffect, cannot_follow, classify
from replicator.errors import EngineError, ReplicatorError, SinkError
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import SOURCE_TABLE_COLUMN
from replicator.sink import TableBatch
from replicator.source.positions import current_position
from replicator.transform import file_staging, stage_batch

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan, PlannedColumn, TablePlan
    from replicator.plan.program import StagingQuery

ReportCallback = Callable[[BatchReport], None]
Notice = Callable[[str], None]

# Changes per slice of a big batch: tens of MB of change batch and staging rows on the
# driver, and few enough slices that the per-slice cost (an Arrow table, a staging insert,
# a COPY on Snowflake) stays small next to the rows themselves.
SLICE_ROWS = 50_000
# Old landed files are looked for at most this often (engine.landing_retention).
PRUNE_EVERY_S = 60.0


def _complete_images(events: list[ChangeEvent], columns: Sequence[str]) -> list[ChangeEvent]:
    """Images written before an added column lack it: it was NULL for them."""
    import dataclasses

    def fill(image: dict[str, Any] | None) -> dict[str, Any] | None:
        if image is None or all(column in image for column in columns):
            return image
        return {**{column: None for column in columns}, **image}

    return [
        event
        if (event.after is None or len(event.after) >= len(columns))
        and (event.before is None or len(event.before) >= len(columns))
        else dataclasses.replace(event, before=fill(event.before), after=fill(event.after))
        for event in events
    ]


class BatchApplier:
    """Applies micro-batches and snapshot chunks to the sink; follows added columns."""

    def __init__(
        self,
        pipeline: Pipeline,
        plan: Plan,
        sink: Any,
        checkpoint: CheckpointDir,
        *,
        epoch: int = 0,
        open_sink: Callable[[Pipeline, Plan], Any] | None = None,
        on_report: ReportCallback | None = None,
        on_notice: Notice | None = None,
        on_new_sources: Callable[[list[str]], None] | None = None,
        on_recopy: Callable[[str], None] | None = None,
        covers: Callable[[str], bool] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.plan = plan
        self.sink = sink
        self.checkpoint = checkpoint
        self.epoch = epoch
        self._open_sink = open_sink
        self._on_report = on_report
        self._on_notice = on_notice
        # Called with the source tables a `sources:` selection starts matching mid-stream
        # (the runner records them as covered: streamed from their CREATE, no copy needed).
        self._on_new_sources = on_new_sources
        # Called with a source table whose target column a type change re-created: the runner
        # queues its copy afresh (engine.recopy.queue) and saves that before the target changes.
        self._on_recopy = on_recopy
        # Whether a source table is covered (copied, or streamed from its creation): the
        # runner's start state answers. Never the plan's sources: the plan is built from the
        # LIVE catalog, which is ahead of the binlog being applied, so it already lists a table
        # whose RENAME into a selection is still ahead in the stream (issue 21: such a table
        # was then taken as known, and its rows written under the old name were never copied).
        self._covers = covers or (lambda name: False)
        # Lower-case tables renamed into a selection that the runner has copied since (their
        # replayed RENAME is no news any more, even if they are gone from the catalog now).
        self.copied_sources: set[str] = set()
        self._unplanned: set[str] = set()  # see _plan_unplanned_sources
        # db.table (lower) -> {new source column: old} of renames followed in this run: rows
        # landed before the rename hold the value under the old name (default_fills).
        self.renamed_columns: dict[str, dict[str, str]] = {}
        self._evolving: dict[str, Any] = {}  # db.table (lower) -> Decisions (_follow_decided)
        # db.table (lower) -> the position before which this batch's changes of the table are
        # dropped: a followed TRUNCATE emptied it, or a re-copy rewrites it (_retype).
        self._cut: dict[str, tuple[int, int]] = {}
        self._ddl_at: dict[str, tuple[int, int]] = {}  # db.table (lower) -> its last DDL's
        # db.table (lower) -> the last position before the source's head when its copy was
        # queued afresh, after its primary key changed (rekey) or at start-up for a column
        # re-created in a new type (retype_lagging_columns): every change of it up to there
        # is the copy's.
        self._copied_from: dict[str, tuple[int, int]] = {}
        self._batch_id = 0
        self._pruned_at = float("-inf")  # when landed files were last pruned (monotonic)
        self.in_batch = False
        self.batches = 0
        # Held by each stream batch, and by each step of a table's re-copy (engine.recopy).
        self._lock = threading.Lock()
        # Where executors land change batches (engine.landing).
        self.landing = landing_root(pipeline.engine.landing, checkpoint.path)
        self.failure: ReplicatorError | None = None  # kept: Spark wraps it in its own error

    # -- foreachBatch ----------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off stream batches (``engine.recopy`` copies a chunk between two of them)."""
        with self._lock:
            yield

    def __call__(self, frame: Any, spark_batch_id: int) -> None:
        with self._lock:
            self._call(frame, spark_batch_id)

    def _call(self, frame: Any, spark_batch_id: int) -> None:
        self.in_batch = True
        try:
            started = time.perf_counter()
            end_offset = self.checkpoint.batch_end_offset(spark_batch_id)
            manifest = frame.toArrow().to_pylist()  # one small row per landed file
            report = self.apply_manifest(manifest, spark_batch_id, end_offset)
            report.seconds = time.perf_counter() - started
            self.batches += 1
            if self._on_report:
                self._on_report(report)
        except ReplicatorError as exc:
            self.failure = exc
            raise
        finally:
            self.in_batch = False

    # -- landed files (engine.landing) ----------------------------------------------------

    def apply_manifest(
        self, manifest: list[dict[str, Any]], spark_batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> BatchReport:
        """Apply one micro-batch from its manifest: schema changes first, then per target
        table its landed files -> staging rows -> the sink, exactly once."""
        from replicator.engine.landing import file_order, prune

        if end_offset is None:
            # The offset log is local to the driver; elsewhere the last file's end is the best
            # we know (it can lag the true end when trailing transactions are filtered out,
            # which only makes `status` report a slightly older position).
            ends = [BinlogPosition(r["end_file"], int(r["end_pos"])) for r in manifest
                    if r["kind"] == "rows"]
            if ends:
                end_offset = max(ends, key=lambda p: p._key()).to_offset()
        files: dict[str, list[dict[str, Any]]] = {}
        for row in sorted((r for r in manifest if r["kind"] == "rows"), key=file_order):
            files.setdefault(row["table"].lower(), []).append(row)
        ddl = sorted((r for r in manifest if r["kind"] == "ddl"),
                     key=lambda r: (int(r["part"]), int(r["seq"])))
        self._batch_id = sink_batch_id(self.epoch, spark_batch_id)
        self._cut = dict(self._copied_from)
        self._ddl_at = {}
        if ddl:
            self._follow_schema_changes(ddl, with_rows=files)
        self._plan_unplanned_sources(files)
        report = BatchReport("stream", sink_batch_id(self.epoch, spark_batch_id), end_offset,
                             pipeline=self.pipeline.name)
        # One source table can feed several targets (outbox routes) and one target can read
        # several source tables (routing): each plan takes the files it reads.
        work = [(table_plan, table_files) for table_plan in self.plan.tables
                for table_files in [self._after_cut(table_plan, [
                    row for name, rows_of in files.items()
                    if table_plan.reads(name) for row in rows_of])]
                if table_files]
        if len(work) > 1 and self.atomic:
            report.tables += self.apply_atomic(work, report.batch_id, end_offset)
        else:
            for number, (table_plan, table_files) in enumerate(work):
                if number:
                    failpoints.reached("apply.between_tables")  # the one before committed
                report.tables.append(
                    self.apply_files(table_plan, table_files, report.batch_id, end_offset))
        if manifest and time.monotonic() - self._pruned_at >= PRUNE_EVERY_S:
            # Listing every task directory per batch would grow with the retention.
            self._pruned_at = time.monotonic()
            prune(self.landing, self.pipeline.engine.landing_retention_ms)
        return report

    @property
    def atomic(self) -> bool:
        """``target.atomic``: a batch's tables commit together (``apply_atomic``). A test's
        stand-in sink without ``apply_atomic`` applies table by table."""
        return self.pipeline.target.atomic and hasattr(self.sink, "apply_atomic")

    def apply_files(
        self, table_plan: TablePlan, files: list[dict[str, Any]], batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> TableReport:
        """One table's landed files of a batch -> staging rows -> ONE sink transaction: the
        warehouse stages them where it can (``_in_warehouse``), else the driver does
        (``_staged_by_driver``)."""
        report = TableReport(table=table_plan.label, changes=0)
        in_warehouse = self._in_warehouse(table_plan, files)
        if in_warehouse is not None:
            batch, facts = in_warehouse
            try:
                result = self.sink.apply(table_plan, batch_id, end_offset or {}, batch.staged,
                                         query=batch.query)
            except SinkError as error:
                if error.transient:
                    raise
                # The driver's way names the row and column, or applies what only the
                # warehouse's SQL refused.
            else:
                _record(_with_facts(report, facts), result)
                return report
        batch = self._staged_by_driver(table_plan, files, batch_id, report)
        _record(report, self.sink.apply(table_plan, batch_id, end_offset or {}, batch.staged))
        return report

    def apply_atomic(self, work: Sequence[tuple[TablePlan, list[dict[str, Any]]]],
                     batch_id: int, end_offset: dict[str, Any] | None) -> list[TableReport]:
        """``target.atomic``: every table of the batch in ONE sink transaction
        (``Sink.apply_atomic``), staged as ``apply_files`` stages each. When a statement the
        warehouse stages with fails for good, the whole batch is tried again with every table
        staged by the driver (one transaction cannot go on after a failed statement)."""
        in_warehouse = [self._in_warehouse(table_plan, files) for table_plan, files in work]
        if any(found is not None for found in in_warehouse):
            reports = [TableReport(table=table_plan.label, changes=0) for table_plan, _ in work]
            batches = [found[0] if found is not None
                       else self._staged_by_driver(table_plan, files, batch_id, report)
                       for (table_plan, files), found, report
                       in zip(work, in_warehouse, reports, strict=True)]
            try:
                results = self._apply_together(batches, batch_id, end_offset)
            except SinkError as error:
                if error.transient:
                    raise
            else:
                for report, found, result in zip(reports, in_warehouse, results, strict=True):
                    _record(report if found is None else _with_facts(report, found[1]), result)
                return reports
        reports = [TableReport(table=table_plan.label, changes=0) for table_plan, _ in work]
        batches = [self._staged_by_driver(table_plan, files, batch_id, report)
                   for (table_plan, files), report in zip(work, reports, strict=True)]
        for report, result in zip(reports, self._apply_together(batches, batch_id, end_offset),
                                  strict=True):
            _record(report, result)
        return reports

    def _apply_together(self, batches: list[TableBatch], batch_id: int,
                        end_offset: dict[str, Any] | None) -> list[Any]:
        return self.sink.apply_atomic(
            batches, batch_id, end_offset or {},
            between_tables=lambda: failpoints.reached("apply.between_tables"))

    def _in_warehouse(self, table_plan: TablePlan, files: list[dict[str, Any]]
                      ) -> tuple[TableBatch, FileFacts] | None:
        """A batch's files of one source table, whole, nothing to fill in or drop: the
        warehouse can stage them itself (``warehouse_staging``), no row passing through this
        process (big batches keep their slices: their memory and failpoints are the
        driver's). None where the driver stages them."""
        simple = (len({row["table"].lower() for row in files}) == 1 and not table_plan.routed
                  and self._whole(table_plan, files) and not self._fills(table_plan, files)
                  and self._cut.get(table_plan.source_name.lower()) is None)
        paths = [row["path"] for row in files]
        staging = self.warehouse_staging(table_plan, paths, snapshot=False) if simple else None
        if staging is None:
            return None
        query, facts = staging
        return TableBatch(table_plan, paths, query), facts

    def _after_cut(self, table_plan: TablePlan, files: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
        """The files not wholly before the table's cut (``_cut``): a re-created column's old
        type may not even unify with its new one (a landed file holds one schema)."""
        cut = self._cut.get(table_plan.source_name.lower())
        if cut is None:
            return files
        return [row for row in files if row.get("last_file") is None
                or (BinlogPosition(row["last_file"], 0).sequence, int(row["last_pos"])) > cut]

    def _whole(self, table_plan: TablePlan, files: list[dict[str, Any]]) -> bool:
        """Whether the table's batch is staged in one piece, not in slices: a routed target's
        files (many source tables: merged into binlog order first), a batch of at most
        ``SLICE_ROWS`` changes, or an scd2 batch that moved a key (a key's versions need all
        its changes at once, and a move ties two keys together; rare)."""
        changes = sum(int(row["rows"]) for row in files)
        return (len({row["table"].lower() for row in files}) > 1 or changes <= SLICE_ROWS
                or (table_plan.mode == "scd2"
                    and key_moves([row["path"] for row in files], self.landing)))

    def _fills(self, table_plan: TablePlan, files: list[dict[str, Any]]) -> list[Any]:
        """Rows landed before a column with a constant DEFAULT was added carry that default
        (MySQL shows it for them), not the NULL a file without the column reads back as."""
        return [] if table_plan.routed else default_fills(
            table_plan, files, self.renamed_columns.get(table_plan.source_name.lower()))

    def _staged_by_driver(self, table_plan: TablePlan, files: list[dict[str, Any]],
                          batch_id: int, report: TableReport) -> TableBatch:
        """The table's batch as staging rows the driver makes, slice by slice, while the
        sink pulls them (after its lookup: an applied batch costs no decoding).

        Files of one source table are already in binlog order and are staged slice by slice
        (``SLICE_ROWS``: a big transaction never sits whole in driver memory; ``STAGE_SEQ``
        continues across slices, so the MERGE's "last change per key" spans them). A routed
        target's files (many source tables) are merged into binlog order first, and an scd2
        table is staged whole (a key's versions depend on all its changes in the batch)."""
        from replicator.engine.landing import file_slices, key_slices, read_files

        root = self.landing
        paths = [row["path"] for row in files]
        sources = {row["table"].lower() for row in files}
        changes = sum(int(row["rows"]) for row in files)
        # scd2 versions need every change of a key at once: slices of keys, not of rows.
        by_key = table_plan.mode == "scd2"
        whole = self._whole(table_plan, files)
        buckets = -(-changes // SLICE_ROWS)
        if not whole and self._on_notice:
            self._on_notice(
                f"batch {batch_id}: {changes:,} changes of {table_plan.label} in {len(files)} "
                f"landed file(s): applying them in slices of {SLICE_ROWS:,} changes"
                + (f" ({buckets} slices by key)" if by_key else ""))
        fills = self._fills(table_plan, files)
        cut = self._cut.get(table_plan.source_name.lower())

        def followed(batch: Any) -> Any:
            """Defaults and renamed values filled in; the changes before a followed TRUNCATE
            (the table was emptied after them) or a re-created column (the table's re-copy
            rewrites every row) dropped."""
            batch = fill_defaults(batch, fills)
            return batch if cut is None else after_position(batch, cut)

        def batches() -> Iterator[Any]:
            if whole:
                yield followed(read_files(paths, root, sort=len(sources) > 1))
            elif by_key:
                from replicator.transform.buckets import key_bucket_ids
                from replicator.transform.stage import batch_key

                key = batch_key(table_plan)
                for batch in key_slices(paths, root, SLICE_ROWS,
                                        lambda batch: key_bucket_ids(batch, key, buckets)):
                    yield followed(batch)
            else:
                for batch in file_slices(paths, root, SLICE_ROWS):
                    yield followed(batch)

        def staged() -> Iterator[Any]:
            staged_rows = 0
            decode = _Timer()
            for batch in decode.wrap(batches()):
                report.seconds_decode = decode.seconds
                table = self._stage_batch(table_plan, batch, report, first_seq=staged_rows)
                staged_rows += table.num_rows
                yield table
                # The sink consumed a slice: its transaction is open, part of the batch staged.
                failpoints.reached("apply.between_slices")

        return TableBatch(table_plan, staged())

    def warehouse_staging(self, table_plan: TablePlan, paths: Sequence[str], *, snapshot: bool
                          ) -> tuple[StagingQuery, FileFacts] | None:
        """The statement the warehouse stages these change files with (a group of snapshot
        chunks, or a stream batch's files of one table), and the files' facts; None where
        the driver must stage them (``transform.file_staging`` says when, and the files must
        be local)."""
        dialect = getattr(self.sink, "dialect", None)  # None: a test's stand-in sink
        if dialect is None or not dialect.change_files:
            return None
        facts = local_facts(paths)
        query = None if facts is None else file_staging(table_plan, facts.schemas, dialect,
                                                        snapshot=snapshot)
        return None if query is None or facts is None else (query, facts)

    def _stage_batch(self, table_plan: TablePlan, batch: Any, report: TableReport, *,
                     first_seq: int) -> Any:
        """A change batch -> the staging rows of ``table_plan`` (``replicator.transform``)."""
        import pyarrow.compute as pc

        from replicator.model import change_batch as cb

        if table_plan.outbox is not None and table_plan.outbox.first:
            from replicator.sink.outbox import count_unrouted
            from replicator.transform.batch import batch_events
            from replicator.transform.stage import batch_key

            report.unrouted += count_unrouted(table_plan, batch_events(batch, batch_key(table_plan)))
        report.changes += batch.num_rows
        if batch.num_rows:
            report.last_ts_ms = max(report.last_ts_ms, int(pc.max(batch.column(cb.TS_MS)).as_py()))
        started = time.perf_counter()
        table = stage_batch(table_plan, batch, first_seq=first_seq)
        report.seconds_stage += time.perf_counter() - started
        return table

    def _stage(
        self, table_plan: TablePlan, events: list[ChangeEvent], report: TableReport, *,
        first_seq: int = 0,
    ) -> Any:
        """Some of a table's changes -> its staging rows, by the transform step (filters and
        computed columns run in DuckDB only); counts them into ``report``."""
        from replicator.transform.batch import change_batch
        from replicator.transform.stage import batch_key

        started = time.perf_counter()
        # The batch's columns: the source columns the plan reads, typed as the plan saw them
        # (a routed table's _SOURCE_TABLE comes from the change's table, as in a stream batch).
        columns = {c.source_column: c.mysql_type for c in table_plan.data_columns if c.source_column
                   and not c.expression and c.source_column != SOURCE_TABLE_COLUMN}
        columns.update({name: None for name in table_plan.excluded if name not in columns})
        batch = change_batch(_complete_images(events, list(columns)), list(columns.items()),
                             batch_key(table_plan))
        report.seconds_transform += time.perf_counter() - started
        return self._stage_batch(table_plan, batch, report, first_seq=first_seq)

    # -- snapshot chunks -------------------------------------------------------------------

    def apply_snapshot_chunk(
        self, table_plan: TablePlan, chunk_index: int, events: Sequence[ChangeEvent],
        position: BinlogPosition,
    ) -> BatchReport:
        started = time.perf_counter()
        batch_id = snapshot_batch_id(self.epoch, chunk_index)
        report = BatchReport("snapshot", batch_id, position.to_offset(),
                             pipeline=self.pipeline.name)
        report.tables.append(self.apply_events(table_plan, events, batch_id, position.to_offset()))
        report.seconds = time.perf_counter() - started
        if self._on_report:
            self._on_report(report)
        return report

    def apply_snapshot_batches(
        self, table_plan: TablePlan, chunk_index: int, batches: Iterable[Any],
        position: BinlogPosition, *, fresh: bool = False, kind: str = "snapshot",
    ) -> BatchReport:
        """Snapshot chunks as change batches (``source.snapshot.read_chunk_batch``), staged
        slice by slice by ``transform.stage_batch`` into ONE sink batch (one MERGE for many
        chunks; the sink checks its state table before pulling the first slice); ``fresh``
        as for ``apply_snapshot_files``."""
        table_report = TableReport(table=table_plan.label, changes=0)
        if table_plan.mode == "scd2":  # versions need all of a key's changes at once
            import pyarrow as pa

            batches = [pa.concat_tables(list(batches))]

        def staged() -> Iterator[Any]:
            staged_rows = 0
            for batch in batches:
                began = time.perf_counter()
                table_report.changes += batch.num_rows
                rows = stage_batch(table_plan, batch, first_seq=staged_rows)
                staged_rows += rows.num_rows
                table_report.seconds_stage += time.perf_counter() - began
                yield rows

        return self._snapshot_batch(table_plan, chunk_index, position, table_report,
                                    lambda batch_id: self.sink.apply(
                                        table_plan, batch_id, position.to_offset(), staged(),
                                        fresh=fresh), kind=kind)

    def apply_snapshot_files(
        self, table_plan: TablePlan, chunk_index: int, paths: Sequence[str],
        staging: tuple[StagingQuery, FileFacts], position: BinlogPosition, *,
        fresh: bool = False,
    ) -> BatchReport:
        """Snapshot chunk files staged by the warehouse itself (``warehouse_staging``): the
        query runs over them inside the batch's transaction, so no row passes through this
        process. ``fresh``: the copy began with the target empty (the batch inserts instead
        of merging: ``plan.program.fresh_copy``)."""
        query, facts = staging
        table_report = TableReport(table=table_plan.label, changes=facts.rows)
        return self._snapshot_batch(table_plan, chunk_index, position, table_report,
                                    lambda batch_id: self.sink.apply(
                                        table_plan, batch_id, position.to_offset(), list(paths),
                                        query=query, fresh=fresh))

    def _snapshot_batch(self, table_plan: TablePlan, chunk_index: int, position: BinlogPosition,
                        table_report: TableReport, apply: Callable[[int], Any], *,
                        kind: str = "snapshot") -> BatchReport:
        """One sink batch of snapshot chunks under the chunk's batch id, reported (``kind``
        "recopy": a chunk of a table copied again while the stream runs)."""
        started = time.perf_counter()
        batch_id = snapshot_batch_id(self.epoch, chunk_index)
        report = BatchReport(kind, batch_id, position.to_offset(),
                             pipeline=self.pipeline.name)
        _record(table_report, apply(batch_id))
        report.tables.append(table_report)
        report.seconds = time.perf_counter() - started
        if self._on_report:
            self._on_report(report)
        return report

    # -- one table -------------------------------------------------------------------------

    def apply_events(
        self, table_plan: TablePlan, events: Iterable[ChangeEvent], batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> TableReport:
        report = TableReport(table=table_plan.label, changes=0)
        staged = self._stage(table_plan, list(events), report)
        _record(report, self.sink.apply(table_plan, batch_id, end_offset or {}, staged))
        return report

    # -- schema changes --------------------------------------------------------------------

    def _replicated(self) -> dict[str, TablePlan]:
        return {table.source_name.lower(): table for table in self.plan.tables
                if not table.routed}

    def _routed(self, name: str) -> bool:
        """Whether ``db.table`` feeds a routed target (matches a `sources:` selection)."""
        return any(table.routed and table.reads(name) for table in self.plan.tables)

    def _plan_unplanned_sources(self, names: Iterable[str]) -> None:
        """Rows of a table a selection matches that is not covered: it came to exist during
        this run without a CREATE the reader saw (MariaDB logs CREATE TABLE ... SELECT inside
        the transaction of its rows), so it streamed from its creation: record it as covered
        (no copy at the next start), and re-plan if the plan does not list it yet.

        A table renamed into the selection never gets here uncovered: its RENAME precedes its
        rows in the binlog, and schema changes are followed before a batch's rows
        (``SourcesToCopy`` has the runner copy it first)."""
        new = [name for name in names if name not in self._unplanned and self._routed(name)
               and not self._covers(name)]
        if not new:
            return
        self._unplanned.update(new)
        planned = {name.lower() for t in self.plan.tables if t.routed for name in t.sources}
        if any(name not in planned for name in new):
            self._evolve(new)
        elif self._on_new_sources is not None:
            self._on_new_sources(new)

    def _follow_schema_changes(self, ddl_rows: list[dict[str, Any]],
                               with_rows: Iterable[str] = ()) -> None:
        """``with_rows``: the (lower-case) tables the batch has row changes of."""
        from replicator.engine.routing import SourcesToCopy, follow_routed_change

        replicated = self._replicated()
        self._evolving: dict[str, Any] = {}  # db.table (lower) -> its Decisions (_follow_decided)
        # The routed tables the pipeline covers (see ``_covers``), and those the runner has
        # copied after a SourcesToCopy in this run.
        known = {name.lower() for t in self.plan.tables if t.routed for name in t.sources
                 if self._covers(name)}
        known |= self.copied_sources
        evolve = False
        created: list[str] = []  # tables a selection matches, CREATEd in this batch
        for row in ddl_rows:
            details = _ddl_details(row)
            tables = [str(t) for t in details.get("tables", [])]
            sql = str(details.get("sql", "")).strip()
            where = f"{row['file']}:{row['pos']}" if row.get("file") else "the binlog"
            # Tables a `sources:` selection matches (or matched) come and go by design.
            routed = [t for t in tables if t.lower() in known or self._routed(t)]
            database = str(details.get("database") or "").lower()
            fixed = any(t.lower() in replicated for t in tables)
            if routed and not fixed:
                try:
                    followed = follow_routed_change(str(details.get("kind")), tables, routed,
                                                    known, sql, where)
                except SourcesToCopy:
                    # The batch is replayed after the copy, CREATEs included: the tables
                    # created before this RENAME, and those whose first rows are in it (see
                    # _plan_unplanned_sources), stream from there and need no copy.
                    renamed = {str(name).lower() for r in ddl_rows
                               for d in [_ddl_details(r)] if d.get("kind") == "rename"
                               for name in d.get("tables", [])[1::2]}
                    created += [name for name in with_rows if name not in known
                                and name not in renamed and self._routed(name)]
                    if created and self._on_new_sources is not None:
                        self._on_new_sources(list(dict.fromkeys(created)))
                    raise
                if details.get("kind") == "create":
                    created += [t for t in routed if t.lower() not in known]
                if followed:
                    evolve = True
                    continue
            touched = [t for t in tables if t.lower() in replicated]
            if not details.get("tables") and details.get("kind") == "drop" and any(
                name.split(".", 1)[0] == database for name in replicated
            ):
                touched = [database]  # DROP DATABASE of a replicated schema
            if not details.get("tables") and details.get("kind") == "drop" and any(
                name.split(".", 1)[0] == database for name in known
            ):
                evolve = True  # DROP DATABASE of a shard: its tables stop being read
            if not touched and not routed:
                continue  # DDL on a table this pipeline does not replicate
            intent = classify(sql)
            if intent.effect is DdlEffect.NOTHING:
                if self._on_notice:
                    self._on_notice(f"schema change on {', '.join(touched or routed)} at {where} "
                                    f"ignored: {intent.what} changes nothing replicated")
                continue
            if touched and touched != [database]:
                # A replicated table: its `schema_changes:` policy decides, change by change.
                self._follow_decided(details, touched, replicated, intent, sql, where, row)
                continue
            if intent.effect is DdlEffect.ADD_COLUMNS:
                evolve = True
                continue
            raise cannot_follow(touched or routed, where, intent, sql)
        if self._evolving:
            old_plan = self.plan
            self._rename_columns(old_plan)
            self._evolve(created, handled=set(self._evolving))
            self._alter_columns(old_plan)
        elif evolve:
            self._evolve(created)

    def _follow_decided(self, details: dict[str, Any], touched: list[str],
                        replicated: dict[str, TablePlan], intent: Any, sql: str,
                        where: str, row: dict[str, Any]) -> None:
        """Apply ``engine.schema_changes.decide`` to a DDL of replicated tables: raise its stop,
        log what it ignores; record the tables whose columns change (``_evolving``)."""
        from replicator.engine.schema_changes import ChangeKind, KeyChanged, decide, stop_error

        arriving = ({str(name).lower() for name in details.get("tables", [])[1::2]}
                    if details.get("kind") == "rename" else set())
        for name in touched:
            decision = decide(intent, self.pipeline, name, replicated[name.lower()],
                              renamed_onto=name.lower() in arriving)
            stop = decision.stop
            if stop is not None:
                raise stop_error([name], where, stop, sql)
            at = self._ddl_at[name.lower()] = _ddl_position(row)
            if (any(step.change.kind is ChangeKind.KEY_CHANGE for step in decision.recopying)
                    and not at <= self._copied_from.get(name.lower(), (-1, -1))):
                # Not yet streamed with the key the catalog has: stop the query here (rekey).
                raise KeyChanged([replicated[name.lower()].source_name], where, sql)
            if any(step.action in ("follow", "ignore", "recopy")
                   and step.change.kind.value in _COLUMN_KINDS for step in decision.steps):
                # The target's columns change: re-plan, then _alter_columns does the rest.
                self._evolving.setdefault(name.lower(), []).append(decision)
            for step in decision.following(ChangeKind.RENAME_COLUMN):
                self.renamed_columns.setdefault(name.lower(), {})[
                    step.change.new_name or ""] = step.change.column or ""
            if decision.following(ChangeKind.TRUNCATE):
                self._truncate(replicated[name.lower()], row)
            for step in decision.steps:
                if step.action in ("ignore", "nothing") and self._on_notice:
                    self._on_notice(f"schema change on {name} at {where}: {step.why}: "
                                    + ("ignored (schema_changes policy)" if step.action == "ignore"
                                       else "nothing replicated changes"))

    def _truncate(self, table: TablePlan, row: dict[str, Any]) -> None:
        """`truncate: follow`: the target's rows go (a soft-deleting table marks them), then
        the batch applies only the table's changes after the TRUNCATE (``apply_files``). Runs
        before the batch's MERGE and only while the batch is not applied for the table (its
        state row), so a replay after a kill deletes again what the MERGE had not replaced,
        and never the rows a committed batch wrote after the TRUNCATE."""
        from replicator.plan.program import Statement
        from replicator.plan.statements import ddl

        self._cut[table.source_name.lower()] = _ddl_position(row)
        applied = self.sink.last_applied(table)
        if applied is not None and int(applied["batch_id"]) >= self._batch_id:
            return
        self.sink.execute(table, [Statement("follow TRUNCATE TABLE",
                                            ddl.truncate_rows(table, self.sink.dialect))])
        self._notice(f"{table.source_name}: TRUNCATE followed: target rows deleted")

    def _rename_columns(self, old_plan: Plan) -> None:
        """Followed column renames, before the re-plan (whose setup would otherwise add the
        new name as an empty column): the target column keeps its data under the new name.
        Only where the target still has the old name and not the new one (a replayed batch)."""
        from replicator.engine.schema_changes import ChangeKind
        from replicator.plan.identifiers import target_identifier
        from replicator.plan.program import Statement
        from replicator.plan.statements import ddl

        for name, decisions in self._evolving.items():
            table = next(t for t in old_plan.tables if not t.routed and t.reads(name))
            for decision in decisions:
                for step in decision.following(ChangeKind.RENAME_COLUMN):
                    old = next((c.target_column for c in table.columns if c.source_column
                                and c.source_column.lower() == (step.change.column or "").lower()
                                and c.expression is None), None)
                    if old is None:
                        continue
                    new = target_identifier(step.change.new_name or "", table.identifier_case)
                    for log in ((False, True) if table.log_table else (False,)):
                        have = self.sink.existing_columns(table, log=log)
                        if old.lower() in have and new.lower() not in have:
                            self.sink.execute(table, [Statement(
                                "follow a column rename",
                                ddl.rename_column(table, old, new, self.sink.dialect,
                                                  log=log))])
                            self._notice(f"{name}: target column {old} renamed to {new}")

    def _alter_columns(self, old_plan: Plan) -> None:
        """After the re-plan (whose setup already added, widened and relaxed what the target
        lacks: ``program.column_changes``), per table whose columns a followed DDL changed:
        stop on a type change the policy or the target does not take, and apply `drop_column`
        to the planned columns that are gone. Planned types are compared, not the DDL's text,
        so the pt-osc / gh-ost swap (whose RENAME says nothing about columns) is judged the
        same way. Statements run only where still needed."""
        from replicator.engine.schema_changes import (
            ChangeKind,
            ColumnChange,
            Step,
            policy_for,
            retype_step,
            stop_error,
            widens,
        )
        from replicator.plan.program import Statement
        from replicator.plan.statements import ddl

        dialect = self.sink.dialect
        for name, decisions in self._evolving.items():
            old = next(t for t in old_plan.tables if not t.routed and t.reads(name))
            new = next(t for t in self.plan.tables if t.target_parts == old.target_parts)
            renamed = {(s.change.column or "").lower() for d in decisions
                       for s in d.following(ChangeKind.RENAME_COLUMN)}
            have = self.sink.existing_columns(new)
            work: list[Statement] = []
            retyped: list[PlannedColumn] = []
            new_columns = {c.target_column: c for c in new.columns}
            for column in old.columns:
                if column.role != "data" or column.expression is not None:
                    continue
                after = new_columns.get(column.target_column)
                if after is None:
                    if (column.source_column or "").lower() in renamed:
                        continue
                    action = policy_for(self.pipeline, name).drop_column
                    if action == "stop":
                        raise stop_error([name], "this batch", Step(ColumnChange(
                            ChangeKind.DROP_COLUMN, f"drops column {column.source_column}"),
                            "stop", f"drops column {column.source_column}"), "")
                    if column.target_column.lower() not in have:
                        continue
                    if action == "follow":
                        work.append(Statement("follow a dropped column", ddl.drop_column(
                            new, column.target_column, dialect)))
                    # ignore: the re-plan's setup relaxed its NOT NULL (program.column_changes)
                    continue
                if after.target_type == column.target_type or after.declared_type:
                    continue
                what = (f"changes column {column.source_column}: {column.target_column} "
                        f"{column.target_type.describe()} -> {after.target_type.describe()}")
                if not widens(column.target_type, after.target_type):
                    step = retype_step(ColumnChange(ChangeKind.TYPE_CHANGE, what),
                                       policy_for(self.pipeline, name).type_change, new, after,
                                       what)
                    if step.action == "stop":
                        raise stop_error([name], "this batch", step, "")
                    retyped.append(after)
                    continue
                if policy_for(self.pipeline, name).widen_type != "follow":
                    raise stop_error([name], "this batch", Step(ColumnChange(
                        ChangeKind.TYPE_CHANGE, what), "stop", what), "")
                # follow: the re-plan's setup widened it (program.column_changes)
            self.sink.execute(new, work)
            for statement in work:
                self._notice(f"{name}: {statement.purpose}: {statement.sql}")
            if retyped:
                self._retype(name, new, retyped)

    def retype_lagging_columns(self) -> None:
        """At start-up: a target column that cannot hold the plan's values
        (``plan.types.lags_plan``: the column's type changed in MySQL while no run
        followed it, or a run stopped inside that DDL's batch; the plan is built from the
        live catalog, so the DDL's batch finds nothing left to change) goes the way of the
        table's `type_change` policy, as the DDL's batch would have sent it."""
        from replicator.engine.schema_changes import (
            ChangeKind,
            ColumnChange,
            policy_for,
            retype_step,
            stop_error,
        )
        from replicator.plan.types import lags_plan

        dialect = self.sink.dialect
        for table in self.plan.tables:
            if table.routed or table.outbox is not None:
                continue
            described = self.sink.described_columns(table)
            retyped = []
            for column in table.columns:
                have = described.get(column.target_column.lower())
                # A type declared in the YAML is the user's: a change of it applies to the
                # rows written from then on (docs/guarantees.md), as it always did.
                if (column.role != "data" or column.source_column is None or have is None
                        or column.declared_type
                        or not lags_plan(have, column.target_type, dialect)):
                    continue
                what = (f"column {column.source_column} changed type while no run followed it: "
                        f"target column {column.target_column} is {have}, the plan's "
                        f"{column.target_type.describe()}")
                step = retype_step(ColumnChange(ChangeKind.TYPE_CHANGE, what),
                                   policy_for(self.pipeline, table.source_name).type_change,
                                   table, column, what)
                if step.action == "stop":
                    raise stop_error([table.source_name], "start-up", step, "")
                retyped.append(column)
            if retyped:
                self._retype(table.source_name.lower(), table, retyped)
                # Its changes before now are the copy's (it reads every row after this): the
                # batches replaying them, its DDL's among them, leave them out, so no file
                # in the old type is read (pyarrow cannot unify it with the new one).
                self._copied_from[table.source_name.lower()] = _before(
                    current_position(self.pipeline.source))

    def _retype(self, name: str, table: TablePlan, columns: list[PlannedColumn]) -> None:
        """`type_change: recopy`: the table's copy is queued afresh and saved (the runner's
        ``on_recopy``) before anything changes, so a crash from here on still copies it; then
        the target columns are re-created in their new type (NULL until the copy rewrites each
        row), and this batch's changes of the table before its DDL are dropped: the copy
        reads every row as it is now, and an old value may not convert to the new type."""
        from replicator.plan.program import retype_columns

        if self._on_recopy is None:
            raise EngineError(f"{name}: a type change needs the table copied again, and this "
                              "applier cannot queue a copy",
                              hint="run the pipeline with `replicator run`")
        self._on_recopy(table.source_name)
        work = retype_columns(table, columns, self.sink.dialect)
        self.sink.execute(table, work)
        at = self._ddl_at.get(name)
        if at is not None:
            self._cut[name] = max(self._cut.get(name, at), at)
        self._notice(f"{name}: column(s) {', '.join(c.target_column for c in columns)} "
                     "re-created in the new type; copying the table again chunk by chunk "
                     "between stream batches")

    def _notice(self, message: str) -> None:
        if self._on_notice:
            self._on_notice(message)

    def rekey(self, tables: Sequence[str]) -> None:
        """After ``KeyChanged`` (the runner then streams on, the decoders taking the new key):
        the tables' copies are queued afresh and saved, their plans rebuilt from the live
        catalog (a DuckDB target is rebuilt under the new key by the setup, ``program.
        key_changes``), and their changes before the source's head, read before the catalog
        so that every DDL up to it is in the plan, are left to the copies."""
        head = current_position(self.pipeline.source)
        if self._on_recopy is None:
            raise EngineError(f"{', '.join(tables)}: a key change needs the table copied again, "
                              "and this applier cannot queue a copy",
                              hint="run the pipeline with `replicator run`")
        for name in tables:
            self._on_recopy(name)
        self._evolve(handled={name.lower() for name in tables})
        for name in tables:
            self._copied_from[name.lower()] = _before(head)
        self._notice(f"{', '.join(tables)}: primary key changed: streaming on with the new key "
                     "and copying the table again chunk by chunk between stream batches")

    def _evolve(self, created: Sequence[str] = (), handled: set[str] | None = None) -> None:
        """Re-read the catalog, rebuild the plan, let the sink ALTER the target.

        ``created``: the routed source tables this batch showed being born (a CREATE, or the
        first rows of a CREATE ... SELECT): the runner records them as covered. Other tables
        the live catalog adds to the plan are not: the binlog being applied has not reached
        their arrival yet, and a RENAME into the selection there must still copy them.
        """
        context = Context(self.pipeline)
        new_plan = context.replan(context.read_catalog())
        # A named table this batch's DDL did not touch keeps its plan: the live catalog may
        # already show DDL of it that lies ahead in the binlog (a column dropped or renamed
        # after this batch's end); that DDL's own batch follows it by its policy. (Stopping
        # here, as before, failed the schema-policies test on a loaded machine: issue 21.)
        kept = []
        for table in new_plan.tables:
            old = next((t for t in self.plan.tables if t.target_parts == table.target_parts),
                       None)
            # By target: the routes of an outbox all read one source table. Routed: a column
            # only a dropped (or renamed away) table had leaves the union: its target column
            # stays, NULL for new rows. Handled: the batch's DDL of the table changed its
            # columns; _alter_columns applies the policies.
            unchanged = old is not None and not old.routed and not (
                handled and old.source_name.lower() in handled)
            kept.append(old if unchanged else table)
        new_plan = dataclasses.replace(new_plan, tables=tuple(kept))
        self.replan(new_plan)
        fresh = list(dict.fromkeys(name for name in created if self._routed(name)))
        if fresh and self._on_new_sources is not None:
            self._on_new_sources(fresh)

    def replan(self, new_plan: Plan) -> None:
        """Apply with ``new_plan`` from now on; the sink ALTERs the target as it needs."""
        if self._open_sink is not None:
            on_retry = getattr(self.sink, "on_retry", None)
            self.sink.close()
            self.sink = self._open_sink(self.pipeline, new_plan)
            self.sink.on_retry = on_retry
        self.plan = new_plan
        self.sink.prepare()


def _before(head: BinlogPosition) -> tuple[int, int]:
    """The last position before ``head`` (a transaction starting at the head, the first one
    after it, is at ``head`` itself), as ``ddl_rows.after_position`` takes it."""
    return head.sequence, head.pos - 1


def _ddl_position(row: dict[str, Any]) -> tuple[int, int]:
    """A DDL manifest row's binlog position, as ``schema_changes.after_position`` takes it."""
    return BinlogPosition(row["file"], 0).sequence, int(row["pos"])


def _ddl_details(row: dict[str, Any]) -> dict[str, Any]:
    """A DDL row's {database, sql, kind, tables}: a manifest row's ``ddl``, or the JSON in
    a change row's ``after``."""
    return json.loads(row.get("ddl") or row["after"])


_COLUMN_KINDS = frozenset({"add_column", "widen_type", "rename_column", "drop_column",
                           "rename_table"})


class _Timer:
    """Seconds spent inside an iterator's ``next`` (reading and decoding a range's slices)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, items: Iterator[Any]) -> Iterator[Any]:
        while True:
            started = time.perf_counter()
            try:
                item = next(items)
            except StopIteration:
                self.seconds += time.perf_counter() - started
                return
            self.seconds += time.perf_counter() - started
            yield item


def _with_facts(report: TableReport, facts: FileFacts) -> TableReport:
    """A table the warehouse staged: its changes and newest commit time, from the files."""
    report.changes = facts.rows
    report.last_ts_ms = facts.newest_ts_ms if facts.rows else 0
    return report


def _record(report: TableReport, result: Any) -> None:
    """What the sink says of a batch it applied (an ``ApplyResult``), into its report."""
    report.rows = int(result.rows)
    report.skipped = bool(result.skipped)
    report.seconds_stage += float(result.seconds_stage)
    report.seconds_merge = float(result.seconds_merge)
