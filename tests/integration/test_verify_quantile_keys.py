"""verify by checksum over tables whose key is a string (``verify.quantiles``): ranges cut at
keys MariaDB reads off its primary-key index, bisected down to the fetch size, on real
MariaDB and DuckDB. A UUID key: one changed, one missing and one extra row named exactly,
fetching a small part of the table. The collation case: MariaDB's default collation is
case- and pad-insensitive, DuckDB compares bytes, so a cut such as ``k < 'k0002'`` selects
other rows on each side; that must cost fetches, never a false or a lost difference
('a' vs 'A' vs 'a ' keys, under the default collation and under a binary NO PAD one)."""

from __future__ import annotations

import pytest

from replicator.verify import verify_pipeline
from tests.integration.verify_support import (
    load,
    open_target,
    pipeline_file,
    recreate_database,
    replicate_by_snapshot,
)

pytestmark = [pytest.mark.mysql]

UUID_ROWS = 20_000
GENERATED = 400  # 'k0001', 'K0002', ...: mixed case, ordered differently by the two sides
# Small ranges, so the 400-row tables are cut and bisected several levels deep.
SMALL = {"factor": 4, "leaf_rows": 8, "query_rows": 64}

TABLES = """\
  - source: {database}.accounts
  - source: {database}.cased
  - source: {database}.exact
  - source: {database}.mixed
  - source: {database}.hashed
  - source: {database}.grouped
"""


@pytest.fixture(scope="module")
def replicated(mariadb, tmp_path_factory):
    """One copy for the module: each test puts back what it tampers with."""
    tmp_path = tmp_path_factory.mktemp("quantile_keys")
    database = "verify_quantile_keys"
    root = mariadb.root_connection()
    with root.cursor() as cursor:
        recreate_database(cursor, database, charset="utf8mb4")
        cursor.execute("CREATE TABLE accounts (id CHAR(36) PRIMARY KEY, name VARCHAR(40), "
                       "balance DECIMAL(12,2))")
        cursor.execute("INSERT INTO accounts SELECT UUID(), CONCAT('name ', seq), seq / 100 "
                       f"FROM seq_1_to_{UUID_ROWS}")
        generated = f"SELECT CONCAT('k', LPAD(seq, 4, '0')), seq FROM seq_1_to_{GENERATED}"
        # The server's default collation: 'a' = 'A' = 'a ', so only one of them is a key;
        # 'B' and 'D' sort among the lower-case keys there, before them all in bytes.
        cursor.execute("CREATE TABLE cased (k VARCHAR(20) PRIMARY KEY, v INT)")
        cursor.execute("INSERT INTO cased VALUES ('a ', 1), ('B', 2), ('c', 3), ('D', 4), "
                       "('l', 5), ('M', 6)")
        cursor.execute(f"INSERT INTO cased {generated}")
        # Case mixed through the whole table: k0001 < K0002 < k0003 in MariaDB, every 'K'
        # before every 'k' in bytes.
        cursor.execute("CREATE TABLE mixed (k VARCHAR(20) PRIMARY KEY, v INT)")
        cursor.execute("INSERT INTO mixed SELECT CONCAT(IF(seq % 2, 'k', 'K'), "
                       f"LPAD(seq, 4, '0')), seq FROM seq_1_to_{GENERATED}")
        # Binary and NO PAD: 'a', 'A' and 'a ' are three keys, in byte order on both sides.
        cursor.execute("CREATE TABLE exact (k VARCHAR(20) COLLATE utf8mb4_nopad_bin "
                       "PRIMARY KEY, v INT)")
        cursor.execute("INSERT INTO exact VALUES ('a', 1), ('A', 2), ('a ', 3), ('b', 4)")
        cursor.execute(f"INSERT INTO exact {generated}")
        # A binary key (a UUID's 16 bytes): bytes on both sides.
        cursor.execute("CREATE TABLE hashed (id BINARY(16) PRIMARY KEY, v INT)")
        cursor.execute(f"INSERT INTO hashed SELECT UNHEX(MD5(seq)), seq FROM "
                       f"seq_1_to_{GENERATED}")
        # A composite key led by a string: 100 rows per leading value.
        cursor.execute("CREATE TABLE grouped (grp VARCHAR(10), n INT, v INT, "
                       "PRIMARY KEY (grp, n))")
        cursor.execute("INSERT INTO grouped SELECT CONCAT('g', seq DIV 100), seq % 100, seq "
                       f"FROM seq_0_to_{GENERATED - 1}")
        # Its cuts pass each leading value whole, so the fetch budget rests on InnoDB's
        # estimate of the rows: made now, not whenever the server gets to it.
        cursor.execute("ANALYZE TABLE grouped")
        cursor.fetchall()
    pipeline = load(pipeline_file(tmp_path, database, name="quantiles", tables=TABLES),
                    mariadb)
    sink = open_target(pipeline)
    replicate_by_snapshot(pipeline, sink)
    yield pipeline, sink, root
    sink.close()
    with root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    root.close()


