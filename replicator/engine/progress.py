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
