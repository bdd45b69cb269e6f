"""Decode partitions on a real server: a range larger than the sample is cut by bytes at real
transaction boundaries, about evenly, and decoding the parts one after the other gives exactly
the changes of decoding the whole range, in the same order (what compaction relies on)."""

from __future__ import annotations

import itertools

import pytest

from replicator.model.changes import SchemaChange
from replicator.source.binlog import read_changes
from replicator.source.binlog_ranges import SAMPLE_EVENTS, scan_boundaries, split_range
from replicator.source.positions import current_position

pytestmark = pytest.mark.mysql


def _workload(mariadb, database: str, transactions: int, rows_each: int) -> None:
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40))")
        for txn in range(transactions):
            cursor.execute("BEGIN")
            for row in range(rows_each):
                cursor.execute("INSERT INTO t VALUES (%s, %s)", (txn * 1000 + row, f"v{txn}"))
            if txn % 3 == 0:
                cursor.execute("UPDATE t SET v = 'u' WHERE id = %s", (txn * 1000,))
            cursor.execute("COMMIT")


def _decode(source, start, end, server_id):
    return [("ddl", e.sql) if isinstance(e, SchemaChange)
            else (e.position.file, e.position.pos, e.row_index, e.op, e.after)
            for e in read_changes(source, start=start, end=end, tables=None,
                                  server_id=server_id)]


def test_a_large_range_is_split_by_bytes_evenly_and_in_order(mariadb, mysql_source,
                                                             fresh_database):
    start = current_position(mysql_source)
    # ~4 events per row (GTID, table map, rows, XID per transaction): well past the sample
    _workload(mariadb, fresh_database, transactions=300, rows_each=8)
    end = current_position(mysql_source)
    assert start.file == end.file
    boundaries = list(scan_boundaries(mysql_source, start, end))
    assert len(boundaries) > 250
    rows_at = {b.position: b.rows_before for b in boundaries} | {start: 0}
    total = boundaries[-1].rows_before
    assert total > SAMPLE_EVENTS // 2

    for parts in (2, 3):
        ranges = split_range(mysql_source, start, end, parts)
        assert len(ranges) == parts
        assert ranges[0][0] == start and ranges[-1][1] == end
        for (_, cut), (begin, _) in itertools.pairwise(ranges):
            assert cut == begin and cut in rows_at  # a real transaction boundary
        sizes = [rows_at[b] - rows_at[a] for a, b in ranges]
        assert max(sizes) <= 1.25 * total / parts, sizes

    whole = _decode(mysql_source, start, end, server_id=7101)
    ranges = split_range(mysql_source, start, end, 3)
    pieces = [_decode(mysql_source, a, b, server_id=7102 + i) for i, (a, b) in enumerate(ranges)]
    assert all(pieces)
    assert [change for piece in pieces for change in piece] == whole


def test_the_batching_policy_limits_the_parts(mariadb, mysql_source, fresh_database):
    start = current_position(mysql_source)
    _workload(mariadb, fresh_database, transactions=20, rows_each=5)
    end = current_position(mysql_source)
    # ~107 rows: worth 2 parts of 60, not 4
    assert len(split_range(mysql_source, start, end, 4, part_rows=60)) == 2
    assert len(split_range(mysql_source, start, end, 4, part_rows=1000)) == 1
