"""The per-batch transform: change rows -> typed changes per table -> the sink.

Runs on the driver, inside ``foreachBatch`` (and for each snapshot chunk). For every table of
a micro-batch: decode the row images (exact JSON -> typed values), fill columns added mid-
stream into older images, and hand the changes to ``sink.staging.stage_changes``, which
compacts them per the table's mode (last change per key by binlog position, delete wins, key
updates split; changelog, log_table and scd2 tables keep every change) and maps the columns.
The Arrow table goes to ``sink.apply`` with the batch id, exactly once through the sink's
state table.

Compaction runs on the driver, not as a Spark window: the sink runs on the driver and takes
typed ``ChangeEvent``s anyway, so a window would add a shuffle per batch (~0.3-1 s locally)
to save decoding rows that the driver then decodes regardless. The rows of a batch are bounded
by ``batching.max_rows`` -- except that a batch never splits a transaction, so one huge
transaction is one huge batch. Collecting that through Spark holds it whole in the driver JVM
(its default 1 GiB heap runs out near 1M rows) and several times over in Python. So a batch
whose binlog range exceeds ``engine.large_batch_bytes`` is never evaluated by Spark: the
driver reads the range itself, table by table, and streams each table's changes to the sink
in slices of ``SLICE_ROWS`` inside ONE sink transaction (``apply_range``; the reasoning and
the measurements are in docs/architecture.md).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from replicator.engine.checkpoint import CheckpointDir, sink_batch_id, snapshot_batch_id
from replicator.engine.metrics import BatchReport, TableReport
from replicator.engine.schema_changes import DdlEffect, cannot_follow, classify
from replicator.errors import EngineError, ReplicatorError
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.values import decode_image

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline
    from replicator.model.selection import TableSelection
    from replicator.plan.model import Plan, TablePlan

ReportCallback = Callable[[BatchReport], None]
Notice = Callable[[str], None]

# Changes per slice of a big batch: ~50-100 MB of ChangeEvents and staging rows on the
# driver, and few enough slices that the per-slice cost (an Arrow table, a staging insert,
# a write_pandas COPY on Snowflake) stays small next to the rows themselves.
SLICE_ROWS = 50_000


def event_from_row(row: dict[str, Any]) -> ChangeEvent:
    """A row of the data source's ``CHANGE_SCHEMA`` -> the ChangeEvent it was made from."""
    end = None
    if row.get("end_file"):
        end = BinlogPosition(row["end_file"], int(row["end_pos"]))
    return ChangeEvent(
        table=row["table"],
        op=row["op"],
        position=BinlogPosition(row["file"], int(row["pos"])),
        row_index=int(row["row_index"]),
        ts_ms=int(row["ts_ms"] or 0),
        before=decode_image(row["before"]),
        after=decode_image(row["after"]),
        gtid=row.get("gtid"),
        transaction_id=row.get("transaction_id"),
        end_position=end,
    )


# Reading a large batch's range pauses while each slice is staged (seconds, or minutes into
# a slow warehouse): the dump connection must survive that.
LARGE_BATCH_PAUSE_S = 3600


