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

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(7901)


def _run(mariadb, database, *statements):
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
        connection.commit()


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
