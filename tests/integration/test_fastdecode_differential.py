"""The fast decoding path against the real server: the same events as ``read_changes``.

One corpus of binlog covers every MySQL type MariaDB writes, with the awkward values (NULLs
everywhere, zero dates, DECIMAL(65,30) and negative decimals, every fsp of DATETIME /
TIMESTAMP / TIME incl. negative TIME, BLOB/JSON/SET/BIT(1..64), latin1 and utf8mb4, ENUM,
YEAR, BIGINT UNSIGNED max, FLOAT/DOUBLE), multi-row events, ALTER mid-stream, composite
keys, updates/deletes, a non-transactional table and a binlog file switch. Events are
compared field by field and value by value *with their types and reprs* (Decimal('5.00') is
not Decimal('5.0')).
"""

from __future__ import annotations

import itertools

import pytest

from replicator.errors import SourceError
from replicator.model.changes import ChangeEvent
from replicator.source.binlog import read_changes
from replicator.source.fast.counters import FastDecodeCounters
from replicator.source.fast.reader import read_changes_fast
from replicator.source.positions import current_position
from replicator.source.values import ValueStats

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(7101)


def typed(image):
    if image is None:
        return None
    return tuple((name, type(value).__name__, repr(value)) for name, value in image.items())


def strict(events):
    """Everything a consumer can see of the events, values with their types."""
    out = []
    for event in events:
        if isinstance(event, ChangeEvent):
            out.append((event.table, event.op, event.position, event.row_index, event.ts_ms,
                        event.gtid, event.transaction_id, event.end_position,
                        typed(event.before), typed(event.after)))
        else:
            out.append(event)
    return out


def both(source, start, end=None, tables=None, **fast_options):
    slow = list(read_changes(source, start=start, end=end, tables=tables,
                             server_id=next(_server_ids), fast=False))
    fast = list(read_changes_fast(source, start=start, end=end, tables=tables,
                                  server_id=next(_server_ids), **fast_options))
    return slow, fast


def run(mariadb, database, *statements):
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_mode = ''")  # zero dates, out-of-list ENUM values
        for statement in statements:
            cursor.execute(statement)


NUMBERS = """CREATE TABLE numbers (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE,
  d65 DECIMAL(65,30), d12 DECIMAL(12,2), d5 DECIMAL(5,5), d18 DECIMAL(18,0),
  d10 DECIMAL(10,4) UNSIGNED, d9 DECIMAL(9,9), d27 DECIMAL(27,9),
  y YEAR, b1 BIT(1), b8 BIT(8), b9 BIT(9), b17 BIT(17), b64 BIT(64)
)"""
NUMBER_ROWS = [
    "INSERT INTO numbers VALUES (1, -128, 255, -32768, 65535, -8388608, 16777215, "
    "-2147483648, 4294967295, -9223372036854775808, 18446744073709551615, 1.1, -2.5e-300, "
    "'-12345678901234567890123456789012345.123456789012345678901234567890', -123.45, "
    "-0.12345, -999999999999999999, 999999.9999, 0.000000001, "
    "-123456789012345678.123456789, 1901, 1, 255, 511, 65536, 18446744073709551615)",
    "INSERT INTO numbers VALUES (2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, "
    "9223372036854775807, 0, -3.4028234e38, 1.7976931348623157e308, "
    "'99999999999999999999999999999999999.999999999999999999999999999999', 0, 0, 0, 0, "
    "-0.999999999, 0.000000001, 2155, 0, 0, 0, 0, 0)",
    "INSERT INTO numbers (id) VALUES (3)",
    "INSERT INTO numbers (id, y, f, d, d12, d65) VALUES (4, 0, 0, -0.0, 5, -0.000000000000000000000000000001), "
    "(5, 2000, 3.14159, 1e-10, -0.01, 1), (6, NULL, NULL, NULL, 99999.5, -1.5)",
    "UPDATE numbers SET i = i + 1, d12 = -d12, b9 = 5 WHERE id IN (1, 2)",
    "DELETE FROM numbers WHERE id = 5",
    "UPDATE numbers SET id = 11, i = NULL WHERE id = 1",  # a key move: the whole old row
]

