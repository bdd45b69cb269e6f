"""``read_change_batches``: the binlog decoded straight into change batches (Arrow columns).

The same transactions, positions and values as ``read_changes_fast`` (one state machine:
``reader.transactions``), but each table's rows go into per-column Python lists through
decoders generated per Table_map (``codec.compile_columnar``: one ``append`` per value, no
dict, tuple or ``ChangeEvent`` per row) -- or, when the compiled decoder is built, straight
into Arrow buffers (``native``: the same values, the Python decoder its reference) -- and
leave as Arrow tables in the layout of ``model.change_batch``, typed by
``source.arrow_types.binlog_arrow_type``:

- the row image (after-image; the before-image of a delete), one column per source column;
- the internal columns (op, file, file_seq, pos, row_index, ts_ms, gtid, transaction_id,
  table), filled per rows event and transaction, not per value;
- ``before_column(c)`` per source column: the whole row before an update that changed the
  key, NULL on every other row (sparse: the decoder keeps only the moved rows' images, and
  the chunk builds each before column with one ``take`` over them, or as all-NULL).

A table's rows leave as a ``TableChunk`` once it holds ``chunk_rows`` rows (checked after each
rows event: a big transaction spills while it is decoded, and the reader never holds more than
that plus one rows event's decoded rows of a table),
when its Table_map changes shape (columns added mid-stream start a new chunk with the new
schema: older chunks simply lack the column, NULL for their rows), and at the end.
"""

from __future__ import annotations

import array
import datetime as dt
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import replicator.source.fast.native as native
from replicator.errors import SourceError
from replicator.model import change_batch as cb
from replicator.model.changes import BinlogPosition, SchemaChange
from replicator.model.pipeline import MySQLSource
from replicator.model.selection import TableSelection, TableSelector
from replicator.source.arrow_types import binlog_arrow_type, internal_fields, time_text
from replicator.source.fast.codec import TIME2, ColumnarCodec, compile_columnar, decode_checked
from replicator.source.fast.counters import FastDecodeCounters
from replicator.source.fast.reader import Commit, transactions
from replicator.source.values import ValueStats, ZeroDates

if TYPE_CHECKING:
    import pyarrow as pa

# Rows of one table per chunk: ~10-50 MB of Python lists for the bench's rows, and big
# enough that a Parquet row group and the driver's per-file work stay cheap.
CHUNK_ROWS = 100_000

# The compiled decoder's string columns are Arrow buffers with int32 offsets: a table's chunk
# closes once one of them holds this many bytes, a rows event (<= 1 GiB, the server's packet
# limit) short of the 2 GiB they can address. The Python lists of the reference decoder have
# no such limit (pa.array splits them).
SPILL_BYTES = 1 << 30

KeyLookup = Mapping[str, Sequence[str]]


@dataclass
class TableChunk:
    """Consecutive changes of one table (binlog order) as one change-batch Arrow table."""

    table: str  # "db.table" as the binlog spells it
    data: pa.Table
    first: BinlogPosition  # start of the first row's transaction
    last: BinlogPosition  # start of the last row's transaction
    end: BinlogPosition  # the boundary after the last row's transaction
    fingerprint: str  # the column names and types: equal for chunks that concatenate


class KeyColumns:
    """Which columns a table's before-key columns hold: the keys the pipeline declared for
    the table (by exact name, then by ``sources:`` selection), else its primary key as the
    Table_map says (binlog_row_metadata=FULL)."""

    def __init__(self, exact: KeyLookup, selections: Sequence[tuple[TableSelection, Sequence[str]]]
                 = ()) -> None:
        self.exact = {name.lower(): list(keys) for name, keys in exact.items()}
        self.selections = list(selections)

    def of(self, table: str, columns: Sequence[Any]) -> list[str]:
        wanted = list(self.exact.get(table.lower(), []))
        for selection, keys in self.selections:
            if selection.matches(table):
                wanted += [k for k in keys if k not in wanted]
        names = {column.name.lower(): column.name for column in columns}
        found = [names[k.lower()] for k in wanted if k.lower() in names]
        if not found:
            found = [column.name for column in columns if getattr(column, "is_primary", False)]
        return list(dict.fromkeys(found))


class _CommitCells(NamedTuple):
    """The internal cells every change of one commit shares (``add_segment``)."""

    file: str
    sequence: int
    pos: int
    ts_ms: int
    gtid: str | None
    transaction_id: str


def commit_cells(commit: Commit) -> _CommitCells:
    """Once per commit, not per rows event: ``sequence`` parses the file name."""
    start = commit.start
    return _CommitCells(start.file, start.sequence, start.pos, commit.ts_ms, commit.gtid,
                        commit.gtid or str(start))


_OPS = ("c", "u", "d")
_OP_CODES = {op: code for code, op in enumerate(_OPS)}