def _binlog_order(row: dict[str, Any]) -> tuple[int, int, int]:
    return (row["file_seq"] or 0, row["pos"] or 0, row["row_index"] or 0)


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
        stream_start: BinlogPosition | None = None,
        on_new_sources: Callable[[list[str]], None] | None = None,
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
        # Where the streaming query's first micro-batch starts (its later batches start at
        # the previous batch's end offset): the big-batch path needs each batch's range.
        self.stream_start = stream_start
        # Called with the source tables a `sources:` selection starts matching mid-stream
        # (the runner records them as covered: streamed from their CREATE, no copy needed).
        self._on_new_sources = on_new_sources
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
        self.in_batch = False
        self.batches = 0
        # Where executors land change batches (engine.landing); None: the stream carries
        # JSON row images (the path before the landing zone, REPLICATOR_LANDING=0).
        self.landing: str | None = None
        if os.environ.get("REPLICATOR_LANDING", "1").strip().lower() not in (
                "0", "false", "no", "off"):
            from replicator.engine.landing import landing_root

            self.landing = landing_root(pipeline.engine.landing, checkpoint.path)
        self.failure: ReplicatorError | None = None  # kept: Spark wraps it in its own error

    # -- foreachBatch ----------------------------------------------------------------------

    def __call__(self, frame: Any, spark_batch_id: int) -> None:
        self.in_batch = True
        try:
            started = time.perf_counter()
            end_offset = self.checkpoint.batch_end_offset(spark_batch_id)
            big = None if self.landing else self._large_range(spark_batch_id, end_offset)
            if self.landing:
                manifest = frame.toArrow().to_pylist()  # one small row per landed file
                report = self.apply_manifest(manifest, spark_batch_id, end_offset)
            elif big is not None:
                # The frame is never evaluated: Spark does not read this range at all.
                report = self.apply_range(big[0], big[1], spark_batch_id, end_offset)
            else:
                rows = frame.toArrow().to_pylist()
                report = self.apply_rows(rows, spark_batch_id, end_offset)
            report.seconds = time.perf_counter() - started
            self.batches += 1
            if self._on_report:
                self._on_report(report)
        except ReplicatorError as exc:
            self.failure = exc
            raise
        finally:
            self.in_batch = False

    def _batch_range(
        self, spark_batch_id: int, end_offset: dict[str, Any] | None
    ) -> tuple[BinlogPosition, BinlogPosition] | None:
        """(start, end) of a micro-batch from Spark's offset log; None when unknown."""
        if end_offset is None:
            return None
        if spark_batch_id == 0:
            start = self.stream_start
        else:
            previous = self.checkpoint.batch_end_offset(spark_batch_id - 1)
            start = BinlogPosition.from_offset(previous) if previous else None
        if start is None:
            return None
        return start, BinlogPosition.from_offset(end_offset)

    def _large_range(
        self, spark_batch_id: int, end_offset: dict[str, Any] | None
    ) -> tuple[BinlogPosition, BinlogPosition] | None:
        """The batch's range if it is too big to collect through Spark, else None."""
        limit = self.pipeline.engine.large_batch_bytes
        found = self._batch_range(spark_batch_id, end_offset) if limit > 0 else None
        if found is None or found[0] >= found[1]:
            return None
        from replicator.engine.binlog_ranges import range_bytes

        size = range_bytes(self.pipeline.source, *found)
        if size <= limit:
            return None
        if self._on_notice:
            self._on_notice(
                f"batch {spark_batch_id}: {size / 2**20:.0f} MiB of binlog ({found[0]} -> "
                f"{found[1]}, over engine.large_batch_bytes): reading it on the driver and "
                f"applying it in slices of {SLICE_ROWS:,} changes")
        return found

    def apply_rows(
        self, rows: list[dict[str, Any]], spark_batch_id: int, end_offset: dict[str, Any] | None
    ) -> BatchReport:
        """Apply one micro-batch's change rows (any order) under its sink batch id."""
        rows.sort(key=_binlog_order)
        if end_offset is None and rows:
            # The offset log is local to the driver; elsewhere the last transaction's end is
            # the best we know (it can lag the true end when trailing transactions are
            # filtered out, which only makes `status` report a slightly older position).
            last = max(
                (r for r in rows if r.get("end_file")),
                key=lambda r: (BinlogPosition(r["end_file"], r["end_pos"])._key()),
                default=None,
            )
            if last is not None:
                end_offset = {"file": last["end_file"], "pos": int(last["end_pos"])}
        by_table: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if row["op"] != "ddl":
                by_table.setdefault(row["table"].lower(), []).append(row)
        ddl = [row for row in rows if row["op"] == "ddl"]
        if ddl:
            self._follow_schema_changes(ddl, with_rows=by_table)
        self._plan_unplanned_sources(by_table)
        report = BatchReport("stream", sink_batch_id(self.epoch, spark_batch_id), end_offset,
                             pipeline=self.pipeline.name)
        for table_plan in self.plan.tables:
            # One source table can feed several targets (outbox routes) and one target can
            # read several source tables (routing): each plan takes the rows it reads.
            table_rows = [row for name, rows_of in by_table.items() if table_plan.reads(name)
                          for row in rows_of]
            if not table_rows:
                continue
            if len(table_rows) > 1 and len(by_table) > 1:
                table_rows.sort(key=_binlog_order)
            started = time.perf_counter()
            events = [event_from_row(row) for row in table_rows]
            decoded = time.perf_counter() - started
            table_report = self.apply_events(table_plan, events, report.batch_id, end_offset)
            table_report.seconds_decode = decoded
            report.tables.append(table_report)
        return report

    # -- landed files (engine.landing) ----------------------------------------------------

    def apply_manifest(
        self, manifest: list[dict[str, Any]], spark_batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> BatchReport:
        """Apply one micro-batch from its manifest: schema changes first (as ``apply_rows``),
        then per target table its landed files -> staging rows -> the sink, exactly once."""
        from replicator.engine.landing import file_order, prune

        if end_offset is None:
            # The offset log is local to the driver; elsewhere the last file's end is the
            # best we know (see apply_rows).
            ends = [BinlogPosition(r["end_file"], int(r["end_pos"])) for r in manifest
                    if r["kind"] == "rows"]
            if ends:
                end_offset = max(ends, key=lambda p: p._key()).to_offset()
        files: dict[str, list[dict[str, Any]]] = {}
        for row in sorted((r for r in manifest if r["kind"] == "rows"), key=file_order):
            files.setdefault(row["table"].lower(), []).append(row)
        ddl = sorted((r for r in manifest if r["kind"] == "ddl"),
                     key=lambda r: (int(r["part"]), int(r["seq"])))
        if ddl:
            self._follow_schema_changes(ddl, with_rows=files)
        self._plan_unplanned_sources(files)
        report = BatchReport("stream", sink_batch_id(self.epoch, spark_batch_id), end_offset,
                             pipeline=self.pipeline.name)
        for table_plan in self.plan.tables:
            # One source table can feed several targets (outbox routes) and one target can
            # read several source tables (routing): each plan takes the files it reads.
            table_files = [row for name, rows_of in files.items() if table_plan.reads(name)
                           for row in rows_of]
            if table_files:
                report.tables.append(
                    self.apply_files(table_plan, table_files, report.batch_id, end_offset))
        if self.landing and manifest:
            prune(self.landing, self.pipeline.engine.landing_retention_ms)
        return report

    def apply_files(
        self, table_plan: TablePlan, files: list[dict[str, Any]], batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> TableReport:
        """One table's landed files of a batch -> staging rows -> ONE sink transaction.

        Files of one source table are already in binlog order and are staged slice by slice
        (``SLICE_ROWS``: a big transaction never sits whole in driver memory; ``STAGE_SEQ``
        continues across slices, so the MERGE's "last change per key" spans them). A routed
        target's files (many source tables) are merged into binlog order first, and an scd2
        table is staged whole (a key's versions depend on all its changes in the batch)."""
        from replicator.engine.landing import file_slices, read_files

        assert self.landing is not None
        root = self.landing
        report = TableReport(table=table_plan.label, changes=0)
        paths = [row["path"] for row in files]
        sources = {row["table"].lower() for row in files}
        changes = sum(int(row["rows"]) for row in files)
        whole = len(sources) > 1 or table_plan.mode == "scd2" or changes <= SLICE_ROWS
        if not whole and self._on_notice:
            self._on_notice(
                f"batch {batch_id}: {changes:,} changes of {table_plan.label} in {len(files)} "
                f"landed file(s): applying them in slices of {SLICE_ROWS:,} changes")

        def batches() -> Iterator[Any]:
            if whole:
                yield read_files(paths, root, sort=len(sources) > 1)
            else:
                yield from file_slices(paths, root, SLICE_ROWS)

        def staged() -> Iterator[Any]:
            staged_rows = 0
            decode = _Timer()
            for batch in decode.wrap(batches()):
                report.seconds_decode = decode.seconds
                table = self._stage_batch(table_plan, batch, report, first_seq=staged_rows)
                staged_rows += table.num_rows
                yield table

        result = self.sink.apply(table_plan, batch_id, end_offset or {}, staged())
        report.rows = int(result.rows)
        report.skipped = bool(result.skipped)
        report.seconds_stage += float(result.seconds_stage)
        report.seconds_merge = float(result.seconds_merge)
        return report

    def _stage_batch(self, table_plan: TablePlan, batch: Any, report: TableReport, *,
                     first_seq: int) -> Any:
        """A change batch -> the staging rows of ``table_plan`` (``replicator.transform``)."""
        import pyarrow.compute as pc

        from replicator.model import change_batch as cb
        from replicator.transform import stage_batch

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

    # -- a big batch, read on the driver ---------------------------------------------------

    def apply_range(
        self, start: BinlogPosition, end: BinlogPosition, spark_batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> BatchReport:
        """Apply the micro-batch (start, end] without Spark, in bounded memory.

        Schema changes first, as ``apply_rows`` does (a pass that skips every row event);
        then one pass per table: its changes, read in binlog order, are staged slice by slice
        into ONE sink transaction. Reading the range once per table keeps one sink
        transaction open at a time (a Snowflake session has one); a reader skips the other
        tables' row events without decoding them.
        """
        report = BatchReport("stream", sink_batch_id(self.epoch, spark_batch_id), end_offset,
                             pipeline=self.pipeline.name)
        ddl = [_schema_change_row(change) for change in self._read(start, end, rows=False)]
        if ddl:
            self._follow_schema_changes(ddl)
        names = self._stream_tables()
        for table_plan in self.plan.tables:
            # A routed target reads what its selection matches (also tables created in this
            # batch); the others the named tables they read.
            sources = ([table_plan.selection] if table_plan.selection is not None else
                       [name for name in names if isinstance(name, str) and table_plan.reads(name)])
            decode = _Timer()
            slices = decode.wrap(_event_slices(self._read(start, end, tables=sources), SLICE_ROWS))
            first = next(slices, None)
            if first is None:
                continue  # none of its changes in this batch (apply_rows skips it too)
            table_report = self.apply_event_slices(
                table_plan, itertools.chain([first], slices), report.batch_id, end_offset)
            table_report.seconds_decode = decode.seconds
            report.tables.append(table_report)
        return report

    def _stream_tables(self) -> list[str | TableSelection]:
        """The source tables the streaming query reads (``runner._stream``'s list; the
        routes of an outbox share one; a routed target reads by its selection)."""
        return list(dict.fromkeys(table.selection or table.source_name
                                  for table in self.plan.tables))

    def _read(
        self, start: BinlogPosition, end: BinlogPosition, *,
        tables: Sequence[str | TableSelection] | None = None,
        rows: bool = True,
    ) -> Iterator[Any]:
        """The range's row changes of ``tables`` (ChangeEvents), or only its schema changes."""
        from replicator.model.changes import SchemaChange
        from replicator.source.binlog import read_changes

        # pipeline.server_id is the executors' first reader: no read task runs while a batch
        # is applied (micro-batches are sequential), so no second connection uses it.
        events = read_changes(self.pipeline.source, start=start, end=end,
                              tables=self._stream_tables() if tables is None else tables,
                              server_id=self.pipeline.server_id, rows=rows,
                              pause_tolerance_s=LARGE_BATCH_PAUSE_S)
        wanted = ChangeEvent if rows else SchemaChange
        return (event for event in events if isinstance(event, wanted))

    def apply_event_slices(
        self, table_plan: TablePlan, slices: Iterable[list[ChangeEvent]], batch_id: int,
        end_offset: dict[str, Any] | None,
    ) -> TableReport:
        """One table's changes of a batch, staged slice by slice, applied in ONE transaction.

        The sink pulls the slices only after its replay check. ``STAGE_SEQ`` continues across
        slices, so the MERGE's "last change per key" (QUALIFY ROW_NUMBER() ... ORDER BY
        STAGE_SEQ DESC) compacts across them; changelog and log tables keep every change in
        order. scd2 versions need all of a key's changes in the batch at once
        (``sink.versions``), so an scd2 table is staged whole: unbounded, as before.
        """
        report = TableReport(table=table_plan.label, changes=0)
        if table_plan.mode == "scd2":
            slices = [[event for piece in slices for event in piece]]

        def staged() -> Iterator[Any]:
            staged_rows = 0
            for events in slices:
                table = self._stage(table_plan, events, report, first_seq=staged_rows)
                staged_rows += table.num_rows
                yield table

        result = self.sink.apply(table_plan, batch_id, end_offset or {}, staged())
        report.rows = int(result.rows)
        report.skipped = bool(result.skipped)
        report.seconds_stage += float(result.seconds_stage)
        report.seconds_merge = float(result.seconds_merge)
        return report

    def _stage(
        self, table_plan: TablePlan, events: list[ChangeEvent], report: TableReport, *,
        first_seq: int = 0,
    ) -> Any:
        """Adapt, complete and stage some of a table's changes; counts them into ``report``."""
        from replicator.sink.adapt import adapt_events
        from replicator.sink.staging import stage_changes

        if table_plan.outbox is not None and table_plan.outbox.first:
            from replicator.sink.outbox import count_unrouted

            report.unrouted += count_unrouted(table_plan, events)
        events = adapt_events(table_plan, events)
        report.changes += len(events)
        report.last_ts_ms = max(report.last_ts_ms, max((e.ts_ms for e in events), default=0))
        started = time.perf_counter()
        source_columns = [c.source_column for c in table_plan.data_columns if c.source_column]
        completed = _complete_images(events, source_columns)
        staged_at = time.perf_counter()
        report.seconds_transform += staged_at - started
        table = stage_changes(table_plan, completed, first_seq=first_seq)
        report.seconds_stage += time.perf_counter() - staged_at
        return table

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
        position: BinlogPosition,
    ) -> BatchReport:
        """Snapshot chunks as change batches (``source.snapshot.read_chunk_batch``), staged
        slice by slice by ``transform.stage_batch`` into ONE sink batch (one MERGE for many
        chunks; the sink checks its state table before pulling the first slice)."""
        from replicator.transform import stage_batch

        started = time.perf_counter()
        batch_id = snapshot_batch_id(self.epoch, chunk_index)
        report = BatchReport("snapshot", batch_id, position.to_offset(),
                             pipeline=self.pipeline.name)
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

        result = self.sink.apply(table_plan, batch_id, position.to_offset(), staged())
        table_report.rows = int(result.rows)
        table_report.skipped = bool(result.skipped)
        table_report.seconds_stage += float(result.seconds_stage)
        table_report.seconds_merge = float(result.seconds_merge)
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
        result = self.sink.apply(table_plan, batch_id, end_offset or {}, staged)
        report.rows = int(result.rows)
        report.skipped = bool(result.skipped)
        report.seconds_stage += float(result.seconds_stage)
        report.seconds_merge = float(result.seconds_merge)
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
            if intent.effect is DdlEffect.ADD_COLUMNS:
                evolve = True
                continue
            raise cannot_follow(touched or routed, where, intent, sql)
        if evolve:
            self._evolve(created)

    def _evolve(self, created: Sequence[str] = ()) -> None:
        """Re-read the catalog, rebuild the plan, let the sink ALTER the target.

        ``created``: the routed source tables this batch showed being born (a CREATE, or the
        first rows of a CREATE ... SELECT): the runner records them as covered. Other tables
        the live catalog adds to the plan are not: the binlog being applied has not reached
        their arrival yet, and a RENAME into the selection there must still copy them.
        """
        from replicator.engine.runner import read_pipeline_catalog
        from replicator.plan import build_plan

        catalog = read_pipeline_catalog(self.pipeline)
        new_plan = build_plan(self.pipeline, catalog)
        for old in self.plan.tables:
            # By target: the routes of an outbox all read one source table.
            new = next(t for t in new_plan.tables if t.target_parts == old.target_parts)
            if old.routed:
                # A column only a dropped (or renamed away) table had leaves the union: its
                # target column stays, NULL for new rows.
                continue
            missing = {c.target_column for c in old.columns} - {c.target_column for c in new.columns}
            if missing:
                raise EngineError(
                    f"{old.source_name}: columns {sorted(missing)} disappeared from the source "
                    "while the pipeline was following an added column",
                    hint="re-copy the table with `replicator run PIPELINE.yaml --snapshot always`",
                )
        self.replan(new_plan)
        fresh = list(dict.fromkeys(name for name in created if self._routed(name)))
        if fresh and self._on_new_sources is not None:
            self._on_new_sources(fresh)

    def replan(self, new_plan: Plan) -> None:
        """Apply with ``new_plan`` from now on; the sink ALTERs the target as it needs."""
        if self._open_sink is not None:
            self.sink.close()
            self.sink = self._open_sink(self.pipeline, new_plan)
        self.plan = new_plan
        self.sink.prepare()


def _ddl_details(row: dict[str, Any]) -> dict[str, Any]:
    """A DDL row's {database, sql, kind, tables}: a manifest row's ``ddl``, or the JSON in
    a change row's ``after``."""
    return json.loads(row.get("ddl") or row["after"])


def _schema_change_row(change: Any) -> dict[str, Any]:
    """A SchemaChange as the data source's DDL row (what ``_follow_schema_changes`` reads)."""
    from replicator.engine.datasource import schema_change_row

    return schema_change_row(change)


def _event_slices(events: Iterator[ChangeEvent], size: int) -> Iterator[list[ChangeEvent]]:
    """Consecutive lists of at most ``size`` events (the last one shorter)."""
    while piece := list(itertools.islice(events, size)):
        yield piece


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