def _verify(pipeline, sink, table, **walk):
    (report,) = verify_pipeline(pipeline, sink=sink, tables=[f"verify_quantile_keys.{table}"],
                                walk=walk or None).tables
    return report


def _found(report):
    return [(d.kind, d.key["k"] if "k" in d.key else d.key["id"],
             [c.target_column for c in d.columns]) for d in report.differences]


@pytest.mark.parametrize("table", ["accounts", "cased", "exact", "hashed"])
def test_equal_tables_are_checked_by_checksum(replicated, table):
    pipeline, sink, _ = replicated
    report = _verify(pipeline, sink, table, **({} if table == "accounts" else SMALL))
    assert report.equal, _found(report)
    assert (report.method, report.fallback) == ("checksum", [])
    assert report.source_rows == report.target_rows > 0
    if table != "cased":
        # Both sides order these keys alike (lower-case hex; a binary NO PAD collation):
        # every bucket agrees and no row is fetched.
        assert report.fetched_rows == 0
    else:
        # 'B', 'D' and 'M' sort elsewhere in each: the buckets around them differ and are
        # fetched, yet no key is named.
        assert 0 < report.fetched_rows < report.source_rows


def test_keys_mixed_in_case_throughout_fall_back_to_fetching_and_say_why(replicated):
    pipeline, sink, _ = replicated
    connection = sink.connection
    connection.execute('UPDATE main."MIXED" SET "V" = -1 WHERE "K" = \'K0200\'')
    try:
        report = _verify(pipeline, sink, "mixed", **SMALL)
    finally:
        connection.execute('UPDATE main."MIXED" SET "V" = 200 WHERE "K" = \'K0200\'')
    assert report.method == "fetch"
    (reason,) = report.fallback
    assert "ordered differently by MySQL's collation and by the target's bytes" in reason
    assert _found(report) == [("different", "K0200", ["V"])]
    assert report.source_rows == report.target_rows == GENERATED
    # The walk stopped once it had fetched what a fetch of the table does; the fetch then
    # read each row once a side.
    assert report.fetched_rows <= 2 * GENERATED + 2 * GENERATED + 4 * 64


def test_a_uuid_key_names_one_changed_one_missing_and_one_extra_row(replicated):
    pipeline, sink, _ = replicated
    connection = sink.connection
    keys = [k for (k,) in connection.execute(
        'SELECT "ID" FROM main."ACCOUNTS" ORDER BY "ID" LIMIT 3 OFFSET 7000').fetchall()]
    changed, missing = keys[0], keys[2]
    extra = "ffffffff-0000-0000-0000-000000000000"
    connection.execute('CREATE OR REPLACE TEMP TABLE saved AS SELECT * FROM main."ACCOUNTS" '
                       'WHERE "ID" IN (?, ?)', [changed, missing])
    connection.execute('UPDATE main."ACCOUNTS" SET "NAME" = \'tampered\' WHERE "ID" = ?',
                       [changed])
    connection.execute('DELETE FROM main."ACCOUNTS" WHERE "ID" = ?', [missing])
    connection.execute('INSERT INTO main."ACCOUNTS" SELECT * REPLACE (? AS "ID") FROM saved '
                       'WHERE "ID" = ?', [extra, changed])
    try:
        report = _verify(pipeline, sink, "accounts", leaf_rows=64)
    finally:
        connection.execute('DELETE FROM main."ACCOUNTS" WHERE "ID" IN (?, ?, ?)',
                           [changed, missing, extra])
        connection.execute('INSERT INTO main."ACCOUNTS" SELECT * FROM saved')
    assert report.method == "checksum"
    assert sorted(_found(report)) == sorted([
        ("different", changed, ["NAME"]), ("missing", missing, []), ("extra", extra, [])])
    assert (report.source_rows, report.target_rows) == (UUID_ROWS, UUID_ROWS)
    # Three leaves of at most 64 rows a side: far below the table (it fetched 20,000 x 2).
    assert 0 < report.fetched_rows < 3 * 2 * 64 + 10


