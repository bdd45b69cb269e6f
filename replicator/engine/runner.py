"""``replicator run``: catalog -> plan -> sink -> start position -> snapshot -> stream.

The order matters and each step says why:

1. read the live catalog and build the plan (the same ``Plan`` that ``replicator plan`` prints);
2. open the sink and ``prepare()`` it (CREATE target and state tables, ALTER added columns);
3. resolve the start position ONCE and persist it in the checkpoint directory
   (``checkpoint.StartState``): with a snapshot, the binlog head is recorded *before* copying;
4. copy the tables (``snapshot.run_snapshot``), resumable chunk by chunk;
5. check the binlog we resume from still exists (``ensure_available``: purged -> a
   ``BinlogGoneError`` naming ``--snapshot always``);
6. stream (``engine.stream``): micro-batches cut on the driver, decoded by Spark jobs, applied
   by ``BatchApplier``; ``until_caught_up`` stops once the head seen at start is applied.

SIGINT/SIGTERM ask the loop to stop; it waits for the batch in progress to finish, then stops
the stream. A second signal stops at once (the sink's transactions keep the target
consistent either way, and the next run replays the unfinished batch, skipping what was
applied).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import replicator.errors as errors
import replicator.sink
from replicator.config.stale import stale_entries
from replicator.context import Context
from replicator.engine import failpoints
from replicator.engine.apply.applier import BatchApplier
from replicator.engine.apply.metrics import BatchReport
from replicator.engine.follow.follower import stop_on_unfollowed_widening
from replicator.engine.follow.pending_ddl import (
    follow_pending_columns,
    follow_pending_ddl,
    pending_schema_changes,
    stop_on_pending_drops,
)
from replicator.engine.follow.routing import SourcesToCopy
from replicator.engine.follow.schema_changes import KeyChanged
from replicator.engine.job.binlog_batches import BinlogBatches
from replicator.engine.job.errors import driver_error, quiet_task_failures, recover
from replicator.engine.job.session import SessionStart, spark_context
from replicator.engine.job.stage_put import LandedUpload
from replicator.engine.recopy import Recopier, queue
from replicator.engine.snapshot import CHUNK_ROWS, run_snapshot
from replicator.engine.start import (
    Notice,
    SnapshotMode,
    cover_new_tables,
    cover_selected,
    follow_gtid,
    record_kept_copies,
    resolve_start,
)
from replicator.engine.state.checkpoint import CheckpointDir, StartState
from replicator.engine.state.lease import take_lease
from replicator.engine.stream import stream
from replicator.errors import ReplicatorError
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import SOURCE_TABLE_COLUMN, decode_partitions
from replicator.source.connection import pin_writer, several_hosts
from replicator.source.positions import binlog_head, ensure_available
from replicator.source.preflight import require_replication_settings

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline

UNTIL_CAUGHT_UP_RETRIES = 3
RETRY_MAX_SECONDS = 30


@dataclass
class RunOptions:
    until_caught_up: bool = False
    snapshot: SnapshotMode = "auto"
    master: str | None = None  # None: the pipeline's engine.master
    conf: Mapping[str, str] = field(default_factory=dict)
    chunk_rows: int | None = None  # snapshot chunk size; None: the default
    on_report: Callable[[BatchReport], None] | None = None
    on_notice: Notice | None = None  # one-line progress messages
    handle_signals: bool = True
    # Keep Spark's logs of failed tasks (Java stacks); otherwise the run's one error says it.
    debug: bool = False
    # Set it to stop like SIGTERM does (for embedding the runner, and tests).
    stop: threading.Event | None = None
    # Take the pipeline's lease from the run holding it (engine.state.lease).
    take_over: bool = False


@dataclass
class RunResult:
    start: BinlogPosition | None = None  # where streaming started in this run
    end: BinlogPosition | None = None  # the newest committed position when the run ended
    snapshot_rows: int = 0
    batches: int = 0  # stream batches applied (replays included)
    changes: int = 0  # row changes read from the binlog
    rows: int = 0  # rows sent to the sink
    stopped: bool = False  # stopped by a signal before catching up


class _StopFlag:
    """Set by SIGINT/SIGTERM; a second signal interrupts at once."""

    def __init__(self, notice: Notice, event: threading.Event | None = None) -> None:
        self.event = event or threading.Event()
        self._notice = notice

    def __call__(self, signum: int, frame: Any) -> None:
        if self.event.is_set():
            raise KeyboardInterrupt
        self.event.set()
        self._notice(
            f"received {signal.Signals(signum).name}: stopping after the current batch "
            "(again to stop now)"
        )

    def is_set(self) -> bool:
        return self.event.is_set()


@contextlib.contextmanager
def _signals(flag: _StopFlag, enabled: bool) -> Iterator[None]:
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, flag) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _WriterMoved(Exception):
    """The writable server of ``source.mysql.host``'s list changed (a failover)."""

    def __init__(self, writer: Any) -> None:
        super().__init__(f"{writer.host}:{writer.port}")
        self.writer = writer


