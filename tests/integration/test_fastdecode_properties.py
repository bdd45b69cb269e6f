"""Property: for random table definitions and random rows, the fast path yields exactly the
events ``read_changes`` yields (values, types, positions), and the columnar reader's compiled
decoder exactly the Arrow tables of its Python reference. Values travel as bind parameters."""

from __future__ import annotations

import itertools
import string
from decimal import Context, Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.source.binlog import read_changes
from replicator.source.fast.columnar import KeyColumns, TableChunk, read_change_batches
from replicator.source.fast.reader import read_changes_fast
from replicator.source.positions import current_position
from tests.fixtures.decoders import DECODERS, using
from tests.integration.test_fastdecode_differential import strict

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(7501)
_tables = itertools.count(1)

_INTS = {
    "TINYINT": (-(2**7), 2**7 - 1, 2**8 - 1), "SMALLINT": (-(2**15), 2**15 - 1, 2**16 - 1),
    "MEDIUMINT": (-(2**23), 2**23 - 1, 2**24 - 1), "INT": (-(2**31), 2**31 - 1, 2**32 - 1),
    "BIGINT": (-(2**63), 2**63 - 1, 2**64 - 1),
}
_LATIN1 = string.ascii_letters + string.digits + " '\"\\%_éàüßÿ"


@st.composite
def column(draw):
    """(DDL type, strategy of a value to bind)."""
    kind = draw(st.sampled_from([
        "int", "decimal", "float", "double", "datetime", "timestamp", "time", "date", "year",
        "varchar", "latin1", "char", "binary", "varbinary", "blob", "text", "enum", "set",
        "bit", "json",
    ]))
    if kind == "int":
        name = draw(st.sampled_from(sorted(_INTS)))
        low, high, uhigh = _INTS[name]
        if draw(st.booleans()):
            return f"{name} UNSIGNED", st.integers(0, uhigh)
        return name, st.integers(low, high)
    if kind == "decimal":
        precision = draw(st.integers(1, 65))
        scale = draw(st.integers(0, min(precision, 30)))
        limit = 10**precision - 1
        return f"DECIMAL({precision},{scale})", st.integers(-limit, limit).map(
            lambda n, s=scale: f"{Decimal(n).scaleb(-s, Context(prec=100)):f}")
    if kind == "float":
        return "FLOAT", st.floats(-1e30, 1e30, allow_nan=False, width=64).filter(lambda f: f == 0 or abs(f) > 1e-37)
    if kind == "double":
        return "DOUBLE", st.floats(allow_nan=False, allow_infinity=False)
    if kind in ("datetime", "timestamp", "time"):
        fsp = draw(st.integers(0, 6))
        if kind == "time":
            return f"TIME({fsp})", st.integers(-838 * 3600 - 3599, 838 * 3600 + 3599).flatmap(
                lambda s: st.integers(0, 999999 if abs(s) < 838 * 3600 + 3599 else 0).map(
                    lambda us, s=s: f"{'-' if s < 0 else ''}{abs(s) // 3600}:"
                    f"{abs(s) // 60 % 60:02d}:{abs(s) % 60:02d}.{us:06d}"))
        low, high = ("1970-01-02", "2038-01-18") if kind == "timestamp" else ("1000-01-01",
                                                                            "9999-12-31")
        import datetime as dt

        values = st.datetimes(dt.datetime.fromisoformat(low), dt.datetime.fromisoformat(high))
        null = " NULL" if kind == "timestamp" else ""
        return f"{kind.upper()}({fsp}){null}", values.map(lambda v: v.isoformat(" "))
    if kind == "date":
        import datetime as dt

        return "DATE", st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)).map(str)
    if kind == "year":
        return "YEAR", st.sampled_from([0, 1901, 1999, 2155])
    if kind == "varchar":
        size = draw(st.sampled_from([1, 20, 255, 300]))
        return (f"VARCHAR({size}) CHARACTER SET utf8mb4",
                st.text(st.characters(blacklist_categories=("Cs",)), max_size=size))
    if kind == "latin1":
        return "VARCHAR(40) CHARACTER SET latin1", st.text(_LATIN1, max_size=40)
    if kind == "char":
        return "CHAR(8) CHARACTER SET utf8mb4", st.text(string.printable.strip() + "ü😀", max_size=8)
    if kind == "binary":
        size = draw(st.integers(1, 16))
        return f"BINARY({size})", st.binary(max_size=size)
    if kind == "varbinary":
        return "VARBINARY(300)", st.binary(max_size=300)
    if kind == "blob":
        return draw(st.sampled_from(["TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"])), st.binary(
            max_size=300)
    if kind == "text":
        return draw(st.sampled_from(["TINYTEXT", "TEXT", "LONGTEXT"])), st.text(max_size=80).filter(
            lambda t: all(not 0xD800 <= ord(c) <= 0xDFFF for c in t))
    if kind == "enum":
        members = draw(st.lists(st.text(string.ascii_lowercase, min_size=1, max_size=4),
                                min_size=1, max_size=300, unique=True))
        listed = ", ".join(f"'{m}'" for m in members)
        return f"ENUM({listed})", st.sampled_from(members)
    if kind == "set":
        members = draw(st.lists(st.text(string.ascii_lowercase, min_size=1, max_size=3),
                                min_size=1, max_size=64, unique=True))
        listed = ", ".join(f"'{m}'" for m in members)
        return f"SET({listed})", st.lists(st.sampled_from(members), unique=True).map(",".join)
    if kind == "bit":
        bits = draw(st.integers(1, 64))
        return f"BIT({bits})", st.integers(0, 2**bits - 1)
    return "JSON", st.recursive(
        st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(string.ascii_letters),
        lambda inner: st.lists(inner, max_size=3), max_leaves=5).map(
            lambda v: __import__("json").dumps(v))