def test_a_binary_key_names_a_changed_row(replicated):
    pipeline, sink, _ = replicated
    connection = sink.connection
    (key,) = connection.execute('SELECT "ID" FROM main."HASHED" WHERE "V" = 123').fetchone()
    connection.execute('UPDATE main."HASHED" SET "V" = -1 WHERE "ID" = ?', [key])
    try:
        report = _verify(pipeline, sink, "hashed", **SMALL)
    finally:
        connection.execute('UPDATE main."HASHED" SET "V" = 123 WHERE "ID" = ?', [key])
    assert report.method == "checksum"
    assert _found(report) == [("different", key, ["V"])]
    assert 0 < report.fetched_rows <= 2 * 8


@pytest.mark.parametrize("where", [None, "n < 50"])
def test_a_composite_key_led_by_a_string_names_the_whole_key(replicated, where):
    pipeline, sink, _ = replicated
    connection = sink.connection
    connection.execute('UPDATE main."GROUPED" SET "V" = -1 WHERE "GRP" = \'g2\' AND "N" = 42')
    try:
        (report,) = verify_pipeline(pipeline, sink=sink, walk=SMALL, where=where,
                                    tables=["verify_quantile_keys.grouped"]).tables
    finally:
        connection.execute('UPDATE main."GROUPED" SET "V" = 242 WHERE "GRP" = \'g2\' '
                           'AND "N" = 42')
    assert report.method == "checksum"
    assert [(d.kind, d.key) for d in report.differences] == [
        ("different", {"grp": "g2", "n": 42})]
    assert report.source_rows == (200 if where else GENERATED)
    # A bucket of one leading value cannot be cut again: its rows (100 a side, 50 in the
    # slice) are fetched.
    assert 0 < report.fetched_rows <= 2 * (50 if where else 100)


CASES = {
    # MariaDB's default collation: the extra 'A' equals the key 'a ' there (a lookup of 'A'
    # finds 'a '), and is a key of its own in DuckDB.
    "cased": (("a ", "B"), "A", [("different", "a "), ("missing", "B"), ("extra", "A")]),
    # Binary NO PAD: 'a', 'A', 'a ' and 'a  ' are four keys on both sides.
    "exact": (("A", "a "), "a  ", [("different", "A"), ("missing", "a "), ("extra", "a  ")]),
}


@pytest.mark.parametrize("table", CASES)
def test_keys_apart_only_in_case_or_trailing_space_are_named_exactly(replicated, table):
    pipeline, sink, _ = replicated
    (changed, missing), extra, expected = CASES[table]
    relation = f'main."{table.upper()}"'
    connection = sink.connection
    connection.execute(f'CREATE OR REPLACE TEMP TABLE saved AS SELECT * FROM {relation} '
                       'WHERE "K" IN (?, ?)', [changed, missing])
    connection.execute(f'UPDATE {relation} SET "V" = -1 WHERE "K" = ?', [changed])
    connection.execute(f'DELETE FROM {relation} WHERE "K" = ?', [missing])
    connection.execute(f'INSERT INTO {relation} SELECT * REPLACE (? AS "K", 7 AS "V") '
                       'FROM saved WHERE "K" = ?', [extra, changed])
    try:
        report = _verify(pipeline, sink, table, **SMALL)
    finally:
        connection.execute(f'DELETE FROM {relation} WHERE "K" IN (?, ?, ?)',
                           [changed, missing, extra])
        connection.execute(f'INSERT INTO {relation} SELECT * FROM saved')
    assert report.method == "checksum"
    assert sorted((kind, key) for kind, key, _ in _found(report)) == sorted(expected)
    assert [c for kind, _, c in _found(report) if kind == "different"] == [["V"]]
    assert report.fetched_rows < report.source_rows
