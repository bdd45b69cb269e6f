"""Binlog positions on the server: the current head, and whether a position is still there.

The head reported by SHOW MASTER STATUS is always a transaction boundary (the server writes a
transaction's events to the binlog in one piece at commit). MySQL 8.4 removed SHOW MASTER
STATUS in favour of SHOW BINARY LOG STATUS; MariaDB knows only the old name (and SHOW BINLOG
STATUS). Both are tried.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from replicator.errors import BinlogGoneError, SourceError
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import classify_error, connect, grant_statement, is_mariadb

if TYPE_CHECKING:
    import pymysql

ER_PARSE_ERROR = 1064
CONSISTENT_READ_ATTEMPTS = 5

BINLOG_OFF_HINT = (
    "enable the binary log: log_bin=ON (my.cnf: log-bin=mysql-bin, server-id=1) with "
    "binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL, then restart MySQL "
    "(RDS/Aurora: set binlog_format=ROW in the parameter group and enable automated backups)"
)


def status_row(connection: pymysql.Connection) -> tuple | None:
    import pymysql

    with connection.cursor() as cursor:
        try:
            cursor.execute("SHOW MASTER STATUS")
        except pymysql.err.ProgrammingError as exc:  # MySQL 8.4+
            if not exc.args or exc.args[0] != ER_PARSE_ERROR:
                raise
            cursor.execute("SHOW BINARY LOG STATUS")
        return cursor.fetchone()


def head_position(connection: pymysql.Connection, row: tuple | None = None) -> BinlogPosition:
    """The binlog head on an open connection (SourceError if the binlog is off); ``row``: a
    status row already read."""
    row = row if row is not None else status_row(connection)
    if row is None:
        raise SourceError("the binary log is disabled on the MySQL server", hint=BINLOG_OFF_HINT)
    return BinlogPosition(file=str(row[0]), pos=int(row[1]))


def head_with_gtid(connection: pymysql.Connection) -> BinlogPosition:
    """The binlog head with the GTID state at it (None when the server has no GTIDs).

    MySQL reports both in one row (Executed_Gtid_Set). MariaDB keeps the state in
    @@gtid_binlog_pos: read between two SHOW MASTER STATUS, it belongs to the head when the
    two agree (both are read under the binlog's lock, so nothing committed in between).
    """
    if not is_mariadb(connection):
        row = status_row(connection)
        head = head_position(connection, row)
        gtid = str(row[4]).replace("\n", "").strip() if row is not None and len(row) > 4 else ""
        return dataclasses.replace(head, gtid=gtid or None)
    for _ in range(CONSISTENT_READ_ATTEMPTS):
        before = head_position(connection)
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@gtid_binlog_pos")
            row = cursor.fetchone()
        after = head_position(connection)
        if before == after:
            gtid = str(row[0]).strip() if row and row[0] is not None else ""
            return dataclasses.replace(before, gtid=gtid or None)
    return after  # a busy server: this offset goes without (the next one will have it)


def gtid_at(connection: pymysql.Connection, position: BinlogPosition) -> str | None:
    """MariaDB: the GTID state at ``position`` of THIS server's binlog (None: not a position
    here, or MySQL, which has no such function). Reads the file from its start."""
    import pymysql

    if not is_mariadb(connection):
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
            row = cursor.fetchone()
    except pymysql.err.MySQLError:
        return None  # a position inside an event, or a file this server never had
    return str(row[0]) if row and row[0] is not None else None


def binary_logs(connection: pymysql.Connection) -> list[tuple[str, int]]:
    """(file, size) of every binlog file the server still has, oldest first."""
    import pymysql

    with connection.cursor() as cursor:
        try:
            cursor.execute("SHOW BINARY LOGS")
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == 1381:  # ER_NO_BINARY_LOGGING
                raise SourceError(
                    "the binary log is disabled on the MySQL server", hint=BINLOG_OFF_HINT
                ) from exc
            raise
        return [(str(row[0]), int(row[1])) for row in cursor.fetchall()]


def binlog_head(source: MySQLSource) -> BinlogPosition:
    """The binlog head without the GTID state there: where a binlog reader given no end
    stops (``source.binlog``, ``source.fast.reader``)."""
    import pymysql

    try:
        with connect(source) as connection:
            return head_position(connection)
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="reading the binlog position") from exc


def current_position(source: MySQLSource) -> BinlogPosition:
    """The binlog head: where a reader starting 'now' begins (a transaction boundary), with
    the server's GTID state there (offsets carry it: source.gtid)."""
    import pymysql

    try:
        with connect(source) as connection:
            return head_with_gtid(connection)
    except pymysql.err.MySQLError as exc:
        error = classify_error(exc, source, doing="reading the binlog position")
        if "privilege" in str(exc).lower():
            error.hint = grant_statement(source.user)
        raise error from exc


def with_gtid(source: MySQLSource, position: BinlogPosition) -> BinlogPosition:
    """``position`` with the GTID state at it (MariaDB: ``BINLOG_GTID_POS``, which reads the
    file up to it; MySQL: unchanged, it has no such function)."""
    import pymysql

    try:
        with connect(source) as connection:
            return dataclasses.replace(position, gtid=gtid_at(connection, position))
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="reading the GTID position") from exc


def ensure_available(source: MySQLSource, position: BinlogPosition) -> None:
    """BinlogGoneError when ``position``'s file has been purged (changes would be lost)."""
    import pymysql

    try:
        with connect(source) as connection:
            files = binary_logs(connection)
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="listing the binary logs") from exc
    sizes = dict(files)
    if position.file not in sizes:
        oldest = files[0][0] if files else "none"
        raise BinlogGoneError(
            f"binlog file {position.file} (position {position}) is no longer on the server "
            f"(oldest binlog: {oldest}); the changes since then cannot be replayed",
            hint="re-snapshot with `replicator run PIPELINE.yaml --snapshot always`, and keep "
            "binlogs longer than the longest pause (binlog_expire_logs_seconds / "
            "expire_logs_days, RDS: CALL mysql.rds_set_configuration('binlog retention hours', 168))",
        )
    if position.pos > sizes[position.file] and position.file != files[-1][0]:
        raise SourceError(
            f"binlog position {position} is past the end of {position.file} "
            f"({sizes[position.file]} bytes): it was not written by this server",
            hint="the checkpoint belongs to another server; re-snapshot with "
            "`replicator run PIPELINE.yaml --snapshot always`",
        )
