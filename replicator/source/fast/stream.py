"""The replication connection: PyMySQL connects and authenticates, we register as a replica
with COM_BINLOG_DUMP (as python-mysql-replication does for file/position resumption) and
then read the raw packets ourselves, in large chunks, instead of one ``MysqlPacket`` object
and two socket reads per event.

Framing (https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html):
3-byte little-endian length, 1-byte sequence id, payload; a payload of 0xFFFFFF bytes
continues in the next packet. A binlog packet's payload is 0x00 then one event; EOF (0xFE,
short) ends a non-blocking dump; 0xFF is an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from replicator.source.fast.payload import TRANSACTION_PAYLOAD, expand

COM_BINLOG_DUMP = 0x12
BINLOG_DUMP_NON_BLOCK = 0x01
_MAX_PACKET = 0xFFFFFF
_CHUNK = 1 << 18


class BinlogStream:
    """One non-blocking binlog dump from ``file:pos`` (the server sends up to its head, then
    EOF). ``use_checksum``: events end with a CRC32 the reader must skip."""

    def __init__(self, settings: dict[str, Any], *, server_id: int, file: str, pos: int,
                 write_timeout_s: int | None = None) -> None:
        import pymysql

        self.connection = pymysql.connect(**settings)
        self.dbms = "mariadb" if "mariadb" in str(self.connection.get_server_info()).lower() \
            else "mysql"
        with self.connection.cursor() as cursor:
            cursor.execute("SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'")
            row = cursor.fetchone()
            self.use_checksum = row is not None and str(row[1]).upper() != "NONE"
            if self.use_checksum:
                cursor.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            # MariaDB: a capability < 4 makes 10.6+ replace GTID events with dummies (the
            # library sets the same); MySQL ignores it.
            cursor.execute("SET @mariadb_slave_capability = 4")
            if write_timeout_s is not None:
                # The consumer pauses reading while it applies a big batch's slices; the
                # server's default 60 s write timeout would drop the dump. Only then: a
                # long timeout also delays the server's kill of a stalled dump thread, which
                # a new reader with the same server_id waits for.
                cursor.execute(f"SET SESSION net_write_timeout = {int(write_timeout_s)}")
        name = file.encode()
        command = (
            struct.pack("<i", len(name) + 11) + bytes([COM_BINLOG_DUMP])
            + struct.pack("<IHI", pos, BINLOG_DUMP_NON_BLOCK, server_id) + name
        )
        self.connection._write_bytes(command)
        self.connection._next_seq_id = 1

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:
            self.connection._force_close()

    def packets(self) -> Iterator[bytes]:
        """Payloads of the packets until the dump's EOF, one by one."""
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[bytes]]:
        """Payloads of the packets until the dump's EOF, in lists of what one socket read
        completed (the reader loops over a list instead of resuming a generator per event).
        Error packets raise the driver's error; a closed socket raises OperationalError 2013
        (as PyMySQL does)."""
        import pymysql

        read = self.connection._rfile.read1

        def fill(buf: bytes, pos: int, need: int) -> bytes:
            parts = [buf[pos:]]
            have = len(parts[0])
            while have < need:
                chunk = read(max(_CHUNK, need - have))
                if not chunk:
                    raise pymysql.err.OperationalError(
                        2013, "Lost connection to MySQL server during query")
                parts.append(chunk)
                have += len(chunk)
            return b"".join(parts)

        # MySQL 8 compressed transactions are unpacked here, so the reader sees plain events.
        tail = 4 if self.use_checksum else 0
        buf = b""
        pos = 0
        while True:
            batch: list[bytes] = []
            size = len(buf)
            while size - pos >= 4:  # every complete packet already in the buffer
                length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
                end = pos + 4 + length
                if end > size or length == _MAX_PACKET:
                    break
                payload = buf[pos + 4:end]
                pos = end
                if payload[0] == 0:
                    if payload[5] != TRANSACTION_PAYLOAD:
                        batch.append(payload)
                    else:
                        batch.extend(expand(payload, tail))
                    continue
                if batch:
                    yield batch
                    batch = []
                self._finish(payload)
                return
            if batch:
                yield batch
            if size - pos < 4:
                buf = fill(buf, pos, 4)
                pos = 0
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            if length != _MAX_PACKET:
                if pos + 4 + length > len(buf):
                    buf = fill(buf, pos, 4 + length)
                    pos = 0
                continue  # complete now: the loop above takes it
            # An event of 16 MiB or more: the protocol splits it; join the continuations.
            parts = []
            while True:
                if len(buf) - pos < 4:
                    buf = fill(buf, pos, 4)
                    pos = 0
                length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
                if pos + 4 + length > len(buf):
                    buf = fill(buf, pos, 4 + length)
                    pos = 0
                parts.append(buf[pos + 4:pos + 4 + length])
                pos += 4 + length
                if length != _MAX_PACKET:
                    break
            payload = b"".join(parts)
            if payload[0] == 0:
                yield [payload] if payload[5] != TRANSACTION_PAYLOAD else expand(payload, tail)
            else:
                self._finish(payload)
                return

    @staticmethod
    def _finish(payload: bytes) -> None:
        """A packet that is not an event: EOF ends the dump, an error packet raises."""
        import pymysql

        if payload[0] == 0xFE and len(payload) < 9:
            return
        if payload[0] == 0xFF:
            from pymysql.protocol import MysqlPacket

            MysqlPacket(payload, "utf8").raise_for_error()
        raise pymysql.err.OperationalError(2013, f"unexpected packet in the binlog dump: "
                                                 f"0x{payload[0]:02x}")
