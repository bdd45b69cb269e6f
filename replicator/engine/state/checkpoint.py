"""The per-pipeline checkpoint directory: where a run starts, snapshot progress, Spark's log.

Layout of ``.replicator/<pipeline>/`` (created user-only, 0700: it names the source server
and binlog positions):

- ``start.json``  — the start position, resolved ONCE when the pipeline starts fresh (never
  recomputed: "latest" computed twice loses the changes in between), the snapshot's progress,
  and the *epoch* (see below);
- ``snapshot/``   — the chunk plan of each table, kept so a resumed snapshot reuses the same
  key ranges (re-planning while the table changes could shift them);
- ``stream/``     — the stream's batch log: ``offsets/<n>`` (batch n's end, written before it
  runs) and ``commits/<n>`` (written once it is applied), in the layout Spark's streaming
  checkpoint used when Structured Streaming ran the stream, so a checkpoint written by
  either resumes with the other;
- ``run.lock``    — held (flock) by the one run of the pipeline; it holds that run's PID.

Epochs: the stream numbers micro-batches from 0 in every new checkpoint, and the sink skips a batch
id it has recorded. When a pipeline starts over (``--snapshot always``, or a checkpoint that was
deleted while the target kept its state table) the new batches must not collide with the old
ones, so sink batch ids are ``epoch * EPOCH_SPAN + spark_batch_id`` (snapshot chunks
``-(epoch * EPOCH_SPAN) - 1 - chunk_index``). Epoch 0 is exactly the sink contract.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from replicator.errors import EngineError
from replicator.model.changes import BinlogPosition

EPOCH_SPAN = 1_000_000_000_000
# A table copied again within an epoch (removed from the YAML, then added back) must not reuse
# the chunk batch ids of its earlier copy, which the sink would skip as applied: copy n of a
# table numbers its chunks from n * COPY_SPAN (1,000 copies of 10^9 chunks fit in an epoch).
COPY_SPAN = 1_000_000_000
# A routed target (`sources:`) records the chunks of MANY source tables under its one set of
# state rows, so two of them must never share a chunk number: each copy of a source table
# takes the target's next *slot* and numbers its chunks from slot * SLOT_SPAN (10^6 copies of
# up to 10^6 chunks each fit in an epoch; the last number of a slot is its absent-row delete).
SLOT_SPAN = 1_000_000
MAX_SLOTS = EPOCH_SPAN // SLOT_SPAN
# A named table's finished copy is recorded by an empty batch (its *done marker*) numbered
# COPY_DONE from the top of the copy's chunk numbers (engine.recopy's MARKER and ABSENT take
# the two above it): the state table then says, without the checkpoint, which tables hold a
# whole copy and from which binlog position (engine.start resumes from it).
COPY_DONE = 3
# Entries of the stream's batch log kept behind the newest (Spark's minBatchesToRetain).
BATCHES_RETAINED = 20
SnapshotStatus = Literal["pending", "done", "skipped"]


def sink_batch_id(epoch: int, spark_batch_id: int) -> int:
    return epoch * EPOCH_SPAN + spark_batch_id


def snapshot_batch_id(epoch: int, chunk_index: int) -> int:
    return -(epoch * EPOCH_SPAN) - 1 - chunk_index


def snapshot_chunk_number(copy: int, chunk_index: int) -> int:
    """The chunk number ``snapshot_batch_id`` takes, for chunk ``chunk_index`` of copy ``copy``."""
    return copy * COPY_SPAN + chunk_index


def routed_chunk_number(slot: int, chunk_index: int) -> int:
    """The chunk number of chunk ``chunk_index`` of the copy that took ``slot`` (routed)."""
    return slot * SLOT_SPAN + chunk_index


def copy_done_number(copy: int) -> int:
    """The chunk number of copy ``copy``'s done marker (``COPY_DONE``)."""
    return snapshot_chunk_number(copy, COPY_SPAN - COPY_DONE)


def is_copy_done(batch_id: int) -> bool:
    """Whether a recorded sink batch id is a named table's done marker, of any copy and epoch
    (EPOCH_SPAN is a multiple of COPY_SPAN). A routed target numbers its chunks by slot and
    records no done marker: its state rows are not read this way."""
    return batch_id < 0 and (-1 - batch_id) % COPY_SPAN == COPY_SPAN - COPY_DONE


