"""The MySQL -> Snowflake / DuckDB type mapping (the table in docs/type-mapping.md)."""

from __future__ import annotations

import pytest

from replicator.errors import PlanError
from replicator.model.catalog import MySQLType
from replicator.plan import DUCKDB, SNOWFLAKE
from replicator.plan.types import map_mysql_type, parse_target_type

# MySQL column type -> (Snowflake type, DuckDB type)
MAPPING = [
    ("tinyint", "NUMBER(3,0)", "TINYINT"),
    ("tinyint unsigned", "NUMBER(3,0)", "SMALLINT"),
    ("smallint", "NUMBER(5,0)", "SMALLINT"),
    ("smallint unsigned", "NUMBER(5,0)", "INTEGER"),
    ("mediumint", "NUMBER(7,0)", "INTEGER"),
    ("mediumint unsigned", "NUMBER(8,0)", "INTEGER"),
    ("int(11)", "NUMBER(10,0)", "INTEGER"),
    ("int unsigned", "NUMBER(10,0)", "BIGINT"),
    ("bigint(20)", "NUMBER(19,0)", "BIGINT"),
    ("bigint(20) unsigned", "NUMBER(20,0)", "DECIMAL(20,0)"),
    ("decimal(38,10)", "NUMBER(38,10)", "DECIMAL(38,10)"),
    ("decimal(10,2) unsigned", "NUMBER(10,2)", "DECIMAL(10,2)"),
    ("decimal(65,30)", "VARCHAR", "VARCHAR"),
    ("float", "FLOAT", "DOUBLE"),
    ("double", "FLOAT", "DOUBLE"),
    ("char(3)", "VARCHAR", "VARCHAR"),
    ("varchar(255)", "VARCHAR", "VARCHAR"),
    ("longtext", "VARCHAR", "VARCHAR"),
    ("enum('a','b')", "VARCHAR", "VARCHAR"),
    ("set('a','b')", "VARCHAR", "VARCHAR"),
    ("date", "DATE", "DATE"),
    ("datetime", "TIMESTAMP_NTZ(0)", "TIMESTAMP"),
    ("datetime(6)", "TIMESTAMP_NTZ(6)", "TIMESTAMP"),
    ("timestamp(3)", "TIMESTAMP_TZ(3)", "TIMESTAMPTZ"),
    ("time(6)", "VARCHAR", "VARCHAR"),
    ("year", "NUMBER(4,0)", "SMALLINT"),
    ("bit(1)", "BOOLEAN", "BOOLEAN"),
    ("bit(10)", "BINARY", "BLOB"),
    ("json", "VARIANT", "JSON"),
    ("binary(16)", "BINARY", "BLOB"),
    ("longblob", "BINARY", "BLOB"),
    ("tinyint(1)", "BOOLEAN", "BOOLEAN"),
]


@pytest.mark.parametrize(("mysql", "snowflake", "duckdb"), MAPPING)
def test_mapping(mysql, snowflake, duckdb):
    target = map_mysql_type(MySQLType.parse(mysql))
    assert SNOWFLAKE.type_name(target) == snowflake
    assert DUCKDB.type_name(target) == duckdb


def test_tinyint1_integer_policy():
    target = map_mysql_type(MySQLType.parse("tinyint(1)"), tinyint1="integer")
    assert (SNOWFLAKE.type_name(target), DUCKDB.type_name(target)) == ("NUMBER(3,0)", "TINYINT")


def test_json_is_staged_as_text():
    target = map_mysql_type(MySQLType.parse("json"))
    assert SNOWFLAKE.staging_type_name(target) == DUCKDB.staging_type_name(target) == "VARCHAR"


@pytest.mark.parametrize(
    ("declared", "snowflake", "duckdb"),
    [
        ("VARCHAR", "VARCHAR", "VARCHAR"),
        ("varchar(20)", "VARCHAR(20)", "VARCHAR"),
        ("NUMBER(10,2)", "NUMBER(10,2)", "DECIMAL(10,2)"),
        ("NUMBER(20,0)", "NUMBER(20,0)", "DECIMAL(20,0)"),
        ("NUMBER(9,0)", "NUMBER(9,0)", "BIGINT"),
        ("INTEGER", "NUMBER(38,0)", "BIGINT"),
        ("double precision", "FLOAT", "DOUBLE"),
        ("TIMESTAMP_TZ(3)", "TIMESTAMP_TZ(3)", "TIMESTAMPTZ"),
        ("timestamp_ntz", "TIMESTAMP_NTZ(6)", "TIMESTAMP"),
        ("VARIANT", "VARIANT", "JSON"),
        ("BINARY", "BINARY", "BLOB"),
        ("boolean", "BOOLEAN", "BOOLEAN"),
    ],
)
def test_declared_target_types(declared, snowflake, duckdb):
    target = parse_target_type(declared)
    assert (SNOWFLAKE.type_name(target), DUCKDB.type_name(target)) == (snowflake, duckdb)


