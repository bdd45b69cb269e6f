"""Every rows event is decoded with the Table_map that precedes it (issue 29).

The held-out case: ``sku VARCHAR(40)`` in utf8mb4 (160 bytes, a one-byte length prefix), a row,
``MODIFY sku VARCHAR(80)`` (320 bytes: a two-byte prefix), another row, all in one decode
range. Both shapes map to one change-batch type (string), so the columnar reader put their
rows in one chunk -- and decoded the second rows event with the first map's decoder. It
crashed (struct.error); a misread that happened to fit would have written wrong values.
"""

from __future__ import annotations

import itertools

import pytest

from replicator.model.changes import ChangeEvent
from replicator.source.binlog import read_changes
from replicator.source.fast.columnar import TableChunk, read_change_batches
from replicator.source.fast.reader import read_changes_fast
from replicator.source.positions import current_position
from tests.fixtures.decoders import decoder  # noqa: F401  (both decoders)

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(7901)


def _run(mariadb, database, *statements):
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
        connection.commit()


@pytest.mark.usefixtures("decoder")
def test_rows_before_and_after_a_widening_past_255_bytes_decode_with_their_own_map(
        mariadb, mysql_source, fresh_database):
    db = fresh_database
    _run(mariadb, db, "CREATE TABLE line_items (id INT PRIMARY KEY, sku VARCHAR(40) NOT NULL, "
         "qty INT NOT NULL, note VARCHAR(20)) DEFAULT CHARSET=utf8mb4")
    start = current_position(mysql_source)
    _run(mariadb, db,
         "INSERT INTO line_items VALUES (1, 'SKU-1\U0001F600', 3, 'first')",
         "ALTER TABLE line_items MODIFY sku VARCHAR(80) NOT NULL",
         "INSERT INTO line_items VALUES (2, CONCAT(REPEAT('x', 59), '\u00e9'), 4, 'second')",
         "UPDATE line_items SET qty = 5, sku = 'SKU-1b' WHERE id = 1",
         "ALTER TABLE line_items MODIFY sku VARCHAR(60) NOT NULL",  # back under 255 bytes
         "INSERT INTO line_items VALUES (3, 'short', 6, NULL)")
    end = current_position(mysql_source)
    table = f"{db}.line_items"
    expected = [(1, "SKU-1\U0001F600", 3, "first"), (2, "x" * 59 + "\u00e9", 4, "second"),
                (1, "SKU-1b", 5, "first"), (3, "short", 6, None)]

    chunks = [item for item in read_change_batches(
        mysql_source, start=start, end=end, tables=[table], server_id=next(_server_ids))
        if isinstance(item, TableChunk)]
    rows = [row for chunk in chunks for row in chunk.data.to_pylist()]
    assert [(r["id"], r["sku"], r["qty"], r["note"]) for r in rows] == expected

    for read, options in ((read_changes_fast, {}), (read_changes_fast, {"force_library": True}),
                          (read_changes, {"fast": False})):
        events = [e for e in read(mysql_source, start=start, end=end, tables=[table],
                                  server_id=next(_server_ids), **options)
                  if isinstance(e, ChangeEvent)]
        assert [(e.after["id"], e.after["sku"], e.after["qty"], e.after["note"])
                for e in events] == expected, (read.__name__, options)


@pytest.mark.usefixtures("decoder")
def test_library_decoded_time_is_printed_with_its_own_maps_fsp(mariadb, mysql_source,
                                                                 fresh_database):
    """The library's rows (force_library, or a column type the generated decoders leave to it)
    print TIME by the fsp of their own Table_map: TIME(1), TIME(5) and TIME(0) share a builder
    (all text), and the first map's fsp printed 00:00:00.00001 as 00:00:00.0. Found by
    test_fastdecode_ddl_properties."""
    db = fresh_database
    _run(mariadb, db, "CREATE TABLE shifts (id INT PRIMARY KEY, t TIME(1))")
    start = current_position(mysql_source)
    _run(mariadb, db,
         "INSERT INTO shifts VALUES (1, '00:00:00.5')",
         "ALTER TABLE shifts MODIFY t TIME(5)",
         "INSERT INTO shifts VALUES (2, '00:00:00.00001')",
         "ALTER TABLE shifts MODIFY t TIME(0)",
         "INSERT INTO shifts VALUES (3, '-12:00:00')")
    end = current_position(mysql_source)
    # MySQL's own spelling of each value at its column's fsp then (SELECT prints the same).
    expected = ["00:00:00.5", "00:00:00.00001", "-12:00:00"]
    for force_library in (False, True):
        chunks = [item for item in read_change_batches(
            mysql_source, start=start, end=end, tables=[f"{db}.shifts"],
            server_id=next(_server_ids), force_library=force_library)
            if isinstance(item, TableChunk)]
        assert len({chunk.fingerprint for chunk in chunks}) == 1  # one builder for the three
        assert [row["t"] for chunk in chunks for row in chunk.data.to_pylist()] == expected, \
            force_library


def _members_and_padding_changed(mariadb, mysql_source, db):
    """A SET gains a member and a BINARY grows between two rows of one read: the change-batch
    types stay (string, binary), the members and the zero padding do not."""
    _run(mariadb, db, "CREATE TABLE tags (id INT PRIMARY KEY, s SET('w0') NOT NULL DEFAULT '', "
         "b BINARY(2))")
    start = current_position(mysql_source)
    _run(mariadb, db,
         "INSERT INTO tags VALUES (1, 'w0', x'0101')",
         "ALTER TABLE tags MODIFY s SET('w0', 'a0') NOT NULL, MODIFY b BINARY(4)",
         "INSERT INTO tags VALUES (2, 'w0,a0', x'0202')")
    end = current_position(mysql_source)
    expected = [(1, "w0", b"\x01\x01"), (2, "w0,a0", b"\x02\x02\x00\x00")]  # as SELECT gives
    return f"{db}.tags", start, end, expected


@pytest.mark.usefixtures("decoder")
def test_set_members_and_binary_padding_follow_each_rows_own_map(mariadb, mysql_source,
                                                                  fresh_database):
    table, start, end, expected = _members_and_padding_changed(mariadb, mysql_source,
                                                               fresh_database)
    for force_library in (False, True):
        events = [e for e in read_changes_fast(mysql_source, start=start, end=end,
                                               tables=[table], server_id=next(_server_ids),
                                               force_library=force_library)
                  if isinstance(e, ChangeEvent)]
        assert [(e.after["id"], e.after["s"], e.after["b"]) for e in events] == expected
        rows = [row for item in read_change_batches(
            mysql_source, start=start, end=end, tables=[table], server_id=next(_server_ids),
            force_library=force_library) if isinstance(item, TableChunk)
            for row in item.data.to_pylist()]
        assert [(r["id"], r["s"], r["b"]) for r in rows] == expected


def test_library_reader_converts_with_each_rows_own_map(mariadb, mysql_source, fresh_database):
    table, start, end, expected = _members_and_padding_changed(mariadb, mysql_source,
                                                               fresh_database)
    events = [e for e in read_changes(mysql_source, start=start, end=end, tables=[table],
                                      server_id=next(_server_ids), fast=False)
              if isinstance(e, ChangeEvent)]
    assert [(e.after["id"], e.after["s"], e.after["b"]) for e in events] == expected
