"""MySQL 8 compressed transactions (binlog_transaction_compression=ON) and partial JSON rows
events, without a MySQL 8 server: real events captured from the throwaway MariaDB are
rewritten into MySQL 8's forms (as test_fastdecode_mysql_events does), then each transaction's
events after its GTID are packed into one zstd TRANSACTION_PAYLOAD_EVENT laid out as MySQL
writes it. The packets go through the real dump framing (``BinlogStream.batches``) and the
reader, and must decode to the rows the library reads from the uncompressed binlog."""

from __future__ import annotations

import io
import itertools
import struct
from types import SimpleNamespace

import pyarrow
import pytest

from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.source.binlog import read_changes
from replicator.source.connection import connection_settings
from replicator.source.fast import payload
from replicator.source.fast import reader as fast_reader
from replicator.source.fast import stream as fast_stream
from replicator.source.positions import current_position
from tests.integration.test_fastdecode_mysql_events import as_mysql

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(7901)
_REAL_STREAM = fast_stream.BinlogStream
_HEADER = struct.Struct("<IBIIIH")


def _packed(value: int) -> bytes:
    """A MySQL length-encoded integer (net_store_length)."""
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def _field(kind: int, value: int) -> bytes:
    encoded = _packed(value)
    return _packed(kind) + _packed(len(encoded)) + encoded


def payload_event(inner: list[bytes], template: bytes, tail: int, *,
                  compression: int = payload.ZSTD, extra_field: bool = False) -> bytes:
    """One TRANSACTION_PAYLOAD_EVENT packet holding ``inner`` (dump packets of one
    transaction): MySQL strips their checksums and zeroes their positions, compresses the
    concatenation with zstd and writes size, compression type and uncompressed size fields
    up to the end mark (libbinlogevents Transaction_payload_event::encode)."""
    events = []
    for packet in inner:
        timestamp, kind, server, _size, _log_pos, flags = _HEADER.unpack_from(packet, 1)
        body = packet[20:len(packet) - tail]
        events.append(_HEADER.pack(timestamp, kind, server, 19 + len(body), 0, flags) + body)
    data = b"".join(events)
    if compression == payload.ZSTD:
        compressed = pyarrow.Codec("zstd").compress(data, asbytes=True)
    else:
        compressed = data
    header = _field(1, len(compressed)) + _field(2, compression) + _field(3, len(data))
    if extra_field:  # a field a newer server might add: skipped by its length
        header = _field(9, 123456) + header
    body = header + b"\x00" + compressed
    timestamp, _kind, server, _size, _log_pos, flags = _HEADER.unpack_from(template, 1)
    return b"\x00" + _HEADER.pack(timestamp, payload.TRANSACTION_PAYLOAD, server,
                                  19 + len(body) + tail, 0, flags) + body + bytes(tail)


def compress_transactions(packets: list[bytes], tail: int, **options) -> list[bytes]:
    """MySQL-shaped packets -> each BEGIN..XID run packed into one payload event."""
    out: list[bytes] = []
    inner: list[bytes] | None = None
    for packet in packets:
        kind = packet[5]
        if kind == 2 and packet[20:len(packet) - tail].endswith(b"BEGIN"):
            inner = [packet]
            continue
        if inner is not None:
            inner.append(packet)
            if kind == 16:  # XID ends the transaction
                out.append(payload_event(inner, inner[0], tail, **options))
                inner = None
            continue
        out.append(packet)
    return out


def renumber(packets: list[bytes], start: BinlogPosition) -> tuple[list[bytes], list[int]]:
    """Give the events from ``start`` on the end positions they would have in a binlog
    written this way (the dump's artificial events before ``start`` keep theirs)."""
    out, ends = [], []
    cursor = start.pos
    for packet in packets:
        timestamp, kind, server, size, log_pos, flags = _HEADER.unpack_from(packet, 1)
        if log_pos > start.pos or kind == payload.TRANSACTION_PAYLOAD:
            cursor += size
            packet = packet[:1] + _HEADER.pack(timestamp, kind, server, size, cursor, flags) \
                + packet[20:]
        out.append(packet)
        ends.append(cursor)
    return out, ends


