"""The batch applier (``BatchApplier``): a micro-batch's manifest -> per target table, its
landed change files -> staging rows -> the sink, exactly once.

Runs on the driver, after each stream batch's decode job (``engine.stream``), and for each
snapshot chunk. The stream's rows
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
(``apply_files``; the reasoning and the measurements are in docs/decisions/big-transactions.md).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from replicator.engine import failpoints
from replicator.engine.apply.metrics import BatchReport, TableReport
from replicator.engine.follow.ddl_rows import (
    after_position,
    default_fills,
    fill_defaults,
    last_before,
    row_position,
    truncate_deletes,
)
from replicator.engine.follow.follower import SchemaFollower
from replicator.engine.job.landing import (
    FileFacts,
    file_facts,
    file_order,
    file_slices,
    key_moves,
    key_slices,
    landing_root,
    prune,
    read_files,
)
from replicator.engine.state.checkpoint import CheckpointDir, sink_batch_id, snapshot_batch_id
from replicator.errors import SinkError
from replicator.model import change_batch as cb
from replicator.model.changes import BinlogPosition
from replicator.sink.protocol import TableBatch
from replicator.transform import file_staging, stage_batch
from replicator.transform.buckets import key_bucket_ids
from replicator.transform.outbox import count_unrouted
from replicator.transform.stage import batch_key

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan, TablePlan
    from replicator.plan.program import StagingQuery, TruncateAt

ReportCallback = Callable[[BatchReport], None]
Notice = Callable[[str], None]

# Changes per slice of a big batch: tens of MB of change batch and staging rows on the
# driver, and few enough slices that the per-slice cost (an Arrow table, a staging insert,
# a COPY on Snowflake) stays small next to the rows themselves.
SLICE_ROWS = 50_000
# Old landed files are looked for at most this often (engine.landing_retention).
PRUNE_EVERY_S = 60.0


class BatchApplier(SchemaFollower):
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
        on_recopy: Callable[[str, int | None], None] | None = None,
        covers: Callable[[str], bool] | None = None,
        copied_at: Mapping[str, BinlogPosition] | None = None,
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
        # Called with a source table whose target column a type change re-created (or whose
        # key changed, or onto whose name a table was swapped): the runner queues its copy
        # afresh (engine.recopy.queue) and saves that before the target changes. The second
        # argument: the stream batch whose swap queued it (None for the other causes).
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
        self._unplanned: set[str] = set()  # see plan_unplanned_sources
        # db.table (lower) -> {new source column: old} of renames followed in this run: rows
        # landed before the rename hold the value under the old name (default_fills).
        self.renamed_columns: dict[str, dict[str, str]] = {}
        self._evolving: dict[str, Any] = {}  # db.table (lower) -> Decisions (_follow_decided)
        # db.table (lower) -> the position before which this batch's changes of the table are
        # dropped: a followed TRUNCATE emptied it, or a re-copy rewrites it (_retype).
        self._cut: dict[str, tuple[int, int]] = {}
        # target parts -> the followed TRUNCATEs of the table in this batch, statements of
        # the table's batch transaction (``program.truncate_records``).
        self._truncates: dict[tuple[str, ...], list[TruncateAt]] = {}
        self._ddl_at: dict[str, tuple[int, int]] = {}  # db.table (lower) -> its last DDL's
        # db.table (lower) -> the last position before its copy's, for the tables of a pipeline
        # that resumed from their finished copies without a checkpoint (``copied_at``,
        # engine.start): every change of the table up to there, DDL included, is in its copy.
        self._resumed_at = {name.lower(): last_before(position)
                            for name, position in (copied_at or {}).items()}
        # db.table (lower) -> the last position before the source's head when its copy was
        # queued afresh, after its primary key changed (rekey) or at start-up for a column
        # re-created in a new type (retype_lagging_columns): every change of it up to there
        # is the copy's. At first, the resumed copies'.
        self._copied_from: dict[str, tuple[int, int]] = dict(self._resumed_at)
        self._batch_id = 0
        self._pruned_at = float("-inf")  # when landed files were last pruned (monotonic)
        self.batches = 0
        # Held by each stream batch, and by each step of a table's re-copy (engine.recopy).
        self._lock = threading.Lock()
        # Where executors land change batches (engine.landing).
        self.landing = landing_root(pipeline.engine.landing, checkpoint.path)

    # -- stream batches --------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off stream batches (``engine.recopy`` copies a chunk between two of them)."""
        with self._lock:
            yield

    def apply_batch(self, manifest: list[dict[str, Any]], spark_batch_id: int,
                    end_offset: dict[str, Any] | None, *, read_seconds: float = 0.0) -> None:
        """Apply one stream batch (``engine.stream``): its manifest rows, the batch's number in
        the stream and its end offset. ``read_seconds``: its decode job's, which the batch's
        reported time includes. Holds off a re-copy's step meanwhile."""
        with self._lock:
            started = time.perf_counter() - read_seconds
            if any(row["kind"] == "rows" for row in manifest):
                # Every decode task has returned: its files are landed (and, with an internal
                # stage, PUT by the executor: engine.job.stage_put); nothing of the batch is
                # loaded into the warehouse yet.
                failpoints.reached("apply.before_load")
            cpu = time.process_time()
            report = self.apply_manifest(manifest, spark_batch_id, end_offset)
            report.cpu_seconds = time.process_time() - cpu
            report.seconds = time.perf_counter() - started
            self.batches += 1
            if self._on_report:
                self._on_report(report)

    # -- landed files (engine.landing) ----------------------------------------------------

    def apply_manifest(
        self, manifest: list[dict[str, Any]], spark_batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> BatchReport:
        """Apply one micro-batch from its manifest: schema changes first, then per target
        table its landed files -> staging rows -> the sink, exactly once."""
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
        ddl = sorted((r for r in manifest if r["kind"] == "ddl" and not self._in_copy(r)),
                     key=lambda r: (int(r["part"]), int(r["seq"])))
        self._batch_id = sink_batch_id(self.epoch, spark_batch_id)
        self._cut = dict(self._copied_from)
        self._ddl_at = {}
        self._truncates = {}
        if ddl:
            self.follow_schema_changes(ddl, with_rows=files)
        self.plan_unplanned_sources(files)
        for name in [n for n, cut in self._cut.items()
                     if all(row_position(row) > cut for row in files.get(n, []))]:
            # Every file of the table starts after its cut (the copy's head, long passed):
            # nothing to cut, so the warehouse may stage them again (_in_warehouse).
            del self._cut[name]
        report = BatchReport("stream", sink_batch_id(self.epoch, spark_batch_id), end_offset,
                             pipeline=self.pipeline.name)
        # One source table can feed several targets (outbox routes) and one target can read
        # several source tables (routing): each plan takes the files it reads.
        # A table with a followed TRUNCATE is applied even without a change after it.
        work = [(table_plan, table_files) for table_plan in self.plan.tables
                for table_files in [self._after_cut(table_plan, [
                    row for name, rows_of in files.items()
                    if table_plan.reads(name) for row in rows_of])]
                if table_files or self._truncates.get(table_plan.target_parts)]
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

    def _in_copy(self, row: dict[str, Any]) -> bool:
        """Whether a DDL row is held by the copies of the tables it names: each a table the
        pipeline resumed from its finished copy (``copied_at``), the DDL at or before that
        copy's position. The copy read the table after it, so following it again would do its
        work twice: a TRUNCATE would empty the table again (its rows before the copy's
        position then cut, never re-applied) or be recorded again in a history."""
        if not self._resumed_at or not row.get("file"):
            return False
        tables = [str(name).lower() for name in json.loads(row["ddl"]).get("tables") or ()]
        at = row_position(row)
        return bool(tables) and all(
            name in self._resumed_at and at <= self._resumed_at[name] for name in tables)

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
        truncates = self._truncates.get(table_plan.target_parts)
        # Only when there are some: a test's stand-in sink may not know them.
        recorded = {"truncates": truncates, "at_truncate": _at_truncate} if truncates else {}
        in_warehouse = self._in_warehouse(table_plan, files)
        if in_warehouse is not None:
            batch, facts = in_warehouse
            try:
                result = self.sink.apply(table_plan, batch_id, end_offset or {}, batch.staged,
                                         query=batch.query, **recorded)
            except SinkError as error:
                if error.transient:
                    raise
                # The driver's way names the row and column, or applies what only the
                # warehouse's SQL refused.
            else:
                _record(_with_facts(report, facts), result)
                return report
        batch = self._staged_by_driver(table_plan, files, batch_id, report)
        _record(report, self.sink.apply(table_plan, batch_id, end_offset or {}, batch.staged,
                                        **recorded))
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
            between_tables=lambda: failpoints.reached("apply.between_tables"),
            **({"at_truncate": _at_truncate} if any(b.truncates for b in batches) else {}))

    def _in_warehouse(self, table_plan: TablePlan, files: list[dict[str, Any]]
                      ) -> tuple[TableBatch, FileFacts] | None:
        """A batch's files of one source table, whole, nothing to fill in or drop: the
        warehouse can stage them itself (``warehouse_staging``), no row passing through this
        process (big batches keep their slices: their memory and failpoints are the
        driver's). None where the driver stages them."""
        truncates = self._truncates.get(table_plan.target_parts, [])
        # An external stage's COPY matches each file's columns by name: the files of several
        # source tables (a routed target's) load as one; DuckDB reads one layout.
        by_name = getattr(getattr(self.sink, "dialect", None), "external_stage", None)
        one_source = len({row["table"].lower() for row in files}) == 1 and not table_plan.routed
        simple = ((one_source or bool(by_name))
                  and self._whole(table_plan, files) and not self._fills(table_plan, files)
                  and all(self._cut_of(table_plan, row["table"]) is None for row in files)
                  and not (truncates and table_plan.mode == "scd2"))  # truncate_deletes
        paths = [row["path"] for row in files]
        staging = self.warehouse_staging(table_plan, paths) if simple else None
        if staging is None:
            return None
        query, facts = staging
        return TableBatch(table_plan, paths, query, truncates), facts

    def _after_cut(self, table_plan: TablePlan, files: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
        """The files not wholly before the table's cut (``_cut``): a re-created column's old
        type may not even unify with its new one (a landed file holds one schema)."""
        return [row for row in files if row.get("last_file") is None
                or (cut := self._cut_of(table_plan, row["table"])) is None
                or row_position(row, "last_file", "last_pos") > cut]

    def _cut_of(self, table_plan: TablePlan, source: str) -> tuple[int, int] | None:
        """The cut of ``source``'s changes in the table's batch: a named table's own (its
        files may carry an older name: a swap), a routed target's per source table (a
        followed TRUNCATE of one of them)."""
        return self._cut.get((source if table_plan.routed else table_plan.source_name).lower())

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
        truncates = self._truncates.get(table_plan.target_parts, [])
        if not files:  # a followed TRUNCATE, no change (after it)
            return TableBatch(table_plan, [], truncates=truncates)
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
        cuts = {name: cut for name in sources
                if (cut := self._cut_of(table_plan, name)) is not None}
        ended = truncates if table_plan.mode == "scd2" else []

        def followed(batch: Any) -> Any:
            """Defaults and renamed values filled in; the changes before a followed TRUNCATE
            (the table was emptied after them) or a re-created column (the table's re-copy
            rewrites every row) dropped; in scd2, a followed TRUNCATE as a delete of the keys
            changed after it (``truncate_deletes``)."""
            batch = fill_defaults(batch, fills)
            if ended:
                batch = truncate_deletes(batch, ended, batch_key(table_plan))
            for name, cut in cuts.items():  # a routed target's: that source table's rows only
                batch = after_position(batch, cut, table=name if table_plan.routed else None)
            return batch

        def batches() -> Iterator[Any]:
            if whole:
                yield followed(read_files(paths, root, sort=len(sources) > 1))
            elif by_key:
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

        return TableBatch(table_plan, staged(), truncates=truncates)

    def warehouse_staging(self, table_plan: TablePlan, paths: Sequence[str]
                          ) -> tuple[StagingQuery, FileFacts] | None:
        """The statement the warehouse stages these change files with (a group of snapshot
        chunks, or a stream batch's files of one table), and the files' facts; None where
        the driver must stage them (``transform.file_staging`` says when, and the files must
        be local)."""
        dialect = getattr(self.sink, "dialect", None)  # None: a test's stand-in sink
        if dialect is None or not dialect.reads_change_files:
            return None
        facts = file_facts(paths, self.landing if dialect.external_stage else None)
        query = None if facts is None else file_staging(table_plan, facts.schemas, dialect)
        return None if query is None or facts is None else (query, facts)

    def _stage_batch(self, table_plan: TablePlan, batch: Any, report: TableReport, *,
                     first_seq: int) -> Any:
        """A change batch -> the staging rows of ``table_plan`` (``replicator.transform``)."""
        import pyarrow.compute as pc

        if table_plan.outbox is not None and table_plan.outbox.first:
            report.unrouted += count_unrouted(table_plan, batch)
        report.changes += batch.num_rows
        if batch.num_rows:
            report.last_ts_ms = max(report.last_ts_ms, int(pc.max(batch.column(cb.TS_MS)).as_py()))
        started = time.perf_counter()
        table = stage_batch(table_plan, batch, first_seq=first_seq)
        report.seconds_stage += time.perf_counter() - started
        return table

    # -- snapshot chunks -------------------------------------------------------------------

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

    def record_copy_done(self, table_plan: TablePlan, chunk_number: int,
                         position: BinlogPosition) -> None:
        """A named table's copy finished: its done marker (``checkpoint.COPY_DONE``), an empty
        batch (nothing staged, nothing merged) whose state row holds the copy's position. A
        copy finished again after a crash finds it recorded and writes nothing."""
        self.sink.apply(table_plan, snapshot_batch_id(self.epoch, chunk_number),
                        position.to_offset(), iter(()))


def _at_truncate(table: TablePlan) -> None:
    """Where a table's followed TRUNCATE meets its other writes, in their transaction: a
    merged table's rows deleted, its MERGE not run yet; a changelog / scd2 table's changes
    written, its TRUNCATE not recorded yet."""
    failpoints.reached("apply.after_truncate" if table.mode == "merge"
                       else "apply.before_truncate_record")


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
