"""``read_changes_fast``: ``read_changes`` with our own event loop and generated row decoders.

Same signature, same contract, same ``ChangeEvent``s (positions, row_index, ts_ms, gtid,
end_position, values and their types) and ``SchemaChange``s as ``source.binlog.read_changes``;
the differential tests compare the two on every MySQL type. What differs is the work per
event: the raw packets are read in large chunks (``stream``), the events the pipeline needs
are parsed from their bytes here (rotate, format description, GTID, MariaDB GTID, query,
table map, write/update/delete rows v1 and v2, XID), Table_maps come from a cache
(``tablemap``), and rows from decoders generated per table map (``codec``). Anything else is
skipped, as the library reader skips it, or decoded by the library (``library``, counted).

A transaction's rows are yielded only at its commit (every change carries the commit's time
and end position), so the reader keeps the transaction until then -- as the raw rows-event
packets, decoded only while the commit yields them: a 1M-row transaction costs about its
binlog bytes (~100 MB) here instead of a million decoded row dicts (~1.5 GB, measured).

Row images must be FULL (binlog_row_image=FULL): a MINIMAL or NOBLOB image leaves columns
out, which as NULLs would overwrite real values in the target, so it is a SourceError.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator

import replicator.source.fast.stream as fast_stream
import replicator.source.fast.tablemap as tablemap
from replicator.errors import SourceError, TransientSourceError
from replicator.model.changes import BinlogPosition, ChangeEvent, SchemaChange
from replicator.model.pipeline import MySQLSource
from replicator.model.selection import TableSelection, TableSelector, as_selector
from replicator.source.connection import classify_error, connection_settings
from replicator.source.fast.codec import decode_checked, library_checked
from replicator.source.fast.counters import TOTALS, FastDecodeCounters
from replicator.source.fast.library import Library
from replicator.source.positions import binlog_head
from replicator.source.transactions import (
    MARIADB_FL_STANDALONE,
    Commit,
    TransactionAssembler,
    partial_json_refused,
)
from replicator.source.values import ValueStats, ZeroDates

QUERY, ROTATE, FORMAT_DESCRIPTION, XID, TABLE_MAP = 2, 4, 15, 16, 19
WRITE_V1, UPDATE_V1, DELETE_V1, WRITE_V2, UPDATE_V2, DELETE_V2 = 23, 24, 25, 30, 31, 32
GTID, PARTIAL_UPDATE, MARIADB_GTID = 33, 39, 162
MARIADB_COMPRESSED = frozenset(range(166, 172))  # *_COMPRESSED_EVENT (log_bin_compress=ON)
_ROWS = frozenset({WRITE_V1, UPDATE_V1, DELETE_V1, WRITE_V2, UPDATE_V2, DELETE_V2,
                   PARTIAL_UPDATE})
_WRITES = frozenset({WRITE_V1, WRITE_V2})
_DELETES = frozenset({DELETE_V1, DELETE_V2})

# After the packet's OK byte: timestamp, type, server id, event size, next position, flags.
_HEADER = struct.Struct("<IBIIIH").unpack_from
_BODY = 20  # the OK byte + the 19-byte v4 event header
_GTID_MARIADB = struct.Struct("<QIB").unpack_from
_ROTATE = struct.Struct("<Q").unpack_from
_QUERY = struct.Struct("<IIBHH").unpack_from

_new = object.__new__


def _change_event(fields: dict) -> ChangeEvent:
    """A ChangeEvent without its generated ``__init__`` (frozen dataclasses set each field
    through ``object.__setattr__``: ~2 us per event, a third of the whole budget). The
    instance is the same as the constructor's; tests/unit/test_fastdecode_* check that
    ChangeEvent still has no __post_init__ or slots that this would skip."""
    event = _new(ChangeEvent)
    event.__dict__.update(fields)
    return event


def _minimal_image(table: str) -> SourceError:
    return SourceError(
        f"the binlog holds a partial row image for {table} (binlog_row_image is MINIMAL or "
        "NOBLOB): the columns it leaves out cannot be replicated",
        hint="set binlog_row_image=FULL on the server (SET GLOBAL binlog_row_image = 'FULL' "
        "and in my.cnf), then re-snapshot the tables changed since: "
        "`replicator run PIPELINE.yaml --snapshot always`",
    )


def read_changes_fast(
    source: MySQLSource,
    *,
    start: BinlogPosition,
    end: BinlogPosition | None,
    tables: TableSelector | Collection[str | TableSelection] | None,
    server_id: int,
    stats: ValueStats | None = None,
    counters: FastDecodeCounters | None = None,
    force_library: bool = False,
    rows: bool = True,
    pause_tolerance_s: int | None = None,
) -> Iterator[ChangeEvent | SchemaChange]:
    """``read_changes``, decoded by the fast path (same arguments, same events).

    ``counters`` (optional) receives what was decoded here and what went to the library; the
    process-wide ``counters.TOTALS`` always does. ``force_library``: decode every rows event
    with the library (the differential tests compare both ways of the same reader).
    """
    zero_dates = ZeroDates(source.zero_dates, stats)
    local = FastDecodeCounters()
    for item in transactions(source, start=start, end=end, tables=tables, server_id=server_id,
                             zero_dates=zero_dates, local=local, counters=counters,
                             force_library=force_library, rows=rows,
                             pause_tolerance_s=pause_tolerance_s):
        if isinstance(item, SchemaChange):
            yield item
            continue
        common = {"position": item.start, "ts_ms": item.ts_ms, "gtid": item.gtid,
                  "transaction_id": item.gtid or str(item.start), "end_position": item.end}
        row_index = 0
        for shape, op, packet, begin, stop in item.changes:
            if op is None:  # decoded by the library
                rows_of = packet
            else:
                rows_of = []
                codec = shape.codec
                decode = codec.inserts if op == "c" else codec.deletes if op == "d" \
                    else codec.updates
                decode_checked(decode, shape.name, item.start, packet, begin, stop, rows_of,
                               zero_dates)
                local.rows_fast += len(rows_of)
            # ChangeEvents without their generated __init__: see _change_event.
            for table_name, kind, before, after in rows_of:
                event = _new(ChangeEvent)
                fields = event.__dict__
                fields["table"] = table_name
                fields["op"] = kind
                fields.update(common)
                fields["row_index"] = row_index
                fields["before"] = before
                fields["after"] = after
                row_index += 1
                yield event


def transactions(
    source: MySQLSource,
    *,
    start: BinlogPosition,
    end: BinlogPosition | None,
    tables: TableSelector | Collection[str | TableSelection] | None,
    server_id: int,
    zero_dates: ZeroDates,
    local: FastDecodeCounters,
    counters: FastDecodeCounters | None = None,
    force_library: bool = False,
    rows: bool = True,
    pause_tolerance_s: int | None = None,
) -> Iterator[Commit | SchemaChange]:
    """The fast decoder's event loop for both fast consumers (ChangeEvents here, the columnar
    change batches of ``source.fast.columnar``): the commits and the schema changes between
    ``start`` and ``end``, in binlog order, assembled by ``source.transactions`` (the same
    state machine as the library reader's). One long function on purpose: the per-packet loop
    keeps its state in locals, where a call or an attribute per event costs measurable time
    (bench/run --only decode); what happens once per read or per transaction (opening the
    dump, a FORMAT_DESCRIPTION, a GTID, sorting a read error) is in helpers. A ``Commit``'s ``changes`` hold, per rows event,
    ``(shape, op, packet, begin, end)`` with op c/u/d: the rows between ``begin`` and ``end`` of
    ``packet`` (decode them with the shape's codec), or ``(shape, None, rows, 0, 0)``: rows the
    library decoded, as ``(table, op, before, after)`` tuples. ``local`` counts this read (added to
    ``counters`` and ``TOTALS`` at the end); consumers add the rows they decode."""
    import pymysql

    # Every test of a table name goes through the selector (exact names and `sources:`
    # patterns alike); `in` matches case-insensitively.
    wanted = as_selector(tables)

    if end is None:
        end = binlog_head(source)
    if start >= end:
        return

    stream = _open_stream(source, start, server_id, pause_tolerance_s)
    checksum = 4 if stream.use_checksum else 0
    library = Library(dbms=stream.dbms, use_checksum=stream.use_checksum)
    post_header = {TABLE_MAP: 8, QUERY: 13, WRITE_V1: 8, WRITE_V2: 10}
    rows_v1, rows_v2 = _BODY + 8, _BODY + 10  # where a rows event's body starts
    current: dict[int, tablemap.TableShape | None] = {}  # table id -> shape (None: filtered)
    maps: dict[bytes, tuple] = {}  # this reader's Table_maps: body -> (table id, shape/None)
    cached_shape = tablemap.cached_shape

    assembler = TransactionAssembler(start, end, wanted)

    try:
        for batch in stream.batches():
            for packet in batch:
                timestamp, kind, event_server, size, log_pos, _flags = _HEADER(packet, 1)
                if kind == TABLE_MAP:
                    body = packet[_BODY:len(packet) - checksum]
                    seen = maps.get(body)
                    if seen is None:
                        shape = cached_shape(body)
                        if shape is None:
                            table_id, name = tablemap.map_names(body, post_header[TABLE_MAP])
                            if wanted is not None and name.lower() not in wanted:
                                seen = maps[body] = (table_id, None)
                                current[table_id] = None
                                continue
                            shape = tablemap.parse_shape(body, packet, library)
                            local.table_maps_parsed += 1
                        keep = wanted is None or shape.name.lower() in wanted
                        seen = maps[body] = (shape.table_id, shape if keep else None)
                        if len(maps) > tablemap.MAX_SHAPES:
                            maps.clear()
                    else:
                        local.table_maps_cached += 1
                    current[seen[0]] = seen[1]
                    continue
                if kind in _ROWS:
                    if not rows:
                        continue  # schema changes only
                    shape = current.get(int.from_bytes(packet[_BODY:_BODY + 6], "little"))
                    if shape is None:
                        continue  # a table this reader does not want (or a map it never saw)
                    if assembler.tx_start is None:
                        raise assembler.not_a_boundary(shape.name)
                    if kind == PARTIAL_UPDATE:
                        raise partial_json_refused(shape.name)
                    codec = shape.codec
                    if codec is None or force_library:
                        reason = "forced"
                        by_library = library_checked(library.rows, shape.name,
                                                     assembler.tx_start, packet,
                                                     shape.library_table, shape.name, zero_dates)
                        assembler.changes.append((shape, None, by_library, 0, 0))
                        local.rows_library += len(by_library)
                        local.events_library += 1
                        local.fallback_reasons[
                            f"{shape.name}: {shape.fallback_reason or reason}"] += 1
                        continue
                    if kind < WRITE_V2:
                        pos = rows_v1
                    else:
                        pos = rows_v2
                        pos += (packet[_BODY + 8] | packet[_BODY + 9] << 8) - 2
                    columns = packet[pos]
                    if columns >= 251 or columns != shape.columns:
                        raise SourceError(
                            f"a rows event of {shape.name} has {columns} columns, its table map "
                            f"{shape.columns}", hint="report this binlog to the replicator project")
                    pos += 1
                    width = len(shape.full_bitmap)
                    if packet[pos:pos + width] != shape.full_bitmap:
                        raise _minimal_image(shape.name)
                    pos += width
                    # Decoded when the transaction commits (finish): see the module doc.
                    changes = assembler.changes
                    if kind in _WRITES:
                        changes.append((shape, "c", packet, pos, len(packet) - checksum))
                    elif kind in _DELETES:
                        changes.append((shape, "d", packet, pos, len(packet) - checksum))
                    else:
                        if packet[pos:pos + width] != shape.full_bitmap:
                            raise _minimal_image(shape.name)
                        changes.append((shape, "u", packet, pos + width,
                                        len(packet) - checksum))
                    continue
                if kind == XID:
                    yield from assembler.xid(log_pos, timestamp)
                    if assembler.done:
                        return
                    continue
                if kind in (MARIADB_GTID, GTID):
                    assembler.gtid(log_pos - size, *_gtid(packet, kind, event_server))
                    if assembler.done:
                        return
                    continue
                if kind == QUERY:
                    _thread, _seconds, schema_length, _error, status_length = _QUERY(packet, _BODY)
                    pos = _BODY + post_header[QUERY] + status_length
                    schema = packet[pos:pos + schema_length].decode()
                    query = packet[pos + schema_length + 1:len(packet) - checksum].decode(
                        "utf-8", errors="backslashreplace").strip()
                    yield from assembler.query(log_pos - size, log_pos, timestamp, schema, query)
                    if assembler.done:
                        return
                    continue
                if kind == ROTATE:
                    (next_pos,) = _ROTATE(packet, _BODY)
                    assembler.rotate(packet[_BODY + 8:len(packet) - checksum].decode(), next_pos,
                                     bool(log_pos and timestamp))
                    continue
                if kind == FORMAT_DESCRIPTION:
                    _format_description(library, packet, post_header)
                    rows_v1 = _BODY + post_header[WRITE_V1]
                    rows_v2 = _BODY + post_header[WRITE_V2]
                    continue
                if kind in MARIADB_COMPRESSED:
                    raise SourceError(
                        "the binlog holds compressed row events (MariaDB log_bin_compress=ON), "
                        "which replicator cannot decode",
                        hint="SET GLOBAL log_bin_compress = OFF (and in my.cnf), then re-snapshot",
                    )
    except SourceError:
        raise
    except (pymysql.err.MySQLError, OSError) as exc:
        raise _read_error(exc, source, server_id) from exc
    finally:
        stream.close()
        if counters is not None:
            counters.add(local)
        TOTALS.add(local)


def _gtid(packet: bytes, kind: int, event_server: int) -> tuple[str, bool]:
    """A GTID event's GTID as text, and ``TransactionAssembler.gtid``'s ``in_progress``:
    MariaDB's GTID not STANDALONE is the BEGIN; MySQL's is never (a Query BEGIN follows)."""
    if kind == MARIADB_GTID:
        sequence, domain, flags = _GTID_MARIADB(packet, _BODY)
        return f"{domain}-{event_server}-{sequence}", not flags & MARIADB_FL_STANDALONE
    sid = packet[_BODY + 1:_BODY + 17].hex()
    gno = int.from_bytes(packet[_BODY + 17:_BODY + 25], "little")
    return f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}:{gno}", False


def _format_description(library: Library, packet: bytes, post_header: dict[int, int]) -> None:
    """A FORMAT_DESCRIPTION event: the library learns the server's format, and
    ``post_header`` the lengths the server writes (where longer than the defaults)."""
    library.format_description(packet)
    lengths = library.post_header_lengths or ()
    for event_kind in post_header:
        if event_kind - 1 < len(lengths) and lengths[event_kind - 1]:
            post_header[event_kind] = max(post_header[event_kind], lengths[event_kind - 1])


def _open_stream(source: MySQLSource, start: BinlogPosition, server_id: int,
                 pause_tolerance_s: int | None) -> fast_stream.BinlogStream:
    """The binlog dump from ``start``, as ``source.fast.stream.BinlogStream`` reads it."""
    import pymysql

    settings = connection_settings(source)
    settings.pop("autocommit", None)
    try:
        return fast_stream.BinlogStream(settings, server_id=server_id, file=start.file,
                                        pos=start.pos, write_timeout_s=pause_tolerance_s)
    except (pymysql.err.MySQLError, OSError) as exc:
        raise classify_error(exc, source, doing="reading the binlog", server_id=server_id) from exc


def _read_error(exc: BaseException, source: MySQLSource, server_id: int) -> SourceError:
    """A driver or socket error while the dump is read, sorted; a dropped dump says its
    usual cause: a second reader with this server_id (the server drops the older one)."""
    error = classify_error(exc, source, doing="reading the binlog", server_id=server_id)
    if isinstance(error, TransientSourceError):
        error = TransientSourceError(
            f"lost the binlog connection to {source.host}:{source.port} while reading the "
            f"binlog (reader server_id {server_id}): {exc}",
            hint="replicator resumes from the last transaction boundary; if this repeats, "
            f"another binlog reader uses server_id {server_id} (the server drops the older "
            "of two readers with one server_id): give every pipeline its own "
            "source.mysql.server_id",
        )
    return error
