"""How far a pipeline is behind the binlog head, in bytes and files; how long the server
keeps the binlog it still needs."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import connect, connection_settings
from replicator.source.positions import binary_logs

# The dump that reads when a binlog file was opened uses a server_id of its own: a replica
# connection with a duplicate id kicks the other one off (decode partitions use id + index).
PROBE_SERVER_ID_OFFSET = 4096
# Warn (run log, `status` degraded) when the binlog a pipeline needs is purgeable this soon.
RETENTION_WARNING_S = 24 * 3600


@dataclass(frozen=True)
class Lag:
    bytes: int | None  # None: a file in between is gone (purged), so bytes are unknown
    files: int  # binlog files between the position and the head (0: same file)


def lag_behind(source: MySQLSource, position: BinlogPosition, head: BinlogPosition) -> Lag:
    """Bytes of binlog between ``position`` and ``head`` (SHOW BINARY LOGS gives the sizes)."""
    if position >= head:
        return Lag(0, 0)
    files = head.sequence - position.sequence
    if files == 0:
        return Lag(head.pos - position.pos, 0)
    with connect(source) as connection:
        sizes = dict(binary_logs(connection))
    total = 0
    for name, size in sizes.items():
        at = BinlogPosition(name, 0)
        if at.sequence == position.sequence:
            total += max(0, size - position.pos)
        elif position.sequence < at.sequence < head.sequence:
            total += size
    if position.file not in sizes:
        return Lag(None, files)
    return Lag(total + head.pos, files)


def row_estimates(source: MySQLSource, tables: list[str]) -> dict[str, int]:
    """Roughly how many rows each ``db.table`` has: ``information_schema.TABLES.TABLE_ROWS``
    (InnoDB's sampled estimate, often off by tens of percent; exact for MyISAM/Aria). One
    query for all tables, no table scan: it only scales the snapshot progress bars.
    Keys are lower-cased ``db.table``; a table the server does not list is left out."""
    names = [name.split(".", 1) for name in tables if "." in name]
    if not names:
        return {}
    databases = sorted({database for database, _ in names})
    wanted = {name.lower() for name in tables}
    with connect(source) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
            f"WHERE TABLE_SCHEMA IN ({', '.join(['%s'] * len(databases))})",
            databases,
        )
        rows = cursor.fetchall()
    estimates: dict[str, int] = {}
    for database, table, count in rows:
        key = f"{database}.{table}".lower()
        if key in wanted and count is not None:
            estimates[key] = int(count)
    return estimates


def expire_seconds(variables: Mapping[str, str]) -> int:
    """How long the server keeps a binlog file after it is rotated (0: no age limit), from
    ``binlog_expire_logs_seconds`` (MySQL 8, MariaDB 10.6+) or ``expire_logs_days``."""
    seconds = int(float(variables.get("binlog_expire_logs_seconds", "0") or 0))
    days = float(variables.get("expire_logs_days", "0") or 0)
    return seconds if seconds or not days else int(days * 86_400)


@dataclass(frozen=True)
class Retention:
    """When the server may purge the binlog file a pipeline still needs.

    MySQL and MariaDB purge, at a rotation, the files rotated out more than the expiry ago;
    a file was rotated out when the next one was opened (its FORMAT_DESCRIPTION event's
    time). ``purgeable_at`` is that moment plus the expiry: None when the server has no age
    limit, or when the needed file is the one being written (kept at least ``expire_s`` after
    it is rotated); 0.0 when it is gone already."""

    file: str
    expire_s: int
    purgeable_at: float | None

    def seconds_left(self, now: float) -> float | None:
        return None if self.purgeable_at is None else max(0.0, self.purgeable_at - now)

    def describe(self, now: float) -> str:
        if self.purgeable_at == 0.0:
            return f"{self.file} is purged already: the pipeline must re-snapshot"
        expiry = f"expiry {self.expire_s / 3600:.0f} h"
        left = self.seconds_left(now)
        if not self.expire_s:
            return f"{self.file}: the server purges no binlog by age"
        if left is None:
            return f"{self.file} is being written: kept {expiry} after it is rotated"
        return f"{self.file} may be purged in {left / 3600:.1f} h ({expiry})"


_opened: dict[tuple[str, int, str], int] = {}  # (host, port, file) -> when it was opened


def retention(source: MySQLSource, position: BinlogPosition, *, server_id: int) -> Retention:
    """When the file holding ``position`` may be purged (``Retention``). One query, plus a
    short binlog dump the first time a file is looked at (its opening time never changes)."""
    with connect(source) as connection:
        with connection.cursor() as cursor:
            cursor.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                           "('binlog_expire_logs_seconds', 'expire_logs_days')")
            variables = {str(name): str(value) for name, value in cursor.fetchall()}
        names = [name for name, _ in binary_logs(connection)]
    expire = expire_seconds(variables)
    if position.file not in names:
        return Retention(position.file, expire, 0.0)
    following = names.index(position.file) + 1
    if not expire or following == len(names):
        return Retention(position.file, expire, None)
    key = (source.host, source.port, names[following])
    if key not in _opened:
        _opened[key] = _file_opened_at(source, names[following],
                                       server_id=server_id + PROBE_SERVER_ID_OFFSET)
    return Retention(position.file, expire, float(_opened[key] + expire))


def _file_opened_at(source: MySQLSource, file: str, *, server_id: int) -> int:
    """When ``file`` was opened: the time of its FORMAT_DESCRIPTION event (the dump's first
    real event; the fake ROTATE before it has time 0). Unknown (0): now."""
    # Keeps the fast decoder's package (source/fast/) off every command's start-up.
    from replicator.source.fast.stream import BinlogStream

    format_description = 15
    stream = BinlogStream(connection_settings(source), server_id=server_id, file=file, pos=4)
    try:
        for seen, packet in enumerate(stream.packets()):
            # The dump's OK byte, then the event header: timestamp (4 bytes), type (1).
            if packet[5] == format_description:
                return int.from_bytes(packet[1:5], "little") or int(time.time())
            if seen > 3:
                break
    finally:
        stream.close()
    return int(time.time())
