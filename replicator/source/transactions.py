"""The binlog's transaction state machine, once, for both decoders (``source.binlog`` with the
library's events, ``source.fast.reader`` with its own): which events start and end a
transaction, the boundaries a reader may resume from, where a read stops, and the error texts.

How transactions look in the binlog (ROW format):

- MySQL:   Gtid, Query BEGIN, Table_map, *_rows ..., Xid            (DDL: Gtid, Query)
- MariaDB: Gtid (its BEGIN), Table_map, *_rows ..., Xid             (DDL: standalone Gtid, Query)
- non-transactional engines (MyISAM/Aria) end with Query COMMIT instead of Xid;
- XA: Query XA START ... the rows ... Query XA END (SAVEPOINT and the like are skipped inside).

A decoder parses an event and tells the assembler (``gtid``, ``query``, ``xid``, ``rotate``);
rows go into ``changes`` of the open transaction, in whatever form the decoder keeps them
(decoded tuples, or raw packets decoded at commit). The assembler hands back each committed
transaction that has changes as a ``Commit`` and each DDL as a ``SchemaChange``; ``done`` turns
True once the read reached ``end`` (a transaction that starts at or past ``end``, or a boundary
at or past it), and the decoder stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition, SchemaChange
from replicator.model.selection import TableSelector
from replicator.source.ddl import replicated_schema_change

MARIADB_FL_STANDALONE = 0x01  # MariaDB GTID flag: a DDL or other statement outside BEGIN


@dataclass
class Commit:
    """One committed transaction of the wanted tables.

    ``changes``: what the decoder appended per rows event, in binlog order (its own format).
    Valid until the next event is given to the assembler."""

    start: BinlogPosition  # the transaction's first event
    gtid: str | None
    end: BinlogPosition  # the boundary after its commit
    ts_ms: int  # commit time
    changes: list[Any]


class TransactionAssembler:
    """Tracks the open transaction and the last boundary between ``start`` and ``end``.

    ``start`` must be a transaction boundary; ``boundary`` is the last one passed (where a
    resumed reader restarts); ``file`` the binlog file being read (ROTATE events move it)."""

    __slots__ = ("boundary", "changes", "done", "end", "file", "gtid_text", "in_progress",
                 "start", "tx_start", "wanted")

    def __init__(self, start: BinlogPosition, end: BinlogPosition,
                 wanted: TableSelector | None) -> None:
        self.start = start
        self.end = end
        self.wanted = wanted
        self.file = start.file
        self.boundary = start
        self.done = False
        self.tx_start: BinlogPosition | None = None
        self.gtid_text: str | None = None
        self.in_progress = False
        self.changes: list[Any] = []

    def _open(self, event_pos: int, gtid: str | None, in_progress: bool) -> bool:
        """Open a transaction at the event starting at ``event_pos``; False (and ``done``)
        when it starts at or past ``end``."""
        position = BinlogPosition(self.file, event_pos)
        if position >= self.end:
            self.done = True
            return False
        self.tx_start, self.gtid_text, self.in_progress = position, gtid, in_progress
        self.changes = []
        return True

    def gtid(self, event_pos: int, gtid: str, in_progress: bool) -> None:
        """A GTID event (MySQL's: ``in_progress`` False, a Query BEGIN follows; MariaDB's:
        not STANDALONE means it is the BEGIN)."""
        self._open(event_pos, gtid, in_progress)

    def query(self, event_pos: int, log_pos: int, timestamp: int, schema: str,
              query: str) -> list[Commit | SchemaChange]:
        """A Query event starting at ``event_pos`` and ending at ``log_pos``: BEGIN/XA START
        open a transaction, COMMIT/ROLLBACK or a statement outside one close it (DDL yields
        its ``SchemaChange`` after the commit before it)."""
        verb = query[:8].upper()
        if verb.startswith("BEGIN") or verb.startswith("XA START"):
            if self.tx_start is None and not self._open(event_pos, None, True):
                return []
            self.in_progress = True
            return []
        if self.tx_start is not None and self.in_progress and not (
            verb.startswith("COMMIT") or verb.startswith("ROLLBACK")
        ):
            return []  # SAVEPOINT and the like, inside a transaction
        if self.tx_start is None and not self._open(event_pos, None, False):
            return []
        assert self.tx_start is not None
        position = self.tx_start
        items: list[Commit | SchemaChange] = self._finish(log_pos, timestamp)
        change = replicated_schema_change(query, schema, position, timestamp * 1000, self.wanted)
        if change is not None:
            items.append(change)
        self.done = self.boundary >= self.end
        return items

    def xid(self, log_pos: int, timestamp: int) -> list[Commit | SchemaChange]:
        """An XID event (the commit of a transactional engine) ending at ``log_pos``."""
        if self.tx_start is None:  # a start that was not a boundary
            raise SourceError(
                f"binlog position {self.start} is not a transaction boundary",
                hint="resume only from positions replicator recorded (checkpoints, "
                "SHOW MASTER STATUS)",
            )
        items: list[Commit | SchemaChange] = self._finish(log_pos, timestamp)
        self.done = self.boundary >= self.end
        return items

    def rotate(self, next_file: str, next_pos: int, real: bool) -> None:
        """A ROTATE event; ``real`` (a logged one, not the server's fake first event) between
        transactions is a boundary too."""
        self.file = next_file
        if self.tx_start is None and real:
            self.boundary = BinlogPosition(next_file, next_pos)

    def not_a_boundary(self, table: str) -> SourceError:
        """Rows of ``table`` arrived outside a transaction: ``start`` was mid-transaction."""
        return SourceError(
            f"binlog position {self.start} is not a transaction boundary (rows of "
            f"{table} without their transaction start)",
            hint="resume only from positions replicator recorded",
        )

    def _finish(self, log_pos: int, timestamp: int) -> list[Commit | SchemaChange]:
        self.boundary = BinlogPosition(self.file, log_pos)
        items: list[Commit | SchemaChange] = []
        if self.changes:
            assert self.tx_start is not None
            items.append(Commit(self.tx_start, self.gtid_text, self.boundary, timestamp * 1000,
                                self.changes))
        self.changes = []
        self.tx_start = None
        return items


def partial_json_refused(table: str) -> SourceError:
    """A PARTIAL_UPDATE_ROWS_EVENT holds a JSON column's update as a diff against the old
    document (binlog_row_value_options=PARTIAL_JSON), not the new value: replaying it would
    need the target's current document, which a MERGE of values cannot use."""
    return SourceError(
        f"the binlog holds a partial JSON update of {table} (MySQL "
        "binlog_row_value_options=PARTIAL_JSON): the changed JSON documents are logged as "
        "diffs, not values, and cannot be replicated",
        hint="SET PERSIST binlog_row_value_options = '' on the server, then re-snapshot the "
        "tables changed since: `replicator run PIPELINE.yaml --snapshot always`",
    )
