"""Every awkward MySQL type: exact values, and the SAME values from binlog and snapshot."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import numpy as np
import pytest

from replicator.errors import SourceError
from replicator.model.changes import ChangeEvent
from replicator.source.binlog import read_changes
from replicator.source.catalog import read_catalog
from replicator.source.positions import current_position
from replicator.source.snapshot import plan_chunks, read_chunk
from replicator.source.values import ValueStats

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(6001)

TABLE = """CREATE TABLE awkward (
  id INT PRIMARY KEY, dec65 DECIMAL(65,30), dec2 DECIMAL(10,2), bu BIGINT UNSIGNED,
  bs BIGINT, ti1 TINYINT(1), dt6 DATETIME(6), ts3 TIMESTAMP(3) NULL, tm6 TIME(6), tm0 TIME,
  tm2 TIME(2), d DATE, zdt DATETIME, zts TIMESTAMP NULL, js JSON, bl BLOB, vb VARBINARY(10),
  bn BINARY(4), st SET('a','b','c'), bt BIT(5), bt64 BIT(64), en ENUM('x','y'), tx TEXT,
  ch CHAR(5), fl FLOAT, db DOUBLE, yr YEAR, l1 VARCHAR(10) CHARACTER SET latin1, nn VARCHAR(10)
)"""

EXPECTED = {
    1: {
        "id": 1,
        "dec65": Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
        "dec2": Decimal("1.50"), "bu": 18446744073709551615, "bs": -9223372036854775808,
        "ti1": 1,
        "dt6": dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
        "ts3": dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=dt.UTC),
        "tm6": -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=1),
        "tm0": dt.timedelta(hours=100), "tm2": -dt.timedelta(hours=1, microseconds=500000),
        "d": None, "zdt": None, "zts": None,  # zero dates -> NULL (policy null)
        "js": '{"a": [1, 2.5, "x"], "k": "\\u00e9"}', "bl": b"", "vb": b"", "bn": b"ab\x00\x00",
        "st": "", "bt": 5, "bt64": 2**64 - 1, "en": "y",
        "tx": "quote' back\\ nl\n tab\t 😀 \"dq\"", "ch": "ab", "fl": 1.1, "db": 2.2,
        "yr": 2024, "l1": "café", "nn": "None",
    },
    2: {
        "id": 2, "dec65": Decimal("-0.000000000000000000000000000001"), "dec2": Decimal("0.00"),
        "bu": 0, "bs": 0, "ti1": 0, "dt6": dt.datetime(1000, 1, 1), "ts3": None,
        "tm6": dt.timedelta(0), "tm0": -dt.timedelta(seconds=1), "tm2": None,
        "d": dt.date(9999, 12, 31), "zdt": None, "zts": None, "js": None, "bl": b"\x00\xff",
        "vb": b"\x00", "bn": b"\x01\x02\x03\x04", "st": "a,c", "bt": 0, "bt64": 0, "en": "",
        "tx": "", "ch": "", "fl": -3.40282e38, "db": float("1e308"), "yr": 0,
        "l1": "", "nn": None,
    },
}


def insert_awkward(mariadb, db):
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute(TABLE)
        cursor.execute("SET SESSION sql_mode = ''")  # allow zero dates, as legacy schemas have
        cursor.execute("SET SESSION time_zone = '+00:00'")
        start = current_position(mariadb.source())
        cursor.execute(
            "INSERT INTO awkward VALUES (1, %s, 1.50, 18446744073709551615, -9223372036854775808,"
            " 1, '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123', '-838:59:59.000001',"
            " '100:00:00', '-01:00:00.50', '0000-00-00', '0000-00-00 00:00:00',"
            " '0000-00-00 00:00:00', %s, '', '', 'ab', '', b'00101', %s, 'y', %s, 'ab  ', 1.1,"
            " 2.2, 2024, 'café', 'None')",
            (
                "12345678901234567890123456789012345.123456789012345678901234567890",
                '{"a": [1, 2.5, "x"], "k": "\\u00e9"}',
                2**64 - 1,
                "quote' back\\ nl\n tab\t 😀 \"dq\"",
            ),
        )
        cursor.execute(
            "INSERT INTO awkward VALUES (2, '-0.000000000000000000000000000001', 0, 0, 0, 0,"
            " '1000-01-01', NULL, '00:00:00', '-00:00:01', NULL, '9999-12-31',"
            " '0000-00-00', NULL, NULL, x'00ff', x'00', x'01020304', 'c,a', 0, 0, '', '', '',"
            " -3.40282e38, 1e308, 0, '', NULL)"
        )
    return start


def binlog_rows(source, db, start):
    events = read_changes(source, start=start, end=None, tables=[f"{db}.awkward"],
                          server_id=next(_server_ids))
    return {e.after["id"]: e.after for e in events if isinstance(e, ChangeEvent)}


def snapshot_rows(source, db, position):
    table = read_catalog(source, [(db, "awkward")]).table(db, "awkward")
    rows = {}
    for chunk in plan_chunks(source, table, chunk_rows=1):
        for event in read_chunk(source, table, chunk, position=position):
            assert event.op == "r" and event.before is None
            rows[event.after["id"]] = event.after
    return rows


def typed(row):
    return {name: (type(value).__name__, value) for name, value in row.items()}


def test_binlog_and_snapshot_give_identical_typed_values(mariadb, mysql_source, fresh_database):
    start = insert_awkward(mariadb, fresh_database)
    position = current_position(mysql_source)
    from_binlog = binlog_rows(mysql_source, fresh_database, start)
    from_snapshot = snapshot_rows(mysql_source, fresh_database, position)
    for key, expected in EXPECTED.items():
        assert typed(from_binlog[key]) == typed(expected), f"binlog row {key}"
        assert typed(from_snapshot[key]) == typed(expected), f"snapshot row {key}"
        # Decimal equality ignores trailing zeros: compare the digits too.
        for name in ("dec65", "dec2"):
            assert str(from_binlog[key][name]) == str(from_snapshot[key][name])
    assert list(from_binlog[1]) == list(from_snapshot[1])  # column order of the table


def test_zero_dates_counted_or_refused(mariadb, mysql_source, fresh_database):
    start = insert_awkward(mariadb, fresh_database)
    stats = ValueStats()
    list(read_changes(mysql_source, start=start, end=None, tables=[f"{fresh_database}.awkward"],
                      server_id=next(_server_ids), stats=stats))
    assert stats.zero_dates == 4  # d, zdt, zts of row 1; zdt of row 2
    strict = mariadb.source(zero_dates="error")
    with pytest.raises(SourceError) as error:
        list(read_changes(strict, start=start, end=None, tables=[f"{fresh_database}.awkward"],
                          server_id=next(_server_ids)))
    assert "zero_dates: as_null" in error.value.hint
    table = read_catalog(strict, [(fresh_database, "awkward")]).tables[0]
    chunk = plan_chunks(strict, table, chunk_rows=10)[0]
    with pytest.raises(SourceError):
        list(read_chunk(strict, table, chunk, position=start))


# float32 values whose shortest decimal has 7-9 digits (MariaDB prints 6), a subnormal and
# FLT_MAX: a snapshot must read what the binlog carries, not the server's 6-digit text.
FLOATS = [3.4028235e38, -3.4028235e38, 16777216.0, 1.2345678, 0.3, 1e-45, 1.1754944e-38,
          123456.79, 7.0]


def test_a_float_reads_the_same_from_binlog_and_snapshot(mariadb, mysql_source, fresh_database):
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE floats (id INT PRIMARY KEY, f FLOAT)")
        start = current_position(mysql_source)
        exact = [float(np.float32(value)) for value in FLOATS]  # 3.4028235e38 is out of range
        cursor.executemany("INSERT INTO floats VALUES (%s, %s)", list(enumerate(exact)))
    position = current_position(mysql_source)
    events = read_changes(mysql_source, start=start, end=None,
                          tables=[f"{fresh_database}.floats"], server_id=next(_server_ids))
    from_binlog = {e.after["id"]: e.after["f"] for e in events if isinstance(e, ChangeEvent)}
    table = read_catalog(mysql_source, [(fresh_database, "floats")]).tables[0]
    from_snapshot = {event.after["id"]: event.after["f"]
                     for chunk in plan_chunks(mysql_source, table, chunk_rows=4)
                     for event in read_chunk(mysql_source, table, chunk, position=position)}
    assert from_binlog == dict(enumerate(FLOATS))
    assert from_snapshot == from_binlog