def epoch_of(batch_id: int) -> int:
    """The epoch a recorded sink batch id belongs to."""
    return (batch_id if batch_id >= 0 else -1 - batch_id) // EPOCH_SPAN


@dataclass
class StartState:
    position: BinlogPosition
    snapshot: SnapshotStatus
    epoch: int = 0
    # source table name -> number of chunks applied so far (chunks apply in order)
    chunks_applied: dict[str, int] = field(default_factory=dict)
    # Tables the pipeline covers (copied, or streamed from the start position): a table added
    # to the YAML later is not among them and gets a snapshot of its own.
    tables: list[str] = field(default_factory=list)
    # The tables a pending snapshot copies ([] : every table of the plan) and from where.
    snapshot_tables: list[str] = field(default_factory=list)
    snapshot_position: BinlogPosition | None = None
    # lower-case table name -> how many copies of it completed in this epoch (see COPY_SPAN)
    copies: dict[str, int] = field(default_factory=dict)
    # Routed targets (see SLOT_SPAN): lower-case target -> its next free slot, and lower-case
    # "target<TAB>source table" -> the slot of that copy in progress (kept until the copy
    # completes, so a resumed copy keeps its chunk numbers).
    slots: dict[str, int] = field(default_factory=dict)
    copy_slots: dict[str, int] = field(default_factory=dict)
    # Lower-case source tables whose pending copy began with its target empty: its batches
    # insert instead of merging (engine.snapshot._fresh).
    fresh: list[str] = field(default_factory=list)
    # Source tables being copied again while the others stream (``engine.recopy``), in the
    # order asked: the first is in progress (its chunks, ``chunks_applied`` and copy number as
    # for a snapshot's table), the others wait for it.
    recopies: list[str] = field(default_factory=list)
    # lower-case table -> the condition its queued copy reads (`snapshot --where`): only the
    # rows it selects are upserted, and nothing is removed.
    recopy_where: dict[str, str] = field(default_factory=dict)
    # lower-case table -> the stream batch whose table swap queued its copy (`rename_table:
    # recopy`; engine.recopy.queue): that batch applied again leaves the copy be.
    recopy_queued_by: dict[str, int] = field(default_factory=dict)
    # lower-case table -> the position its copy holds every change up to, for a pipeline that
    # resumed from its copies without a checkpoint (engine.start): the stream starts at the
    # earliest, and each table's changes up to its own are left out (they are in its copy).
    # Forgotten once the stream has passed them all, or on another server.
    copied_at: dict[str, BinlogPosition] = field(default_factory=dict)
    # The tables such a resume kept, whose copies this epoch has not recorded yet (done markers
    # of its copy 0; engine.start.record_kept_copies).
    kept_copies: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "position": self.position.to_offset(),
            "snapshot": self.snapshot,
            "epoch": self.epoch,
            "chunks_applied": self.chunks_applied,
            "tables": self.tables,
            "snapshot_tables": self.snapshot_tables,
            "snapshot_position": (
                self.snapshot_position.to_offset() if self.snapshot_position else None
            ),
            "copies": self.copies,
            "slots": self.slots,
            "copy_slots": self.copy_slots,
            "fresh": self.fresh,
            "recopies": self.recopies,
            "recopy_where": self.recopy_where,
            "recopy_queued_by": self.recopy_queued_by,
            "copied_at": {name: position.to_offset()
                          for name, position in self.copied_at.items()},
            "kept_copies": self.kept_copies,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StartState:
        return cls(
            position=BinlogPosition.from_offset(data["position"]),
            snapshot=data["snapshot"],
            epoch=int(data.get("epoch", 0)),
            chunks_applied={k: int(v) for k, v in data.get("chunks_applied", {}).items()},
            tables=list(data.get("tables", [])),
            snapshot_tables=list(data.get("snapshot_tables", [])),
            snapshot_position=(
                BinlogPosition.from_offset(data["snapshot_position"])
                if data.get("snapshot_position") else None
            ),
            copies={k: int(v) for k, v in data.get("copies", {}).items()},
            slots={k: int(v) for k, v in data.get("slots", {}).items()},
            copy_slots={k: int(v) for k, v in data.get("copy_slots", {}).items()},
            fresh=[str(name) for name in data.get("fresh", [])],
            recopies=[str(name) for name in data.get("recopies", [])],
            recopy_where={str(k): str(v) for k, v in data.get("recopy_where", {}).items()},
            recopy_queued_by={str(k): int(v)
                              for k, v in data.get("recopy_queued_by", {}).items()},
            copied_at={str(k): BinlogPosition.from_offset(v)
                       for k, v in data.get("copied_at", {}).items()},
            kept_copies=[str(name) for name in data.get("kept_copies", [])],
        )

    def covers(self, table: str) -> bool:
        return table.lower() in {name.lower() for name in self.tables}

    def copy_number(self, table: str) -> int:
        """Which copy of ``table`` a snapshot now takes (0: its first in this epoch)."""
        return self.copies.get(table.lower(), 0)

    def routed_slot(self, target: str, table: str) -> int:
        """The slot of the copy of source ``table`` into routed ``target``: the one its copy
        in progress took, else the target's next (save the state before using it)."""
        key = f"{target}\t{table}".lower()
        if key in self.copy_slots:
            return self.copy_slots[key]
        slot = self.slots.get(target.lower(), 0)
        if slot >= MAX_SLOTS:
            raise EngineError(
                f"{target}: {MAX_SLOTS} source table copies in one epoch, no chunk numbers left",
                hint="start a new epoch: `replicator run PIPELINE.yaml --snapshot always`",
            )
        self.slots[target.lower()] = slot + 1
        self.copy_slots[key] = slot
        return slot

    def forget_slots(self, table: str) -> None:
        """The copy of ``table`` completed (or will start afresh): later copies take new slots."""
        for key in [k for k in self.copy_slots if k.split("\t", 1)[-1] == table.lower()]:
            del self.copy_slots[key]


