"""Catalog and chunked snapshot against the real server."""

from __future__ import annotations

import pickle

import pytest

from replicator.model.catalog import MySQLType
from replicator.model.changes import BinlogPosition
from replicator.source.catalog import list_tables, read_catalog
from replicator.source.positions import current_position
from replicator.source.snapshot import plan_chunks, read_chunk

pytestmark = pytest.mark.mysql


def run(mariadb, database, *statements):
    with mariadb.root_connection(database) as connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def test_catalog_columns_types_and_keys(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db,
        "CREATE TABLE Orders (b VARCHAR(20) CHARACTER SET latin1 NOT NULL, a INT UNSIGNED NOT NULL,"
        " amount DECIMAL(38,10), doc JSON, at DATETIME(6), PRIMARY KEY (b, a))",
        "CREATE TABLE nokey (x INT)")
    catalog = read_catalog(mysql_source, [(db, "orders"), (db, "nokey"), (db, "missing")])
    assert catalog.live
    orders = catalog.table(db, "ORDERS")
    assert orders.table == "Orders"
    assert orders.primary_key == ("b", "a")  # key order, not column order
    assert [c.name for c in orders.columns] == ["b", "a", "amount", "doc", "at"]
    assert [c.ordinal for c in orders.columns] == [1, 2, 3, 4, 5]
    assert orders.column("A").mysql_type == MySQLType.parse("int(10) unsigned")
    assert orders.column("amount").mysql_type == MySQLType(name="decimal", precision=38, scale=10)
    assert orders.column("doc").mysql_type.name == "json"  # MariaDB's LONGTEXT + json_valid
    assert orders.column("at").mysql_type.fsp == 6
    assert orders.column("b").charset == "latin1" and not orders.column("b").nullable
    assert orders.column("amount").charset is None and orders.column("amount").nullable
    assert catalog.table(db, "nokey").primary_key == ()
    assert catalog.table(db, "missing") is None
    assert sorted(list_tables(mysql_source, db)) == ["Orders", "nokey"]


def test_composite_key_chunks_cover_every_row_once(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE t (g VARCHAR(5), n INT, v INT, PRIMARY KEY (g, n))")
    values = ", ".join(f"('{g}', {n}, {n})" for g in "abc" for n in range(17))
    run(mariadb, db, f"INSERT INTO t VALUES {values}")
    table = read_catalog(mysql_source, [(db, "t")]).tables[0]
    chunks = plan_chunks(mysql_source, table, chunk_rows=10)
    assert len(chunks) == 6  # 51 rows: five full chunks, a last one with 1 row
    assert chunks[0].lower is None and chunks[-1].upper is None
    assert pickle.loads(pickle.dumps(chunks[2])) == chunks[2]
    position = BinlogPosition("mysql-bin.000001", 4)
    seen = []
    for chunk in chunks:
        events = list(read_chunk(mysql_source, table, chunk, position=position))
        assert len(events) <= 10
        seen.extend((e.after["g"], e.after["n"]) for e in events)
        assert all(e.position == position and e.op == "r" for e in events)
    assert sorted(seen) == sorted((g, n) for g in "abc" for n in range(17))
    assert len(seen) == len(set(seen))


def test_table_without_key_is_one_chunk(mariadb, mysql_source, fresh_database):
    db = fresh_database
    run(mariadb, db, "CREATE TABLE t (x INT)", "INSERT INTO t VALUES (1), (1), (2)")
    table = read_catalog(mysql_source, [(db, "t")]).tables[0]
    chunks = plan_chunks(mysql_source, table, chunk_rows=1)
    assert len(chunks) == 1
    events = list(read_chunk(mysql_source, table, chunks[0],
                             position=current_position(mysql_source)))
    assert sorted(e.after["x"] for e in events) == [1, 1, 2]
    assert len({e.row_index for e in events}) == 3
    # Its one task streams it in batches (never holding the table): the row indexes go on
    # across batches.
    from replicator.source.snapshot import read_chunk_batches

    batches = list(read_chunk_batches(mysql_source, table, chunks[0],
                                      position=current_position(mysql_source), batch_rows=2))
    assert [b.num_rows for b in batches] == [2, 1]
    assert [i for b in batches for i in b.column("__replicator_row_index").to_pylist()] == [0, 1, 2]


def test_empty_table_has_one_empty_chunk(mariadb, mysql_source, fresh_database):
    run(mariadb, fresh_database, "CREATE TABLE t (id INT PRIMARY KEY)")
    table = read_catalog(mysql_source, [(fresh_database, "t")]).tables[0]
    chunks = plan_chunks(mysql_source, table, chunk_rows=100)
    assert len(chunks) == 1
    assert list(read_chunk(mysql_source, table, chunks[0],
                           position=current_position(mysql_source))) == []


def test_chunk_reads_use_the_key_index_range_and_bind_hostile_keys(mariadb, mysql_source,
                                                                    fresh_database):
    # String keys with quotes, backslashes, emoji and a latin1 column travel as hex literals
    # (connectorx takes no bind parameters): every row once, in key order, and MariaDB serves
    # each chunk's expanded predicate as a range of the primary key, not a full scan.
    from replicator.source.snapshot import ROW_INDEX_BAND, read_chunk_batch

    db = fresh_database
    run(mariadb, db, "CREATE TABLE h (g VARCHAR(20) CHARACTER SET latin1, s VARCHAR(20),"
        " n INT, v VARCHAR(20), PRIMARY KEY (g, s, n))")
    keys = [(g, s, n) for g in ("a", "café", "O'B") for s in ("x\\'y", "😀", "")
            for n in range(3)]
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.executemany("INSERT INTO h VALUES (%s, %s, %s, %s)",
                           [(*key, f"v{i}") for i, key in enumerate(keys)])
    table = read_catalog(mysql_source, [(db, "h")]).tables[0]
    chunks = plan_chunks(mysql_source, table, chunk_rows=4)
    assert len(chunks) == 7
    position = current_position(mysql_source)
    seen = []
    for chunk in chunks:
        batch = read_chunk_batch(mysql_source, table, chunk, position=position)
        assert batch.num_rows <= 4
        indexes = batch.column("__replicator_row_index").to_pylist()
        assert indexes == list(range(chunk.index * ROW_INDEX_BAND,
                                     chunk.index * ROW_INDEX_BAND + batch.num_rows))
        seen.extend(zip(batch.column("g").to_pylist(), batch.column("s").to_pylist(),
                        batch.column("n").to_pylist(), strict=True))
    assert sorted(seen) == sorted(keys) and len(set(seen)) == len(keys)
    from replicator.source.snapshot import chunk_select
    from replicator.source.snapshot_columns import sql_literal

    middle = chunks[3]
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + chunk_select(table, middle, sql_literal))
        names = [d[0] for d in cursor.description]
        plan = dict(zip(names, cursor.fetchone(), strict=True))
    assert plan["key"] == "PRIMARY" and plan["type"] == "range", plan
