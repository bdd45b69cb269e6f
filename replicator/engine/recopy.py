"""Copy one table again while the others stream: ``replicator snapshot PIPELINE.yaml --table``.

A request is a file in the checkpoint's ``recopy-requests/`` (``request``); the run takes it
within a second, or the next run does (``Recopier.take_requests``). The table's copy then
runs *between* stream batches, one key-range chunk at a time, on the driver: each step holds
the applier's lock (``BatchApplier.exclusive``), reads one chunk from MySQL (connectorx, into
Arrow, as the snapshot's executors do) and applies it as an upsert batch under a batch id of
the table's next copy (``checkpoint.snapshot_chunk_number``; exactly once through the state
table). Between two chunks the stream applies its batches, so the other tables' lag grows by
about one chunk's time, never by the whole copy's.

Why it converges (the initial snapshot's argument, chunk by chunk): a chunk is read after the
stream applied everything up to its committed position, so the chunk is at least as new as
the target's rows of its key range; every change after the chunk's read is in the binlog
after that position, so the stream applies it later, on top of the chunk. Changes between
the committed position and the read are applied again after the chunk: they carry full row
images, so the last one leaves the row as the chunk read it. (DBLog's watermarks would also
avoid that brief step back; a batch boundary plus replay is the same guarantee the initial
snapshot gives, and needs no write to the source.)

Rows deleted in MySQL while nothing followed them (the reason to re-copy) are removed when the
last chunk is applied. A merged table with ``_SYNCED_AT`` deletes, in one statement, the rows
that neither a chunk nor a stream batch wrote since the copy began (``statements.merging.
delete_not_rewritten``): the copy's first batch is an empty one (its *marker*) whose state row
records the warehouse's time before any chunk. Every row the source still has was rewritten
since (by its chunk, or, if it arrived after its chunk was read, by the stream: its insert is
after the chunk in the binlog). Other modes (changelog, SCD2, soft deletes, routed targets)
find the missing keys by comparing source and target, as ``--snapshot always`` does
(``engine.snapshot.remove_absent_rows``), with the stream held for that step.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from replicator.engine import failpoints
from replicator.engine.snapshot import CHUNK_ROWS, TableCopy, prepare_copy, remove_absent_rows
from replicator.engine.state.checkpoint import (
    COPY_SPAN,
    SLOT_SPAN,
    CheckpointDir,
    StartState,
    copy_done_number,
    snapshot_batch_id,
    write_private,
)
from replicator.errors import EngineError
from replicator.plan.statements import merging
from replicator.source.snapshot import read_chunk_batches

if TYPE_CHECKING:
    from replicator.engine.apply.applier import BatchApplier
    from replicator.model.catalog import Catalog

Notice = Callable[[str], None]

# The chunk numbers, within a copy, of its marker batch and of its delete of absent rows
# (the highest ones; chunk indexes never reach them).
MARKER = 2
ABSENT = 1


def request(checkpoint: CheckpointDir, table: str, where: str | None = None) -> Path:
    """Ask a run of the pipeline to copy ``table`` (``db.table``) again: a file the running
    run takes within a second (or the next run, when none is running). Asking twice is one
    request (the later one's condition). ``where``: a condition checked by
    ``source.conditions.condition_sql``; only the rows it selects are copied."""
    checkpoint.create()
    checkpoint.recopy_dir.mkdir(mode=0o700, exist_ok=True)
    path = _request_path(checkpoint, table)
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    write_private(scratch, json.dumps({"table": table, "requested_at": time.time(),
                                       "where": where}).encode())
    os.replace(scratch, path)
    return path


def _request_path(checkpoint: CheckpointDir, table: str) -> Path:
    return checkpoint.recopy_dir / f"{quote(table.lower(), safe='')}.json"


def _condition(checkpoint: CheckpointDir, table: str) -> str | None:
    """The condition of a request found in the checkpoint (None: the whole table)."""
    try:
        where = json.loads(_request_path(checkpoint, table).read_text()).get("where")
    except (OSError, ValueError, AttributeError):
        return None
    return str(where) if where else None


def requested(checkpoint: CheckpointDir) -> list[str]:
    """The tables asked for and not yet taken by a run, oldest request first."""
    try:
        files = [p for p in checkpoint.recopy_dir.iterdir() if p.suffix == ".json"
                 and not p.name.startswith(".")]
    except FileNotFoundError:
        return []
    return [unquote(p.stem) for p in sorted(files, key=lambda p: p.stat().st_mtime)]


def queue(state: StartState, checkpoint: CheckpointDir, tables: list[str], *,
          afresh: bool = False, where: str | None = None, by: int | None = None) -> list[str]:
    """Queue copies of ``tables`` (not saved: the caller saves the state); those not queued
    already. Each is a copy of its own: the last copy's chunk plan and progress are forgotten
    (the table has grown or shrunk since). ``afresh``: a copy already queued or under way
    starts over too, under the next copy number (its batch ids are spent), because the rows
    it wrote lack a target column re-created since (``BatchApplier._retype``), and it copies
    the whole table. ``where``: only the rows it selects are copied (a queued copy keeps its
    own). ``by``: the stream batch whose table swap asks for the copy (``rename_table:
    recopy``). The same batch asking again is that batch applied again, not a new swap: Spark
    replays a batch whose sink commit a crash left unrecorded in its own log, and the copy the
    batch queued may have begun meanwhile (it runs as soon as the batch's lock is released).
    Starting that copy over would throw away its chunks for nothing: it already reads the
    swapped-in table. (A second swap comes in a later batch: its copy starts over.)"""
    queued = []
    for table in tables:
        waiting = next((t for t in state.recopies if t.lower() == table.lower()), None)
        if waiting is not None and by is not None \
                and state.recopy_queued_by.get(waiting.lower()) == by:
            continue
        if waiting is not None and not afresh:
            continue
        if waiting is None:
            state.recopies.append(table)
        else:
            table = waiting
            if table in state.chunks_applied:  # begun (Recopier._prepare): ids are taken
                state.copies[table.lower()] = state.copies.get(table.lower(), 0) + 1
        state.chunks_applied.pop(table, None)
        state.forget_slots(table)
        checkpoint.forget_chunks(table)
        if where and not afresh:
            state.recopy_where[table.lower()] = where
        else:
            state.recopy_where.pop(table.lower(), None)
        if by is not None:
            state.recopy_queued_by[table.lower()] = by
        else:
            state.recopy_queued_by.pop(table.lower(), None)
        queued.append(table)
    return queued


class Recopier:
    """The re-copies of one run: takes requests, and copies one chunk per ``step``."""

    def __init__(self, applier: BatchApplier, checkpoint: CheckpointDir, state: StartState,
                 catalog: Callable[[], Catalog], *, notice: Notice,
                 chunk_rows: int = CHUNK_ROWS) -> None:
        self.applier = applier
        self.checkpoint = checkpoint
        self.state = state
        self._catalog = catalog
        self._notice = notice
        self._chunk_rows = chunk_rows
        self._copy: TableCopy | None = None  # the table in progress, prepared
        self._plan: Any = None  # the applier's plan it was prepared for

    @property
    def active(self) -> bool:
        return bool(self.state.recopies)

    def take_requests(self) -> None:
        """Move the requests found in the checkpoint into the start state (saved first, then
        the request file removed: a crash between the two asks for a copy already queued)."""
        names = requested(self.checkpoint)
        if not names:
            return
        planned = {name.lower(): name for name in self.applier.plan.source_names()}
        for name in names:
            table = planned.get(name.lower())
            where = _condition(self.checkpoint, name)
            if table is None:
                self._notice(f"re-copy of {name} asked, but the pipeline has no such source "
                             "table now: request dropped")
            elif queue(self.state, self.checkpoint, [table], where=where):
                self._notice(f"re-copy of {table} asked: copying "
                             + (f"its rows where {where}" if where else "it")
                             + " chunk by chunk between stream batches")
        self.checkpoint.save_start(self.state)
        for name in names:
            _request_path(self.checkpoint, name).unlink(missing_ok=True)

    def step(self) -> bool:
        """Copy the next chunk of the table in progress (or finish it). False: nothing to do.
        Holds the applier's lock throughout, so no stream batch runs meanwhile."""
        if not self.state.recopies:
            return False
        with self.applier.exclusive():
            copy = self._prepare()
            done = self.state.chunks_applied.get(copy.name, 0)
            position = self.checkpoint.resume_position() or self.state.position
            if done == 0:
                self._mark(copy, position)
            if done < len(copy.chunks):
                self._copy_chunk(copy, done, position)
            else:
                self._finish(copy, position)
        return True

    def run_to_end(self, should_stop: Callable[[], bool]) -> bool:
        """Every re-copy to its end (no stream runs: ``--until-caught-up`` after the stream
        caught up). False when stopped first."""
        self.take_requests()
        while self.active:
            if should_stop():
                return False
            self.step()
        return True

    # -- one table ---------------------------------------------------------------------------

    def _prepare(self) -> TableCopy:
        name = self.state.recopies[0]
        if self._plan is not self.applier.plan:
            # Re-planned (a followed DDL): read the table's columns again; its chunks and
            # progress stay (the chunk plan is kept in the checkpoint).
            self._copy, self._plan = None, self.applier.plan
        if self._copy is None or self._copy.name.lower() != name.lower():
            self.state.chunks_applied.setdefault(name, 0)
            copy = prepare_copy(self.applier, self._catalog(), self.checkpoint, self.state,
                                name, self._chunk_rows)
            if any(reader.outbox is not None for reader in copy.readers):
                self._drop(name)
                raise EngineError(
                    f"{name} feeds outbox routes: copying it again would emit its rows as "
                    "events again",
                    hint="an outbox table is not re-copied; its routes' targets follow its "
                    "inserts")
            where = self.state.recopy_where.get(name.lower())
            if where:  # `snapshot --where`: read only the rows it selects
                copy = dataclasses.replace(copy, predicate=f"({copy.predicate}) AND ({where})"
                                           if copy.predicate else where)
            self.checkpoint.save_start(self.state)  # a routed reader's slot, taken above
            self._copy = copy
        return self._copy

    def _number(self, copy: TableCopy, reader: Any, from_top: int) -> int:
        last = (SLOT_SPAN if reader.routed else COPY_SPAN) - from_top
        return copy.numbers[id(reader)](last)

    def _mark(self, copy: TableCopy, position: Any) -> None:
        """The copy's marker: an empty batch whose state row holds the time it began."""
        for reader in copy.readers:
            self.applier.apply_snapshot_batches(reader, self._number(copy, reader, MARKER), [],
                                                position, kind="recopy")

    def _copy_chunk(self, copy: TableCopy, index: int, position: Any) -> None:
        batches = list(read_chunk_batches(self.applier.pipeline.source, copy.source_table,
                                          copy.chunks[index], position=position,
                                          predicate=copy.predicate))
        for reader in copy.readers:
            self.applier.apply_snapshot_batches(reader, copy.numbers[id(reader)](index),
                                                _slices(batches), position, kind="recopy")
        # The chunk is committed, its progress not saved yet: a crash here applies it again
        # (found in the state table, skipped).
        failpoints.reached("recopy.chunk_committed")
        self.state.chunks_applied[copy.name] = index + 1
        self.checkpoint.save_start(self.state)
        total = len(copy.chunks)
        if (index + 1) * 10 // total != index * 10 // total or index + 1 == total:
            self._notice(f"re-copy of {copy.name}: {index + 1}/{total} chunk(s)")

    def _finish(self, copy: TableCopy, position: Any) -> None:
        failpoints.reached("recopy.before_removal")  # every chunk saved, no row removed yet
        where = self.state.recopy_where.get(copy.name.lower())
        removed = 0
        for reader in [] if where else copy.readers:  # a condition's copy removes nothing
            if merging.deletes_not_rewritten(reader):
                marker = self._number(copy, reader, MARKER)
                removed += self.applier.sink.delete_not_rewritten(
                    reader, snapshot_batch_id(self.applier.epoch, marker))
            else:
                removed += remove_absent_rows(self.applier, copy.source_table, reader, position,
                                              self._number(copy, reader, ABSENT))
        # Removed and committed, the copy not saved as done: a crash here removes again (the
        # rows not rewritten since the marker, none by then; the absent-row batch is skipped).
        failpoints.reached("recopy.removed")
        if not where:
            # The whole table copied: its done marker (engine.start keeps the copy when the
            # checkpoint is lost before a stream batch). ``position`` is the stream's committed
            # one: each chunk was read after the stream had applied every change up to its own
            # step's, and the stream applied the later ones up to here on top.
            for reader in copy.readers:
                if not reader.routed:
                    self.applier.record_copy_done(reader, copy_done_number(copy.copy), position)
        key = copy.name.lower()
        self.state.copies[key] = self.state.copies.get(key, 0) + 1
        self._drop(copy.name)
        self._notice(f"re-copy of {copy.name} done: {len(copy.chunks)} chunk(s), "
                     + (f"the rows where {where} upserted, none removed" if where else
                        f"{removed} row(s) the source no longer has removed"))

    def _drop(self, name: str) -> None:
        self.state.recopies = [t for t in self.state.recopies if t.lower() != name.lower()]
        self.state.recopy_where.pop(name.lower(), None)
        self.state.recopy_queued_by.pop(name.lower(), None)
        self.state.chunks_applied.pop(name, None)
        self.state.forget_slots(name)
        self.checkpoint.forget_chunks(name)
        self.checkpoint.save_start(self.state)
        self._copy = None


def _slices(batches: list[Any]) -> Any:
    """A chunk's Arrow slices, as the sink pulls them inside the chunk's transaction (after
    its state-table lookup): ``recopy.inside_chunk`` stops a test's run there, a slice staged
    and nothing committed."""
    for batch in batches:
        yield batch
        failpoints.reached("recopy.inside_chunk")