TEMPORAL = """CREATE TABLE temporal (
  id INT PRIMARY KEY,
  dt0 DATETIME, dt1 DATETIME(1), dt2 DATETIME(2), dt3 DATETIME(3), dt4 DATETIME(4),
  dt5 DATETIME(5), dt6 DATETIME(6),
  ts0 TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL, ts2 TIMESTAMP(2) NULL, ts3 TIMESTAMP(3) NULL,
  ts4 TIMESTAMP(4) NULL, ts5 TIMESTAMP(5) NULL, ts6 TIMESTAMP(6) NULL,
  tm0 TIME, tm1 TIME(1), tm2 TIME(2), tm3 TIME(3), tm4 TIME(4), tm5 TIME(5), tm6 TIME(6),
  d DATE
)"""


def _temporal_row(row_id: int, datetime: str, timestamp: str, time: str, date: str) -> str:
    values = [str(row_id)] + [f"'{datetime}'"] * 7 + [timestamp] * 7 + [f"'{time}'"] * 7
    return f"INSERT INTO temporal VALUES ({', '.join(values)}, '{date}')"


TEMPORAL_ROWS = [
    _temporal_row(1, "2024-02-29 23:59:59.987654", "'2024-02-29 23:59:59.987654'",
                  "-838:59:59.999999", "2024-02-29"),
    _temporal_row(2, "1000-01-01 00:00:00", "'1970-01-01 00:00:01'", "838:59:59", "1000-01-01"),
    _temporal_row(3, "9999-12-31 23:59:59.999999", "'2038-01-19 03:14:07.999999'",
                  "-00:00:00.5", "9999-12-31"),
    _temporal_row(4, "0000-00-00 00:00:00", "0", "00:00:00", "0000-00-00"),
    _temporal_row(5, "2024-01-02 03:04:05.1", "'2024-01-02 03:04:05.05'", "-01:02:03.000001",
                  "2024-00-00"),
    _temporal_row(6, "2024-01-02 03:04:05.000001", "'2024-01-02 03:04:05.000001'",
                  "12:34:56.654321", "2024-01-00"),
    "INSERT INTO temporal (id) VALUES (7)",
    "UPDATE temporal SET tm3 = '-10:00:00.001', dt6 = '2000-01-01 00:00:00.5' WHERE id IN (1, 4, 7)",
    "DELETE FROM temporal WHERE id IN (2, 4)",
    "UPDATE temporal SET id = 17, tm6 = NULL WHERE id = 1",  # a key move
]

TEXTS = """CREATE TABLE texts (
  id INT PRIMARY KEY,
  c CHAR(10) CHARACTER SET utf8mb4, v VARCHAR(300) CHARACTER SET utf8mb4,
  vl VARCHAR(20) CHARACTER SET latin1, cl CHAR(5) CHARACTER SET latin1,
  va VARCHAR(10) CHARACTER SET ascii, v3 VARCHAR(10) CHARACTER SET utf8mb3,
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT CHARACTER SET latin1,
  bn BINARY(4), vb VARBINARY(300), tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  j JSON, e ENUM('', 'a', 'b b', 'ü'), e2 ENUM('x') NOT NULL DEFAULT 'x',
  s SET('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'), s1 SET('one'),
  g POINT
) DEFAULT CHARSET = utf8mb4"""
TEXT_ROWS = [
    "INSERT INTO texts VALUES (1, 'emoji 😀', 'O''Brien \"q\" back\\\\slash\nnew\tline', "
    "'café €', 'àé', 'plain', 'ünï', '', 'text', REPEAT('m', 70000), 'latin ÿ', "
    "x'0102', x'00ff00', x'', x'00', REPEAT(x'ab', 70000), x'deadbeef', "
    "'{\"a\": [1, 2.5, \"x\"], \"b\": null}', 'b b', 'x', 'a,c,i', 'one', POINT(1.5, -2))",
    "INSERT INTO texts VALUES (2, '', '', '', '', '', '', '', '', '', '', x'', x'', x'', x'', "
    "x'', x'', '[]', '', 'x', '', '', NULL)",
    "INSERT INTO texts (id, e) VALUES (3, 'nope')",  # sql_mode '': an invalid ENUM is index 0
    "INSERT INTO texts (id) VALUES (4), (5), (6)",
    "UPDATE texts SET v = CONCAT(v, '✓'), s = 'b,d', bl = x'ff' WHERE id IN (1, 2, 4)",
    "DELETE FROM texts WHERE id IN (5, 6)",
    "UPDATE texts SET id = 14, v = 'moved' WHERE id = 1",  # a key move of the awkward row
]

