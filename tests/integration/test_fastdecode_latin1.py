"""MySQL's latin1 is not Python's cp1252: the five bytes cp1252 leaves undefined (0x81, 0x8D,
0x8F, 0x90, 0x9D) are the C1 controls U+0081 ... in MySQL, legal values any client can store.
The fast decoder decoded latin1 with Python's cp1252 (python-mysql-replication's choice) and
stopped on them; found by tests/integration/test_fastdecode_ddl_properties.py (issue 29).
"""

from __future__ import annotations

import itertools

import pytest

from replicator.errors import SourceError
from replicator.model.changes import ChangeEvent
from replicator.source.binlog import read_changes
from replicator.source.fast.columnar import TableChunk, read_change_batches
from replicator.source.fast.reader import read_changes_fast
from replicator.source.positions import current_position
from tests.fixtures.decoders import decoder  # noqa: F401  (both decoders)

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(8001)


@pytest.mark.usefixtures("decoder")
def test_every_latin1_byte_decodes_to_what_select_reads(mariadb, mysql_source, fresh_database):
    every_byte = bytes(range(256)).hex()
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        # VARCHAR(300) has a 2-byte length prefix, CHAR(5) and TINYTEXT a 1-byte one.
        cursor.execute("CREATE TABLE l (id INT PRIMARY KEY, v VARCHAR(300) CHARACTER SET latin1, "
                       "c CHAR(5) CHARACTER SET latin1, t TINYTEXT CHARACTER SET latin1)")
        start = current_position(mysql_source)
        cursor.execute(f"INSERT INTO l VALUES (1, x'{every_byte}', x'818d8f909d', "
                       "CONCAT('caf', x'e9', x'81', ' ', x'80'))")
        cursor.execute("SELECT v, c, t FROM l")  # the server's own latin1 -> utf8mb4
        (source,) = cursor.fetchall()
        end = current_position(mysql_source)
    assert source[1] == "\x81\x8d\x8f\x90\x9d" and source[2] == "caf\u00e9\x81 \u20ac"
    table = f"{fresh_database}.l"

    events = [e for e in read_changes_fast(mysql_source, start=start, end=end, tables=[table],
                                           server_id=next(_server_ids))
              if isinstance(e, ChangeEvent)]
    assert [(e.after["v"], e.after["c"], e.after["t"]) for e in events] == [source]
    rows = [row for item in read_change_batches(mysql_source, start=start, end=end,
                                                tables=[table], server_id=next(_server_ids))
            if isinstance(item, TableChunk) for row in item.data.to_pylist()]
    assert [(r["v"], r["c"], r["t"]) for r in rows] == [source]
    # python-mysql-replication still stops on them (Python's cp1252): the library reader
    # (source/binlog.py) cannot read such a table; the fast reader is the default.
    with pytest.raises(UnicodeDecodeError):
        list(read_changes(mysql_source, start=start, end=end, tables=[table],
                          server_id=next(_server_ids), fast=False))
    # The fast reader's own library fallback (a column type the generated decoders leave to
    # the library, e.g. MySQL's binary JSON) stops too, but as a SourceError naming the table
    # and the transaction, which the CLI reports as one line with a hint.
    with pytest.raises(SourceError, match=r"\.l in the transaction at mysql-bin\.\d+:\d+ .*"
                       "python-mysql-replication: UnicodeDecodeError"):
        list(read_changes_fast(mysql_source, start=start, end=end, tables=[table],
                               server_id=next(_server_ids), force_library=True))
