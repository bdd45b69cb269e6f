"""The landing zone: change batches as Parquet files, and the manifest rows Spark carries.

Each executor task decodes its binlog range straight into change batches
(``source.fast.columnar``) and writes them as Parquet under ``engine.landing`` (default
``<checkpoint>/landing``; any URI ``pyarrow.fs`` opens: a local path, ``s3://``, ``hdfs://``,
``gs://``; on a cluster it must be a path every executor and the driver share). The Spark
stream then carries one small manifest row per file (and one per schema change) instead of
row images; the driver reads each table's files and turns them into staging rows
(``replicator.transform.stage_batch``) for the sink.

Layout::

    <landing>/stream/epoch=<E>/<start file>_<start pos>-<end file>_<end pos>/
        <seq>-<db.table, %-escaped>.parquet

one directory per decode task: the task's binlog range (transaction boundaries from the
stream's batch log), under the run's epoch (``engine.checkpoint``). A micro-batch is one range
(or ``decode_partitions`` consecutive ones); the batch log fixes batch id -> range, so a
replayed batch decodes the same range into the same names and overwrites its own files. ``<seq>`` counts the task's files in
the order it closes them; a table's files are in binlog order by (task range, seq). A file
holds one table's changes of one shape (its Table_map columns): a column added mid-batch
starts a new file whose schema has it; older files lack it (NULL for their rows). Row groups
hold at most ``source.fast.columnar.CHUNK_ROWS`` rows, so a big transaction streams to disk
while it is decoded and the driver reads it back slice by slice.

Files older than ``engine.landing_retention`` are removed by the driver after a batch is
applied (whole task directories, by modification time); until then they are the raw change
files of the pipeline (binlog -> files -> warehouse), readable by any Parquet tool for audits
and reloads: the columns are the MySQL table's, typed (``source.arrow_types``), plus the
``__replicator_*`` columns of ``model.change_batch``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from replicator.errors import EngineError
from replicator.model import change_batch as cb
from replicator.model.changes import BinlogPosition, SchemaChange
from replicator.model.pipeline import MySQLSource
from replicator.model.selection import TableSelector
from replicator.source.fast.columnar import KeyColumns, TableChunk, read_change_batches

if TYPE_CHECKING:
    import pyarrow as pa


LANDING_DIR = "landing"
STREAM_DIR = "stream"

# One row per landed file ("rows") or schema change ("ddl").
MANIFEST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "STRING"),  # rows | ddl
    ("table", "STRING"),  # db.table (ddl: the first table it names, else the database)
    ("path", "STRING"),  # the Parquet file (rows)
    ("rows", "BIGINT"),  # row changes in the file
    ("part", "BIGINT"),  # the decode task (partition index) that wrote it
    ("seq", "BIGINT"),  # its order among the task's manifest rows
    ("file", "STRING"),  # first change's transaction start (ddl: its transaction start)
    ("pos", "BIGINT"),
    ("last_file", "STRING"),  # last change's transaction start
    ("last_pos", "BIGINT"),
    ("end_file", "STRING"),  # the boundary after the last change's transaction
    ("end_pos", "BIGINT"),
    ("fingerprint", "STRING"),  # the file's column names and types
    ("ts_ms", "BIGINT"),  # ddl: commit time
    ("ddl", "STRING"),  # ddl: JSON {database, sql, kind, tables}
)
MANIFEST_SCHEMA = ", ".join(f"`{name}` {kind}" for name, kind in MANIFEST_COLUMNS)


def landing_root(landing: str | None, checkpoint_path: str | Path) -> str:
    """``engine.landing``, or the checkpoint directory's ``landing/`` (absolute: executors
    may run elsewhere in the file system)."""
    if landing:
        return landing if "://" in landing else str(Path(landing).resolve())
    return str((Path(checkpoint_path) / LANDING_DIR).resolve())


def _filesystem(root: str) -> tuple[Any, str]:
    from pyarrow import fs

    if "://" in root:
        return fs.FileSystem.from_uri(root)
    return fs.LocalFileSystem(), root


def task_dir(root: str, epoch: int, start: BinlogPosition, end: BinlogPosition) -> str:
    return (f"{root.rstrip('/')}/{STREAM_DIR}/epoch={epoch}/"
            f"{quote(start.file, safe='.')}_{start.pos}-{quote(end.file, safe='.')}_{end.pos}")


def ddl_row(change: SchemaChange, part: int, seq: int) -> dict[str, Any]:
    position = change.position
    details = {"database": change.database, "sql": change.sql, "kind": change.kind,
               "tables": list(change.tables)}
    return {
        "kind": "ddl", "table": change.tables[0] if change.tables else change.database,
        "path": None, "rows": 0, "part": part, "seq": seq,
        "file": position.file if position else None, "pos": position.pos if position else None,
        "last_file": None, "last_pos": None, "end_file": None, "end_pos": None,
        "fingerprint": None, "ts_ms": change.ts_ms,
        "ddl": json.dumps(details, ensure_ascii=False),
    }


class _OpenFile:
    def __init__(self, filesystem: Any, path: str, schema: pa.Schema, fingerprint: str,
                 table: str) -> None:
        import pyarrow.parquet as pq

        self.path = path
        self.table = table
        self.fingerprint = fingerprint
        self.writer = pq.ParquetWriter(path, schema, filesystem=filesystem, compression="zstd")
        self.rows = 0
        self.first: BinlogPosition | None = None
        self.last: BinlogPosition | None = None
        self.end: BinlogPosition | None = None

    def write(self, chunk: Any) -> None:
        self.writer.write_table(chunk.data, row_group_size=max(1, chunk.data.num_rows))
        self.rows += chunk.data.num_rows
        self.first = self.first or chunk.first
        self.last, self.end = chunk.last, chunk.end

    def close(self, part: int, seq: int) -> dict[str, Any]:
        self.writer.close()
        assert self.first is not None and self.last is not None and self.end is not None
        return {
            "kind": "rows", "table": self.table, "path": self.path, "rows": self.rows,
            "part": part, "seq": seq, "file": self.first.file, "pos": self.first.pos,
            "last_file": self.last.file, "last_pos": self.last.pos,
            "end_file": self.end.file, "end_pos": self.end.pos,
            "fingerprint": self.fingerprint, "ts_ms": None, "ddl": None,
        }


def land_range(
    source: MySQLSource, *, start: BinlogPosition, end: BinlogPosition,
    tables: TableSelector, keys: KeyColumns, server_id: int, root: str, epoch: int, part: int,
) -> list[dict[str, Any]]:
    """Decode (start, end] into Parquet files under ``root`` (executor side); the manifest
    rows of the files and schema changes, in order."""
    filesystem, base = _filesystem(root)
    directory = task_dir(base, epoch, start, end)
    filesystem.create_dir(directory, recursive=True)
    manifest: list[dict[str, Any]] = []
    open_files: dict[str, _OpenFile] = {}  # lower-case table -> its file being written
    opened = 0
    for item in read_change_batches(source, start=start, end=end, tables=tables,
                                    server_id=server_id, keys=keys):
        if isinstance(item, SchemaChange):
            manifest.append(ddl_row(item, part, len(manifest)))
            continue
        assert isinstance(item, TableChunk)
        current = open_files.get(item.table.lower())
        if current is not None and current.fingerprint != item.fingerprint:
            manifest.append(current.close(part, len(manifest)))
            current = None
        if current is None:
            name = f"{opened:05d}-{quote(item.table, safe='.')}.parquet"
            opened += 1
            current = _OpenFile(filesystem, f"{directory}/{name}", item.data.schema,
                                item.fingerprint, item.table)
            open_files[item.table.lower()] = current
        current.write(item)
    for current in open_files.values():
        manifest.append(current.close(part, len(manifest)))
    return manifest


def land_batch(root: str, directory: str, name: str, data: pa.Table, *, part: int = 0,
               seq: int = 0, end: BinlogPosition | None = None) -> dict[str, Any]:
    """Write one change batch (one table, any producer) as a landed file ``directory/name``
    under ``root``; its manifest row. ``end``: the boundary after its last transaction
    (default: that transaction's start, the best a change batch alone knows)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    filesystem, base = _filesystem(root)
    folder = f"{base.rstrip('/')}/{directory}"
    filesystem.create_dir(folder, recursive=True)
    path = f"{folder}/{name}"
    pq.write_table(data, path, filesystem=filesystem, compression="zstd")
    files, positions = data.column(cb.FILE), data.column(cb.POS)
    first = BinlogPosition(files[0].as_py(), int(positions[0].as_py()))
    last = BinlogPosition(files[-1].as_py(), int(positions[-1].as_py()))
    end = end or last
    table = pc.unique(data.column(cb.TABLE)).to_pylist()
    return {
        "kind": "rows", "table": table[0], "path": path, "rows": data.num_rows, "part": part,
        "seq": seq, "file": first.file, "pos": first.pos, "last_file": last.file,
        "last_pos": last.pos, "end_file": end.file, "end_pos": end.pos,
        "fingerprint": str(data.schema), "ts_ms": None, "ddl": None,
    }


def manifest_batch(rows: Sequence[dict[str, Any]]) -> pa.RecordBatch:
    import pyarrow as pa

    types = {"STRING": pa.string(), "BIGINT": pa.int64()}
    schema = pa.schema([(name, types[kind]) for name, kind in MANIFEST_COLUMNS])
    return pa.RecordBatch.from_arrays(
        [pa.array([row[name] for row in rows], type=field.type)
         for name, field in zip(schema.names, schema, strict=True)], schema=schema)


# -- driver side -------------------------------------------------------------------------------


def file_order(row: dict[str, Any]) -> tuple[int, int, int, int]:
    """Binlog order of a table's files: by the first change, then the task's own order."""
    first = BinlogPosition(row["file"], int(row["pos"]))
    return (first.sequence, first.pos, int(row["part"]), int(row["seq"]))


def _unreadable(path: str, exc: Exception) -> EngineError:
    return EngineError(
        f"cannot read the landed change file {path}: {exc}",
        hint="the driver reads what executors wrote under engine.landing: on a cluster it must "
        "be a path every process shares (a shared mount, s3://, hdfs://), and nothing may "
        "remove files before their batch is applied",
    )


def read_schema(paths: Sequence[str], root: str) -> pa.Schema:
    """One schema over a table's files: columns added mid-stream join it (NULL for the
    files without them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    filesystem, _ = _filesystem(root)
    schemas = []
    for path in paths:
        try:
            schemas.append(pq.read_schema(path, filesystem=filesystem))
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(path, exc) from exc
    return pa.unify_schemas(schemas, promote_options="permissive")


@dataclass(frozen=True)
class FileFacts:
    """What a warehouse that reads the files itself needs from them, from their Parquet
    footers alone (no row is read): each file's schema, the rows, the newest commit time."""

    schemas: list[pa.Schema]
    rows: int
    newest_ts_ms: int


def file_facts(paths: Sequence[str], root: str | None = None) -> FileFacts | None:
    """The files' facts, or None when one lacks commit-time statistics. Without ``root``
    (or with a local one) only local files count (None for a remote path: a warehouse
    reading them in place would need an object-store client); with a remote ``root`` (an
    object-store landing zone read through an external stage) the footers are read from it:
    a stream's manifest names a file inside the root's file system, a snapshot chunk by its
    whole URI."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    remote = root is not None and "://" in root and not root.startswith("file://")
    if not remote and any("://" in p and not p.startswith("file://") for p in paths):
        return None
    filesystem = _filesystem(root)[0] if remote and root is not None else None
    schemas, rows, newest = [], 0, 0
    for path in paths:
        try:
            if filesystem is None:
                metadata = pq.read_metadata(path.removeprefix("file://"))
            else:
                with filesystem.open_input_file(path.split("://", 1)[-1]) as handle:
                    metadata = pq.read_metadata(handle)
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(path, exc) from exc
        schema = metadata.schema.to_arrow_schema()
        schemas.append(schema)
        rows += metadata.num_rows
        index = schema.get_field_index(cb.TS_MS)
        if index < 0:
            return None
        for group in range(metadata.num_row_groups):
            statistics = metadata.row_group(group).column(index).statistics
            if statistics is None or not statistics.has_min_max:
                return None  # the rows must be read for it: the driver's way
            newest = max(newest, int(statistics.max))
    return FileFacts(schemas, rows, newest)


def conform(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """``batch`` with every column of ``schema`` (NULL where it lacks one), in its order."""
    import pyarrow as pa

    arrays = []
    for field in schema:
        if field.name in batch.column_names:
            column = batch.column(field.name)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(batch.num_rows, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_files(paths: Sequence[str], root: str, *, sort: bool) -> pa.Table:
    """The files as one change batch (``sort``: by binlog order, for many source tables)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    filesystem, _ = _filesystem(root)
    schema = read_schema(paths, root)
    parts = []
    for path in paths:
        try:
            parts.append(conform(pq.read_table(path, filesystem=filesystem), schema))
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(path, exc) from exc
    table = pa.concat_tables(parts)
    if sort and table.num_rows:
        table = table.sort_by([(name, "ascending") for name in cb.ORDER_COLUMNS])
    return table


def file_slices(paths: Sequence[str], root: str, rows: int) -> Iterator[pa.Table]:
    """The files' changes in order, as change batches of at most ``rows`` rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    filesystem, _ = _filesystem(root)
    schema = read_schema(paths, root)
    for path in paths:
        try:
            handle = filesystem.open_input_file(path)
            batches = pq.ParquetFile(handle).iter_batches(batch_size=rows)
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(path, exc) from exc
        with handle:
            for batch in batches:
                yield conform(pa.Table.from_batches([batch]), schema)


def key_moves(paths: Sequence[str], root: str) -> bool:
    """Whether any change in the files moved a key (a before-image column holds a value),
    read off the Parquet statistics (no row is read; unknown statistics count as a move)."""
    import pyarrow.parquet as pq

    filesystem, _ = _filesystem(root)
    for path in paths:
        metadata = pq.ParquetFile(path, filesystem=filesystem).metadata
        before = [index for index in range(metadata.num_columns)
                  if cb.is_before(metadata.schema.column(index).name)
                  or metadata.schema.column(index).name.startswith(cb.LEGACY_BEFORE_KEY)]
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in before:
                statistics = row_group.column(index).statistics
                if statistics is None or not statistics.has_null_count \
                        or statistics.null_count < row_group.num_rows:
                    return True
    return False


def key_slices(paths: Sequence[str], root: str, rows: int,
               bucket_of: Callable[[pa.Table], pa.Array]) -> Iterator[pa.Table]:
    """The files' changes as change batches split by key (``bucket_of`` numbers
    each row's bucket; every change of one key in one batch, in file order): read once in
    slices of ``rows``, spread into one local scratch Parquet file per bucket, then read back
    one bucket at a time, so memory holds a slice or a bucket, never the whole."""
    import tempfile

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = read_schema(paths, root)
    with tempfile.TemporaryDirectory(prefix="replicator-buckets-") as scratch:
        writers: dict[int, Any] = {}
        try:
            for batch in file_slices(paths, root, rows):
                ids = bucket_of(batch)
                for bucket in pc.unique(ids).to_pylist():
                    writer = writers.get(bucket)
                    if writer is None:
                        writer = writers[bucket] = pq.ParquetWriter(
                            f"{scratch}/{bucket}.parquet", schema)
                    writer.write_table(batch.filter(pc.equal(ids, bucket)))
        finally:
            for writer in writers.values():
                writer.close()
        for bucket in sorted(writers):
            yield pq.read_table(f"{scratch}/{bucket}.parquet")


def prune(root: str, retention_ms: int, keep: Iterable[str] = ()) -> int:
    """Remove task directories older than ``retention_ms`` (never those in ``keep``);
    how many were removed. Best effort: a file system that refuses is left as it is."""
    from pyarrow import fs

    filesystem, base = _filesystem(root)
    stream = f"{base.rstrip('/')}/{STREAM_DIR}"
    cutoff = time.time() - retention_ms / 1000
    kept = {path.rstrip("/") for path in keep}
    removed = 0
    try:
        epochs = filesystem.get_file_info(fs.FileSelector(stream, allow_not_found=True))
        for epoch in epochs:
            if epoch.type != fs.FileType.Directory:
                continue
            for task in filesystem.get_file_info(fs.FileSelector(epoch.path)):
                if task.type != fs.FileType.Directory or task.path.rstrip("/") in kept:
                    continue
                if task.mtime is not None and task.mtime.timestamp() < cutoff:
                    filesystem.delete_dir(task.path)
                    removed += 1
    except OSError:
        return removed
    return removed


__all__ = [
    "MANIFEST_COLUMNS",
    "MANIFEST_SCHEMA",
    "conform",
    "ddl_row",
    "file_facts",
    "file_order",
    "file_slices",
    "land_batch",
    "land_range",
    "landing_root",
    "manifest_batch",
    "prune",
    "read_files",
    "task_dir",
]
