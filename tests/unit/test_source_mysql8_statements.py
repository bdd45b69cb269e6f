"""MySQL-8-only statements replicator issues, against a fake server that answers as MySQL 8.4
does (no MySQL 8 in the test environment; docs/mysql-setup.md lists what is exercised how)."""

from __future__ import annotations

import pymysql
import pytest

from replicator.errors import SourceError
from replicator.source.positions import head_position


class _Mysql84:
    """A connection whose server knows SHOW BINARY LOG STATUS and not SHOW MASTER STATUS
    (MySQL 8.4 removed it: error 1064, a syntax error)."""

    def __init__(self, status: tuple | None) -> None:
        self.status = status
        self.statements: list[str] = []

    def cursor(self) -> _Mysql84:
        return self

    def __enter__(self) -> _Mysql84:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str) -> None:
        self.statements.append(sql)
        if sql == "SHOW MASTER STATUS":
            raise pymysql.err.ProgrammingError(
                1064, "You have an error in your SQL syntax; ... near 'MASTER STATUS'")
        assert sql == "SHOW BINARY LOG STATUS"

    def fetchone(self) -> tuple | None:
        return self.status


def test_head_on_mysql_84_uses_show_binary_log_status():
    server = _Mysql84(("binlog.000007", 1234, "", "", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"))
    position = head_position(server)  # type: ignore[arg-type]
    assert (position.file, position.pos) == ("binlog.000007", 1234)
    assert server.statements == ["SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"]


def test_binlog_off_on_mysql_84_is_named():
    with pytest.raises(SourceError, match="binary log is disabled"):
        head_position(_Mysql84(None))  # type: ignore[arg-type]
