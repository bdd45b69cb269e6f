"""Where a run starts streaming, resolved once and kept in the checkpoint (``StartState``).

From the checkpoint when there is one; otherwise from the target's state rows (a machine that
lost its checkpoint resumes where the target says: after its last stream batch, or, before
any, from the tables' finished copies, copying only the others), or fresh: the source's
configured start, or the binlog head recorded *before* a snapshot copies the tables. Tables
added to the YAML later get a snapshot of their own; tables a ``sources:`` selection matches
mid-stream are streamed from their creation; a failover to another server resumes by GTID as
a new epoch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from replicator.engine.recopy import queue
from replicator.engine.state.checkpoint import (
    CheckpointDir,
    StartState,
    copy_done_number,
    epoch_of,
    is_copy_done,
)
from replicator.errors import BinlogGoneError, EngineError
from replicator.model.changes import BinlogPosition
from replicator.plan.pushdown import readers_of
from replicator.source.gtid import locate
from replicator.source.positions import current_position, ensure_available

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan

SnapshotMode = Literal["auto", "never", "always"]
Notice = Callable[[str], None]


def resolve_start(
    pipeline: Pipeline, plan: Plan, sink: Any, checkpoint: CheckpointDir, mode: SnapshotMode,
    notice: Notice,
) -> StartState:
    """The start state, from the checkpoint or (starting fresh) resolved once and saved."""
    state = checkpoint.load_start()
    if state is not None and mode != "always":
        forget_passed_copies(state, checkpoint)
        return cover_new_tables(state, plan, checkpoint, mode, notice, incremental=True)
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
    No stream batch yet: ``_resume_from_copies``. None (start over, as before) when the point
    cannot be known: a table without state rows, `--snapshot always`, or a purged binlog.
    """
    if mode == "always" or not any(recorded.values()):
        return None
    epoch = max(epoch_of(int(r["batch_id"])) for rows in recorded.values() for r in rows)
    ids = sorted({int(r["batch_id"]) for rows in recorded.values() for r in rows
                  if int(r["batch_id"]) >= 0 and epoch_of(int(r["batch_id"])) == epoch})
    if not ids:
        return _resume_from_copies(pipeline, plan, recorded, checkpoint, mode, notice,
                                   epoch=epoch + 1)
    empty = [name for name, rows in recorded.items() if not rows]
    if empty:
        notice(f"no checkpoint in {checkpoint.path} and the target's state cannot place the "
               f"resume point (table(s) {', '.join(empty)} have no state rows)")
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