def run_pipeline(pipeline: Pipeline, options: RunOptions, *, spark: Any = None) -> RunResult:
    """Run one pipeline until caught up, stopped by a signal, or failed.

    Holds the pipeline's run lock throughout: a second run of the same pipeline fails at once
    (naming the PID of the first) instead of applying batches beside it. With several hosts
    in ``source.mysql.host`` the run reads from the writable one; when a failover moves the
    writer, it starts again on the new one, resuming by GTID (source.gtid).
    """
    notice = options.on_notice or (lambda message: None)
    listed = pipeline.source
    with CheckpointDir(pipeline.checkpoint_dir).lock(pipeline.name):
        writer = pin_writer(listed) if several_hosts(listed) else None
        while True:
            pinned = pipeline
            if writer is not None:
                notice(f"reading from {writer.host}:{writer.port}, the writable server of "
                       f"{listed.host}")
                pinned = dataclasses.replace(pipeline, source=writer)
            try:
                return _run_locked(pinned, options, spark, listed=listed)
            except _WriterMoved as moved:
                notice(f"the writable server is now {moved}: following it")
                writer = moved.writer


def _run_locked(pipeline: Pipeline, options: RunOptions, spark: Any, *,
                listed: Any = None) -> RunResult:
    notice = options.on_notice or (lambda message: None)
    result = RunResult()
    # Before anything is copied: a STATEMENT binlog (or binlog off, ...) would let the run copy
    # the tables and then stream nothing, forever, without a word.
    require_replication_settings(pipeline.source)
    context = Context(pipeline)
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    # DDL written while no run followed it (between the checkpoint and the head): what the
    # live catalog cannot tell is followed, or stops the run, before the plan and the setup.
    pending = [] if options.snapshot == "always" else pending_schema_changes(pipeline, checkpoint)
    stop_on_pending_drops(pipeline, pending)
    follow_pending_columns(context, pending)
    pipeline = context.pipeline  # the YAML with the column renames and drops followed
    catalog, plan = context.catalog, context.plan
    for note in plan.notes:  # R312: a table whose batches the driver stages, and why
        notice(note.message)
    # The JVM and Spark start while the driver opens the warehouse, reads its state and
    # takes the lease below (engine.job.session.SessionStart: both take seconds).
    # A bounded run whose stream is committed up to the binlog head probably has nothing to
    # apply: its JVM is not started ahead (it is the run's largest fixed cost), and unless the
    # start-up below finds work (a copy, a re-copy), none is started at all (issue 30).
    # (Several hosts listed: positions of two servers do not compare; the stream sorts it.)
    idle = (spark is None and options.until_caught_up and options.snapshot != "always"
            and not (listed is not None and several_hosts(listed))
            and _caught_up(pipeline, checkpoint))

    def session_start() -> SessionStart:
        return SessionStart(
            options.master or pipeline.engine.master, {**pipeline.engine.conf, **options.conf},
            app_name=f"replicator-{pipeline.name}", bounded=options.until_caught_up,
            sql=False, warm=True)  # RDD jobs only: Spark SQL would cost ~1 s of JVM start

    starting = None if spark is not None or idle else session_start()
    for name in context.left_out():
        notice(f"{name}: not in MySQL any more (dropped); `schema_changes.drop_table: ignore` "
               "keeps its target table as it is and follows the other tables")
    # Entries the source's DDL left behind in the YAML (the run follows them; the file lags).
    for entry in stale_entries(context):
        notice(f"stale YAML: {entry.text()}")
    checkpoint.create()
    sink = context.open_sink()
    sink.on_retry = notice  # a batch tried again after a transient warehouse error
    applier: BatchApplier | None = None
    lease = None
    flag = _StopFlag(notice, options.stop)

    report = _reporter(result, options)
    try:
        sink = _leave_out_ignored_columns(context, checkpoint, sink, notice)
        plan = context.plan
        renamed: dict[str, dict[str, str]] = {}
        if options.snapshot != "always":  # a copy from scratch rewrites every row anyway
            renamed = follow_pending_ddl(pipeline, plan, sink, pending, notice)
            stop_on_unfollowed_widening(pipeline, plan, sink)
        sink.prepare()
        state = resolve_start(pipeline, plan, sink, checkpoint, options.snapshot, notice)
        follow_gtid(pipeline, checkpoint, state, notice)
        # Before anything is applied: another run of this pipeline, on any host, stops here.
        # (After the start position is recorded: "latest" means when the run was started.)
        lease = take_lease(sink, pipeline.name, take_over=options.take_over, notice=notice)
        applier = BatchApplier(pipeline, plan, _with_failpoints(sink), checkpoint,
                               epoch=state.epoch,
                               open_sink=lambda p, pl: _with_failpoints(
                                   lease.fence(replicator.sink.open_sink(p, pl))),
                               on_report=report, on_notice=notice,
                               on_new_sources=lambda names: cover_selected(checkpoint, state, names,
                                                                           notice),
                               on_recopy=lambda name, by: _recopy_afresh(checkpoint, state, name,
                                                                          by),
                               covers=lambda name: state.covers(name),
                               copied_at=state.copied_at)
        applier.renamed_columns.update(renamed)  # rows landed before a pending RENAME
        # A resume from the tables' copies (no checkpoint): they become this epoch's, under
        # the lease and before anything else of the epoch is applied.
        record_kept_copies(state, checkpoint, plan, applier.record_copy_done)
        if idle and state.snapshot != "pending":
            applier.retype_lagging_columns()  # may queue a re-copy, which needs Spark
            Recopier(applier, checkpoint, state, context.read_catalog,
                     notice=notice).take_requests()
            if not state.recopies and _caught_up(pipeline, checkpoint):
                resume = checkpoint.resume_position()
                ensure_available(pipeline.source, resume)  # as a streaming run checks it
                notice(f"caught up at {resume}: nothing to apply, Spark not started")
                result.start = result.end = resume
                return result
        if idle:
            starting = session_start()
        spark = starting.context() if starting is not None else spark_context(spark)
        if not options.debug:
            quiet_task_failures(spark)
        with _signals(flag, options.handle_signals):
            if state.snapshot == "pending":
                copying = state.snapshot_tables or plan.source_names()
                notice(f"snapshot of {len(copying)} table(s) at "
                       f"{state.snapshot_position or state.position}")
                if not run_snapshot(spark, applier, catalog, checkpoint, state,
                                    chunk_rows=options.chunk_rows or CHUNK_ROWS,
                                    should_stop=flag.is_set):
                    result.stopped = True
                    return result
            applier.retype_lagging_columns()
            resume = checkpoint.resume_position() or state.position
            ensure_available(pipeline.source, resume)
            result.start = resume
            notice(f"streaming from {resume}")
            recopier = Recopier(applier, checkpoint, state, context.read_catalog, notice=notice,
                                chunk_rows=options.chunk_rows or CHUNK_ROWS)
            if not _stream_and_copy_arrivals(spark, pipeline, context, applier, checkpoint, state,
                                             recopier, options, flag, result, notice,
                                             listed=listed, lease=lease):
                return result  # stopped while copying tables that arrived mid-stream
        committed = checkpoint.committed()
        result.end = committed[1] if committed else resume
        return result
    finally:
        if lease is not None:
            lease.release()
        (applier.sink if applier is not None else sink).close()


