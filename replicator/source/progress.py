"""How far a pipeline is behind the binlog head, in bytes and files."""

from __future__ import annotations

from dataclasses import dataclass

from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource


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
    from replicator.source.connection import connect
    from replicator.source.positions import binary_logs

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
    from replicator.source.connection import connect

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
