"""Admission control and range splitting find real transaction boundaries on a real server."""

from __future__ import annotations

import itertools

import pytest

from replicator.source.binlog_ranges import (
    boundary_after_rows,
    scan_boundaries,
    small_batch,
    split_range,
)
from replicator.source.positions import current_position

pytestmark = pytest.mark.mysql


def _transactions(mariadb, database: str, count: int, rows_each: int) -> list:
    """Commit ``count`` transactions of single-row inserts; the boundary after each one."""
    boundaries = []
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        for txn in range(count):
            cursor.execute("BEGIN")
            for row in range(rows_each):
                cursor.execute("INSERT INTO t VALUES (%s, %s)", (txn * 1000 + row, "x"))
            cursor.execute("COMMIT")
            boundaries.append(current_position(mariadb.source()))
    return boundaries


def test_boundary_after_rows_stops_at_a_commit(mariadb, mysql_source, fresh_database):
    start = current_position(mysql_source)
    after = _transactions(mariadb, fresh_database, count=10, rows_each=3)
    head = after[-1]
    # 7 rows need three transactions of 3: the boundary after the third.
    assert boundary_after_rows(mysql_source, start, head, 7) == after[2]
    assert boundary_after_rows(mysql_source, start, head, 1) == after[0]
    assert boundary_after_rows(mysql_source, start, head, 10_000) == head
    scanned = [b.position for b in scan_boundaries(mysql_source, start, head)]
    assert scanned[-len(after):] == after


def test_boundaries_cross_a_rotated_file(mariadb, mysql_source, fresh_database):
    start = current_position(mysql_source)
    first = _transactions(mariadb, fresh_database, count=2, rows_each=2)
    with mariadb.root_connection() as connection, connection.cursor() as cursor:
        cursor.execute("FLUSH BINARY LOGS")
        cursor.execute(f"INSERT INTO `{fresh_database}`.t VALUES (99999, 'y')")
    head = current_position(mysql_source)
    assert head.file != start.file
    found = [b.position for b in scan_boundaries(mysql_source, start, head)]
    assert first[0] in found and found[-1] == head
    assert boundary_after_rows(mysql_source, first[-1], head, 1) == head


def test_split_range_cuts_at_boundaries(mariadb, mysql_source, fresh_database):
    start = current_position(mysql_source)
    after = _transactions(mariadb, fresh_database, count=8, rows_each=2)
    parts = split_range(mysql_source, start, after[-1], 4)
    assert len(parts) == 4
    assert parts[0][0] == start and parts[-1][1] == after[-1]
    for (_, end), (begin, _) in itertools.pairwise(parts):
        assert end == begin and end in after


def test_large_ranges_skip_ahead_to_about_max_rows(mariadb, mysql_source, fresh_database):
    # 2,500 single-row transactions (~10k events): past the sample, so the skip path answers.
    start = current_position(mysql_source)
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        for row in range(2500):
            cursor.execute("INSERT INTO t VALUES (%s)", (row,))  # autocommit: one transaction
    head = current_position(mysql_source)
    boundaries = [b.position for b in scan_boundaries(mysql_source, start, head)]
    found = boundary_after_rows(mysql_source, start, head, 1500)
    assert found in boundaries
    assert 1200 <= boundaries.index(found) <= 1800
    assert boundary_after_rows(mysql_source, start, head, 100_000) == head



def test_a_small_batch_is_answered_from_one_listing(mariadb, mysql_source, fresh_database):
    start = current_position(mysql_source)
    after = _transactions(mariadb, fresh_database, count=8, rows_each=2)
    head = after[-1]
    # All of (start, head] is one batch: the same ranges the two separate listings give.
    assert small_batch(mysql_source, start, head, 10_000, 4) == split_range(
        mysql_source, start, head, 4)
    assert small_batch(mysql_source, start, head, 10_000, 1) == [(start, head)]
    assert small_batch(mysql_source, start, head, 10_000, 4, part_rows=5) == split_range(
        mysql_source, start, head, 4, part_rows=5)
    # Too few bytes for a second part's rows (at most one per 19 bytes): no listing needed,
    # and the answer the listings give.
    assert small_batch(mysql_source, start, head, 10_000, 4, part_rows=10_000) == [
        (start, head)] == split_range(mysql_source, start, head, 4, part_rows=10_000)
    # More rows than one batch takes: boundary_after_rows would end it earlier.
    assert boundary_after_rows(mysql_source, start, head, 5) < head
    assert small_batch(mysql_source, start, head, 5, 4) is None