class _TableColumns:
    """The column lists of one table shape, filled until the next chunk."""

    def __init__(self, shape: Any, keys: Sequence[str], compiled: bool) -> None:
        columns = shape.library_table.columns
        self.compiled = compiled  # image columns in the compiled decoder's Arrow buffers
        self.table = shape.name
        self.table_key = shape.name.lower()  # its key in ``_Builders.current``
        self.names = [column.name for column in columns]
        self.types = [binlog_arrow_type(column) for column in columns]
        self.keys = list(keys)
        index = {name: position for position, name in enumerate(self.names)}
        self.key_indexes = [index[k] for k in self.keys]
        self.fingerprint = "|".join(f"{n}:{t}" for n, t in zip(self.names, self.types, strict=True))
        self._reset()

    def _reset(self) -> None:
        # What a decoder fills: the compiled decoder's buffers, or a list per column (the
        # reference decoder's ``appends``); ``appends`` take a library row's values either way.
        self.buffers = native.NativeColumns(self.types) if self.compiled else None
        self.values: list[list[Any]] = [[] for _ in self.names]
        self.appends = self.buffers.appends if self.buffers is not None else \
            [values.append for values in self.values]
        self.target = self.buffers.buffers if self.buffers is not None else self.appends
        # The key-changing updates: their row in the chunk and their whole before-image.
        self.moved_rows: list[int] = []
        self.moved_images: list[tuple[Any, ...]] = []
        # The internal columns, one entry per rows event (expanded per row by the chunk):
        # the event's commit in ``commits``, its op (``_OPS``), rows and first row_index.
        self.commits: list[_CommitCells] = []
        self.segment_commit = array.array("q")
        self.segment_op = array.array("q")
        self.segment_rows = array.array("q")
        self.segment_row_index = array.array("q")
        self.rows = 0
        self.first: BinlogPosition | None = None
        self.last: BinlogPosition | None = None
        self.end: BinlogPosition | None = None

    def add_segment(self, commit: Commit, internal: _CommitCells, op: str, rows: int,
                    row_index: int) -> None:
        """The internal columns of ``rows`` changes of one rows event (one op, one commit;
        ``internal``: the commit's own cells, ``commit_cells``)."""
        if not rows:
            return
        commits = self.commits
        if not commits or commits[-1] is not internal:  # this commit's first rows here
            commits.append(internal)
            if self.first is None:
                self.first = commit.start
            self.last, self.end = commit.start, commit.end
        self.segment_commit.append(len(commits) - 1)
        self.segment_op.append(_OP_CODES[op])
        self.segment_rows.append(rows)
        self.segment_row_index.append(row_index)
        self.rows += rows

    def moved(self, row: int, image: tuple[Any, ...]) -> None:
        """The ``moved`` callback of a columnar decoder: ``row`` counts from the decoder
        call's first row, which is ``self.rows`` until ``add_segment`` of the call's rows."""
        self.moved_rows.append(self.rows + row)
        self.moved_images.append(image)

    def _cells(self, image: Mapping[str, Any], time_fsp: Sequence[int]) -> list[Any]:
        out = []
        for position, name in enumerate(self.names):
            value = image.get(name)
            if isinstance(value, dt.timedelta):
                value = time_text(value, max(time_fsp[position], 0))
            out.append(value)
        return out

    def add_library_rows(self, rows: Sequence[tuple[str, str, Any, Any]],
                         time_fsp: Sequence[int]) -> None:
        """Rows the library decoded (a type the generated decoders leave to it), one by one.
        Called before ``add_segment`` of the same rows (``self.rows`` is their first row).
        ``time_fsp``: the TIME columns' fsp in the rows' own Table_map."""
        for index, (_table, op, before, after) in enumerate(rows):
            for position, value in enumerate(self._cells(before if op == "d" else after,
                                                         time_fsp)):
                try:
                    self.appends[position](value)
                except (TypeError, ValueError, OverflowError) as exc:  # compiled buffers
                    raise _unfit(self.table, self.names[position], self.types[position],
                                 exc) from exc
            if op == "u" and self.keys and any(before.get(k) != after.get(k) for k in self.keys):
                self.moved_rows.append(self.rows + index)
                self.moved_images.append(tuple(self._cells(before, time_fsp)))

    def chunk(self) -> TableChunk:
        import pyarrow as pa

        assert self.first is not None and self.last is not None and self.end is not None
        if self.buffers is not None:
            arrays = self.buffers.arrays(
                lambda values, kind, index: _array(values, kind, self.table, self.names[index]))
        else:
            arrays = [_array(values, kind, self.table, name)
                      for name, kind, values in zip(self.names, self.types, self.values,
                                                    strict=True)]
        fields = [pa.field(name, kind) for name, kind in zip(self.names, self.types, strict=True)]
        internal = self._internal_arrays()
        for field in internal_fields():
            arrays.append(internal[field.name])
            fields.append(field)
        arrays += self._before_arrays()
        fields += [pa.field(cb.before_column(name), kind)
                   for name, kind in zip(self.names, self.types, strict=True)]
        data = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
        found = TableChunk(self.table, data, self.first, self.last, self.end, self.fingerprint)
        self._reset()
        return found


    def _internal_arrays(self) -> dict[str, pa.Array]:
        """The internal columns per row from the rows events' segments: a ``take`` from the
        chunk's commits (a few hundred values) instead of Python lists of a value per row."""
        import numpy as np
        import pyarrow as pa

        def column(segments: array.array) -> np.ndarray:
            return np.frombuffer(segments, dtype=np.int64)

        commit, op, row_index = (column(self.segment_commit), column(self.segment_op),
                                 column(self.segment_row_index))
        if len(commit) != self.rows:  # rows events of several rows: one entry per row
            count = column(self.segment_rows)
            segment = np.repeat(np.arange(len(count)), count)
            commit, op = commit[segment], op[segment]
            row_index = row_index[segment] + np.arange(self.rows) - (np.cumsum(count)
                                                                     - count)[segment]
        rows = pa.array(commit)
        file, sequence, pos, ts_ms, gtid, transaction_id = (
            pa.array(values, type=kind).take(rows) for values, kind in zip(
                zip(*self.commits, strict=True),
                (pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.string(), pa.string()),
                strict=True))
        return {cb.OP: pa.array(_OPS).take(pa.array(op)), cb.FILE: file, cb.FILE_SEQ: sequence,
                cb.POS: pos, cb.ROW_INDEX: pa.array(row_index), cb.TS_MS: ts_ms, cb.GTID: gtid,
                cb.TRANSACTION_ID: transaction_id,
                cb.TABLE: pa.repeat(pa.scalar(self.table, pa.string()), self.rows)}

    def _before_arrays(self) -> list[pa.Array]:
        """The sparse before-image columns: all NULL, or the moved rows' images put in place
        by one ``take`` per column (a NULL index gives a NULL)."""
        import numpy as np
        import pyarrow as pa

        if not self.moved_rows:
            return [pa.nulls(self.rows, kind) for kind in self.types]
        index = np.full(self.rows, -1, dtype=np.int64)
        index[np.asarray(self.moved_rows, dtype=np.int64)] = np.arange(len(self.moved_rows))
        take = pa.array(index, mask=index < 0)
        columns = list(zip(*self.moved_images, strict=True))
        return [_array(list(values), kind, self.table, name).take(take)
                for name, kind, values in zip(self.names, self.types, columns, strict=True)]