COMPOSITE = """CREATE TABLE composite (
  a INT, b VARCHAR(10), c DATETIME(3), v INT, PRIMARY KEY (a, b, c)
)"""
COMPOSITE_ROWS = [
    "INSERT INTO composite VALUES (1, 'x', '2024-01-01 00:00:00.001', 1), "
    "(1, 'y', '2024-01-01 00:00:00.002', 2), (2, 'x', '2024-01-01', 3)",
    "UPDATE composite SET b = 'z', v = v * 10 WHERE a = 1",  # a key update, two rows
    "DELETE FROM composite WHERE a = 2",
]


@pytest.fixture(scope="module")
def corpus(mariadb, mysql_source, tmp_path_factory):
    """(database, start, end) of a binlog range holding the whole corpus."""
    database = "fastdecode_corpus"
    with mariadb.root_connection() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {database}")
        cursor.execute(f"CREATE DATABASE {database}")
    start = current_position(mysql_source)
    run(mariadb, database, NUMBERS, TEMPORAL, TEXTS, COMPOSITE,
        "CREATE TABLE plain (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=Aria",
        "CREATE TABLE other (id INT PRIMARY KEY)")
    run(mariadb, database, *NUMBER_ROWS, *TEMPORAL_ROWS)
    run(mariadb, database, "FLUSH BINARY LOGS")  # the range crosses a file
    run(mariadb, database, *TEXT_ROWS, *COMPOSITE_ROWS,
        "INSERT INTO plain VALUES (1, 'aria'), (2, NULL)",  # non-transactional: Query COMMIT
        "ALTER TABLE numbers ADD COLUMN extra VARCHAR(5) DEFAULT 'new', DROP COLUMN d9",
        "INSERT INTO numbers (id, d12) VALUES (7, 1.5)",
        "ALTER TABLE numbers MODIFY d12 DECIMAL(20,6)",
        "UPDATE numbers SET d12 = d12 / 3 WHERE id IN (1, 7)")
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        connection.begin()  # one transaction over several tables, multi-row events
        cursor.execute("INSERT INTO other VALUES (1), (2), (3)")
        cursor.execute("UPDATE numbers SET ti = 1")
        cursor.execute("INSERT INTO composite VALUES (9, 'q', '2024-01-01', NULL)")
        cursor.execute("DELETE FROM other")
        connection.commit()
        connection.begin()
        cursor.execute("INSERT INTO other VALUES (99)")
        connection.rollback()  # never reaches the binlog
    end = current_position(mysql_source)
    return database, start, end


def test_every_type_decodes_identically(mysql_source, corpus):
    database, start, end = corpus
    counters = FastDecodeCounters()
    slow, fast = both(mysql_source, start, end, counters=counters)
    rows = [e for e in slow if isinstance(e, ChangeEvent) and e.table.startswith(database)]
    assert len(rows) > 40 and {e.op for e in rows} == {"c", "u", "d"}
    assert strict(fast) == strict(slow)
    assert fast == slow
    assert counters.rows_fast >= len(rows) and counters.rows_library == 0
    assert counters.table_maps_cached > 0


def test_library_fallback_of_the_fast_reader_gives_the_same_events(mysql_source, corpus):
    _, start, end = corpus
    counters = FastDecodeCounters()
    slow = list(read_changes(mysql_source, start=start, end=end, tables=None,
                             server_id=next(_server_ids), fast=False))
    forced = list(read_changes_fast(mysql_source, start=start, end=end, tables=None,
                                    server_id=next(_server_ids), force_library=True,
                                    counters=counters))
    assert strict(forced) == strict(slow)
    assert counters.rows_fast == 0 and counters.rows_library > 40
    assert counters.events_library == sum(counters.fallback_reasons.values())