def _caught_up(pipeline: Pipeline, checkpoint: CheckpointDir) -> bool:
    """Whether the newest committed stream batch ends at the binlog head (nothing to read).
    Only a committed batch counts: a start position alone may still have a copy to make."""
    committed = checkpoint.committed()
    if committed is None:
        return False
    try:
        return committed[1] >= binlog_head(pipeline.source)
    except ValueError:  # another server's file names (a failover): let the run sort it out
        return False


def _with_failpoints(sink: Any) -> Any:
    """The sink reaches the failpoints inside its batch transaction (``sink.sql``)."""
    sink.failpoint = failpoints.reached
    return sink


def _leave_out_ignored_columns(context: Context, checkpoint: CheckpointDir, sink: Any,
                               notice: Callable[[str], None]) -> Any:
    """Columns added in MySQL while no run followed them (or remembered only by the target) on
    tables with ``add_column: ignore`` leave the plan before the sink's setup would add them;
    the sink is opened again on the new plan when any did."""
    started = checkpoint.load_start()
    if not context.ignore_missing_columns(sink, skip=started.recopies if started else ()):
        return sink
    sink.close()
    sink = context.open_sink()
    sink.on_retry = notice
    for table in context.plan.tables:
        if table.ignored:
            notice(f"{table.source_name}: column(s) {', '.join(table.ignored)} ignored "
                   "(schema_changes.add_column: ignore): not in the target")
    return sink


