"""MySQL 8 compressed transactions: a ``TRANSACTION_PAYLOAD_EVENT`` (type 40) unpacked into
the events it carries, as packets of the dump, so the reader sees them as if the server had
written them uncompressed.

``binlog_transaction_compression=ON`` (MySQL 8.0.20+) writes each DML transaction as its GTID
event, then one payload event whose body is a few header fields and a zstd frame holding the
transaction's own events (BEGIN, Table_maps, rows events, XID). Layout
(https://dev.mysql.com/doc/dev/mysql-server/latest/classmysql_1_1binlog_1_1event_1_1Transaction__payload__event.html):
fields ``type, length, value`` as packed integers (1 = compressed size, 2 = compression type,
3 = uncompressed size) up to a type-0 end mark, then the compressed bytes. The inner events
carry no CRC32 (the payload event's own checksum covers them), and the server gives them no
position of their own: the only resumable boundary is the end of the payload event.

Decompressed with pyarrow's zstd codec (pyarrow is already in the ``mysql`` extra; no new
dependency), which needs the uncompressed size the header always carries.
"""

from __future__ import annotations

import struct

from replicator.errors import SourceError

TRANSACTION_PAYLOAD = 40
_END_MARK, _SIZE, _COMPRESSION, _UNCOMPRESSED = 0, 1, 2, 3
ZSTD, NO_COMPRESSION = 0, 255
_BODY = 20  # the dump's OK byte + the 19-byte v4 event header
_HEADER = struct.Struct("<IBIIIH")
# A payload larger than this uncompressed is refused rather than allocated (MySQL's own
# limit for one transaction's events is max_binlog_cache_size; 4 GiB is its uint32 sizes).
MAX_UNCOMPRESSED = 1 << 32


def _packed_int(data: bytes, pos: int) -> tuple[int, int]:
    """A MySQL length-encoded integer at ``pos`` -> (value, position after it)."""
    first = data[pos]
    if first < 251:
        return first, pos + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None:
        raise _corrupt(f"a packed integer starts with 0x{first:02x}")
    return int.from_bytes(data[pos + 1:pos + 1 + width], "little"), pos + 1 + width


def _corrupt(detail: str) -> SourceError:
    return SourceError(
        f"a compressed transaction (TRANSACTION_PAYLOAD_EVENT) in the binlog cannot be read: "
        f"{detail}",
        hint="report this binlog to the replicator project; until then "
        "SET GLOBAL binlog_transaction_compression = OFF (and in my.cnf) makes the server "
        "write new transactions uncompressed",
    )


def expand(packet: bytes, checksum: int) -> list[bytes]:
    """The events inside one payload event packet, each as a dump packet (OK byte, v4 header,
    body, and ``checksum`` placeholder bytes where the reader expects a CRC32).

    Positions: every inner event but the last ends, by its header, where the payload event
    starts plus its own size (so a BEGIN inside starts the transaction at the payload event);
    the last one (XID or COMMIT) ends where the payload event ends, the next boundary."""
    import pyarrow

    _timestamp, _kind, _server, size, log_pos, _flags = _HEADER.unpack_from(packet, 1)
    end = len(packet) - checksum
    fields: dict[int, int] = {}
    pos = _BODY
    try:
        while True:
            field, pos = _packed_int(packet, pos)
            if field == _END_MARK:
                break
            length, pos = _packed_int(packet, pos)
            if field in (_SIZE, _COMPRESSION, _UNCOMPRESSED):
                fields[field], _ = _packed_int(packet, pos)
            pos += length  # unknown fields (a newer server) are skipped by their length
            if pos >= end:
                raise _corrupt("the header has no end mark")
    except IndexError:
        raise _corrupt("the header is cut short") from None
    compressed = packet[pos:end]
    if _SIZE in fields and fields[_SIZE] != len(compressed):
        raise _corrupt(f"the header says {fields[_SIZE]} compressed bytes, the event holds "
                       f"{len(compressed)}")
    compression = fields.get(_COMPRESSION, ZSTD)
    if compression == NO_COMPRESSION:
        data = compressed
    elif compression == ZSTD:
        uncompressed = fields.get(_UNCOMPRESSED)
        if uncompressed is None or uncompressed > MAX_UNCOMPRESSED:
            raise _corrupt(f"uncompressed size {uncompressed!r} missing or too large")
        try:
            data = pyarrow.Codec("zstd").decompress(compressed, decompressed_size=uncompressed,
                                                    asbytes=True)
        except (OSError, ValueError) as exc:
            raise _corrupt(f"zstd: {exc}") from None
    else:
        raise SourceError(
            f"a compressed transaction uses compression type {compression}, which replicator "
            "does not know (MySQL writes zstd, type 0)",
            hint="SET GLOBAL binlog_transaction_compression = OFF (and in my.cnf), or report "
            "the server version to the replicator project",
        )
    start = log_pos - size
    tail = bytes(checksum)
    events: list[bytes] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 19:
            raise _corrupt("an inner event is cut short")
        inner_size = int.from_bytes(data[pos + 9:pos + 13], "little")
        if inner_size < 19 or pos + inner_size > len(data):
            raise _corrupt(f"an inner event claims {inner_size} bytes")
        events.append(data[pos:pos + inner_size])
        pos += inner_size
    packets = []
    last = len(events) - 1
    for index, event in enumerate(events):
        event_size = len(event) + checksum
        event_end = log_pos if index == last else start + event_size
        packets.append(b"\x00" + event[:9] + struct.pack("<II", event_size, event_end)
                       + event[17:] + tail)
    return packets
