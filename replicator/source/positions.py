"""Binlog positions on the server: the current head, and whether a position is still there.

The head reported by SHOW MASTER STATUS is always a transaction boundary (the server writes a
transaction's events to the binlog in one piece at commit). MySQL 8.4 removed SHOW MASTER
STATUS in favour of SHOW BINARY LOG STATUS; MariaDB knows only the old name (and SHOW BINLOG
STATUS). Both are tried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.errors import BinlogGoneError, SourceError
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import classify_error, connect, grant_statement

if TYPE_CHECKING:
    import pymysql

ER_PARSE_ERROR = 1064

BINLOG_OFF_HINT = (
    "enable the binary log: log_bin=ON (my.cnf: log-bin=mysql-bin, server-id=1) with "
    "binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL, then restart MySQL "
    "(RDS/Aurora: set binlog_format=ROW in the parameter group and enable automated backups)"
)


def _binlog_status(connection: pymysql.Connection) -> tuple | None:
    import pymysql

    with connection.cursor() as cursor:
        try:
            cursor.execute("SHOW MASTER STATUS")
        except pymysql.err.ProgrammingError as exc:  # MySQL 8.4+
            if not exc.args or exc.args[0] != ER_PARSE_ERROR:
                raise
            cursor.execute("SHOW BINARY LOG STATUS")
        return cursor.fetchone()


def head_position(connection: pymysql.Connection) -> BinlogPosition:
    """The binlog head on an open connection (SourceError if the binlog is off)."""
    row = _binlog_status(connection)
    if row is None:
        raise SourceError("the binary log is disabled on the MySQL server", hint=BINLOG_OFF_HINT)
    return BinlogPosition(file=str(row[0]), pos=int(row[1]))


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


def current_position(source: MySQLSource) -> BinlogPosition:
    """The binlog head: where a reader starting 'now' begins (a transaction boundary)."""
    import pymysql

    try:
        with connect(source) as connection:
            return head_position(connection)
    except pymysql.err.MySQLError as exc:
        error = classify_error(exc, source, doing="reading the binlog position")
        if "privilege" in str(exc).lower():
            error.hint = grant_statement(source.user)
        raise error from exc


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
