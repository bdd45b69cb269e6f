"""MySQL 8's event shapes through the fast path, without a MySQL 8 server: packets captured
from MariaDB are rewritten into MySQL's forms (GTID_LOG_EVENT + Query BEGIN instead of
MariaDB's GTID, rows events v2 instead of v1) and must decode to the same rows; and an event
larger than one 16 MiB protocol packet is reassembled."""

from __future__ import annotations

import itertools
import struct

import pytest

from replicator.model.changes import ChangeEvent
from replicator.source.binlog import read_changes
from replicator.source.connection import connection_settings
from replicator.source.fast import reader as fast_reader
from replicator.source.fast import stream as fast_stream
from replicator.source.positions import current_position

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(7801)
SID = bytes(range(16))


def _event(header: tuple, body: bytes, checksum: bytes) -> bytes:
    timestamp, kind, server, _size, log_pos, flags = header
    size = 19 + len(body) + len(checksum)
    return b"\x00" + struct.pack("<IBIIIH", timestamp, kind, server, size, log_pos, flags) \
        + body + checksum


def as_mysql(packets: list[bytes], use_checksum: bool) -> list[bytes]:
    """MariaDB GTID -> MySQL GTID + Query BEGIN; rows v1 -> rows v2 (extra data length 2)."""
    tail = 4 if use_checksum else 0
    out = []
    for packet in packets:
        header = struct.unpack_from("<IBIIIH", packet, 1)
        kind = header[1]
        body = packet[20:len(packet) - tail]
        checksum = packet[len(packet) - tail:]
        if kind == 162:  # MariaDB GTID: seq_no(8) domain(4) flags(1) -> MySQL GTID
            sequence = struct.unpack_from("<Q", body)[0]
            gtid = b"\x00" + SID + struct.pack("<Q", sequence) + b"\x02" + bytes(16)
            out.append(_event((*header[:1], 33, *header[2:]), gtid, checksum))
            begin = struct.pack("<IIBHH", 1, 0, 0, 0, 0) + b"\x00" + b"BEGIN"
            out.append(_event((*header[:1], 2, *header[2:]), begin, checksum))
        elif kind in (23, 24, 25):
            body = body[:8] + struct.pack("<H", 2) + body[8:]
            out.append(_event((*header[:1], kind + 7, *header[2:]), body, checksum))
        else:
            out.append(packet)
    return out


class _Replay:
    def __init__(self, packets: list[bytes], template: fast_stream.BinlogStream) -> None:
        self._packets = packets
        self.dbms = "mysql"
        self.use_checksum = template.use_checksum

    def batches(self):
        yield list(self._packets)

    def close(self) -> None:
        pass


def test_mysql_gtid_and_v2_rows_events_decode_like_mariadb_v1(
    mariadb, mysql_source, fresh_database, monkeypatch
):
    db = fresh_database
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,3))")
        start = current_position(mysql_source)
        cursor.execute("INSERT INTO t VALUES (1, 'a', 1.5), (2, NULL, -2.25)")
        cursor.execute("UPDATE t SET v = 'b' WHERE id = 1")
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
    rewritten = as_mysql(packets, live.use_checksum)
    assert {struct.unpack_from("<B", p, 5)[0] for p in rewritten} >= {2, 30, 31, 32, 33}
    monkeypatch.setattr(fast_stream, "BinlogStream",
                        lambda *args, **kwargs: _Replay(rewritten, live))
    got = [e for e in fast_reader.read_changes_fast(
        mysql_source, start=start, end=end, tables=[f"{db}.t"], server_id=next(_server_ids))
        if isinstance(e, ChangeEvent)]
    assert [(e.op, e.row_index, e.before, e.after, e.ts_ms) for e in got] == [
        (e.op, e.row_index, e.before, e.after, e.ts_ms) for e in expected]
    uuid = "00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert all(e.gtid.startswith(uuid + ":") and e.transaction_id == e.gtid for e in got)
    assert len({e.gtid for e in got}) == 3


def test_an_event_larger_than_one_protocol_packet(mariadb, mysql_source, fresh_database):
    db = fresh_database
    big = 17 * 1024 * 1024  # > 16 MiB - 1: the dump splits the event over two packets
    with mariadb.root_connection() as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@global.max_allowed_packet")
        (allowed,) = cursor.fetchone()
        if allowed < 64 * 1024 * 1024:
            cursor.execute("SET GLOBAL max_allowed_packet = 67108864")
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB)")
        start = current_position(mysql_source)
        cursor.execute("INSERT INTO blobs VALUES (1, REPEAT(x'5a', %s)), (2, x'01')", [big])
    events = [e for e in fast_reader.read_changes_fast(
        mysql_source, start=start, end=None, tables=[f"{db}.blobs"],
        server_id=next(_server_ids)) if isinstance(e, ChangeEvent)]
    assert [e.after["id"] for e in events] == [1, 2]
    assert events[0].after["b"] == b"Z" * big and events[1].after["b"] == b"\x01"
