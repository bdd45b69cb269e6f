"""Change events and binlog positions: the contract between source, engine and sink.

A ``ChangeEvent`` is one row change. Its ``position`` is a total order over all changes of
a server: (binlog file, start position of the transaction, index of the row inside the
transaction). Compaction keeps the last change per key by this order.

Offsets that Spark keeps in its checkpoint are ``BinlogPosition`` values *at transaction
boundaries* (the position after an XID/COMMIT event): starting a reader in the middle of a
transaction silently drops its first rows (measured), so nothing ever resumes there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Op = Literal["c", "u", "d", "r"]  # insert, update, delete, snapshot read

_BINLOG_FILE = re.compile(r"^(?P<base>.+)\.(?P<seq>\d+)$")


@dataclass(frozen=True, order=False)
class BinlogPosition:
    """A place in the binlog. Ordered by (file sequence number, pos).

    Files are compared by their numeric suffix (``mysql-bin.000010`` > ``mysql-bin.000009``),
    never as strings and never by ``pos`` alone: python-mysql-replication's own
    ``end_log_pos`` ignores the file, which stops readers in the wrong place.
    """

    file: str
    pos: int
    # The server's GTID state at this position (MariaDB ``gtid_binlog_pos`` form
    # "domain-server-seq,..."; MySQL an executed GTID set), when known. It names the same
    # point on any server of the replication topology, where file+pos names it on one server
    # only (source.gtid); not part of equality or order.
    gtid: str | None = field(default=None, compare=False)

    @property
    def sequence(self) -> int:
        match = _BINLOG_FILE.match(self.file)
        if not match:
            raise ValueError(f"not a binlog file name: {self.file!r}")
        return int(match.group("seq"))

    def _key(self) -> tuple[int, int]:
        return (self.sequence, self.pos)

    def __lt__(self, other: BinlogPosition) -> bool:
        return self._key() < other._key()

    def __le__(self, other: BinlogPosition) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: BinlogPosition) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: BinlogPosition) -> bool:
        return self._key() >= other._key()

    def to_offset(self) -> dict[str, Any]:
        """The JSON-able dict Spark keeps in its checkpoint."""
        if self.gtid is None:
            return {"file": self.file, "pos": self.pos}
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid}

    @classmethod
    def from_offset(cls, offset: dict[str, Any]) -> BinlogPosition:
        gtid = offset.get("gtid")
        return cls(file=str(offset["file"]), pos=int(offset["pos"]),
                   gtid=str(gtid) if gtid else None)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(frozen=True)
class ChangeEvent:
    """One row change, with full row images as typed Python values.

    ``before`` is set for ``u`` and ``d``; ``after`` for ``c``, ``u`` and ``r``. Keys of the
    images are source column names. Values follow ``source.values`` (Decimal, int, float,
    str, bytes, datetime/date/timedelta, None; JSON as its text).
    """

    table: str  # "db.table"
    op: Op
    position: BinlogPosition  # transaction start
    row_index: int  # index of this row change inside its transaction
    ts_ms: int  # commit timestamp of the transaction, ms since epoch
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    gtid: str | None = None
    transaction_id: str | None = None  # GTID when there is one, else file:pos of the BEGIN
    end_position: BinlogPosition | None = None  # the boundary after this transaction

    @property
    def order(self) -> tuple[int, int, int]:
        """The total order of changes on one server."""
        return (self.position.sequence, self.position.pos, self.row_index)


@dataclass(frozen=True)
class SchemaChange:
    """DDL seen in the binlog (ALTER/CREATE/DROP/RENAME/TRUNCATE) on a replicated schema."""

    database: str
    sql: str
    kind: str  # alter | create | drop | rename | truncate | other
    tables: tuple[str, ...] = field(default_factory=tuple)  # "db.table" names it touches
    position: BinlogPosition | None = None
    ts_ms: int = 0
