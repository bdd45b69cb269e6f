"""The binlog reader against the real server: ops, transactions, resume, DDL, errors."""

from __future__ import annotations

import itertools
import time

import pytest

from replicator.errors import BinlogGoneError, SourceError
from replicator.model.changes import ChangeEvent, SchemaChange
from replicator.source.binlog import read_changes
from replicator.source.ddl import schema_change
from replicator.source.positions import current_position, ensure_available
from replicator.source.throwaway import ThrowawayMariaDB

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(5001)


def changes(source, start, end=None, tables=None):
    return list(read_changes(source, start=start, end=end, tables=tables,
                             server_id=next(_server_ids)))


def rows(events):
    return [e for e in events if isinstance(e, ChangeEvent)]


def run(mariadb, database, *statements):
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def test_inserts_updates_deletes_in_order(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = current_position(mysql_source)
    run(mariadb, db, "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
        "UPDATE t SET v = 'B' WHERE id = 2", "DELETE FROM t WHERE id = 1")
    events = rows(changes(mysql_source, start, tables=[f"{db}.t"]))
    assert [(e.op, e.before, e.after) for e in events] == [
        ("c", None, {"id": 1, "v": "a"}),
        ("c", None, {"id": 2, "v": "b"}),
        ("u", {"id": 2, "v": "b"}, {"id": 2, "v": "B"}),
        ("d", {"id": 1, "v": "a"}, None),
    ]
    assert [e.row_index for e in events] == [0, 1, 0, 0]
    orders = [e.order for e in events]
    assert orders == sorted(orders) and len(set(orders)) == 4
    assert all(e.table == f"{db}.t" for e in events)
    assert all(e.gtid and e.gtid.count("-") == 2 and e.transaction_id == e.gtid for e in events)
    assert all(e.end_position > e.position for e in events)
    assert all(e.ts_ms > 1_600_000_000_000 for e in events)


def test_multi_table_transaction_shares_position_and_commit(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE b (id INT PRIMARY KEY)",
        "CREATE TABLE other (id INT PRIMARY KEY)")
    start = current_position(mysql_source)
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        connection.begin()
        cursor.execute("INSERT INTO a VALUES (1)")
        cursor.execute("INSERT INTO other VALUES (1)")
        cursor.execute("INSERT INTO b VALUES (1), (2)")
        connection.commit()
    events = rows(changes(mysql_source, start, tables=[f"{db}.A", f"{db}.b"]))
    assert [(e.table, e.after) for e in events] == [
        (f"{db}.a", {"id": 1}), (f"{db}.b", {"id": 1}), (f"{db}.b", {"id": 2})]
    assert len({(e.position, e.end_position, e.ts_ms, e.gtid) for e in events}) == 1
    assert [e.row_index for e in events] == [0, 1, 2]


def test_primary_key_update_and_table_without_key(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE k (id INT PRIMARY KEY, v INT)", "CREATE TABLE nokey (v INT)")
    start = current_position(mysql_source)
    run(mariadb, db, "INSERT INTO k VALUES (1, 10)", "UPDATE k SET id = 2 WHERE id = 1",
        "INSERT INTO nokey VALUES (7), (7)", "DELETE FROM nokey LIMIT 1")
    events = rows(changes(mysql_source, start, tables=[f"{db}.k", f"{db}.nokey"]))
    assert [(e.table.split(".")[1], e.op, e.before, e.after) for e in events] == [
        ("k", "c", None, {"id": 1, "v": 10}),
        ("k", "u", {"id": 1, "v": 10}, {"id": 2, "v": 10}),
        ("nokey", "c", None, {"v": 7}),
        ("nokey", "c", None, {"v": 7}),
        ("nokey", "d", {"v": 7}, None),
    ]


def test_resume_from_saved_boundary_loses_and_duplicates_nothing(
    mariadb, mysql_source, fresh_database
):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    a = current_position(mysql_source)
    for i in range(10):
        run(mariadb, db, f"INSERT INTO t VALUES ({i}, {i})")
    run(mariadb, db, "FLUSH BINARY LOGS")  # the range crosses a file
    for i in range(10, 20):
        run(mariadb, db, f"UPDATE t SET v = v + 1 WHERE id = {i - 10}")
    c = current_position(mysql_source)
    run(mariadb, db, "INSERT INTO t VALUES (100, 100)")  # after c: must not appear
    whole = rows(changes(mysql_source, a, c, tables=[f"{db}.t"]))
    assert len(whole) == 20
    for cut in (3, 9, 10, 15):
        # Resume at the boundary after transaction cut-1. It need not equal the start of
        # transaction `cut`: MariaDB may write a Binlog_checkpoint/Gtid_list event between
        # them, and a FLUSH puts them in different files.
        b = whole[cut - 1].end_position
        assert b is not None and whole[cut - 1].position < b <= whole[cut].position
        first = rows(changes(mysql_source, a, b, tables=[f"{db}.t"]))
        second = rows(changes(mysql_source, b, c, tables=[f"{db}.t"]))
        assert first + second == whole
    assert changes(mysql_source, c, c) == []


def test_end_none_reads_to_head_and_returns(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = current_position(mysql_source)
    run(mariadb, db, "INSERT INTO t VALUES (1)")
    assert [e.after for e in rows(changes(mysql_source, start, tables=[f"{db}.t"]))] == [{"id": 1}]


def test_ddl_mid_stream_then_rows_with_the_new_column(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = current_position(mysql_source)
    run(mariadb, db, "INSERT INTO t VALUES (1)", "ALTER TABLE t ADD COLUMN note VARCHAR(10)",
        "INSERT INTO t VALUES (2, 'new')", "TRUNCATE TABLE t",
        f"RENAME TABLE t TO `{db}`.t2", "DROP TABLE t2")
    events = changes(mysql_source, start, tables=[f"{db}.t", f"{db}.t2"])
    shapes = [(e.kind, e.tables) if isinstance(e, SchemaChange) else e.after for e in events]
    assert shapes == [
        {"id": 1},
        ("alter", (f"{db}.t",)),
        {"id": 2, "note": "new"},
        ("truncate", (f"{db}.t",)),
        ("rename", (f"{db}.t", f"{db}.t2")),
        ("drop", (f"{db}.t2",)),
    ]


def test_schema_change_parsing():
    from replicator.model.changes import BinlogPosition

    p = BinlogPosition("mysql-bin.000001", 4)
    assert schema_change("CREATE TABLE `a``b` (x int)", "d", p, 0).tables == ("d.a`b",)
    assert schema_change("/* x */ DROP TABLE IF EXISTS `s`.`t1`, t2 /* generated */", "d", p,
                         0).tables == ("s.t1", "d.t2")
    assert schema_change("CREATE INDEX i ON t (x)", "d", p, 0).tables == ("d.t",)
    assert schema_change("CREATE DATABASE x", "d", p, 0).kind == "create"
    assert schema_change("GRANT SELECT ON *.* TO x", "d", p, 0) is None


@pytest.mark.slow
def test_purged_binlog_is_gone_with_snapshot_hint():
    # Its own server: purging the shared one would pull binlogs from under other tests.
    with ThrowawayMariaDB() as server:
        source = server.source()
        old = current_position(source)
        run(server, None, "CREATE DATABASE p", "CREATE TABLE p.t (id INT PRIMARY KEY)",
            "INSERT INTO p.t VALUES (1)", "FLUSH BINARY LOGS", "FLUSH BINARY LOGS")
        head = current_position(source)
        # MariaDB keeps a binlog until InnoDB has flushed the redo of its transactions
        # (binlog checkpoint, ~1 s with innodb_flush_log_at_trx_commit=2): PURGE skips it
        # until then.
        deadline = time.monotonic() + 10
        while True:
            run(server, None, f"PURGE BINARY LOGS TO '{head.file}'")
            with server.root_connection() as connection, connection.cursor() as cursor:
                cursor.execute("SHOW BINARY LOGS")
                if old.file not in {row[0] for row in cursor.fetchall()}:
                    break
            assert time.monotonic() < deadline, "PURGE BINARY LOGS never removed the old file"
            time.sleep(0.2)
        with pytest.raises(BinlogGoneError) as gone:
            ensure_available(source, old)
        assert "--snapshot always" in gone.value.hint
        with pytest.raises(BinlogGoneError) as gone:
            changes(source, old, head)
        assert "--snapshot always" in gone.value.hint
        ensure_available(source, head)


def test_wrong_password_names_the_fix(mariadb):
    with pytest.raises(SourceError) as error:
        current_position(mariadb.source(password="wrong"))
    assert "refused the login" in error.value.message
    assert "GRANT REPLICATION SLAVE" in error.value.hint
    assert not error.value.transient


def test_missing_grant_names_the_grant(mariadb, fresh_database):
    run(mariadb, fresh_database,
        "CREATE USER IF NOT EXISTS 'weak'@'%' IDENTIFIED BY 'pw'",
        "GRANT SELECT ON *.* TO 'weak'@'%'")
    weak = mariadb.source(user="weak", password="pw")
    with pytest.raises(SourceError) as error:
        current_position(weak)
    assert "BINLOG MONITOR" in error.value.hint
    start = current_position(mariadb.source())
    with pytest.raises(SourceError) as error:
        list(read_changes(weak, start=start, end=None, tables=None, server_id=next(_server_ids)))
    assert "GRANT REPLICATION SLAVE" in error.value.hint


def test_not_a_boundary_is_refused(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = current_position(mysql_source)
    run(mariadb, db, "INSERT INTO t VALUES (1)")
    event = rows(changes(mysql_source, start, tables=[f"{db}.t"]))[0]
    middle = type(start)(event.position.file, event.end_position.pos - 31)  # the Xid event
    with pytest.raises(SourceError):
        changes(mysql_source, middle, event.end_position)


def test_non_transactional_engine_and_savepoints(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE m (id INT PRIMARY KEY) ENGINE=MyISAM",
        "CREATE TABLE i (id INT PRIMARY KEY)")
    start = current_position(mysql_source)
    run(mariadb, db, "INSERT INTO m VALUES (1)", "INSERT INTO m VALUES (2)")
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        connection.begin()
        cursor.execute("INSERT INTO i VALUES (1)")
        cursor.execute("SAVEPOINT s1")
        cursor.execute("INSERT INTO i VALUES (2)")
        cursor.execute("ROLLBACK TO SAVEPOINT s1")
        cursor.execute("INSERT INTO i VALUES (3)")
        connection.commit()
    events = rows(changes(mysql_source, start, tables=[f"{db}.m", f"{db}.i"]))
    assert [(e.table.split(".")[1], e.after["id"]) for e in events] == [
        ("m", 1), ("m", 2), ("i", 1), ("i", 3)]
    # MyISAM statements end with a Query COMMIT: each is its own boundary.
    assert events[0].end_position == events[1].position or events[0].end_position < events[1].position
    resumed = rows(changes(mysql_source, events[0].end_position, tables=[f"{db}.m", f"{db}.i"]))
    assert [e.after["id"] for e in resumed] == [2, 1, 3]
