"""``replicator run``: catalog -> plan -> sink -> start position -> snapshot -> stream.

The order matters and each step says why:

1. read the live catalog and build the plan (the same ``Plan`` that ``replicator plan`` prints);
2. open the sink and ``prepare()`` it (CREATE target and state tables, ALTER added columns);
3. resolve the start position ONCE and persist it in the checkpoint directory
   (``checkpoint.StartState``): with a snapshot, the binlog head is recorded *before* copying;
4. copy the tables (``snapshot.run_snapshot``), resumable chunk by chunk;
5. check the binlog we resume from still exists (``ensure_available``: purged -> a
   ``BinlogGoneError`` naming ``--snapshot always``);
6. stream: the binlog data source -> ``foreachBatch(BatchApplier)``. ``until_caught_up`` uses
   Spark's availableNow trigger: it stops once the head seen at start is applied.

SIGINT/SIGTERM ask the loop to stop; it waits for the batch in progress to finish, then stops
the query. A second signal stops at once (the sink's transactions keep the target
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
from typing import TYPE_CHECKING, Any, Literal

from replicator.context import Context
from replicator.engine.checkpoint import CheckpointDir, StartState, epoch_of
from replicator.engine.metrics import BatchReport
from replicator.engine.recopy import Recopier, queue
from replicator.errors import BinlogGoneError, EngineError, ReplicatorError
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import SOURCE_TABLE_COLUMN

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan

SnapshotMode = Literal["auto", "never", "always"]
UNTIL_CAUGHT_UP_RETRIES = 3
RETRY_MAX_SECONDS = 30
Notice = Callable[[str], None]


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
    # Take the pipeline's lease from the run holding it (engine.lease).
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


def resolve_start(
    pipeline: Pipeline, plan: Plan, sink: Any, checkpoint: CheckpointDir, mode: SnapshotMode,
    notice: Notice,
) -> StartState:
    """The start state, from the checkpoint or (starting fresh) resolved once and saved."""
    from replicator.source.positions import current_position

    state = checkpoint.load_start()
    if state is not None and mode != "always":
        return _cover_new_tables(state, plan, checkpoint, mode, notice, incremental=True)
    epoch = 0
    if state is not None:
        epoch = state.epoch + 1
    else:
        # A target that already holds batches of this pipeline, without our checkpoint (a
        # container restarted without its volume): resume where the target's state says, else
        # start a new epoch so the new batch ids cannot be mistaken for applied ones.
        recorded = {table.target_table: sink.recent_applied(table, 2) for table in plan.tables}
        resumed = _resume_from_target(pipeline, plan, recorded, checkpoint, mode, notice)
        if resumed is not None:
            return resumed
        epochs = [epoch_of(int(r["batch_id"])) for rows in recorded.values() for r in rows]
        if epochs:
            epoch = max(epochs) + 1
            notice(f"the target already has batches of pipeline {pipeline.name} but there is "
                   f"no checkpoint in {checkpoint.path}: starting over as epoch {epoch}")
    checkpoint.reset_stream()
    start = pipeline.source.start
    snapshot = mode == "always" or (mode == "auto" and start.kind == "initial")
    if start.kind == "position" and not snapshot:
        if start.file is None or start.pos is None:
            raise EngineError("start: position needs file and pos",
                              hint="source.mysql.start: {file: mysql-bin.000042, pos: 4}")
        position = BinlogPosition(start.file, int(start.pos))
    elif start.kind == "gtid" and not snapshot:
        from replicator.source.gtid import locate

        if not start.gtid:
            raise EngineError("start: gtid needs a GTID position",
                              hint="source.mysql.start: {gtid: '0-1-100'} (MariaDB "
                              "@@gtid_binlog_pos) or a MySQL GTID set")
        # The first transaction after that GTID state, found on the server by a GTID dump.
        position = locate(pipeline.source, BinlogPosition("", 0, gtid=str(start.gtid)),
                          server_id=pipeline.server_id)
        if not position.file:
            raise BinlogGoneError(
                f"start: gtid {start.gtid} is older than every binlog the server still has",
                hint="start: initial copies the tables instead (or give a newer GTID position)")
    else:
        # Recorded BEFORE any copy: the stream replays everything after it.
        position = current_position(pipeline.source)
    state = StartState(position=position, snapshot="pending" if snapshot else "skipped",
                       epoch=epoch,
                       tables=[] if snapshot else plan.source_names())
    checkpoint.save_start(state)
    notice(f"starting pipeline {pipeline.name} at {position}"
           + (" after a snapshot" if snapshot else " (no snapshot)"))
    return state


def _resume_from_target(
    pipeline: Pipeline, plan: Plan, recorded: dict[str, list[dict[str, Any]]],
    checkpoint: CheckpointDir, mode: SnapshotMode, notice: Notice,
) -> StartState | None:
    """The start state rebuilt from the target's state rows, when the checkpoint is gone.

    Spark runs micro-batches one after the other, so every batch before the newest recorded
    one (S) was applied to every table it touched; S itself may be half applied (a crash
    between two tables' transactions). The stream resumes at the end offset of the newest
    batch before S, as a new epoch: S's changes are applied again (merged tables converge).
    None (start over, as before) when that cannot be known: a table without state rows, no
    stream batch yet (a snapshot may be incomplete), `--snapshot always`, or a purged binlog.
    """
    from replicator.errors import BinlogGoneError
    from replicator.source.positions import ensure_available

    if mode == "always" or not any(recorded.values()):
        return None
    why = None
    epoch = max(epoch_of(int(r["batch_id"])) for rows in recorded.values() for r in rows)
    ids = sorted({int(r["batch_id"]) for rows in recorded.values() for r in rows
                  if int(r["batch_id"]) >= 0 and epoch_of(int(r["batch_id"])) == epoch})
    empty = [name for name, rows in recorded.items() if not rows]
    if empty:
        why = f"table(s) {', '.join(empty)} have no state rows"
    elif not ids:
        why = "no stream batch is recorded: the snapshot may not have completed"
    if why is not None:
        notice(f"no checkpoint in {checkpoint.path} and the target's state cannot place the "
               f"resume point ({why})")
        return None
    if len(ids) > 1:
        after = f"batch {ids[-2]}"
        offsets = [r["end_offset"] for rows in recorded.values() for r in rows
                   if int(r["batch_id"]) == ids[-2]]
    else:
        # Only one stream batch: the stream started at the snapshot's position (the oldest
        # one recorded, should a table added later have been copied from a later one).
        after = "the snapshot"
        offsets = [r["end_offset"] for rows in recorded.values() for r in rows
                   if int(r["batch_id"]) < 0 and epoch_of(int(r["batch_id"])) == epoch]
    if not offsets:
        notice(f"no checkpoint in {checkpoint.path} and the target's state cannot place the "
               "resume point (no batch before the newest is recorded)")
        return None
    position = min(BinlogPosition.from_offset(offset) for offset in offsets)
    try:
        ensure_available(pipeline.source, position)
    except BinlogGoneError as gone:
        notice(f"no checkpoint in {checkpoint.path}; the target's state ends at {position} "
               f"but {gone.message}")
        return None
    state = StartState(position=position, snapshot="skipped", epoch=epoch + 1,
                       tables=plan.source_names())
    checkpoint.reset_stream()
    checkpoint.save_start(state)
    notice(f"no checkpoint in {checkpoint.path}: resuming from the target's state table at "
           f"{position} (after {after}; the newest batch, {ids[-1]}, is applied again) "
           f"as epoch {epoch + 1}, without copying the tables again")
    return state


def _cover_new_tables(
    state: StartState, plan: Plan, checkpoint: CheckpointDir, mode: SnapshotMode, notice: Notice,
    *, incremental: bool = False,
) -> StartState:
    """Tables added to the YAML after the pipeline started get a copy of their own.

    ``incremental`` (at start-up): they are streamed at once and copied chunk by chunk between
    stream batches (``engine.recopy``), so no other table waits for them. Otherwise (a table
    renamed into a selection mid-stream: its batch waits for it) the copy is taken now, while
    the stream resumes from its checkpoint (earlier): the stream replays every change of the
    new table since then on top of the copy, so it converges, as the initial snapshot does.
    """
    if state.snapshot == "pending" or not state.tables:
        return state
    planned = {name.lower() for name in plan.source_names()}
    dropped = [name for name in state.tables if name.lower() not in planned]
    if dropped:
        # Its changes are not applied from now on: it is no longer covered, so adding it back
        # copies it again instead of silently missing what changed while it was out. (A table
        # a `sources:` selection stops matching keeps its rows in the target: docs/routing.md.)
        notice(f"table(s) {', '.join(dropped)} no longer in the pipeline: not followed any "
               "more (adding them back copies them again)")
        state.tables = [name for name in state.tables if name.lower() in planned]
        state.recopies = [name for name in state.recopies if name.lower() in planned]
        for name in dropped:
            state.chunks_applied.pop(name, None)
            state.forget_slots(name)  # a later copy takes a fresh slot
            checkpoint.forget_chunks(name)
    new = [name for name in plan.source_names() if not state.covers(name)]
    if not new:
        if dropped:
            checkpoint.save_start(state)
        return state
    # An outbox table's copy is handed to its routes by the snapshot (engine.recopy does not
    # copy one again).
    outbox = {table.source_name.lower() for table in plan.tables if table.outbox is not None}
    streamed = ([name for name in new if name.lower() not in outbox]
                if incremental and mode != "never" else [])
    waiting = [name for name in new if name not in streamed]
    if streamed:
        notice(f"new table(s) {', '.join(streamed)}: streaming them, and copying them chunk by "
               "chunk between stream batches")
        state.tables = sorted({*state.tables, *streamed})
        queue(state, checkpoint, streamed)
    if mode == "never":
        notice(f"new table(s) {', '.join(new)}: streaming their changes only (--snapshot never)")
        state.tables = sorted({*state.tables, *new})
    elif waiting:
        new = waiting
        notice(f"new table(s) {', '.join(new)}: copying them before streaming")
        state.snapshot = "pending"
        state.snapshot_tables = new
        state.snapshot_position = checkpoint.resume_position() or state.position
        for name in new:
            state.chunks_applied.pop(name, None)
            state.forget_slots(name)
            checkpoint.forget_chunks(name)
    checkpoint.save_start(state)
    return state


def _covered(checkpoint: CheckpointDir, state: StartState, names: list[str],
             notice: Notice) -> None:
    """Tables a selection matched mid-stream (CREATE TABLE): streamed from their creation on,
    so covered without a copy; saved before their rows are applied (a crash replays the
    batch, CREATE included, from before it)."""
    fresh = [name for name in names if not state.covers(name)]
    if not fresh:
        return
    notice(f"new table(s) {', '.join(fresh)} match a `sources:` selection: streaming them")
    state.tables = sorted({*state.tables, *fresh})
    checkpoint.save_start(state)


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
    from replicator.source.connection import pin_writer, several_hosts

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
    from replicator.engine.applier import BatchApplier
    from replicator.engine.errors import quiet_task_failures
    from replicator.engine.lease import take_lease
    from replicator.engine.routing import SourcesToCopy
    from replicator.engine.session import register_sources, spark_session
    from replicator.engine.snapshot import CHUNK_ROWS, run_snapshot
    from replicator.sink import open_sink
    from replicator.source.positions import ensure_available
    from replicator.source.preflight import require_replication_settings

    notice = options.on_notice or (lambda message: None)
    result = RunResult()
    # Before anything is copied: a STATEMENT binlog (or binlog off, ...) would let the run copy
    # the tables and then stream nothing, forever, without a word.
    require_replication_settings(pipeline.source)
    context = Context(pipeline)
    catalog, plan = context.catalog, context.plan
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    checkpoint.create()
    sink = context.open_sink()
    sink.on_retry = notice  # a batch tried again after a transient warehouse error
    applier: BatchApplier | None = None
    lease = None
    flag = _StopFlag(notice, options.stop)

    def report(batch: BatchReport) -> None:
        if batch.kind in ("snapshot", "recopy"):
            result.snapshot_rows += batch.rows
        else:
            result.batches += 1
            result.changes += batch.changes
            result.rows += batch.rows
        # Spark runs one empty batch when a new query starts at the head: not worth a line.
        if options.on_report and (batch.tables or batch.kind == "snapshot"):
            options.on_report(batch)

    try:
        sink.prepare()
        state = resolve_start(pipeline, plan, sink, checkpoint, options.snapshot, notice)
        _follow_gtid(pipeline, checkpoint, state, notice)
        # Before anything is applied: another run of this pipeline, on any host, stops here.
        # (After the start position is recorded: "latest" means when the run was started.)
        lease = take_lease(sink, pipeline.name, take_over=options.take_over, notice=notice)
        applier = BatchApplier(pipeline, plan, sink, checkpoint, epoch=state.epoch,
                               open_sink=lambda p, pl: lease.fence(open_sink(p, pl)),
                               on_report=report, on_notice=notice,
                               on_new_sources=lambda names: _covered(checkpoint, state, names,
                                                                     notice),
                               on_recopy=lambda name: _recopy_afresh(checkpoint, state, name),
                               covers=lambda name: state.covers(name))
        if spark is None:
            spark = spark_session(options.master or pipeline.engine.master,
                                  {**pipeline.engine.conf, **options.conf},
                                  app_name=f"replicator-{pipeline.name}")
        else:
            register_sources(spark)
        if not options.debug:
            quiet_task_failures(spark)
        with _signals(flag, options.handle_signals):
            if state.snapshot == "pending":
                notice(f"snapshot of {len(plan.tables)} table(s) at {state.position}")
                if not run_snapshot(spark, applier, catalog, checkpoint, state,
                                    chunk_rows=options.chunk_rows or CHUNK_ROWS,
                                    should_stop=flag.is_set):
                    result.stopped = True
                    return result
            applier.retype_lagging_columns()
            resume = checkpoint.resume_position() or state.position
            ensure_available(pipeline.source, resume)
            result.start = resume
            recopier = Recopier(applier, checkpoint, state, context.read_catalog, notice=notice,
                                chunk_rows=options.chunk_rows or CHUNK_ROWS)
            while True:
                try:
                    _stream_with_retries(spark, pipeline, applier, checkpoint, state, options,
                                         flag, result, notice, listed=listed, lease=lease,
                                         recopier=recopier)
                    if not result.stopped and not recopier.run_to_end(flag.is_set):
                        result.stopped = True
                    break
                except SourcesToCopy as arrived:
                    # Renamed into a `sources:` selection mid-stream: copy them as tables found
                    # at start-up are, then stream on (the uncommitted batch is replayed).
                    notice(f"{', '.join(arrived.tables)}: renamed into a `sources:` selection; "
                           "copying before streaming on")
                    applier.failure = None
                    applier.copied_sources |= {name.lower() for name in arrived.tables}
                    context.reload()
                    catalog, plan = context.catalog, context.plan
                    applier.replan(plan)
                    state = _cover_new_tables(state, plan, checkpoint, options.snapshot, notice)
                    recopier.state = state
                    if state.snapshot == "pending" and not run_snapshot(
                            spark, applier, catalog, checkpoint, state,
                            chunk_rows=options.chunk_rows or CHUNK_ROWS, should_stop=flag.is_set):
                        result.stopped = True
                        return result
        committed = checkpoint.committed()
        result.end = committed[1] if committed else resume
        return result
    finally:
        if lease is not None:
            lease.release()
        (applier.sink if applier is not None else sink).close()
        if applier is not None:
            # Spark's callback server keeps the foreachBatch function (the applier) alive until
            # the JVM stops; drop the sink so its driver objects are freed now.
            applier.sink = None


def _recopy_afresh(checkpoint: CheckpointDir, state: StartState, table: str) -> None:
    """A table whose target column a type change re-created: its copy (queued, or under way
    and then started over) is saved before the target changes (``BatchApplier._retype``)."""
    queue(state, checkpoint, [table], afresh=True)
    checkpoint.save_start(state)


def _follow_gtid(pipeline: Pipeline, checkpoint: CheckpointDir, state: StartState,
                 notice: Notice) -> None:
    """Resume on another server of the topology (a promoted replica) by GTID.

    Spark's checkpoint holds file+pos offsets of the old server, so the stream starts over
    from the located position as a new epoch (new batch ids, see checkpoint.EPOCH_SPAN). The
    batch in flight at the failover, if the sink applied it but Spark did not commit it, is
    applied again under a new id: merged tables converge, an append-only log (changelog mode)
    holds that batch's rows twice.
    """
    from replicator.source.gtid import locate

    if state.snapshot == "pending":
        return  # the snapshot's own position is checked when the stream starts
    resume = checkpoint.resume_position() or state.position
    located = locate(pipeline.source, resume, server_id=pipeline.server_id)
    if located == resume:
        return
    notice(f"{pipeline.source.host}:{pipeline.source.port} is another server: resuming by GTID "
           f"{resume.gtid} at its {located} (was {resume} on the previous server), as epoch "
           f"{state.epoch + 1}")
    state.epoch += 1
    state.position = located
    checkpoint.reset_stream()
    checkpoint.save_start(state)


def _stream_with_retries(
    spark: Any, pipeline: Pipeline, applier: Any, checkpoint: CheckpointDir, state: StartState,
    options: RunOptions, flag: _StopFlag, result: RunResult, notice: Notice, *,
    listed: Any = None, lease: Any = None, recopier: Any = None,
) -> None:
    """Restart the streaming query after transient failures (a server restart, a dropped
    connection, a warehouse resuming): it resumes from Spark's checkpoint, and the sink skips
    what was applied. Terminal errors stop the run. Forever mode retries forever with capped
    backoff; ``--until-caught-up`` gives up after a few attempts."""
    from replicator.source.preflight import require_replication_settings

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
            applier.failure = None
            if flag.event.wait(delay):
                result.stopped = True
                return


def _check_writer(pipeline: Pipeline, listed: Any) -> None:
    """Several hosts listed: _WriterMoved when another one is now the writable server (no
    writable server at all: a transient error, retried)."""
    from replicator.source.connection import pin_writer, several_hosts

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
    from pyspark.errors import StreamingQueryException

    from replicator.engine.datasource import SOURCE_FORMAT, reader_options

    plan = applier.plan
    reader = reader_options(
        pipeline.source,
        tables=[table.selection or table.source_name for table in plan.tables],
        keys={table.source_name: table.source_key for table in plan.tables if not table.routed},
        server_id=pipeline.server_id,
        start=state.position,
        max_rows=pipeline.batching.max_rows,
        decode_partitions=pipeline.engine.decode_partitions,
        landing=applier.landing,
        epoch=applier.epoch,
        selection_keys=[(table.selection, [k for k in table.source_key if k != SOURCE_TABLE_COLUMN])
                        for table in plan.tables if table.selection is not None],
    )
    frame = spark.readStream.format(SOURCE_FORMAT).options(**reader).load()
    writer = (
        frame.writeStream.foreachBatch(applier)
        .option("checkpointLocation", str(checkpoint.stream_dir.resolve()))
        .queryName(f"replicator_{''.join(c if c.isalnum() else '_' for c in pipeline.name)}")
    )
    if options.until_caught_up:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{max(1, pipeline.batching.max_delay_ms)} milliseconds")
    query = writer.start()
    failure: BaseException | None = None
    try:
        while True:
            if flag.is_set() and not applier.in_batch:
                result.stopped = True
                query.stop()
                break
            if query.awaitTermination(0.25):
                break
            if lease is not None and not applier.in_batch:
                lease.renew_if_due()  # LeaseError: another run took it over
            if recopier is not None and not flag.is_set():
                # A table copied again (replicator snapshot --table): one chunk between two
                # stream batches (engine.recopy).
                recopier.take_requests()
                recopier.step()
    except StreamingQueryException as exc:
        failure = exc
    except BaseException:
        with contextlib.suppress(Exception):
            query.stop()
        raise
    failure = failure or query.exception()
    if failure is not None:
        raise _unwrap(failure, applier) from None


def _unwrap(failure: BaseException, applier: Any) -> ReplicatorError:
    """The user-facing error behind a failed streaming query.

    A ReplicatorError raised in foreachBatch (driver) is kept by the applier; one raised on an
    executor or in the source's planner reaches us only as text inside Spark's error, carrying
    its class, message, hint and transient flag (``engine.errors``).
    """
    from replicator.engine.errors import driver_error, recover

    cause = getattr(applier, "failure", None)
    if isinstance(cause, ReplicatorError):
        return cause
    text = str(failure)
    carried = recover(text)
    if carried is not None:
        return carried
    import replicator.errors as errors

    # Raised by code that does not carry its error (no payload): the class and message only.
    for match in _ERROR_LINE.finditer(text):
        kind = getattr(errors, match.group("kind"), None)
        if isinstance(kind, type) and issubclass(kind, ReplicatorError):
            return kind(match.group("message").strip(),
                        hint="the run resumes from the last applied batch once this is fixed")
    return driver_error(failure, doing="the streaming query")


_ERROR_LINE = re.compile(r"(?:replicator\.errors\.)?(?P<kind>\w+Error): (?P<message>[^\n]+)")
