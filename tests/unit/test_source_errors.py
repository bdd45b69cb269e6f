"""Driver errors -> errors a user can act on (no server needed)."""

from __future__ import annotations

import pymysql

from replicator.errors import BinlogGoneError, SourceError, TransientSourceError
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import classify_error, grant_statement

SOURCE = MySQLSource(host="db", port=3306, user="replicator", password="x")


def test_duplicate_server_id_names_server_id() -> None:
    exc = pymysql.err.OperationalError(
        4052, "A slave with the same server_uuid/server_id as this slave has connected to the master"
    )
    error = classify_error(exc, SOURCE, doing="reading the binlog", server_id=4201)
    assert type(error) is SourceError
    assert "4201" in error.message and "server_id" in error.hint


def test_mysql_duplicate_replica_message_is_recognised() -> None:
    exc = pymysql.err.OperationalError(
        1236, "A replica with the same server_uuid/server_id as this replica has connected to the source"
    )
    assert "server_id" in classify_error(exc, SOURCE, doing="x", server_id=7).hint


def test_purged_binlog_is_binlog_gone() -> None:
    exc = pymysql.err.OperationalError(
        1236, "Could not find first log file name in binary log index file"
    )
    error = classify_error(exc, SOURCE, doing="reading the binlog")
    assert isinstance(error, BinlogGoneError)
    assert "--snapshot always" in error.hint


def test_lost_connection_is_transient_and_access_denied_is_not() -> None:
    lost = classify_error(pymysql.err.OperationalError(2013, "Lost connection"), SOURCE, doing="x")
    assert isinstance(lost, TransientSourceError) and lost.transient
    denied = classify_error(
        pymysql.err.OperationalError(1045, "Access denied for user"), SOURCE, doing="x"
    )
    assert not denied.transient and "GRANT REPLICATION SLAVE" in denied.hint


def test_missing_privilege_hint_is_the_grant() -> None:
    exc = pymysql.err.OperationalError(
        1227, "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s)"
    )
    assert classify_error(exc, SOURCE, doing="x").hint == grant_statement("replicator")
    assert grant_statement("r", mariadb=True) == (
        "GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'r'@'%';"
    )