@st.composite
def table_and_rows(draw):
    columns = draw(st.lists(column(), min_size=1, max_size=12))
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        rows.append([draw(st.none() | strategy) for _, strategy in columns])
    updated = [draw(st.none() | strategy) for _, strategy in columns]
    return [ddl for ddl, _ in columns], rows, updated


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(table_and_rows())
def test_random_tables_decode_identically(mariadb, mysql_source, fresh_database, example):
    ddls, rows, updated = example
    table = f"r{next(_tables)}"
    names = [f"c{i}" for i in range(len(ddls))]
    definition = ", ".join(f"{name} {ddl}" for name, ddl in zip(names, ddls, strict=True))
    placeholders = ", ".join(["%s"] * (len(names) + 1))
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, {definition})")
        start = current_position(mysql_source)
        connection.begin()
        cursor.executemany(f"INSERT INTO {table} VALUES ({placeholders})",  # one multi-row event
                           [[i, *row] for i, row in enumerate(rows)])
        connection.commit()
        assignments = ", ".join(f"{name} = %s" for name in names)
        cursor.execute(f"UPDATE {table} SET {assignments} WHERE id = 0", updated)
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [len(rows) - 1])
    tables = [f"{fresh_database}.{table}"]
    slow = list(read_changes(mysql_source, start=start, end=None, tables=tables,
                             server_id=next(_server_ids), fast=False))
    fast = list(read_changes_fast(mysql_source, start=start, end=None, tables=tables,
                                  server_id=next(_server_ids)))
    assert len(slow) >= len(rows) + 1
    assert strict(fast) == strict(slow)
    # The key is every column: the update moves it whenever a value changed, so the moved
    # row's before-image goes through both decoders too.
    keys = KeyColumns({tables[0]: ["id", *names]})
    batches = {}
    for decoder in DECODERS:
        with using(decoder):
            batches[decoder] = [
                item.data for item in read_change_batches(
                    mysql_source, start=start, end=None, tables=tables, keys=keys,
                    server_id=next(_server_ids)) if isinstance(item, TableChunk)]
    python, compiled = batches["python"], batches["compiled"]
    assert sum(t.num_rows for t in python) == len(slow)
    assert len(python) == len(compiled)
    for reference, table_ in zip(python, compiled, strict=True):
        table_.validate(full=True)
        assert table_.equals(reference), (reference.to_pylist(), table_.to_pylist())