def replay(packets: list[bytes], use_checksum: bool) -> fast_stream.BinlogStream:
    """A BinlogStream whose socket replays ``packets`` (framed as the dump frames them, then
    EOF): the real framing and unpacking code runs on them."""
    framed = b"".join(len(p).to_bytes(3, "little") + bytes([(i + 1) % 256]) + p
                      for i, p in enumerate(packets)) + b"\x05\x00\x00\x00\xfe\x00\x00\x02\x00"
    stream = object.__new__(_REAL_STREAM)
    stream.connection = SimpleNamespace(_rfile=io.BufferedReader(io.BytesIO(framed)),
                                        close=lambda: None)
    stream.use_checksum = use_checksum
    stream.dbms = "mysql"
    return stream


def _captured(mariadb, mysql_source, db):
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), d DECIMAL(10,3), "
                       "j LONGTEXT)")
        start = current_position(mysql_source)
        cursor.execute("INSERT INTO t VALUES (1, 'a''b', 1.5, '{\"k\": [1, 2]}'), "
                       "(2, NULL, -2.25, NULL), (3, '😀', 0, '')")
        cursor.execute("UPDATE t SET v = REPEAT('x', 40), d = d + 1 WHERE id IN (1, 3)")
        cursor.execute("DELETE FROM t WHERE id = 2")
    end = current_position(mysql_source)
    expected = [e for e in read_changes(mysql_source, start=start, end=end, tables=[f"{db}.t"],
                                        server_id=next(_server_ids), fast=False)
                if isinstance(e, ChangeEvent)]
    settings = connection_settings(mysql_source)
    settings.pop("autocommit")
    live = fast_stream.BinlogStream(settings, server_id=next(_server_ids), file=start.file,
                                    pos=start.pos)
    try:
        packets = list(live.packets())
    finally:
        live.close()
    return start, expected, as_mysql(packets, live.use_checksum), live.use_checksum


def _read(monkeypatch, mysql_source, db, packets, use_checksum, start, end):
    monkeypatch.setattr(fast_stream, "BinlogStream",
                        lambda *args, **kwargs: replay(packets, use_checksum))
    return [e for e in fast_reader.read_changes_fast(
        mysql_source, start=start, end=end, tables=[f"{db}.t"], server_id=next(_server_ids))
        if isinstance(e, ChangeEvent)]


@pytest.mark.parametrize("extra_field", [False, True])
def test_compressed_transactions_decode_like_the_uncompressed_binlog(
    mariadb, mysql_source, fresh_database, monkeypatch, extra_field
):
    db = fresh_database
    start, expected, mysql_packets, use_checksum = _captured(mariadb, mysql_source, db)
    tail = 4 if use_checksum else 0
    compressed = compress_transactions(mysql_packets, tail, extra_field=extra_field)
    kinds = [p[5] for p in compressed]
    assert kinds.count(payload.TRANSACTION_PAYLOAD) >= 3  # insert, update, delete
    assert 30 not in kinds and 16 not in kinds  # every rows event and XID is inside one
    packets, ends = renumber(compressed, start)
    end = BinlogPosition(start.file, ends[-1])
    got = _read(monkeypatch, mysql_source, db, packets, use_checksum, start, end)
    assert [(e.op, e.row_index, e.before, e.after, e.ts_ms) for e in got] == [
        (e.op, e.row_index, e.before, e.after, e.ts_ms) for e in expected]
    # A transaction starts at its GTID event and ends after its payload event: the only
    # resumable boundaries of a compressed binlog.
    gtid_starts = {BinlogPosition(start.file, end_pos - _HEADER.unpack_from(p, 1)[3])
                   for p, end_pos in zip(packets, ends, strict=True) if p[5] == 33}
    payload_ends = {BinlogPosition(start.file, end_pos)
                    for p, end_pos in zip(packets, ends, strict=True)
                    if p[5] == payload.TRANSACTION_PAYLOAD}
    assert {e.position for e in got} <= gtid_starts and len({e.position for e in got}) == 3
    assert {e.end_position for e in got} <= payload_ends
    assert got[-1].end_position == end


