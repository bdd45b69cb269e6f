"""GTID positions: the same point on every server of a replication topology.

A binlog file + position names a point on ONE server: a replica promoted after a failover
writes its own files, whose names may even match the old primary's while meaning other
transactions. Offsets therefore also carry the server's GTID state at that point
(``BinlogPosition.gtid``), and a run that finds its position does not belong to the server
it connects to *locates* that GTID state there:

- MariaDB: ``BINLOG_GTID_POS(file, pos)`` on the server says whether file+pos is the same
  point here (it answers for the server's own files only). If not, the run opens a
  non-blocking GTID binlog dump (``@slave_connect_state``, what a replica does) from the
  recorded state: the first transaction the server sends is the first one not yet applied,
  and its event header carries its real file position on this server;
- MySQL: the same dump with ``COM_BINLOG_DUMP_GTID`` (untested against a real MySQL 8:
  docs/mysql-setup.md), when the recorded file is gone or the position past its end.

A server whose GTID history does not contain the last applied transaction (a replica that
never received it, or diverged) is refused: resuming there would silently lose or fork data.

``source.mysql.host`` may list several servers (``db1:3306,db2``):
``connection.pin_writer`` picks the one that is writable (``@@read_only = 0``) and a run
stays on it until it fails.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import (
    classify_error,
    connect,
    connection_settings,
    is_mariadb,
)
from replicator.source.positions import binary_logs, current_position, gtid_at, head_with_gtid

if TYPE_CHECKING:
    import pymysql

ER_MASTER_FATAL_READING_BINLOG = 1236
NOT_CONTAINED_HINT = (
    "promote the server that has the last applied transaction (compare SELECT "
    "@@gtid_binlog_pos on each server), or start over on this one with `replicator run "
    "PIPELINE.yaml --snapshot always`"
)


# -- MariaDB GTID states ---------------------------------------------------------------------


def parse_state(text: str | None) -> dict[int, tuple[int, int]]:
    """A MariaDB GTID state "0-1-100,1-2-7" -> {domain: (server_id, seq)}."""
    state: dict[int, tuple[int, int]] = {}
    for item in (text or "").replace("\n", "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            domain, server, seq = (int(part) for part in item.split("-"))
        except ValueError:
            raise SourceError(
                f"not a MariaDB GTID position: {text!r}",
                hint="a GTID position is domain-server-sequence, comma-separated per domain, "
                "e.g. start: {gtid: '0-1-100'} (SELECT @@gtid_binlog_pos shows the current one)",
            ) from None
        state[domain] = (server, seq)
    return state


def format_state(state: dict[int, tuple[int, int]]) -> str:
    return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(state.items()))


def same_state(a: str | None, b: str | None) -> bool:
    return parse_state(a) == parse_state(b)


def behind_domains(needed: str, server_state: str) -> list[str]:
    """The GTIDs of ``needed`` the server has not reached (its sequence is lower, or the
    domain is unknown to it)."""
    have = parse_state(server_state)
    return [f"{d}-{s}-{n}" for d, (s, n) in sorted(parse_state(needed).items())
            if d not in have or have[d][1] < n]


# -- locating a position on the server the run connects to ------------------------------------


def locate(source: MySQLSource, position: BinlogPosition, *, server_id: int) -> BinlogPosition:
    """``position`` on the server ``source`` names: itself when it is this server's, else the
    same point found by its GTID state. SourceError when the server's history lacks it."""
    import pymysql

    if not position.gtid:
        return position
    try:
        with connect(source) as connection:
            mariadb = is_mariadb(connection)
            if mariadb:
                if same_state(gtid_at(connection, position), position.gtid):
                    return position
                head = head_with_gtid(connection)
                missing = behind_domains(position.gtid, head.gtid or "")
                if missing:
                    raise SourceError(
                        f"{source.host}:{source.port} has not got the last transaction this "
                        f"pipeline applied ({', '.join(missing)}; the server is at "
                        f"{head.gtid or 'no GTID'}): resuming there would lose it",
                        hint=NOT_CONTAINED_HINT,
                    )
                if same_state(head.gtid, position.gtid):
                    return head  # nothing committed here since
            elif not _mysql_moved(connection, position):
                return position
            else:
                _require_mysql_contains(connection, source, position.gtid)
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="locating the GTID position") from exc
    return _first_transaction_after(source, position, server_id=server_id, mariadb=mariadb)


def _mysql_moved(connection: pymysql.Connection, position: BinlogPosition) -> bool:
    sizes = dict(binary_logs(connection))
    return position.file not in sizes or position.pos > sizes[position.file]


def _require_mysql_contains(connection: pymysql.Connection, source: MySQLSource,
                            gtid: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT GTID_SUBSET(%s, @@GLOBAL.gtid_executed)", (gtid,))
        row = cursor.fetchone()
    if not row or not int(row[0]):
        raise SourceError(
            f"{source.host}:{source.port} has not executed every transaction this pipeline "
            f"applied ({gtid}): resuming there would lose them",
            hint=NOT_CONTAINED_HINT.replace("@@gtid_binlog_pos", "@@gtid_executed"),
        )


def _first_transaction_after(
    source: MySQLSource, position: BinlogPosition, *, server_id: int, mariadb: bool
) -> BinlogPosition:
    """The file+pos of the first transaction after ``position.gtid`` on this server, by a
    GTID dump that stops at the first GTID event (or the head: nothing committed since)."""
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, RotateEvent

    gtid = str(position.gtid)
    head = current_position(source)
    stream = BinLogStreamReader(
        connection_settings(source), server_id=server_id, blocking=False,
        auto_position=gtid, is_mariadb=mariadb,
        only_events=[RotateEvent, MariadbGtidEvent, GtidEvent],
    )
    file = None
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                file = str(event.next_binlog)
            elif file is not None and event.packet.log_pos:
                start = int(event.packet.log_pos) - int(event.packet.event_size)
                return BinlogPosition(file, start, gtid=gtid)
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        text = str(exc.args[1] if len(exc.args) > 1 else exc)
        if code == ER_MASTER_FATAL_READING_BINLOG and "purged" in text.lower():
            # The binlog holding that point is gone: ensure_available names the gap and the
            # remedy (re-snapshot), as it does for a file+pos offset.
            return position
        if code == ER_MASTER_FATAL_READING_BINLOG:
            raise SourceError(
                f"{source.host}:{source.port} refuses to stream from the last applied GTID "
                f"position {gtid}: {text}",
                hint=NOT_CONTAINED_HINT,
            ) from exc
        raise classify_error(exc, source, doing="locating the GTID position") from exc
    finally:
        stream.close()
    return head  # every transaction the server has is already applied