class CheckpointDir:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def start_file(self) -> Path:
        return self.path / "start.json"

    @property
    def stream_dir(self) -> Path:
        return self.path / "stream"

    @property
    def snapshot_dir(self) -> Path:
        return self.path / "snapshot"

    @property
    def recopy_dir(self) -> Path:
        """Re-copy requests (``replicator snapshot --table``) waiting for a run to take them."""
        return self.path / "recopy-requests"

    def create(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.path, 0o700)
        except OSError as exc:
            raise EngineError(
                f"cannot create the checkpoint directory {self.path}: {exc.strerror}",
                hint="set engine.checkpoint in the pipeline YAML to a writable directory",
            ) from exc

    @property
    def lock_file(self) -> Path:
        return self.path / "run.lock"

    @contextlib.contextmanager
    def lock(self, pipeline_name: str) -> Iterator[None]:
        """Hold the pipeline's run lock, or fail at once naming the PID that holds it.

        Two runs of one pipeline would both apply batches (against Snowflake, whose state
        table does not enforce its key, both can apply the same one) and race on the
        checkpoint. flock is released by the OS when the process dies, so a crashed run never
        leaves a stale lock.
        """
        import fcntl

        self.create()
        descriptor = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(descriptor, 64, 0).decode(errors="replace").strip() or "?"
                raise EngineError(
                    f"pipeline {pipeline_name} is already running (PID {holder} holds "
                    f"{self.lock_file})",
                    hint=f"stop that run first (kill -TERM {holder} stops it after its "
                    "current batch); run one process per pipeline",
                ) from None
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(descriptor)  # releases the lock

    # -- start state -----------------------------------------------------------------------

    def load_start(self) -> StartState | None:
        try:
            return StartState.from_json(json.loads(self.start_file.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError) as exc:
            raise EngineError(
                f"the checkpoint file {self.start_file} is damaged: {exc}",
                hint="start over with `replicator run PIPELINE.yaml --snapshot always`",
            ) from exc

    def save_start(self, state: StartState) -> None:
        """Atomically (write + rename): a crash never leaves half a file."""
        self.create()
        scratch = self.start_file.with_suffix(".tmp")
        write_private(scratch, (json.dumps(state.to_json(), indent=2) + "\n").encode())
        os.replace(scratch, self.start_file)

    def reset_stream(self) -> None:
        """Forget the stream's progress (the pipeline starts over)."""
        shutil.rmtree(self.stream_dir, ignore_errors=True)
        shutil.rmtree(self.snapshot_dir, ignore_errors=True)

    # -- snapshot chunk plans --------------------------------------------------------------

    def _chunks_file(self, table: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in table)
        return self.snapshot_dir / f"{safe}.chunks.pickle"

    def load_chunks(self, table: str) -> list[Any] | None:
        try:
            return list(pickle.loads(self._chunks_file(table).read_bytes()))
        except FileNotFoundError:
            return None

    def forget_chunks(self, table: str) -> None:
        """A table copied again plans its chunks afresh."""
        self._chunks_file(table).unlink(missing_ok=True)

    def save_chunks(self, table: str, chunks: list[Any]) -> None:
        self.snapshot_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = self._chunks_file(table)
        scratch = target.with_suffix(".tmp")
        write_private(scratch, pickle.dumps(chunks))
        os.replace(scratch, target)

    # -- Spark's streaming log -------------------------------------------------------------

    def batch_end_offset(self, spark_batch_id: int) -> dict[str, Any] | None:
        """The end offset logged for a micro-batch (written before the batch runs)."""
        return _read_offset_log(self.stream_dir / "offsets" / str(spark_batch_id))

    def next_batch(self) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None]:
        """(the stream batch to run next, its start offset, its end offset if it is logged).

        A batch logged and not committed was cut short (a crash, a stop at once, a transient
        error): it runs again over the same range, so its landed files and its batch id are
        the same and the sink skips the tables it already applied (with ``target.atomic``
        off each table commits on its own). Start None: the stream's start position."""
        logged = _numbered(self.stream_dir / "offsets")
        commits = _numbered(self.stream_dir / "commits")
        last = commits[-1] if commits else -1
        if logged and logged[-1] > last:
            batch = logged[-1]
            return batch, self.batch_end_offset(batch - 1), self.batch_end_offset(batch)
        return last + 1, self.batch_end_offset(last) if last >= 0 else None, None

    def log_batch(self, batch: int, end: dict[str, Any]) -> None:
        """Record batch ``batch``'s end before it runs (atomically: write + rename)."""
        metadata = {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000),
                    "conf": {}}
        self._write_log("offsets", batch,
                        f"v1\n{json.dumps(metadata)}\n{json.dumps(end, sort_keys=True)}")

    def commit_batch(self, batch: int) -> None:
        """Record batch ``batch`` as applied, and forget the entries older than the newest
        ``BATCHES_RETAINED`` (only the last one is ever read)."""
        self._write_log("commits", batch, 'v1\n{"nextBatchWatermarkMs":0}')
        for log in ("offsets", "commits"):
            directory = self.stream_dir / log
            for old in _numbered(directory):
                if old > batch - BATCHES_RETAINED:
                    break
                with contextlib.suppress(FileNotFoundError):
                    (directory / str(old)).unlink()

    def _write_log(self, log: str, batch: int, text: str) -> None:
        directory = self.stream_dir / log
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        scratch = directory / f".{batch}.tmp"
        write_private(scratch, text.encode())
        os.replace(scratch, directory / str(batch))

    def committed(self) -> tuple[int, BinlogPosition] | None:
        """(spark batch id, end position) of the newest micro-batch committed."""
        commits = _numbered(self.stream_dir / "commits")
        for batch in reversed(commits):
            offset = self.batch_end_offset(batch)
            if offset is not None:
                return batch, BinlogPosition.from_offset(offset)
        return None

    def resume_position(self) -> BinlogPosition | None:
        """Where streaming continues: the newest committed offset, else the start position."""
        committed = self.committed()
        if committed is not None:
            return committed[1]
        start = self.load_start()
        return start.position if start else None


def write_private(path: Path, data: bytes) -> None:
    """Write ``path`` readable by this user only (0600), whatever the umask: checkpoint files
    hold binlog positions and source key values (docs/running.md, files and permissions)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)  # an older file of that name keeps its mode
        handle.write(data)


def _numbered(directory: Path) -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(directory) if name.isdigit())
    except FileNotFoundError:
        return []


def _read_offset_log(path: Path) -> dict[str, Any] | None:
    """Spark's offset log entry: ``v1``, the batch metadata, then one line per source."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 3 or lines[2].strip() in ("", "-"):
        return None
    return dict(json.loads(lines[2]))