@pytest.mark.parametrize("declared", ["GEOGRAPHY", "NUMBER(39,0)", "NUMBER(5,6)", "VARCHAR(x)"])
def test_unknown_declared_types_are_plan_errors_with_a_hint(declared):
    with pytest.raises(PlanError) as caught:
        parse_target_type(declared)
    assert caught.value.hint


def test_unmappable_mysql_type_says_what_to_do():
    with pytest.raises(PlanError, match="vector") as caught:
        map_mysql_type(MySQLType.parse("vector"))
    assert "exclude" in caught.value.hint


def test_a_target_column_created_by_the_plan_never_lags_it_as_duckdb_describes_it():
    """Start-up re-creates a column whose target type cannot hold the plan's (``lags_plan``):
    no type the plan creates may ever look like that, and a column of another kind always
    does."""
    import duckdb

    from replicator.plan import types as t
    from replicator.plan.dialects import DUCKDB, SNOWFLAKE
    from replicator.sink.duckdb import DuckDBSink

    planned = [*t.INTEGER_MAPPING.values(), t.TargetType("decimal", 16, 2), t.FLOAT, t.STRING,
               t.TargetType("string", length=20), t.TargetType("time_text"), t.BOOLEAN, t.DATE,
               t.TargetType("timestamp", fsp=6), t.TargetType("timestamp", fsp=0),
               t.TargetType("timestamp_tz", fsp=6), t.BINARY, t.JSON]
    with duckdb.connect() as connection:
        connection.execute("CREATE TABLE x (" + ", ".join(
            f"c{i} {DUCKDB.type_name(kind)}" for i, kind in enumerate(planned)) + ")")
        described = [DuckDBSink.described_type(column) for column
                     in connection.execute("SELECT * FROM x LIMIT 0").description]
    for kind, have in zip(planned, described, strict=True):
        assert not t.lags_plan(have, kind, DUCKDB), (kind, have)
    int_ = t.INTEGER_MAPPING[("int", False)]
    assert not t.lags_plan("SMALLINT", int_, DUCKDB)  # widened in place instead
    assert t.lags_plan("VARCHAR", int_, DUCKDB)
    assert t.lags_plan("INTEGER", t.STRING, DUCKDB)
    assert t.lags_plan("DECIMAL(20,0)", t.INTEGER_MAPPING[("bigint", False)], DUCKDB)
    assert t.lags_plan("TIMESTAMP", t.TargetType("timestamp_tz", fsp=6), DUCKDB)
    # DuckDB describes arguments exactly: a DECIMAL's scale changed is found; its precision
    # up at the same scale is widened in place instead.
    assert t.lags_plan("DECIMAL(12,2)", t.TargetType("decimal", 14, 4), DUCKDB)
    assert not t.lags_plan("DECIMAL(12,2)", t.TargetType("decimal", 14, 2), DUCKDB)
    assert t.lags_plan("BIGINT", int_, DUCKDB)  # narrowed in MySQL
    # Snowflake's driver describes only numbers: a number where the plan wants text is found.
    assert t.lags_plan("NUMBER(10,0)", t.STRING, SNOWFLAKE)
    assert not t.lags_plan("NUMBER(38,0)", int_, SNOWFLAKE)
    # ... and numbers exactly: a scale changed is found; a precision up is widened in place,
    # a larger one holds the values.
    assert t.lags_plan("NUMBER(12,2)", t.TargetType("decimal", 14, 4), SNOWFLAKE)
    assert t.lags_plan("NUMBER(12,2)", int_, SNOWFLAKE)
    assert not t.lags_plan("NUMBER(12,2)", t.TargetType("decimal", 16, 2), SNOWFLAKE)
    assert not t.lags_plan("NUMBER(20,2)", t.TargetType("decimal", 16, 2), SNOWFLAKE)
    # A column it leaves undescribed is not a number: it lags a planned number only.
    assert t.lags_plan(None, int_, SNOWFLAKE)
    assert t.lags_plan(None, t.TargetType("decimal", 14, 4), SNOWFLAKE)
    assert not t.lags_plan(None, t.STRING, SNOWFLAKE)
    assert not t.lags_plan(None, t.TargetType("timestamp", fsp=6), SNOWFLAKE)
    # What the staging table is compared by (``describes``): exactly the type, as far as told.
    assert t.describes("NUMBER(10,0)", int_, SNOWFLAKE)
    assert not t.describes("NUMBER(19,0)", int_, SNOWFLAKE)
    assert not t.describes(None, int_, SNOWFLAKE)
    assert t.describes(None, t.STRING, SNOWFLAKE)
    assert not t.describes("NUMBER(10,0)", t.STRING, SNOWFLAKE)
    assert t.describes("DECIMAL(14, 4)", t.TargetType("decimal", 14, 4), DUCKDB)
    assert not t.describes("DECIMAL(12,2)", t.TargetType("decimal", 14, 4), DUCKDB)