def test_resuming_after_a_compressed_transaction_reads_only_the_next_ones(
    mariadb, mysql_source, fresh_database, monkeypatch
):
    db = fresh_database
    start, expected, mysql_packets, use_checksum = _captured(mariadb, mysql_source, db)
    tail = 4 if use_checksum else 0
    packets, ends = renumber(compress_transactions(mysql_packets, tail), start)
    end = BinlogPosition(start.file, ends[-1])
    first = _read(monkeypatch, mysql_source, db, packets, use_checksum, start, end)
    boundary = first[0].end_position  # after the INSERT's payload event
    index = ends.index(boundary.pos)
    rest = packets[:2] + packets[index + 1:]  # the dump's rotate + format description, then on
    got = _read(monkeypatch, mysql_source, db, rest, use_checksum, boundary, end)
    assert [(e.op, e.after) for e in got] == [(e.op, e.after) for e in expected if e.op != "c"]


def test_a_corrupt_or_unknown_payload_is_refused_with_the_setting(
    mariadb, mysql_source, fresh_database, monkeypatch
):
    db = fresh_database
    start, _expected, mysql_packets, use_checksum = _captured(mariadb, mysql_source, db)
    tail = 4 if use_checksum else 0
    packets, ends = renumber(compress_transactions(mysql_packets, tail), start)
    end = BinlogPosition(start.file, ends[-1])
    index = next(i for i, p in enumerate(packets) if p[5] == payload.TRANSACTION_PAYLOAD)
    body_end = len(packets[index]) - tail
    broken = list(packets)
    # Flip bytes inside the zstd frame (past its 4-byte magic and frame header).
    broken[index] = packets[index][:body_end - 6] + b"\xff\xff\xff" + packets[index][body_end - 3:]
    with pytest.raises(SourceError) as excinfo:
        _read(monkeypatch, mysql_source, db, broken, use_checksum, start, end)
    assert "compressed transaction" in str(excinfo.value)
    assert "binlog_transaction_compression = OFF" in excinfo.value.hint

    unknown = compress_transactions(mysql_packets, tail, compression=7)
    unknown, ends = renumber(unknown, start)
    with pytest.raises(SourceError, match="compression type 7"):
        _read(monkeypatch, mysql_source, db, unknown, use_checksum, start,
              BinlogPosition(start.file, ends[-1]))


def test_uncompressed_payload_type_none_is_read(mariadb, mysql_source, fresh_database,
                                                monkeypatch):
    db = fresh_database
    start, expected, mysql_packets, use_checksum = _captured(mariadb, mysql_source, db)
    tail = 4 if use_checksum else 0
    packets, ends = renumber(
        compress_transactions(mysql_packets, tail, compression=payload.NO_COMPRESSION), start)
    got = _read(monkeypatch, mysql_source, db, packets, use_checksum, start,
                BinlogPosition(start.file, ends[-1]))
    assert [(e.op, e.after) for e in got] == [(e.op, e.after) for e in expected]


def test_partial_json_rows_events_are_refused_naming_the_setting(
    mariadb, mysql_source, fresh_database, monkeypatch
):
    """binlog_row_value_options=PARTIAL_JSON makes MySQL log a JSON update as
    PARTIAL_UPDATE_ROWS_EVENT (type 39, the rows v2 layout plus diffs): refused before any row
    of it is read, compressed or not."""
    db = fresh_database
    start, _expected, mysql_packets, use_checksum = _captured(mariadb, mysql_source, db)
    tail = 4 if use_checksum else 0
    partial = [p[:5] + b"\x27" + p[6:] if p[5] == 31 else p for p in mysql_packets]
    assert 39 in {p[5] for p in partial}
    for packets in (partial, compress_transactions(partial, tail)):
        renumbered, ends = renumber(packets, start)
        with pytest.raises(SourceError) as excinfo:
            _read(monkeypatch, mysql_source, db, renumbered, use_checksum, start,
                  BinlogPosition(start.file, ends[-1]))
        assert f"partial JSON update of {db}.t" in str(excinfo.value)
        assert "binlog_row_value_options = ''" in excinfo.value.hint