def test_awkward_values_are_the_contract_types(mysql_source, corpus):
    """Spot checks against the pinned value types (not only against read_changes)."""
    import datetime as dt
    from decimal import Decimal

    database, start, end = corpus
    _, fast = both(mysql_source, start, end, tables=[f"{database}.numbers",
                                                     f"{database}.temporal",
                                                     f"{database}.texts"])
    first = {(e.table.split(".")[1], e.after["id"]): e.after for e in fast
             if isinstance(e, ChangeEvent) and e.op == "c"}
    n1 = first[("numbers", 1)]
    assert n1["biu"] == 2**64 - 1 and n1["b64"] == 2**64 - 1 and n1["b9"] == 511
    assert n1["d65"] == Decimal("-12345678901234567890123456789012345.123456789012345678901234567890")
    assert repr(n1["d12"]) == "Decimal('-123.45')" and n1["f"] == 1.1 and n1["y"] == 1901
    assert first[("numbers", 4)]["y"] == 0
    t1 = first[("temporal", 1)]
    assert t1["dt6"] == dt.datetime(2024, 2, 29, 23, 59, 59, 987654)
    assert t1["ts3"].tzinfo is dt.UTC
    assert t1["tm6"] == -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999)
    assert t1["tm1"] == -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=900000)
    t4 = first[("temporal", 4)]
    assert t4["dt0"] is None and t4["ts0"] is None and t4["d"] is None
    x1 = first[("texts", 1)]
    assert x1["c"] == "emoji 😀" and x1["vl"] == "café €" and x1["bn"] == b"\x01\x02\x00\x00"
    assert x1["s"] == "a,c,i" and x1["e"] == "b b" and x1["tb"] == b"" and len(x1["mt"]) == 70000
    assert first[("texts", 2)]["s"] == "" and first[("texts", 3)]["e"] == ""


def test_boundaries_and_table_filters_match(mysql_source, corpus):
    database, start, end = corpus
    slow, _ = both(mysql_source, start, end)
    cuts = sorted({e.end_position for e in slow if isinstance(e, ChangeEvent)},
                  key=lambda p: (p.sequence, p.pos))
    tables = [f"{database}.NUMBERS", f"{database}.composite"]
    for cut in (cuts[1], cuts[len(cuts) // 2], cuts[-2]):
        for range_ in ((start, cut), (cut, end)):
            slow_part, fast_part = both(mysql_source, *range_, tables=tables)
            assert strict(fast_part) == strict(slow_part)
            assert all(e.table.split(".")[1] in ("numbers", "composite")
                       for e in fast_part if isinstance(e, ChangeEvent))
    assert list(read_changes_fast(mysql_source, start=end, end=end, tables=None,
                                  server_id=next(_server_ids))) == []


def test_zero_dates_counted_or_refused_alike(mysql_source, corpus):
    database, start, end = corpus
    tables = [f"{database}.temporal"]
    slow_stats, fast_stats = ValueStats(), ValueStats()
    list(read_changes(mysql_source, start=start, end=end, tables=tables,
                      server_id=next(_server_ids), stats=slow_stats, fast=False))
    list(read_changes_fast(mysql_source, start=start, end=end, tables=tables,
                           server_id=next(_server_ids), stats=fast_stats))
    assert fast_stats.zero_dates == slow_stats.zero_dates > 0
    strict_source = type(mysql_source)(**{**mysql_source.__dict__, "zero_dates": "error"})
    with pytest.raises(SourceError, match="zero date"):
        list(read_changes_fast(strict_source, start=start, end=end, tables=tables,
                               server_id=next(_server_ids)))


def test_minimal_row_image_is_refused_with_a_hint(tmp_path):
    from replicator.source.throwaway import ThrowawayMariaDB

    with ThrowawayMariaDB(extra_args=["--binlog-row-image=MINIMAL"]) as server:
        source = server.source()
        with server.root_connection() as connection, connection.cursor() as cursor:
            cursor.execute("CREATE DATABASE m")
            cursor.execute("CREATE TABLE m.t (id INT PRIMARY KEY, a INT, b INT)")
            cursor.execute("INSERT INTO m.t VALUES (1, 1, 1)")
            start = current_position(source)
            cursor.execute("UPDATE m.t SET a = 2 WHERE id = 1")
        with pytest.raises(SourceError, match="binlog_row_image") as raised:
            list(read_changes_fast(source, start=start, end=None, tables=["m.t"],
                                   server_id=next(_server_ids)))
        assert "FULL" in raised.value.hint


def test_read_changes_routes_through_the_fast_path_unless_turned_off(mysql_source, corpus,
                                                                     monkeypatch):
    from replicator.source.fast.counters import TOTALS

    _, start, end = corpus
    before = TOTALS.rows_fast + TOTALS.rows_library
    routed = list(read_changes(mysql_source, start=start, end=end, tables=None,
                               server_id=next(_server_ids)))
    assert TOTALS.rows_fast + TOTALS.rows_library > before  # went through the fast reader
    monkeypatch.setenv("REPLICATOR_FAST_DECODE", "0")
    before = TOTALS.rows_fast + TOTALS.rows_library
    library = list(read_changes(mysql_source, start=start, end=end, tables=None,
                                server_id=next(_server_ids)))
    assert TOTALS.rows_fast + TOTALS.rows_library == before  # the library reader
    assert strict(routed) == strict(library)