def _recopy_afresh(checkpoint: CheckpointDir, state: StartState, table: str,
                   by: int | None) -> None:
    """A table whose target column a type change re-created: its copy (queued, or under way
    and then started over) is saved before the target changes (``BatchApplier._retype``).
    ``by``: the stream batch whose table swap asks for it (``engine.recopy.queue``)."""
    queue(state, checkpoint, [table], afresh=True, by=by)
    checkpoint.save_start(state)


def _reporter(result: RunResult, options: RunOptions) -> Callable[[BatchReport], None]:
    """The applier's ``on_report``: counts each batch into ``result``, then passes it on."""

    def report(batch: BatchReport) -> None:
        if batch.kind in ("snapshot", "recopy"):
            result.snapshot_rows += batch.rows
        else:
            result.batches += 1
            result.changes += batch.changes
            result.rows += batch.rows
        # A batch of other tables' changes only (nothing replicated): not worth a line.
        if options.on_report and (batch.tables or batch.kind == "snapshot"):
            options.on_report(batch)

    return report


def _stream_and_copy_arrivals(
    spark: Any, pipeline: Pipeline, context: Context, applier: Any, checkpoint: CheckpointDir,
    state: StartState, recopier: Any, options: RunOptions, flag: _StopFlag, result: RunResult,
    notice: Notice, *, listed: Any = None, lease: Any = None,
) -> bool:
    """Stream until caught up or stopped, then finish the re-copies asked for; tables renamed
    into a `sources:` selection mid-stream are copied first, then the stream goes on; a table
    whose primary key changed is re-planned and queued for a copy, then the stream goes on. False:
    stopped while copying those tables (``result.stopped`` is set either way).

    ``cover_new_tables`` updates ``state`` in place, so the applier's callbacks, which read
    the caller's ``state``, see what it records."""
    while True:
        try:
            _stream_with_retries(spark, pipeline, applier, checkpoint, state, options,
                                 flag, result, notice, listed=listed, lease=lease,
                                 recopier=recopier)
            if not result.stopped and not recopier.run_to_end(flag.is_set):
                result.stopped = True
            return True
        except KeyChanged as changed:
            # A primary key changed: re-plan, queue the copy, and stream on from the same
            # batch with the new key (the decoders take it at stream start).
            applier.rekey(changed.tables)
        except SourcesToCopy as arrived:
            # Renamed into a `sources:` selection mid-stream: copy them as tables found
            # at start-up are, then stream on (the uncommitted batch is replayed).
            notice(f"{', '.join(arrived.tables)}: renamed into a `sources:` selection; "
                   "copying before streaming on")
            applier.copied_sources |= {name.lower() for name in arrived.tables}
            context.reload()
            catalog, plan = context.catalog, context.plan
            applier.replan(plan)
            state = cover_new_tables(state, plan, checkpoint, options.snapshot, notice)
            recopier.state = state
            if state.snapshot == "pending" and not run_snapshot(
                    spark, applier, catalog, checkpoint, state,
                    chunk_rows=options.chunk_rows or CHUNK_ROWS, should_stop=flag.is_set):
                result.stopped = True
                return False


