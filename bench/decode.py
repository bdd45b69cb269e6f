"""Single-stream decode rates over one binlog range, all readers in the same run.

- ``library``: unmodified python-mysql-replication 1.0.17 reading the range and touching every
  value of every row image: the baseline every other number is a ratio of;
- ``read_changes``: the product's source reader (``replicator.source.binlog.read_changes``),
  which adds transaction buffering, typed value conversion and ``ChangeEvent``s;
- ``fast``: the fast decoder of ``replicator/source/fast/`` (issue 11) when it exists;
- ``columnar``: the same decoder filling typed Arrow change batches
  (``source.fast.columnar.read_change_batches``, issue 15: what executors run now);
- ``landed``: ``columnar`` + writing the batches as Parquet files (``engine.landing.land_range``,
  the whole executor side of a micro-batch).

Each reader runs in this process, one after the other, with its own server_id. The rate is
row changes per wall second; CPU is this process's CPU (the server's share is reported by the
caller from /proc).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource


@dataclass
class DecodeResult:
    reader: str
    rows: int  # row changes decoded (an update counts once)
    values: int  # values touched
    seconds: float
    cpu_seconds: float
    note: str = ""
    counters: dict[str, Any] | None = None  # the fast decoder's own counters

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "reader": self.reader, "rows": self.rows, "values": self.values,
            "seconds": round(self.seconds, 3), "cpu_seconds": round(self.cpu_seconds, 3),
            "rows_per_s": round(self.rate, 1),
            "cpu_s_per_1k": round(1000 * self.cpu_seconds / self.rows, 4) if self.rows else None,
            "note": self.note,
            **({"counters": self.counters} if self.counters is not None else {}),
        }


def _timed(reader: str, run: Callable[[], tuple[int, int]], note: str = "") -> DecodeResult:
    wall, cpu = time.perf_counter(), time.process_time()
    rows, values = run()
    return DecodeResult(reader, rows, values, time.perf_counter() - wall,
                        time.process_time() - cpu, note)


def _touch(image: dict[str, Any] | None) -> int:
    if not image:
        return 0
    # The library decodes a whole event's rows when ``rows`` is first read; iterating the
    # values here is what a consumer does next (and keeps lazy decoders honest).
    touched = 0
    for _value in image.values():
        touched += 1
    return touched


def decode_library(source: MySQLSource, start: BinlogPosition, end: BinlogPosition,
                   *, server_id: int) -> DecodeResult:
    """Unmodified python-mysql-replication over (start, end], every value touched."""

    def run() -> tuple[int, int]:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import RotateEvent, XidEvent
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        stream = BinLogStreamReader(
            connection_settings={"host": source.host, "port": source.port,
                                 "user": source.user, "passwd": source.password or ""},
            server_id=server_id,
            log_file=start.file,
            log_pos=start.pos,
            resume_stream=True,
            blocking=False,
            only_events=[RotateEvent, XidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        )
        rows = values = 0
        file = start.file
        try:
            for event in stream:
                if isinstance(event, RotateEvent):
                    file = event.next_binlog
                    continue
                if isinstance(event, XidEvent):
                    # the library's own end_log_pos ignores the file: compare positions here
                    if BinlogPosition(file, event.packet.log_pos) >= end:
                        break
                    continue
                if isinstance(event, UpdateRowsEvent):
                    for row in event.rows:
                        rows += 1
                        values += _touch(row["before_values"]) + _touch(row["after_values"])
                else:
                    for row in event.rows:
                        rows += 1
                        values += _touch(row["values"])
        finally:
            stream.close()
        return rows, values

    return _timed("library", run, "python-mysql-replication 1.0.17, unmodified")


def read_changes_has_paths() -> bool:
    """Does ``read_changes`` choose between the library path and the fast path (``fast=``)?"""
    from replicator.source.binlog import read_changes

    return "fast" in inspect.signature(read_changes).parameters


def decode_read_changes(source: MySQLSource, start: BinlogPosition, end: BinlogPosition,
                        *, tables: Iterable[str], server_id: int,
                        fast: bool | None = None) -> DecodeResult:
    """``replicator.source.binlog.read_changes`` over (start, end], every value touched.

    ``fast``: None is the reader as the engine calls it (its default path); False/True pin
    the library path / the fast path where ``read_changes`` offers the choice.
    """
    from replicator.source.binlog import read_changes

    kwargs: dict[str, Any] = {} if fast is None else {"fast": fast}

    def run() -> tuple[int, int]:
        from replicator.model.changes import ChangeEvent

        rows = values = 0
        for change in read_changes(source, start=start, end=end, tables=list(tables),
                                   server_id=server_id, **kwargs):
            if isinstance(change, ChangeEvent):
                rows += 1
                values += _touch(change.before) + _touch(change.after)
        return rows, values

    if fast is False:
        return _timed("read_changes_library", run,
                      "replicator.source.binlog.read_changes(fast=False): the library path")
    return _timed("read_changes", run,
                  "replicator.source.binlog.read_changes as the engine calls it (default path)")


FAST_PACKAGE = "replicator.source.fast"
# Entry points the fast decoder may expose, tried in order: a read_changes twin yielding
# ChangeEvents, or a columnar reader yielding Arrow record batches.
_FAST_ENTRY_POINTS = ("read_changes", "read_batches", "read_record_batches", "read_arrow")


def fast_decoder_available() -> str | None:
    """Why the fast decoder cannot be measured (None: it can)."""
    try:
        if importlib.util.find_spec(FAST_PACKAGE) is None:
            return f"{FAST_PACKAGE} does not exist yet (issue 11)"
        module = importlib.import_module(FAST_PACKAGE)
    except Exception as exc:  # a half-landed package must not break the other sections
        return f"{FAST_PACKAGE} does not import: {type(exc).__name__}: {exc}"
    if not any(hasattr(module, name) for name in _FAST_ENTRY_POINTS):
        return f"{FAST_PACKAGE} has none of {', '.join(_FAST_ENTRY_POINTS)}"
    return None


def decode_fast(source: MySQLSource, start: BinlogPosition, end: BinlogPosition,
                *, tables: Iterable[str], server_id: int) -> DecodeResult:
    """The fast decoder over (start, end]: ChangeEvents touched, or Arrow batches counted."""
    module = importlib.import_module(FAST_PACKAGE)
    name = next(n for n in _FAST_ENTRY_POINTS if hasattr(module, n))
    reader = getattr(module, name)
    kwargs: dict[str, Any] = {"start": start, "end": end, "tables": list(tables),
                              "server_id": server_id}
    accepted = inspect.signature(reader).parameters
    counters = None
    if "counters" in accepted and hasattr(module, "FastDecodeCounters"):
        counters = module.FastDecodeCounters()  # what it decoded itself vs the library
        kwargs["counters"] = counters
    kwargs = {k: v for k, v in kwargs.items() if k in accepted}

    def run() -> tuple[int, int]:
        rows = values = 0
        for item in reader(source, **kwargs):
            num_rows = getattr(item, "num_rows", None)
            if num_rows is not None:  # an Arrow RecordBatch/Table: columnar, no per-value objects
                rows += int(num_rows)
                values += int(num_rows) * int(getattr(item, "num_columns", 0))
            elif hasattr(item, "op") and hasattr(item, "after"):
                rows += 1
                values += _touch(item.before) + _touch(item.after)
        return rows, values

    result = _timed("fast", run, f"{FAST_PACKAGE}.{name}")
    if counters is not None and hasattr(counters, "as_dict"):
        result.counters = counters.as_dict()
    return result


def _digest(changes: Iterable[Any], limit: int) -> tuple[int, str]:
    """(changes, sha256) over the first ``limit`` ChangeEvents: every field, typed values.

    ``repr`` keeps the types apart (Decimal('1.0') vs 1.0, aware vs naive datetimes)."""
    import hashlib

    digest = hashlib.sha256()
    count = 0
    for change in changes:
        if not (hasattr(change, "op") and hasattr(change, "after")):
            continue
        for image in (change.before, change.after):
            digest.update(repr(None if image is None else sorted(image.items())).encode())
        digest.update(repr((change.table, change.op, str(change.position), change.row_index,
                            change.ts_ms, str(change.end_position))).encode())
        count += 1
        if count >= limit:
            break
    return count, digest.hexdigest()


def compare_fast_with_read_changes(source: MySQLSource, start: BinlogPosition,
                                   end: BinlogPosition, *, tables: Iterable[str],
                                   server_ids: tuple[int, int], limit: int) -> dict[str, Any]:
    """Untimed: do the fast decoder and ``read_changes``' library path yield identical
    ChangeEvents?"""
    from replicator.source.binlog import read_changes

    module = importlib.import_module(FAST_PACKAGE)
    fast = module.read_changes
    names = list(tables)
    library_path: dict[str, Any] = {"fast": False} if read_changes_has_paths() else {}
    slow_count, slow_digest = _digest(
        read_changes(source, start=start, end=end, tables=names, server_id=server_ids[0],
                     **library_path), limit)
    fast_count, fast_digest = _digest(
        fast(source, start=start, end=end, tables=names, server_id=server_ids[1]), limit)
    return {"changes_compared": min(slow_count, fast_count),
            "identical": slow_count == fast_count and slow_digest == fast_digest}


def decode_columnar(source: MySQLSource, start: BinlogPosition, end: BinlogPosition,
                    *, tables: Iterable[str], server_id: int) -> DecodeResult:
    """The fast decoder into Arrow change batches: rows counted, values = rows x columns."""
    from replicator.source.fast.columnar import TableChunk, read_change_batches

    def run() -> tuple[int, int]:
        rows = values = 0
        for item in read_change_batches(source, start=start, end=end, tables=list(tables),
                                        server_id=server_id):
            if isinstance(item, TableChunk):
                rows += item.data.num_rows
                values += item.data.num_rows * item.data.num_columns
        return rows, values

    from replicator.source.fast.native import enabled

    decoder = "compiled" if enabled() else "Python"  # REPLICATOR_DECODER, or what is built
    return _timed("columnar", run,
                  f"replicator.source.fast.columnar.read_change_batches ({decoder} decoder)")


def decode_landed(source: MySQLSource, start: BinlogPosition, end: BinlogPosition,
                  *, tables: Iterable[str], server_id: int, root: str) -> DecodeResult:
    """``decode_columnar`` + the Parquet files of the landing zone (one decode task)."""
    from replicator.engine.job.landing import land_range
    from replicator.model.selection import TableSelector
    from replicator.source.fast.columnar import KeyColumns

    def run() -> tuple[int, int]:
        manifest = land_range(source, start=start, end=end, tables=TableSelector.of(tables),
                              keys=KeyColumns({}), server_id=server_id, root=root, epoch=0,
                              part=0)
        rows = sum(int(row["rows"]) for row in manifest if row["kind"] == "rows")
        return rows, rows

    return _timed("landed", run, "replicator.engine.job.landing.land_range (zstd Parquet)")


def parquet_write(source: MySQLSource, start: BinlogPosition, end: BinlogPosition,
                  *, tables: Iterable[str], server_id: int, root: str) -> DecodeResult:
    """The Parquet half of ``decode_landed`` alone: the range's change batches decoded first
    (not timed), then written as ``land_range`` writes them (one zstd file per table, a row
    group per batch). ``landed`` - ``columnar`` is the same figure, but as the difference of
    two runs of ~4 s it is within their noise."""
    import pyarrow.parquet as pq

    from replicator.source.fast.columnar import TableChunk, read_change_batches

    chunks = [item for item in read_change_batches(source, start=start, end=end,
                                                   tables=list(tables), server_id=server_id)
              if isinstance(item, TableChunk)]

    def run() -> tuple[int, int]:
        writers: dict[tuple[str, str], Any] = {}
        rows = 0
        for chunk in chunks:
            key = (chunk.table, chunk.fingerprint)
            if key not in writers:
                writers[key] = pq.ParquetWriter(f"{root}/{len(writers):05d}.parquet",
                                                chunk.data.schema, compression="zstd")
            writers[key].write_table(chunk.data, row_group_size=max(1, chunk.data.num_rows))
            rows += chunk.data.num_rows
        for writer in writers.values():
            writer.close()
        return rows, rows

    return _timed("parquet", run, "pyarrow.parquet.ParquetWriter, zstd, as land_range")
