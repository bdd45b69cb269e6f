"""``stage_expressions``: filters and computed columns rendered as Snowflake SQL over the raw
table where Snowflake gives Spark's value exactly; everything else is refused with the
reason (R311). Values against Spark: tests/integration/test_transforms_snowflake_differential.py;
rows against the driver's staging: tests/integration/test_snowflake_external_stage.py."""

from __future__ import annotations

import dataclasses

import pytest

from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.pipeline import (
    ColumnMapping,
    MySQLSource,
    Pipeline,
    SnowflakeTarget,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan
from replicator.plan.statements.stage_expressions import filter_sql, refusals

COLUMNS = [("id", "bigint(20) unsigned"), ("n", "int(11)"), ("name", "varchar(20)"),
           ("amount", "decimal(38,10)"), ("ratio", "double"), ("active", "tinyint(1)"),
           ("secret", "varchar(20)"), ("code", "char(3)"), ("at", "timestamp")]
CATALOG = Catalog(tables=(SourceTable(database="shop", table="t", primary_key=("id",),
                                      columns=tuple(
    SourceColumn(name=c, mysql_type=MySQLType.parse(t), nullable=True, ordinal=i)
    for i, (c, t) in enumerate(COLUMNS, start=1))),))


def _table(text: str | None, *computed: ColumnMapping):
    table = TablePipeline(source_database="shop", source_table="t", filter=text,
                          columns=(ColumnMapping("secret", mask="md5"), *computed))
    pipeline = Pipeline(name="x", source=MySQLSource(), tables=(table,),
                        target=TargetConfig(warehouse=SnowflakeTarget(
                            database="D", schema="RAW", account="a")))
    return build_plan(pipeline, CATALOG).tables[0]


def test_the_filter_language_renders_with_literals_in_snowflake_escapes():
    sql = filter_sql(_table("(n > -3 AND name IN ('it\\'s\\\\', 'b')) OR ratio / n > 1.5 "
                            "OR name LIKE 'a%' OR active"))
    assert sql is not None
    assert "'it''s\\\\'" in sql  # a quote doubled, the backslash doubled
    assert "WHEN CAST(CAST(\"n\" AS NUMBER(10,0)) AS FLOAT) = 0 THEN CAST(CAST(('[DIVIDE_BY_ZERO]" in sql
    assert refusals(_table("n + 1 > 2 AND secret = 'x'")) == []


@pytest.mark.parametrize(("text", "reason"), [
    ("upper(name) = 'X'", "upper() has no exact Snowflake SQL form"),
    ("amount / 3 > 1", "DECIMAL division has no exact Snowflake SQL form"),
    ("code = 'abc'", "column code (char as string) is not read as Spark's string"),
    ("at > '2024-01-01'", "column at (timestamp as timestamp_tz(0)) is not read as Spark's timestamp"),
    ("cast(name AS INT) = 1", "CAST of string to int in Snowflake SQL"),
])
def test_what_snowflake_would_compute_otherwise_is_refused_with_the_reason(text, reason):
    assert filter_sql(_table(text)) is None
    assert refusals(_table(text)) == [(f"the filter: {reason}", "filter")]


def test_a_computed_column_is_refused_where_its_declared_type_would_change_the_value():
    table = _table(None, ColumnMapping("total", expression="n * 2.5", target_type="NUMBER(20,1)"),
                   ColumnMapping("narrow", expression="n * 2", target_type="NUMBER(5,0)"),
                   ColumnMapping("label", expression="concat(name, '!')", target_type="VARCHAR"))
    assert refusals(table) == [
        ("computed column NARROW: its int value into type integer(5,0)", "columns")]


def test_plan_prints_the_snowflake_sql_the_staging_insert_runs():
    from replicator.plan.dialects import SNOWFLAKE
    from replicator.plan.render import render_sql

    table = _table("name LIKE 'a%'", ColumnMapping("twice", expression="n * 2",
                                                  target_type="NUMBER(12,0)"))
    printed = render_sql(table, dataclasses.replace(SNOWFLAKE, external_stage="DB.RAW.LANDING"))
    assert "--   filter in Snowflake -> (\"name\" LIKE 'a%' ESCAPE '\\\\')" in printed
    assert "--   TWICE in Snowflake -> CAST(CASE WHEN" in printed