def _stream_with_retries(
    spark: Any, pipeline: Pipeline, applier: Any, checkpoint: CheckpointDir, state: StartState,
    options: RunOptions, flag: _StopFlag, result: RunResult, notice: Notice, *,
    listed: Any = None, lease: Any = None, recopier: Any = None,
) -> None:
    """Restart the stream after transient failures (a server restart, a dropped connection, a
    warehouse resuming): it resumes from the batch log, and the sink skips what was applied. Terminal errors stop the run. Forever mode retries forever with capped
    backoff; ``--until-caught-up`` gives up after a few attempts."""
    attempt = 0
    while True:
        try:
            if attempt:
                # The server may have come back with other settings (a restart that lost a
                # SET GLOBAL binlog_format = ROW): re-check before reading again.
                _check_writer(pipeline, listed)  # first: the old writer may be gone for good
                require_replication_settings(pipeline.source)
            _stream(spark, pipeline, applier, checkpoint, state, options, flag, result, lease,
                    recopier)
            return
        except ReplicatorError as exc:
            attempt += 1
            if not exc.transient or flag.is_set() or (
                options.until_caught_up and attempt > UNTIL_CAUGHT_UP_RETRIES
            ):
                raise
            delay = min(RETRY_MAX_SECONDS, 2 ** (attempt - 1))
            notice(f"transient error (attempt {attempt}): {exc.message}; retrying in {delay} s")
            if flag.event.wait(delay):
                result.stopped = True
                return


def _check_writer(pipeline: Pipeline, listed: Any) -> None:
    """Several hosts listed: _WriterMoved when another one is now the writable server (no
    writable server at all: a transient error, retried)."""
    if listed is None or not several_hosts(listed):
        return
    writer = pin_writer(listed)
    if (writer.host, writer.port) != (pipeline.source.host, pipeline.source.port):
        raise _WriterMoved(writer)


def _stream(
    spark: Any, pipeline: Pipeline, applier: Any, checkpoint: CheckpointDir, state: StartState,
    options: RunOptions, flag: _StopFlag, result: RunResult, lease: Any = None,
    recopier: Any = None,
) -> None:
    """The stream (``engine.stream``) from the batch log's last commit, else the start."""
    plan = applier.plan
    batches = BinlogBatches(
        pipeline.source,
        tables=[table.selection or table.source_name for table in plan.tables],
        keys={table.source_name: table.source_key for table in plan.tables if not table.routed},
        server_id=pipeline.server_id,
        max_rows=pipeline.batching.max_rows,
        decode_partitions=decode_partitions(pipeline.engine, pipeline.batching,
                                            spark.defaultParallelism),
        landing=applier.landing,
        epoch=applier.epoch,
        selection_keys=[(table.selection, [k for k in table.source_key if k != SOURCE_TABLE_COLUMN])
                        for table in plan.tables if table.selection is not None],
        upload=upload.to_json() if (upload := LandedUpload.of(pipeline, plan)) else "",
    )

    def between() -> None:
        if lease is not None:
            lease.renew_if_due()  # LeaseError: another run took it over
        if recopier is not None and not flag.is_set():
            # A table copied again (replicator snapshot --table): one chunk between two
            # stream batches (engine.recopy).
            recopier.take_requests()
            recopier.step()

    try:
        if stream(spark, batches, applier, checkpoint, state.position,
                  until_caught_up=options.until_caught_up,
                  interval_ms=pipeline.batching.max_delay_ms,
                  should_stop=flag.is_set, between=between):
            result.stopped = True
    except (ReplicatorError, KeyboardInterrupt):
        raise
    except Exception as failure:  # a failed Spark job: the error of the task behind it
        raise _unwrap(failure) from None


def _unwrap(failure: BaseException) -> ReplicatorError:
    """The user-facing error behind a failed decode job.

    One raised on an executor reaches us only as text inside Spark's error, carrying its
    class, message, hint and transient flag (``engine.job.errors``).
    """
    text = str(failure)
    carried = recover(text)
    if carried is not None:
        return carried
    # Raised by code that does not carry its error (no payload): the class and message only.
    for match in _ERROR_LINE.finditer(text):
        kind = getattr(errors, match.group("kind"), None)
        if isinstance(kind, type) and issubclass(kind, ReplicatorError):
            return kind(match.group("message").strip(),
                        hint="the run resumes from the last applied batch once this is fixed")
    return driver_error(failure, doing="decoding the binlog")


_ERROR_LINE = re.compile(r"(?:replicator\.errors\.)?(?P<kind>\w+Error): (?P<message>[^\n]+)")