def _resume_from_copies(
    pipeline: Pipeline, plan: Plan, recorded: dict[str, list[dict[str, Any]]],
    checkpoint: CheckpointDir, mode: SnapshotMode, notice: Notice, *, epoch: int,
) -> StartState | None:
    """No checkpoint and no stream batch yet (a first run stopped after its copy, or a quiet
    source): the tables whose finished copy the state table records are kept, the others are
    copied, and the stream starts at the earliest copy's position, as epoch ``epoch``.

    A table counts as copied when the newest state row of every target it feeds is its copy's
    done marker (``checkpoint.COPY_DONE``): nothing was applied to it after the copy. Its
    marker's position P was the binlog head recorded *before* the copy read the table (a
    re-copy's: the position the stream had applied), so the copy holds every change up to P.

    Why exactly once holds when the tables were copied at different positions: the stream
    starts at the earliest, R, so no table misses a change; each table's changes up to its own
    P, rows and DDL, are left out of the batches (the applier's cut, ``StartState.copied_at``,
    kept in start.json so a replay after a crash leaves them out too), so none is applied a
    second time. For a merged table that only saves work (a change applied again carries its
    full row image, and the last one per key wins), but a changelog, scd2 or log table would
    append each of them again. A table copied now takes the binlog head before its copy as
    its P, as the first snapshot does. After P, changes the copy already read (made while it
    ran) are applied on top, as after the first snapshot: merged tables converge, a history
    holds them after the copy's row. The new epoch's batch ids cannot meet the recorded ones
    (checkpoint.EPOCH_SPAN), and a table copied again takes chunk ids of its own.

    None (start over) when no table has a finished copy. A binlog purged past R is an error:
    starting over could lose the changes since (``start: latest``), and it copies every table
    again, which ``--snapshot always`` does when asked.
    """
    copied: dict[str, BinlogPosition] = {}
    for name in plan.source_names():
        readers = readers_of(plan.tables, name)
        newest = [rows[0] for reader in readers if (rows := recorded.get(reader.target_table))]
        if (readers and len(newest) == len(readers) and not any(r.routed for r in readers)
                and all(is_copy_done(int(row["batch_id"])) and row["end_offset"]
                        for row in newest)):
            copied[name] = min(BinlogPosition.from_offset(row["end_offset"]) for row in newest)
    if not copied:
        notice(f"no checkpoint in {checkpoint.path} and the target's state cannot place the "
               "resume point (no stream batch is recorded and no table's copy is recorded "
               "as finished: the snapshot may not have completed)")
        return None
    start = min(copied.values())
    try:
        ensure_available(pipeline.source, start)
    except BinlogGoneError as gone:
        raise BinlogGoneError(
            f"no checkpoint in {checkpoint.path}; the target's state records the copies of "
            f"{len(copied)} table(s) at {start}, but {gone.message}",
            hint="`replicator run PIPELINE.yaml --snapshot always` copies every table again "
            "(then keep binlogs longer than the longest pause)") from None
    missing = [name for name in plan.source_names() if name not in copied]
    state = StartState(position=start, snapshot="done", epoch=epoch, tables=sorted(copied),
                       copied_at={name.lower(): at for name, at in copied.items()},
                       kept_copies=sorted(copied))
    then = ""
    if missing and mode == "never":
        state.tables = sorted({*state.tables, *missing})
        then = (f"; streaming {len(missing)} table(s) ({', '.join(missing)}) without a copy "
                "(--snapshot never)")
    elif missing:
        # Recorded BEFORE the copy, as the first snapshot's: the copy holds every change up to
        # it, and the stream brings the rest.
        head = current_position(pipeline.source)
        state.snapshot = "pending"
        state.snapshot_tables = missing
        state.snapshot_position = head
        state.copied_at.update({name.lower(): head for name in missing})
        then = f"; copying {len(missing)} table(s) ({', '.join(missing)}) at {head} first"
    checkpoint.reset_stream()
    checkpoint.save_start(state)
    counts = Counter(str(at) for at in sorted(copied.values()))
    kept = ", ".join(f"{count} table(s) copied at {at}" if number == 0 else f"{count} at {at}"
                     for number, (at, count) in enumerate(counts.items()))
    notice(f"no checkpoint in {checkpoint.path}: resuming from the target's state: {kept}, "
           f"streaming from {start} as epoch {epoch}, without copying them again" + then)
    return state


def record_kept_copies(state: StartState, checkpoint: CheckpointDir, plan: Plan,
                       record: Callable[[Any, int, BinlogPosition], None]) -> None:
    """The copies a resume kept from an earlier epoch, recorded as this epoch's copy 0 (their
    done markers again, at their positions), before anything else is applied in it.

    So this epoch's state rows place its stream's start, should the checkpoint be lost again:
    with one stream batch recorded, the resume point is the earliest copy of the epoch, which
    without these would be a table copied by this run (later than the stream's start: the
    changes between would be lost), or none. ``record``: ``BatchApplier.record_copy_done``,
    called after the lease is taken; a crash before the state is saved records them again,
    found in the state table."""
    if not state.kept_copies:
        return
    for name in state.kept_copies:
        for reader in readers_of(plan.tables, name):
            record(reader, copy_done_number(0), state.copied_at[name.lower()])
        state.copies[name.lower()] = 1  # a later copy in this epoch takes ids of its own
    state.kept_copies = []
    checkpoint.save_start(state)


def forget_passed_copies(state: StartState, checkpoint: CheckpointDir) -> None:
    """The copies' positions a resume from them recorded (``copied_at``), once Spark has
    committed a batch past all of them: no change the stream reads from there is cut."""
    committed = checkpoint.committed()
    if state.copied_at and not state.kept_copies and committed is not None and all(
            committed[1] >= at for at in state.copied_at.values()):
        state.copied_at = {}
        checkpoint.save_start(state)


def cover_new_tables(
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


def cover_selected(checkpoint: CheckpointDir, state: StartState, names: list[str],
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


def follow_gtid(pipeline: Pipeline, checkpoint: CheckpointDir, state: StartState,
                notice: Notice) -> None:
    """Resume on another server of the topology (a promoted replica) by GTID.

    Spark's checkpoint holds file+pos offsets of the old server, so the stream starts over
    from the located position as a new epoch (new batch ids, see checkpoint.EPOCH_SPAN). The
    batch in flight at the failover, if the sink applied it but Spark did not commit it, is
    applied again under a new id: merged tables converge, an append-only log (changelog mode)
    holds that batch's rows twice.
    """
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
    # Positions of the previous server, which cannot be compared with this one's: the changes
    # between the resume point and a copy's position are applied again (merged tables converge).
    state.copied_at = {}
    checkpoint.reset_stream()
    checkpoint.save_start(state)