def _array(values: list[Any], kind: pa.DataType, table: str, column: str) -> pa.Array:
    import pyarrow as pa

    try:
        return pa.array(values, type=kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise _unfit(table, column, kind, exc) from exc


def _unfit(table: str, column: str, kind: pa.DataType, exc: Exception) -> SourceError:
    return SourceError(
        f"{table}.{column}: a binlog value does not fit the column's change-batch type "
        f"{kind}: {exc}",
        hint="report this binlog to the replicator project (the column's type and a "
        "sample value help)",
    )


def read_change_batches(
    source: MySQLSource,
    *,
    start: BinlogPosition,
    end: BinlogPosition | None,
    tables: TableSelector | Collection[str | TableSelection] | None,
    server_id: int,
    keys: KeyColumns | None = None,
    stats: ValueStats | None = None,
    counters: FastDecodeCounters | None = None,
    chunk_rows: int = CHUNK_ROWS,
    force_library: bool | None = None,
) -> Iterator[TableChunk | SchemaChange]:
    """The changes of ``read_changes`` (same arguments), as change-batch chunks per table
    plus the schema changes, in binlog order per table (see the module doc).
    ``force_library``: every rows event decoded by python-mysql-replication; None: only when
    the environment sets REPLICATOR_FAST_DECODE=0 (the escape hatch ``read_changes`` has)."""
    if force_library is None:
        force_library = os.environ.get("REPLICATOR_FAST_DECODE", "1").strip().lower() in (
            "0", "false", "no", "off")
    zero_dates = ZeroDates(source.zero_dates, stats)
    local = FastDecodeCounters()
    keys = keys or KeyColumns({})
    builders = _Builders(keys, force_library, native.enabled())

    for item in transactions(source, start=start, end=end, tables=tables, server_id=server_id,
                             zero_dates=zero_dates, local=local, counters=counters,
                             force_library=force_library):
        if isinstance(item, SchemaChange):
            yield item
            continue
        row_index = 0
        internal = commit_cells(item)
        for shape, op, packet, begin, stop in item.changes:
            builder, (codec, fsp), closed = builders.of(shape)
            if closed is not None:
                yield closed
            if op is None:  # decoded by the library (counted by the state machine)
                builder.add_library_rows(packet, fsp)
                for kind, count in _op_runs(packet):
                    builder.add_segment(item, internal, kind, count, row_index)
                    row_index += count
            else:
                assert codec is not None  # a shape with a dict codec compiles a columnar one
                decode = codec.inserts if op == "c" else codec.deletes if op == "d" \
                    else codec.updates
                _, count = decode_checked(decode, shape.name, item.start, packet, begin, stop,
                                          builder.target, builder.moved, zero_dates)
                local.rows_fast += count
                builder.add_segment(item, internal, op, count, row_index)
                row_index += count
            if builder.rows >= chunk_rows or (builder.buffers is not None
                                              and builder.buffers.largest >= SPILL_BYTES):
                yield builder.chunk()
    for builder in builders.current.values():
        if builder.rows:
            yield builder.chunk()


class _Builders:
    """The column builder of each table's current shape (``read_change_batches``), and the
    columnar decoder of every Table_map shape seen.

    Two shapes with one fingerprint (names and change-batch types) share a builder, since
    their rows concatenate; they never share a decoder: VARCHAR(40) and VARCHAR(80) in
    utf8mb4 are both strings, but the second has a two-byte length prefix (issue 29), so
    every rows event is decoded with the codec of the Table_map that precedes it. Nor the
    TIME columns' fsp, by which the library's rows are printed: TIME(0) and TIME(5) are both
    text, and 00:00:00.00001 printed with the first's fsp would lose its digits."""

    def __init__(self, keys: KeyColumns, force_library: bool, compiled: bool) -> None:
        self.keys = keys
        self.force_library = force_library
        self.compiled = compiled  # the compiled decoder (``source.fast.native``)
        self.current: dict[str, _TableColumns] = {}  # lower-case table -> its current columns
        # TableShape (identity) -> its builder and the shape's own decoders
        self.by_shape: dict[Any, tuple[_TableColumns, ShapeDecoders]] = {}

    def of(self, shape: Any) -> tuple[_TableColumns, ShapeDecoders, TableChunk | None]:
        """The builder of ``shape``'s rows, the shape's decoders, and the chunk a change of
        shape closed."""
        builders, by_shape = self.current, self.by_shape
        found = by_shape.get(shape)
        if found is not None and builders.get(found[0].table_key) is found[0]:
            return found[0], found[1], None
        columns = shape.library_table.columns
        key_names = self.keys.of(shape.name, columns)
        codec: Any = None
        probe = _TableColumns(shape, key_names, self.compiled)
        if shape.codec is not None and not self.force_library:
            names = [column.name for column in columns]
            key_indexes = [names.index(k) for k in key_names]
            compiled = compile_columnar(columns, shape.name, key_indexes)
            codec = compiled if isinstance(compiled, ColumnarCodec) else None
            if codec is not None and self.compiled:
                # The same rows into the builder's Arrow buffers (None: the library's rows).
                codec = native.shape_decoder(columns, shape.name, probe.types, key_indexes,
                                             codec.before_image)
        decoders = ShapeDecoders(codec, time_fsp(columns))
        current = builders.get(shape.name.lower())
        if current is not None and current.fingerprint == probe.fingerprint \
                and current.keys == probe.keys:
            by_shape[shape] = (current, decoders)
            return current, decoders, None
        closed = current.chunk() if current is not None and current.rows else None
        builders[shape.name.lower()] = probe
        by_shape[shape] = (probe, decoders)
        return probe, decoders, closed


class ShapeDecoders(NamedTuple):
    """How the rows events of one Table_map shape become column values."""

    # The generated Python codec, the compiled one (same methods), or None: the library.
    codec: Any
    time_fsp: tuple[int, ...]  # per column, for the library's rows: TIME's fsp, else -1


def time_fsp(columns: Sequence[Any]) -> tuple[int, ...]:
    """Each Table_map column's TIME fsp (-1: not a TIME)."""
    return tuple(int(column.fsp or 0) if column.type in (TIME2, 11) else -1
                 for column in columns)


def _op_runs(rows: Sequence[tuple[str, str, Any, Any]]) -> Iterator[tuple[str, int]]:
    """(op, count) of consecutive rows with one op (library rows carry their op each)."""
    run_op: str | None = None
    count = 0
    for _table, op, _before, _after in rows:
        if op == run_op:
            count += 1
            continue
        if run_op is not None:
            yield run_op, count
        run_op, count = op, 1
    if run_op is not None:
        yield run_op, count


__all__ = ["CHUNK_ROWS", "KeyColumns", "TableChunk", "read_change_batches"]
