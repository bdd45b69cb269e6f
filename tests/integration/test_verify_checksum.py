"""verify by range checksums computed inside MariaDB and DuckDB (``verify.checksum``,
``verify.ranges``): the same canonical text of every awkward value on both sides, any single
changed value found exactly, agreeing ranges never fetched, the fallback named."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal

import pytest

from replicator.context import Context
from replicator.demo.workload import create_schema, seed
from replicator.verify import verify_pipeline
from replicator.verify.compare import TableVerifier
from tests.integration.verify_checksum_support import checksum_pipeline, create_types
from tests.integration.verify_support import load, open_target, replicate_by_snapshot

pytestmark = [pytest.mark.mysql]

CHECKSUMMED = ("orders", "awkward", "types", "docs")


@pytest.fixture(scope="module")
def replicated(mariadb, tmp_path_factory):
    """One copy for the module: each test puts back what it tampers with."""
    tmp_path = tmp_path_factory.mktemp("checksum")
    database = "verify_checksum_module"
    root = mariadb.root_connection()
    with root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    create_schema(root, database)
    seed(root, database, customers=20, orders=150, awkward=70)
    create_types(root, database)
    pipeline = load(checksum_pipeline(tmp_path, database), mariadb)
    sink = open_target(pipeline)
    replicate_by_snapshot(pipeline, sink)
    yield pipeline, sink, root
    sink.close()
    with root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    root.close()


def _verifier(pipeline, sink, name):
    context = Context(pipeline)
    table = context.plan.table(name)
    source_table = context.catalog.table(table.source_database, table.source_table)
    return table, TableVerifier(pipeline, source_table, table, sink.connection,
                                end_transaction=False, target_kind="duckdb")


@pytest.mark.parametrize("name", CHECKSUMMED)
def test_every_row_has_the_same_canonical_text_on_both_sides(replicated, name):
    pipeline, sink, _ = replicated
    table, verifier = _verifier(pipeline, sink, name)
    try:
        plan = verifier.checksum_plan()
        assert not isinstance(plan, list), plan
        source = dict(verifier.source.query(
            f"SELECT `{plan.key_source}`, {plan.source_text} FROM {verifier.source.relation}",
            []))
        target = dict(verifier.target.query(
            f'SELECT "{plan.key_target}", {plan.target_text} FROM main."{table.target_table}"',
            []))
    finally:
        verifier.close()
    source = {int(k): (v.decode() if isinstance(v, bytes) else v) for k, v in source.items()}
    target = {int(k): v for k, v in target.items()}
    assert sorted(source) == sorted(target)
    differing = {k: (source[k], target[k]) for k in source if source[k] != target[k]}
    assert not differing, differing


def test_equal_tables_cost_one_checksum_each_and_no_row(replicated):
    pipeline, sink, _ = replicated
    report = verify_pipeline(pipeline, sink=sink)
    assert report.equal, "\n".join(report.describe())
    for name in CHECKSUMMED:
        table = report.table(name)
        assert (table.method, table.checksum_queries, table.fetched_rows) == ("checksum", 1, 0)
        assert table.source_rows == table.target_rows > 0
    customers = report.table("customers")
    assert customers.method == "fetch"
    assert any("EMAIL is masked" in reason for reason in customers.fallback)
    assert customers.fetched_rows == 2 * customers.source_rows == 40


def _changed(value, mysql_type=""):
    """Another value of the same type (never the one given): a DOUBLE one bit apart, a
    FLOAT one apart in its 6th digit (what MySQL prints of it), other JSON."""
    if value is None:
        return None  # the caller picks a non-NULL row
    if mysql_type == "json":
        return json.dumps([json.loads(value)])
    if mysql_type == "float":
        return value * (1 + 2e-5) if value else 1e-30
    if isinstance(value, float):
        return math.nextafter(value, math.inf)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value - 1 if value > 0 else value + 1
    if isinstance(value, Decimal):
        return value - 1 if value > 0 else value + 1
    if isinstance(value, str):
        return value + "x" if len(value) < 4 else value[:-1]
    if isinstance(value, bytes):
        return value + b"\x00" if len(value) < 4 else value[:-1]
    if isinstance(value, dt.datetime):
        return value + dt.timedelta(microseconds=1 if value.year < 9999 else -1)
    if isinstance(value, dt.date):
        return value + dt.timedelta(days=1 if value.year < 9999 else -1)
    raise AssertionError(f"no change for {value!r}")


class Tampered:
    """One target row changed, put back on exit."""

    def __init__(self, connection, relation, key, key_value):
        self.connection, self.relation, self.key, self.key_value = (connection, relation, key,
                                                                    key_value)

    def __enter__(self):
        self.connection.execute(f"CREATE OR REPLACE TEMP TABLE saved AS SELECT * FROM "
                                f'{self.relation} WHERE "{self.key}" = ?', [self.key_value])
        return self

    def set(self, column, value):
        self.connection.execute(f'UPDATE {self.relation} SET "{column}" = ? WHERE "{self.key}" '
                                "= ?", [value, self.key_value])

    def __exit__(self, *_):
        self.connection.execute(f'DELETE FROM {self.relation} WHERE "{self.key}" = ?',
                                [self.key_value])
        self.connection.execute(f"INSERT INTO {self.relation} SELECT * FROM saved")


def _single_changes(pipeline, sink, name):
    """(key, column, new value) per column: a changed value, and NULL where it was not."""
    table = Context(pipeline).plan.table(name)
    key = table.key_columns[0].target_column
    columns = [c for c in table.data_columns if not c.is_key]
    names = ", ".join(f'"{c.target_column}"' for c in columns)
    rows = sink.connection.execute(f'SELECT "{key}", {names} FROM main."{table.target_table}" '
                                   f'ORDER BY "{key}"').fetchall()
    changes = []
    for at, column in enumerate(columns, start=1):
        present = [row for row in rows if row[at] is not None]
        first = present[len(present) // 2]
        changes.append((first[0], column.target_column,
                        _changed(first[at], column.mysql_type.name)))
        if column.nullable:
            changes.append((present[0][0], column.target_column, None))
    return table, key, changes


@pytest.mark.parametrize("name", CHECKSUMMED)
def test_any_single_changed_value_is_found_exactly(replicated, name):
    pipeline, sink, _ = replicated
    table, key, changes = _single_changes(pipeline, sink, name)
    relation = f'main."{table.target_table}"'
    assert len(changes) >= 2
    for key_value, column, value in changes:
        with Tampered(sink.connection, relation, key, key_value) as row:
            row.set(column, value)
            report = verify_pipeline(pipeline, sink=sink, tables=[name])
        (found,) = report.tables
        assert found.method == "checksum"
        assert [(d.kind, d.key["id"], tuple(c.target_column for c in d.columns))
                for d in found.differences] == [("different", key_value, (column,))], (
            column, value, [d.describe() for d in found.differences])
        assert found.fetched_rows <= 2 * found.source_rows  # the differing bucket only
    assert verify_pipeline(pipeline, sink=sink, tables=[name]).equal


def test_null_empty_none_false_and_a_moved_separator_are_all_different(replicated):
    pipeline, sink, _ = replicated
    relation = 'main."TYPES"'
    cases = [(-5, {"PIPE": "a", "PIPE2": "|b"}),  # 'a|','b' -> 'a','|b': one joined text
             (8, {"PIPE": None}),  # '' -> NULL
             (2_000_000_000, {"PIPE": ""}),  # 'None' -> ''
             (7, {"LATIN": None}),  # 'None' -> NULL
             (8, {"VB": b""}),  # 'N' -> empty bytes
             (0, {"PADDED": None}),  # '' -> NULL
             (0, {"BOOL_WIDE": None})]  # FALSE -> NULL (no condition's "else" may hide it)
    for key_value, values in cases:
        with Tampered(sink.connection, relation, "ID", key_value) as row:
            for column, value in values.items():
                row.set(column, value)
            (found,) = verify_pipeline(pipeline, sink=sink, tables=["types"]).tables
        assert [(d.key["id"], sorted(c.target_column for c in d.columns))
                for d in found.differences] == [(key_value, sorted(values))]


def test_missing_and_extra_rows_are_named(replicated):
    pipeline, sink, _ = replicated
    connection = sink.connection
    connection.execute('CREATE OR REPLACE TEMP TABLE saved AS SELECT * FROM main."ORDERS" '
                       'WHERE "ID" = 17')
    connection.execute('DELETE FROM main."ORDERS" WHERE "ID" = 17')
    connection.execute('INSERT INTO main."ORDERS" SELECT * REPLACE (100017 AS "ID") FROM saved')
    connection.execute('INSERT INTO main."ORDERS" SELECT * REPLACE (-3 AS "ID") FROM saved')
    try:
        (orders,) = verify_pipeline(pipeline, sink=sink, tables=["orders"]).tables
    finally:
        connection.execute('DELETE FROM main."ORDERS" WHERE "ID" IN (100017, -3)')
        connection.execute('INSERT INTO main."ORDERS" SELECT * FROM saved')
    assert [(d.kind, d.key["id"]) for d in orders.differences] == [
        ("extra", -3), ("missing", 17), ("extra", 100017)]
    assert (orders.source_rows, orders.target_rows) == (150, 151)


def test_doubles_floats_and_json_compare_at_what_replication_keeps(replicated):
    """A DOUBLE one bit apart differs; a FLOAT agreeing to the 6 digits MySQL prints is the
    value replicated; JSON spelled apart is fetched and found equal, JSON changed named."""
    pipeline, sink, _ = replicated
    cases = [("TYPES", -5, {"DBL": 1e-323}, ["DBL"]),  # 2^-1074 -> 2^-1073
             ("TYPES", 2_000_000_000, {"DBL": 0.0}, []),  # -0.0 = 0.0, as SQL says
             ("TYPES", 2_000_000_000, {"FLT": 0.10000001}, []),  # 0.1 to 6 digits
             ("TYPES", 8, {"FLT": 1234570.0}, ["FLT"]),  # 1.23456e6 -> 1.23457e6
             ("DOCS", 6, {"DOC": '{"b": 1, "a": 2}'}, []),  # '{"a":2,"b":1}' respelled
             ("DOCS", 1, {"DOC": None}, ["DOC"]),  # JSON null -> SQL NULL
             ("DOCS", 8, {"DOC": '{"n": 1.5, "m": 10}'}, ["DOC"])]
    for relation, key_value, values, differing in cases:
        with Tampered(sink.connection, f'main."{relation}"', "ID", key_value) as row:
            for column, value in values.items():
                row.set(column, value)
            (found,) = verify_pipeline(pipeline, sink=sink, tables=[relation.lower()]).tables
        assert found.method == "checksum"
        assert [(d.key["id"], sorted(c.target_column for c in d.columns))
                for d in found.differences] == ([(key_value, differing)] if differing else []), (
            relation, values, [d.describe() for d in found.differences])
        spelled_apart = relation == "DOCS" and not differing
        assert (found.fetched_rows > 0) == bool(differing or spelled_apart), found.fetched_rows
